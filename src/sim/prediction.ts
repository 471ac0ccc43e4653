/**
 * Prediction intervals for a calibrated simulator (issue 56): how sure a prediction is, from
 * what the fit left uncertain. Two sources are carried through:
 *
 * - the fitted values' uncertainty: draws from their covariance (calibrationFile.ts
 *   FitCovariance, on the log scale the fit moves them on), each run through the simulator with
 *   the same workload and seed as the prediction itself (common random numbers: a draw's figure
 *   differs from the central one by the values alone), as log ratios to the central run;
 * - the scatter the fit could not explain: each metric's residuals over the calibration runs
 *   (its run-to-run noise and what the model misses), on the log scale, taken as at least 2 %
 *   and widened by the fit's degrees of freedom.
 *
 * A figure's predictive distribution is then the mixture over draws of the residual's
 * distribution centred on the draw (a Student t of the residuals' degrees of freedom, since the
 * scatter is estimated from few runs), and its interval the mixture's quantiles. A value held
 * because the runs could not tell it (--hold-unidentified, or a leave-one-out fold's) is drawn
 * too, known to a factor of 2 (one standard deviation: where the fit calls a value
 * unidentified); a value the user held is taken as exact. Pure: the caller says how to
 * simulate a set of values.
 */
import { createRng } from '../rng.js';
import { erfc, logGamma, normalDeviate } from '../workload/distributions.js';
import type { FitCovariance, FitKey, FittedValue, PointMetrics } from './calibrationFile.js';
import type { FitBounds } from './calibrationWarnings.js';

/** The level every prediction interval is given at, unless asked for another. */
export const PREDICTION_LEVEL = 0.9;
/** Draws of the fitted values per prediction: 32 runs of the workload beside the central one. */
export const PREDICTION_DRAWS = 32;
/**
 * A value held because the runs could not tell it is known to this factor either way (one
 * standard deviation on the log scale): the fit calls a value unidentified past it.
 */
const UNIDENTIFIED_LOG_SD = Math.LN2;
/**
 * The least residual scatter taken (a median's run-to-run noise, as the fit's own floor): three
 * runs fitted by five values may leave almost none.
 */
export const MIN_SCATTER = 0.02;

/** The fitted metrics whose residual scatter a figure takes. */
export type ScatterMetric = keyof PointMetrics;

export interface PredictionInterval {
  low: number;
  high: number;
  level: number;
}

/** What prediction needs of a fit (calibration.json, or a fit in memory). */
export interface PredictionModel {
  keys: FitKey[];
  /** Each fitted value as the fit moves it: ln(value + floor). */
  center: number[];
  floors: number[];
  /** The search's bounds on the same scale: a draw past one is taken at it. */
  lo: number[];
  hi: number[];
  /** Lower-triangular factor of the covariance (L Lᵀ = Σ). */
  factor: number[][];
  /** Whether the covariance is the fit's, or each value's own standard error (older files). */
  covarianceFrom: 'fit' | 'standard-errors';
  /** Each metric's residual scatter (log scale, the residuals' root mean square, widened). */
  scatter: Record<ScatterMetric, number>;
  /**
   * The residual scatter's degrees of freedom: a metric's runs less its share (a third) of the
   * values fitted, the fewest of any metric's, at least 1.
   */
  dof: number;
}

/**
 * The prediction model of a fit: its fitted values (with their standard errors), their
 * covariance where the fit kept it, and each fitted run's relative errors (the residuals).
 */
