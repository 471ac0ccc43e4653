import { Hdr3Histogram, type Hdr3State } from './hdr3.js';

/**
 * Statistics of one metric over a run (docs/metrics.md, "Statistics"). Percentiles are exact with linear
 * interpolation between closest ranks (numpy's default), unless `approximate` says otherwise.
 */
export interface Distribution {
  count: number;
  mean: number;
  /** Population standard deviation. */
  stddev: number;
  min: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  p99_9: number;
  max: number;
  /** Percentiles that the sample count cannot resolve (p99 needs 100 samples, p99.9 needs 1,000). */
  lowConfidence?: PercentileName[];
  /** Set when the percentiles come from an HDR histogram (3 significant digits), not raw samples. */
  approximate?: 'hdr3';
  /**
   * Confidence intervals of the headline percentiles (src/metrics/intervals.ts); absent in
   * older summaries and for metrics that have none.
   */
  intervals?: Partial<Record<PercentileName, PercentileInterval>>;
  /**
   * A calibrated simulated run's prediction interval (src/metrics/runPrediction.ts; docs/metrics.md,
   * "Prediction intervals"): the median's at the top, the other headline statistics' under
   * `statistics`. Not the run's own sampling error, which is `intervals`.
   */
  prediction?: FigurePrediction;
}

/** Where a predicted figure lies, at its prediction's level. */
export interface PredictionRange {
  low: number;
  high: number;
}

/** A figure's prediction interval: the median's, and the other statistics' at the same level. */
export interface FigurePrediction extends PredictionRange {
  level: number;
  statistics: Partial<Record<'mean' | 'p90' | 'p95' | 'p99', PredictionRange>>;
}

/**
 * Which estimate of the sampling error an interval comes from: the samples taken as independent
 * (order statistics), or as correlated in time (a circular block bootstrap).
 */
export type IntervalMethod = 'order-statistics' | 'block-bootstrap';

/**
 * A two-sided interval for one percentile. A side is null where the samples cannot resolve it
 * at this level: too few samples lie beyond the percentile on that side (p99 of 50 samples has
 * no upper bound), so the interval is open there rather than clipped to the sample's extreme.
 */
export interface PercentileInterval {
  low: number | null;
  high: number | null;
  level: number;
  method: IntervalMethod;
  /** The ranks were read from the HDR histogram (3 significant digits), not raw samples. */
  approximate?: 'hdr3';
}

/** The samples of one metric an interval is computed from. */
export interface IntervalInput {
  /** Ascending: exact samples, or an HDR histogram read by rank (then `approximate`). */
  ranked: RankedSamples;
  /**
   * Exact samples: in the order the client recorded them, and ascending (`ranked`'s own).
   * Absent once the samples are in an HDR histogram, which keeps no order.
   */
  series?: { inOrder: Float64Array; sorted: Float64Array };
  approximate?: 'hdr3';
}

export const PERCENTILES = { p50: 50, p90: 90, p95: 95, p99: 99, p99_9: 99.9 } as const;
export type PercentileName = keyof typeof PERCENTILES;

/** How users write each percentile (`--threshold`, `--until`, SLOs), lower case. */
export const PERCENTILE_SPELLINGS: Readonly<Record<string, PercentileName>> = {
  p50: 'p50',
  median: 'p50',
  p90: 'p90',
  p95: 'p95',
  p99: 'p99',
  'p99.9': 'p99_9',
  p99_9: 'p99_9',
  p999: 'p99_9',
};

/** Percentile `q` (0-100) of ascending `sorted`, linear interpolation as `numpy.percentile`. */
export function percentileOfSorted(sorted: ArrayLike<number>, q: number): number {
  return percentileOf(sortedSamples(sorted), q);
}

/**
 * Ascending samples read by rank, `at(i)` for 0 <= i < count: a plain sorted array, or weighted
 * samples whose count is the sum of the weights (so work follows the stored values, not the count).
 */
export interface RankedSamples {
  count: number;
  at(rank: number): number;
}

/** An ascending array as ranked samples. */
export function sortedSamples(sorted: ArrayLike<number>): RankedSamples {
  return { count: sorted.length, at: (i) => sorted[i] };
}

