/**
 * `infergauge size`: which deployments of a model serve a given traffic within SLOs, and at what
 * cost. Every candidate (GPU x TP x weight and KV dtype x max-num-seqs x engine personality) is
 * tried with the simulator (calibrated or not) in virtual time: memory first (an engine that
 * would not start is out at once), then one replica's capacity under the SLOs, found by
 * bisection inside an analytic bound, then the data-parallel replicas the traffic needs and the
 * latency at that operating point. A trace is sized whole instead: the fewest replicas that
 * serve its replay (traceCandidate). The cost/latency Pareto front is marked.
 */
import {
  evaluateThresholds,
  parseThresholds,
  type Threshold,
  thresholdValue,
} from '../analysis/thresholds.js';
import type { BackendOptions } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import { EngineStartError } from '../memory/footprint.js';
import { catalogMetric, type LatencyKey } from '../metrics/catalog.js';
import { parseSlo, type SloCondition } from '../metrics/slo.js';
import { type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';
import { predictionModelOf, withValues } from '../sim/calibrate.js';
import {
  type CalibrationWarning,
  type FitKey,
  readCalibrationFile,
} from '../sim/calibrationFile.js';
import { EngineCluster } from '../sim/cluster.js';
import { EngineModel, type EngineModelOptions } from '../sim/engineModel.js';
import { resolveEngine, type SimEngineSettings } from '../sim/options.js';
import { PREDICTION_DRAWS } from '../sim/prediction.js';
import { CLIENT_TURNAROUND_MS, simulateRun } from '../sim/virtual.js';
import type { ConversationWorkload } from '../workload/conversations.js';
import { meanOf, sampleLength, streamSeed } from '../workload/distributions.js';
import { isSessionScenario, type Scenario, withReasoning } from '../workload/scenarios.js';
import { type TraceEntry, traceLoad } from '../workload/trace.js';
import { loadWorkload } from '../workload/workload.js';
import {
  DEFAULT_INTERVAL_ROWS,
  predictSize,
  type SizePointOutcome,
  type SizePredictionSummary,
} from './sizePrediction.js';
import { type PriceTable, priceOf, pricesProblems } from './sizePrices.js';
import type { SizedDeployment, SizePointMetrics } from './sizeRows.js';
import { replayTraceVirtual } from './sizeTrace.js';

/**
 * The traffic to serve: an open-loop request rate, or concurrent users (closed loop); with
 * `sessions`, a session scenario's sessions per second, or sessions at once; or a trace
 * (`SizeOptions.trace`), replayed whole.
 */
export type SizeTraffic =
  | (({ mode: 'rate'; rate: number } | { mode: 'users'; users: number }) & { sessions?: true })
  | SizeTraceTraffic;

/**
 * A trace as the traffic: its entries (`SizeOptions.trace`) replayed whole at `speed`, split over
 * the replicas by the cluster's router. What size.json says of it, not the entries.
 */
export interface SizeTraceTraffic {
  mode: 'trace';
  /** The trace file. */
  source?: string;
  /** `--trace-speed`: 2 replays twice as fast. */
  speed: number;
  /** Tokens per block id (`--trace-block-tokens`). */
  blockTokens: number;
  requests: number;
  /** Trace time from the first to the last arrival over the speed, seconds. */
  spanS: number;
}

/** The axes of the search: every combination is a candidate. */
export interface SizeSpace {
  /** GPU presets (`h100`) or GpuSpec files (through `gpuSpec`). */
  gpus: { gpu?: string; gpuSpec?: string }[];
  tps: number[];
  /** Weight formats (`bf16`, `fp8`, ...); undefined: the model's own. */
  dtypes: (string | undefined)[];
  /** KV cache formats; undefined: follow the weights (vLLM's "auto"). */
  kvCacheDtypes: (string | undefined)[];
  /** max-num-seqs; undefined: the personality's default. */
  maxNumSeqs: (number | undefined)[];
  personalities: string[];
}

export interface SizeOptions {
  model: string;
  traffic: SizeTraffic;
  /** Prompt and output lengths (a preset scenario with any overrides); unused with a trace. */
  scenario: Scenario;
  /** The trace's requests, with traffic `{ mode: 'trace' }`: they are the run (no `requests`). */
  trace?: readonly TraceEntry[];
  /**
   * The prefix-cache hit rate the trace implies (its repeated blocks over an unbounded cache),
   * told beside each deployment's measured rate; given by the caller that computed it.
   */
  traceImpliedHitRate?: number;
  /** Run-level SLOs, as `--threshold` reads them (`ttft.p99<500`, `sloAttainment>=0.9`). */
  slo: string;
  /** Per-request SLO for goodput (`ttft<500,tpot<50`), when `slo` names sloAttainment or goodput. */
  requestSlo?: string;
  space: SizeSpace;
  /** Price per GPU-hour by GPU preset id or spec id (the user's own table: none is built in). */
  prices?: PriceTable;
  /** A calibration.json: the simulator runs with its fitted values. */
  calibration?: string;
  /**
   * With a calibration: draws of its fitted values run at each predicted row's operating point
   * (default PREDICTION_DRAWS; 0: no predictions).
   */
  predictionDraws?: number;
  /** With a calibration: feasible rows by rank predicted beside the Pareto front (default 5). */
  intervalRows?: number;
  /**
   * With a calibration, 0.5 to 0.99: each predicted row gets the replicas that meet every SLO
   * with this chance, and is ranked at their cost (sizePrediction.ts).
   */
  confidence?: number;
  /** Other engine settings every candidate shares (`--max-model-len`, ...). */
  engine?: SimEngineSettings;
  /** Requests per virtual run (default 300; a tenth more run first as warm-up). */
  requests?: number;
  /** Most data-parallel replicas considered (default 64). */
  maxDp?: number;
  seed?: number;
  /** Called once before the first candidate: how many there are, and the threads sharing them. */
  onStart?: (total: number, threads: number) => void;
  /** Called after each candidate, for a progress line. */
  onCandidate?: (done: number, total: number) => void;
  /** Called as the predictions begin on `rows` (more) deployments, each at `draws` draws. */
  onPredictions?: (rows: number, draws: number) => void;
  /**
   * Stops the search (Ctrl-C): the candidates evaluated so far are ranked and returned, the
   * result marked `interrupted`. With a signal, `sizeInParallel` searches on worker threads
   * even for one thread, so that a stop is heard at once rather than after a candidate's
   * synchronous trials.
   */
  signal?: AbortSignal;
}

export type { SizedDeployment, SizePointMetrics } from './sizeRows.js';

export interface SizeResult {
  candidates: number;
  /** Candidates evaluated: every one, unless the search was stopped. */
  evaluated: number;
  /** The search was stopped before every candidate was evaluated: the ranking is of `evaluated`. */
  interrupted?: true;
  deployments: SizedDeployment[];
  /** A trace's implied prefix-cache hit rate (SizeOptions.traceImpliedHitRate), when given. */
  traceImpliedHitRate?: number;
  /** The calibration.json the simulator ran with. */
  calibration?: string;
  /** With a calibration: the predictions' level, draws and rows, and the top rows they cannot tell apart. */
  prediction?: SizePredictionSummary;
  /** Virtual runs made, and the wall time of the whole search. */
  simulations: number;
  wallS: number;
  warnings: string[];
  /** What the calibration's fit warned of (calibration.json `warnings`), as the file keeps them. */
  calibrationWarnings?: CalibrationWarning[];
}

const DEFAULT_REQUESTS = 300;
const DEFAULT_SEED = 42;
const DEFAULT_MAX_DP = 64;
/** Bisection steps on the log of one replica's load: 6 over a 64x bracket is 7 % resolution. */
const BISECTIONS = 6;

export class SizeError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
  }
}

