/**
 * `infergauge run` as a session: a fixed run of each of the plan's scenarios in turn against
 * one target, each in its own run directory (manifest, records, telemetry, summary), and the
 * table of them when there are several. It never prints: what the user should see arrives
 * through the hooks, and the command draws and prints it.
 */
import { join } from 'node:path';
import { runWarnings } from '../analysis/traps.js';
import { EXIT } from '../errors.js';
import { connectionsToWarm, type LoadgenProgress } from '../loadgen/run.js';
import type { RunSummary } from '../metrics/summary.js';
import { measuredCount, type RunPlan, redactPlan } from '../plan/runPlan.js';
import type { ScenarioRow } from '../report/scenarios.js';
import { describeLoad } from '../report/terminal.js';
import { writeManifest, writeScenarios, writeSummary } from '../results/runFiles.js';
import { describeEngine, perReplica } from '../sim/describe.js';
import { EngineModel } from '../sim/engineModel.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { describeScenario, isSessionScenario, type Scenario } from '../workload/scenarios.js';
import { measurePoint } from './point.js';
import { type Notify, openTarget, type PreparedRun, type Target, utcStamp } from './target.js';

/** A point in progress, for drawing: live counts on the run's clock. */
export interface ProgressView {
  counts: LoadgenProgress;
  /** Microseconds on the run's clock; negative while waiting for the start. */
  nowUs(): number;
  /** Requests this process sends, warm-up included; undefined when a duration limits the run. */
  totalRequests?: number;
}

export interface RunHooks {
  /** The first Ctrl-C: send nothing more; requests in flight get the plan's grace period. */
  stop?: AbortSignal;
  /** The second: cancel the requests in flight at once. */
  cancel?: AbortSignal;
  onNotice?: Notify;
  /** The stop took effect: this many requests in flight get `graceS` to finish. */
  onStopping?(inFlight: number, graceS: number): void;
  /** A scenario's schedule started; returns what ends the drawing (called when it is done). */
  onProgress?(view: ProgressView): () => void;
  /** A scenario is measured and its summary.json written. */
  onScenario?(result: ScenarioResult): void;
}

export interface ScenarioResult {
  scenario: Scenario;
  /** Its run directory. */
  dir: string;
  model: string;
  summary: RunSummary;
  serverMetrics?: ServerMetricsSummary;
  /** The built-in simulator, in one line (and in virtual time, what it did). */
  simulator?: string;
}

export interface PlanRunResult {
  /** The results directory (several scenarios: the parent of theirs). */
  root: string;
  results: ScenarioResult[];
  /** Several scenarios: one row each, as saved in scenarios.json. */
  scenarioRows?: ScenarioRow[];
  /** EXIT.ok, or EXIT.interrupted when a stop cut a scenario short. */
  code: number;
}

/**
 * Runs every scenario of the plan in turn, starting and stopping the built-in simulator
 * around them when there is no --url. Stops after a scenario a signal interrupted.
 */
export async function runPlan(
  prepared: PreparedRun & { plan: RunPlan },
  hooks: RunHooks = {},
): Promise<PlanRunResult> {
  const { plan } = prepared;
  if (prepared.simulate && prepared.engine) {
    try {
      new EngineModel(prepared.engine);
    } catch (err) {
      throw new Error(`the simulated engine cannot start: ${(err as Error).message}`);
    }
  }
  const target = await openTarget(prepared, {
    onNotice: hooks.onNotice ?? (() => {}),
    probeMetrics: true,
  });
  try {
    const root = plan.out ?? join('infergauge-results', `${utcStamp()}-${plan.label}`);
    const results: ScenarioResult[] = [];
    let code: number = EXIT.ok;
    for (const scenario of plan.scenarios) {
      if (hooks.stop?.aborted) {
        code = EXIT.interrupted;
        break;
      }
      const dir = plan.scenarios.length > 1 ? join(root, scenario.name) : root;
      const result = await runScenario(target, scenario, dir, hooks);
      results.push(result);
      hooks.onScenario?.(result);
      if (result.summary.interrupted) {
        code = EXIT.interrupted;
        break;
      }
    }
    if (plan.scenarios.length === 1) return { root, results, code };
    const scenarioRows = results.map(({ scenario, summary }) => scenarioRow(scenario, summary));
    writeScenarios(root, scenarioRows);
    return { root, results, scenarioRows, code };
  } finally {
    await target.close();
  }
}

