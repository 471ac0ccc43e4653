import type { RunSummary } from '../metrics/summary.js';

/**
 * Prefill and decode probes, as numbers: least-squares fits with r², the measurements of one
 * probe point taken from its run summary, and table rows. No formatting here.
 *
 * - Prefill (max_tokens 1, one input length per point): `TTFT(n) = a + n / rate`, a the fixed
 *   latency (front end, scheduling, the first step's own overhead; ms) and rate the prefill
 *   tokens per second; with `a + b n + c n²` beside it, the n² term being attention.
 * - Decode (short input, long output, one concurrency per point): `TPOT(c) = a + b c`, a the
 *   per-step cost at batch 1 (ms), b what each further sequence in the batch adds (ms).
 */

/** y = intercept + slope x. */
export interface LinearFit {
  intercept: number;
  slope: number;
  /** Coefficient of determination, 1 - SSres / SStot (1 where every y is the same and fitted). */
  r2: number;
  points: number;
}

/** y = a + b x + c x². */
export interface QuadraticFit {
  a: number;
  b: number;
  c: number;
  r2: number;
  points: number;
}

function checkLengths(x: readonly number[], y: readonly number[]): void {
  if (x.length !== y.length) {
    throw new RangeError(`x and y differ in length (${x.length} and ${y.length})`);
  }
}

function rSquared(x: readonly number[], y: readonly number[], f: (x: number) => number): number {
  const mean = y.reduce((s, v) => s + v, 0) / y.length;
  let ssTot = 0;
  let ssRes = 0;
  for (let i = 0; i < y.length; i++) {
    ssTot += (y[i] - mean) ** 2;
    ssRes += (y[i] - f(x[i])) ** 2;
  }
  if (ssTot === 0) return ssRes === 0 ? 1 : 0;
  return 1 - ssRes / ssTot;
}

/** Ordinary least squares; undefined with fewer than 2 points or all x equal. */
export function fitLinear(x: readonly number[], y: readonly number[]): LinearFit | undefined {
  checkLengths(x, y);
  const n = x.length;
  if (n < 2) return undefined;
  const mx = x.reduce((s, v) => s + v, 0) / n;
  const my = y.reduce((s, v) => s + v, 0) / n;
  let sxx = 0;
  let sxy = 0;
  for (let i = 0; i < n; i++) {
    sxx += (x[i] - mx) ** 2;
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx === 0) return undefined;
  const slope = sxy / sxx;
  const intercept = my - slope * mx;
  return { intercept, slope, r2: rSquared(x, y, (v) => intercept + slope * v), points: n };
}

/** r² below which a fitted line is no finding (unless its points lie within RELIABLE_SPREAD of it). */
export const MIN_FIT_R2 = 0.9;
/** Residuals (RMS) within this share of the mean y: a flat set of points, fitted well at any r². */
const RELIABLE_SPREAD = 0.02;

/** A least-squares line whose intercept and slope are both held >= 0. */
export interface NonNegativeFit extends LinearFit {
  /** The term the ordinary fit put below zero, held at 0 in this one, and the value it had. */
  held?: { term: 'intercept' | 'slope'; unconstrained: number };
  /** False where the line explains the points poorly (r² < MIN_FIT_R2 and visible scatter). */
  reliable: boolean;
}

/**
 * Least squares of y = intercept + slope x with intercept >= 0 and slope >= 0, for costs that
 * cannot be negative (a fixed latency, a per-step cost): the ordinary fit where both come out
 * >= 0; else, as non-negative least squares in two unknowns, the better of the line through the
 * origin and the flat line. Undefined where `fitLinear` is.
 */
export function fitLinearNonNegative(
  x: readonly number[],
  y: readonly number[],
): NonNegativeFit | undefined {
  const ols = fitLinear(x, y);
  if (!ols) return undefined;
  const judged = (fit: LinearFit, held?: NonNegativeFit['held']): NonNegativeFit => {
    const mean = y.reduce((s, v) => s + v, 0) / y.length;
    let squares = 0;
    for (let i = 0; i < y.length; i++) squares += (y[i] - fit.intercept - fit.slope * x[i]) ** 2;
    const flat = Math.sqrt(squares / y.length) <= RELIABLE_SPREAD * Math.abs(mean);
    return { ...fit, ...(held ? { held } : {}), reliable: fit.r2 >= MIN_FIT_R2 || flat };
  };
  if (ols.intercept >= 0 && ols.slope >= 0) return judged(ols);
  const line = (intercept: number, slope: number): LinearFit => ({
    intercept,
    slope,
    r2: rSquared(x, y, (v) => intercept + slope * v),
    points: x.length,
  });
  const sxy = x.reduce((s, v, i) => s + v * y[i], 0);
  const sxx = x.reduce((s, v) => s + v * v, 0);
  const throughOrigin = line(0, Math.max(0, sxy / sxx));
  const flat = line(Math.max(0, y.reduce((s, v) => s + v, 0) / y.length), 0);
  // Equal r² means equal residuals: either is the constrained optimum.
  return throughOrigin.r2 >= flat.r2
    ? judged(throughOrigin, { term: 'intercept', unconstrained: ols.intercept })
    : judged(flat, { term: 'slope', unconstrained: ols.slope });
}

