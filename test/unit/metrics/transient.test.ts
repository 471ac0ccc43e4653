/**
 * The warm-up transient: MSER-5 on seeded synthetic series with a known change point, a
 * stationary series and a trend that never settles; then the summary's steady-window headline,
 * shift and warnings from records built to have a transient, merged across builders exactly.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LoadSpec } from '../../../src/load.js';
import { MSER_MIN_BATCHES, mser5 } from '../../../src/metrics/mser.js';
import { SummaryBuilder, summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { describeWarmupTransient } from '../../../src/report/terminal.js';
import { createRng } from '../../../src/rng.js';

/** Lognormal noise around 1 (sigma 0.3): latency-like, skewed. */
function noise(seed: number): () => number {
  const rng = createRng(seed);
  return () => {
    const normal = Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
    return Math.exp(0.3 * normal);
  };
}

describe('MSER-5', () => {
  test('a stationary series is cut near its start and reaches a steady state', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const e = noise(seed);
      const r = mser5(Array.from({ length: 1000 }, () => 100 * e()));
      assert.ok(r?.reached, `seed ${seed}`);
      assert.ok(r.truncated <= 100, `seed ${seed}: cut ${r.truncated}`);
    }
  });

  test('a level that drops at a known point is cut there', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const e = noise(seed);
      const r = mser5(Array.from({ length: 1000 }, (_, i) => (i < 200 ? 250 : 100) * e()));
      assert.ok(r?.reached, `seed ${seed}`);
      // Never before the change; past it by at most a tenth of the run (what MSER gives up
      // to a few high draws just after it: 200 of 200 seeded series fell in 200-295).
      assert.ok(r.truncated >= 200 && r.truncated <= 300, `seed ${seed}: cut ${r.truncated}`);
    }
  });

  test('a trend that never settles (a queue growing all run) is not a steady state', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const e = noise(seed);
      // Service time around 100 plus a wait that grows 2 a request.
      const r = mser5(Array.from({ length: 600 }, (_, i) => 100 * e() + 2 * i));
      assert.equal(r?.reached, false, `seed ${seed}: cut ${r?.truncated}`);
    }
  });

  test('short stationary runs seldom read as unsettled (the drift guard)', () => {
    let unsettled = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const e = noise(seed);
      if (!mser5(Array.from({ length: 100 }, () => 100 * e()))?.reached) unsettled++;
    }
    // About 2 % measured; White's rule alone says "not reached" for some 10 % here.
    assert.ok(unsettled <= 20, `${unsettled} of 400`);
  });

  test('under its minimum of batches it does not judge; a partial last batch is left out', () => {
    assert.equal(mser5(new Array(5 * MSER_MIN_BATCHES - 1).fill(1)), undefined);
    assert.equal(
      mser5(new Array(5 * MSER_MIN_BATCHES + 4).fill(1))?.observations,
      5 * MSER_MIN_BATCHES,
    );
    assert.deepEqual(mser5(new Array(100).fill(7)), {
      observations: 100,
      truncated: 0,
      reached: true,
    });
  });
});

/**
 * One user's requests back to back (a closed loop of 1): request i's TTFT and decode gaps are
 * `slow` times longer for the first `warm` requests, then lognormal around 40 ms and 10 ms.
 */
function records(n: number, warm: number, slow: number, seed = 3): RequestRecord[] {
  const e = noise(seed);
  const out: RequestRecord[] = [];
  let at = 0;
  for (let id = 0; id < n; id++) {
    const k = id < warm ? slow : 1;
    const ttft = 40 * k * e();
    const gaps = [ttft, 10 * k * e(), 10 * k * e(), 10 * k * e()];
    const dtUs = gaps.map((g) => Math.round(g * 1000));
    const decode = gaps.slice(1).reduce((a, b) => a + b, 0);
    const sentAt = at;
    const endAt = sentAt + ttft + decode;
    out.push({
      id,
      phase: 'measure',
      scheduledAt: sentAt,
      sentAt,
      firstTokenAt: sentAt + ttft,
      firstContentAt: sentAt + ttft,
      lastTokenAt: endAt,
      endAt,
      requestedInputTokens: 10,
      requestedOutputTokens: 4,
      outputTokens: 4,
      outputTokensSource: 'server',
      events: { dtUs, tokens: [1, 1, 1, 1], contentChars: [3, 3, 3, 3] },
    });
    at = endAt;
  }
  return out;
}

const load: LoadSpec = { mode: 'closed', concurrency: 1 };

