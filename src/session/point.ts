/**
 * One measurement of a load point, the one implementation behind `run`, sweeps and probes:
 * against a server on worker threads (or in this thread when each request is shaped by a
 * function), or through the engine model in virtual time. Each point writes records.jsonl
 * (and telemetry.jsonl, client-health.json) into its own directory as it runs.
 */
import { performance } from 'node:perf_hooks';
import {
  type CacheState,
  cacheStateOf,
  prefixCacheWarning,
  workloadSharesPrefixes,
} from '../analysis/prefixCache.js';
import { withApiKey } from '../backends/request.js';
import type { RequestSpec } from '../backends/types.js';
import { describeError, InfergaugeError } from '../errors.js';
import type { LoadSpec, ShardIndex } from '../load.js';
import { createRunClock, type RunClock } from '../loadgen/clock.js';
import { runDeadlineS } from '../loadgen/deadline.js';
import { openFilesLimit, openFilesNotice } from '../loadgen/openFiles.js';
import {
  connectionsToWarm,
  type LoadgenProgress,
  type LoadgenResult,
  openConnections,
  runLoadgen,
} from '../loadgen/run.js';
import { inSequence, maxParts, type ShardPart, shardOf, wholeRun } from '../loadgen/shard.js';
import {
  defaultWorkers,
  type FailedWorker,
  runWorkers,
  type TerminatedWorker,
  testOnly,
  WORKER_START_LEAD_MS,
  workerAnswerMs,
} from '../loadgen/workers.js';
import { type LiveDelta, LiveRecorder, LiveView } from '../metrics/live.js';
import { type RunSummary, SummaryBuilder, type Warning } from '../metrics/summary.js';
import { UntilTracker } from '../metrics/until.js';
import { warning } from '../metrics/warnings.js';
import { agentTraceSource, type RunPlan, redactPlan } from '../plan/runPlan.js';
import type { RequestRecord } from '../record.js';
import { readRecords } from '../results/jsonl.js';
import { hasResult, resultPath } from '../results/layout.js';
import { type ManifestAbout, openRunDir } from '../results/runFiles.js';
import type { EngineCluster } from '../sim/cluster.js';
import { describeEngine, perReplica } from '../sim/describe.js';
import { type EngineCounters, EngineModel, type EngineModelOptions } from '../sim/engineModel.js';
import type { EngineCalibration } from '../sim/options.js';
import { seriesKey } from '../telemetry/prometheus.js';
import { recordTelemetry } from '../telemetry/scraper.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { VERSION } from '../version.js';
import { sessionBounds } from '../workload/conversations.js';
import { pointPromptSalt } from '../workload/promptSalt.js';
import {
  describeScenario,
  isSessionScenario,
  type Scenario,
  withReasoning,
} from '../workload/scenarios.js';
import type { Tokenizer } from '../workload/tokenizer.js';
import { TRACE_BLOCK_TOKENS, traceSessions } from '../workload/trace.js';
import { type LoadedWorkload, loadWorkload } from '../workload/workload.js';
import { resetTargetCache } from './cacheReset.js';
import { type PointInfo, type SessionEvents, SNAPSHOT_INTERVAL_MS } from './events.js';
import {
  type HitRateSetup,
  hitRateSetup,
  judgeHitRate,
  liveBlockTokens,
  primeEngine,
  primeServer,
} from './hitRatePrime.js';
import type { VirtualReplay } from './predictVirtual.js';
import { environmentFields } from './serverEngine.js';
import { inSession } from './session.js';
import {
  type LiveTarget,
  type Notify,
  openTarget,
  type PreparedRun,
  randomPromptSalt,
  requestOptions,
  type Target,
  telemetrySources,
  type VirtualTarget,
  workloadSource,
} from './target.js';

/** One measurement: a load and a workload, for a fixed number of requests or a duration. */
export interface Point {
  load: LoadSpec;
  scenario: Scenario;
  requests?: number;
  durationS?: number;
  warmupRequests?: number;
  /**
   * Where records.jsonl, telemetry.jsonl, manifest.json and summary.json go (the session's
   * results output writes them); none: nothing is saved (a library measuring in memory).
   */
  dir?: string;
  /** Replaces the scenario's workload (probes shape each request themselves). */
  nextRequest?: (id: number) => RequestSpec;
  /** Only this process's shard of the point (`--shard`; several machines run the others). */
  shard?: ShardIndex;
  /** The shared instant the schedule starts at (`--start-at`), instead of when ready. */
  startAt?: { iso: string; epochMs: number };
}

export interface PointResult {
  summary: RunSummary;
  serverMetrics?: ServerMetricsSummary;
  /** The point as its session told it (its id and directory). */
  point?: PointInfo;
}

/** The moment a point's schedule is set: its clock, and what this process sends of it. */
export interface PointStart {
  clock: RunClock;
  part: ShardPart;
  /** Worker threads sending it: 0 when it runs in this thread; absent in virtual time. */
  workers?: number;
}

export interface PointHooks {
  /**
   * The session the point belongs to, told everything it does (its outputs write the results
   * directory). Without one, a session of its own saves the point into `point.dir`, if any.
   */
  session?: SessionEvents;
  /** Warnings of the caller's own, added to the summary before it is told and saved. */
  warnings?(summary: RunSummary): Warning[];
  /** Whether summary.json keeps the server's metrics beside the summary (default: yes). */
  saveServerMetrics?: boolean;
  /** Send nothing more; requests in flight finish. */
  stop?: AbortSignal;
  /** Cancel the requests in flight too. */
  cancel?: AbortSignal;
  onNotice?: Notify;
  /** Live counts of sent, finished and failed requests, updated as they change. */
  progress?: LoadgenProgress;
  /** Called once the schedule's clock is set, before the first request (or simulated step). */
  onStart?(start: PointStart): void;
}

/** A point's result, and in virtual time what the engine did, in one line. */
export type Measured = PointResult & { virtualRun?: string };

/** A shard may start this late after --start-at; later, its schedule would start in a burst. */
const LATE_START_US = 1e6;

