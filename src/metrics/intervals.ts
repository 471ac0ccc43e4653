import {
  type Distribution,
  type IntervalInput,
  PERCENTILES,
  type PercentileInterval,
  type PercentileName,
  type RankedSamples,
} from './distribution.js';

export type { IntervalInput, IntervalMethod, PercentileInterval } from './distribution.js';

/**
 * Confidence intervals for a run's percentiles (docs/metrics.md, "Intervals"). A pure module:
 * the same samples give the same intervals.
 */

/** The confidence level every interval of a summary is given at. */
export const INTERVAL_LEVEL = 0.95;

/**
 * Lag-1 autocorrelation of the time-ordered samples above which they are taken as correlated
 * (the block bootstrap). Under independence r1 has a standard error of 1/sqrt(n), so 0.1 is
 * beyond two of them from n = 400 on; and at r1 = 0.1 an AR(1) process' variance of the mean is
 * (1 + r1) / (1 - r1) = 1.22 times the independent one: the interval would be ~10 % too narrow.
 */
export const CORRELATED_LAG1 = 0.1;

/** Fewer time-ordered samples than this tell nothing about correlation: order statistics. */
const MIN_BOOTSTRAP_SAMPLES = 30;

/** At or below this many samples the binomial ranks are exact, above it a normal approximation. */
const EXACT_BINOMIAL_MAX = 20_000;

/**
 * The distribution-free interval for the q-quantile (0 < q < 1) of independent samples from
 * order statistics (Hahn & Meeker 1991, "Statistical Intervals", 5.2; Conover 1999, 3.2): with
 * B ~ Binomial(n, q) the number of samples below the true quantile, the 1-based order statistics
 * x(l) <= quantile < x(u) hold with probability P(l <= B < u). l is the highest rank with
 * P(B < l) <= (1 - level) / 2 and u the lowest with P(B < u) >= (1 + level) / 2, so the coverage
 * is at least `level` (conservative by the binomial's discreteness). Exact binomial sums up to
 * EXACT_BINOMIAL_MAX samples, a normal approximation with continuity correction above.
 * Returns 0-based ranks, null for a side that no rank reaches.
 */
export function orderStatisticRanks(
  n: number,
  q: number,
  level: number,
): { low: number | null; high: number | null } {
  const tail = (1 - level) / 2;
  if (n <= 0) return { low: null, high: null };
  let l: number;
  let u: number;
  if (n <= EXACT_BINOMIAL_MAX) {
    // Cumulative probabilities from the log pmf, term by term: no factorials to overflow.
    const logQ = Math.log(q);
    const logP = Math.log1p(-q);
    let logPmf = n * logP;
    let below = 0; // P(B < k)
    l = 0;
    u = n + 1;
    for (let k = 0; k <= n; k++) {
      if (below <= tail) l = k;
      if (below >= 1 - tail) {
        u = k;
        break;
      }
      below += Math.exp(logPmf);
      logPmf += Math.log((n - k) / (k + 1)) + logQ - logP;
    }
    // Never reached (u stays n + 1): no rank bounds the upper side.
  } else {
    const z = normalQuantile(1 - tail);
    const sd = Math.sqrt(n * q * (1 - q));
    l = Math.floor(n * q + 0.5 - z * sd);
    u = Math.ceil(n * q + 0.5 + z * sd);
  }
  return { low: l >= 1 ? l - 1 : null, high: u <= n ? u - 1 : null };
}

/** Interval for percentile `p` (0-100) of ranked samples taken as independent. */
export function orderStatisticInterval(
  samples: RankedSamples,
  p: number,
  level = INTERVAL_LEVEL,
): PercentileInterval {
  const ranks = orderStatisticRanks(samples.count, p / 100, level);
  return {
    low: ranks.low === null ? null : samples.at(ranks.low),
    high: ranks.high === null ? null : samples.at(ranks.high),
    level,
    method: 'order-statistics',
  };
}