/**
 * A library caller's numbers and axes, as the command line checks its flags (a rate of NaN or
 * an empty axis searched nothing and reported nothing wrong): each problem names the option.
 */
function optionProblems(o: SizeOptions): string[] {
  const problems: string[] = [];
  const whole = (v: unknown, min: number) => Number.isSafeInteger(v) && (v as number) >= min;
  const t = o.traffic as
    | { mode?: unknown; rate?: unknown; users?: unknown; speed?: unknown; blockTokens?: unknown }
    | undefined;
  if (t?.mode === 'trace') {
    if (!Array.isArray(o.trace) || o.trace.length === 0) {
      problems.push("traffic { mode: 'trace' } needs the trace's entries in trace");
    }
    if (!(typeof t.speed === 'number' && Number.isFinite(t.speed) && t.speed > 0)) {
      problems.push(`traffic.speed must be a finite number > 0 (got ${String(t.speed)})`);
    }
    if (!whole(t.blockTokens, 1)) {
      problems.push(
        `traffic.blockTokens must be a whole number >= 1 (got ${String(t.blockTokens)})`,
      );
    }
    if (o.requests !== undefined) {
      problems.push("requests does not apply to a trace: the trace's requests are the run");
    }
    if (isSessionScenario(o.scenario)) {
      problems.push('a trace is sized as single requests: a session scenario does not apply');
    }
  } else if (o.trace !== undefined) {
    problems.push("trace is given but traffic is not { mode: 'trace' }");
  } else if (t?.mode === 'rate') {
    if (!(typeof t.rate === 'number' && Number.isFinite(t.rate) && t.rate > 0)) {
      problems.push(
        `traffic.rate must be a finite number of requests per second > 0 (got ${String(t.rate)})`,
      );
    }
  } else if (t?.mode === 'users') {
    if (!whole(t.users, 1))
      problems.push(`traffic.users must be a whole number >= 1 (got ${String(t.users)})`);
  } else {
    problems.push(
      "traffic must be { mode: 'rate', rate }, { mode: 'users', users } or { mode: 'trace', ... }",
    );
  }
  if (o.requests !== undefined && !whole(o.requests, 20)) {
    problems.push(`requests must be a whole number >= 20 (got ${String(o.requests)})`);
  }
  if (o.maxDp !== undefined && !whole(o.maxDp, 1)) {
    problems.push(`maxDp must be a whole number >= 1 (got ${String(o.maxDp)})`);
  }
  problems.push(...predictionProblems(o));
  if (o.seed !== undefined && !whole(o.seed, 0)) {
    problems.push(`seed must be a whole number >= 0 (got ${String(o.seed)})`);
  }
  const space = o.space as Partial<SizeSpace> | undefined;
  for (const axis of [
    'gpus',
    'tps',
    'dtypes',
    'kvCacheDtypes',
    'maxNumSeqs',
    'personalities',
  ] as const) {
    const values = space?.[axis];
    if (!Array.isArray(values) || values.length === 0) {
      problems.push(`space.${axis} must list at least one value (undefined: the default)`);
    }
  }
  if (space?.tps?.some((tp) => !whole(tp, 1)))
    problems.push(`space.tps must be whole numbers >= 1 (got ${space.tps.join(', ')})`);
  if (space?.maxNumSeqs?.some((n) => n !== undefined && !whole(n, 1))) {
    problems.push(
      `space.maxNumSeqs must be whole numbers >= 1, or undefined for the engine's default`,
    );
  }
  return problems;
}

/**
 * The SLOs read and the prices checked (a library caller's as the price file's: a price of NaN
 * or Infinity would rank and mark the front with it); throws SizeError naming each problem.
 */
function checkOptions(o: SizeOptions): { thresholds: Threshold[]; requestSlo?: SloCondition[] } {
  const problems: string[] = [
    ...optionProblems(o),
    ...(o.prices !== undefined ? pricesProblems(o.prices) : []),
  ];
  let thresholds: Threshold[] = [];
  try {
    thresholds = parseThresholds([o.slo]);
  } catch (err) {
    problems.push(`--slo: ${(err as Error).message}`);
  }
  let requestSlo: SloCondition[] | undefined;
  if (o.requestSlo !== undefined) {
    try {
      requestSlo = parseSlo(o.requestSlo);
    } catch (err) {
      problems.push(`--request-slo: ${(err as Error).message}`);
    }
  }
  if (
    !requestSlo &&
    thresholds.some((t) => t.metric === 'sloAttainment' || t.metric === 'goodput')
  ) {
    problems.push(
      '--slo names goodput or sloAttainment: give the per-request SLO they count with --request-slo (e.g. ttft<500,tpot<50)',
    );
  }
  if (problems.length > 0) throw new SizeError(problems);
  return { thresholds, ...(requestSlo ? { requestSlo } : {}) };
}