/**
 * Measures one point against a target and tells its session (pointStarted, its records and
 * telemetry, pointFinished with the summary and the caller's warnings).
 */
export async function measurePoint(
  target: Target,
  point: Point,
  hooks: PointHooks = {},
): Promise<Measured> {
  // Refused before anything is sent: a directory that holds a run is never written into.
  if (point.dir !== undefined) openRunDir(point.dir);
  // Emptied before the point, so that its hits are its own workload's (virtual time starts
  // every point with an empty cache of its own).
  if (target.kind === 'live' && target.plan.resetCache) await resetTargetCache(target);
  const run = (session: SessionEvents) => {
    // A session whose results can no longer be written measures nothing more.
    if (session.failure) throw session.failure;
    const info = session.nextPoint({
      ...(point.dir !== undefined ? { dir: point.dir } : {}),
      load: point.load,
      scenario: point.scenario.name,
    });
    return target.kind === 'virtual'
      ? measureVirtual(target, point, info, session, hooks)
      : measureLive(target, point, info, session, hooks);
  };
  if (hooks.session) return run(hooks.session);
  // Measured on its own (the library's measurePoint without a session): a session of its own.
  const own = {
    command: 'measurePoint',
    kind: 'run' as const,
    root: point.dir ?? '',
    rootIsPoint: true,
    plan: redactPlan(target.plan),
    save: point.dir !== undefined,
    html: false,
  };
  return (await inSession(own, async (s) => ({ code: 0, measured: await run(s) }))).measured;
}

/** What a point's manifest says: the server or engine, the model, the workload, the plan. */
function pointManifest(
  target: Target,
  point: Point,
  info: PointInfo,
  start: { startedAt: string; workers?: number; part: ShardPart; cacheState: CacheState },
): ManifestAbout {
  const { plan } = target;
  const { server } = serverAbout(target);
  const overhead = target.promptOverhead;
  const sessions = isSessionScenario(point.scenario);
  const warmupRequests = point.warmupRequests ?? 0;
  return {
    startedAt: start.startedAt,
    server,
    model: target.model,
    workload: {
      scenario: describeScenario(point.scenario),
      tokenizer: target.tokenizer.name,
      tokenizerExact: target.tokenizer.exact,
      // This point's own (the plan's promptSalt is the session's): what its prompts were made with.
      promptSalt: promptSaltOf(target, info),
      promptOverheadTokens: overhead.tokens,
      ...(overhead.note ? { promptOverheadNote: overhead.note } : {}),
    },
    plan: redactPlan(plan),
    load: point.load,
    scenario: point.scenario.name,
    cacheState: start.cacheState,
    ...(start.workers !== undefined
      ? {
          execution: {
            workers: start.workers,
            // Opened before the clock started, so the first wave does not time connects.
            warmConnections: connectionsToWarm(start.part.load),
            ...(point.shard ? { shard: point.shard, shardLoad: start.part.load } : {}),
            ...(point.startAt ? { startAt: point.startAt.iso } : {}),
          },
        }
      : {}),
    windows: {
      warmupRequests,
      measuredRequests: point.requests ?? null,
      measuredDurationS: point.durationS ?? null,
      ...(sessions ? { unit: 'sessions' as const } : {}),
    },
  };
}

/**
 * The prompt salt of a point: each point of a session its own (pointPromptSalt), so that a
 * sweep's levels do not read each other's prefills from the server's cache. The plan's salt is
 * set when the target opens (openTarget); a target made otherwise gets one here.
 */
function promptSaltOf(target: Target, info: PointInfo): number {
  target.plan.promptSalt ??= randomPromptSalt();
  return pointPromptSalt(target.plan.promptSalt, info.index);
}

/**
 * The target in the manifest's words, and the built-in simulator in one line: live, its URL
 * and what it listed; in virtual time, the engine and its memory.
 */
export function serverAbout(target: Target): ServerAbout {
  let about = serverAbouts.get(target);
  if (!about) {
    about = describeServer(target);
    serverAbouts.set(target, about);
  }
  return about;
}

type ServerAbout = { server: Record<string, unknown>; simulator?: string };
/** Per target: the engine model's memory plan is worked out once, not at every point. */
const serverAbouts = new WeakMap<Target, ServerAbout>();

function describeServer(target: Target): ServerAbout {
  if (target.kind === 'virtual') {
    const memory = new EngineModel(target.engine).memory;
    const x = perReplica(target.engine);
    // SGLang and TensorRT-LLM start where the pool is short of the context, serving less.
    const lowered =
      memory.servedMaxModelLen !== undefined
        ? `, longest request lowered to ${memory.servedMaxModelLen} tokens as the engine does`
        : '';
    const simulator = `${describeEngine(target.engine)}, KV cache ${x}${memory.numGpuBlocks} blocks (${x}${memory.kvTokens} tokens${lowered}); virtual time`;
    return {
      server: {
        virtualTime: true,
        simulator,
        simulatorArgs: target.simulatorArgs,
        // A run on a calibration its fit warned of says so beside the flags that named it.
        ...(target.calibrationWarnings ? { calibrationWarnings: target.calibrationWarnings } : {}),
        ...(target.simulatorWarnings ? { simulatorWarnings: target.simulatorWarnings } : {}),
        memory,
        // The simulated engine is the tool's own, at the tool's version.
        ...environmentFields(
          { engine: 'infergauge-sim', engineVersion: VERSION },
          target.plan.serverInfo,
        ),
      },
      simulator,
    };
  }
  const { simulator } = target;
  return {
    server: {
      url: target.url,
      builtInSimulator: target.plan.url === undefined,
      // Chosen once per run (--http2): it changes latency, so the results say which.
      ...(target.config.protocol ? { protocol: target.config.protocol } : {}),
      ...(simulator
        ? {
            simulator,
            simulatorArgs: target.simulatorArgs,
            ...(target.calibrationWarnings
              ? { calibrationWarnings: target.calibrationWarnings }
              : {}),
            ...(target.simulatorWarnings ? { simulatorWarnings: target.simulatorWarnings } : {}),
          }
        : {}),
      // A proxy adds its own latency to every request: the numbers were measured through it.
      ...(target.proxy ? { proxy: target.proxy } : {}),
      models: target.models,
      ...environmentFields(target.environment, target.plan.serverInfo),
    },
    ...(simulator ? { simulator } : {}),
  };
}

