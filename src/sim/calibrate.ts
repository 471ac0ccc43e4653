/**
 * Calibration: the simulator's free cost parameters fitted to one server's measured runs, so
 * that it predicts that server at loads it was not measured at (issue 30). Each measured run is
 * replayed in virtual time (simulateRun, in-process) with the same requests (each one's prompt
 * and output length, in the order sent) under the same load (closed loop at its concurrency;
 * open loop at its recorded arrival times), and the parameters are fitted by robust
 * Levenberg-Marquardt on the log ratio of simulated to measured median TTFT, median TPOT and
 * output throughput. Pure: no files, no processes; the command line reads and writes (cli/).
 */
import type { RequestSpec } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import type { RequestRecord } from '../record.js';
import { VERSION } from '../version.js';
import { SESSION_ID_STRIDE } from '../workload/conversations.js';
import {
  CALIBRATION_FORMAT,
  CALIBRATION_SCHEMA,
  type CalibratedEngine,
  type CalibrationFile,
  type CalibrationSteps,
  FIT_KEYS,
  type FitCovariance,
  type FitKey,
  type FittedValue,
  fitFlag,
  type PointMetrics,
  SIM_MODEL_VERSION,
} from './calibrationFile.js';
import {
  type CalibrationWarning,
  checkCalibration,
  type FitBounds,
  type PointCacheFacts,
} from './calibrationWarnings.js';
import { EngineCluster } from './cluster.js';
import { type EngineModelOptions, requestPathS, resolveEngineConfig } from './engineModel.js';
import { efficiencyOf } from './options.js';
import {
  intervalOf,
  PREDICTION_LEVEL,
  type PredictionInterval,
  type PredictionModel,
  predictFigures,
  predictionModel,
  residualOf,
} from './prediction.js';
import { gemmFormat, REQUEST_PATH } from './roofline.js';
import { TraceBlockKeys } from './traceKeys.js';
import { simulateRun } from './virtual.js';

export const METRIC_KEYS = ['ttftMs', 'tpotMs', 'outputTokPerS'] as const;
export type MetricKey = (typeof METRIC_KEYS)[number];

/** One request of a measured run, as replayed. */
export interface CalibrationRequest {
  inputTokens: number;
  outputTokens: number;
  warmup: boolean;
  /** When the load wanted it sent, ms from the run's start (open loop: its arrival). */
  scheduledMs: number;
  /** A trace replay's request: its entry's block ids (Mooncake `hash_ids`), where it had them. */
  hashIds?: readonly number[];
  /**
   * Prompt tokens the server said it served from its prefix cache (usage's cached_tokens,
   * llama.cpp's prompt tokens not processed), or the run's reported share of this prompt.
   */
  cachedTokens?: number;
}

/** One session of a measured session run: its steps, each one or more requests sent together. */
export interface CalibrationSession {
  warmup: boolean;
  /** When its first step was sent, ms from the run's start (open loop: its arrival). */
  scheduledMs: number;
  steps: {
    /** From the end of the step before (think time, tool latency), as the client waited. */
    pauseMs: number;
    requests: { inputTokens: number; outputTokens: number }[];
  }[];
}

/**
 * One user of a measured closed loop: the requests it sent, in its order, each after its
 * previous one ended plus the client's turnaround (userChains).
 */
export interface CalibrationUser {
  /** When its first request was sent, ms from the run's start (the client ramps connections). */
  startMs: number;
  /**
   * Its requests: where each is in the point's `requests`, and how long after its previous
   * one's end it was sent (the first: 0).
   */
  requests: { index: number; gapMs: number }[];
}

/** One measured run: its load, its requests and what it measured. */
export interface CalibrationPoint {
  label: string;
  /**
   * Closed loop (its concurrency), or open loop (replayed at the recorded arrival times); of
   * sessions, for a session run.
   */
  load: LoadSpec;
  /** Every request kept, in the order sent. */
  requests: CalibrationRequest[];
  /** A session run's sessions (multi-turn chat, agent tasks), in the order started. */
  sessions?: CalibrationSession[];
  /**
   * A closed loop of single requests: each user's own sequence, rebuilt from the records'
   * times (userChains), replayed at the recorded offsets and gaps. Absent: the idealised loop.
   */
  users?: CalibrationUser[];
  /**
   * Tokens every session's prompts begin with (tool schemas, the system prompt), which a prefix
   * cache shares across sessions.
   */
  sharedPrefixTokens?: number;
  /**
   * A trace replay whose requests carry their block ids: tokens per block id. The replay keys
   * its prefix cache by them (sim/traceKeys.ts), as the server's cache shared those prompts.
   */
  traceBlockTokens?: number;
  measured: PointMetrics;
  /** The statistic of `measured`'s TTFT and TPOT (default: medians); the replay reads the same. */
  statistics?: PointStatistics;
}

interface ParameterRule {
  /** Fitted as ln(value + floor): a share moves by ratios, an overhead may reach 0. */
  floor: number;
  min: number;
  max: number;
  /** The measurement that pins it down, for a refusal. */
  fix: string;
}

const RULES: Record<FitKey, ParameterRule> = {
  mbu: {
    floor: 0,
    min: 0.05,
    max: 1,
    fix: 'a decode-bound point: concurrency 1 to 4 with 256 or more output tokens (`infergauge probe decode`)',
  },
  mfu: {
    floor: 0,
    min: 0.05,
    max: 1,
    fix: "a prefill-bound point: long prompts at low load (`infergauge probe prefill`, or `run --input-tokens 4096 --output-tokens 16 --concurrency 1`); with --steps, where it is attention's share, decode at a long context (`run --input-tokens 2048 --output-tokens 64 --concurrency 1`)",
  },
  mfu8bit: {
    floor: 0,
    min: 0.05,
    max: 1,
    fix: 'a prefill-bound point: long prompts at low load (`infergauge probe prefill`, or `run --input-tokens 4096 --output-tokens 16 --concurrency 1`)',
  },
  stepOverheadMs: {
    floor: 0.05,
    min: 0,
    max: 100,
    fix: 'decode points whose steps read very different amounts: concurrency 1 with short prompts beside 32 or more with prompts of 2,000 tokens or more',
  },
  perSeqOverheadUs: {
    floor: 1,
    min: 0,
    max: 5000,
    fix: 'decode points at 64 or more concurrent requests beside points at 1 to 8 (`infergauge sweep --concurrency 1,8,64,128`)',
  },
  frontendLatencyMs: {
    floor: 0.2,
    min: 0,
    max: 5000,
    fix: 'TTFT at concurrency 1 with short prompts (`run --input-tokens 32 --concurrency 1`)',
  },
};

/** Where the fit searches `key` (its checks name these bounds). */
export function fitBounds(key: FitKey): FitBounds {
  const { min, max, floor } = RULES[key];
  return { min, max, floor };
}

/**
 * The prediction model of a calibration (prediction.ts): its fitted values and covariance, and
 * its runs' errors in the fit as the residual scatter.
 */
export function predictionModelOf(
  file: Pick<CalibrationFile, 'fitted' | 'covariance' | 'points' | 'warnings' | 'held'>,
): PredictionModel {
  // What --hold-unidentified held is drawn as unidentified (its warning names it by flag).
  const unidentified: Partial<Record<FitKey, number>> = {};
  for (const w of file.warnings ?? []) {
    const key = FIT_KEYS.find((k) => fitFlag(k) === w.parameter);
    if (w.code === 'calibration_held_unidentified' && key) {
      unidentified[key] = file.held[key] ?? w.value;
    }
  }
  return predictionModel({
    fitted: file.fitted,
    ...(file.covariance ? { covariance: file.covariance } : {}),
    pointErrors: file.points.flatMap((p) => (p.fromVerification ? [] : [p.error])),
    bounds: fitBounds,
    unidentified,
  });
}

/** The measurement that pins `key` down. */
export const fitFix = (key: FitKey): string => RULES[key].fix;