/** Percentile `q` of ranked samples, linear interpolation as `numpy.percentile`. */
export function percentileOf(samples: RankedSamples, q: number): number {
  const n = samples.count;
  if (n === 0) return Number.NaN;
  const rank = (q / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, n - 1);
  const frac = rank - lo;
  const low = samples.at(lo);
  return frac === 0 ? low : low + (samples.at(hi) - low) * frac;
}

/**
 * Samples given as (value, weight): `weights[i]` copies of `values[i]`, as per-token ITL is `k`
 * samples of `g / k` per event (docs/metrics.md). Ranks answer exactly as the expanded samples
 * would, in memory and time that follow the number of pairs, never the weights (a server can
 * claim 1e17 tokens in one event).
 */
export function weightedSamples(
  values: ArrayLike<number>,
  weights: ArrayLike<number>,
): RankedSamples {
  const order = Array.from({ length: values.length }, (_, i) => i).sort(
    (a, b) => values[a] - values[b],
  );
  const sortedValues = Float64Array.from(order, (i) => values[i]);
  // cumulative[i]: how many expanded samples lie at or below pair i.
  const cumulative = new Float64Array(order.length);
  let total = 0;
  order.forEach((i, j) => {
    total += weights[i];
    cumulative[j] = total;
  });
  return {
    count: total,
    at(rank: number): number {
      let lo = 0;
      let hi = cumulative.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (cumulative[mid] > rank) hi = mid;
        else lo = mid + 1;
      }
      return sortedValues[lo];
    },
  };
}

/**
 * Percentile `q` of `sorted` extended by `infinities` values of +Infinity (failed requests in the
 * adjusted view, docs/metrics.md, "Statistics"). Returns null where the result is infinite.
 */
export function percentileWithFailures(
  sorted: ArrayLike<number>,
  infinities: number,
  q: number,
): number | null {
  const n = sorted.length + infinities;
  if (n === 0) return null;
  const rank = (q / 100) * (n - 1);
  const lo = Math.floor(rank);
  const frac = rank - lo;
  const at = (i: number) => (i < sorted.length ? sorted[i] : Number.POSITIVE_INFINITY);
  const hi = Math.min(lo + 1, n - 1);
  const value = frac === 0 ? at(lo) : at(lo) + (at(hi) - at(lo)) * frac;
  return Number.isFinite(value) ? value : null;
}

/** Minimum sample counts for a percentile to be resolvable at all. */
const MIN_SAMPLES: Record<PercentileName, number> = {
  p50: 2,
  p90: 10,
  p95: 20,
  p99: 100,
  p99_9: 1000,
};

/** Above this many samples a SampleSet moves to an HDR histogram (docs/metrics.md, "Statistics"). */
export const EXACT_SAMPLE_LIMIT = 1_000_000;

/** HDR values are recorded in thousandths of the metric's unit (ms -> us). */
const HDR_SCALE = 1000;

/** A SampleSet as plain data, to cross between threads (worker results) and merge. */
export interface SampleSetState {
  /** The exact samples, in the order added (absent once the set has moved to HDR). */
  values?: Float64Array;
  histogram?: Hdr3State;
  sum: number;
  sumSquares: number;
  min: number;
  max: number;
  total: number;
  /** The exact samples' order keys (SampleSet.orderKey) as runs, where the set keeps them. */
  keys?: KeyRuns;
}

/** Order keys as runs: the samples from `starts[i]` to the next run's start have key `keys[i]`. */
export interface KeyRuns {
  keys: number[];
  starts: number[];
}

/** Samples per chunk of ExactSamples: 512 KiB. */
const CHUNK_SAMPLES = 65_536;

/**
 * Exact samples in chunks that are never copied once full. One array grown by doubling copied
 * the whole run at each doubling, and a summary's sets of per-token samples all doubled at the
 * same sample: 8 ms on the measuring thread at 384,000 samples (bench:peer, issue 29). Now no
 * copy is ever longer than one chunk.
 */
export class ExactSamples {
  private readonly full: Float64Array[] = [];
  private current = new Float64Array(64);
  private used = 0;

  get size(): number {
    return this.full.length * CHUNK_SAMPLES + this.used;
  }