function summaryContext(plan: RunPlan, load: LoadSpec) {
  return { load, ...(plan.slo ? { slo: plan.slo } : {}) };
}

/**
 * Against a server. The load (or this process's shard of it) runs on worker threads; this
 * thread tells the session their records as they come and merges their summaries. With
 * `--workers 0` it runs in this thread instead, and so do a probe's points: its own request
 * function cannot cross to a worker.
 */
async function measureLive(
  target: LiveTarget,
  point: Point,
  info: PointInfo,
  session: SessionEvents,
  hooks: PointHooks,
): Promise<Measured> {
  const { plan } = target;
  // A probe shapes its own requests: the hit rate is for a scenario's.
  const hitRate =
    plan.prefixHitRate !== undefined && !point.nextRequest
      ? hitRateSetup(plan.prefixHitRate, point.scenario, {
          blockTokens: liveBlockTokens(target),
          overheadTokens: target.promptOverhead.tokens,
        })
      : undefined;
  const asked = point.scenario;
  if (hitRate) point = { ...point, scenario: hitRate.scenario };
  const warmupRequests = point.warmupRequests ?? 0;
  const whole = wholeRun(point.load, warmupRequests, point.requests);
  const part = point.shard ? shardOf(whole, point.shard) : whole;
  const workers =
    point.nextRequest || plan.workers === 0
      ? 0
      : Math.min(plan.workers ?? defaultWorkers(part), maxParts(part));
  if (workers > 0 && plan.workers !== undefined && workers < plan.workers) {
    hooks.onNotice?.(
      `${workers} workers, not ${plan.workers}: each needs at least one request in flight`,
    );
  }
  const files = openFilesNotice(part, openFilesLimit());
  if (files) hooks.onNotice?.(files);
  const c: LiveContext = {
    target,
    point,
    info,
    // A server at --url comes with whatever its prefix cache holds; the built-in simulator
    // starts empty, for the session's first point only (the next ones find what it left).
    cacheState: cacheStateOf({
      reset: plan.resetCache === true,
      freshSimulator: target.simulator !== undefined && info.index === 0,
      ...(hitRate ? { primedHitRate: hitRate.plan.rate } : {}),
    }),
    ...(hitRate ? { hitRate } : {}),
    askedScenario: asked,
    session,
    hooks,
    part,
    workers,
    builder: new SummaryBuilder(summaryContext(plan, part.load)),
    progress: hooks.progress ?? { sent: 0, finished: 0, failed: 0, inFlight: 0 },
    deadlineS: pointDeadlineS(target, point),
    deadline: new AbortController(),
    ...(plan.until
      ? { until: { tracker: new UntilTracker(plan.until), stop: new AbortController() } }
      : {}),
    // Live metrics cost a little on every record: kept only when an output listens.
    ...(session.wants('snapshot')
      ? {
          live: new LiveView({
            ...(part.measured.count !== undefined && !isSessionScenario(point.scenario)
              ? { totalRequests: part.measured.count }
              : {}),
            ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
          }),
        }
      : {}),
  };
  // Before the clock, and so before the first scrape: the counters move for the measured phase.
  if (hitRate) {
    const workload = await loadWorkload(liveWorkload(c));
    await primeServer(target, hitRate, workload, liveSignals(c).cancelSignal);
  }
  const timers = pointTimers(c);
  let sent: Sent;
  let serverMetrics: ServerMetricsSummary | undefined;
  try {
    sent =
      workers === 0
        ? await sendInThread(c, timers.started)
        : await sendOnWorkers(c, timers.started);
  } finally {
    serverMetrics = await timers.stop();
  }
  return finishLive(c, sent, serverMetrics);
}

/** What one live point works with, from its start to its summary. */
interface LiveContext {
  target: LiveTarget;
  point: Point;
  info: PointInfo;
  /** The state of the server's prefix cache the point starts in. */
  cacheState: CacheState;
  /** `--prefix-hit-rate`: how the point's prompts reach it. */
  hitRate?: HitRateSetup;
  /** The point's scenario as asked, before a --prefix-hit-rate made it its own. */
  askedScenario: Scenario;
  session: SessionEvents;
  hooks: PointHooks;
  /** What this process sends of the point (its shard, or all of it). */
  part: ShardPart;
  /** Worker threads sending it; 0: this thread. */
  workers: number;
  builder: SummaryBuilder;
  progress: LoadgenProgress;
  /** Past this many seconds from the schedule's start the point is stopped and cancelled. */
  deadlineS: number;
  deadline: AbortController;
  /** `--until`: the rule following the records, and the stop it fires once its target is met. */
  until?: { tracker: UntilTracker; stop: AbortController };
  /** The point's live metrics, when an output listens for snapshots; fed by every thread. */
  live?: LiveView;
  /** The point's clock, once its schedule is set (live deltas are placed on it). */
  clock?: RunClock;
  /** With --workers 0: hands this thread's live counts since the last call to `live`. */
  takeLive?: () => void;
}

/** How the sending went: each thread's result, the threads lost, the records told. */
interface Sent {
  results: LoadgenResult[];
  terminated: TerminatedWorker[];
  failed: FailedWorker[];
  /** With --workers 0: why the engine failed after the start, when it did. */
  inThreadFailure?: string;
  recordsTold: number;
}

/**
 * Every run ends: past its hard deadline it is stopped and cancelled (and a worker that does
 * not answer is terminated, runWorkers). A session is the unit of a session scenario: every
 * step may take the whole timeout.
 */