/** The engine's current value of each fit key (the personality's and GPU family's defaults). */
export function engineValues(base: EngineModelOptions): Record<FitKey, number> {
  const e = resolveEngineConfig(base).efficiency;
  return {
    mbu: e.mbu,
    mfu: e.mfuMax16,
    mfu8bit: e.mfuMax8,
    stepOverheadMs: e.stepOverheadS * 1e3,
    perSeqOverheadUs: e.perSeqOverheadS * 1e6,
    // A fitted or held front end is the whole request path (resolveEngineConfig). The fit
    // starts from the personality's whole at the prompt length its parts were measured at,
    // the value the one constant had (20 ms for vLLM V1): the fit is piecewise flat in it.
    // calibrate's runs are an HTTP client's, so the server's hops.
    frontendLatencyMs: requestPathS(e, 'http', wholeAtTokens(base)) * 1e3,
  };
}

/** The prompt length at which the personality's request path was measured as a whole. */
function wholeAtTokens(base: EngineModelOptions): number {
  const at = REQUEST_PATH.wholeAtTokens;
  if (base.personality === 'sglang') return at.sglang;
  if (base.personality === 'trtllm') return at.trtllm;
  return at.vllm;
}

/**
 * The keys fitted by default: `mfu` or `mfu8bit` by the path the engine's GEMMs take. With step
 * times measured on the server (`measuredSteps`), what they leave to the model: attention's
 * share of the 16-bit peak (`mfu`), the per-sequence cost and the front end; the bandwidth and
 * GEMM shares and the step cost then act only on steps longer than the probe's and are fitted
 * only when asked (`allowedFitKeys`).
 */
export function fitKeysFor(base: EngineModelOptions): FitKey[] {
  if (base.measuredSteps) return ['mfu', 'perSeqOverheadUs', 'frontendLatencyMs'];
  return allowedFitKeys(base);
}

/** The keys `--fit` may name: one GEMM share by the engine's path, either with measured steps. */
export function allowedFitKeys(base: EngineModelOptions): FitKey[] {
  if (base.measuredSteps) return [...FIT_KEYS];
  const config = resolveEngineConfig(base);
  const eightBit = gemmFormat(config.weights, config.gpu) !== 'bf16';
  return FIT_KEYS.filter((k) => (eightBit ? k !== 'mfu' : k !== 'mfu8bit'));
}

/** `base` with the given values set over its efficiency (user-given flags are `base`'s). */
export function withValues(
  base: EngineModelOptions,
  values: Partial<Record<FitKey, number>>,
): EngineModelOptions {
  return { ...base, efficiency: { ...base.efficiency, ...efficiencyOf(values) } };
}