export function predictionModel(input: {
  fitted: Partial<Record<FitKey, FittedValue>>;
  covariance?: FitCovariance;
  pointErrors: readonly PointMetrics[];
  bounds: (key: FitKey) => FitBounds;
  /** Values held because the runs could not tell them, at the values held. */
  unidentified?: Partial<Record<FitKey, number>>;
}): PredictionModel {
  const fittedKeys = Object.keys(input.fitted) as FitKey[];
  const unidentified = Object.entries(input.unidentified ?? {}).filter(
    ([k, v]) =>
      input.fitted[k as FitKey] === undefined && typeof v === 'number' && Number.isFinite(v),
  ) as [FitKey, number][];
  const keys = [...fittedKeys, ...unidentified.map(([k]) => k)];
  const floors = keys.map((k) => input.bounds(k).floor);
  const center = keys.map((k, j) =>
    Math.log(
      (j < fittedKeys.length
        ? (input.fitted[k] as FittedValue).value
        : (input.unidentified?.[k] as number)) + floors[j],
    ),
  );
  const lo = keys.map((k, j) => Math.log(input.bounds(k).min + floors[j]));
  const hi = keys.map((k, j) => Math.log(input.bounds(k).max + floors[j]));
  // The fit's covariance: over every key drawn (a guess held jointly with what it moves), over
  // the fitted ones (an unidentified value then drawn on its own), or none (an older file).
  const c = input.covariance;
  const covers = (list: FitKey[]) =>
    c !== undefined && list.every((k) => c.keys.includes(k)) && c.matrix.length === c.keys.length;
  const joint = covers(keys);
  const matching = joint || covers(fittedKeys);
  const at = keys.map((k) => c?.keys.indexOf(k) ?? -1);
  const sigma = keys.map((k, i) =>
    keys.map((_, j) => {
      if (joint || (matching && i < fittedKeys.length && j < fittedKeys.length)) {
        return (c as FitCovariance).matrix[at[i]][at[j]];
      }
      if (i >= fittedKeys.length || j >= fittedKeys.length) {
        return i === j ? UNIDENTIFIED_LOG_SD * UNIDENTIFIED_LOG_SD : 0;
      }
      // Each value's own standard error on the log scale (its file's one-s.e. range), uncorrelated.
      if (i !== j) return 0;
      const sd = Math.log((input.fitted[k] as FittedValue).high + floors[i]) - center[i];
      return Number.isFinite(sd) ? sd * sd : 0;
    }),
  );
  return {
    keys,
    center,
    floors,
    lo,
    hi,
    factor: cholesky(sigma),
    covarianceFrom: matching || fittedKeys.length === 0 ? 'fit' : 'standard-errors',
    ...residualScatter(input.pointErrors, fittedKeys.length),
  };
}

/**
 * Each metric's residual scatter: the root mean square of its log errors over the runs, widened
 * by N / (N - p) for the p values fitted to the N residuals (the residuals of a fit are smaller
 * than its errors on new runs), at least MIN_SCATTER.
 */
function residualScatter(
  errors: readonly PointMetrics[],
  fittedKeys: number,
): { scatter: Record<ScatterMetric, number>; dof: number } {
  const metrics: ScatterMetric[] = ['ttftMs', 'tpotMs', 'outputTokPerS'];
  // A run with no figure (no TPOT of one-token answers) has none: JSON keeps NaN as null.
  const logs = metrics.map((m) =>
    errors.flatMap((e) => {
      const v = e[m];
      return typeof v === 'number' && Number.isFinite(v) && v > -1 ? [Math.log(1 + v)] : [];
    }),
  );
  const residuals = logs.reduce((n, l) => n + l.length, 0);
  // The mean square widened by N / (N - p) (the RMS by its square root).
  const widen = residuals / Math.max(1, residuals - fittedKeys);
  const out = {} as Record<ScatterMetric, number>;
  metrics.forEach((m, i) => {
    const l = logs[i];
    const rms = l.length > 0 ? Math.sqrt(l.reduce((s, x) => s + x * x, 0) / l.length) : 0;
    out[m] = Math.max(MIN_SCATTER, rms * Math.sqrt(widen));
  });
  // Each metric's scatter is the mean square of its own runs' residuals, which the fit spent
  // a third of its values on: its degrees of freedom are its runs less that share (three runs
  // and five values: 1.3), the fewest of any metric's.
  const runs = Math.min(...logs.filter((l) => l.length > 0).map((l) => l.length));
  return {
    scatter: out,
    dof: Number.isFinite(runs) ? Math.max(1, runs - fittedKeys / logs.length) : 1,
  };
}