function pointDeadlineS(target: LiveTarget, point: Point): number {
  const { plan } = target;
  const bounds = sessionBounds(point.scenario, {
    ...(plan.dataset ? { dataset: plan.dataset.data } : {}),
    ...(plan.trace ? { traceSessions: traceSessions(plan.trace.entries) } : {}),
    ...(plan.trace?.speed !== undefined ? { speed: plan.trace.speed } : {}),
    ...agentTraceSource(plan),
  });
  return runDeadlineS({
    load: point.load,
    warmupRequests: point.warmupRequests ?? 0,
    ...(point.requests !== undefined ? { requests: point.requests } : {}),
    ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
    timeoutS: bounds.steps * (target.config.timeoutMs / 1000 + bounds.pauseMs / 1000),
    graceS: plan.graceS,
    seed: plan.seed,
  });
}

/**
 * What starts with the point's schedule: the hard deadline, telemetry sampling, the session's
 * pointStarted and its snapshots. `stop` ends them and returns the server's metrics.
 */
function pointTimers(c: LiveContext) {
  const { target, point, info, session, hooks, part, workers, progress, deadlineS } = c;
  const { plan } = target;
  let deadlineTimer: NodeJS.Timeout | undefined;
  let telemetryStart: NodeJS.Timeout | undefined;
  let snapshots: NodeJS.Timeout | undefined;
  let telemetry: ReturnType<typeof recordTelemetry> | undefined;
  const started = (clock: RunClock) => {
    // Counted from the schedule's start (the clock reads negative until then).
    const untilStartMs = Math.max(0, -clock.nowUs() / 1000);
    deadlineTimer = setTimeout(
      () => {
        hooks.onNotice?.(
          `the run passed its hard deadline (${deadlineS.toFixed(0)} s: requests at their timeout plus grace); stopping it and cancelling the requests in flight`,
        );
        c.deadline.abort();
      },
      Math.min(untilStartMs + deadlineS * 1000, 2 ** 31 - 1),
    );
    const sampling = plan.telemetry;
    if (sampling) {
      // Sampling starts with the schedule, so every snapshot is on the run's timeline (timers
      // may fire up to a millisecond early: check the clock, not the timer).
      const start = () => {
        const leftMs = -clock.nowUs() / 1000;
        if (leftMs > 0) {
          telemetryStart = setTimeout(start, leftMs + 1);
          return;
        }
        telemetry = recordTelemetry({
          sources: telemetrySources(sampling),
          intervalMs: sampling.intervalS * 1000,
          nowMs: () => clock.nowUs() / 1000,
          headers: withApiKey(plan.headers, target.apiKey),
          ...(plan.tls?.material ? { tls: plan.tls.material } : {}),
          ...(target.config.proxy ? { proxy: target.config.proxy } : {}),
          sink: {
            write: (snapshot) => session.telemetry({ point: info, snapshot }),
            close: () => {},
          },
        });
      };
      start();
    }
    hooks.onStart?.({ clock, part, workers });
    const counted = part.measured.count;
    session.pointStarted({
      point: info,
      manifest: pointManifest(target, point, info, {
        startedAt: clock.originIso,
        workers,
        part,
        cacheState: c.cacheState,
      }),
      progress,
      nowUs: () => clock.nowUs(),
      ...(counted !== undefined && !isSessionScenario(point.scenario)
        ? { totalRequests: counted + (part.warmup.count ?? 0) }
        : {}),
    });
    c.clock = clock;
    const live = c.live;
    if (live) {
      snapshots = setInterval(() => {
        c.takeLive?.();
        const atS = clock.nowUs() / 1e6;
        session.snapshot({
          point: info,
          counts: progress,
          atS,
          live: live.snapshot(atS, progress),
        });
      }, SNAPSHOT_INTERVAL_MS);
    }
  };
  return {
    started,
    stop: async (): Promise<ServerMetricsSummary | undefined> => {
      clearTimeout(deadlineTimer);
      clearTimeout(telemetryStart);
      clearInterval(snapshots);
      return telemetry?.stop();
    },
  };
}

/** The stop and cancel signals of a live point, each also fired by its hard deadline. */
function liveSignals(c: LiveContext) {
  // The session's halt (its results can no longer be written) stops sending and cancels what
  // is in flight: a request whose record cannot be kept is not worth waiting for.
  const withDeadline = (signal: AbortSignal | undefined) =>
    AbortSignal.any([...(signal ? [signal] : []), c.deadline.signal, c.session.halt]);
  // The --until rule stops sending as the end of the plan does: what is in flight finishes.
  const stop = c.until
    ? AbortSignal.any([c.until.stop.signal, ...(c.hooks.stop ? [c.hooks.stop] : [])])
    : c.hooks.stop;
  return { stopSignal: withDeadline(stop), cancelSignal: withDeadline(c.hooks.cancel) };
}

/** The workload every sender builds its requests from. */
function liveWorkload(c: LiveContext) {
  const { target, point } = c;
  return workloadSource(target.plan, point.scenario, {
    url: target.url,
    model: target.model,
    apiKey: target.apiKey,
    promptOverheadTokens: target.promptOverhead.tokens,
    promptSalt: promptSaltOf(target, c.info),
  });
}

/** `--workers 0`, or a probe's shaped requests: the load runs in this thread. */
async function sendInThread(c: LiveContext, started: (clock: RunClock) => void): Promise<Sent> {
  const { point, info, session, builder } = c;
  const config = withReasoning(c.target.config, point.scenario);
  // Built before the clock is set, as each worker builds its own before it is ready.
  const requests = point.nextRequest
    ? { nextRequest: point.nextRequest }
    : await loadWorkload(liveWorkload(c));
  const connections = await openConnections(config, c.part.load, 'nextSession' in requests);
  // The schedule starts at the clock's origin: a shared --start-at, else just after the
  // manifest is written, as with workers.
  const clock = scheduleClock(point, c.hooks.onNotice);
  const live = c.live && { view: c.live, recorder: new LiveRecorder() };
  if (live) {
    c.takeLive = () => {
      if (!live.recorder.empty) live.view.add(live.recorder.take(), clock.nowUs() / 1e6);
    };
  }
  started(clock);
  let recordsTold = 0;
  let inThreadFailure: string | undefined;
  // A failure after the start (a bug, not a deliberate error with its own exit code) ends
  // the run with what reached disk, as a failed worker does; see runWorkers.
  const result = await runLoadgen(
    {
      target: config,
      connections,
      load: c.part.load,
      ids: { ...c.part, measureFromId: point.warmupRequests ?? 0 },
      ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
      seed: c.target.plan.seed,
      ...requests,
      onRecord: (r) => {
        session.record(info, r);
        recordsTold++;
        builder.add(r);
        live?.recorder.add(r);
        if (c.until?.tracker.add(r)) c.until.stop.abort();
        // Test only (workers.ts testOnly): a bug while handling a request, after its record.
        if (testOnly.throwInThread) throw new RangeError('Invalid string length');
      },
      ...liveSignals(c),
      clock,
      startAtUs: 0,
    },
    c.progress,
  ).catch((err: unknown) => {
    if (err instanceof InfergaugeError) throw err;
    inThreadFailure = describeError(err);
    return undefined;
  });
  return {
    results: result ? [result] : [],
    terminated: [],
    failed: [],
    ...(inThreadFailure !== undefined ? { inThreadFailure } : {}),
    recordsTold,
  };
}

