import { createRng, type Rng } from '../rng.js';

/**
 * Seeded length distributions for prompts and outputs. A request's length depends only on
 * (seed, request id), never on the order of calls, so a run, its virtual-time twin and a rerun
 * ask for exactly the same lengths. Give input and output lengths independent streams:
 * `sampleLength(d, streamSeed(seed, 'input'), id)` and `streamSeed(seed, 'output')`.
 */
export type LengthDistribution =
  | { kind: 'fixed'; value: number }
  /** Whole numbers from `min` to `max`, both included, equally likely. */
  | { kind: 'uniform'; min: number; max: number }
  /** Rounded and truncated to [min, max] by re-drawing (not clamping): no pile-up at a bound. */
  | { kind: 'normal'; mean: number; sd: number; min?: number; max?: number }
  | { kind: 'poisson'; mean: number }
  /**
   * `mean` and `sd` of the lengths themselves (not of their logarithm), before any bounds.
   * With `min` or `max`, truncated to [min, max] by re-drawing like the normal; without, as
   * before: rounded and clamped to the caller's minimum.
   */
  | { kind: 'lognormal'; mean: number; sd: number; min?: number; max?: number }
  /** Each request draws one of `values` (rounded), equally likely: e.g. a dataset's lengths. */
  | { kind: 'empirical'; values: readonly number[] };

const SYNTAX =
  'expected N, uniform:MIN:MAX, normal:MEAN:SD[:MIN[:MAX]], poisson:MEAN, lognormal:MEAN:SD[:MIN[:MAX]] or empirical:V1,V2,... (e.g. 256, uniform:128:512, normal:256:64, normal:256:64:128:512, poisson:256, lognormal:256:128, lognormal:256:128:16:4096)';

/**
 * A bounded normal's or log-normal's bounds must keep at least this share of it: re-drawing
 * (see sampleLength) then ends quickly.
 */
const MIN_KEPT_MASS = 0.01;
/** Re-draws of a truncated draw before giving up and clamping (only with a caller's `min`). */
const MAX_REDRAWS = 10_000;

/**
 * Parses "256", "uniform:128:512", "normal:256:64" (optional ":min:max", either may be empty:
 * "normal:256:64::512"), "poisson:256", "lognormal:256:128" (optional ":min:max" as for the
 * normal) or "empirical:12,40,300".
 * Throws an Error that names the bad text and shows the syntax.
 */
export function parseLengthDistribution(text: string): LengthDistribution {
  const fail = (why: string): never => {
    throw new Error(`invalid length distribution "${text}": ${why}; ${SYNTAX}`);
  };
  const trimmed = text.trim();
  const [head, ...rest] = trimmed.split(':');
  const kind = head.toLowerCase();
  const number = (s: string | undefined, name: string): number => {
    if (s === undefined || !/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(s.trim())) {
      return fail(`${name} must be a number, got ${s === undefined ? 'nothing' : `"${s}"`}`);
    }
    return Number(s);
  };
  const arity = (min: number, max: number) => {
    if (rest.length < min || rest.length > max) {
      fail(`${kind} takes ${min === max ? min : `${min} to ${max}`} values, got ${rest.length}`);
    }
  };
  let d: LengthDistribution;
  if (rest.length === 0 && /^[+-]?[\d.]/.test(trimmed)) {
    d = { kind: 'fixed', value: number(trimmed, 'the length') };
  } else if (kind === 'fixed') {
    arity(1, 1);
    d = { kind: 'fixed', value: number(rest[0], 'the length') };
  } else if (kind === 'uniform') {
    arity(2, 2);
    d = { kind: 'uniform', min: number(rest[0], 'min'), max: number(rest[1], 'max') };
  } else if (kind === 'normal' || kind === 'lognormal') {
    arity(2, 4);
    const bounded: Extract<LengthDistribution, { kind: 'normal' | 'lognormal' }> = {
      kind,
      mean: number(rest[0], 'mean'),
      sd: number(rest[1], 'sd'),
    };
    if (rest[2] !== undefined && rest[2] !== '') bounded.min = number(rest[2], 'min');
    if (rest[3] !== undefined && rest[3] !== '') bounded.max = number(rest[3], 'max');
    d = bounded;
  } else if (kind === 'poisson') {
    arity(1, 1);
    d = { kind: 'poisson', mean: number(rest[0], 'mean') };
  } else if (kind === 'empirical') {
    arity(1, 1);
    d = {
      kind: 'empirical',
      values: rest[0].split(',').map((v, i) => number(v, `value ${i + 1}`)),
    };
  } else {
    return fail(`unknown kind "${head}"`);
  }
  const problem = lengthDistributionProblem(d);
  if (problem) fail(problem);
  return d;
}

