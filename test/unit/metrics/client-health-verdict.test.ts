import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  assessClientHealth,
  CLIENT_HEALTH_LIMITS,
  clientHealthVerdict,
  stampDelayEstimate,
} from '../../../src/metrics/clientHealth.js';
import { summarize } from '../../../src/metrics/summary.js';
import type { ClientHealthMeasurements } from '../../../src/record.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';

/**
 * One engine thread's measurements over a 10 s run: `thread` and `process` are CPU shares of
 * one core (the thread's own, all the process's threads together), `usableCores` what the
 * affinity mask gave the process.
 */
function measured(o: {
  thread: number;
  process: number;
  usableCores?: number;
  wallS?: number;
  loopDelayP99Ms?: number;
}): ClientHealthMeasurements {
  const wallS = o.wallS ?? 10;
  return {
    eventLoopDelayMs: { p50: 0.1, p99: o.loopDelayP99Ms ?? 0.5, max: 3 },
    cpuUserS: o.process * wallS * 0.8,
    cpuSystemS: o.process * wallS * 0.2,
    threadCpuS: o.thread * wallS,
    eventLoopUtilisation: o.thread,
    wallS,
    ...(o.usableCores !== undefined ? { usableCores: o.usableCores } : {}),
    sendSlipMs: [],
    tokenEvents: 1000,
    coalescedTokenEvents: 0,
  };
}

describe('client-health verdict: the process against the cores it may use', () => {
  test('one pinned core at 95 % is client-limited though its worker thread used 86 %', () => {
    // The case of issue 18: taskset -c 1, one worker at 0.86 of the core, the main thread
    // writing records beside it, 0.95 of the core in all.
    const health = assessClientHealth(
      measured({ thread: 0.86, process: 0.95, usableCores: 1 }),
      {},
    );
    assert.equal(health.clientLimited, true);
    assert.equal(clientHealthVerdict(health), 'client-limited');
    assert.deepEqual(health.processCpu, { share: 0.95, usableCores: 1 });
    assert.equal(health.reasons.length, 1, health.reasons.join('; '));
    assert.match(
      health.reasons[0],
      /^client CPU 95% of 1 usable core \(all threads\) \(limit 90%\): /,
    );
    // One worker on one core fills it: more workers cannot help.
    assert.match(
      health.advice ?? '',
      /^more --workers cannot help \(1 on 1 usable core\): use another machine or shards \(--shard\)$/,
    );
    // The thread alone is near its own limit: said, with the figure, not counted as a reason.
    assert.match(
      health.notes?.join('\n') ?? '',
      /client CPU 86% of one core \(one thread\), near the limit of 90%/,
    );
  });

  test('the same process measured before usableCores existed is judged by its threads alone', () => {
    const { usableCores: _, ...old } = measured({ thread: 0.86, process: 0.95, usableCores: 1 });
    const health = assessClientHealth(old, {});
    assert.equal(health.clientLimited, false);
    assert.equal(health.processCpu, undefined);
  });

  test('two worker threads at 60 % of a core each, on 2 usable cores, are fine', () => {
    const worker = measured({ thread: 0.6, process: 1.25, usableCores: 2 });
    const health = assessClientHealth([worker, worker], {});
    assert.equal(health.clientLimited, false, health.reasons.join('; '));
    assert.equal(health.nearLimit, false);
    assert.equal(clientHealthVerdict(health), 'ok');
    assert.equal(health.notes, undefined);
    assert.ok(health.processCpu && Math.abs(health.processCpu.share - 0.625) < 1e-9);
  });

  test('the same two threads squeezed onto one core are client-limited', () => {
    const worker = measured({ thread: 0.6, process: 1.25, usableCores: 1 });
    const health = assessClientHealth([worker, worker], {});
    assert.equal(health.clientLimited, true);
    assert.match(
      health.reasons.join('; '),
      /client CPU 125% of 1 usable core \(all threads\) \(limit 90%\)/,
    );
    // Neither thread crossed its own limit: the process is the finding, not a worker.
    assert.deepEqual(
      health.workers?.map((w) => w.clientLimited),
      [false, false],
    );
  });

  test('shards after merge: the busiest process is judged, whichever shard it was', () => {
    const calm = measured({ thread: 0.3, process: 0.35, usableCores: 4 });
    const busy = measured({ thread: 0.86, process: 0.95, usableCores: 1 });
    const health = assessClientHealth([calm, calm, busy], {});
    assert.equal(health.clientLimited, true);
    assert.deepEqual(health.processCpu, { share: 0.95, usableCores: 1 });
  });

  test('under a second of wall time, CPU shares are too coarse to judge', () => {
    const health = assessClientHealth(
      measured({ thread: 0.99, process: 1, usableCores: 1, wallS: 0.5 }),
      {},
    );
    assert.equal(health.clientLimited, false);
    assert.equal(health.processCpu, undefined);
  });
});

