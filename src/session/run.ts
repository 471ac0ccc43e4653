/**
 * `infergauge run` as a session: a fixed run of each of the plan's scenarios in turn against
 * one target, each in its own run directory (manifest, records, telemetry, summary), and the
 * table of them when there are several. It never prints: what the user should see arrives
 * through the hooks, and the command draws and prints it.
 */
import { join } from 'node:path';
import { runWarnings } from '../analysis/traps.js';
import { EXIT } from '../errors.js';
import type { LoadgenProgress } from '../loadgen/run.js';
import type { RunSummary } from '../metrics/summary.js';
import { measuredCount, type RunPlan } from '../plan/runPlan.js';
import { nothingSucceeded } from '../report/failures.js';
import type { ScenarioRow } from '../report/scenarios.js';
import { describeLoad } from '../report/terminal.js';
import { writeScenarios } from '../results/runFiles.js';
import { EngineModel } from '../sim/engineModel.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { describeScenario, type Scenario } from '../workload/scenarios.js';
import type { SessionEvents } from './events.js';
import { measurePoint, serverAbout } from './point.js';
import { fromPlan, inSession, resultsRoot, type SessionHooks, sessionOutputs } from './session.js';
import { type Notify, openTarget, type PreparedRun, type Target } from './target.js';

export interface RunHooks extends SessionHooks {
  /** The first Ctrl-C: send nothing more; requests in flight get the plan's grace period. */
  stop?: AbortSignal;
  /** The second: cancel the requests in flight at once. */
  cancel?: AbortSignal;
  onNotice?: Notify;
  /** The stop took effect: this many requests in flight get `graceS` to finish. */
  onStopping?(inFlight: number, graceS: number): void;
  /** A scenario is measured and its summary.json written. */
  onScenario?(result: ScenarioResult): void;
}

export interface ScenarioResult {
  scenario: Scenario;
  /** Its run directory (none when the session saves nothing). */
  dir?: string;
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
  /**
   * EXIT.ok; EXIT.interrupted when a stop cut a scenario short; else EXIT.failure when requests
   * were counted and none of them succeeded (a wrong --model, a broken endpoint: see each
   * summary's requests.errorsByKind and firstErrorByKind). A failure share short of all is a
   * threshold's to judge.
   */
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
    const save = hooks.save !== false;
    const root = resultsRoot(plan.out, plan.label, save);
    const several = plan.scenarios.length > 1;
    const session = {
      command: 'run',
      kind: several ? ('scenarios' as const) : ('run' as const),
      root,
      rootIsPoint: !several,
      ...fromPlan(plan),
      ...sessionOutputs(hooks),
      ...(hooks.onNotice ? { onNotice: hooks.onNotice } : {}),
    };
    return await inSession(session, async (session) => {
      const results: ScenarioResult[] = [];
      let code: number = EXIT.ok;
      for (const scenario of plan.scenarios) {
        if (hooks.stop?.aborted) {
          code = EXIT.interrupted;
          break;
        }
        const dir = save ? (several ? join(root, scenario.name) : root) : undefined;
        const result = await runScenario(target, session, scenario, dir, hooks);
        results.push(result);
        hooks.onScenario?.(result);
        if (result.summary.interrupted) {
          code = EXIT.interrupted;
          break;
        }
      }
      if (code === EXIT.ok && nothingSucceeded(results.map((r) => r.summary))) {
        code = EXIT.failure;
      }
      if (!several) return { root, results, code };
      const scenarioRows = results.map(({ scenario, summary }) => scenarioRow(scenario, summary));
      if (save) writeScenarios(root, scenarioRows);
      return { root, results, scenarioRows, code };
    });
  } finally {
    await target.close();
  }
}

/** One scenario: the plan's load and windows, measured as one point, with the run's warnings. */
async function runScenario(
  target: Target,
  session: SessionEvents,
  scenario: Scenario,
  dir: string | undefined,
  hooks: RunHooks,
): Promise<ScenarioResult> {
  const { plan } = target;
  const progress: LoadgenProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 };
  const cancel = graceCancel(plan, progress, hooks);
  const count = measuredCount(plan, scenario);
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
        ...(dir !== undefined ? { dir } : {}),
        ...(plan.shard ? { shard: plan.shard } : {}),
        ...(plan.startAt ? { startAt: plan.startAt } : {}),
      },
      {
        session,
        ...(hooks.stop ? { stop: hooks.stop } : {}),
        cancel: cancel.signal,
        ...(hooks.onNotice ? { onNotice: hooks.onNotice } : {}),
        progress,
        warnings: (summary) => runWarnings(plan, summary),
        // In virtual time the engine's counters are told in the simulator line, not saved.
        saveServerMetrics: target.kind !== 'virtual',
      },
    );
  } finally {
    cancel.dispose();
  }
  const { summary } = measured;
  const serverMetrics = target.kind === 'virtual' ? undefined : measured.serverMetrics;
  const { simulator } = serverAbout(target);
  return {
    scenario,
    ...(dir !== undefined ? { dir } : {}),
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
    {
      plan,
      problems: [],
      warnings: [],
      notices: [],
      engineFlags: [],
      simulate: false,
      json: false,
    },
    hooks,
  );
}