/**
 * What is wrong with `d`, or undefined: bounds in order, lengths non-negative, whole numbers
 * where the syntax says so, and a normal's bounds keeping at least 1% of it (with the default
 * minimum length of 1).
 */
export function lengthDistributionProblem(d: LengthDistribution): string | undefined {
  const finite = (x: number) => Number.isFinite(x);
  const whole = (x: number) => Number.isInteger(x) && x >= 0;
  switch (d.kind) {
    case 'fixed':
      return whole(d.value) ? undefined : `length ${d.value} must be a whole number >= 0`;
    case 'uniform':
      if (!whole(d.min) || !whole(d.max)) return 'min and max must be whole numbers >= 0';
      return d.min <= d.max ? undefined : `min ${d.min} is above max ${d.max}`;
    case 'normal': {
      if (!finite(d.mean) || !finite(d.sd) || d.sd < 0) {
        return 'mean must be a number and sd a number >= 0';
      }
      if (d.min !== undefined && !(finite(d.min) && d.min >= 0)) return 'min must be >= 0';
      if (d.max !== undefined && !(finite(d.max) && d.max >= 0)) return 'max must be >= 0';
      const { lo, hi } = truncationBounds(d, 1);
      if (lo > hi) return `no whole number lies between min ${d.min ?? 1} and max ${d.max}`;
      const mass = normalMass(d, lo, hi);
      if (mass < MIN_KEPT_MASS) {
        return `min and max keep only ${(mass * 100).toPrecision(2)}% of normal(${d.mean}, ${d.sd}); widen them or move the mean`;
      }
      return undefined;
    }
    case 'poisson':
      return finite(d.mean) && d.mean > 0 ? undefined : 'mean must be > 0';
    case 'lognormal': {
      if (!(finite(d.mean) && d.mean > 0 && finite(d.sd) && d.sd >= 0)) {
        return 'mean must be > 0 and sd >= 0';
      }
      // Bounds are token counts, and must surround the mean they were written around.
      if (d.min !== undefined && !whole(d.min)) return `min ${d.min} must be a whole number >= 0`;
      if (d.max !== undefined && !whole(d.max)) return `max ${d.max} must be a whole number >= 0`;
      if (d.min !== undefined && d.min > d.mean) return `min ${d.min} is above the mean ${d.mean}`;
      if (d.max !== undefined && d.max < d.mean) return `max ${d.max} is below the mean ${d.mean}`;
      if (d.min === undefined && d.max === undefined) return undefined;
      const { lo, hi } = truncationBounds(d, 1);
      if (lo > hi) return `no whole number lies between min ${d.min ?? 1} and max ${d.max}`;
      const { mass } = lognormalTruncated(d, lo, hi);
      if (mass < MIN_KEPT_MASS) {
        return `min and max keep only ${(mass * 100).toPrecision(2)}% of lognormal(${d.mean}, ${d.sd}); widen them`;
      }
      return undefined;
    }
    case 'empirical':
      if (d.values.length === 0) return 'needs at least one value';
      for (const v of d.values) if (!(finite(v) && v >= 0)) return `value ${v} is not a length`;
      return undefined;
  }
}

/** The text parseLengthDistribution reads back (an empirical list of over 16 values is summarised). */
export function formatLengthDistribution(d: LengthDistribution): string {
  switch (d.kind) {
    case 'fixed':
      return String(d.value);
    case 'uniform':
      return `uniform:${d.min}:${d.max}`;
    case 'normal':
    case 'lognormal': {
      const bounds =
        d.max !== undefined ? `:${d.min ?? ''}:${d.max}` : d.min !== undefined ? `:${d.min}` : '';
      return `${d.kind}:${d.mean}:${d.sd}${bounds}`;
    }
    case 'poisson':
      return `poisson:${d.mean}`;
    case 'empirical':
      return d.values.length <= 16
        ? `empirical:${d.values.join(',')}`
        : `empirical(${d.values.length} values, mean ${meanOf(d, 0).toFixed(1)})`;
  }
}