/** The load on worker threads: their records are told as their batches arrive. */
async function sendOnWorkers(c: LiveContext, started: (clock: RunClock) => void): Promise<Sent> {
  const { point, info, session, target } = c;
  const { backend: _backend, ...targetData } = withReasoning(target.config, point.scenario);
  let recordsTold = 0;
  const run = await runWorkers({
    workers: c.workers,
    part: { ...c.part, measureFromId: point.warmupRequests ?? 0 },
    job: {
      target: { ...targetData, backend: target.plan.backend },
      ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
      seed: target.plan.seed,
      workload: liveWorkload(c),
      summaryContext: summaryContext(target.plan, c.part.load),
      ...(c.live ? { liveIntervalMs: SNAPSHOT_INTERVAL_MS } : {}),
    },
    clockFor: () => {
      const clock = scheduleClock(point, c.hooks.onNotice);
      started(clock);
      return { clock, startAtUs: 0 };
    },
    onRecords: (text, count) => {
      session.lines(info, text, count);
      recordsTold += count;
      // --until reads the workers' records as they arrive (a parse per record, only then).
      const until = c.until;
      if (until && !until.tracker.stopped) {
        for (const line of text.split('\n')) {
          if (line.length > 0 && until.tracker.add(JSON.parse(line) as RequestRecord)) {
            until.stop.abort();
            break;
          }
        }
      }
    },
    progress: c.progress,
    ...(c.live
      ? {
          onLive: (delta: LiveDelta) => {
            const live = c.live;
            if (live && c.clock) live.add(delta, c.clock.nowUs() / 1e6);
          },
        }
      : {}),
    ...liveSignals(c),
  });
  for (const state of run.states) c.builder.merge(state);
  return { results: run.results, terminated: run.terminated, failed: run.failed, recordsTold };
}

/** The point's summary, with how it was cut short, told to the session as it finishes. */
async function finishLive(
  c: LiveContext,
  sent: Sent,
  serverMetrics: ServerMetricsSummary | undefined,
): Promise<Measured> {
  const { point, builder } = c;
  const { results, terminated, failed, inThreadFailure } = sent;
  // A terminated or failed worker's summary state is lost with it; its records on disk are not.
  const lost = [...terminated, ...failed];
  const theirs = (id: number) =>
    lost.some((t) => inSequence(t.part.warmup, id) || inSequence(t.part.measured, id));
  if (lost.length > 0 && point.dir !== undefined && hasResult(point.dir, 'records')) {
    for await (const r of readRecords(resultPath(point.dir, 'records'))) {
      if (theirs(r.id)) builder.add(r);
    }
  }
  // Threads that were terminated or failed report no health: with none left it says so.
  const health = results.map((r) => r.clientHealth);
  const deadlinePassed = c.deadline.signal.aborted;
  // A stop by the --until rule is the run's planned end; the user's own (Ctrl-C) is not.
  const stoppedByRule = c.until?.tracker.stopped === true && !c.hooks.stop?.aborted;
  const summary = builder.build({
    clientHealth: health,
    // A failure cut its share of the run short, as a stop does: what finished is counted.
    interrupted:
      deadlinePassed ||
      (!stoppedByRule && results.some((r) => r.stoppedBy === 'signal')) ||
      failed.length > 0 ||
      inThreadFailure !== undefined,
    unsentRequests: results.reduce((n, r) => n + r.unsentRequests, 0),
  });
  if (c.until) summary.until = c.until.tracker.outcome(summary.latency);
  summary.warnings.push(
    ...endWarnings({
      ...(deadlinePassed ? { deadlineS: c.deadlineS } : {}),
      terminated,
      failed,
      workers: c.workers,
      ...(inThreadFailure !== undefined
        ? { inThreadFailure: { reason: inThreadFailure, recordsWritten: sent.recordsTold } }
        : {}),
    }),
  );
  // The server's warnings (KV cache full, preemptions) stand with the run's.
  if (serverMetrics) summary.warnings.push(...serverMetrics.warnings);
  // Whoever answered was not checked: said with every result the run writes.
  if (c.target.plan.tls?.insecure) summary.warnings.push(warning('tls_unverified', {}));
  const sharing = workloadSharesPrefixes(c.point.scenario, {
    dataset: c.target.plan.dataset !== undefined,
    traceBlockIds: c.target.plan.trace?.impliedHitRate !== undefined,
  });
  const cached = prefixCacheWarning(summary, serverMetrics, sharing);
  if (cached) summary.warnings.push(cached);
  summary.cacheState = c.cacheState;
  if (sharing && c.cacheState === 'uncontrolled') {
    summary.warnings.push(warning('prefix_cache_uncontrolled', {}));
  }
  if (c.hitRate) judgeHitRate(c.hitRate, serverMetrics, summary, c.hooks.onNotice);
  try {
    await predictLive(c, summary);
  } catch (err) {
    // The measured run is what counts: a prediction that cannot be made is said, not fatal.
    c.hooks.onNotice?.(
      `--calibration: no prediction intervals for this run (${(err as Error).message})`,
    );
  }
  summary.warnings.push(...(c.hooks.warnings?.(summary) ?? []));
  finalSnapshot(c);
  await c.session.pointFinished({
    point: c.info,
    summary,
    ...(serverMetrics ? { serverMetrics } : {}),
    saveServerMetrics: c.hooks.saveServerMetrics ?? true,
    threads: health,
  });
  return { summary, point: c.info, ...(serverMetrics ? { serverMetrics } : {}) };
}