/** The median (sorts `values` in place); NaN when empty. */
export const median = (values: number[]): number => {
  if (values.length === 0) return Number.NaN;
  const sorted = values.sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const mean = (values: number[]): number =>
  values.length === 0 ? Number.NaN : values.reduce((sum, v) => sum + v, 0) / values.length;

/** Which statistic a point's TTFT and TPOT are (published figures are often means). */
export interface PointStatistics {
  ttftMs?: 'median' | 'mean';
  tpotMs?: 'median' | 'mean';
}

/**
 * A run's PointMetrics from its records: measured-phase requests that succeeded, with TTFT,
 * TPOT and run-level output throughput as docs/metrics.md defines them (the summary's own
 * builder is in metrics/, which the simulator's layer does not import). The same function
 * reads the simulated records, so both sides are measured alike: TTFT and TPOT are medians
 * unless `statistics` says the measured figures are means.
 */
export function pointMetrics(
  records: readonly RequestRecord[],
  statistics: PointStatistics = {},
): PointMetrics {
  const ttft: number[] = [];
  const tpot: number[] = [];
  let tokens = 0;
  let firstSent = Number.POSITIVE_INFINITY;
  let lastEnd = Number.NEGATIVE_INFINITY;
  for (const r of records) {
    if (r.phase !== 'measure' || r.error || r.firstTokenAt === undefined) continue;
    ttft.push(r.firstTokenAt - r.sentAt);
    if (r.outputTokens > 1 && r.lastTokenAt !== undefined) {
      tpot.push((r.lastTokenAt - r.firstTokenAt) / (r.outputTokens - 1));
    }
    tokens += r.outputTokens;
    firstSent = Math.min(firstSent, r.sentAt);
    lastEnd = Math.max(lastEnd, r.endAt);
  }
  const spanS = (lastEnd - firstSent) / 1000;
  return {
    ttftMs: statistics.ttftMs === 'mean' ? mean(ttft) : median(ttft),
    tpotMs: statistics.tpotMs === 'mean' ? mean(tpot) : median(tpot),
    outputTokPerS: spanS > 0 ? tokens / spanS : Number.NaN,
  };
}

/**
 * A measured run as a calibration point: its successful requests (a failed one's length is
 * unknown) in the order sent, warm-up included (it warms the engine as it did the server). A
 * session run keeps its sessions' steps too, each up to its first failed request (which ended
 * the session), with the pause the client waited before each.
 */
export function pointFromRecords(
  label: string,
  load: LoadSpec,
  records: readonly RequestRecord[],
  sharedPrefixTokens?: number,
  /** A trace replay's block ids by request id, and their block size. */
  trace?: { hashIdsOf: (id: number) => readonly number[] | undefined; blockTokens: number },
): CalibrationPoint {
  const kept = records
    .filter((r) => !r.error && r.firstTokenAt !== undefined)
    .sort((a, b) => a.scheduledAt - b.scheduledAt || a.id - b.id);
  const point: CalibrationPoint = {
    label,
    load,
    requests: kept.map((r) => {
      const hashIds = trace?.hashIdsOf(r.id);
      return {
        inputTokens: r.inputTokens ?? r.requestedInputTokens,
        outputTokens: r.outputTokens,
        warmup: r.phase === 'warmup',
        scheduledMs: r.scheduledAt,
        ...(hashIds ? { hashIds } : {}),
        ...(r.cachedInputTokens ? { cachedTokens: r.cachedInputTokens } : {}),
      };
    }),
    measured: pointMetrics(kept),
  };
  if (trace && point.requests.some((r) => r.hashIds)) point.traceBlockTokens = trace.blockTokens;
  if (records.some((r) => r.sessionId !== undefined)) {
    point.sessions = sessionsOf(records);
    if (sharedPrefixTokens) point.sharedPrefixTokens = sharedPrefixTokens;
  } else if (load.mode === 'closed' && point.traceBlockTokens === undefined) {
    // A failed request's slot was freed too, but it is not replayed (its length is unknown):
    // the chains would have holes, so a run with failures keeps the idealised loop.
    const users = kept.length === records.length ? userChains(kept, load.concurrency) : undefined;
    if (users) point.users = users;
  }
  return point;
}

/**
 * A closed loop's users, rebuilt from its records (in the order sent: by scheduledAt, then id),
 * which carry no user: the first `concurrency` sends start the users; each later one was
 * scheduled when a user's request ended (the client schedules the next as the last ends), so it
 * goes to the user whose last request ended latest at or before it was scheduled; its gap is
 * from that end to its own send (the client's turnaround). Undefined where the records do not
 * fit that loop (an older infergauge's records without send or end times, a send that no end
 * freed, a user longer than the replay's session ids allow): the caller keeps the idealised
 * loop then.
 */
export function userChains(
  records: readonly Pick<RequestRecord, 'scheduledAt' | 'sentAt' | 'endAt'>[],
  concurrency: number,
): CalibrationUser[] | undefined {
  if (records.length === 0 || !(concurrency >= 1)) return undefined;
  const users: CalibrationUser[] = [];
  const lastEnd: number[] = [];
  for (const [index, r] of records.entries()) {
    const { scheduledAt, sentAt, endAt } = r;
    if (
      !Number.isFinite(scheduledAt) ||
      !Number.isFinite(sentAt) ||
      !Number.isFinite(endAt) ||
      endAt < sentAt ||
      (index > 0 && scheduledAt < records[index - 1].scheduledAt)
    ) {
      return undefined;
    }
    if (users.length < concurrency) {
      users.push({ startMs: sentAt, requests: [{ index, gapMs: 0 }] });
      lastEnd.push(endAt);
      continue;
    }
    let user = -1;
    for (let u = 0; u < users.length; u++) {
      if (lastEnd[u] <= scheduledAt && (user < 0 || lastEnd[u] > lastEnd[user])) user = u;
    }
    if (user < 0 || users[user].requests.length >= SESSION_ID_STRIDE) return undefined;
    users[user].requests.push({ index, gapMs: Math.max(0, sentAt - lastEnd[user]) });
    lastEnd[user] = endAt;
  }
  return users.sort((a, b) => a.startMs - b.startMs);
}

/** A session run's sessions, in the order started, each step to its first failed request. */
function sessionsOf(records: readonly RequestRecord[]): CalibrationSession[] {
  const bySession = new Map<number, RequestRecord[]>();
  for (const r of records) {
    if (r.sessionId === undefined || r.turn === undefined) continue;
    const list = bySession.get(r.sessionId);
    if (list) list.push(r);
    else bySession.set(r.sessionId, [r]);
  }
  const sessions: CalibrationSession[] = [];
  for (const list of bySession.values()) {
    list.sort((a, b) => (a.turn as number) - (b.turn as number) || a.id - b.id);
    const steps: CalibrationSession['steps'] = [];
    let previousEnd: number | undefined;
    for (let i = 0; i < list.length; ) {
      let j = i;
      while (j < list.length && list[j].turn === list[i].turn) j++;
      const step = list.slice(i, j);
      i = j;
      if (step.some((r) => r.error || r.firstTokenAt === undefined)) break;
      steps.push({
        pauseMs: previousEnd === undefined ? 0 : Math.max(0, step[0].scheduledAt - previousEnd),
        requests: step.map((r) => ({
          inputTokens: r.inputTokens ?? r.requestedInputTokens,
          outputTokens: r.outputTokens,
        })),
      });
      previousEnd = Math.max(...step.map((r) => r.endAt));
    }
    if (steps.length === 0) continue;
    sessions.push({ warmup: list[0].phase === 'warmup', scheduledMs: list[0].scheduledAt, steps });
  }
  return sessions.sort(
    (a, b) => Number(b.warmup) - Number(a.warmup) || a.scheduledMs - b.scheduledMs,
  );
}

/**
 * Replays a point in virtual time on the engine `options` describe and measures it. Each request
 * carries only its length: records do not keep prompts, so shared prefixes of single requests
 * cannot be replayed, but for a trace replay's requests with block ids, which name what their
 * prompts shared. What a request's record says the server's cache served it (its
 * `cachedTokens`) is replayed as its own blocks already cached when it is sent: see
 * replaysHits. A session run is replayed session by session, with the cache as the engine has
 * it: see replaySessions.
 */
export function replayPoint(options: EngineModelOptions, point: CalibrationPoint): PointMetrics {
  // The medians need times alone: no events (a fit replays each point hundreds of times).
  return pointMetrics(replayRecords(options, point, false), point.statistics);
}

/**
 * How far a closed loop's measured figures may scatter from run to run for want of when the
 * server admitted its first requests: the log ratio of each figure replayed with the users
 * started together to it replayed at the client's recorded starts (its connection ramp). The
 * client knows when it sent, not when the server took each request in: a server whose event
 * loop reads the first requests of a ramp in one turn admits them together, one that keeps up
 * admits them a ramp's gap apart, and with equal lengths every later wave of a closed loop
 * repeats the first one's pattern. Three real-time runs of the HTTP simulator at concurrency 16
 * measured a median TTFT of 518, 521 and 558 ms, the replay 556 at the recorded starts; the
 * first two had their first two requests prefilled together. Undefined where the ramp cannot
 * matter (no users, or all started at once).
 */
export function rampScatter(
  options: EngineModelOptions,
  point: CalibrationPoint,
): PointMetrics | undefined {
  const users = point.users;
  if (!users || users.every((u) => u.startMs === users[0].startMs)) return undefined;
  const together = users.map((u) => ({ ...u, startMs: users[0].startMs }));
  const ramped = replayPoint(options, point);
  const at = replayPoint(options, { ...point, users: together });
  const scatter = (m: MetricKey) => {
    const r = Math.abs(Math.log(at[m] / ramped[m]));
    return Number.isFinite(r) ? r : 0;
  };
  return {
    ttftMs: scatter('ttftMs'),
    tpotMs: scatter('tpotMs'),
    outputTokPerS: scatter('outputTokPerS'),
  };
}

/**
 * Whether the replay reproduces the server's reported cache hits request by request: a point
 * of single requests without block ids (whose sharing the replay cannot see) where some request
 * was served cached tokens. A trace's or a session run's replay models the sharing itself.
 */
export function replaysHits(point: CalibrationPoint): boolean {
  return (
    !point.sessions &&
    point.traceBlockTokens === undefined &&
    point.requests.some((r) => (r.cachedTokens ?? 0) > 0)
  );
}

/**
 * The run's reported hit share (its summary's, over measured requests) as measured requests'
 * `cachedTokens`, where no record said its own. A run of single requests without a shared
 * start has prompts that share nothing among themselves, so its hits are prompts the server
 * had seen before (an earlier run with the same salt), and a repeated prompt hits whole: the
 * share is given as whole prompts, in the order sent (prompts are seeded by request id, so a
 * run repeats an earlier run's first ones), the last one in part. Spread evenly instead, every
 * prompt would read half cached and the median TTFT of a run whose hits are half whole
 * prompts, half none would replay twice as slow as measured.
 */
export function withHitShare(point: CalibrationPoint, hitRate: number | undefined): void {
  if (hitRate === undefined || !(hitRate > 0)) return;
  if (point.requests.some((r) => r.cachedTokens !== undefined)) return;
  const measured = point.requests.filter((r) => !r.warmup);
  let left = Math.round(hitRate * measured.reduce((n, r) => n + r.inputTokens, 0));
  for (const r of measured) {
    if (left <= 0) break;
    r.cachedTokens = Math.min(left, r.inputTokens);
    left -= r.cachedTokens;
  }
}

/**
 * The share of measured prompt tokens the replay starts cached: whole blocks only, as a prefix
 * cache keeps them (a hit of 20 tokens on 16-token blocks replays as 16).
 */
export function replayedHitShare(point: CalibrationPoint, blockSize: number): number {
  if (!replaysHits(point)) return 0;
  let prompt = 0;
  let cached = 0;
  for (const r of point.requests) {
    if (r.warmup) continue;
    prompt += r.inputTokens;
    cached += cachedBlocks(r, blockSize) * blockSize;
  }
  return prompt > 0 ? cached / prompt : 0;
}

function cachedBlocks(r: CalibrationRequest, blockSize: number): number {
  return Math.min(
    Math.floor((r.cachedTokens ?? 0) / blockSize),
    Math.floor(r.inputTokens / blockSize),
  );
}

/** Keys of one request's blocks: request i's are i * 2^21 + b, shared by no other request. */
const REQUEST_KEY_STRIDE = 2 ** 21;

/**
 * replayPoint's virtual run: the records, for a caller that reads more than the medians; with
 * `events` false, times and counts only.
 */
export function replayRecords(
  options: EngineModelOptions,
  point: CalibrationPoint,
  events = true,
): RequestRecord[] {
  if (point.sessions) return replaySessions(options, point, point.sessions, events);
  if (point.users) return replayUsers(options, point, point.users, events);
  const traced = point.traceBlockTokens !== undefined;
  const hits = replaysHits(point);
  // Hits the server reported need a prefix cache whatever the engine's flags said: it had one.
  const engine = new EngineCluster(traced ? options : { ...options, prefixCaching: hits });
  const warmup = point.requests.filter((r) => r.warmup);
  const measured = point.requests.filter((r) => !r.warmup);
  const ordered = [...warmup, ...measured];
  const records: RequestRecord[] = [];
  const keys =
    point.traceBlockTokens !== undefined
      ? new TraceBlockKeys(engine.config.blockSize, point.traceBlockTokens)
      : undefined;
  const warmed = hits ? warmedKeys(engine) : undefined;
  simulateRun({
    engine,
    load: replayLoad(point.load, ordered),
    requests: measured.length,
    warmupRequests: warmup.length,
    seed: 1,
    endpoint: 'completions',
    nextRequest: (id): RequestSpec => lengthsOnly(ordered[id]),
    ...(keys
      ? {
          prefixKeys: (id: number, spec: RequestSpec, promptTokens: number) =>
            keys.keys(ordered[id].hashIds, promptTokens, spec.requestedOutputTokens),
        }
      : warmed
        ? { prefixKeys: (id: number, _spec: RequestSpec, n: number) => warmed(ordered[id], id, n) }
        : {}),
    events,
    onRecord: (record) => records.push(record),
  });
  return records;
}

/**
 * A request the server served c cached tokens finds its first c tokens' whole blocks cached as
 * it is sent (an earlier run's prompt, or this run's warm-up, left them): keys of its own
 * (request `key`'s), so exactly those blocks hit and no other request shares them. Warmed at
 * the send, not at the start, so a cache smaller than the run's prompts still holds each when
 * it is needed, as the server's did. Only the cached blocks are keyed: the rest could be hit
 * by no one (but a preempted request recomputing them), and keying them halves the replay's
 * speed.
 */
function warmedKeys(engine: EngineCluster) {
  const blockSize = engine.config.blockSize;
  return (r: CalibrationRequest, key: number, promptTokens: number): number[] => {
    const warm = Math.min(cachedBlocks(r, blockSize), Math.floor(promptTokens / blockSize));
    if (warm === 0) return [];
    const base = (key + 1) * REQUEST_KEY_STRIDE;
    const own = Array.from({ length: warm }, (_, b) => base + b);
    // Any replica may take it (routing is by load): each holds them.
    for (const replica of engine.replicas) replica.warmPrefixCache(own);
    return own;
  };
}

/**
 * A closed loop replayed user by user (point.users): each user's first request at its recorded
 * offset, each later one after the same user's previous one ended in the replay plus the gap
 * the client left. The idealised loop (the next request to whichever slot frees first, at once)
 * runs more requests at a time than a client whose turnaround or connection ramp leaves slots
 * idle, and gives a user's long and short requests to others. Each user is a session of
 * one-request steps (the seam session runs use, whose pause is counted from the step's end);
 * its requests are independent, so none shares a prefix with another (unlike replaySessions'
 * growing conversation), and the server's reported hits are warmed per request as in
 * replayRecords. The records come back as single requests': each its own phase and its index
 * in `point.requests` as id.
 */
function replayUsers(
  options: EngineModelOptions,
  point: CalibrationPoint,
  users: readonly CalibrationUser[],
  events: boolean,
): RequestRecord[] {
  const hits = replaysHits(point);
  const engine = new EngineCluster({ ...options, prefixCaching: hits });
  const warmed = hits ? warmedKeys(engine) : undefined;
  const requestOf = (id: number) =>
    users[Math.floor(id / SESSION_ID_STRIDE)].requests[id % SESSION_ID_STRIDE].index;
  const records: RequestRecord[] = [];
  simulateRun({
    engine,
    load: {
      mode: 'open',
      rate: users.length,
      arrival: 'trace',
      trace: { timesMs: users.map((u) => u.startMs), speed: 1 },
    },
    requests: users.length,
    warmupRequests: 0,
    seed: 1,
    endpoint: 'completions',
    nextSession: (u) => {
      const own = users[u].requests;
      let k = 0;
      return {
        next: () => {
          const step = own[k++];
          return (
            step && {
              pauseMs: step.gapMs,
              requests: [lengthsOnly(point.requests[step.index])],
            }
          );
        },
      };
    },
    ...(warmed
      ? {
          prefixKeys: (id: number, _spec: RequestSpec, n: number) => {
            const index = requestOf(id);
            return warmed(point.requests[index], index, n);
          },
        }
      : {}),
    events,
    onRecord: ({ sessionId: _user, turn: _turn, sessionDone: _done, ...record }) => {
      const index = requestOf(record.id);
      records.push({
        ...record,
        id: index,
        phase: point.requests[index].warmup ? 'warmup' : 'measure',
      });
    },
  });
  return records;
}

/**
 * A session run replayed: each session's steps in turn, each after its recorded pause, under
 * the run's load of sessions. Its prompts are known by length only, so each session is taken
 * as one growing token stream, as a conversation is: every prompt is a prefix of it and every
 * answer continues it (turn k+1 re-sends turn k's prompt and answer, then a new message), and
 * its first `sharedPrefixTokens` are every session's. The prefix cache keys that stream by
 * block; a fan-out step's parallel calls are taken to continue it alike (on the built-in
 * simulator's agent runs the replay's medians are still the run's own).
 */
function replaySessions(
  options: EngineModelOptions,
  point: CalibrationPoint,
  sessions: CalibrationSession[],
  events: boolean,
): RequestRecord[] {
  const engine = new EngineCluster(options);
  const blockSize = engine.config.blockSize;
  const sharedBlocks = Math.floor((point.sharedPrefixTokens ?? 0) / blockSize);
  const warmup = sessions.filter((s) => s.warmup).length;
  const records: RequestRecord[] = [];
  simulateRun({
    engine,
    load: replayLoad(point.load, sessions),
    requests: sessions.length - warmup,
    warmupRequests: warmup,
    seed: 1,
    endpoint: 'completions',
    nextSession: (id) => {
      const { steps } = sessions[id];
      let k = 0;
      return {
        next: () => {
          const step = steps[k++];
          return step && { pauseMs: step.pauseMs, requests: step.requests.map(lengthsOnly) };
        },
      };
    },
    prefixKeys: (id, spec) => {
      const session = Math.floor(id / SESSION_ID_STRIDE);
      const blocks = Math.floor(
        (spec.requestedInputTokens + spec.requestedOutputTokens) / blockSize,
      );
      // A session's blocks are its own integers, the shared ones halves: distinct as long as a
      // session's stream is under 2^21 blocks (negative keys are private to one request:
      // BlockPool).
      return Array.from({ length: blocks }, (_, b) =>
        b < sharedBlocks ? b + 0.5 : session * 2 ** 21 + b,
      );
    },
    events,
    onRecord: (record) => records.push(record),
  });
  return records;
}

/** The recorded arrivals (open loop), so the replay meets the same bursts the server met. */
function replayLoad(load: LoadSpec, ordered: readonly { scheduledMs: number }[]): LoadSpec {
  if (load.mode !== 'open') return load;
  const t0 = ordered.length > 0 ? Math.min(...ordered.map((r) => r.scheduledMs)) : 0;
  return {
    mode: 'open',
    rate: load.rate,
    arrival: 'trace',
    trace: { timesMs: ordered.map((r) => r.scheduledMs - t0), speed: 1 },
    ...(load.maxConcurrency !== undefined ? { maxConcurrency: load.maxConcurrency } : {}),
  };
}

/** A request known by its lengths only. */
function lengthsOnly(r: { inputTokens: number; outputTokens: number }): RequestSpec {
  return {
    prompt: '',
    promptWords: r.inputTokens,
    requestedInputTokens: r.inputTokens,
    requestedOutputTokens: r.outputTokens,
  };
}

/** Log ratio of simulated to measured, per metric; a missing side reads 0 (no information). */
function logErrors(simulated: PointMetrics, measured: PointMetrics): number[] {
  return METRIC_KEYS.map((k) => {
    const s = simulated[k];
    const m = measured[k];
    return Number.isFinite(s) && Number.isFinite(m) && s > 0 && m > 0 ? Math.log(s / m) : 0;
  });
}

/** Relative error of simulated against measured (0.1: 10 % high). */
export function relativeErrors(simulated: PointMetrics, measured: PointMetrics): PointMetrics {
  return {
    ttftMs: simulated.ttftMs / measured.ttftMs - 1,
    tpotMs: simulated.tpotMs / measured.tpotMs - 1,
    outputTokPerS: simulated.outputTokPerS / measured.outputTokPerS - 1,
  };
}

export interface CalibrationFit {
  fitted: Partial<Record<FitKey, FittedValue>>;
  /** The fitted values' covariance on the scale they are fitted on (FitCovariance). */
  covariance?: FitCovariance;
  /** Keys not fitted: held at the user's value or the engine's. */
  held: Partial<Record<FitKey, number>>;
  points: {
    label: string;
    predicted: PointMetrics;
    error: PointMetrics;
  }[];
  /** The fit's Huber loss on the log errors at its end. */
  cost: number;
  /** Virtual runs made. */
  simulations: number;
}

/** Why the data cannot fit a parameter, and what to measure. */
export class CalibrationRefused extends Error {
  constructor(
    readonly problems: string[],
    /** The keys the data could not identify (none when the data fall short before fitting). */
    readonly keys: FitKey[] = [],
  ) {
    super(problems.join('; '));
  }
}

export interface FitOptions {
  /** Keys to fit (default: fitKeysFor(base) less any in `hold`). */
  keys?: FitKey[];
  /** Values to hold, not fit (the user's flags). */
  hold?: Partial<Record<FitKey, number>>;
  /** Where to start (default: the engine's values). */
  start?: Partial<Record<FitKey, number>>;
  /**
   * Held keys whose values are the engine's guesses, not the user's (held as unidentified):
   * each known only to a factor of 2 (GUESS_LOG_SD), which the keys fitted beside it carry in
   * their intervals. A key that trades off against a guess is fitted as what the two do
   * together: its interval, taken as if the guess were exact, missed the truth.
   */
  guessed?: FitKey[];
  /** Check that each key can be told from the data, else refuse (default true). */
  checkIdentifiable?: boolean;
  maxIterations?: number;
  /** Told after each point is simulated (the fit runs for seconds to minutes on many runs). */
  onSimulated?: () => void;
}

/** Huber's threshold on a log error: past 5 % a point counts linearly, so one outlier cannot steer the fit. */
const HUBER = 0.05;
/** Forward-difference step on the log scale (a 4 % change: larger than the step's discreteness). */
const STEP = 0.04;

/**
 * Fits `keys` to the points. Throws CalibrationRefused when the data cannot identify a key
 * (identifiabilityProblems), naming the measurement that would fix it.
 */
export function fitCalibration(
  base: EngineModelOptions,
  points: readonly CalibrationPoint[],
  o: FitOptions = {},
): CalibrationFit {
  const hold = o.hold ?? {};
  const keys = (o.keys ?? fitKeysFor(base)).filter((k) => hold[k] === undefined);
  const defaults = engineValues(base);
  const held: Partial<Record<FitKey, number>> = {};
  for (const k of allowedFitKeys(base)) if (!keys.includes(k)) held[k] = hold[k] ?? defaults[k];
  const { problems, unfit } = dataProblems(points, keys, base.measuredSteps !== undefined);
  if (problems.length > 0) throw new CalibrationRefused(problems, unfit);
  if (keys.length === 0) {
    // Measured steps with every other value held: the runs are predicted, nothing is fitted.
    const predicted = points.map((p) => replayPoint(withValues(base, held), p));
    return {
      fitted: {},
      held,
      points: points.map((p, i) => ({
        label: p.label,
        predicted: predicted[i],
        error: relativeErrors(predicted[i], p.measured),
      })),
      cost: 0,
      simulations: points.length,
    };
  }

  const rules = keys.map((k) => RULES[k]);
  const toTheta = (k: FitKey, v: number) => Math.log(v + RULES[k].floor);
  const lo = rules.map((r) => Math.log(r.min + r.floor));
  const hi = rules.map((r) => Math.log(r.max + r.floor));
  const clamp = (t: number[]) => t.map((x, j) => Math.min(hi[j], Math.max(lo[j], x)));
  const valuesOf = (theta: number[]) => {
    const v: Partial<Record<FitKey, number>> = { ...held };
    keys.forEach((k, j) => {
      v[k] = Math.exp(theta[j]) - RULES[k].floor;
    });
    return v;
  };
  let simulations = 0;
  // Each figure in units of the run-to-run scatter: a figure that the server's admission of
  // the ramp decides (rampScatter) counts for as much less as it scatters more than NOISE. The
  // scatter depends on the engine (its steps against the ramp's gaps: at the defaults a c16
  // run's TTFT scattered 1 %, at the truth 6 %): taken at the start and again at the fit, the
  // larger kept, and the fit resumed once where it grew.
  const scale = points.map(() => METRIC_KEYS.map(() => 1));
  const scatterAt = (theta: number[]): boolean => {
    const options = withValues(base, valuesOf(theta));
    let grew = false;
    points.forEach((p, i) => {
      const scatter = rampScatter(options, p);
      if (!scatter) return;
      simulations += 2;
      METRIC_KEYS.forEach((m, k) => {
        const s = NOISE / Math.max(NOISE, scatter[m]);
        if (s < scale[i][k] / 1.5) grew = true;
        scale[i][k] = Math.min(scale[i][k], s);
      });
    });
    return grew;
  };
  const scaledErrors = (options: EngineModelOptions, i: number): number[] => {
    simulations++;
    const e = logErrors(replayPoint(options, points[i]), points[i].measured);
    o.onSimulated?.();
    return e.map((x, m) => x * scale[i][m]);
  };
  const residuals = (theta: number[]): number[] => {
    const options = withValues(base, valuesOf(theta));
    return points.flatMap((_, i) => scaledErrors(options, i));
  };
  const weightsOf = (r: number[]) => r.map((x) => (Math.abs(x) <= HUBER ? 1 : HUBER / Math.abs(x)));
  const costOf = (r: number[]) =>
    r.reduce((s, x) => s + (Math.abs(x) <= HUBER ? x * x : HUBER * (2 * Math.abs(x) - HUBER)), 0);
  const jacobian = (theta: number[], r0: number[]): number[][] =>
    keys.map((_, j) => {
      // Step inward at a bound, so the difference stays inside the allowed range.
      const h = theta[j] + STEP > hi[j] ? -STEP : STEP;
      const t = [...theta];
      t[j] += h;
      const r = residuals(t);
      return r.map((x, i) => (x - r0[i]) / h);
    });

  const centralJacobian = (theta: number[]): number[][] =>
    keys.map((_, j) => {
      const up = [...theta];
      const down = [...theta];
      up[j] = Math.min(hi[j], theta[j] + 2 * STEP);
      down[j] = Math.max(lo[j], theta[j] - 2 * STEP);
      const ru = residuals(up);
      const rd = residuals(down);
      return ru.map((x, i) => (x - rd[i]) / (up[j] - down[j]));
    });
  let central = false;

  let theta = clamp(keys.map((k) => toTheta(k, o.start?.[k] ?? defaults[k])));
  scatterAt(theta);
  let r = residuals(theta);
  let cost = costOf(r);
  let lambda = 1e-2;
  let columns = jacobian(theta, r);
  let converged = false;
  for (let pass = 0; ; pass++) {
    for (let iteration = 0; iteration < (o.maxIterations ?? 25) && !converged; iteration++) {
      const w = weightsOf(r);
      const { a, g } = normalEquations(columns, r, w);
      let accepted = false;
      for (let attempt = 0; attempt < 6 && !accepted; attempt++) {
        const damped = a.map((row, i) =>
          row.map((x, j) => (i === j ? x * (1 + lambda) + 1e-9 : x)),
        );
        const delta = solve(
          damped,
          g.map((x) => -x),
        );
        if (!delta) {
          lambda *= 10;
          continue;
        }
        const next = clamp(theta.map((x, j) => x + delta[j]));
        const rNext = residuals(next);
        const costNext = costOf(rNext);
        if (costNext < cost) {
          const gain = cost - costNext;
          const moved = Math.max(...next.map((x, j) => Math.abs(x - theta[j])));
          theta = next;
          r = rNext;
          cost = costNext;
          lambda = Math.max(lambda / 3, 1e-6);
          accepted = true;
          converged = gain < 1e-6 || moved < 1e-3;
        } else lambda *= 4;
      }
      if (!accepted) {
        // Stuck: a forward difference over a simulation's discrete steps can point nowhere
        // downhill. Once a pass, a central difference twice as wide before giving up (its
        // iteration not counted against the limit).
        if (central) break;
        central = true;
        columns = centralJacobian(theta);
        lambda = 1e-2;
        iteration--;
        continue;
      }
      columns = jacobian(theta, r);
    }
    if (pass > 0 || !scatterAt(theta)) break;
    r = residuals(theta);
    cost = costOf(r);
    lambda = 1e-2;
    columns = jacobian(theta, r);
    converged = false;
    central = false;
  }

  const w = weightsOf(r);
  const dof = Math.max(1, r.length - keys.length);
  const s2 = r.reduce((s, x, i) => s + w[i] * x * x, 0) / dof;
  if (o.checkIdentifiable !== false) {
    const unidentified = identifiabilityProblems(keys, columns, w, s2);
    if (unidentified.length > 0) {
      throw new CalibrationRefused(
        unidentified.map((u) => u.problem),
        unidentified.map((u) => u.key),
      );
    }
  }
  const { a } = normalEquations(columns, r, w);
  const inverse = invert(a);
  const variance = Math.max(s2, NOISE * NOISE);
  // A held guess's own uncertainty, carried into the keys fitted beside it: the guess is moved
  // to either end of its 90 % range (GUESS_LOG_SD, Z90 of them), and the fitted keys follow as
  // one Gauss-Newton step does (-(JᵀWJ)⁻¹ JᵀW Δr); the larger shift of each, over Z90, adds to
  // its variance. Moved rather than differentiated, and that far, because a guess's effect is
  // far from linear on its log scale: a step cost held at 1.5 ms adds 3.2 ms to every step at
  // its 90 % end, where a derivative at 1.5 ms extrapolates 2.5 ms (the hidden server's 4 ms
  // fell outside the bandwidth share's interval so).
  const guessVariance = new Array<number>(keys.length).fill(0);
  // Per guess, the fitted keys' shift per standard deviation of it (the two ends' mean slope):
  // the covariance prediction draws from holds the guess jointly with what it moves.
  const guessSlopes: { key: FitKey; slope: number[] }[] = [];
  for (const h of o.guessed ?? []) {
    if (!inverse || held[h] === undefined) continue;
    const floor = RULES[h].floor;
    const largest = new Array<number>(keys.length).fill(0);
    const slope = new Array<number>(keys.length).fill(0);
    for (const sign of [1, -1]) {
      const options = withValues(base, {
        ...valuesOf(theta),
        [h]: Math.exp(Math.log((held[h] as number) + floor) + sign * Z90 * GUESS_LOG_SD) - floor,
      });
      const moved = points.flatMap((_, i) => scaledErrors(options, i));
      const b = columns.map((c) => c.reduce((s, x, i) => s + x * w[i] * (moved[i] - r[i]), 0));
      keys.forEach((_, j) => {
        // The Gauss-Newton step the moved residuals ask for: -(JᵀWJ)⁻¹ JᵀW Δr.
        const shift = -inverse[j].reduce((s, x, m) => s + x * b[m], 0) / Z90;
        largest[j] = Math.max(largest[j], shift * shift);
        slope[j] += (sign * shift) / 2;
      });
    }
    guessSlopes.push({ key: h, slope });
    keys.forEach((_, j) => {
      guessVariance[j] += largest[j];
    });
  }
  const fitted: Partial<Record<FitKey, FittedValue>> = {};
  keys.forEach((k, j) => {
    const sd = inverse
      ? Math.sqrt(Math.max(0, inverse[j][j]) * variance + guessVariance[j])
      : Number.NaN;
    const floor = RULES[k].floor;
    const value = Math.exp(theta[j]) - floor;
    fitted[k] = {
      value,
      stdErr: (value + floor) * sd,
      low: Math.exp(theta[j] - sd) - floor,
      high: Math.exp(theta[j] + sd) - floor,
      before: defaults[k],
    };
  });
  const options = withValues(base, valuesOf(theta));
  return {
    fitted,
    held,
    ...(inverse ? { covariance: jointCovariance(keys, inverse, variance, guessSlopes) } : {}),
    points: points.map((p) => {
      const predicted = replayPoint(options, p);
      return { label: p.label, predicted, error: relativeErrors(predicted, p.measured) };
    }),
    cost,
    simulations: simulations + points.length,
  };
}

/**
 * The covariance prediction draws from (FitCovariance): the fitted keys' (JᵀWJ)⁻¹ times the
 * residual variance, and each held guess jointly with the fitted keys it moves (their shift per
 * standard deviation of it, `slope`, linear where the standard errors take each end's larger
 * shift), so that a draw of the guess moves them as the fit would have.
 */
function jointCovariance(
  keys: FitKey[],
  inverse: number[][],
  variance: number,
  guesses: { key: FitKey; slope: number[] }[],
): FitCovariance {
  const n = keys.length;
  const all = [...keys, ...guesses.map((g) => g.key)];
  const matrix = all.map((_, a) =>
    all.map((_, b) => {
      if (a < n && b < n) {
        return inverse[a][b] * variance + guesses.reduce((s, g) => s + g.slope[a] * g.slope[b], 0);
      }
      if (a >= n && b >= n) return a === b ? GUESS_LOG_SD * GUESS_LOG_SD : 0;
      const [fitted, guess] = a < n ? [a, b - n] : [b, a - n];
      return guesses[guess].slope[fitted] * GUESS_LOG_SD;
    }),
  );
  return { keys: all, matrix };
}

/** Before any simulation: too few points or load levels for the keys asked (`unfit`: which). */
function dataProblems(
  points: readonly CalibrationPoint[],
  keys: FitKey[],
  measuredSteps: boolean,
): { problems: string[]; unfit: FitKey[] } {
  const problems: string[] = [];
  const unfit: FitKey[] = [];
  if (keys.length === 0 && !measuredSteps) {
    problems.push('nothing to fit: every parameter is held');
  }
  const usable = points.filter((p) => METRIC_KEYS.some((k) => Number.isFinite(p.measured[k])));
  if (usable.length < points.length) {
    problems.push(
      `${points.length - usable.length} of the runs have no successful measured request; leave them out`,
    );
  }
  const levels = new Set(
    points.map((p) => (p.load.mode === 'closed' ? `c${p.load.concurrency}` : `r${p.load.rate}`)),
  );
  const moving = keys.filter((k) => k === 'stepOverheadMs' || k === 'perSeqOverheadUs');
  if (levels.size < 2 && moving.length > 0) {
    unfit.push(...moving);
    problems.push(
      `one load level only (${[...levels].join(', ')}): ${moving.map((k) => fitFlag(k)).join(' and ')} need decode points at two or more loads; measure ${RULES.stepOverheadMs.fix}, or hold them (give ${moving.map((k) => fitFlag(k)).join(', ')} a value)`,
    );
  }
  if (points.length * METRIC_KEYS.length <= keys.length) {
    problems.push(
      `${points.length} run(s) give ${points.length * METRIC_KEYS.length} measured values for ${keys.length} parameters; add runs at other loads or hold some parameters`,
    );
  }
  return { problems, unfit };
}

/**
 * Run-to-run scatter of a measured median (a few %): the fit's own residuals may be smaller
 * (three points, five parameters), so the uncertainty that decides "identified" is never
 * taken below this.
 */
const NOISE = 0.02;
/** A key known only to a factor of 2 either way (one standard error) is not identified. */
const MAX_LOG_SD = Math.LN2;
/**
 * What a held engine default is taken to be known to (one standard error, log scale): a factor
 * of 2, the most a key may be unsure of and still count as identified; a GPU family's defaults
 * are typical values, not measurements of this server.
 */
const GUESS_LOG_SD = MAX_LOG_SD;
/** Standard errors to either end of a two-sided 90 % range (of a normal). */
const Z90 = 1.645;

/**
 * The keys the data cannot tell: those whose standard error, at the fit and with residuals of
 * at least NOISE, exceeds MAX_LOG_SD. Such a key barely moves any measured median, or moves
 * them as another key does (its partner is named when their correlation passes 0.9). In order
 * of their standard errors, the least known last.
 */
function identifiabilityProblems(
  keys: FitKey[],
  columns: number[][],
  w: number[],
  s2: number,
): { key: FitKey; problem: string }[] {
  const { a } = normalEquations(
    columns,
    columns[0].map(() => 0),
    w,
  );
  // A singular matrix (fewer informative values than keys) still tells which keys are pinned:
  // with a vanishing ridge, an undetermined direction's variance is huge and a determined key's
  // stays small, so each key is judged on its own rather than all refused together.
  const ridge = 1e-9 * Math.max(1e-12, ...a.map((row, i) => row[i]));
  const inverse =
    invert(a) ?? invert(a.map((row, i) => row.map((x, j) => (i === j ? x + ridge : x))));
  if (!inverse) {
    return keys.map((key) => ({
      key,
      problem: `${keys.map((k) => fitFlag(k)).join(', ')} cannot all be fitted from these runs: their effects are not independent; add runs at other loads and lengths, or fit fewer (--fit)`,
    }));
  }
  const variance = Math.max(s2, NOISE * NOISE);
  const problems: { key: FitKey; problem: string; sd: number }[] = [];
  keys.forEach((k, j) => {
    const sd = Math.sqrt(Math.max(0, inverse[j][j]) * variance);
    if (sd <= MAX_LOG_SD) return;
    let partner = -1;
    let partnerCorr = 0;
    keys.forEach((_, i) => {
      if (i === j) return;
      const corr = inverse[i][j] / Math.sqrt(inverse[i][i] * inverse[j][j]);
      if (Math.abs(corr) > Math.abs(partnerCorr)) {
        partner = i;
        partnerCorr = corr;
      }
    });
    const trade =
      partner >= 0 && Math.abs(partnerCorr) > 0.9
        ? `, and it trades off against ${fitFlag(keys[partner])} (correlation ${partnerCorr.toFixed(2)})`
        : '';
    problems.push({
      key: k,
      sd,
      problem: `${fitFlag(k)} cannot be fitted from these runs (known only to a factor of ${Math.exp(sd) > 100 ? '>100' : Math.exp(sd).toFixed(1)}${trade}): measure ${RULES[k].fix}, or hold it (give ${fitFlag(k)} a value, or leave it out of --fit)`,
    });
  });
  // The least known last: a caller that holds one key at a time holds that one first.
  return problems.sort((a, b) => a.sd - b.sd);
}

/** JᵀWJ and JᵀWr, with J given by columns. */
function normalEquations(columns: number[][], r: number[], w: number[]) {
  const p = columns.length;
  const a = Array.from({ length: p }, () => new Array<number>(p).fill(0));
  const g = new Array<number>(p).fill(0);
  for (let i = 0; i < p; i++) {
    for (let k = 0; k < r.length; k++) g[i] += columns[i][k] * w[k] * r[k];
    for (let j = i; j < p; j++) {
      let s = 0;
      for (let k = 0; k < r.length; k++) s += columns[i][k] * w[k] * columns[j][k];
      a[i][j] = s;
      a[j][i] = s;
    }
  }
  return { a, g };
}

/** Solves A x = b by Gaussian elimination with partial pivoting; undefined when singular. */
function solve(a: number[][], b: number[]): number[] | undefined {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]]);
  const scale = Math.max(1e-300, ...a.map((row) => Math.max(...row.map(Math.abs))));
  for (let c = 0; c < n; c++) {
    let pivot = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r][c]) > Math.abs(m[pivot][c])) pivot = r;
    if (Math.abs(m[pivot][c]) < 1e-12 * scale) return undefined;
    [m[c], m[pivot]] = [m[pivot], m[c]];
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = m[r][c] / m[c][c];
      for (let k = c; k <= n; k++) m[r][k] -= f * m[c][k];
    }
  }
  return m.map((row, i) => row[n] / row[i]);
}