/** Searches every candidate in this thread; throws SizeError on SLOs that cannot be read. */
export async function size(o: SizeOptions): Promise<SizeResult> {
  const started = performance.now();
  const { thresholds, requestSlo } = checkOptions(o);
  const combos = candidates(o.space);
  o.onStart?.(combos.length, 1);
  const search = new Search(o, thresholds, requestSlo, await sessionsOf(o));
  const warnings = new Set<string>();
  const deployments: SizedDeployment[] = [];
  for (const c of combos) {
    if (o.signal?.aborted) break;
    deployments.push(search.candidate(c, warnings));
    o.onCandidate?.(deployments.length, combos.length);
    // A candidate is synchronous: between two, let a stop be heard.
    if (o.signal) await new Promise((resolve) => setImmediate(resolve));
  }
  const candidateOf = new Map(deployments.map((d, i) => [d, combos[i]] as const));
  const result = finish(o, combos.length, deployments, search.simulations, [...warnings], started);
  return withPredictions(o, result, { search, thresholds, candidateOf, started });
}

/** A search's rows with what the predictions need to run their operating points again. */
interface PredictionInput {
  /** Absent without a calibration: nothing to predict with. */
  search?: Search;
  thresholds: Threshold[];
  candidateOf: ReadonlyMap<SizedDeployment, Candidate>;
  started: number;
}

/**
 * The result with a calibrated search's predictions on its front and top rows
 * (sizePrediction.ts), run in this thread after the search: none without a calibration, for a
 * stopped search, or with predictionDraws 0.
 */
async function withPredictions(
  o: SizeOptions,
  found: SizeResult,
  input: PredictionInput,
): Promise<SizeResult> {
  const { search, candidateOf } = input;
  if (o.calibration === undefined || !search) return found;
  const result = { ...found, calibration: o.calibration };
  if (result.interrupted || o.predictionDraws === 0) return result;
  let model: ReturnType<typeof predictionModelOf>;
  try {
    model = predictionModelOf(readCalibrationFile(o.calibration));
  } catch {
    // A file that cannot be read is every row's problem already.
    return result;
  }
  const before = search.simulations;
  const startedPredictions = performance.now();
  const prediction = await predictSize(result.deployments, {
    model,
    thresholds: input.thresholds,
    draws: o.predictionDraws ?? PREDICTION_DRAWS,
    intervalRows: o.intervalRows ?? DEFAULT_INTERVAL_ROWS,
    ...(o.confidence !== undefined ? { confidence: o.confidence } : {}),
    maxDp: o.maxDp ?? DEFAULT_MAX_DP,
    point: (row, dp, values) => {
      const c = candidateOf.get(row);
      if (!c) throw new Error(`size: no candidate behind the row ${row.gpu} TP${row.tp}`);
      return search.operatingPoint(c, row, dp, values);
    },
    order: (rows) => {
      markPareto(rows);
      rows.sort(rank);
    },
    ...(o.signal ? { stopped: () => o.signal?.aborted === true } : {}),
    ...(o.onPredictions ? { onRows: o.onPredictions } : {}),
  });
  return {
    ...result,
    prediction: {
      ...prediction,
      simulations: search.simulations - before,
      wallS: (performance.now() - startedPredictions) / 1000,
    },
    simulations: result.simulations + search.simulations - before,
    wallS: (performance.now() - input.started) / 1000,
  };
}

/** The prediction options' problems: each needs a calibration, and its own range. */
function predictionProblems(o: SizeOptions): string[] {
  const problems: string[] = [];
  const whole = (v: unknown, min: number) => Number.isSafeInteger(v) && (v as number) >= min;
  const named = (
    [
      ['predictionDraws', '--prediction-draws'],
      ['intervalRows', '--interval-rows'],
      ['confidence', '--confidence'],
    ] as const
  ).filter(([k]) => o[k] !== undefined);
  if (o.calibration === undefined && named.length > 0) {
    problems.push(
      `${named.map(([, flag]) => flag).join(', ')} ${named.length > 1 ? 'need' : 'needs'} --calibration: intervals come from a fit's uncertainty (infergauge calibrate)`,
    );
  }
  if (o.predictionDraws !== undefined && !whole(o.predictionDraws, 0)) {
    problems.push(`predictionDraws must be a whole number >= 0 (got ${String(o.predictionDraws)})`);
  }
  if (o.intervalRows !== undefined && !whole(o.intervalRows, 0)) {
    problems.push(`intervalRows must be a whole number >= 0 (got ${String(o.intervalRows)})`);
  }
  if (
    o.confidence !== undefined &&
    !(typeof o.confidence === 'number' && o.confidence >= 0.5 && o.confidence <= 0.99)
  ) {
    problems.push(`confidence must be a number from 0.5 to 0.99 (got ${String(o.confidence)})`);
  }
  if (o.confidence !== undefined && o.predictionDraws === 0) {
    problems.push('confidence needs the predictions: predictionDraws 0 turns them off');
  }
  return problems;
}

/** Ranks the rows, marks the Pareto front and says which GPUs had no price. */
function finish(
  o: SizeOptions,
  candidateCount: number,
  deployments: SizedDeployment[],
  simulations: number,
  found: string[],
  started: number,
): SizeResult {
  const warnings = new Set(mergeOutsideValidation(found));
  markPareto(deployments);
  const feasible = deployments.filter((d) => d.feasible);
  const unpriced = [
    ...new Set(feasible.filter((d) => d.costPerHour === undefined).map((d) => d.gpu)),
  ];
  if (o.prices && unpriced.length > 0) {
    const anyPriced = feasible.some((d) => d.costPerHour !== undefined);
    warnings.add(
      anyPriced
        ? `no price for ${unpriced.join(', ')} in --prices: ranked after the priced deployments and not on the cost/latency front`
        : `no price in --prices for any GPU that serves the traffic (${unpriced.join(', ')}): the front is over GPUs, not dollars`,
    );
  }
  deployments.sort(rank);
  return {
    candidates: candidateCount,
    evaluated: deployments.length,
    ...(deployments.length < candidateCount ? { interrupted: true as const } : {}),
    deployments,
    ...(o.traceImpliedHitRate !== undefined ? { traceImpliedHitRate: o.traceImpliedHitRate } : {}),
    simulations,
    wallS: (performance.now() - started) / 1000,
    warnings: [...warnings],
    ...calibrationWarningsOf(o.calibration),
  };
}

/** The calibration file's warnings for size.json (a file that cannot be read is each row's reason). */
function calibrationWarningsOf(path: string | undefined): Pick<SizeResult, 'calibrationWarnings'> {
  if (path === undefined) return {};
  try {
    const warnings = readCalibrationFile(path).warnings;
    return warnings?.length ? { calibrationWarnings: warnings } : {};
  } catch {
    return {};
  }
}

/**
 * The simulator's notices that a setup lies outside its validated range (validatedRange.ts), one
 * per GPU and engine a search tried, as one line: what was outside, setup by setup.
 */