/**
 * Ordinary least squares of a parabola; undefined with fewer than 3 distinct x. Solved on
 * centred and scaled x (token counts squared reach 10^8: the raw normal equations would lose
 * digits), then mapped back.
 */
export function fitQuadratic(x: readonly number[], y: readonly number[]): QuadraticFit | undefined {
  checkLengths(x, y);
  const n = x.length;
  if (new Set(x).size < 3) return undefined;
  const mx = x.reduce((s, v) => s + v, 0) / n;
  const sx = Math.max(...x.map((v) => Math.abs(v - mx)));
  // Normal equations in u = (x - mx) / sx: sums of u^0..u^4 and of y u^0..u^2.
  const su = [0, 0, 0, 0, 0];
  const sy = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    const u = (x[i] - mx) / sx;
    let p = 1;
    for (let k = 0; k <= 4; k++) {
      su[k] += p;
      if (k <= 2) sy[k] += p * y[i];
      p *= u;
    }
  }
  const m = [
    [su[0], su[1], su[2], sy[0]],
    [su[1], su[2], su[3], sy[1]],
    [su[2], su[3], su[4], sy[2]],
  ];
  const p = solve3(m);
  if (!p) return undefined;
  const [p0, p1, p2] = p;
  const c = p2 / sx ** 2;
  const b = p1 / sx - (2 * p2 * mx) / sx ** 2;
  const a = p0 - (p1 * mx) / sx + (p2 * mx ** 2) / sx ** 2;
  return { a, b, c, r2: rSquared(x, y, (v) => a + b * v + c * v * v), points: n };
}

/** Gaussian elimination with partial pivoting on a 3x4 augmented matrix. */
function solve3(m: number[][]): [number, number, number] | undefined {
  for (let col = 0; col < 3; col++) {
    let pivot = col;
    for (let r = col + 1; r < 3; r++) if (Math.abs(m[r][col]) > Math.abs(m[pivot][col])) pivot = r;
    if (Math.abs(m[pivot][col]) < 1e-12 * Math.max(1, Math.abs(m[0][0]))) return undefined;
    [m[col], m[pivot]] = [m[pivot], m[col]];
    for (let r = col + 1; r < 3; r++) {
      const f = m[r][col] / m[col][col];
      for (let k = col; k < 4; k++) m[r][k] -= f * m[col][k];
    }
  }
  const out = [0, 0, 0];
  for (let r = 2; r >= 0; r--) {
    let s = m[r][3];
    for (let k = r + 1; k < 3; k++) s -= m[r][k] * out[k];
    out[r] = s / m[r][r];
  }
  return out.every(Number.isFinite) ? (out as [number, number, number]) : undefined;
}

/** Requests at one probe point: at least `perPoint` and two full waves, in whole waves. */
export function pointRequests(perPoint: number, batch: number): number {
  return Math.ceil(Math.max(perPoint, 2 * batch) / batch) * batch;
}

/** Input lengths doubling from `min` while below `max`, then `max` itself. */
export function doublingLengths(min: number, max: number): number[] {
  const out: number[] = [];
  for (let n = min; n < max; n *= 2) out.push(n);
  out.push(max);
  return out;
}

/** One prefill point: B concurrent requests of n input tokens and max_tokens 1. */
export interface PrefillMeasurement {
  /** Input tokens asked for per request. */
  inputTokens: number;
  /** Concurrency of the closed loop: requests prefilled together. */
  batch: number;
  requests: number;
  completed: number;
  failed: number;
  /** Mean input tokens per completed request as the server counted them (else as asked). */
  countedInputTokens: number;
  /** Time-weighted mean of requests in flight. */
  meanConcurrency: number;
  /**
   * Counted input tokens per second over the point (all requests' tokens / its duration): with
   * max_tokens 1 the prefill throughput at the measured concurrency (Little's law). Where each
   * batch runs in lockstep it is input x batch / mean TTFT; it stays right where a batch over
   * the step's token budget is chunked and its requests finish steps apart.
   */
  inputTokensPerS: number;
  ttftMeanMs: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
}