function invert(a: number[][]): number[][] | undefined {
  const n = a.length;
  const columns: number[][] = [];
  for (let j = 0; j < n; j++) {
    const x = solve(
      a,
      a.map((_, i) => (i === j ? 1 : 0)),
    );
    if (!x) return undefined;
    columns.push(x);
  }
  return a.map((_, i) => columns.map((c) => c[i]));
}

export interface LeaveOneOut {
  label: string;
  predicted: PointMetrics;
  error: PointMetrics;
  /**
   * The prediction's intervals from the fold's own fit (prediction.ts), where it fitted anything:
   * whether the measured figures fall inside them is the intervals' coverage, checked.
   */
  interval?: Partial<Record<MetricKey, PredictionInterval>>;
  /**
   * Keys the other points could not identify, held at the engine's value before any fit (the
   * full fit's value would carry the left-out point in).
   */
  heldKeys: FitKey[];
}

/**
 * The most fits a cross-check makes. One fit per point left out made the check quadratic in
 * the runs (each fit replays all the others): 40 runs took 1.5 s, 160 runs 17.5 s. Past this
 * many points they are left out in this many folds instead, each fold every tenth point, so
 * that a fold spans the loads and the work grows with the runs, not their square.
 */
export const MAX_FOLDS = 10;

export interface LeaveOneOutOptions {
  /** Told as each fold's fit ends, with the folds done and their number. */
  onFold?: (done: number, folds: number) => void;
  onSimulated?: () => void;
  /** Draws of each fold's values for its prediction intervals (0: none). */
  intervalDraws?: number;
  /** Keys the full fit held because its runs could not tell them (--hold-unidentified). */
  unidentified?: FitKey[];
}