function mergeOutsideValidation(found: readonly string[]): string[] {
  const prefix = 'simulator outside its validation: ';
  const outside = found.filter((w) => w.startsWith(prefix));
  if (outside.length <= 1) return [...found];
  const setups = outside.map((w) => w.slice(prefix.length).split('; validated on')[0]);
  return [
    ...found.filter((w) => !w.startsWith(prefix)),
    `${prefix}${setups.join('; ')} (where each engine was validated: docs/simulator-validation.md)`,
  ];
}

/**
 * `size` on `threads` worker threads, each taking every n-th candidate (the candidates are
 * independent, and a stopped search has evaluated a spread of the space, not its first
 * corner). One thread or few candidates, and no signal to hear: the same search in this thread.
 */
export async function sizeInParallel(o: SizeOptions, threads: number): Promise<SizeResult> {
  const started = performance.now();
  const { thresholds, requestSlo } = checkOptions(o);
  const combos = candidates(o.space);
  const inThread = threads <= 1 || combos.length < 4 * threads;
  if (combos.length === 0 || (inThread && !o.signal)) return size(o);
  const { onCandidate, onStart, onPredictions, signal, ...data } = o;
  const count = Math.min(threads, combos.length);
  onStart?.(combos.length, count);
  const { Worker } = await import('node:worker_threads');
  const typescript = import.meta.url.endsWith('.ts');
  const entry = new URL(typescript ? './sizeWorker.ts' : './sizeWorker.js', import.meta.url);
  const rows: (SizedDeployment | undefined)[] = new Array(combos.length);
  let done = 0;
  let simulations = 0;
  const warnings = new Set<string>();
  const workers: InstanceType<typeof Worker>[] = [];
  await new Promise<void>((resolve, reject) => {
    let running = count;
    let settled = false;
    // Ends the search once: every worker is stopped (terminate interrupts a synchronous
    // candidate at once), so that neither a stop nor a failed worker waits for the others.
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', stop);
      for (const w of workers) void w.terminate();
      if (err) reject(err);
      else resolve();
    };
    const stop = () => settle();
    if (signal?.aborted) return settle();
    signal?.addEventListener('abort', stop, { once: true });
    for (let t = 0; t < count; t++) {
      const indices = combos.flatMap((_, i) => (i % count === t ? [i] : []));
      const workerData = { options: data, indices };
      const worker = typescript
        ? new Worker(
            // tsx as this file resolves it (tests run the sources).
            `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`,
            { eval: true, workerData },
          )
        : new Worker(entry, { workerData });
      workers.push(worker);
      worker.on('message', (m: SizeWorkerMessage) => {
        if (settled) return;
        if (m.type === 'row') {
          rows[m.index] = m.row;
          simulations += m.simulations;
          for (const w of m.warnings) warnings.add(w);
          onCandidate?.(++done, combos.length);
        } else if (--running === 0) settle();
      });
      worker.on('error', (err) => settle(err));
      worker.on('exit', (code) => {
        if (code !== 0) settle(new Error(`a size worker thread exited with code ${code}`));
      });
    }
  });
  const evaluated = rows.filter((r): r is SizedDeployment => r !== undefined);
  const candidateOf = new Map(
    rows.flatMap((r, i) => (r !== undefined ? [[r, combos[i]] as const] : [])),
  );
  const result = finish(o, combos.length, evaluated, simulations, [...warnings], started);
  // The predictions run in this thread: a few rows, each its draws in turn.
  const search =
    o.calibration !== undefined
      ? new Search(o, thresholds, requestSlo, await sessionsOf(o))
      : undefined;
  return withPredictions(o, result, { search, thresholds, candidateOf, started });
}

/** What a size worker thread posts: each candidate's row with its virtual runs and warnings, then that it is done. */
export type SizeWorkerMessage =
  | { type: 'row'; index: number; row: SizedDeployment; simulations: number; warnings: string[] }
  | { type: 'done' };

/** A worker thread's share: the candidates at `indices`, each posted as it is done. */
export async function sizeShare(
  o: SizeOptions,
  indices: number[],
  post: (m: SizeWorkerMessage) => void,
): Promise<void> {
  const { thresholds, requestSlo } = checkOptions(o);
  const combos = candidates(o.space);
  const search = new Search(o, thresholds, requestSlo, await sessionsOf(o));
  for (const index of indices) {
    const before = search.simulations;
    const warnings = new Set<string>();
    const row = search.candidate(combos[index], warnings);
    post({
      type: 'row',
      index,
      row,
      simulations: search.simulations - before,
      warnings: [...warnings],
    });
  }
  post({ type: 'done' });
}

/**
 * A session scenario's workload (multi-turn chat, agent tasks), built once: every trial runs the
 * same sessions (each call makes a fresh one), with the words the built-in simulator counts.
 */
async function sessionsOf(o: SizeOptions): Promise<ConversationWorkload | undefined> {
  if (!isSessionScenario(o.scenario)) return undefined;
  const built = await loadWorkload({
    scenario: o.scenario,
    tokenizer: 'words',
    tokenizerOptions: { builtInSimulator: true },
    seed: o.seed ?? DEFAULT_SEED,
    // Fixed: every trial is a fresh engine model in virtual time (no cache carries over), and
    // the same size answer must come from the same --seed.
    promptSalt: 0,
    promptOverheadTokens: 0,
  });
  return 'nextSession' in built ? built.nextSession : undefined;
}

interface Candidate {
  gpu: { gpu?: string; gpuSpec?: string };
  tp: number;
  dtype: string | undefined;
  kvCacheDtype: string | undefined;
  maxNumSeqs: number | undefined;
  personality: string;
}

function candidates(s: SizeSpace): Candidate[] {
  const out: Candidate[] = [];
  for (const gpu of s.gpus)
    for (const personality of s.personalities)
      for (const tp of s.tps)
        for (const dtype of s.dtypes)
          for (const kvCacheDtype of s.kvCacheDtypes)
            for (const maxNumSeqs of s.maxNumSeqs)
              out.push({ gpu, tp, dtype, kvCacheDtype, maxNumSeqs, personality });
  return out;
}

/** One replica's virtual run at a load (or a trace's over `replicas`): its summary and counters. */
interface Trial {
  summary: RunSummary;
  ok: boolean;
  failed: string[];
  /** The fullest replica's. */
  kvPeak: number;
  /** The most of one replica. */
  preemptions: number;
  /** Replicas the summary's load was split over (absent: one). */
  replicas?: number;
  /** Each SLO missed (its place in --slo), by how much (in its metric's unit). */
  misses: { threshold: number; shortfall: number }[];
  prefixCacheHitRate?: number;
}

