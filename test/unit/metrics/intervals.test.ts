import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SampleSet, sortedSamples } from '../../../src/metrics/distribution.js';
import {
  blockBootstrapRanks,
  CORRELATED_LAG1,
  lag1Autocorrelation,
  normalQuantile,
  orderStatisticInterval,
  orderStatisticRanks,
  percentileIntervals,
} from '../../../src/metrics/intervals.js';
import { createRng } from '../../../src/rng.js';

/**
 * Lognormal samples whose log is a Gaussian AR(1) with lag-1 correlation `phi` and unit
 * marginal variance: the true q-quantile is exp(z_q) whatever `phi` is.
 */
function lognormalSeries(rng: ReturnType<typeof createRng>, n: number, phi: number): Float64Array {
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
  const x = new Float64Array(n);
  let z = gauss();
  const innovation = Math.sqrt(1 - phi * phi);
  for (let i = 0; i < n; i++) {
    z = phi * z + innovation * gauss();
    x[i] = Math.exp(z);
  }
  return x;
}

const PS = [50, 90, 95] as const;
const NAMES = { 50: 'p50', 90: 'p90', 95: 'p95' } as const;

/** Share of seeded repetitions whose 95 % interval covers the true percentile, per percentile. */
function coverage(phi: number, repetitions: number, n: number) {
  const rng = createRng(20261206);
  const hits = { 50: 0, 90: 0, 95: 0 };
  const methods = new Set<string>();
  for (let r = 0; r < repetitions; r++) {
    const inOrder = lognormalSeries(rng, n, phi);
    const sorted = Float64Array.from(inOrder).sort();
    const intervals = percentileIntervals(
      { ranked: sortedSamples(sorted), series: { inOrder, sorted } },
      { names: ['p50', 'p90', 'p95'] },
    );
    for (const p of PS) {
      const interval = intervals[NAMES[p]];
      assert.ok(interval);
      methods.add(interval.method);
      const truth = Math.exp(normalQuantile(p / 100));
      const { low, high } = interval;
      if ((low === null || low <= truth) && (high === null || truth <= high)) hits[p]++;
    }
  }
  return { rates: PS.map((p) => hits[p] / repetitions), methods: [...methods] };
}

describe('percentile intervals: coverage by simulation', () => {
  test('independent samples: order statistics cover the true percentile 93-97 % of the time', () => {
    const { rates, methods } = coverage(0, 2000, 500);
    // Independent samples rarely show lag-1 correlation past the threshold at n = 500.
    assert.ok(methods.includes('order-statistics'));
    for (const rate of rates) assert.ok(rate >= 0.93 && rate <= 0.97, `coverage ${rates}`);
  });

  test('samples correlated in time: the block bootstrap covers 93-97 %, order statistics would not', () => {
    const { rates, methods } = coverage(0.5, 2000, 500);
    assert.deepEqual(methods, ['block-bootstrap']);
    for (const rate of rates) assert.ok(rate >= 0.93 && rate <= 0.97, `coverage ${rates}`);
    // The same series taken as independent: intervals too narrow by the correlation.
    const rng = createRng(7);
    let hits = 0;
    for (let r = 0; r < 1000; r++) {
      const sorted = lognormalSeries(rng, 500, 0.5).sort();
      const { low, high } = orderStatisticInterval(sortedSamples(sorted), 50);
      if (low !== null && high !== null && low <= 1 && 1 <= high) hits++;
    }
    assert.ok(hits / 1000 < 0.88, `order statistics on correlated samples cover ${hits / 1000}`);
  });
});