  /** Adds `value` `times` times. */
  push(value: number, times: number): void {
    for (let left = times; left > 0; ) {
      if (this.used === this.current.length) this.grow();
      const n = Math.min(left, this.current.length - this.used);
      // One sample (the common case: a token per event) without fill's builtin call.
      if (n === 1) this.current[this.used] = value;
      else this.current.fill(value, this.used, this.used + n);
      this.used += n;
      left -= n;
    }
  }

  private grow(): void {
    if (this.current.length < CHUNK_SAMPLES) {
      const grown = new Float64Array(Math.min(CHUNK_SAMPLES, this.current.length * 2));
      grown.set(this.current);
      this.current = grown;
    } else {
      this.full.push(this.current);
      this.current = new Float64Array(CHUNK_SAMPLES);
      this.used = 0;
    }
  }

  /** Every sample, in the order added, in a new array. */
  copy(): Float64Array {
    const all = new Float64Array(this.size);
    for (let i = 0; i < this.full.length; i++) all.set(this.full[i], i * CHUNK_SAMPLES);
    all.set(this.current.subarray(0, this.used), this.full.length * CHUNK_SAMPLES);
    return all;
  }
}

/**
 * Collects the samples of one metric: exact (a growable Float64Array) up to `exactLimit`, then an
 * HDR histogram with 3 significant digits. Mean, stddev, min and max stay exact in both modes.
 */
export class SampleSet {
  /**
   * The order key of the samples added next: the summary stamps its interval metrics' sets with
   * each record's id. Intervals read correlation in this order (intervalInput), so that the
   * sets of several workers, merged, give the same series as one set given every record.
   */
  orderKey: number | undefined;
  private samples = new ExactSamples();
  /**
   * The exact samples' keys, while every sample came with one; undefined otherwise. Kept as runs,
   * a record's samples being added together: one entry a record, not one a token.
   */
  private keys: KeyRuns | undefined;
  /** The key of the run the next sample joins; NaN after a merge, so that a new run starts. */
  private runKey: number | undefined;
  /** `sorted()`'s last answer, and the count it was sorted at (a later sample changes it). */
  private sortedSamples: Float64Array | undefined;
  private sortedAtCount = -1;
  private histogram: Hdr3Histogram | undefined;
  private readonly exactLimit: number;
  private sum = 0;
  private sumSquares = 0;
  private minValue = Number.POSITIVE_INFINITY;
  private maxValue = Number.NEGATIVE_INFINITY;
  private total = 0;

  constructor(exactLimit = EXACT_SAMPLE_LIMIT) {
    this.exactLimit = exactLimit;
  }

  get count(): number {
    return this.total;
  }

  /** Adds `value` `times` times (per-token ITL adds k equal samples per event). */
  add(value: number, times = 1): void {
    this.total += times;
    this.sum += value * times;
    this.sumSquares += value * value * times;
    if (value < this.minValue) this.minValue = value;
    if (value > this.maxValue) this.maxValue = value;
    if (!this.histogram && this.samples.size + times > this.exactLimit) this.moveToHistogram();
    if (this.histogram) {
      this.histogram.recordValueWithCount(Math.max(0, Math.round(value * HDR_SCALE)), times);
      return;
    }
    // One comparison a sample; a run is started once a record.
    if (this.orderKey !== this.runKey) this.startRun();
    this.samples.push(value, times);
  }

  /** Starts a run of the current order key, or drops the keys if a sample came without one. */
  private startRun(): void {
    const key = this.orderKey;
    this.runKey = key;
    if (key === undefined || (!this.keys && this.samples.size > 0)) {
      this.keys = undefined;
      return;
    }
    this.keys ??= { keys: [], starts: [] };
    this.keys.keys.push(key);
    this.keys.starts.push(this.samples.size);
  }

  state(): SampleSetState {
    const base = {
      sum: this.sum,
      sumSquares: this.sumSquares,
      min: this.minValue,
      max: this.maxValue,
      total: this.total,
    };
    return this.histogram
      ? { ...base, histogram: this.histogram.state() }
      : {
          ...base,
          values: this.samples.copy(),
          ...(this.keys
            ? { keys: { keys: [...this.keys.keys], starts: [...this.keys.starts] } }
            : {}),
        };
  }