describe('summary.warmupTransient', () => {
  test('a slow start is cut, the headline taken after it, and the shift warned', () => {
    const s = summarize(records(1000, 100, 3), { load });
    const t = s.warmupTransient;
    assert.ok(t?.steadyReached);
    assert.ok(Math.abs(t.truncatedRequests - 100) <= 10, `cut ${t.truncatedRequests}`);
    assert.ok(t.truncatedS > 0 && t.truncatedS < s.durationS / 2);
    const steady = t.steady ?? {};
    // The steady window's own figures: TTFT around 40 ms, ITL around 10 ms.
    assert.ok(Math.abs((steady.ttftP50Ms ?? 0) - 40) < 4, `${steady.ttftP50Ms}`);
    assert.ok(Math.abs((steady.itlP50Ms ?? 0) - 10) < 1, `${steady.itlP50Ms}`);
    // The whole run carries the slow start: its p99s and E2E are above, its throughput below.
    assert.ok((t.shift?.ttftP99Ms ?? 0) > 0.2, `${t.shift?.ttftP99Ms}`);
    assert.ok((t.shift?.outputTokensPerS ?? 0) < -0.1, `${t.shift?.outputTokensPerS}`);
    const w = s.warnings.find((x) => x.code === 'warmup_shift');
    assert.ok(w, JSON.stringify(s.warnings));
    assert.match(w.message, /first 10\d requests|first 9\d requests/);
  });

  test('a run without a transient is cut little and earns no warning', () => {
    const s = summarize(records(1000, 0, 1), { load });
    const t = s.warmupTransient;
    assert.ok(t?.steadyReached);
    assert.ok(t.truncatedRequests <= 100, `cut ${t.truncatedRequests}`);
    for (const by of Object.values(t.shift ?? {})) assert.ok(Math.abs(by) < 0.05, `${by}`);
    assert.ok(!s.warnings.some((w) => w.code === 'warmup_shift' || w.code === 'no_steady_state'));
  });

  test('a run slowing down all the way is not steady, and says so', () => {
    const rs = records(600, 600, 1).map((r, i) => ({ ...r, endAt: r.endAt + i * i * 0.01 }));
    const s = summarize(rs, { load });
    assert.equal(s.warmupTransient?.steadyReached, false);
    assert.equal(s.warmupTransient?.steady, undefined);
    assert.ok(s.warnings.some((w) => w.code === 'no_steady_state'));
  });

  test('a ramp or a replayed trace changes its load by design: not judged', () => {
    const ramp: LoadSpec = {
      mode: 'open',
      rate: 10,
      arrival: 'poisson',
      rampUp: { fromRate: 1, seconds: 10 },
    };
    assert.equal(summarize(records(600, 100, 3), { load: ramp }).warmupTransient, undefined);
  });

  test("the reports' line: the cut, the steady figures and the shift; or why there is none", () => {
    const cut = describeWarmupTransient(summarize(records(1000, 100, 3), { load }));
    assert.match(
      cut ?? '',
      /^\d+ of 1,000 requests \([\d.]+ s\) cut by MSER-5 on E2E; steady window( \(at .*?\))? TTFT p50 [\d.]+ ms \(whole \+[\d.]+%\)/,
    );
    // Its throughput is said with its load.
    if (/output [\d.,]+ tok\/s/.test(cut ?? ''))
      assert.match(cut ?? '', /steady window \(at .*requests/);
    const flat = summarize(records(100, 0, 1), { load });
    if (flat.warmupTransient) flat.warmupTransient.truncatedRequests = 0;
    assert.match(describeWarmupTransient(flat) ?? '', /^none: MSER-5 on E2E cut none of 100/);
    const rs = records(600, 600, 1).map((r, i) => ({ ...r, endAt: r.endAt + i * i * 0.01 }));
    assert.match(describeWarmupTransient(summarize(rs, { load })) ?? '', /^not settled: /);
  });

  test('too few requests: no judgement', () => {
    assert.equal(summarize(records(49, 0, 1), { load }).warmupTransient, undefined);
  });

  test('merged from builders that saw the records in any order, it is the same', () => {
    const rs = records(600, 60, 3);
    const single = summarize(rs, { load });
    const parts = [0, 1, 2].map(() => new SummaryBuilder({ load }));
    for (const r of [...rs].reverse()) parts[r.id % 3].add(r);
    const merged = new SummaryBuilder({ load });
    for (const p of parts) merged.merge(p.state());
    assert.deepEqual(merged.build().warmupTransient, single.warmupTransient);
  });
});
