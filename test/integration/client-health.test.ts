/**
 * The client-health verdict against a real run: it stays quiet when the client keeps up and
 * fires when the client's event loop is held up. Its thresholds are milliseconds of event-loop
 * delay, so npm test runs this file alone (see test/helpers/alone.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assessClientHealth } from '../../src/metrics/clientHealth.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { runAlone } from '../helpers/alone.js';
import { runAgainst } from '../helpers/run.js';
import { startSim } from '../helpers/sim.js';

await runAlone(import.meta.url);

describe('client health verdict', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ engine: 'scripted', 'itl-ms': 2, 'max-concurrency': 64 });
  });
  after(() => sim.stop());

  const verdict = (result: Awaited<ReturnType<typeof runAgainst>>['result']) =>
    assessClientHealth(result.clientHealth, {});

  test('fires when the event loop is blocked, and not otherwise', async () => {
    const calm = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 4 },
      requests: 40,
      outputTokens: 20,
    });
    const calmHealth = verdict(calm.result);
    assert.equal(calmHealth.clientLimited, false, calmHealth.reasons.join('; '));
    // The test thread is the engine's thread: hog it 30 ms out of every 40.
    const hog = setInterval(() => {
      const until = performance.now() + 30;
      while (performance.now() < until) {}
    }, 10);
    let blocked: Awaited<ReturnType<typeof runAgainst>>;
    try {
      blocked = await runAgainst(sim.url, {
        load: { mode: 'closed', concurrency: 4 },
        requests: 40,
        outputTokens: 20,
      });
    } finally {
      clearInterval(hog);
    }
    const health = verdict(blocked.result);
    assert.equal(health.clientLimited, true);
    assert.match(health.reasons.join('; '), /event-loop delay p99 \d+\.\d ms \(limit 10 ms\)/);
    assert.ok((blocked.result.clientHealth.eventLoopUtilisation ?? 0) > 0.5);
  });

  test('every worker is judged; one over a limit marks the run and is named', () => {
    const calm = {
      eventLoopDelayMs: { p50: 0.1, p99: 0.5, max: 2 },
      cpuUserS: 1,
      cpuSystemS: 0.2,
      threadCpuS: 0.3,
      eventLoopUtilisation: 0.2,
      wallS: 2,
      sendSlipMs: [0.1, 0.2],
      tokenEvents: 100,
      coalescedTokenEvents: 0,
    };
    const busy = { ...calm, threadCpuS: 1.95, eventLoopDelayMs: { p50: 3, p99: 25, max: 40 } };
    const health = assessClientHealth([calm, busy, calm], {});
    assert.equal(health.workers?.length, 3);
    assert.equal(health.clientLimited, true);
    assert.deepEqual(
      health.workers?.map((w) => w.clientLimited),
      [false, true, false],
    );
    assert.match(health.reasons[0], /^worker 1: event-loop delay p99 25\.0 ms/);
    assert.match(health.reasons[1], /^worker 1: client CPU 98% of one core/);
    assert.equal(health.eventLoopDelayMs.p99, 25);
    assert.equal(health.sendSlipMs?.count, 6);
    assert.equal(assessClientHealth([calm, calm], {}).clientLimited, false);
    // Arrivals closer than the timer granularity are said to go out in bursts.
    const fast = assessClientHealth([calm], { intendedRatePerS: 4000, achievedRatePerS: 3990 });
    assert.match(fast.notes?.[0] ?? '', /bursts of about 4 per wake-up/);
  });
});