export interface PrefillRow extends PrefillMeasurement {
  /** Prefill tokens/s at this batch: `inputTokensPerS`, NaN where nothing completed. */
  prefillTokensPerS: number;
  /**
   * TGI's prefill throughput, input x batch / mean TTFT: the same as `prefillTokensPerS` when
   * a batch runs in lockstep (less the client's turnaround between requests), too high where a
   * batch over the step budget is chunked and its early finishers pull the mean TTFT down.
   */
  ttftTokensPerS: number;
}

/** One decode point: C concurrent requests of a short input and a long output. */
export interface DecodeMeasurement {
  /** Concurrency of the closed loop. */
  concurrency: number;
  requests: number;
  completed: number;
  failed: number;
  meanConcurrency: number;
  /** Mean output tokens per completed request. */
  outputTokensMean: number;
  itlP50Ms: number;
  itlP99Ms: number;
  tpotMeanMs: number;
  tpotP50Ms: number;
}

export interface DecodeRow extends DecodeMeasurement {
  /** One user's decode speed: 1000 / mean TPOT. */
  perUserTokensPerS: number;
  /** All users together: measured concurrency x per-user tokens/s. */
  systemTokensPerS: number;
}

/** The prefill point's numbers from its run summary. */
export function prefillMeasurement(
  summary: RunSummary,
  inputTokens: number,
  batch: number,
): PrefillMeasurement {
  const { completed, failed } = summary.requests;
  const ttft = summary.latency.ttftMs;
  return {
    inputTokens,
    batch,
    requests: completed + failed,
    completed,
    failed,
    countedInputTokens:
      completed > 0 && summary.tokens.input > 0 ? summary.tokens.input / completed : inputTokens,
    meanConcurrency: summary.load.meanConcurrency,
    inputTokensPerS: summary.throughput.inputTokensPerS,
    ttftMeanMs: ttft.mean,
    ttftP50Ms: ttft.p50,
    ttftP99Ms: ttft.p99,
  };
}

/** The decode point's numbers from its run summary. */
export function decodeMeasurement(summary: RunSummary, concurrency: number): DecodeMeasurement {
  const { completed, failed } = summary.requests;
  return {
    concurrency,
    requests: completed + failed,
    completed,
    failed,
    meanConcurrency: summary.load.meanConcurrency,
    outputTokensMean: completed > 0 ? summary.tokens.output / completed : 0,
    itlP50Ms: summary.latency.itlMs.p50,
    itlP99Ms: summary.latency.itlMs.p99,
    tpotMeanMs: summary.latency.tpotMs.mean,
    tpotP50Ms: summary.latency.tpotMs.p50,
  };
}

const usable = (v: number) => Number.isFinite(v) && v > 0;

/** Table rows, by input length then batch. */
export function prefillRows(points: readonly PrefillMeasurement[]): PrefillRow[] {
  return [...points]
    .sort((p, q) => p.inputTokens - q.inputTokens || p.batch - q.batch)
    .map((p) => ({
      ...p,
      prefillTokensPerS: p.completed > 0 ? p.inputTokensPerS : Number.NaN,
      ttftTokensPerS:
        p.completed > 0 && usable(p.ttftMeanMs)
          ? (p.countedInputTokens * p.batch * 1000) / p.ttftMeanMs
          : Number.NaN,
    }));
}

/** Table rows, by concurrency. */
export function decodeRows(points: readonly DecodeMeasurement[]): DecodeRow[] {
  return [...points]
    .sort((p, q) => p.concurrency - q.concurrency)
    .map((p) => {
      const perUser = p.completed > 0 && usable(p.tpotMeanMs) ? 1000 / p.tpotMeanMs : Number.NaN;
      return { ...p, perUserTokensPerS: perUser, systemTokensPerS: p.meanConcurrency * perUser };
    });
}