/** One scenario: the plan's load and windows, its manifest, and its summary with warnings. */
async function runScenario(
  target: Target,
  scenario: Scenario,
  dir: string,
  hooks: RunHooks,
): Promise<ScenarioResult> {
  const { plan } = target;
  const virtual = target.kind === 'virtual';
  let simulator = target.kind === 'live' ? target.simulator : undefined;
  let server: Record<string, unknown>;
  if (target.kind === 'virtual') {
    const memory = new EngineModel(target.engine).memory;
    const x = perReplica(target.engine);
    simulator = `${describeEngine(target.engine)}, KV cache ${x}${memory.numGpuBlocks} blocks (${x}${memory.kvTokens} tokens); virtual time`;
    server = { virtualTime: true, simulator, memory };
  } else {
    server = {
      url: target.url,
      builtInSimulator: plan.url === undefined,
      ...(simulator ? { simulator } : {}),
      models: target.models,
    };
  }
  const overhead = target.promptOverhead;
  const workload = {
    scenario: describeScenario(scenario),
    tokenizer: target.tokenizer.name,
    tokenizerExact: target.tokenizer.exact,
    promptOverheadTokens: overhead.tokens,
    ...(overhead.note ? { promptOverheadNote: overhead.note } : {}),
  };
  const progress: LoadgenProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 };
  const cancel = graceCancel(plan, progress, hooks);
  // A session scenario counts sessions; its requests are as many as the sessions make.
  const sessions = isSessionScenario(scenario);
  const count = measuredCount(plan, scenario);
  let endProgress: (() => void) | undefined;
  let measured: Awaited<ReturnType<typeof measurePoint>>;
  try {
    measured = await measurePoint(
      target,
      {
        load: plan.load,
        scenario,
        ...(count !== undefined ? { requests: count } : {}),
        ...(plan.durationS !== undefined ? { durationS: plan.durationS } : {}),
        warmupRequests: plan.warmupRequests,
        dir,
        ...(plan.shard ? { shard: plan.shard } : {}),
        ...(plan.startAt ? { startAt: plan.startAt } : {}),
      },
      {
        ...(hooks.stop ? { stop: hooks.stop } : {}),
        cancel: cancel.signal,
        ...(hooks.onNotice ? { onNotice: hooks.onNotice } : {}),
        progress,
        onStart: ({ clock, part, workers }) => {
          writeManifest(dir, {
            startedAt: clock.originIso,
            server,
            model: target.model,
            workload,
            plan: redactPlan(plan),
            ...(workers !== undefined
              ? {
                  execution: {
                    workers,
                    // Opened before the clock started, so the first wave does not time connects.
                    warmConnections: connectionsToWarm(part.load),
                    ...(plan.shard ? { shard: plan.shard, shardLoad: part.load } : {}),
                    ...(plan.startAt ? { startAt: plan.startAt.iso } : {}),
                  },
                }
              : {}),
            windows: {
              warmupRequests: plan.warmupRequests,
              measuredRequests: count ?? null,
              measuredDurationS: plan.durationS ?? null,
              ...(sessions ? { unit: 'sessions' as const } : {}),
            },
          });
          if (virtual || !hooks.onProgress) return;
          const counted = part.measured.count;
          endProgress = hooks.onProgress({
            counts: progress,
            nowUs: () => clock.nowUs(),
            ...(counted !== undefined && !sessions
              ? { totalRequests: counted + (part.warmup.count ?? 0) }
              : {}),
          });
        },
      },
    );
  } finally {
    cancel.dispose();
    endProgress?.();
  }
  const { summary } = measured;
  summary.warnings.push(...runWarnings(plan, summary));
  // In virtual time the engine's counters are told in the simulator line, not saved.
  const serverMetrics = virtual ? undefined : measured.serverMetrics;
  writeSummary(dir, summary, serverMetrics);
  return {
    scenario,
    dir,
    model: target.model,
    summary,
    ...(serverMetrics ? { serverMetrics } : {}),
    ...(simulator
      ? { simulator: measured.virtualRun ? `${simulator}: ${measured.virtualRun}` : simulator }
      : {}),
  };
}

/**
 * The cancel signal of one scenario: the second Ctrl-C, or the end of the grace period that
 * the first one starts.
 */
function graceCancel(plan: RunPlan, progress: LoadgenProgress, hooks: RunHooks) {
  const cancel = new AbortController();
  let graceTimer: NodeJS.Timeout | undefined;
  const onStop = () => {
    hooks.onStopping?.(progress.inFlight, plan.graceS);
    graceTimer = setTimeout(() => cancel.abort(), plan.graceS * 1000);
  };
  const onCancel = () => cancel.abort();
  hooks.stop?.addEventListener('abort', onStop, { once: true });
  hooks.cancel?.addEventListener('abort', onCancel, { once: true });
  return {
    signal: cancel.signal,
    dispose: () => {
      hooks.stop?.removeEventListener('abort', onStop);
      hooks.cancel?.removeEventListener('abort', onCancel);
      clearTimeout(graceTimer);
    },
  };
}

function scenarioRow(scenario: Scenario, s: RunSummary): ScenarioRow {
  return {
    scenario: scenario.name,
    lengths: describeScenario(scenario),
    load: describeLoad(s),
    completed: s.requests.completed,
    failed: s.requests.failed,
    ttftP50Ms: s.latency.ttftMs.p50,
    ttftP99Ms: s.latency.ttftMs.p99,
    tpotP50Ms: s.latency.tpotMs.p50,
    itlP99Ms: s.latency.itlMs.p99,
    e2eP99Ms: s.latency.e2eMs.p99,
    outputTokensPerS: s.throughput.outputTokensPerS,
    requestsPerS: s.throughput.requestsPerS,
    meanConcurrency: s.load.meanConcurrency,
  };
}

/**
 * The library's way in: runs a parsed plan (parseRunPlan, readPlanFile) against its URL, or
 * without one against the built-in simulator with its default engine, as `infergauge run`
 * does, writing the same run directory.
 */
export function benchmark(plan: RunPlan, hooks: RunHooks = {}): Promise<PlanRunResult> {
  return runPlan(
    { plan, problems: [], warnings: [], engineFlags: [], simulate: false, json: false },
    hooks,
  );
}