/**
 * A seed for one independent stream of a run: `streamSeed(seed, 'input')` for prompt lengths,
 * `streamSeed(seed, 'output')` for output lengths (any other name gives another stream).
 */
export function streamSeed(seed: number, stream: 'input' | 'output' | (string & {})): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < stream.length; i++) h = Math.imul(h ^ stream.charCodeAt(i), 0x01000193);
  return mix32((mix32(seed >>> 0) ^ h) >>> 0);
}

/** The generator for request `id` of the stream `seed`: independent of every other id. */
export function requestRng(seed: number, id: number): Rng {
  const lo = id >>> 0;
  const hi = Math.floor(id / 4294967296) >>> 0;
  let h = mix32((seed >>> 0) ^ mix32(hi));
  h = mix32((h + Math.imul(lo, 0x9e3779b9)) >>> 0);
  return createRng(h);
}

/**
 * The length of request `id`: a whole number >= `min` (default 1), the same for the same
 * (d, seed, id) whatever the order of calls. Every kind rounds to the nearest whole number and
 * then clamps to `min`, except the normal and a log-normal with bounds, whose
 * [max(min, d.min), d.max] is a truncation: it re-draws until inside (it clamps only if 10,000
 * draws all miss, which the parser's 1% rule rules out unless the caller's `min` is far above
 * the distribution). Truncation keeps the distribution's shape inside the bounds; clamping
 * would pile every draw beyond a bound onto it (a spike at max_model_len, say).
 */
export function sampleLength(d: LengthDistribution, seed: number, id: number, min = 1): number {
  let n: number;
  switch (d.kind) {
    case 'fixed':
      n = Math.round(d.value);
      break;
    case 'uniform': {
      const rng = requestRng(seed, id);
      n = d.min + rng.int(d.max - d.min + 1);
      break;
    }
    case 'normal': {
      const rng = requestRng(seed, id);
      const { lo, hi } = truncationBounds(d, min);
      n = Math.round(d.mean + d.sd * normalDeviate(rng));
      for (let i = 1; i < MAX_REDRAWS && (n < lo || n > hi); i++) {
        n = Math.round(d.mean + d.sd * normalDeviate(rng));
      }
      n = Math.min(hi, Math.max(lo, n));
      break;
    }
    case 'poisson':
      n = poissonDeviate(requestRng(seed, id), d.mean);
      break;
    case 'lognormal': {
      const { mu, sigma } = lognormalParameters(d.mean, d.sd);
      const rng = requestRng(seed, id);
      const draw = () => Math.round(Math.exp(mu + sigma * normalDeviate(rng)));
      n = draw();
      if (d.min === undefined && d.max === undefined) break;
      const { lo, hi } = truncationBounds(d, min);
      for (let i = 1; i < MAX_REDRAWS && (n < lo || n > hi); i++) n = draw();
      n = Math.min(hi, Math.max(lo, n));
      break;
    }
    case 'empirical':
      n = Math.round(d.values[requestRng(seed, id).int(d.values.length)]);
      break;
  }
  if (!Number.isFinite(n)) {
    throw new Error(`length distribution ${formatLengthDistribution(d)} gave ${n}`);
  }
  return Math.max(min, n);
}

/**
 * The mean of what sampleLength(d, ·, ·, min) returns, for plans and reports: exact for every
 * kind (a normal's truncation, the clamp to `min` included) except the log-normal, where the
 * rounding to whole tokens is neglected (it moves the mean by far less than a token).
 */