/**
 * Draws per left-out prediction's interval: fewer than a prediction's own (the residual scatter
 * smooths the mixture), since every fold pays them for each point it leaves out.
 */
const LEAVE_ONE_OUT_DRAWS = 16;

/**
 * Each point predicted by a fit to the others (started from the full fit's values): how well
 * the calibration predicts a load it has not seen. One point left out at a time up to
 * MAX_FOLDS points; beyond, MAX_FOLDS folds of every tenth point, each predicted by a fit to
 * the rest. Needs three points or more.
 */
export function leaveOneOut(
  base: EngineModelOptions,
  points: readonly CalibrationPoint[],
  full: CalibrationFit,
  o: LeaveOneOutOptions = {},
): LeaveOneOut[] {
  if (points.length < 3) return [];
  const start: Partial<Record<FitKey, number>> = {};
  for (const [k, v] of Object.entries(full.fitted)) start[k as FitKey] = v.value;
  const keys = Object.keys(full.fitted) as FitKey[];
  const prior = engineValues(base);
  const folds = Math.min(points.length, MAX_FOLDS);
  const out: LeaveOneOut[] = new Array(points.length);
  for (let fold = 0; fold < folds; fold++) {
    const others = points.filter((_, j) => j % folds !== fold);
    let fit: CalibrationFit | undefined;
    let heldKeys: FitKey[] = [];
    // Drop keys the others cannot identify (held at the engine's value), one at a time.
    // With none left, the others fit nothing: the fold is predicted from the priors alone.
    let tryKeys = [...keys];
    while (!fit && tryKeys.length > 0) {
      try {
        const hold: Partial<Record<FitKey, number>> = { ...full.held };
        for (const k of heldKeys) hold[k] = prior[k];
        fit = fitCalibration(base, others, {
          keys: tryKeys,
          hold,
          start,
          // What this fold holds unidentified moves its fitted values' covariance (joint draws).
          guessed: [...heldKeys, ...(o.unidentified ?? [])],
          maxIterations: 12,
          ...(o.onSimulated ? { onSimulated: o.onSimulated } : {}),
        });
      } catch (err) {
        if (!(err instanceof CalibrationRefused)) throw err;
        const drop = err.keys[err.keys.length - 1] ?? tryKeys[tryKeys.length - 1];
        heldKeys = [...heldKeys, drop];
        tryKeys = tryKeys.filter((k) => k !== drop);
      }
    }
    const values: Partial<Record<FitKey, number>> = { ...full.held };
    for (const k of heldKeys) values[k] = prior[k];
    for (const [k, v] of Object.entries(fit?.fitted ?? {})) values[k as FitKey] = v.value;
    const options = withValues(base, values);
    const draws = o.intervalDraws ?? LEAVE_ONE_OUT_DRAWS;
    // What this fold could not tell, and what the full fit held as unidentified: drawn too.
    const unidentified = Object.fromEntries(
      [...heldKeys, ...(o.unidentified ?? [])].map((k) => [k, values[k] ?? prior[k]]),
    );
    const model =
      draws > 0 && Object.keys({ ...fit?.fitted, ...unidentified }).length > 0
        ? predictionModel({
            fitted: fit?.fitted ?? {},
            ...(fit?.covariance ? { covariance: fit.covariance } : {}),
            // A fold that fitted nothing: its runs' errors at the values it predicts with.
            pointErrors: fit
              ? fit.points.map((p) => p.error)
              : others.map((p) => relativeErrors(replayPoint(options, p), p.measured)),
            bounds: fitBounds,
            unidentified,
          })
        : undefined;
    for (let i = fold; i < points.length; i += folds) {
      const point = points[i];
      // Past MAX_FOLDS points a fold leaves out many: its first one's interval is drawn, so that
      // the check's cost stays that of MAX_FOLDS predictions.
      const drawn = model && i === fold ? model : undefined;
      let predicted: PointMetrics;
      let interval: LeaveOneOut['interval'];
      if (drawn) {
        ({ predicted, interval } = predictWithIntervals(drawn, options, point, {
          draws,
          ...(o.onSimulated ? { onSimulated: o.onSimulated } : {}),
        }));
      } else {
        predicted = replayPoint(options, point);
        o.onSimulated?.();
      }
      out[i] = {
        label: point.label,
        predicted,
        error: relativeErrors(predicted, point.measured),
        heldKeys,
        ...(interval ? { interval } : {}),
      };
    }
    o.onFold?.(fold + 1, folds);
  }
  return out;
}

