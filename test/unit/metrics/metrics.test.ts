import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as hdr from 'hdr-histogram-js';
import { rescale } from '../../../src/backends/timeline.js';
import {
  percentileOfSorted,
  percentileWithFailures,
  SampleSet,
} from '../../../src/metrics/distribution.js';
import { Hdr3Histogram } from '../../../src/metrics/hdr3.js';
import { forEachTokenGap, requestMetrics } from '../../../src/metrics/requestMetrics.js';
import { FIRST_ERROR_CHARS, SummaryBuilder, summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';

const close = (actual: number | undefined, expected: number, tolerance = 1e-9) =>
  assert.ok(
    actual !== undefined && Math.abs(actual - expected) <= tolerance,
    `${actual} != ${expected}`,
  );

/**
 * Hand-built record: sent at 100 ms (scheduled at 90), headers at 110, a role-only event at 120,
 * then token events at 150 (1 token), 160 (2 tokens), 190 (1 token), usage at 195, end at 196.
 */
function handRecord(overrides: Partial<RequestRecord> = {}): RequestRecord {
  return {
    id: 0,
    phase: 'measure',
    scheduledAt: 90,
    sentAt: 100,
    headersAt: 110,
    firstTokenAt: 150,
    firstContentAt: 150,
    lastTokenAt: 190,
    endAt: 196,
    requestedInputTokens: 10,
    requestedOutputTokens: 4,
    inputTokens: 12,
    inputTokensSource: 'server',
    outputTokens: 4,
    outputTokensSource: 'server',
    events: {
      dtUs: [20_000, 30_000, 10_000, 30_000, 5_000],
      tokens: [0, 1, 2, 1, 0],
      contentChars: [0, 3, 6, 3, 0],
    },
    ...overrides,
  };
}

describe('percentiles', () => {
  test('match numpy.percentile (linear interpolation)', () => {
    const ten = Float64Array.from({ length: 10 }, (_, i) => i + 1);
    // np.percentile(range(1, 11), [50, 90, 95, 99, 99.9]) = [5.5, 9.1, 9.55, 9.91, 9.991]
    close(percentileOfSorted(ten, 50), 5.5);
    close(percentileOfSorted(ten, 90), 9.1);
    close(percentileOfSorted(ten, 95), 9.55);
    close(percentileOfSorted(ten, 99), 9.91);
    close(percentileOfSorted(ten, 99.9), 9.991);
    // np.percentile([15, 20, 35, 40, 50], [0, 50, 90, 100]) = [15, 35, 46, 50]
    const five = [15, 20, 35, 40, 50];
    assert.deepEqual(
      [0, 50, 90, 100].map((q) => percentileOfSorted(five, q)),
      [15, 35, 46, 50],
    );
    assert.ok(Number.isNaN(percentileOfSorted([], 50)));
  });

  test('failures count as +infinity in the adjusted view', () => {
    const sorted = [10, 20, 30];
    assert.equal(percentileWithFailures(sorted, 0, 50), 20);
    // [10, 20, 30, inf]: p50 = 25, p90 sits between 30 and inf.
    assert.equal(percentileWithFailures(sorted, 1, 50), 25);
    assert.equal(percentileWithFailures(sorted, 1, 90), null);
    assert.equal(percentileWithFailures([], 0, 50), null);
  });

  test('SampleSet: exact stats, population stddev, low-confidence marks', () => {
    const set = new SampleSet();
    for (const v of [2, 4, 4, 4, 5, 5, 7, 9]) set.add(v);
    const d = set.describe();
    assert.equal(d.count, 8);
    assert.equal(d.mean, 5);
    assert.equal(d.stddev, 2);
    assert.equal(d.min, 2);
    assert.equal(d.max, 9);
    assert.equal(d.p50, 4.5);
    assert.deepEqual(d.lowConfidence, ['p90', 'p95', 'p99', 'p99_9']);
    assert.equal(d.approximate, undefined);
    const weighted = new SampleSet();
    weighted.add(3, 4);
    assert.deepEqual([weighted.count, weighted.describe().p99], [4, 3]);
  });

  test('SampleSet keeps exact samples across its storage chunks, in the order added', () => {
    const set = new SampleSet();
    const expected: number[] = [];
    // Runs of equal samples that straddle the 65,536-sample chunks, then one by one.
    for (let i = 0; i < 3000; i++) {
      const times = 1 + (i % 97);
      set.add(i, times);
      for (let k = 0; k < times; k++) expected.push(i);
    }
    for (let i = 1; i <= 70_000; i++) {
      set.add(-i);
      expected.push(-i);
    }
    const same = (actual: Float64Array | undefined, wanted: number[]) =>
      actual !== undefined &&
      actual.length === wanted.length &&
      wanted.every((value, i) => actual[i] === value);
    assert.equal(set.count, expected.length);
    assert.ok(same(set.state().values, expected));
    assert.ok(
      same(
        set.sorted(),
        [...expected].sort((a, b) => a - b),
      ),
    );
    const merged = new SampleSet();
    merged.merge(set.state());
    assert.deepEqual(merged.describe(), set.describe());
  });

  test('SampleSet moves to an HDR histogram past its exact limit, within 0.1%', () => {
    const exact = new SampleSet();
    const hdr = new SampleSet(1000);
    let x = 12345;
    for (let i = 0; i < 20_000; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const v = 1 + (x / 2147483648) * 99;
      exact.add(v);
      hdr.add(v);
    }
    const a = exact.describe();
    const b = hdr.describe();
    assert.equal(b.approximate, 'hdr3');
    assert.equal(b.count, a.count);
    close(b.mean, a.mean, 1e-9 * a.mean);
    close(b.min, a.min);
    close(b.max, a.max);
    for (const p of ['p50', 'p90', 'p95', 'p99', 'p99_9'] as const) {
      assert.ok(Math.abs(b[p] - a[p]) / a[p] < 1e-3, `${p}: ${b[p]} vs ${a[p]}`);
    }
  });
});

describe('per-request metrics (METRICS.md section 2)', () => {
  test('hand-computed record', () => {
    const m = requestMetrics(handRecord());
    close(m.ttftMs, 50);
    close(m.ttfcMs, 50);
    close(m.ttfbMs, 10);
    close(m.e2eMs, 96);
    close(m.tpotMs, 40 / 3);
    close(m.queueDelayMs, 10);
    close(m.userTtftMs, 60);
    close(m.userE2eMs, 106);
    close(m.maxStallMs, 30);
    close(m.outputSpeedTokS, 75);
    close(m.prefillSpeedTokS, 240);
    assert.equal(m.tokenEvents, 3);
  });

  test('ITL spreads each event over its tokens; chunk gaps stay raw; identities hold', () => {
    const r = handRecord();
    const itl: number[] = [];
    const gaps: number[] = [];
    forEachTokenGap(r, (gap, k) => {
      gaps.push(gap);
      for (let i = 0; i < k; i++) itl.push(gap / k);
    });
    assert.deepEqual(gaps, [10, 30]);
    assert.deepEqual(itl, [5, 5, 30]);
    const sum = itl.reduce((a, b) => a + b, 0);
    close(sum, (r.lastTokenAt as number) - (r.firstTokenAt as number));
    close(sum / itl.length, requestMetrics(r).tpotMs as number);
  });

  test('one output token: no TPOT, no output speed; no token: no TTFT', () => {
    const one = requestMetrics(
      handRecord({
        outputTokens: 1,
        lastTokenAt: 150,
        events: { dtUs: [50_000], tokens: [1], contentChars: [1] },
      }),
    );
    assert.equal(one.tpotMs, undefined);
    assert.equal(one.outputSpeedTokS, undefined);
    const none = requestMetrics(
      handRecord({
        outputTokens: 0,
        firstTokenAt: undefined,
        firstContentAt: undefined,
        lastTokenAt: undefined,
        events: { dtUs: [], tokens: [], contentChars: [] },
      }),
    );
    assert.equal(none.ttftMs, undefined);
    assert.equal(none.maxStallMs, undefined);
  });
});

describe('run summary (METRICS.md section 3)', () => {
  const records: RequestRecord[] = [
    handRecord(),
    // Failed: kept out of latency, counted in the window and concurrency.
    handRecord({
      id: 1,
      scheduledAt: 120,
      sentAt: 120,
      endAt: 300,
      outputTokens: 0,
      firstTokenAt: undefined,
      firstContentAt: undefined,
      lastTokenAt: undefined,
      events: { dtUs: [], tokens: [], contentChars: [] },
      error: { kind: 'timeout', message: 't' },
    }),
    // Warm-up: never counted.
    handRecord({ id: 2, phase: 'warmup', scheduledAt: 0, sentAt: 0, endAt: 1000 }),
    // Second success: ttft 100, 2 tokens, sent 200, ends 400.
    handRecord({
      id: 3,
      scheduledAt: 200,
      sentAt: 200,
      headersAt: 210,
      firstTokenAt: 300,
      firstContentAt: 300,
      lastTokenAt: 350,
      endAt: 400,
      inputTokens: 20,
      outputTokens: 2,
      requestedOutputTokens: 2,
      events: { dtUs: [100_000, 50_000], tokens: [1, 1], contentChars: [1, 1] },
    }),
  ];
  const summary = summarize(records, {
    load: { mode: 'closed', concurrency: 2 },
    slo: [{ metric: 'ttft', op: '<', value: 60 }],
  });

  test('counts, window and throughput', () => {
    assert.deepEqual(summary.requests, {
      completed: 2,
      failed: 1,
      warmup: 1,
      errorsByKind: { timeout: 1 },
      // The first failure's message of each kind, as its record has it.
      firstErrorByKind: { timeout: 't' },
    });
    close(summary.durationS, 0.3);
    close(summary.load.meanConcurrency, (96 + 180 + 200) / 300);
    assert.deepEqual(summary.tokens, {
      input: 32,
      output: 6,
      requestedInput: 20,
      requestedOutput: 6,
    });
    close(summary.throughput.requestsPerS, 2 / 0.3);
    close(summary.throughput.outputTokensPerS, 6 / 0.3);
    close(summary.throughput.inputTokensPerS, 32 / 0.3);
    close(summary.throughput.totalTokensPerS, 38 / 0.3);
    close(summary.throughput.decodeTokensPerS, 4 / 0.3);
  });

  test('latency covers successes only; the adjusted view counts the failure', () => {
    assert.equal(summary.latency.ttftMs.count, 2);
    close(summary.latency.ttftMs.mean, 75);
    assert.deepEqual(summary.latency.itlMs.count, 4);
    assert.equal(summary.latencyAdjusted.ttftMs.p50, 100);
    assert.equal(summary.latencyAdjusted.ttftMs.p99, null);
  });

  test('goodput and SLO attainment count failures as misses', () => {
    assert.deepEqual(summary.goodput, {
      slo: 'ttft<60',
      goodRequests: 1,
      requestsPerS: 1 / 0.3,
      sloAttainment: 1 / 3,
    });
  });

  test('warnings name what needs attention', () => {
    const codes = summary.warnings.map((w) => w.code);
    assert.ok(codes.includes('requests_failed'));
    assert.ok(codes.includes('low_sample'));
    assert.ok(codes.includes('input_drift'), 'server counted 32 input tokens for 20 requested');
  });
});

describe('rescaling per-event token counts to the server total', () => {
  test('proportional with largest remainders, at least one token per event', () => {
    const even = [1, 1, 1];
    rescale(even, 12);
    assert.deepEqual(even, [4, 4, 4]);
    const uneven = [0, 1, 2, 4, 0];
    rescale(uneven, 8);
    assert.deepEqual(uneven, [0, 1, 2, 5, 0]);
    const floor = [1, 10];
    rescale(floor, 2);
    assert.deepEqual(floor, [1, 1]);
    const odd = [1, 1, 1, 1];
    rescale(odd, 6);
    assert.deepEqual(odd, [2, 2, 1, 1]);
  });
});

describe('the adjusted view past the exact-sample limit', () => {
  test('HDR mode still puts failures at +infinity, not everything', () => {
    const exact = new SampleSet();
    const hdr = new SampleSet(100);
    for (let i = 1; i <= 1000; i++) {
      exact.add(i);
      hdr.add(i);
    }
    for (const q of [50, 90, 95]) {
      const a = exact.percentileWithFailures(q, 20) as number;
      const b = hdr.percentileWithFailures(q, 20) as number;
      assert.ok(Math.abs(a - b) / a < 2e-3, `p${q}: ${b} vs ${a}`);
    }
    assert.equal(hdr.percentileWithFailures(99, 20), null);
    assert.equal(exact.percentileWithFailures(99, 20), null);
  });
});

describe('the 3-digit HDR histogram', () => {
  test('gives hdr-histogram-js percentiles exactly, across magnitudes and with counts', () => {
    const ours = new Hdr3Histogram();
    const theirs = hdr.build({ bitBucketSize: 64, numberOfSignificantValueDigits: 3 });
    let seed = 12345;
    const random = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    for (let i = 0; i < 200_000; i++) {
      // Log-uniform from 1 us to ~3 hours in us, with some repeated values.
      const value = Math.floor(Math.exp(random() * Math.log(1e10)));
      const count = i % 17 === 0 ? 1 + Math.floor(random() * 5) : 1;
      ours.recordValueWithCount(value, count);
      theirs.recordValueWithCount(value, count);
    }
    for (const value of [0, 1, 2047, 2048, 2049, 4095, 4096, 2 ** 31 - 1, 2 ** 31, 2 ** 40 + 7]) {
      ours.recordValue(value);
      theirs.recordValue(value);
    }
    assert.equal(ours.totalCount, theirs.totalCount);
    for (const q of [0, 0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100]) {
      assert.equal(ours.getValueAtPercentile(q), theirs.getValueAtPercentile(q), `p${q}`);
    }
  });
});

test('output tokens land in the 100 ms bin of their own event (steady-state throughput)', () => {
  // Sent at 1,050 ms: events at +30 (2 tokens), +60 (none), +120, +170 (3), +260 and +1,000 ms.
  const record = handRecord({
    sentAt: 1050,
    endAt: 2100,
    outputTokens: 8,
    events: {
      dtUs: [30_000, 30_000, 60_000, 50_000, 90_000, 740_000],
      tokens: [2, 0, 1, 3, 1, 1],
      contentChars: [1, 0, 1, 1, 1, 1],
    },
  });
  const builder = new SummaryBuilder({ load: { mode: 'closed', concurrency: 1 } });
  builder.add(record);
  // Bins of the run's clock: 1,080 -> 10; 1,170 and 1,220 -> 11 and 12; 1,310 -> 13; 2,050 -> 20.
  assert.deepEqual(builder.state().outputTokensByBin, { 10: 2, 11: 1, 12: 3, 13: 1, 20: 1 });
  assert.deepEqual(builder.state().endsByBin, { 21: 1 });
});

test('firstErrorByKind: the earliest sent failure of each kind, whatever builder saw it, clipped', () => {
  const failure = (id: number, sentAt: number, kind: 'timeout' | 'http_5xx', message: string) =>
    handRecord({
      id,
      scheduledAt: sentAt,
      sentAt,
      endAt: sentAt + 10,
      outputTokens: 0,
      firstTokenAt: undefined,
      firstContentAt: undefined,
      lastTokenAt: undefined,
      events: { dtUs: [], tokens: [], contentChars: [] },
      error: { kind, message },
    });
  const records = [
    failure(0, 30, 'timeout', 'late timeout'),
    failure(1, 10, 'timeout', 'first timeout'),
    failure(2, 20, 'http_5xx', `HTTP 500: ${'x'.repeat(500)}`),
    failure(3, 5, 'http_5xx', 'HTTP 503: first'),
  ];
  const load = { mode: 'closed', concurrency: 2 } as const;
  const single = summarize(records, { load });
  assert.deepEqual(single.requests.firstErrorByKind, {
    timeout: 'first timeout',
    http_5xx: 'HTTP 503: first',
  });
  // Threads deliver in any order: a worker's state merged in gives the same choice.
  const a = new SummaryBuilder({ load });
  const b = new SummaryBuilder({ load });
  a.add(records[0]);
  a.add(records[2]);
  b.add(records[1]);
  b.add(records[3]);
  const merged = new SummaryBuilder({ load });
  merged.merge(a.state());
  merged.merge(b.state());
  assert.deepEqual(merged.build().requests.firstErrorByKind, single.requests.firstErrorByKind);
  assert.equal(a.build().requests.firstErrorByKind?.http_5xx?.length, FIRST_ERROR_CHARS);
});
