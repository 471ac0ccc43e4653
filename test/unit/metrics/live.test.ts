import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  EXPORT_BOUNDS,
  LIVE_WINDOW_S,
  LiveHistogram,
  LiveRecorder,
  LiveView,
} from '../../../src/metrics/live.js';
import type { RequestRecord } from '../../../src/record.js';
import { createRng } from '../../../src/rng.js';
import { phasedRecords } from '../../helpers/phasedRecords.js';

describe('LiveHistogram', () => {
  test('percentiles within 0.6 % of the exact nearest rank; export buckets count exactly', () => {
    const rng = createRng(7);
    const values = Array.from({ length: 5000 }, () => 0.5 + 2000 * rng.next() ** 3);
    const h = new LiveHistogram(EXPORT_BOUNDS.ttftMs);
    for (const v of values) h.add(v, 1, 1e-3);
    const sorted = [...values].sort((a, b) => a - b);
    const stats = h.stats();
    assert.ok(stats);
    for (const [q, got] of [
      [50, stats.p50],
      [90, stats.p90],
      [99, stats.p99],
    ] as const) {
      const exact = sorted[Math.ceil((q / 100) * sorted.length) - 1];
      assert.ok(Math.abs(got / exact - 1) < 0.006, `p${q}: ${got} against ${exact}`);
    }
    assert.equal(stats.max, sorted.at(-1));
    const state = h.state();
    const bounds = EXPORT_BOUNDS.ttftMs;
    bounds.forEach((bound, b) => {
      const low = b === 0 ? -1 : bounds[b - 1];
      const n = values.filter((v) => v / 1000 > low && v / 1000 <= bound).length;
      assert.equal(state.buckets[b], n, `bucket le ${bound}`);
    });
    assert.equal(
      state.buckets.at(-1),
      values.filter((v) => v / 1000 > bounds[bounds.length - 1]).length,
    );
  });

  test('an empty histogram has no stats; negative and NaN values are not counted', () => {
    const h = new LiveHistogram([1]);
    h.add(Number.NaN);
    h.add(-1);
    assert.equal(h.stats(), undefined);
    assert.equal(h.state().count, 0);
  });
});

function failed(id: number, kind: 'timeout' | 'http_5xx'): RequestRecord {
  const [r] = phasedRecords(id, { requests: 1 });
  return { ...r, id, error: { kind, message: 'x' } };
}

describe('LiveRecorder and LiveView', () => {
  test('records split across threads merge to exactly what one thread counts', () => {
    const records = [...phasedRecords(3, { requests: 300 }), failed(900, 'timeout')];
    records[0] = { ...records[0], phase: 'warmup' };
    const one = new LiveRecorder();
    for (const r of records) one.add(r);
    const whole = new LiveView();
    whole.add(one.take(), 0.5);
    const split = new LiveView();
    const threads = [new LiveRecorder(), new LiveRecorder(), new LiveRecorder()];
    records.forEach((r, i) => {
      threads[i % 3].add(r);
      // Taken at different moments, as each worker sends every second.
      if (i % 50 === 0) split.add(threads[i % 3].take(), 0.5);
    });
    for (const t of threads) split.add(t.take(), 0.5);
    const counts = { sent: 301, inFlight: 0 };
    const a = whole.snapshot(1, counts);
    const b = split.snapshot(1, counts);
    assert.deepEqual(b.totals, a.totals);
    assert.deepEqual(b.cumulative, a.cumulative);
    assert.equal(a.totals.completed, 299);
    assert.equal(a.totals.failed, 1);
    assert.deepEqual(a.totals.failedByKind, { timeout: 1 });
    // phasedRecords: TTFT 50 ms, 7 gaps of 10 ms (ITL), TPOT 10 ms, E2E 120 ms.
    assert.ok(Math.abs((a.cumulative.ttftMs?.p50 ?? 0) - 50) < 0.3);
    assert.equal(a.cumulative.itlMs?.count, 299 * 7);
    assert.ok(Math.abs((a.cumulative.tpotMs?.p99 ?? 0) - 10) < 0.06);
    assert.ok(Math.abs((a.cumulative.e2eMs?.mean ?? 0) - 120) < 0.01);
  });

  test('the window holds the last seconds only; rates and the ETA follow it', () => {
    const view = new LiveView({ totalRequests: 100 });
    const records = phasedRecords(5, { requests: 40 });
    // Two requests a second for 20 seconds, arriving each second.
    for (let s = 0; s < 20; s++) {
      const rec = new LiveRecorder();
      rec.add(records[2 * s]);
      rec.add(records[2 * s + 1]);
      view.add(rec.take(), s + 0.5);
    }
    const snap = view.snapshot(20, { sent: 44, inFlight: 4 });
    assert.equal(snap.cumulative.completed, 40);
    assert.equal(snap.window.seconds, LIVE_WINDOW_S);
    assert.equal(snap.window.completed, 2 * LIVE_WINDOW_S);
    assert.equal(snap.window.requestsPerS, 2);
    assert.equal(snap.cumulative.requestsPerS, 2);
    // 60 left at the window's rate.
    assert.ok(snap.etaS !== undefined && Math.abs(snap.etaS - 30) < 1e-9);
    assert.equal(snap.window.concurrency, 4);
    assert.equal(new LiveView({ durationS: 30 }).snapshot(12, snap).etaS, 18);
  });
});
