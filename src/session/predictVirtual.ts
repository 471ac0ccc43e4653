/**
 * A calibrated simulated run's prediction intervals (docs/metrics.md, "Prediction intervals"):
 * the calibration's fitted values drawn from their covariance, each draw a virtual replay of the
 * run's first requests with the run's seed (common random numbers), and the draws' log ratios
 * set on the run's own figures (sim/runPrediction.ts). Loaded only for such runs: it brings the
 * engine model and the calibration code.
 */
import { type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import { predictionModelOf, withValues } from '../sim/calibrate.js';
import type { FitKey } from '../sim/calibrationFile.js';
import { EngineCluster } from '../sim/cluster.js';
import type { EngineModelOptions } from '../sim/engineModel.js';
import type { EngineCalibration } from '../sim/options.js';
import { PREDICTION_DRAWS, predictFigures } from '../sim/prediction.js';
import {
  addRunPrediction,
  drawRequestsFor,
  PREDICTED_LATENCY,
  type RunFigure,
  runFigures,
} from '../sim/runPrediction.js';
import { simulateRun, type VirtualRunOptions } from '../sim/virtual.js';
import type { LoadedWorkload } from '../workload/workload.js';

/** How to replay a run in virtual time: its engine, its calibration and what simulateRun takes. */
export interface VirtualReplay {
  engine: EngineModelOptions;
  calibrated: EngineCalibration;
  /** simulateRun's options, less the engine, the workload and the records. */
  run: Omit<
    VirtualRunOptions,
    'engine' | 'onRecord' | 'nextRequest' | 'nextSession' | 'stopped' | 'events'
  >;
  /** The run's workload made afresh: a session workload keeps state, so each replay has its own. */
  workload: () => Promise<LoadedWorkload>;
  /** Readies a replay's engine as the run's was (a --prefix-hit-rate prime). */
  prime?: (engine: EngineCluster, workload: LoadedWorkload) => void;
  /** Draws of the fitted values (default PREDICTION_DRAWS); 0: none. */
  draws?: number;
}

/**
 * Sets the prediction fields on `summary` (the run's own figures, measured or simulated) from
 * replays of its plan; nothing where the calibration fitted nothing or no draw is asked for.
 * Returns the replays' count, for the caller's cost line.
 */
export async function predictRun(summary: RunSummary, r: VirtualReplay): Promise<number> {
  const model = predictionModelOf(r.calibrated.file);
  const draws = r.draws ?? PREDICTION_DRAWS;
  if (model.keys.length === 0 || draws === 0) return 0;
  const { load } = r.run;
  const first = await r.workload();
  // Single requests are made by id whatever the order: one workload serves every replay.
  const sessions = 'nextSession' in first;
  // What the run counted, not only what it planned: a duration, or --until, ends it sooner. A
  // session scenario's count is of sessions, which the summary does not count.
  const counted = summary.requests.completed + summary.requests.failed;
  const ran = sessions ? r.run.requests : Math.min(r.run.requests ?? counted, counted);
  const requests =
    ran === undefined
      ? undefined
      : drawRequestsFor({
          requests: ran,
          ...(load.mode === 'closed' ? { concurrency: load.concurrency } : {}),
        });
  // Flags given beside --calibration won over its values: a draw does not move them.
  const byFlags = new Set<FitKey>(r.calibrated.flagKeys.filter((k) => model.keys.includes(k)));
  const workloads = sessions
    ? [first, ...(await Promise.all(Array.from({ length: draws }, () => r.workload())))]
    : [first];
  let replays = 0;
  const predicted = predictFigures<RunFigure>(
    model,
    (values) => {
      const kept = Object.fromEntries(
        Object.entries(values).filter(([k]) => !byFlags.has(k as FitKey)),
      );
      const engine = new EngineCluster(withValues(r.engine, kept));
      const workload = workloads[Math.min(replays++, workloads.length - 1)];
      r.prime?.(engine, workload);
      const builder = new SummaryBuilder({
        load,
        latencyKeys: PREDICTED_LATENCY,
        samplingIntervals: false,
      });
      const result = simulateRun({
        ...r.run,
        ...(requests !== undefined ? { requests } : {}),
        engine,
        ...workload,
        onRecord: (record) => builder.add(record),
      });
      return runFigures(builder.build({ unsentRequests: result.unsentRequests }));
    },
    { draws },
  );
  addRunPrediction(summary, predicted, model, {
    calibration: r.calibrated.path,
    ...(requests !== undefined && requests < (r.run.requests ?? Number.POSITIVE_INFINITY)
      ? { drawRequests: requests }
      : {}),
    ...(byFlags.size > 0 ? { heldByFlags: [...byFlags] } : {}),
  });
  return replays;
}