/**
 * A point predicted on `options` (the fitted values set) with its intervals: the central replay
 * and `draws` replays at draws of the model's values, each metric's interval at the prediction's
 * level (prediction.ts).
 */
export function predictWithIntervals(
  model: PredictionModel,
  options: EngineModelOptions,
  point: CalibrationPoint,
  o: { draws?: number; onSimulated?: () => void } = {},
): { predicted: PointMetrics; interval: Partial<Record<MetricKey, PredictionInterval>> } {
  const figures = predictFigures<MetricKey>(
    model,
    (values) => {
      o.onSimulated?.();
      return nullIfNaN(replayPoint(withValues(options, values), point));
    },
    o.draws !== undefined ? { draws: o.draws } : {},
  );
  const predicted = {
    ttftMs: figures.central.ttftMs ?? Number.NaN,
    tpotMs: figures.central.tpotMs ?? Number.NaN,
    outputTokPerS: figures.central.outputTokPerS ?? Number.NaN,
  };
  const interval: Partial<Record<MetricKey, PredictionInterval>> = {};
  for (const m of METRIC_KEYS) {
    const range = intervalOf(predicted[m], figures.deltas[m], residualOf(model, m));
    if (range) interval[m] = range;
  }
  return { predicted, interval };
}

/** A run's metrics as figures to draw (a median of no value is null). */
const nullIfNaN = (m: PointMetrics): Record<MetricKey, number | null> => ({
  ttftMs: Number.isFinite(m.ttftMs) ? m.ttftMs : null,
  tpotMs: Number.isFinite(m.tpotMs) ? m.tpotMs : null,
  outputTokPerS: Number.isFinite(m.outputTokPerS) ? m.outputTokPerS : null,
});