/**
 * The built-in simulator on a calibration, in real time: the prediction intervals come from
 * virtual replays of the same plan on the same engine (their ratios, set on the measured figures).
 */
async function predictLive(c: LiveContext, summary: RunSummary): Promise<void> {
  const { target, point } = c;
  if (!target.calibrated || !target.engine) return;
  const { plan } = target;
  const blockTokens = new EngineModel(target.engine).config.blockSize;
  const hitRate =
    plan.prefixHitRate !== undefined && !point.nextRequest
      ? hitRateSetup(plan.prefixHitRate, c.askedScenario, { blockTokens, overheadTokens: 0 })
      : undefined;
  const replay = await virtualReplay({
    plan,
    model: target.model,
    point,
    scenario: hitRate?.scenario ?? c.askedScenario,
    promptSalt: promptSaltOf(target, c.info),
    blockTokens,
  });
  await predictPoint(summary, {
    plan,
    engine: target.engine,
    calibrated: target.calibrated,
    replay,
    ...(hitRate ? { hitRate } : {}),
  });
}

/** The point's last live snapshot, with every thread's last counts in: what its end shows. */
function finalSnapshot(c: LiveContext): void {
  const { live, clock } = c;
  if (!live || !clock) return;
  c.takeLive?.();
  const atS = clock.nowUs() / 1e6;
  c.session.snapshot({
    point: c.info,
    counts: c.progress,
    atS,
    live: live.snapshot(atS, c.progress, true),
    final: true,
  });
}

/**
 * How a run was cut short: its hard deadline passed (seconds), workers were terminated or
 * failed, or (--workers 0) the engine in this thread failed.
 */
function endWarnings(o: {
  deadlineS?: number;
  terminated: TerminatedWorker[];
  failed: FailedWorker[];
  workers: number;
  inThreadFailure?: { reason: string; recordsWritten: number };
}): Warning[] {
  const { deadlineS, terminated, failed, workers } = o;
  const warnings: Warning[] = [];
  if (deadlineS !== undefined) {
    warnings.push(warning('deadline_passed', { deadlineS }));
  }
  for (const t of terminated) {
    const missing = Math.max(0, t.progress.sent - t.recordsReceived);
    warnings.push(
      warning('worker_terminated', {
        worker: t.index + 1,
        workers,
        answerS: workerAnswerMs() / 1000,
        records: t.recordsReceived,
        missing,
      }),
    );
  }
  for (const t of failed) {
    const missing = Math.max(0, t.progress.sent - t.recordsReceived);
    warnings.push(
      warning('worker_failed', {
        worker: t.index + 1,
        workers,
        reason: t.reason,
        records: t.recordsReceived,
        missing,
      }),
    );
  }
  if (o.inThreadFailure) {
    const { reason, recordsWritten } = o.inThreadFailure;
    warnings.push(warning('loadgen_failed', { reason, records: recordsWritten }));
  }
  return warnings;
}

/**
 * The run's clock, set once every sender (worker, or this thread) is ready: its origin is the
 * shared --start-at, or a short lead from now (so every worker has had the start message, and
 * the manifest is written, by then).
 */
function scheduleClock(point: Point, onNotice: Notify | undefined): RunClock {
  const { startAt } = point;
  const clock = startAt
    ? createRunClock({ originEpochMs: startAt.epochMs })
    : createRunClock({ startInMs: WORKER_START_LEAD_MS });
  const lateUs = clock.nowUs();
  if (startAt && lateUs > LATE_START_US) {
    throw new Error(
      `ready ${(lateUs / 1e6).toFixed(1)} s after --start-at ${startAt.iso}, when the shared schedule had begun; choose a later --start-at (every shard must be running by then)`,
    );
  }
  if (startAt && lateUs < -1e6) {
    onNotice?.(`waiting ${(-lateUs / 1e6).toFixed(1)} s for --start-at ${startAt.iso}`);
  }
  return clock;
}

/** How to run a point in virtual time again: its workload made afresh, and simulateRun's options. */
interface VirtualReplayParts {
  workload: () => Promise<LoadedWorkload>;
  runOptions: VirtualReplay['run'];
}

/**
 * A point as virtual time runs it (the built-in simulator's words, its seed and salt, a trace's
 * shared blocks, the wire shapes where answers need them): the run itself, and the replays its
 * prediction intervals draw (session/predictVirtual.ts), of a virtual or a real-time run.
 */
