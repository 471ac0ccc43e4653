/**
 * One measurement of a load point, the one implementation behind `run`, sweeps and probes:
 * against a server on worker threads (or in this thread when each request is shaped by a
 * function), or through the engine model in virtual time. Each point writes records.jsonl
 * (and telemetry.jsonl, client-health.json) into its own directory as it runs.
 */
import { performance } from 'node:perf_hooks';
import { withApiKey } from '../backends/request.js';
import type { RequestSpec } from '../backends/types.js';
import { describeError, InfergaugeError } from '../errors.js';
import type { LoadSpec, ShardIndex } from '../load.js';
import { createRunClock, type RunClock } from '../loadgen/clock.js';
import { runDeadlineS } from '../loadgen/deadline.js';
import type { TargetConfig } from '../loadgen/http.js';
import {
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
import { type RunSummary, SummaryBuilder, type Warning } from '../metrics/summary.js';
import type { RunPlan } from '../plan/runPlan.js';
import type { RequestRecord } from '../record.js';
import { JsonlWriter, readRecords, writeClientHealth } from '../results/jsonl.js';
import { resultPath } from '../results/layout.js';
import { openRunDir, writeSummary } from '../results/runFiles.js';
import type { EngineCluster } from '../sim/cluster.js';
import type { simulateRun } from '../sim/virtual.js';
import { seriesKey } from '../telemetry/prometheus.js';
import { recordTelemetry } from '../telemetry/scraper.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { sessionBounds } from '../workload/conversations.js';
import { streamSeed } from '../workload/distributions.js';
import { createPromptFactory } from '../workload/prompts.js';
import type { Scenario } from '../workload/scenarios.js';
import type { Tokenizer } from '../workload/tokenizer.js';
import { traceSessions } from '../workload/trace.js';
import { createWorkload, loadWorkload } from '../workload/workload.js';
import {
  type LiveTarget,
  type Notify,
  openTarget,
  type PreparedRun,
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
  /** Where records.jsonl, telemetry.jsonl and summary.json go. */
  dir: string;
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
}

/** The moment a point's schedule is set: its clock, and what this process sends of it. */
export interface PointStart {
  clock: RunClock;
  part: ShardPart;
  /** Worker threads sending it: 0 when it runs in this thread; absent in virtual time. */
  workers?: number;
}

export interface PointHooks {
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

/** Measures one point against a target; the caller writes the summary (with its warnings). */
export function measurePoint(
  target: Target,
  point: Point,
  hooks: PointHooks = {},
): Promise<Measured> {
  return target.kind === 'virtual'
    ? measureVirtual(target, point, hooks)
    : measureLive(target, point, hooks);
}

function summaryContext(plan: RunPlan, load: LoadSpec) {
  return { load, ...(plan.slo ? { slo: plan.slo } : {}) };
}

/**
 * Against a server. The load (or this process's shard of it) runs on worker threads; this
 * thread writes their records as they come and merges their summaries. With `--workers 0` it
 * runs in this thread instead, and so do a probe's points: its own request function cannot
 * cross to a worker.
 */
async function measureLive(target: LiveTarget, point: Point, hooks: PointHooks): Promise<Measured> {
  const { plan } = target;
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
  openRunDir(point.dir);
  const records = new JsonlWriter<RequestRecord>(resultPath(point.dir, 'records'));
  const builder = new SummaryBuilder(summaryContext(plan, part.load));
  const progress = hooks.progress ?? { sent: 0, finished: 0, failed: 0, inFlight: 0 };
  let telemetry: ReturnType<typeof recordTelemetry> | undefined;
  let telemetryStart: NodeJS.Timeout | undefined;
  // Every run ends: past its hard deadline it is stopped and cancelled, and a worker that does
  // not answer is terminated (runWorkers).
  // A session is the unit of a session scenario: every step may take the whole timeout.
  const bounds = sessionBounds(point.scenario, {
    ...(plan.dataset ? { dataset: plan.dataset.data } : {}),
    ...(plan.trace ? { traceSessions: traceSessions(plan.trace.entries) } : {}),
    ...(plan.trace?.speed !== undefined ? { speed: plan.trace.speed } : {}),
  });
  const deadlineS = runDeadlineS({
    load: point.load,
    warmupRequests,
    ...(point.requests !== undefined ? { requests: point.requests } : {}),
    ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
    timeoutS: bounds.steps * (target.config.timeoutMs / 1000 + bounds.pauseMs / 1000),
    graceS: plan.graceS,
    seed: plan.seed,
  });
  const deadline = new AbortController();
  let deadlineTimer: NodeJS.Timeout | undefined;
  const started = (clock: RunClock) => {
    // Counted from the schedule's start (the clock reads negative until then).
    const untilStartMs = Math.max(0, -clock.nowUs() / 1000);
    deadlineTimer = setTimeout(
      () => {
        hooks.onNotice?.(
          `the run passed its hard deadline (${deadlineS.toFixed(0)} s: requests at their timeout plus grace); stopping it and cancelling the requests in flight`,
        );
        deadline.abort();
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
          sink: new JsonlWriter<TelemetrySnapshot>(resultPath(point.dir, 'telemetry')),
        });
      };
      start();
    }
    hooks.onStart?.({ clock, part, workers });
  };
  const withDeadline = (signal: AbortSignal | undefined) =>
    signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
  const signals = {
    stopSignal: withDeadline(hooks.stop),
    cancelSignal: withDeadline(hooks.cancel),
  };
  let serverMetrics: ServerMetricsSummary | undefined;
  let results: LoadgenResult[];
  let terminated: TerminatedWorker[] = [];
  let failed: FailedWorker[] = [];
  /** With --workers 0: why the engine failed after the start, when it did. */
  let inThreadFailure: string | undefined;
  try {
    const config = withReasoning(target.config, point.scenario);
    const workload = workloadSource(plan, point.scenario, {
      url: target.url,
      model: target.model,
      apiKey: target.apiKey,
      promptOverheadTokens: target.promptOverhead.tokens,
    });
    if (workers === 0) {
      // Built before the clock is set, as each worker builds its own before it is ready.
      const requests = point.nextRequest
        ? { nextRequest: point.nextRequest }
        : await loadWorkload(workload);
      const connections = await openConnections(config, part.load, 'nextSession' in requests);
      // The schedule starts at the clock's origin: a shared --start-at, else just after the
      // manifest is written, as with workers.
      const clock = scheduleClock(point, hooks.onNotice);
      started(clock);
      // A failure after the start (a bug, not a deliberate error with its own exit code) ends
      // the run with what reached disk, as a failed worker does; see runWorkers.
      const result = await runLoadgen(
        {
          target: config,
          connections,
          load: part.load,
          ids: { ...part, measureFromId: warmupRequests },
          ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
          seed: plan.seed,
          ...requests,
          onRecord: (r) => {
            records.write(r);
            builder.add(r);
            // Test only (workers.ts testOnly): a bug while handling a request, after its record.
            if (testOnly.throwInThread) throw new RangeError('Invalid string length');
          },
          ...signals,
          clock,
          startAtUs: 0,
        },
        progress,
      ).catch((err: unknown) => {
        if (err instanceof InfergaugeError) throw err;
        inThreadFailure = describeError(err);
        return undefined;
      });
      results = result ? [result] : [];
    } else {
      const { backend: _backend, ...targetData } = config;
      const run = await runWorkers({
        workers,
        part: { ...part, measureFromId: warmupRequests },
        job: {
          target: { ...targetData, backend: plan.backend },
          ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
          seed: plan.seed,
          workload,
          summaryContext: summaryContext(plan, part.load),
        },
        clockFor: () => {
          const clock = scheduleClock(point, hooks.onNotice);
          started(clock);
          return { clock, startAtUs: 0 };
        },
        onRecords: (text, count) => records.writeLines(text, count),
        progress,
        ...signals,
      });
      for (const state of run.states) builder.merge(state);
      results = run.results;
      terminated = run.terminated;
      failed = run.failed;
    }
  } finally {
    records.close();
    clearTimeout(deadlineTimer);
    clearTimeout(telemetryStart);
    serverMetrics = await telemetry?.stop();
  }
  // A terminated or failed worker's summary state is lost with it; its records on disk are not.
  const lost = [...terminated, ...failed];
  const theirs = (id: number) =>
    lost.some((t) => inSequence(t.part.warmup, id) || inSequence(t.part.measured, id));
  if (lost.length > 0) {
    for await (const r of readRecords(resultPath(point.dir, 'records'))) {
      if (theirs(r.id)) builder.add(r);
    }
  }
  // Threads that were terminated or failed report no health: with none left it says so.
  const health = results.map((r) => r.clientHealth);
  // Kept raw, so that `infergauge merge` can judge shards' threads as it judges workers.
  writeClientHealth(point.dir, health);
  const summary = builder.build({
    clientHealth: health,
    // A failure cut its share of the run short, as a stop does: what finished is counted.
    interrupted:
      deadline.signal.aborted ||
      results.some((r) => r.stoppedBy === 'signal') ||
      failed.length > 0 ||
      inThreadFailure !== undefined,
    unsentRequests: results.reduce((n, r) => n + r.unsentRequests, 0),
  });
  summary.warnings.push(
    ...endWarnings({
      ...(deadline.signal.aborted ? { deadlineS } : {}),
      terminated,
      failed,
      workers,
      ...(inThreadFailure !== undefined
        ? { inThreadFailure: { reason: inThreadFailure, recordsWritten: records.written } }
        : {}),
    }),
  );
  // The server's warnings (KV cache full, preemptions) stand with the run's.
  if (serverMetrics) summary.warnings.push(...serverMetrics.warnings);
  return { summary, ...(serverMetrics ? { serverMetrics } : {}) };
}