class Search {
  simulations = 0;
  /** Each predicted candidate's engine, resolved once for its many draws. */
  private readonly engines = new Map<Candidate, EngineModelOptions>();
  private readonly requests: number;
  private readonly meanInput: number;
  private readonly meanOutput: number;
  private readonly latencyKeys: LatencyKey[];

  constructor(
    private readonly o: SizeOptions,
    private readonly thresholds: Threshold[],
    private readonly requestSlo: SloCondition[] | undefined,
    /** A session scenario's workload: the traffic's units are then sessions. */
    private readonly sessions?: ConversationWorkload,
  ) {
    const requests = o.requests ?? DEFAULT_REQUESTS;
    // Sessions: about as many requests per trial, in whole sessions.
    this.requests = sessions
      ? Math.max(8, Math.ceil(requests / requestsPerSession(o.scenario)))
      : requests;
    this.meanInput = meanOf(o.scenario.input);
    this.meanOutput = meanOf(o.scenario.output);
    // Only what the SLOs and the table read: a trial's summary need not sort every distribution.
    const named = thresholds.flatMap((t) => {
      const m = catalogMetric(t.metric);
      return m.kind === 'distribution' ? [m.latencyKey] : [];
    });
    this.latencyKeys = [...new Set<LatencyKey>(['ttftMs', 'itlMs', 'tpotMs', ...named])];
  }

  /** A candidate's engine, the calibration's values under it. */
  private resolve(c: Candidate): ReturnType<typeof resolveEngine> {
    // The vLLM release is vllm-v1's setting: the other engines' candidates start without it.
    const { engineVersion, ...engine } = this.o.engine ?? {};
    return resolveEngine({
      ...engine,
      ...(engineVersion !== undefined && c.personality === 'vllm-v1' ? { engineVersion } : {}),
      model: this.o.model,
      ...c.gpu,
      tp: c.tp,
      ...(c.dtype !== undefined ? { dtype: c.dtype } : {}),
      ...(c.kvCacheDtype !== undefined ? { kvCacheDtype: c.kvCacheDtype as never } : {}),
      ...(c.maxNumSeqs !== undefined ? { maxNumSeqs: c.maxNumSeqs } : {}),
      enginePersonality: c.personality as never,
      ...(this.o.calibration !== undefined ? { calibration: this.o.calibration } : {}),
      dp: 1,
    });
  }

  /**
   * The deployment `row` of candidate `c` at `dp` replicas with `values` set over its engine's
   * fitted ones, run as the search runs an operating point (each replica at its share, or the
   * whole trace over them; the same workload and seed): the outcome, and the row placed there.
   */
  operatingPoint(
    c: Candidate,
    row: SizedDeployment,
    dp: number,
    values: Partial<Record<FitKey, number>>,
  ): { outcome: SizePointOutcome; placed: SizedDeployment } {
    let options = this.engines.get(c);
    if (!options) {
      const resolved = this.resolve(c);
      if (!resolved.engine) throw new Error(resolved.problems.join('; '));
      options = resolved.engine;
      this.engines.set(c, options);
    }
    const drawn = withValues(options, values);
    const traffic = this.o.traffic;
    const need =
      traffic.mode === 'rate' ? traffic.rate : traffic.mode === 'users' ? traffic.users : 0;
    const t =
      traffic.mode === 'trace'
        ? this.traceTrial(drawn, dp, traffic)
        : this.trial(drawn, this.share(need, dp));
    const at = pointMetrics(t);
    const gpus = dp * row.tp;
    const { costPerHour: _h, costPerMillionOutputTokens: _m, ...rest } = row;
    return {
      outcome: {
        at,
        slo: this.thresholds.map((th) => thresholdValue(t.summary, th) ?? null),
        failedRequests: t.summary.requests.failed,
      },
      placed: {
        ...rest,
        dp,
        gpus,
        at,
        ...(row.capacityPerReplica !== undefined && need > 0
          ? { headroom: (row.capacityPerReplica * dp) / need - 1 }
          : {}),
        ...costOf(priceOf(this.o.prices, row.gpu, options.gpu.id), gpus, this.servedTokPerS(t, dp)),
      },
    };
  }

  /**
   * The output tokens/s the deployment serves: an open loop's offered traffic (a short trial's
   * own span includes its drain, which is no part of the traffic); a closed loop's users get
   * what they measured; a trace its tokens over its span.
   */
  private servedTokPerS(at: Trial, dp: number): number {
    const traffic = this.o.traffic;
    if (traffic.mode === 'trace') {
      const outputTokens = (this.o.trace ?? []).reduce(
        (sum, e) => sum + Math.max(1, e.outputTokens),
        0,
      );
      return traffic.spanS > 0 ? outputTokens / traffic.spanS : 0;
    }
    const sessionsRun = at.summary.sessions?.started ?? 0;
    const outputPerUnit =
      this.sessions && sessionsRun > 0 ? at.summary.tokens.output / sessionsRun : this.meanOutput;
    return traffic.mode === 'rate'
      ? traffic.rate * outputPerUnit
      : at.summary.throughput.outputTokensPerS * dp;
  }

