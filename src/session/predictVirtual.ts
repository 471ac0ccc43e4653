/**
 * A calibrated simulated run's prediction intervals (docs/metrics.md, "Prediction intervals"):
 * the calibration's fitted values drawn from their covariance, each draw a virtual replay of the
 * run's first requests with the run's seed (common random numbers), and the draws' log ratios
 * set on the run's own figures (addRunPrediction; the figures: metrics/runPrediction.ts). Loaded only for such runs: it brings the
 * engine model and the calibration code.
 */

import type { FigurePrediction, PredictionRange } from '../metrics/distribution.js';
import {
  drawRequestsFor,
  PREDICTED_LATENCY,
  PREDICTED_STATISTICS,
  PREDICTED_THROUGHPUT,
  type RunFigure,
  runFigures,
} from '../metrics/runPrediction.js';
import { type RunPredictionInfo, type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import { predictionModelOf, withValues } from '../sim/calibrate.js';
import type { FitKey } from '../sim/calibrationFile.js';
import { EngineCluster } from '../sim/cluster.js';
import type { EngineModelOptions } from '../sim/engineModel.js';
import type { EngineCalibration } from '../sim/options.js';
import {
  intervalOf,
  PREDICTION_DRAWS,
  PREDICTION_LEVEL,
  type PredictedFigures,
  type PredictionModel,
  predictFigures,
  residualOf,
} from '../sim/prediction.js';
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
 * replays of its plan; nothing where no draw is asked for (`--prediction-draws 0`).
 * Returns the replays' count, for the caller's cost line.
 */
export async function predictRun(summary: RunSummary, r: VirtualReplay): Promise<number> {
  const model = predictionModelOf(r.calibrated.file);
  const draws = r.draws ?? PREDICTION_DRAWS;
  // Nothing fitted (every value held): the central replay alone, the intervals the scatter's.
  if (draws === 0) return 0;
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

/**
 * Sets `latency.<metric>.prediction`, `throughput.prediction` and `prediction` on `summary`:
 * each figure's interval at `level`, from the draws' log ratios (taken on the replays) applied to
 * the summary's own figure, widened by its metric's residual scatter.
 */
export function addRunPrediction(
  summary: RunSummary,
  predicted: Pick<PredictedFigures<RunFigure>, 'deltas' | 'draws'>,
  model: PredictionModel,
  about: Omit<RunPredictionInfo, 'level' | 'draws' | 'covarianceFrom' | 'statistic'> & {
    level?: number;
  },
): void {
  const level = about.level ?? PREDICTION_LEVEL;
  const range = (name: RunFigure, value: number): PredictionRange | undefined => {
    const r = intervalOf(value, predicted.deltas[name] ?? [], residualOf(model, name), level);
    return r ? { low: r.low, high: r.high } : undefined;
  };
  let any = false;
  for (const m of PREDICTED_LATENCY) {
    const d = summary.latency[m];
    if (d.count === 0) continue;
    const median = range(`${m}.p50`, d.p50);
    if (!median) continue;
    const statistics: FigurePrediction['statistics'] = {};
    for (const s of PREDICTED_STATISTICS) {
      if (s === 'p50') continue;
      const r = range(`${m}.${s}`, d[s]);
      if (r) statistics[s] = r;
    }
    d.prediction = { ...median, level, statistics };
    any = true;
  }
  const throughput: NonNullable<RunSummary['throughput']['prediction']> = { level };
  for (const t of PREDICTED_THROUGHPUT) {
    const r = range(`throughput.${t}`, summary.throughput[t]);
    if (r) {
      throughput[t] = r;
      any = true;
    }
  }
  if (throughput.outputTokensPerS || throughput.requestsPerS) {
    summary.throughput.prediction = throughput;
  }
  if (!any) return;
  const { level: _, ...rest } = about;
  summary.prediction = {
    ...rest,
    statistic: 'p50',
    level,
    draws: predicted.draws,
    covarianceFrom: model.covarianceFrom,
  };
}