/** The residual scatter a figure takes: TTFT's for TTFT, TPOT's for ITL and TPOT, both for E2E. */
export function scatterOf(model: PredictionModel, figure: string): number {
  const s = model.scatter;
  if (figure.startsWith('ttft')) return s.ttftMs;
  if (figure.startsWith('itl') || figure.startsWith('tpot')) return s.tpotMs;
  if (/tok|throughput|PerS/i.test(figure)) return s.outputTokPerS;
  // End-to-end and the rest are TTFT plus the decode: the wider of the two.
  return Math.max(s.ttftMs, s.tpotMs);
}

/** `count` draws of the fitted values (seeded: the same draws every time), each within the bounds. */
export function drawValues(
  model: PredictionModel,
  count = PREDICTION_DRAWS,
  seed = 1,
): Partial<Record<FitKey, number>>[] {
  const rng = createRng(seed);
  const n = model.keys.length;
  return Array.from({ length: count }, () => {
    const z = Array.from({ length: n }, () => normalDeviate(rng));
    const values: Partial<Record<FitKey, number>> = {};
    model.keys.forEach((k, i) => {
      let theta = model.center[i];
      for (let j = 0; j <= i; j++) theta += model.factor[i][j] * z[j];
      theta = Math.min(model.hi[i], Math.max(model.lo[i], theta));
      values[k] = Math.exp(theta) - model.floors[i];
    });
    return values;
  });
}

/** The fitted values themselves, as drawValues gives a draw. */
export function centralValues(model: PredictionModel): Partial<Record<FitKey, number>> {
  const values: Partial<Record<FitKey, number>> = {};
  model.keys.forEach((k, i) => {
    values[k] = Math.exp(model.center[i]) - model.floors[i];
  });
  return values;
}

/** Figures by name; null where a run has none (no TPOT of one-token answers). */
export type Figures<K extends string> = Record<K, number | null>;

/** The central figures and, per figure, each draw's log ratio to them. */
export interface PredictedFigures<K extends string> {
  central: Figures<K>;
  deltas: Record<K, number[]>;
  draws: number;
}

/**
 * Runs `simulate` at the fitted values and at `draws` draws of them, and returns the central
 * figures with each draw's log ratio to them. `simulate` must run the same workload with the
 * same seed every time, so that a ratio is the values' effect alone.
 */