/** `TTFT(n) = fixedMs + n / tokensPerS`, with the parabola beside it. */
export interface PrefillModel {
  /** The batch whose points were fitted (1, or the smallest probed); n counts its whole wave. */
  batch: number;
  fixedMs: number;
  tokensPerS: number;
  r2: number;
  points: number;
  /** Tokens per wave (counted input x batch) of the fitted points. */
  tokens: { min: number; max: number };
  /** Set where least squares gave a negative fixed latency: held at 0, this is what it gave. */
  fixedMsUnconstrained?: number;
  /** False where the line explains the points poorly: no finding is drawn from it. */
  reliable: boolean;
  /** `TTFT(n) = fixedMs + msPerToken n + msPerToken2 n²`, with 4 points or more. */
  quadratic?: {
    fixedMs: number;
    msPerToken: number;
    msPerToken2: number;
    r2: number;
    /** The n² term's share of the fitted TTFT at the longest input. */
    shareAtMax: number;
    /**
     * Attention's quadratic cost shows: both terms positive, the n² term at least 5 % of TTFT
     * at the longest input, and the parabola leaves at most half the line's unexplained variance.
     */
    matters: boolean;
  };
}

/** Share of TTFT at the longest input above which the n² term is said to matter. */
export const QUADRATIC_SHARE = 0.05;

/**
 * Fits the points of the smallest batch probed (batch 1 by default): x is the tokens of one
 * wave (counted input x batch), y the mean TTFT. The fixed latency is held >= 0 (a negative
 * one is noise, not a finding). Undefined with fewer than 2 lengths, or a slope that is not
 * positive (no rate to speak of).
 */
export function fitPrefill(points: readonly PrefillMeasurement[]): PrefillModel | undefined {
  const good = points.filter((p) => p.completed > 0 && usable(p.ttftMeanMs));
  if (good.length === 0) return undefined;
  const batch = Math.min(...good.map((p) => p.batch));
  const at = good.filter((p) => p.batch === batch);
  const x = at.map((p) => p.countedInputTokens * p.batch);
  const y = at.map((p) => p.ttftMeanMs);
  const linear = fitLinearNonNegative(x, y);
  if (!linear || !(linear.slope > 0)) return undefined;
  const model: PrefillModel = {
    batch,
    fixedMs: linear.intercept,
    tokensPerS: 1000 / linear.slope,
    r2: linear.r2,
    points: linear.points,
    tokens: { min: Math.min(...x), max: Math.max(...x) },
    ...(linear.held ? { fixedMsUnconstrained: linear.held.unconstrained } : {}),
    reliable: linear.reliable,
  };
  const quadratic = at.length >= 4 ? fitQuadratic(x, y) : undefined;
  if (quadratic) {
    const n = model.tokens.max;
    const predicted = quadratic.a + quadratic.b * n + quadratic.c * n * n;
    const shareAtMax = predicted > 0 ? (quadratic.c * n * n) / predicted : 0;
    model.quadratic = {
      fixedMs: quadratic.a,
      msPerToken: quadratic.b,
      msPerToken2: quadratic.c,
      r2: quadratic.r2,
      shareAtMax,
      matters:
        quadratic.b > 0 &&
        quadratic.c > 0 &&
        shareAtMax >= QUADRATIC_SHARE &&
        1 - quadratic.r2 <= 0.5 * (1 - linear.r2),
    };
  }
  return model;
}

/** `TPOT(c) = stepMs + perSequenceMs c`. */
export interface DecodeModel {
  /** Per-step cost at batch 1 (ms): a. */
  stepMs: number;
  /** What each further sequence in the batch adds to a step (ms): b. */
  perSequenceMs: number;
  r2: number;
  points: number;
  concurrency: { min: number; max: number };
  /** Set where least squares put a term below zero: held at 0, this is what it gave (ms). */
  held?: { term: 'stepMs' | 'perSequenceMs'; unconstrainedMs: number };
  /** False where the line explains the points poorly: no finding is drawn from it. */
  reliable: boolean;
}

/**
 * Fits mean TPOT against the concurrency set, both terms held >= 0 (neither cost can be
 * negative); undefined with fewer than 2 levels.
 */
export function fitDecode(points: readonly DecodeMeasurement[]): DecodeModel | undefined {
  const good = points.filter((p) => p.completed > 0 && usable(p.tpotMeanMs));
  const x = good.map((p) => p.concurrency);
  const linear = fitLinearNonNegative(
    x,
    good.map((p) => p.tpotMeanMs),
  );
  if (!linear) return undefined;
  const held = linear.held;
  return {
    stepMs: linear.intercept,
    perSequenceMs: linear.slope,
    r2: linear.r2,
    points: linear.points,
    concurrency: { min: Math.min(...x), max: Math.max(...x) },
    ...(held
      ? {
          held: {
            term: held.term === 'intercept' ? 'stepMs' : 'perSequenceMs',
            unconstrainedMs: held.unconstrained,
          },
        }
      : {}),
    reliable: linear.reliable,
  };
}