  /**
   * Adds the samples of another set (another worker's): percentiles, count, min and max come out
   * exactly as if every sample had been added here; so does the mean while the samples are exact
   * (it is summed in sorted order), to rounding (~1e-15) once they are in the histogram.
   */
  merge(other: SampleSetState): void {
    this.total += other.total;
    this.sum += other.sum;
    this.sumSquares += other.sumSquares;
    this.minValue = Math.min(this.minValue, other.min);
    this.maxValue = Math.max(this.maxValue, other.max);
    const values = other.values;
    if (!this.histogram && (!values || this.samples.size + values.length > this.exactLimit)) {
      this.moveToHistogram();
    }
    if (this.histogram) {
      if (other.histogram) this.histogram.add(other.histogram);
      else {
        for (const value of values as Float64Array) {
          this.histogram.recordValue(Math.max(0, Math.round(value * HDR_SCALE)));
        }
      }
      return;
    }
    // Keys survive a merge only when both sides have them for every sample.
    const keys = other.keys;
    if (keys && (this.keys || this.samples.size === 0)) {
      this.keys ??= { keys: [], starts: [] };
      const offset = this.samples.size;
      for (let i = 0; i < keys.keys.length; i++) {
        this.keys.keys.push(keys.keys[i]);
        this.keys.starts.push(keys.starts[i] + offset);
      }
    } else this.keys = undefined;
    this.runKey = Number.NaN;
    for (const value of values as Float64Array) this.samples.push(value, 1);
  }

  private moveToHistogram(): void {
    const histogram = new Hdr3Histogram();
    for (const value of this.samples.copy()) {
      histogram.recordValue(Math.max(0, Math.round(value * HDR_SCALE)));
    }
    this.histogram = histogram;
    this.samples = new ExactSamples();
    this.keys = undefined;
  }

  /**
   * The exact samples in ascending order, or undefined once the set has moved to HDR. Kept while
   * no sample is added (checked by the count, so that adding stays one store less): a summary
   * reads each set's percentiles several times (the plain and the adjusted views), and sorting
   * again each time was most of its cost.
   */
  sorted(): Float64Array | undefined {
    if (this.histogram) return undefined;
    if (this.sortedAtCount !== this.total) {
      this.sortedSamples = this.samples.copy().sort();
      this.sortedAtCount = this.total;
    }
    return this.sortedSamples;
  }

  /**
   * Percentile `q` with `infinities` extra samples of +Infinity (the adjusted view, docs/metrics.md,
   * "Statistics"); null where the result is infinite.
   */
  percentileWithFailures(q: number, infinities: number): number | null {
    const sorted = this.sorted();
    if (sorted) return percentileWithFailures(sorted, infinities, q);
    // HDR mode: the rank falls among the finite samples or it does not.
    const n = this.total + infinities;
    const rank = (q / 100) * (n - 1);
    if (rank > this.total - 1) return null;
    const finiteQ = this.total > 1 ? (rank / (this.total - 1)) * 100 : 100;
    return clamp(
      (this.histogram as Hdr3Histogram).getValueAtPercentile(finiteQ) / HDR_SCALE,
      this.minValue,
      this.maxValue,
    );
  }

  /**
   * A set of the samples whose order key `keep` accepts (the records of a window), or undefined
   * where this set cannot tell them apart: in an HDR histogram, or without a key per record.
   */
  keptBy(keep: (key: number) => boolean): SampleSet | undefined {
    if (this.histogram || !this.keys) return this.total === 0 ? new SampleSet() : undefined;
    const values = this.samples.copy();
    const { keys, starts } = this.keys;
    const kept = new SampleSet();
    for (let r = 0; r < keys.length; r++) {
      if (!keep(keys[r])) continue;
      const end = r + 1 < starts.length ? starts[r + 1] : values.length;
      for (let i = starts[r]; i < end; i++) kept.add(values[i]);
    }
    return kept;
  }