describe('client-health verdict: near a limit is a note, not a flip', () => {
  test('figures that wobble below a limit give the same verdict on every run, with the figure', () => {
    // Repeats of one setup whose process CPU wobbles between 81 % and 89 % of its one core.
    for (const process of [0.81, 0.84, 0.87, 0.89]) {
      const health = assessClientHealth(measured({ thread: 0.5, process, usableCores: 1 }), {});
      assert.equal(health.clientLimited, false, `at ${process}`);
      assert.equal(clientHealthVerdict(health), 'ok, near a limit', `at ${process}`);
      assert.deepEqual(health.reasons, []);
      const figure = `${Math.round(process * 100)}%`;
      assert.deepEqual(health.notes, [
        `client CPU ${figure} of 1 usable core (all threads), near the limit of 90%`,
      ]);
    }
    // Past the limit the verdict is client-limited; below the band nothing is said.
    const over = assessClientHealth(measured({ thread: 0.5, process: 0.91, usableCores: 1 }), {});
    assert.equal(over.clientLimited, true);
    const under = assessClientHealth(measured({ thread: 0.5, process: 0.79, usableCores: 1 }), {});
    assert.equal(clientHealthVerdict(under), 'ok');
  });

  test('a figure just past its limit never reads as the limit itself', () => {
    const just = assessClientHealth(measured({ thread: 0.5, process: 0.904, usableCores: 1 }), {});
    assert.match(
      just.reasons[0],
      /^client CPU 90\.4% of 1 usable core \(all threads\) \(limit 90%\)/,
    );
    const under = assessClientHealth(measured({ thread: 0.5, process: 0.897, usableCores: 1 }), {});
    assert.match(under.notes?.[0] ?? '', /^client CPU 89\.7% of 1 usable core/);
  });

  test('every limit has its band: event-loop delay, send slip, achieved rate', () => {
    const delay = assessClientHealth(
      measured({ thread: 0.2, process: 0.2, loopDelayP99Ms: 7 }),
      {},
    );
    assert.equal(delay.clientLimited, false);
    assert.match(delay.notes?.[0] ?? '', /^event-loop delay p99 7\.0 ms, near the limit of 10 ms$/);
    const slipping = { ...measured({ thread: 0.2, process: 0.2 }), sendSlipMs: [1, 2, 8, 8, 8] };
    const slip = assessClientHealth(slipping, {});
    assert.equal(slip.clientLimited, false);
    assert.match(slip.notes?.[0] ?? '', /^send slip p99 8\.0 ms, near the limit of 10 ms$/);
    const rate = (achievedRatePerS: number) =>
      assessClientHealth(measured({ thread: 0.2, process: 0.2 }), {
        intendedRatePerS: 100,
        achievedRatePerS,
      });
    assert.equal(clientHealthVerdict(rate(99)), 'ok');
    assert.equal(clientHealthVerdict(rate(97)), 'ok, near a limit');
    assert.match(
      rate(97).notes?.[0] ?? '',
      /achieved send rate 97\.00\/s, near the limit of 95% of the intended 100\.00\/s/,
    );
    assert.equal(clientHealthVerdict(rate(94)), 'client-limited');
    assert.match(
      rate(94).reasons[0],
      /achieved send rate 94\.00\/s \(limit 95% of the intended 100\.00\/s\)/,
    );
  });

  test('each band lies on the safe side of its limit', () => {
    for (const [name, { limit, near }] of Object.entries(CLIENT_HEALTH_LIMITS)) {
      if (name === 'achievedRateShare') assert.ok(near > limit && near < 1, name);
      else assert.ok(near < limit && near > 0, name);
    }
  });
});