/** The target config with the scenario's reasoning options (sent with every request). */
function withReasoning(config: TargetConfig, scenario: Scenario): TargetConfig {
  const r = scenario.reasoning;
  if (!r) return config;
  return {
    ...config,
    ...(r.effort !== undefined ? { reasoningEffort: r.effort } : {}),
    ...(r.enableThinking !== undefined ? { enableThinking: r.enableThinking } : {}),
  };
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
    warnings.push({
      code: 'deadline_passed',
      message: `the run passed its hard deadline of ${deadlineS.toFixed(0)} s (its requests at the load's limit, each taking the whole --timeout, plus --grace) and was stopped: requests still in flight were cancelled, later ones never sent`,
    });
  }
  for (const t of terminated) {
    const missing = Math.max(0, t.progress.sent - t.recordsReceived);
    warnings.push({
      code: 'worker_terminated',
      message: `worker ${t.index + 1} of ${workers} did not answer within ${workerAnswerMs() / 1000} s of the cancel (stuck, as in a CPU loop) and was terminated: its ${t.recordsReceived} records are counted; ${missing} requests it had sent (by its last report) never produced a record and are missing from the run`,
    });
  }
  for (const t of failed) {
    const missing = Math.max(0, t.progress.sent - t.recordsReceived);
    warnings.push({
      code: 'worker_failed',
      message: `worker ${t.index + 1} of ${workers} failed (${t.reason}) and ended its share of the run: its ${t.recordsReceived} records are counted; ${missing} requests it had in flight never produced a record, and the rest of its share was never sent (a bug in infergauge: please report it with this message)`,
    });
  }
  if (o.inThreadFailure) {
    const { reason, recordsWritten } = o.inThreadFailure;
    warnings.push({
      code: 'loadgen_failed',
      message: `the load generator failed (${reason}) and ended the run: its ${recordsWritten} records are counted, and the requests it had yet to send were never sent (a bug in infergauge: please report it with this message)`,
    });
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

/** In virtual time: a fresh engine model per point, no HTTP, no waiting. */
async function measureVirtual(
  target: VirtualTarget,
  point: Point,
  hooks: PointHooks,
): Promise<Measured> {
  const { plan } = target;
  // The engine model is loaded only for virtual time: a live run never needs it.
  const [{ EngineCluster }, { simulateRun }] = await Promise.all([
    import('../sim/cluster.js'),
    import('../sim/virtual.js'),
  ]);
  const engine = new EngineCluster(target.engine);
  const warmupRequests = point.warmupRequests ?? 0;
  openRunDir(point.dir);
  hooks.onStart?.({
    clock: createRunClock(),
    part: wholeRun(point.load, warmupRequests, point.requests),
  });
  const nextRequest =
    point.nextRequest ??
    createWorkload({
      scenario: point.scenario,
      prompts: await createPromptFactory(target.tokenizer, {
        seed: streamSeed(plan.seed, 'prompts'),
        ...(point.scenario.sharedPrefixTokens
          ? { sharedPrefixTokens: point.scenario.sharedPrefixTokens }
          : {}),
      }),
      seed: plan.seed,
      wordsAreTokens: true,
      ...(plan.trace ? { trace: plan.trace.entries } : {}),
      ...(plan.dataset ? { dataset: plan.dataset.data } : {}),
    });
  const records = new JsonlWriter<RequestRecord>(resultPath(point.dir, 'records'));
  const builder = new SummaryBuilder(summaryContext(plan, point.load));
  const startedMs = performance.now();
  let result: ReturnType<typeof simulateRun>;
  try {
    result = simulateRun({
      engine,
      load: point.load,
      ...(point.requests !== undefined ? { requests: point.requests } : {}),
      ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
      warmupRequests,
      seed: plan.seed,
      endpoint: plan.endpoint,
      nextRequest,
      onRecord: (r) => {
        records.write(r);
        builder.add(r);
      },
    });
  } finally {
    records.close();
  }
  const wallS = (performance.now() - startedMs) / 1000;
  const summary = builder.build({ unsentRequests: result.unsentRequests });
  return {
    summary,
    // The engine's own state stands in for scraped metrics: peak KV and preemptions.
    serverMetrics: engineMetrics(engine, result.simulatedS, target.model),
    virtualRun: `${result.simulatedS.toFixed(1)} simulated s in ${wallS.toFixed(2)} s, ${virtualRunCounts(engine)}`,
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

export async function createPointRunner(
  prepared: PreparedRun & { plan: RunPlan },
  stopSignal?: AbortSignal,
  onNotice: Notify = () => {},
): Promise<PointRunner> {
  const target = await openTarget(prepared, { onNotice });
  return {
    description: await describeTarget(target),
    model: target.model,
    tokenizer: target.tokenizer,
    run: async (point) => {
      const { summary, serverMetrics } = await measurePoint(
        target,
        point,
        stopSignal ? { stop: stopSignal } : {},
      );
      writeSummary(point.dir, summary, serverMetrics);
      return { summary, ...(serverMetrics ? { serverMetrics } : {}) };
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