  candidate(c: Candidate, warnings: Set<string>): SizedDeployment {
    const resolved = this.resolve(c);
    // The calibration's own warnings are said once at the start (sizeOptions.ts), not per row.
    for (const w of resolved.warnings) {
      if (!resolved.calibration?.notices.includes(w)) warnings.add(w);
    }
    const gpuId = c.gpu.gpu ?? c.gpu.gpuSpec ?? '?';
    const row = (extra: Partial<SizedDeployment>): SizedDeployment => ({
      gpu: gpuId,
      gpuName: resolved.engine?.gpu.name ?? gpuId,
      tp: c.tp,
      dp: 0,
      gpus: 0,
      dtype: c.dtype ?? resolved.engine?.weights?.dtype ?? 'bf16',
      kvCacheDtype: c.kvCacheDtype ?? resolved.engine?.kvDtype ?? 'auto',
      maxNumSeqs: c.maxNumSeqs ?? 0,
      personality: c.personality,
      feasible: false,
      ...extra,
    });
    if (!resolved.engine) return row({ reason: resolved.problems.join('; ') });
    const options = resolved.engine;
    let model: EngineModel;
    try {
      model = new EngineModel(options);
    } catch (err) {
      if (err instanceof EngineStartError) return row({ reason: `does not start: ${err.message}` });
      throw err;
    }
    const base = row({
      maxNumSeqs: model.config.maxNumSeqs,
      dtype: model.config.weights.dtype,
      kvCacheDtype: model.config.kvDtype,
    });
    // A session's prompts grow with its history: a turn over max-model-len fails in the trial.
    if (this.o.traffic.mode === 'trace') {
      if (!this.o.trace?.some((e) => e.hashIds !== undefined)) {
        warnings.add(
          'the trace names no prompt blocks (Mooncake hash_ids): its requests are sized as sharing no prefix',
        );
      }
      return this.traceCandidate(this.o.traffic, options, model, base, gpuId);
    }
    const longest = this.meanInput + this.meanOutput;
    if (!this.sessions && longest > model.config.maxModelLen) {
      return {
        ...base,
        reason: `mean request (${Math.round(longest)} tokens) is over max-model-len ${model.config.maxModelLen}`,
      };
    }
    const traffic = this.o.traffic;
    const need = traffic.mode === 'rate' ? traffic.rate : traffic.users;
    const bound = this.loadBound(model);
    const maxDp = this.o.maxDp ?? DEFAULT_MAX_DP;
    // Light load first: an SLO missed there is missed at any number of replicas.
    const lightLoad = this.o.traffic.mode === 'rate' ? Math.min(need, bound) / 64 : 1;
    const light = this.trial(options, lightLoad);
    if (!light.ok) {
      return {
        ...base,
        reason: `misses the SLO even at light load: ${light.failed.join('; ')}`,
        binding: bindingOf(light, model, 'latency'),
      };
    }
    // Grow from the analytic bound (doubling while it holds) to the first load that fails, or to
    // the whole traffic on one replica; then bisect one replica's capacity between the two.
    let ok = lightLoad;
    let failTrial: Trial | undefined;
    // Up to twice the traffic, so that a deployment of one replica shows its headroom too.
    const limit = 2 * need;
    let x = this.o.traffic.mode === 'rate' ? Math.min(need, bound) : need;
    let fail: number | undefined;
    // The trial at the whole traffic, where the growth ran one: one replica's operating point.
    let atNeed: Trial | undefined;
    while (x > ok) {
      const t = this.trial(options, x);
      if (x === need) atNeed = t;
      if (!t.ok) {
        fail = x;
        failTrial = t;
        break;
      }
      ok = x;
      if (x >= limit) break;
      x = Math.min(limit, x * 2);
    }
    if (fail !== undefined) {
      let hi = fail;
      for (let i = 0; i < BISECTIONS; i++) {
        const mid = this.o.traffic.mode === 'rate' ? Math.sqrt(ok * hi) : Math.floor((ok + hi) / 2);
        if (mid <= ok || mid >= hi) break;
        const t = this.trial(options, mid);
        if (t.ok) {
          ok = mid;
        } else {
          hi = mid;
          failTrial = t;
        }
      }
    }
    // The fewest replicas to the bisection's resolution: near an SLO's edge a p99 over a few
    // hundred requests moves a little with the load's random draws, so one replica fewer may
    // hold where it adds under 7 % to each.
    const capacity = ok;
    let dp = Math.max(1, Math.ceil(need / capacity - 1e-9));
    if (dp > maxDp) {
      return {
        ...base,
        capacityPerReplica: capacity,
        reason: `needs ${dp} replicas, over --max-dp ${maxDp}`,
        ...(failTrial ? { binding: bindingOf(failTrial, model, 'load') } : {}),
      };
    }
    // The operating point: each replica at its share (a closed loop's users rounded up); one
    // replica at the traffic itself, not at the capacity the growth reached above it.
    let at = dp === 1 && atNeed ? atNeed : this.trial(options, this.share(need, dp));
    for (let extra = 0; !at.ok && extra < 2 && dp < maxDp; extra++) {
      dp++;
      at = this.trial(options, this.share(need, dp));
    }
    if (!at.ok)
      return {
        ...base,
        reason: `misses the SLO at its share of the load: ${at.failed.join('; ')}`,
      };
    const gpus = dp * model.config.tp;
    const price = priceOf(this.o.prices, gpuId, options.gpu.id);
    const totalTokPerS = this.servedTokPerS(at, dp);
    return {
      ...base,
      dp,
      gpus,
      feasible: true,
      capacityPerReplica: capacity,
      headroom: (capacity * dp) / need - 1,
      ...(fail === undefined ? { headroomAtLeast: true } : {}),
      at: pointMetrics(at),
      ...costOf(price, gpus, totalTokPerS),
      binding: failTrial
        ? bindingOf(failTrial, model, 'load')
        : `none within the traffic (${stepBound(model, at)})`,
    };
  }

  /**
   * A trace: the fewest replicas that serve its replay within the SLOs, each trial the whole
   * trace over `dp` replicas behind the cluster's router (which splits its sharing too):
   * doubling from one replica to the first that holds, then bisecting below it.
   */
  private traceCandidate(
    traffic: SizeTraceTraffic,
    options: EngineModelOptions,
    model: EngineModel,
    base: SizedDeployment,
    gpuId: string,
  ): SizedDeployment {
    const entries = this.o.trace ?? [];
    const refused = entries.filter(
      (e) => model.validate(Math.max(1, e.inputTokens), Math.max(1, e.outputTokens)) !== undefined,
    ).length;
    if (refused > 0) {
      return {
        ...base,
        reason: `${refused} of ${entries.length} trace requests are over max-model-len ${model.config.maxModelLen}`,
      };
    }
    const maxDp = this.o.maxDp ?? DEFAULT_MAX_DP;
    const trials = new Map<number, Trial>();
    const at = (dp: number): Trial => {
      let t = trials.get(dp);
      if (!t) {
        t = this.traceTrial(options, dp, traffic);
        trials.set(dp, t);
      }
      return t;
    };
    let failing = 0;
    let holding: number | undefined;
    let saturated: number | undefined;
    for (let dp = 1; ; dp = Math.min(maxDp, dp * 2)) {
      if (at(dp).ok) {
        holding = dp;
        break;
      }
      if (failing > 0 && !improved(at(failing), at(dp))) {
        saturated = failing;
        failing = dp;
        break;
      }
      failing = dp;
      if (dp >= maxDp) break;
    }
    if (holding === undefined) {
      const last = at(failing);
      return {
        ...base,
        reason:
          saturated !== undefined
            ? `misses the SLO at any number of replicas: ${saturated} and ${failing} miss it by about as much (${last.failed.join('; ')})`
            : `misses the SLO even at --max-dp ${maxDp} replicas: ${last.failed.join('; ')}`,
        binding: bindingOf(last, model, 'latency'),
      };
    }
    while (holding - failing > 1) {
      const mid = Math.floor((failing + holding) / 2);
      if (at(mid).ok) holding = mid;
      else failing = mid;
    }
    const dp = holding;
    const chosen = at(dp);
    const gpus = dp * model.config.tp;
    const price = priceOf(this.o.prices, gpuId, options.gpu.id);
    const totalTokPerS = this.servedTokPerS(chosen, dp);
    return {
      ...base,
      dp,
      gpus,
      feasible: true,
      at: pointMetrics(chosen),
      ...(chosen.prefixCacheHitRate !== undefined
        ? { prefixCacheHitRate: chosen.prefixCacheHitRate }
        : {}),
      ...costOf(price, gpus, totalTokPerS),
      binding:
        failing > 0
          ? bindingOf(at(failing), model, 'load')
          : `none within the traffic (${stepBound(model, chosen)})`,
    };
  }