export function meanOf(d: LengthDistribution, min = 1): number {
  switch (d.kind) {
    case 'fixed':
      return Math.max(min, Math.round(d.value));
    case 'uniform': {
      const count = d.max - d.min + 1;
      if (min <= d.min) return (d.min + d.max) / 2;
      if (min >= d.max) return min;
      // Values below min become min.
      return ((min - d.min) * min + ((min + d.max) * (d.max - min + 1)) / 2) / count;
    }
    case 'normal':
      return normalMean(d, min);
    case 'poisson': {
      // E[max(min, K)] = mean + sum over k < min of (min - k) P(K = k).
      let mean = d.mean;
      for (let k = 0; k < min; k++) mean += (min - k) * poissonPmf(d.mean, k);
      return mean;
    }
    case 'lognormal': {
      if (d.min !== undefined || d.max !== undefined) {
        const { lo, hi } = truncationBounds(d, min);
        return lognormalTruncated(d, lo, hi).mean;
      }
      if (min <= 0) return d.mean;
      // Lengths that round below min become min: add (min - n) P(round(X) = n) for n < min.
      const { mu, sigma } = lognormalParameters(d.mean, d.sd);
      const cdf = (x: number) =>
        x <= 0 ? 0 : sigma === 0 ? (Math.exp(mu) < x ? 1 : 0) : phi((Math.log(x) - mu) / sigma);
      let mean = d.mean;
      for (let n = 0; n < min; n++) mean += (min - n) * (cdf(n + 0.5) - cdf(n - 0.5));
      return mean;
    }
    case 'empirical': {
      let sum = 0;
      for (const v of d.values) sum += Math.max(min, Math.round(v));
      return sum / d.values.length;
    }
  }
}

/** mu and sigma of the logarithm, from the mean and sd of the log-normal lengths. */
export function lognormalParameters(mean: number, sd: number): { mu: number; sigma: number } {
  const sigma2 = Math.log(1 + (sd * sd) / (mean * mean));
  return { mu: Math.log(mean) - sigma2 / 2, sigma: Math.sqrt(sigma2) };
}

// ---- deviates ----

/** A standard normal deviate (Box-Muller, one of the pair). */
export function normalDeviate(rng: Rng): number {
  const u = 1 - rng.next(); // (0, 1]: the logarithm stays finite
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.next());
}

/**
 * A gamma deviate with the given shape and scale 1 (Marsaglia and Tsang 2000; for shape < 1
 * the shape + 1 deviate times U^(1/shape)). Its mean is `shape`, its variance `shape`.
 */
