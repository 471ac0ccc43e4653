import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { requestMetrics } from '../../src/metrics/requestMetrics.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { createArrivalSchedule } from '../../src/workload/arrivals.js';
import { runAlone } from '../helpers/alone.js';
import { runAgainst } from '../helpers/run.js';
import { startSim } from '../helpers/sim.js';

// Sends and the client's health are judged to the millisecond: npm test runs this file alone, after the others.
await runAlone(import.meta.url);

describe('arrival schedules', () => {
  test('seeded Poisson: same seed, same arrivals; mean gap 1/rate', () => {
    const take = (seed: number, n: number) => {
      const next = createArrivalSchedule(10, 'poisson', seed);
      return Array.from({ length: n }, next);
    };
    assert.deepEqual(take(1, 50), take(1, 50));
    assert.notDeepEqual(take(1, 50), take(2, 50));
    const times = take(3, 20_001);
    assert.equal(times[0], 0);
    const meanGap = times[20_000] / 20_000;
    assert.ok(Math.abs(meanGap - 100) < 3, `mean gap ${meanGap} ms`);
    // Exponential gaps: the coefficient of variation is 1.
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    const sd = Math.sqrt(gaps.reduce((a, g) => a + (g - meanGap) ** 2, 0) / gaps.length);
    assert.ok(Math.abs(sd / meanGap - 1) < 0.05);
  });

  test('constant rate: exact gaps', () => {
    const next = createArrivalSchedule(4, 'constant', 9);
    assert.deepEqual([next(), next(), next()], [0, 250, 500]);
  });
});

describe('open loop against the simulator', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ engine: 'scripted', 'itl-ms': 5, 'max-concurrency': 256 });
  });
  after(() => sim.stop());

  test('requests go out on schedule, whatever is in flight', async () => {
    const { records, summary } = await runAgainst(sim.url, {
      load: { mode: 'open', rate: 40, arrival: 'poisson' },
      requests: 80,
      outputTokens: 20,
    });
    const expected = createArrivalSchedule(40, 'poisson', 7);
    const offsets = records.map((r) => r.scheduledAt - records[0].scheduledAt);
    for (const offset of offsets)
      assert.ok(Math.abs(offset - expected()) < 0.002, 'scheduledAt is the plan');
    assert.equal(summary.requests.completed, 80);
    assert.ok(
      summary.latency.queueDelayMs.p50 < 5,
      `queue delay p50 ${summary.latency.queueDelayMs.p50}`,
    );
    const health = summary.clientHealth;
    assert.ok(health?.sendSlipMs && health.sendSlipMs.count === 80);
    assert.ok(health.intendedRatePerS !== undefined && health.achievedRatePerS !== undefined);
    assert.ok(Math.abs(health.achievedRatePerS / health.intendedRatePerS - 1) < 0.1);
  });

  test('send slip is judged over the measured arrivals, the warm-up aside', async () => {
    const { records, summary } = await runAgainst(sim.url, {
      load: { mode: 'open', rate: 200, arrival: 'constant' },
      warmupRequests: 10,
      requests: 20,
      outputTokens: 4,
    });
    assert.equal(records.length, 30);
    assert.equal(summary.clientHealth?.sendSlipMs?.count, 20);
  });

  test('over a concurrency cap, arrivals wait in the client: queueDelay and userTtft show it', async () => {
    const { records, summary } = await runAgainst(sim.url, {
      load: { mode: 'open', rate: 50, arrival: 'constant', maxConcurrency: 1 },
      requests: 8,
      outputTokens: 10,
    });
    // Each request takes ~70 ms, arrivals come every 20 ms: the queue grows by ~50 ms each time.
    for (const r of records) {
      const m = requestMetrics(r);
      assert.ok(
        Math.abs((m.userTtftMs as number) - ((m.ttftMs as number) + m.queueDelayMs)) < 1e-6,
      );
    }
    const last = requestMetrics(records[7]);
    assert.ok(last.queueDelayMs > 200, `last queue delay ${last.queueDelayMs} ms`);
    assert.ok(summary.latency.userTtftMs.max > summary.latency.ttftMs.max + 200);
    assert.ok(
      !summary.clientHealth?.clientLimited,
      'a cap holding sends back is not the client failing',
    );
  });

  test('--duration closes the window: nothing is scheduled after it', async () => {
    const { records } = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 4 },
      durationS: 0.5,
      outputTokens: 10,
    });
    const start = records[0].scheduledAt;
    assert.ok(records.length >= 8);
    for (const r of records) assert.ok(r.scheduledAt - start < 500);
  });
});