/** Lag-1 autocorrelation of a series (Pearson's, about the series' mean); 0 for a constant one. */
export function lag1Autocorrelation(series: Float64Array): number {
  const n = series.length;
  if (n < 3) return 0;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += series[i];
  const mean = sum / n;
  let denominator = 0;
  let numerator = 0;
  let previous = series[0] - mean;
  denominator += previous * previous;
  for (let i = 1; i < n; i++) {
    const d = series[i] - mean;
    denominator += d * d;
    numerator += previous * d;
    previous = d;
  }
  return denominator > 0 ? numerator / denominator : 0;
}

/**
 * Block length of the bootstrap for n samples whose lag-1 autocorrelation is `lag1`: Andrews'
 * (1991) AR(1) plug-in for the Bartlett window that a block bootstrap's variance is,
 * 1.1447 (a n)^(1/3) with a = 4 r^2 / ((1 - r)^2 (1 + r)^2): n^(1/3), the order optimal for a
 * variance (Hall, Horowitz & Jing 1995), longer as the correlation reaches further (1.39 n^(1/3)
 * at r = 0.5, 3.1 n^(1/3) at r = 0.8). At most n / 2, so that a resample has two blocks.
 */
export function blockLength(n: number, lag1: number): number {
  const r = Math.min(Math.max(lag1, 0), 0.99);
  const a = (4 * r * r) / ((1 - r) ** 2 * (1 + r) ** 2);
  return Math.max(1, Math.min(Math.floor(n / 2), Math.ceil(1.1447 * Math.cbrt(a * n))));
}

/**
 * Interval ranks for the q-quantile of samples correlated in time, from the circular block
 * bootstrap (Künsch 1989 moving blocks, wrapped as Politis & Romano 1992) of the number of
 * samples at or below the estimate. A percentile's sampling error is that count's (Bahadur's
 * representation: the estimate moves one rank per sample that crosses it), and correlation in
 * time widens the count's variance beyond the binomial n q (1 - q) that order statistics assume.
 *
 * The bootstrap's variance of the count is taken in closed form rather than by drawing
 * resamples: a resample is n / L blocks of L consecutive samples at uniform circular starts, so
 * its count's variance is n / L times the variance of the block sums over all n starts. That is
 * the limit of infinitely many resamples (no Monte Carlo error, no seed) in O(n) per
 * percentile, a million samples included. Block length L about n^(1/3), the order optimal
 * for a variance, longer as the correlation reaches further (blockLength). The variance is never taken below the binomial
 * one: the method is chosen for positive correlation (CORRELATED_LAG1), and a smaller estimate
 * is the bootstrap's own noise. Ranks are 0-based, null where the samples end first. `series` is in time order, `estimate` the percentile of the samples.
 */
export function blockBootstrapRanks(
  series: Float64Array,
  estimate: number,
  q: number,
  options: { level?: number; lag1?: number } = {},
): { low: number | null; high: number | null; inflation: number } {
  const n = series.length;
  const level = options.level ?? INTERVAL_LEVEL;
  const length = blockLength(n, options.lag1 ?? lag1Autocorrelation(series));
  // The block sums of the indicator (at or below the estimate) at every circular start, by a
  // sliding window: two passes over typed arrays.
  const below = new Uint8Array(n);
  for (let i = 0; i < n; i++) below[i] = series[i] <= estimate ? 1 : 0;
  let block = 0;
  for (let i = 0; i < length; i++) block += below[i];
  let sum = 0;
  let squares = 0;
  for (let t = 0; t < n; t++) {
    sum += block;
    squares += block * block;
    const entering = t + length;
    block += below[entering < n ? entering : entering - n] - below[t];
  }
  const meanBlock = sum / n;
  const blockVariance = Math.max(0, squares / n - meanBlock * meanBlock);
  const binomial = n * q * (1 - q);
  const variance = Math.max(binomial, (n / length) * blockVariance);
  const inflation = binomial > 0 ? variance / binomial : 1;
  // The binomial ranks of the sample size that independent samples would need for the same
  // variance, n / inflation, scaled back to n: exact in the tails, where a normal approximation
  // of a skewed count is not, and the order-statistic interval itself when inflation is 1.
  const effective = Math.max(1, Math.floor(n / inflation));
  const ranks = orderStatisticRanks(effective, q, level);
  const toN = n / effective;
  const low = ranks.low === null ? null : Math.floor((ranks.low + 1) * toN) - 1;
  const high = ranks.high === null ? null : Math.ceil((ranks.high + 1) * toN) - 1;
  return {
    low: low === null || low < 0 ? null : low,
    high: high === null || high > n - 1 ? null : high,
    inflation,
  };
}