/**
 * How many measured figures of the left-out runs fall inside their prediction intervals: the
 * intervals' coverage, which at their level should be about that share.
 */
export function leaveOneOutCoverage(
  points: readonly { measured: PointMetrics }[],
  loo: readonly LeaveOneOut[],
): { level: number; inside: number; figures: number } | undefined {
  let inside = 0;
  let figures = 0;
  let level = PREDICTION_LEVEL;
  loo.forEach((l, i) => {
    for (const m of METRIC_KEYS) {
      const range = l?.interval?.[m];
      const measured = points[i].measured[m];
      if (!range || !Number.isFinite(measured)) continue;
      level = range.level;
      figures++;
      if (measured >= range.low && measured <= range.high) inside++;
    }
  });
  return figures > 0 ? { level, inside, figures } : undefined;
}

const medianAbs = (values: number[]): number => {
  const v = values
    .filter(Number.isFinite)
    .map(Math.abs)
    .sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = v.length >> 1;
  return v.length % 2 === 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
};

function medianAbsErrors(errors: PointMetrics[]): PointMetrics {
  return {
    ttftMs: medianAbs(errors.map((e) => e.ttftMs)),
    tpotMs: medianAbs(errors.map((e) => e.tpotMs)),
    outputTokPerS: medianAbs(errors.map((e) => e.outputTokPerS)),
  };
}