export function predictFigures<K extends string>(
  model: PredictionModel,
  simulate: (values: Partial<Record<FitKey, number>>) => Figures<K>,
  o: { draws?: number; seed?: number } = {},
): PredictedFigures<K> {
  const central = simulate(centralValues(model));
  const names = Object.keys(central) as K[];
  const deltas = Object.fromEntries(names.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  // Nothing fitted (measured steps with every value held): no draws to make.
  const draws = model.keys.length > 0 ? drawValues(model, o.draws ?? PREDICTION_DRAWS, o.seed) : [];
  for (const values of draws) {
    const figures = simulate(values);
    for (const k of names) {
      const c = central[k];
      const v = figures[k];
      if (c !== null && v !== null && c > 0 && v > 0) deltas[k].push(Math.log(v / c));
    }
  }
  return { central, deltas, draws: draws.length };
}

/**
 * The interval of a figure predicted at `value`: the mixture over the draws' log ratios of a
 * the figure's residual (residualOf), its (1 -+ level) / 2 quantiles, on `value`'s scale.
 * Undefined for a value that is not a positive number.
 */
export function intervalOf(
  value: number | null | undefined,
  deltas: readonly number[],
  residual: Residual,
  level = PREDICTION_LEVEL,
): PredictionInterval | undefined {
  if (value == null || !(value > 0) || !Number.isFinite(value)) return undefined;
  const d = deltas.length > 0 ? deltas : [0];
  const tail = (1 - level) / 2;
  return {
    low: value * Math.exp(mixtureQuantile(d, residual, tail)),
    high: value * Math.exp(mixtureQuantile(d, residual, 1 - tail)),
    level,
  };
}

/**
 * A figure's residual: its scatter (log scale) and, for a scatter estimated from few runs, the
 * degrees of freedom of its Student t (absent: a normal).
 */
export interface Residual {
  sigma: number;
  dof?: number;
}

/** The residual a figure of the model takes (scatterOf's scatter, the model's degrees of freedom). */
export function residualOf(model: PredictionModel, figure: string): Residual {
  return { sigma: scatterOf(model, figure), dof: model.dof };
}

/**
 * The probability that a figure predicted at `value` is at most `limit` (a latency SLO), over
 * the same mixture as intervalOf.
 */
export function probabilityAtMost(
  value: number,
  limit: number,
  deltas: readonly number[],
  residual: Residual,
): number {
  if (!(value > 0) || !(limit > 0)) return value <= limit ? 1 : 0;
  return mixtureCdf(deltas.length > 0 ? deltas : [0], residual, Math.log(limit / value));
}

/**
 * The probability that a figure predicted at `value` is at least `limit` (a throughput or an
 * attainment floor), over the same mixture as intervalOf: probabilityAtMost's complement.
 */
export function probabilityAtLeast(
  value: number,
  limit: number,
  deltas: readonly number[],
  residual: Residual,
): number {
  if (!(value > 0) || !(limit > 0)) return value >= limit ? 1 : 0;
  return 1 - mixtureCdf(deltas.length > 0 ? deltas : [0], residual, Math.log(limit / value));
}

function mixtureCdf(deltas: readonly number[], residual: Residual, x: number): number {
  const { sigma, dof } = residual;
  let sum = 0;
  for (const d of deltas) {
    if (!(sigma > 0)) sum += x >= d ? 1 : 0;
    else sum += dof === undefined ? normalCdf((x - d) / sigma) : studentTCdf((x - d) / sigma, dof);
  }
  return sum / deltas.length;
}

/**
 * The q-quantile of the mixture, by bisection (it is monotone; 80 halvings narrow even the wide
 * bracket a t of one or two degrees of freedom needs to 1e-20 of it).
 */
function mixtureQuantile(deltas: readonly number[], residual: Residual, q: number): number {
  const reach = residual.sigma * (residual.dof !== undefined && residual.dof < 3 ? 400 : 12);
  let lo = Math.min(...deltas) - reach - 1e-9;
  let hi = Math.max(...deltas) + reach + 1e-9;
  for (let i = 0; i < 80; i++) {
    const mid = (lo + hi) / 2;
    if (mixtureCdf(deltas, residual, mid) < q) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** The standard normal's distribution function. */
export function normalCdf(z: number): number {
  return 0.5 * erfc(-z / Math.SQRT2);
}

/** Student's t distribution function with `dof` degrees of freedom (through the incomplete beta). */
export function studentTCdf(t: number, dof: number): number {
  const tail = 0.5 * incompleteBeta(dof / (dof + t * t), dof / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** The regularised incomplete beta I_x(a, b) (Lentz's continued fraction, Numerical Recipes 6.4). */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  // The fraction converges fast below (a + 1) / (a + b + 2); above, by symmetry.
  if (x > (a + 1) / (a + b + 2)) return 1 - incompleteBeta(1 - x, b, a);
  const front = Math.exp(
    logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x),
  );
  const tiny = 1e-300;
  const guard = (v: number) => (Math.abs(v) < tiny ? tiny : v);
  let c = 1;
  let d = 1 / guard(1 - ((a + b) * x) / (a + 1));
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    const even = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 / guard(1 + even * d);
    c = guard(1 + even / c);
    h *= d * c;
    const odd = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 / guard(1 + odd * d);
    c = guard(1 + odd / c);
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-12) break;
  }
  return (front * h) / a;
}

/**
 * The lower-triangular factor of a covariance; a direction with no variance (or a matrix made
 * slightly indefinite by rounding) gets a zero column rather than a failure.
 */
function cholesky(a: number[][]): number[][] {
  const n = a.length;
  const l = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = a[i][j];
      for (let k = 0; k < j; k++) s -= l[i][k] * l[j][k];
      if (i === j) l[i][i] = s > 0 ? Math.sqrt(s) : 0;
      else l[i][j] = l[j][j] > 0 ? s / l[j][j] : 0;
    }
  }
  return l;
}