async function virtualReplay(o: {
  plan: RunPlan;
  model: string;
  point: Point;
  /** The point's scenario as sent (a --prefix-hit-rate scenario's own). */
  scenario: Scenario;
  promptSalt: number;
  blockTokens: number;
}): Promise<VirtualReplayParts> {
  const { plan, point, scenario } = o;
  const { CLIENT_TURNAROUND_MS } = await import('../sim/virtual.js');
  const workload = (): Promise<LoadedWorkload> =>
    point.nextRequest
      ? Promise.resolve({ nextRequest: point.nextRequest })
      : loadWorkload({
          scenario,
          // The built-in simulator counts words: exact, and what its HTTP runs use too.
          tokenizer: 'words',
          tokenizerOptions: { builtInSimulator: true },
          seed: plan.seed,
          promptSalt: o.promptSalt,
          promptOverheadTokens: 0,
          wordsAreTokens: true,
          ...(plan.trace ? { trace: plan.trace.entries } : {}),
          ...(plan.trace?.speed !== undefined ? { traceSpeed: plan.trace.speed } : {}),
          ...(plan.trace?.blockTokens !== undefined
            ? { traceBlockTokens: plan.trace.blockTokens }
            : {}),
          ...agentTraceSource(plan),
          ...(plan.dataset ? { dataset: plan.dataset.data } : {}),
        });
  // Sessions, reasoning and tool calls go through the wire shapes (sim/wire.ts); plain
  // answers skip them, which is most of a sweep's cost.
  const sessions = !point.nextRequest && isSessionScenario(scenario);
  const shaped = sessions || point.scenario.reasoning !== undefined;
  // A trace's block ids share prompt blocks as its HTTP replay's texts do (sim/traceKeys.ts).
  const { tracePrefixKeys } = await import('../sim/traceKeys.js');
  const traceKeys =
    plan.trace && !point.nextRequest && !sessions
      ? tracePrefixKeys(
          plan.trace.entries,
          o.blockTokens,
          plan.trace.blockTokens ?? TRACE_BLOCK_TOKENS,
        )
      : undefined;
  return {
    workload,
    runOptions: {
      load: point.load,
      ...(point.requests !== undefined ? { requests: point.requests } : {}),
      ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
      warmupRequests: point.warmupRequests ?? 0,
      seed: plan.seed,
      // A closed loop's sends straggle as the real client's do (no lockstep of equal requests).
      clientTurnaroundMs: CLIENT_TURNAROUND_MS,
      endpoint: plan.endpoint,
      ...(traceKeys ? { prefixKeys: traceKeys } : {}),
      ...(shaped
        ? { wire: { options: withReasoning(requestOptions(plan, o.model), point.scenario) } }
        : {}),
    },
  };
}

/**
 * A calibrated point's prediction intervals (session/predictVirtual.ts), set on its summary;
 * returns the clause the simulator line adds (how many replays, how long), or ''.
 */
async function predictPoint(
  summary: RunSummary,
  o: {
    plan: RunPlan;
    engine: EngineModelOptions;
    calibrated: EngineCalibration;
    replay: VirtualReplayParts;
    hitRate?: HitRateSetup;
  },
): Promise<string> {
  if (summary.requests.completed === 0 || summary.interrupted) return '';
  const { predictRun } = await import('./predictVirtual.js');
  const startedMs = performance.now();
  const { hitRate } = o;
  const replays = await predictRun(summary, {
    engine: o.engine,
    calibrated: o.calibrated,
    run: o.replay.runOptions,
    workload: o.replay.workload,
    ...(hitRate ? { prime: (e, w) => primeEngine(e, hitRate, w) } : {}),
    ...(o.plan.predictionDraws !== undefined ? { draws: o.plan.predictionDraws } : {}),
  });
  if (replays === 0) return '';
  return `; prediction intervals: ${replays} replays in ${((performance.now() - startedMs) / 1000).toFixed(2)} s`;
}

/** In virtual time: a fresh engine model per point, no HTTP, no waiting. */
async function measureVirtual(
  target: VirtualTarget,
  point: Point,
  info: PointInfo,
  session: SessionEvents,
  hooks: PointHooks,
): Promise<Measured> {
  const { plan } = target;
  // The engine model is loaded only for virtual time: a live run never needs it.
  const [{ EngineCluster }, { simulateRun }] = await Promise.all([
    import('../sim/cluster.js'),
    import('../sim/virtual.js'),
  ]);
  const engine = new EngineCluster(target.engine);
  const hitRate =
    plan.prefixHitRate !== undefined && !point.nextRequest
      ? hitRateSetup(plan.prefixHitRate, point.scenario, {
          blockTokens: engine.config.blockSize,
          overheadTokens: 0,
        })
      : undefined;
  // Every point has an engine of its own: its cache starts empty, or primed.
  const cacheState: CacheState = hitRate ? { primed: hitRate.plan.rate } : 'flushed';
  const scenario = hitRate?.scenario ?? point.scenario;
  const warmupRequests = point.warmupRequests ?? 0;
  const clock = createRunClock();
  const part = wholeRun(point.load, warmupRequests, point.requests);
  hooks.onStart?.({ clock, part });
  session.pointStarted({
    point: info,
    manifest: pointManifest(target, { ...point, scenario }, info, {
      startedAt: clock.originIso,
      part,
      cacheState,
    }),
    // Virtual time has no live clock: the whole run takes as long as the engine model needs.
    nowUs: () => 0,
  });
  const replay = await virtualReplay({
    plan,
    model: target.model,
    point,
    scenario,
    promptSalt: promptSaltOf(target, info),
    blockTokens: engine.config.blockSize,
  });
  const { runOptions } = replay;
  const workload = await replay.workload();
  if (hitRate) primeEngine(engine, hitRate, workload);
  const builder = new SummaryBuilder(summaryContext(plan, point.load));
  const until = plan.until ? new UntilTracker(plan.until) : undefined;
  const startedMs = performance.now();
  const result = simulateRun({
    engine,
    ...runOptions,
    ...workload,
    onRecord: (r) => {
      session.record(info, r);
      builder.add(r);
      until?.add(r);
    },
    ...(until ? { stopped: () => until.stopped } : {}),
  });
  const wallS = (performance.now() - startedMs) / 1000;
  const summary = builder.build({ unsentRequests: result.unsentRequests });
  if (until) summary.until = until.outcome(summary.latency);
  summary.cacheState = cacheState;
  const predictionNote = target.calibrated
    ? await predictPoint(summary, {
        plan,
        engine: target.engine,
        calibrated: target.calibrated,
        replay,
        ...(hitRate ? { hitRate } : {}),
      })
    : '';
  summary.warnings.push(...(hooks.warnings?.(summary) ?? []));
  // The engine's own state stands in for scraped metrics: peak KV and preemptions.
  const serverMetrics = engineMetrics(engine, result.simulatedS, target.model);
  if (hitRate) {
    // An engine without prefix caching hits nothing: that is its rate, not an unknown one.
    const measured =
      serverMetrics.prefixCache ??
      (engine.config.prefixCaching
        ? undefined
        : { hitRate: 0, from: 'the simulated engine (prefix caching off)' });
    judgeHitRate(
      hitRate,
      { counters: {}, ...(measured ? { prefixCache: measured } : {}) },
      summary,
      hooks.onNotice,
    );
  }
  // In virtual time the engine's counters are told in the simulator line, not saved.
  await session.pointFinished({
    point: info,
    summary,
    serverMetrics,
    saveServerMetrics: hooks.saveServerMetrics ?? true,
  });
  return {
    summary,
    point: info,
    serverMetrics,
    virtualRun: `${result.simulatedS.toFixed(1)} simulated s in ${wallS.toFixed(2)} s, ${virtualRunCounts(engine)}${predictionNote}`,
  };
}

