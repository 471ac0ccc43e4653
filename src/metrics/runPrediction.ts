/**
 * Prediction intervals on a calibrated simulated run (issue 56, docs/metrics.md "Prediction
 * intervals"): which figures of a summary get one, how a replay's figures are read, and how the
 * draws' log ratios (sim/prediction.ts predictFigures) become `prediction` fields beside the
 * figures (session/predictVirtual.ts addRunPrediction), and how a summary made again keeps them.
 * Pure.
 */
import type { RunSummary } from './summary.js';

/** The latency metrics a calibrated run predicts (the fit's TTFT and TPOT, and what follows from them). */
export const PREDICTED_LATENCY = ['ttftMs', 'itlMs', 'tpotMs', 'e2eMs'] as const;
export type PredictedLatency = (typeof PREDICTED_LATENCY)[number];
/** The median first: the statistic the calibration is fitted and checked on. */
export const PREDICTED_STATISTICS = ['p50', 'mean', 'p90', 'p95', 'p99'] as const;
export type PredictedStatistic = (typeof PREDICTED_STATISTICS)[number];
export const PREDICTED_THROUGHPUT = ['outputTokensPerS', 'requestsPerS'] as const;
export type PredictedThroughput = (typeof PREDICTED_THROUGHPUT)[number];

/** A figure's name: `ttftMs.p50`, `throughput.outputTokensPerS` (scatterOf reads its prefix). */
export type RunFigure =
  | `${PredictedLatency}.${PredictedStatistic}`
  | `throughput.${PredictedThroughput}`;

/**
 * The least measured requests a draw replays: fewer read a closed loop's ramp rather than its
 * steady state. Four times the concurrency, past this floor, keeps a draw's batch sizes the run's.
 */
export const MIN_DRAW_REQUESTS = 64;
/** Draws replay at most this share of the run's measured requests (the run itself is the ratio's 1). */
const DRAW_SHARE = 1 / 16;

/**
 * How many measured requests each draw replays: the run's first ones, a sixteenth of them (32
 * draws then replay twice the run), at least MIN_DRAW_REQUESTS and four per request in flight,
 * at most the run's own. A default run (200 requests at concurrency 16) replays 64 a draw: the
 * 33 replays cost about three times its simulation, under a second. Undefined without a count:
 * the draws replay the run's duration.
 */
export function drawRequestsFor(o: {
  requests?: number;
  concurrency?: number;
}): number | undefined {
  if (o.requests === undefined) return undefined;
  const floor = Math.max(MIN_DRAW_REQUESTS, 4 * (o.concurrency ?? 1));
  return Math.min(o.requests, Math.max(floor, Math.ceil(o.requests * DRAW_SHARE)));
}

/** A run's figures that get a prediction; null where the run has none (no TPOT of one-token answers). */
export function runFigures(
  summary: Pick<RunSummary, 'latency' | 'throughput'>,
): Record<RunFigure, number | null> {
  const out = {} as Record<RunFigure, number | null>;
  for (const m of PREDICTED_LATENCY) {
    const d = summary.latency[m];
    for (const s of PREDICTED_STATISTICS) {
      const v = d.count > 0 ? d[s] : Number.NaN;
      out[`${m}.${s}`] = Number.isFinite(v) && v > 0 ? v : null;
    }
  }
  for (const t of PREDICTED_THROUGHPUT) {
    const v = summary.throughput[t];
    out[`throughput.${t}`] = Number.isFinite(v) && v > 0 ? v : null;
  }
  return out;
}

/**
 * The prediction fields of a saved summary, set again on one summarised anew from the records
 * (results/reader.ts withSavedFacts): they came from replays the records do not hold.
 */
export function keepRunPrediction(summary: RunSummary, saved: Partial<RunSummary>): void {
  if (!saved.prediction || typeof saved.prediction !== 'object') return;
  summary.prediction = saved.prediction;
  for (const m of PREDICTED_LATENCY) {
    const p = saved.latency?.[m]?.prediction;
    if (p && typeof p === 'object' && summary.latency[m]) summary.latency[m].prediction = p;
  }
  const t = saved.throughput?.prediction;
  if (t && typeof t === 'object') summary.throughput.prediction = t;
}