/**
 * The interval of each percentile in `names` (all five by default) that the samples resolve at
 * all: p99.9 only from 1,000 samples on (as Distribution's lowConfidence), the others from two.
 * The method is chosen once for the metric: time-ordered samples whose lag-1 autocorrelation
 * exceeds CORRELATED_LAG1 get the block bootstrap, the rest order statistics.
 */
export function percentileIntervals(
  input: IntervalInput,
  options: { level?: number; names?: readonly PercentileName[] } = {},
): Partial<Record<PercentileName, PercentileInterval>> {
  const level = options.level ?? INTERVAL_LEVEL;
  const n = input.ranked.count;
  const names = (options.names ?? (Object.keys(PERCENTILES) as PercentileName[])).filter(
    (name) => n >= (name === 'p99_9' ? 1000 : 2),
  );
  const result: Partial<Record<PercentileName, PercentileInterval>> = {};
  if (names.length === 0) return result;
  const series = input.series;
  const lag1 =
    series !== undefined && series.inOrder.length >= MIN_BOOTSTRAP_SAMPLES
      ? lag1Autocorrelation(series.inOrder)
      : 0;
  const correlated = lag1 > CORRELATED_LAG1;
  const extra = input.approximate ? { approximate: input.approximate } : {};
  for (const name of names) {
    result[name] = { ...orderStatisticInterval(input.ranked, PERCENTILES[name], level), ...extra };
  }
  if (correlated && series) {
    for (const name of names) {
      const p = PERCENTILES[name];
      const estimate = interpolated(series.sorted, p);
      const ranks = blockBootstrapRanks(series.inOrder, estimate, p / 100, { level, lag1 });
      result[name] = {
        low: ranks.low === null ? null : series.sorted[ranks.low],
        high: ranks.high === null ? null : series.sorted[ranks.high],
        level,
        method: 'block-bootstrap',
      };
    }
  }
  return result;
}

/** Percentile `p` of ascending `sorted`, linear interpolation as numpy (as distribution.ts). */
function interpolated(sorted: ArrayLike<number>, p: number): number {
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, sorted.length - 1);
  const frac = rank - lo;
  return frac === 0 ? sorted[lo] : sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

/**
 * The standard normal's quantile (Acklam's rational approximation, relative error < 1.2e-9):
 * only the two-sided level's z is needed, but any level may be asked.
 */
export function normalQuantile(p: number): number {
  const a = [
    -3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2,
    -3.066479806614716e1, 2.506628277459239,
  ];
  const b = [
    -5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1,
    -1.328068155288572e1,
  ];
  const c = [
    -7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734,
    4.374664141464968, 2.938163982698783,
  ];
  const d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
  const low = 0.02425;
  if (p < low) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (
      (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
      ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    );
  }
  if (p > 1 - low) return -normalQuantile(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) /
    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
  );
}

/**
 * The metrics whose percentiles a summary gives intervals for: the headline latencies. Each
 * costs a copy and a few passes over its samples at the end of a run (docs/metrics.md).
 */
export const INTERVAL_METRICS = ['ttftMs', 'itlMs', 'tpotMs', 'e2eMs'] as const;

/** Sets `intervals` on each of INTERVAL_METRICS' distributions from its samples. */
export function fillIntervals(
  latency: Record<(typeof INTERVAL_METRICS)[number], Distribution>,
  samples: Record<
    (typeof INTERVAL_METRICS)[number],
    { intervalInput(): IntervalInput | undefined }
  >,
): void {
  for (const key of INTERVAL_METRICS) {
    const input = samples[key].intervalInput();
    if (!input) continue;
    const intervals = percentileIntervals(input);
    if (Object.keys(intervals).length > 0) latency[key].intervals = intervals;
  }
}