  /** The whole trace over `dp` replicas. */
  private traceTrial(options: EngineModelOptions, dp: number, traffic: SizeTraceTraffic): Trial {
    this.simulations++;
    const engine = new EngineCluster(
      Array.from({ length: dp }, () => new EngineModel({ ...options, dp: 1 })),
    );
    const entries = this.o.trace ?? [];
    const builder = new SummaryBuilder({
      load: traceLoad(entries, { speed: traffic.speed }),
      ...(this.requestSlo ? { slo: this.requestSlo } : {}),
      latencyKeys: this.latencyKeys,
    });
    const replay = replayTraceVirtual(engine, {
      entries,
      speed: traffic.speed,
      blockTokens: traffic.blockTokens,
      onRecord: (r) => builder.add(r),
    });
    return {
      ...this.judged(builder.build()),
      kvPeak: Math.max(
        ...engine.replicas.map((m) => m.counters.peakUsedBlocks / m.memory.numGpuBlocks),
      ),
      preemptions: Math.max(...engine.replicas.map((m) => m.counters.preemptions)),
      replicas: dp,
      ...(replay.prefixCacheHitRate !== undefined
        ? { prefixCacheHitRate: replay.prefixCacheHitRate }
        : {}),
    };
  }

  /** A summary against the SLOs (and no failed request). */
  private judged(summary: RunSummary): Pick<Trial, 'summary' | 'ok' | 'failed' | 'misses'> {
    const evaluation = evaluateThresholds(summary, this.thresholds);
    const failed = evaluation.results.filter((r) => !r.ok).map((r) => r.message);
    if (summary.requests.failed > 0) failed.push(`${summary.requests.failed} requests failed`);
    // By the threshold's place in --slo (the same in every trial).
    const misses = evaluation.results.flatMap((r, i) =>
      !r.ok && r.margin !== null ? [{ threshold: i, shortfall: -r.margin }] : [],
    );
    return { summary, ok: failed.length === 0, failed, misses };
  }

  private share(need: number, dp: number): number {
    return this.o.traffic.mode === 'rate' ? need / dp : Math.ceil(need / dp);
  }

  /**
   * An upper bound on one replica's load (req/s): every request's prefill at full compute plus
   * its decode at the largest batch the engine can hold, with no queueing.
   */
  private loadBound(model: EngineModel): number {
    // Sessions: their prompts' lengths (history, cache hits) are known only by running them.
    if (this.o.traffic.mode === 'users' || this.sessions) return Number.POSITIVE_INFINITY;
    const context = this.meanInput + this.meanOutput / 2;
    const batch = Math.max(
      1,
      Math.min(
        model.config.maxNumSeqs,
        Math.floor(model.memory.kvTokens / (this.meanInput + this.meanOutput)),
      ),
    );
    const decode = model.cost.stepTime({
      tokens: batch,
      sampledRows: batch,
      sequences: batch,
      attentionPairs: batch * context,
      kvTokensTouched: batch * context,
    }).totalS;
    const prefill = model.cost.stepTime({
      tokens: this.meanInput,
      sampledRows: 1,
      sequences: 1,
      attentionPairs: (this.meanInput * this.meanInput) / 2,
      kvTokensTouched: this.meanInput,
    }).totalS;
    return 1 / ((this.meanOutput * decode) / batch + prefill);
  }

  trial(options: EngineModelOptions, load: number): Trial {
    this.simulations++;
    const engine = new EngineCluster(options);
    const spec: LoadSpec =
      this.o.traffic.mode === 'rate'
        ? { mode: 'open', rate: load, arrival: 'poisson' }
        : { mode: 'closed', concurrency: Math.max(1, Math.round(load)) };
    const seed = this.o.seed ?? DEFAULT_SEED;
    const builder = new SummaryBuilder({
      load: spec,
      ...(this.requestSlo ? { slo: this.requestSlo } : {}),
      latencyKeys: this.latencyKeys,
    });
    const inputSeed = streamSeed(seed, 'input');
    const outputSeed = streamSeed(seed, 'output');
    const scenario = this.o.scenario;
    const common = {
      engine,
      load: spec,
      requests: this.requests,
      warmupRequests: Math.ceil(this.requests / 10),
      seed,
      // Users' sends straggle as a real client's do: in lockstep, equal requests never put a
      // prompt beside another's decode, and p99 ITL read a tenth of the server's.
      clientTurnaroundMs: CLIENT_TURNAROUND_MS,
      onRecord: (r: RequestRecord) => builder.add(r),
    };
    if (this.sessions) {
      simulateRun({
        ...common,
        endpoint: 'chat',
        nextSession: this.sessions,
        wire: { options: sessionRequestOptions(scenario, engine.config.model.id) },
      });
    } else {
      simulateRun({
        ...common,
        endpoint: 'completions',
        nextRequest: (id) => {
          const input = sampleLength(scenario.input, inputSeed, id);
          return {
            prompt: '',
            promptWords: input,
            requestedInputTokens: input,
            requestedOutputTokens: sampleLength(scenario.output, outputSeed, id),
          };
        },
      });
    }
    const replica = engine.replicas[0];
    return {
      ...this.judged(builder.build()),
      kvPeak: replica.counters.peakUsedBlocks / replica.memory.numGpuBlocks,
      preemptions: replica.counters.preemptions,
    };
  }
}

/** One replica's virtual run at a load: its summary, and whether it held the SLOs (else which missed). */
export type SizePointSimulator = (
  engine: EngineModelOptions,
  load: number,
) => { summary: RunSummary; ok: boolean; failed: string[] };