/**
 * The file for a fit, its points' sources and leave-one-out predictions, with the fit's checks
 * (calibrationWarnings.ts): `held` says what --hold-unidentified held, each point's `cache` what
 * its server said of its prefix cache.
 */
export function buildCalibrationFile(
  engine: CalibratedEngine,
  fit: CalibrationFit,
  points: {
    label: string;
    source: string;
    load: string;
    requests: number;
    measured: PointMetrics;
    cache?: PointCacheFacts;
  }[],
  loo: LeaveOneOut[],
  steps?: CalibrationSteps,
  held: CalibrationWarning[] = [],
): CalibrationFile {
  const coverage = leaveOneOutCoverage(points, loo);
  const warnings = [
    ...held,
    ...checkCalibration({
      fitted: fit.fitted,
      bounds: fitBounds,
      fix: fitFix,
      points: points.map((p, i) => ({
        label: p.label,
        error: fit.points[i].error,
        ...(loo[i] ? { leaveOneOut: { error: loo[i].error } } : {}),
        ...(p.cache ? { cache: p.cache } : {}),
      })),
    }),
  ];
  return {
    format: CALIBRATION_FORMAT,
    schemaVersion: CALIBRATION_SCHEMA,
    infergauge: VERSION,
    simulatorModelVersion: SIM_MODEL_VERSION,
    createdAt: new Date().toISOString(),
    engine,
    fitted: fit.fitted,
    held: fit.held,
    ...(fit.covariance ? { covariance: fit.covariance } : {}),
    ...(steps ? { steps } : {}),
    points: points.map(({ cache: _cache, ...p }, i) => ({
      ...p,
      predicted: fit.points[i].predicted,
      error: fit.points[i].error,
      ...(loo[i]
        ? {
            leaveOneOut: {
              predicted: loo[i].predicted,
              error: loo[i].error,
              heldKeys: loo[i].heldKeys,
              ...(loo[i].interval ? { interval: loo[i].interval } : {}),
            },
          }
        : {}),
    })),
    medianAbsError: {
      fit: medianAbsErrors(fit.points.map((p) => p.error)),
      ...(loo.length > 0 ? { leaveOneOut: medianAbsErrors(loo.map((l) => l.error)) } : {}),
    },
    ...(coverage ? { leaveOneOutCoverage: coverage } : {}),
    simulations: fit.simulations,
    warnings,
  };
}
