/**
 * A run's options as the command line parsed them (flag values, engine flags), validated into
 * a plan and the simulated engine, with every problem found; `run`, `sweep`, `probe` and `plan`
 * share it.
 */

import { thresholdProblems } from '../analysis/thresholds.js';
import { parseFlagNumber, TIME_SCALE } from '../flagNumber.js';
import { shardOf, wholeRun } from '../loadgen/shard.js';
import {
  PlanError,
  parseRunPlan,
  type RunPlan,
  type RunPlanInput,
  telemetryAsked,
} from '../plan/runPlan.js';
import { engineFlagArgs, engineFromFlags, isEngineFlag } from '../sim/options.js';
import { localSourceProblems, type PreparedRun } from './target.js';
import { parseExportTimeoutS } from './userOutputs.js';

export type RunOptions = RunPlanInput & {
  json?: boolean;
  simulate?: boolean;
  timeScale?: string;
  /** CI thresholds (--threshold, repeatable). */
  threshold?: string[];
  /** false with --no-html: no report.html next to the records. */
  html?: boolean;
  /** More outputs of the session's events (--output, repeatable; session/userOutputs.ts). */
  output?: string[];
  /** Seconds an --output module may take to load, finish a point or the session (default 10). */
  exportTimeoutS?: string;
} & Record<string, unknown>;

/** `command`: the command whose options these are (shards are whole runs' parts: `run` only). */
export function prepareRun(options: RunOptions, command = 'run'): PreparedRun {
  const {
    json,
    simulate,
    timeScale,
    threshold,
    html: _html,
    output: _output,
    exportTimeoutS,
    ...rest
  } = options;
  const engineFlags = engineFlagArgs(rest);
  const input: RunPlanInput = Object.fromEntries(
    Object.entries(rest).filter(([key]) => !isEngineFlag(key)),
  );
  const builtIn = input.url === undefined;
  const problems = thresholdProblems(threshold);
  const timeout = parseExportTimeoutS(exportTimeoutS);
  if (timeout.problem) problems.push(timeout.problem);
  // Without --url, --model names the simulated model (a preset or a config.json).
  const simModel = builtIn ? input.model : undefined;
  if (builtIn) delete input.model;
  let plan: RunPlan | undefined;
  try {
    plan = parseRunPlan(input, process.env);
  } catch (err) {
    if (!(err instanceof PlanError)) throw err;
    problems.push(...err.problems);
  }
  let simulated: ReturnType<typeof engineFromFlags> | undefined;
  let scale: ReturnType<typeof parseFlagNumber> | undefined;
  if (!builtIn) {
    if (simulate) problems.push('--simulate runs without a server: drop --url');
    if (engineFlags.length > 0 || timeScale !== undefined) {
      problems.push(
        `${[...engineFlags.filter((a) => a.startsWith('--')), ...(timeScale !== undefined ? ['--time-scale'] : [])].join(', ')} apply only to the built-in simulator (without --url)`,
      );
    }
  } else {
    simulated = engineFromFlags(simModel, rest);
    problems.push(...simulated.problems);
    scale = timeScale === undefined ? undefined : parseFlagNumber(timeScale, TIME_SCALE);
    if (scale && 'problem' in scale) problems.push(`--time-scale ${scale.problem}`);
    if (simulate && (input.workers ?? input.shard ?? input.startAt) !== undefined) {
      problems.push('--workers, --shard and --start-at apply to real-time runs, not to --simulate');
    }
    if (simulate && timeScale !== undefined) {
      problems.push('--time-scale applies to the real-time simulator, not to --simulate');
    }
    if (simulate && plan && telemetryAsked(plan.telemetry)) {
      problems.push(
        '--server-metrics, --metrics-url, --slots, --dcgm-url, --gpu-memory and --server-pid need a running server; --simulate has none',
      );
    }
    // The default scrape of the simulator's /metrics: there is no server to scrape.
    if (simulate && plan) delete plan.telemetry;
  }
  if (plan?.telemetry) problems.push(...localSourceProblems(plan.telemetry));
  if (command !== 'run' && (input.shard ?? input.startAt) !== undefined) {
    problems.push(
      `--shard and --start-at split one run over machines: they apply to infergauge run, not ${command}`,
    );
  } else if (plan && (plan.shard ?? plan.startAt) && plan.scenarios.length > 1) {
    problems.push(
      `--shard and --start-at give one run one shared start: run each of the ${plan.scenarios.length} scenarios as its own (e.g. --scenario ${plan.scenarios[0].name})`,
    );
  } else if (plan?.shard) {
    try {
      shardOf(wholeRun(plan.load, plan.warmupRequests, plan.requests), plan.shard);
    } catch (err) {
      problems.push(`--shard ${plan.shard.index}/${plan.shard.count}: ${(err as Error).message}`);
    }
  }
  const warnings = [...(simulated?.warnings ?? []), ...(plan?.trace?.notes ?? [])];
  if (plan && plan.temperature > 0) {
    warnings.push(
      `temperature ${plan.temperature}: sampling noise will move output lengths and timings from run to run`,
    );
  }
  return {
    ...(plan ? { plan } : {}),
    problems,
    warnings,
    notices: plan?.trace?.notices ?? [],
    ...(simulated?.engine ? { engine: simulated.engine } : {}),
    engineFlags,
    ...(simulated?.calibration ? { calibrationWarnings: simulated.calibration.warnings } : {}),
    ...(simulated?.outsideValidation ? { simulatorWarnings: [simulated.outsideValidation] } : {}),
    ...(simulated?.calibrated ? { calibrated: simulated.calibrated } : {}),
    ...(simModel !== undefined ? { simModel } : {}),
    simulate: simulate === true,
    ...(scale && 'value' in scale ? { timeScale: scale.value } : {}),
    json: json === true,
  };
}