/**
 * One replica of an engine at a load (req/s, or users), as the search tries each candidate:
 * `size --verify` predicts the point it measures with the same virtual run. The workload is
 * built once; each call is a fresh engine in virtual time.
 */
export async function sizePointSimulator(o: SizeOptions): Promise<SizePointSimulator> {
  const { thresholds, requestSlo } = checkOptions(o);
  const search = new Search(o, thresholds, requestSlo, await sessionsOf(o));
  return (engine, load) => search.trial(engine, load);
}

/** A deployment's price per hour and per million output tokens, where its GPU has a price. */
function costOf(
  pricePerGpuHour: number | undefined,
  gpus: number,
  outputTokPerS: number,
): Pick<SizedDeployment, 'costPerHour' | 'costPerMillionOutputTokens'> {
  if (pricePerGpuHour === undefined) return {};
  const costPerHour = pricePerGpuHour * gpus;
  return {
    costPerHour,
    costPerMillionOutputTokens:
      outputTokPerS > 0 ? (costPerHour / (outputTokPerS * 3600)) * 1e6 : undefined,
  };
}

/**
 * Whether twice the replicas brought a trace's missed SLOs closer by more than 5 %: past where
 * they do not, what misses is the requests themselves (the longest prompts on an idle engine),
 * which no count of replicas mends. Failed requests alone are taken as mendable.
 */
function improved(before: Trial, after: Trial): boolean {
  const shortfall = (t: Trial) => new Map(t.misses.map((m) => [m.threshold, m.shortfall] as const));
  const was = shortfall(before);
  const now = shortfall(after);
  if (now.size === 0) return true;
  for (const [threshold, missed] of now) {
    const earlier = was.get(threshold);
    if (earlier === undefined || missed < 0.95 * earlier) return true;
  }
  return false;
}

/** Requests a session of the scenario sends on average: its turns, or an agent's calls and answer. */
function requestsPerSession(s: Scenario): number {
  if (s.agent) return meanOf(s.agent.steps) * s.agent.fanOut + 1;
  return s.session ? meanOf(s.session.turns) : 1;
}

/** How the client asks the built-in simulator for a session's turns (`run`'s defaults). */
function sessionRequestOptions(s: Scenario, model: string): BackendOptions {
  const plain = { model, temperature: 0, ignoreEos: true, continuousUsageStats: false };
  return withReasoning({ endpoint: 'chat', ...plain }, s);
}

function pointMetrics(t: Trial): SizePointMetrics {
  const l = t.summary.latency;
  const replicas = t.replicas ?? 1;
  const p99 = (d: { count: number; p99: number } | undefined) =>
    d && d.count > 0 && Number.isFinite(d.p99) ? d.p99 : null;
  return {
    ttftP99Ms: p99(l.ttftMs),
    itlP99Ms: p99(l.itlMs),
    tpotP99Ms: p99(l.tpotMs),
    outputTokPerS: t.summary.throughput.outputTokensPerS / replicas,
    kvPeak: t.kvPeak,
    preemptions: t.preemptions,
  };
}

/**
 * What stopped one replica at the load that failed: the SLOs it missed, and behind them KV
 * memory (the cache full or requests preempted) or the step's own bound.
 */
function bindingOf(t: Trial, model: EngineModel, at: 'latency' | 'load'): string {
  const names = t.failed.map((f) => f.split(' ')[0]).join(', ');
  const memory = t.kvPeak >= 0.95 || t.preemptions > 0;
  const behind = memory
    ? `KV memory (${Math.round(t.kvPeak * 100)} % used${t.preemptions > 0 ? `, ${t.preemptions} preempted` : ''})`
    : stepBound(model, t);
  return `${names || 'requests failed'}${at === 'load' ? ' past its capacity' : ''}: ${behind}`;
}

/** Whether one replica's decode step at its mean running batch is bound by compute, weights or KV reads, or overheads. */
function stepBound(model: EngineModel, t: Trial): string {
  const counted = Math.max(1, t.summary.requests.completed);
  const meanInput = t.summary.tokens.input / counted;
  const meanOutput = t.summary.tokens.output / counted;
  const batch = Math.max(1, Math.round(t.summary.load.meanConcurrency / (t.replicas ?? 1)));
  const context = meanInput + meanOutput / 2;
  const s = model.cost.stepTime({
    tokens: batch,
    sampledRows: batch,
    sequences: batch,
    attentionPairs: batch * context,
    kvTokensTouched: batch * context,
  });
  if (s.overheadS > s.totalS / 2) return 'step overheads (CPU-bound steps)';
  if (s.commS > s.totalS / 3) return 'TP communication';
  if (s.attentionS > s.gemmS) return 'memory bandwidth (KV reads)';
  return s.gemmComputeBound ? 'compute (GEMMs)' : 'memory bandwidth (weights)';
}

/**
 * Marks the feasible deployments no other is both cheaper and faster than. The front is over one
 * unit: dollars per hour once any deployment has a price, else GPUs. A deployment without a price
 * cannot be placed on a dollar axis, so beside priced ones it is listed but never on the front
 * (mixing its GPU count in as if dollars put unpriced rows on the front and the cheapest off it).
 */
export function markPareto(rows: SizedDeployment[]): void {
  const measured = rows.filter((r) => r.feasible && r.at?.ttftP99Ms != null);
  const priced = measured.some((r) => r.costPerHour !== undefined);
  const cost = (r: SizedDeployment) => (priced ? r.costPerHour : r.gpus);
  const onAxis = measured.filter((r) => cost(r) !== undefined);
  for (const r of rows) if (r.feasible) r.pareto = false;
  for (const r of onAxis) {
    const c = cost(r) as number;
    const t = r.at?.ttftP99Ms as number;
    r.pareto = !onAxis.some((o) => {
      const oc = cost(o) as number;
      const ot = o.at?.ttftP99Ms as number;
      return o !== r && oc <= c && ot <= t && (oc < c || ot < t);
    });
  }
}

/** Feasible first; then the priced by cost per hour; then by GPUs, p99 TTFT. */
function rank(a: SizedDeployment, b: SizedDeployment): number {
  if (a.feasible !== b.feasible) return a.feasible ? -1 : 1;
  if (!a.feasible) return 0;
  const pa = a.costPerHour ?? Infinity;
  const pb = b.costPerHour ?? Infinity;
  if (pa !== pb) return pa - pb;
  if (a.gpus !== b.gpus) return a.gpus - b.gpus;
  return (a.at?.ttftP99Ms ?? Infinity) - (b.at?.ttftP99Ms ?? Infinity);
}
