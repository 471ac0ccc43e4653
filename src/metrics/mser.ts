/**
 * MSER-5 truncation: where a series' initial transient ends (docs/metrics.md, "Warm-up
 * transient"). The Marginal Standard Error Rule picks the truncation point d that minimises
 * the standard error of the mean of what is left, Σ(Z_j - mean)² / (m - d)² over the batch
 * means Z_{d+1..m}: cutting a transient lowers the spread faster than it costs samples, cutting
 * steady data does not. MSER-5 works on means of 5 consecutive observations, which smooths
 * single outliers without hiding a trend.
 *   White, K. P. (1997). An effective truncation heuristic for bias reduction in simulation
 *   output. Simulation 69(6), 323-334.
 *   White, K. P., Cobb, M. J., Spratt, S. C. (2000). A comparison of five steady-state
 *   truncation heuristics for simulation. Proc. 2000 Winter Simulation Conference, 755-760.
 * White's rule for a truncation beyond the series' first half: the run was too short to leave
 * its transient, so no steady state was reached.
 */

/** Observations per batch mean (the "5" of MSER-5). */
export const MSER_BATCH = 5;

/** Fewest batch means the rule judges: under this, a transient and noise look alike. */
export const MSER_MIN_BATCHES = 10;

/**
 * The last batch means are never a truncation candidate: the statistic of k means falls as
 * 1/k only on average, and two or three neighbours that happen to agree give a minimum near
 * the end (a stationary series would then read "not reached" about one time in four). A trend
 * that never settles still reaches this edge, as its statistic falls all the way to it.
 */
export const MSER_TAIL_BATCHES = 5;

export interface MserResult {
  /** Observations judged (a multiple of MSER_BATCH; the last `n mod 5` are left out). */
  observations: number;
  /** Observations to cut: MSER_BATCH times the truncation's batch index. */
  truncated: number;
  /**
   * The rest is steady: the truncation lies in the series' first half, or lay later over a
   * second half that does not drift (see `drifts`; the cut is then the first half's minimum).
   */
  reached: boolean;
}

/**
 * MSER-5 over `series` (in the order the observations happened), or undefined under
 * MSER_MIN_BATCHES batch means. Pure: the same series gives the same answer.
 */
export function mser5(series: ArrayLike<number>): MserResult | undefined {
  const m = Math.floor(series.length / MSER_BATCH);
  if (m < MSER_MIN_BATCHES) return undefined;
  const means = new Float64Array(m);
  for (let j = 0; j < m; j++) {
    let sum = 0;
    for (let i = 0; i < MSER_BATCH; i++) sum += series[j * MSER_BATCH + i];
    means[j] = sum / MSER_BATCH;
  }
  // Suffix sums give every candidate's statistic in one pass from the end:
  // Σ(Z - mean)² = ΣZ² - (ΣZ)²/k over the k = m - d means left. Centring on the overall mean
  // first keeps that subtraction from cancelling on large values (latencies in the thousands).
  let centre = 0;
  for (let j = 0; j < m; j++) centre += means[j];
  centre /= m;
  let sum = 0;
  let sumSquares = 0;
  let best = Number.POSITIVE_INFINITY;
  let bestD = 0;
  const statistics = new Float64Array(m).fill(Number.POSITIVE_INFINITY);
  const lastCandidate = m - MSER_TAIL_BATCHES;
  for (let d = m - 1; d >= 0; d--) {
    const z = means[d] - centre;
    sum += z;
    sumSquares += z * z;
    if (d > lastCandidate) continue;
    const k = m - d;
    const statistic = Math.max(0, sumSquares - (sum * sum) / k) / (k * k);
    statistics[d] = statistic;
    // `<=` walking backwards: of equal minima, the earliest truncation (cut the least).
    if (statistic <= best) {
      best = statistic;
      bestD = d;
    }
  }
  const half = Math.floor(m / 2);
  if (bestD > half && drifts(means.subarray(half))) {
    return { observations: m * MSER_BATCH, truncated: bestD * MSER_BATCH, reached: false };
  }
  // A late minimum over a second half that holds still is chance: the first half's is the cut.
  if (bestD > half) bestD = argmin(statistics.subarray(0, half + 1));
  return { observations: m * MSER_BATCH, truncated: bestD * MSER_BATCH, reached: true };
}

/** The first index of the least value. */
function argmin(values: Float64Array): number {
  let at = 0;
  for (let i = 1; i < values.length; i++) if (values[i] < values[at]) at = i;
  return at;
}

/**
 * Standard errors apart the two halves of a run's second half must be to call it drifting.
 * Two: a stationary series reads as drifting about one time in twenty, and only after MSER
 * has already put its truncation late.
 */
export const MSER_DRIFT_SE = 2;

/**
 * Whether the batch means drift: their two halves' means differ by more than MSER_DRIFT_SE
 * standard errors of that difference. The guard on White's rule: with few batches (under some
 * 60) MSER's minimum lands in the second half of a stationary series by chance (one run in ten
 * at 100 observations); a series that has not settled drifts there as well.
 */
function drifts(means: Float64Array): boolean {
  const half = Math.floor(means.length / 2);
  const a = means.subarray(0, half);
  const b = means.subarray(half);
  const meanOf = (x: Float64Array) => x.reduce((s, v) => s + v, 0) / x.length;
  const ma = meanOf(a);
  const mb = meanOf(b);
  let squares = 0;
  for (const v of a) squares += (v - ma) ** 2;
  for (const v of b) squares += (v - mb) ** 2;
  const variance = squares / Math.max(1, means.length - 2);
  const se = Math.sqrt(variance * (1 / a.length + 1 / b.length));
  return Math.abs(mb - ma) > MSER_DRIFT_SE * se;
}