describe('percentile intervals: ranks and open sides', () => {
  test('exact binomial ranks match the textbook median interval (n = 20: 6th to 15th)', () => {
    // Conover 1999, table A3: P(6 <= B < 15) = 0.9586 for B ~ Binomial(20, 0.5).
    assert.deepEqual(orderStatisticRanks(20, 0.5, 0.95), { low: 5, high: 14 });
  });

  test('the normal approximation continues the exact ranks', () => {
    const exact = orderStatisticRanks(20_000, 0.99, 0.95);
    const normal = orderStatisticRanks(20_001, 0.99, 0.95);
    assert.ok(
      exact.low !== null && normal.low !== null && exact.high !== null && normal.high !== null,
    );
    assert.ok(Math.abs(exact.low - normal.low) <= 2 && Math.abs(exact.high - normal.high) <= 2);
  });

  test('a side the samples cannot resolve is open (null), not clipped to the extreme', () => {
    const sorted = Float64Array.from({ length: 50 }, (_, i) => i + 1);
    const p99 = orderStatisticInterval(sortedSamples(sorted), 99);
    assert.equal(p99.high, null);
    assert.ok(p99.low !== null && p99.low < 50);
    const p50 = orderStatisticInterval(sortedSamples(sorted), 50);
    assert.ok(p50.low !== null && p50.high !== null && p50.low < 25.5 && p50.high > 25.5);
    // p99.9 is not given below 1,000 samples.
    const all = percentileIntervals({ ranked: sortedSamples(sorted) });
    assert.deepEqual(Object.keys(all), ['p50', 'p90', 'p95', 'p99']);
  });

  test('the bootstrap widens the interval by the correlation, never below the independent one', () => {
    const rng = createRng(3);
    const correlated = lognormalSeries(rng, 5000, 0.8);
    const sorted = Float64Array.from(correlated).sort();
    const estimate = sorted[2500];
    const wide = blockBootstrapRanks(correlated, estimate, 0.5);
    // AR(1) at 0.8 on the log scale: the median indicator's long-run variance is several times
    // the binomial one.
    assert.ok(wide.inflation > 2, `inflation ${wide.inflation}`);
    const independent = orderStatisticRanks(5000, 0.5, 0.95);
    assert.ok(wide.low !== null && wide.high !== null);
    assert.ok(independent.low !== null && independent.high !== null);
    assert.ok(wide.high - wide.low > 1.4 * (independent.high - independent.low));
    const shuffled = lognormalSeries(rng, 5000, 0);
    const narrow = blockBootstrapRanks(shuffled, Float64Array.from(shuffled).sort()[2500], 0.5);
    assert.ok(narrow.inflation >= 1 && narrow.inflation < 1.3, `inflation ${narrow.inflation}`);
  });

  test('the choice rule: lag-1 autocorrelation past the threshold picks the bootstrap', () => {
    const rng = createRng(11);
    const trend = lognormalSeries(rng, 2000, 0.3);
    assert.ok(lag1Autocorrelation(trend) > CORRELATED_LAG1);
    const independent = lognormalSeries(rng, 2000, 0);
    assert.ok(Math.abs(lag1Autocorrelation(independent)) < CORRELATED_LAG1);
    const method = (x: Float64Array) => {
      const sorted = Float64Array.from(x).sort();
      return percentileIntervals({ ranked: sortedSamples(sorted), series: { inOrder: x, sorted } })
        .p50?.method;
    };
    assert.equal(method(trend), 'block-bootstrap');
    assert.equal(method(independent), 'order-statistics');
  });
});

describe('percentile intervals: from a SampleSet', () => {
  test('exact samples carry their order; the HDR form gives order statistics, approximate', () => {
    const rng = createRng(5);
    const exact = new SampleSet();
    const hdr = new SampleSet(100);
    for (const x of lognormalSeries(rng, 2000, 0)) {
      exact.add(x * 100);
      hdr.add(x * 100);
    }
    const a = percentileIntervals(exact.intervalInput() ?? assert.fail('no input'));
    const b = percentileIntervals(hdr.intervalInput() ?? assert.fail('no input'));
    assert.equal(a.p50?.approximate, undefined);
    assert.equal(b.p50?.approximate, 'hdr3');
    assert.equal(b.p50?.method, 'order-statistics');
    // HDR keeps 3 significant digits: the two agree to about 0.1 %, and open where the other is.
    const close = (x: number | null | undefined, y: number | null | undefined) =>
      x === null
        ? y === null
        : x !== undefined && y != null && Math.abs(x - y) <= 0.002 * Math.abs(x);
    for (const name of ['p50', 'p90', 'p99', 'p99_9'] as const) {
      assert.ok(close(a[name]?.low, b[name]?.low), `${name} low ${a[name]?.low} ${b[name]?.low}`);
      assert.ok(close(a[name]?.high, b[name]?.high), `${name} high`);
    }
    const describe = exact.describe();
    const p = a.p90;
    assert.ok(p && p.low !== null && p.high !== null);
    assert.ok(p.low <= describe.p90 && describe.p90 <= p.high);
    assert.equal(new SampleSet().intervalInput(), undefined);
  });
});

test("workers' sets merged give the series one set gives: samples ordered by their keys", () => {
  const rng = createRng(9);
  const values = lognormalSeries(rng, 400, 0.6);
  const one = new SampleSet();
  const a = new SampleSet();
  const b = new SampleSet();
  // One set gets records as they finish (out of id order); the workers each get every other.
  const finishing = Array.from({ length: 400 }, (_, i) => i).sort(
    (x, y) => ((x * 7919) % 400) - ((y * 7919) % 400),
  );
  for (const id of finishing) {
    for (const set of [one, id % 2 === 0 ? a : b]) {
      set.orderKey = id;
      set.add(values[id]);
    }
  }
  a.merge(structuredClone(b.state()));
  const series = (set: SampleSet) => set.intervalInput()?.series?.inOrder;
  assert.deepEqual(series(a), values);
  assert.deepEqual(series(one), values);
  assert.deepEqual(
    percentileIntervals(a.intervalInput() ?? assert.fail()),
    percentileIntervals(one.intervalInput() ?? assert.fail()),
  );
});