  /**
   * The samples as an interval needs them (src/metrics/intervals.ts): ascending by rank, and
   * in the order added while they are exact (an HDR histogram keeps no order); undefined when
   * empty. The order is the samples' order keys' (the records' ids: the order they were sent
   * in), else the order added.
   */
  intervalInput(): IntervalInput | undefined {
    if (this.total === 0) return undefined;
    const sorted = this.sorted();
    if (sorted) {
      const values = this.samples.copy();
      const inOrder = this.keys ? byKey(values, this.keys) : values;
      return {
        ranked: { count: sorted.length, at: (i) => sorted[i] },
        series: { inOrder, sorted },
      };
    }
    const histogram = this.histogram as Hdr3Histogram;
    const n = this.total;
    const at = (rank: number) =>
      clamp(
        histogram.getValueAtPercentile(((rank + 1) / n) * 100) / HDR_SCALE,
        this.minValue,
        this.maxValue,
      );
    return { ranked: { count: n, at }, approximate: 'hdr3' };
  }

  describe(): Distribution {
    const n = this.total;
    if (n === 0) return emptyDistribution();
    const sorted = this.sorted();
    // Summed in sorted order, the mean does not depend on the order samples arrived in.
    let mean = this.sum / n;
    if (sorted) {
      let sum = 0;
      for (let i = 0; i < sorted.length; i++) sum += sorted[i];
      mean = sum / n;
    }
    const variance = Math.max(0, this.sumSquares / n - mean * mean);
    const result: Distribution = {
      count: n,
      mean,
      stddev: Math.sqrt(variance),
      min: this.minValue,
      p50: 0,
      p90: 0,
      p95: 0,
      p99: 0,
      p99_9: 0,
      max: this.maxValue,
    };
    for (const [name, q] of Object.entries(PERCENTILES) as [PercentileName, number][]) {
      result[name] = sorted
        ? percentileOfSorted(sorted, q)
        : clamp(
            (this.histogram as Hdr3Histogram).getValueAtPercentile(q) / HDR_SCALE,
            this.minValue,
            this.maxValue,
          );
    }
    if (sorted) {
      // Recompute stddev in two passes: the one-pass formula loses digits on large, tight sets.
      let squares = 0;
      for (let i = 0; i < sorted.length; i++) squares += (sorted[i] - mean) ** 2;
      result.stddev = Math.sqrt(squares / n);
    } else {
      result.approximate = 'hdr3';
    }
    const low = (Object.keys(MIN_SAMPLES) as PercentileName[]).filter((p) => n < MIN_SAMPLES[p]);
    if (low.length > 0) result.lowConfidence = low;
    return result;
  }
}

/**
 * `values` in ascending order of their keys' runs, stable (a record's samples keep their order).
 * Keys are record ids: runs ordered by a counting sort where the ids' range is within a few
 * times the runs' count, else by a sort of the run indices.
 */
function byKey(values: Float64Array, runs: KeyRuns): Float64Array {
  const { keys, starts } = runs;
  const r = keys.length;
  const n = values.length;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  let ascending = true;
  for (let i = 0; i < r; i++) {
    const k = keys[i];
    if (k < min) min = k;
    if (k > max) max = k;
    if (i > 0 && k < keys[i - 1]) ascending = false;
  }
  if (ascending) return values;
  let order: ArrayLike<number>;
  const range = max - min + 1;
  if (Number.isInteger(min) && Number.isInteger(max) && range <= 4 * r + 1024) {
    const at = new Float64Array(range + 1);
    for (let i = 0; i < r; i++) at[keys[i] - min + 1]++;
    for (let k = 1; k <= range; k++) at[k] += at[k - 1];
    const sorted = new Float64Array(r);
    for (let i = 0; i < r; i++) sorted[at[keys[i] - min]++] = i;
    order = sorted;
  } else {
    order = Array.from({ length: r }, (_, i) => i).sort((a, b) => keys[a] - keys[b] || a - b);
  }
  const out = new Float64Array(n);
  let filled = 0;
  for (let j = 0; j < r; j++) {
    const i = order[j];
    const end = i + 1 < r ? starts[i + 1] : n;
    out.set(values.subarray(starts[i], end), filled);
    filled += end - starts[i];
  }
  return out;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

export function emptyDistribution(): Distribution {
  return {
    count: 0,
    mean: Number.NaN,
    stddev: Number.NaN,
    min: Number.NaN,
    p50: Number.NaN,
    p90: Number.NaN,
    p95: Number.NaN,
    p99: Number.NaN,
    p99_9: Number.NaN,
    max: Number.NaN,
  };
}