describe('client-health verdict in the terminal summary', () => {
  const render = (health: ClientHealthMeasurements) =>
    renderTerminalSummary(
      summarize([], { load: { mode: 'closed', concurrency: 16 } }, { clientHealth: health }),
      { color: false },
    );

  test('the limited case: the headline names the figure, the line shows it beside its limit', () => {
    const text = render(measured({ thread: 0.86, process: 0.95, usableCores: 1 }));
    assert.match(
      text,
      /^CLIENT-LIMITED: .*\n {2}client CPU 95% of 1 usable core \(all threads\) \(limit 90%\): [^\n]+\n {2}more --workers cannot help/,
    );
    // Said once: the headline, not again among the warnings.
    assert.equal(text.match(/usable core \(all threads\) \(limit/g)?.length, 1);
    assert.doesNotMatch(text, /client limited this run/);
    assert.match(
      text,
      /Client health: client CPU 95% of 1 usable core \(all threads, limit 90%\), CPU 86% of one core \(busiest thread, limit 90%\), event-loop delay p99 0\.50 ms \(limit 10 ms\), coalesced events 0\.0%: client-limited\n/,
    );
  });

  test('near a limit: ok, with the figure and the limit in the note under it', () => {
    const text = render(measured({ thread: 0.5, process: 0.87, usableCores: 1 }));
    assert.doesNotMatch(text, /CLIENT-LIMITED/);
    assert.match(
      text,
      /Client health: client CPU 87% of 1 usable core \(all threads, limit 90%\), .*: ok, near a limit\n {2}client CPU 87% of 1 usable core \(all threads\), near the limit of 90%\n/,
    );
  });
});

describe("client-health verdict: how late the thread's own stalls made its stamps", () => {
  // 10 s of a thread that stalled twenty times for 10 ms: 2 % of the time stalled, and busy
  // `busy` of it in all.
  const stalled = (itlP99Ms?: number, busy = 0.02) => {
    const m: ClientHealthMeasurements = {
      ...measured({ thread: busy, process: busy, usableCores: 4 }),
      loopStallsMs: [[10, 20]],
      gcPauses: { count: 20, totalMs: 200, maxMs: 10, over1Ms: 20 },
    };
    return assessClientHealth(m, itlP99Ms !== undefined ? { itlP99Ms } : {});
  };

  test('the estimate: a read arriving in a stall waits out its rest', () => {
    // 1 % of reads are late by more than d where 20 x (10 - d) ms = 1 % of 10,000 ms: d = 5.
    const m = {
      loopStallsMs: [[10, 20]] as [number, number][],
      wallS: 10,
      eventLoopUtilisation: 0.02,
    };
    const one = stampDelayEstimate(m);
    assert.ok(one);
    assert.ok(Math.abs(one.p99Ms - 5) < 0.01, `p99 ${one.p99Ms}`);
    // Mean: each stall delays the reads in it by 5 ms on average, 2 % of them: 0.1 ms.
    assert.ok(Math.abs(one.meanMs - 0.1) < 1e-9, `mean ${one.meanMs}`);
    // Two threads: half the stalls each, 1 % of reads is no longer reached.
    assert.equal(stampDelayEstimate(m, 2)?.p99Ms, 0);
    // A loop busy half the time besides the stalls drains the queued reads at half speed.
    const busy = stampDelayEstimate({ ...m, eventLoopUtilisation: 0.52 });
    assert.ok(busy && Math.abs(busy.p99Ms - 7.5) < 0.01, `busy p99 ${busy?.p99Ms}`);
    assert.equal(stampDelayEstimate({ wallS: 10 }), undefined);
  });

  test('against a 10 ms ITL p99 the stalls are material: the verdict says by how much', () => {
    const health = stalled(10);
    assert.equal(clientHealthVerdict(health), 'client-limited');
    assert.equal(health.stampDelayMs?.p99Ms.toFixed(1), '5.0');
    const reason = health.reasons.join('\n');
    assert.match(
      reason,
      /^stamps up to 5\.0 ms late at p99 \(limit 1\.0 ms\): ITL p99 up to 5\.0 ms high \(of 10\.0 ms\), mean TTFT ~[\d.]+ ms high;/,
    );
    assert.match(reason, /\(20 GC pauses over 1 ms, longest 10\.0 ms\)/);
    // A loop busy 2 % of the time: its stalls are not its load's, more threads would not help.
    assert.match(reason, /busy only 2%: GC or other host work held it up/);
    assert.match(health.advice ?? '', /^other work on the host held the client up/);
    assert.doesNotMatch(reason, /about \d+ worker threads/);
  });

  test('a busy loop: the verdict names the worker threads that would spread its stalls', () => {
    // Busy 50 %: reads queued in a stall drain at about half speed (p99 7.4 ms); four threads,
    // each with a quarter of the stalls and the load, come under 1 ms by the same estimate.
    const health = stalled(10, 0.5);
    assert.equal(health.stampDelayMs?.p99Ms.toFixed(1), '7.4');
    // One worker on 4 usable cores: more workers can help, and the advice says how many.
    assert.equal(health.advice, 'use --workers 4 to spread the streams over more cores');
    // Where the cores are already taken, the same stalls get no such advice.
    const full = assessClientHealth(
      Array.from({ length: 4 }, () => ({
        ...measured({ thread: 0.5, process: 0.5, usableCores: 4 }),
        loopStallsMs: [[10, 20]] as [number, number][],
      })),
      { itlP99Ms: 10 },
    );
    assert.equal(full.clientLimited, true);
    assert.match(full.advice ?? '', /^more --workers cannot help \(4 on 4 usable cores\)/);
    assert.doesNotMatch(full.reasons.join('\n'), /worker threads/);
  });

  test('a saturated loop: neither ITL p99 nor mean TTFT is said to have moved past its measured value', () => {
    // bench:peer's client-bound regime: a loop 95 % busy whose turns last hundreds of ms reads a
    // stamp delay far past the run's own ITL p99 (1.4 ms) and mean TTFT (1.2 ms); a true gap or
    // TTFT is not below 0, so neither can have moved by more than it measures.
    const m: ClientHealthMeasurements = {
      ...measured({ thread: 0.95, process: 0.95, usableCores: 4 }),
      loopStallsMs: [[400, 5]],
    };
    const health = assessClientHealth(m, { itlP99Ms: 1.4, ttftMeanMs: 1.2 });
    assert.ok((health.stampDelayMs?.p99Ms ?? 0) > 100, `${health.stampDelayMs?.p99Ms}`);
    const reason = health.reasons.join('\n');
    assert.match(reason, /ITL p99 up to 1\.4 ms high \(of 1\.4 ms\), mean TTFT ~1\.2 ms high/);
    // Under 1 ms measured, ITL p99 cannot have moved by the limit: no finding on it.
    const small = assessClientHealth(m, { itlP99Ms: 0.8, ttftMeanMs: 1.2 });
    assert.doesNotMatch(small.reasons.join('\n'), /ITL p99 may read/);
  });

  test('against a 200 ms ITL p99 the same stalls are not material', () => {
    const health = stalled(200);
    assert.equal(clientHealthVerdict(health), 'ok');
    assert.equal(health.stampDelayMs?.p99Ms.toFixed(1), '5.0');
  });
});