export function gammaDeviate(rng: Rng, shape: number): number {
  if (shape < 1) return gammaDeviate(rng, shape + 1) * (1 - rng.next()) ** (1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normalDeviate(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = rng.next();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/**
 * A Poisson deviate: multiplication of uniforms below a mean of 10, Hörmann's transformed
 * rejection (PTRS, 1993) above, both exact.
 */
export function poissonDeviate(rng: Rng, mean: number): number {
  if (mean < 10) {
    const limit = Math.exp(-mean);
    let k = 0;
    let p = rng.next();
    while (p > limit) {
      k++;
      p *= rng.next();
    }
    return k;
  }
  const sqrtMean = Math.sqrt(mean);
  const logMean = Math.log(mean);
  const b = 0.931 + 2.53 * sqrtMean;
  const a = -0.059 + 0.02483 * b;
  const invAlpha = 1.1239 + 1.1328 / (b - 3.4);
  const vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    const u = rng.next() - 0.5;
    const v = rng.next();
    const us = 0.5 - Math.abs(u);
    const k = Math.floor(((2 * a) / us + b) * u + mean + 0.43);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (
      Math.log(v) + Math.log(invAlpha) - Math.log(a / (us * us) + b) <=
      -mean + k * logMean - logGamma(k + 1)
    ) {
      return k;
    }
  }
}

// ---- special functions ----

/** ln Γ(x) for x > 0 (Stirling series, shifted up to x >= 7). */
export function logGamma(x: number): number {
  if (x === 1 || x === 2) return 0;
  let shift = 0;
  let y = x;
  while (y < 7) {
    shift += Math.log(y);
    y += 1;
  }
  const y2 = 1 / (y * y);
  // B(2k) / (2k (2k - 1)) for k = 1..10.
  const c = [
    1 / 12,
    -1 / 360,
    1 / 1260,
    -1 / 1680,
    1 / 1188,
    -691 / 360360,
    1 / 156,
    -3617 / 122400,
    43867 / 244188,
    -174611 / 125400,
  ];
  let series = c[9];
  for (let k = 8; k >= 0; k--) series = series * y2 + c[k];
  return series / y + 0.5 * Math.log(2 * Math.PI) + (y - 0.5) * Math.log(y) - y - shift;
}

/** Complementary error function, relative error below 1.2e-7 everywhere (Chebyshev fit). */
export function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 +
                            t *
                              (-1.13520398 +
                                t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}

/** Standard normal CDF. */
function phi(x: number): number {
  return 0.5 * erfc(-x / Math.SQRT2);
}

function poissonPmf(mean: number, k: number): number {
  return Math.exp(-mean + k * Math.log(mean) - logGamma(k + 1));
}

type Normal = Extract<LengthDistribution, { kind: 'normal' }>;
type Lognormal = Extract<LengthDistribution, { kind: 'lognormal' }>;

/** The whole numbers a normal's or a bounded log-normal's draws must land in. */
function truncationBounds(d: Normal | Lognormal, min: number): { lo: number; hi: number } {
  return {
    lo: Math.ceil(Math.max(min, d.min ?? min)),
    hi: d.max === undefined ? Number.POSITIVE_INFINITY : Math.floor(d.max),
  };
}

/** P(lo <= round(X) <= hi). */
function normalMass(d: Normal, lo: number, hi: number): number {
  if (d.sd === 0) {
    const n = Math.round(d.mean);
    return n >= lo && n <= hi ? 1 : 0;
  }
  const z = (x: number) => (x - d.mean) / d.sd;
  return phi(z(hi + 0.5)) - phi(z(lo - 0.5));
}

/** Mean of the rounded normal truncated to [lo, hi] (clamped if that range is out of reach). */
function normalMean(d: Normal, min: number): number {
  const { lo, hi } = truncationBounds(d, min);
  if (d.sd === 0) return Math.min(hi, Math.max(lo, Math.round(d.mean)));
  const from = Math.max(lo, Math.floor(d.mean - 12 * d.sd));
  const to = Math.min(hi, Math.ceil(d.mean + 12 * d.sd));
  if (from > to) return d.mean < lo ? lo : hi;
  if (to - from <= 100_000) {
    // Exact for the rounded draws: sum n P(round(X) = n) over the kept whole numbers.
    let mass = 0;
    let sum = 0;
    for (let n = from; n <= to; n++) {
      const p = phi((n + 0.5 - d.mean) / d.sd) - phi((n - 0.5 - d.mean) / d.sd);
      mass += p;
      sum += n * p;
    }
    return mass > 0 ? sum / mass : d.mean < lo ? lo : hi;
  }
  // Wide: the continuous truncated-normal mean (rounding bias is negligible at this scale).
  const a = (lo - 0.5 - d.mean) / d.sd;
  const b = (hi + 0.5 - d.mean) / d.sd;
  const density = (x: number) =>
    (Number.isFinite(x) ? Math.exp(-0.5 * x * x) : 0) / Math.sqrt(2 * Math.PI);
  return d.mean + (d.sd * (density(a) - density(b))) / (phi(b) - phi(a));
}

/**
 * P(lo <= round(X) <= hi), and the mean of the draws that land there, for a log-normal X: the
 * continuous truncated log-normal on [lo - 0.5, hi + 0.5] (E[X; a < X < b] = e^(mu + sigma^2/2)
 * (Phi(zb - sigma) - Phi(za - sigma)) with z = (ln x - mu) / sigma).
 */
function lognormalTruncated(d: Lognormal, lo: number, hi: number): { mass: number; mean: number } {
  const { mu, sigma } = lognormalParameters(d.mean, d.sd);
  if (sigma === 0) {
    const n = Math.round(d.mean);
    return { mass: n >= lo && n <= hi ? 1 : 0, mean: Math.min(hi, Math.max(lo, d.mean)) };
  }
  const z = (x: number) =>
    x <= 0
      ? Number.NEGATIVE_INFINITY
      : x === Number.POSITIVE_INFINITY
        ? x
        : (Math.log(x) - mu) / sigma;
  const a = z(lo - 0.5);
  const b = z(hi + 0.5);
  const mass = phi(b) - phi(a);
  const partial = Math.exp(mu + (sigma * sigma) / 2) * (phi(b - sigma) - phi(a - sigma));
  return { mass, mean: mass > 0 ? partial / mass : d.mean < lo ? lo : hi };
}

/** lowbias32 (Chris Wellons): a bijective 32-bit mixer. */
export function mix32(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b);
  return (h ^ (h >>> 16)) >>> 0;
}
