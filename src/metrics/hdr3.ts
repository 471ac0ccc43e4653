/**
 * An HDR histogram of non-negative integers with 3 significant digits, laid out exactly as
 * HdrHistogram's (2,048 sub-buckets, unit magnitude 0) and answering percentiles with the same
 * rule, so results equal hdr-histogram-js's. It exists because recording is on the hot path of
 * long runs (one ITL sample per token): an index here costs a few integer operations, about
 * 10x less than the library's generic path.
 */
const SUB_BITS = 10; // sub-bucket half count 1024; sub-bucket count 2048 -> 3 significant digits
const HALF = 1 << SUB_BITS;

function floorLog2(v: number): number {
  if (v < 2 ** 31) return 31 - Math.clz32(v);
  let e = Math.floor(Math.log2(v));
  if (2 ** e > v) e--;
  else if (2 ** (e + 1) <= v) e++;
  return e;
}

function indexOf(v: number): number {
  if (v < 2 * HALF) return v;
  const bucket = floorLog2(v) - SUB_BITS;
  const sub = v < 2 ** 31 ? v >>> bucket : Math.floor(v / 2 ** bucket);
  return ((bucket + 1) << SUB_BITS) + sub - HALF;
}

/** Lowest value counted at `index`, and the size of the range of values it stands for. */
function rangeAt(index: number): { low: number; size: number } {
  let bucket = (index >> SUB_BITS) - 1;
  let sub = (index & (HALF - 1)) + HALF;
  if (bucket < 0) {
    sub -= HALF;
    bucket = 0;
  }
  const size = 2 ** bucket;
  return { low: sub * size, size };
}

/** Unit in the last place of a positive double. */
function ulp(x: number): number {
  return x === 0 ? Number.MIN_VALUE : 2 ** (Math.floor(Math.log2(x)) - 52);
}

/** A histogram's counts as plain data, to cross between threads. */
export interface Hdr3State {
  counts: Float64Array;
  maxIndex: number;
  totalCount: number;
}

export class Hdr3Histogram {
  private counts = new Float64Array(4 * HALF);
  private maxIndex = -1;
  totalCount = 0;

  static fromState(state: Hdr3State): Hdr3Histogram {
    const histogram = new Hdr3Histogram();
    histogram.add(state);
    return histogram;
  }

  state(): Hdr3State {
    return {
      counts: this.counts.slice(0, this.maxIndex + 1),
      maxIndex: this.maxIndex,
      totalCount: this.totalCount,
    };
  }

  /** Adds another histogram's counts: the result is the histogram of both value sets. */
  add(other: Hdr3State): void {
    if (other.maxIndex < 0) return;
    this.grow(other.maxIndex);
    for (let i = 0; i <= other.maxIndex; i++) this.counts[i] += other.counts[i];
    this.maxIndex = Math.max(this.maxIndex, other.maxIndex);
    this.totalCount += other.totalCount;
  }

  private grow(index: number): void {
    if (index < this.counts.length) return;
    let length = this.counts.length * 2;
    while (length <= index) length *= 2;
    const grown = new Float64Array(length);
    grown.set(this.counts);
    this.counts = grown;
  }

  recordValue(value: number): void {
    this.recordValueWithCount(value, 1);
  }

  /** Records a non-negative integer `count` times. */
  recordValueWithCount(value: number, count: number): void {
    const i = indexOf(value);
    this.grow(i);
    this.counts[i] += count;
    if (i > this.maxIndex) this.maxIndex = i;
    this.totalCount += count;
  }

  /**
   * HdrHistogram's rule: the highest value equivalent to the first index whose cumulative
   * count reaches ceil(q% of the total) (the lowest equivalent one for q = 0).
   */
  getValueAtPercentile(percentile: number): number {
    const q = Math.min(percentile, 100);
    const fpCount = (q / 100) * this.totalCount;
    const wanted = Math.max(Math.ceil(fpCount - ulp(fpCount)), 1);
    let cumulative = 0;
    for (let i = 0; i <= this.maxIndex; i++) {
      cumulative += this.counts[i];
      if (cumulative >= wanted) {
        const { low, size } = rangeAt(i);
        return percentile === 0 ? low : low + size - 1;
      }
    }
    return 0;
  }
}