/**
 * Steps, preemptions and peak KV of a virtual run: of the one engine, or with replicas summed
 * (steps, preemptions) and the fullest replica's peak KV, then each replica's in brackets.
 */
function virtualRunCounts(engine: EngineCluster): string {
  const one = (m: EngineCluster['replicas'][number]) =>
    `${m.counters.steps} steps, ${m.counters.preemptions} preemptions, peak KV ${((m.counters.peakUsedBlocks / m.memory.numGpuBlocks) * 100).toFixed(1)}%`;
  if (engine.dp === 1) return one(engine.replicas[0]);
  const c = engine.summedCounters();
  const peak = Math.max(...engine.replicas.map((m) => m.counters.peakUsedBlocks));
  return `${engine.dp} replicas: ${c.steps} steps, ${c.preemptions} preemptions, peak KV ${((peak / engine.memory.numGpuBlocks) * 100).toFixed(1)}% (fullest replica); ${engine.replicas.map((m, r) => `replica ${r}: ${one(m)}`).join('; ')}`;
}

/**
 * A virtual run's engine counters in the shape of scraped server metrics (peaks, exact). With
 * replicas, tokens and preemptions are summed, peak KV usage is the fullest replica's, peak
 * running the sum of the replicas' peaks (an upper bound), and each replica's counters are
 * under the keys a scrape of vLLM's per-engine series would give (`engine`, `model_name`).
 */
function engineMetrics(
  engine: EngineCluster,
  simulatedS: number,
  modelName: string,
): ServerMetricsSummary {
  const c = engine.summedCounters();
  const m = engine.memory;
  const peakBlocks = Math.max(...engine.replicas.map((r) => r.counters.peakUsedBlocks));
  const counters: ServerMetricsSummary['counters'] = {};
  if (engine.dp > 1) {
    engine.replicas.forEach((replica, r) => {
      const add = (name: string, delta: number) => {
        counters[seriesKey(name, { engine: String(r), model_name: modelName })] = {
          delta,
          perS: simulatedS > 0 ? delta / simulatedS : 0,
        };
      };
      add('vllm:prompt_tokens_total', replica.counters.promptTokens);
      add('vllm:generation_tokens_total', replica.counters.generationTokens);
      add('vllm:num_preemptions_total', replica.counters.preemptions);
    });
  }
  return {
    scrapes: 0,
    failedScrapes: 0,
    windowS: simulatedS,
    counters,
    gauges: {},
    ...engineHitRate(c),
    memory: {
      scrapes: 0,
      // Means need samples over time; a virtual run keeps peaks, so the mean repeats the peak.
      kvCacheUsage: {
        mean: peakBlocks / m.numGpuBlocks,
        max: peakBlocks / m.numGpuBlocks,
      },
      running: { mean: c.peakRunning, max: c.peakRunning },
      preemptions: c.preemptions,
      promptTokens: c.promptTokens,
      generationTokens: c.generationTokens,
      // Per GPU, as before replicas: every GPU of every replica holds the same.
      gpuMemoryUsedBytes: { mean: m.deviceUsedBytes, max: m.deviceUsedBytes, total: m.totalBytes },
    },
    warnings: [],
  };
}

/**
 * The engine's own prefix-cache counters over the run (a prime phase counts nothing), in the
 * shape of a scrape's: what virtual time's hit rate is.
 */
function engineHitRate(c: EngineCounters): Pick<ServerMetricsSummary, 'prefixCache'> {
  if (!(c.prefixQueryTokens > 0)) return {};
  return {
    prefixCache: {
      hitRate: c.prefixHitTokens / c.prefixQueryTokens,
      from: "the simulated engine's prefix-cache counters",
      hitTokens: c.prefixHitTokens,
      queriedTokens: c.prefixQueryTokens,
    },
  };
}

/**
 * Runs measurement points one after another against one target: a server (`--url`), the
 * built-in simulator in its own process, or the engine model in virtual time. Sweeps, probes
 * and capacity searches are sequences of points; each point writes a run directory of its own.
 */
export interface PointRunner {
  /** What is measured, in one line (model, and the simulated deployment if any). */
  readonly description: string;
  readonly model: string;
  readonly tokenizer: Tokenizer;
  run(point: Point): Promise<PointResult>;
  close(): Promise<void>;
}

/** Points against the prepared target, each told to `session` (which saves them). */
export async function createPointRunner(
  prepared: PreparedRun & { plan: RunPlan },
  session: SessionEvents,
  stopSignal?: AbortSignal,
  onNotice: Notify = () => {},
): Promise<PointRunner> {
  const target = await openTarget(prepared, { onNotice });
  return {
    description: await describeTarget(target),
    model: target.model,
    tokenizer: target.tokenizer,
    run: async (point) => {
      const { virtualRun: _, ...result } = await measurePoint(target, point, {
        session,
        ...(stopSignal ? { stop: stopSignal } : {}),
      });
      return result;
    },
    close: () => target.close(),
  };
}

async function describeTarget(target: Target): Promise<string> {
  if (target.kind === 'live') {
    return target.simulator
      ? `${target.model}: ${target.simulator}`
      : `${target.model} at ${target.url}`;
  }
  const [{ EngineCluster }, { describeEngine }] = await Promise.all([
    import('../sim/cluster.js'),
    import('../sim/describe.js'),
  ]);
  const blocks = new EngineCluster(target.engine).totalBlocks;
  return `${target.model}: ${describeEngine(target.engine)}, KV cache ${blocks} blocks; virtual time`;
}
