/**
 * A closed loop's user sends its next request as soon as its answer has ended, before that
 * answer's record is written (which waits for a turn of its own, so that waiting reads are
 * stamped first): the loop keeps its concurrency in flight through a wave of finished requests.
 * A record that cannot be written after its user went on still fails the run. Against the
 * in-process simulator.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LoadSpec } from '../../../src/load.js';
import { type LoadgenProgress, runLoadgen } from '../../../src/loadgen/run.js';
import type { RequestRecord } from '../../../src/record.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';
import { target } from '../../helpers/run.js';

let sim: RunningSimulator;
before(async () => {
  sim = await startSimulator({
    port: 0,
    host: '127.0.0.1',
    engine: 'scripted',
    timing: { itlMs: 2 },
  });
});
after(() => sim.stop());

/** Runs `load` (a closed loop of `concurrency` users) against the simulator; its progress, live. */
function run(load: number | LoadSpec, requests: number, onRecord: (r: RequestRecord) => void) {
  const progress: LoadgenProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 };
  const result = runLoadgen(
    {
      target: target(sim.url),
      load: typeof load === 'number' ? { mode: 'closed', concurrency: load } : load,
      requests,
      warmupRequests: 0,
      seed: 7,
      nextRequest: createSyntheticWorkload({ inputTokens: 16, outputTokens: 4, seed: 7 }),
      onRecord,
    },
    progress,
  );
  return { progress, result };
}

describe('closed-loop turnaround', () => {
  test('a user sends its next request before its last answer is recorded', async () => {
    const sentAtRecord: number[] = [];
    const inFlightAtRecord: number[] = [];
    const { progress, result } = run(1, 5, () => {
      sentAtRecord.push(progress.sent);
      inFlightAtRecord.push(progress.inFlight);
    });
    await result;
    // One user: when request k's record is written, request k + 1 is already on its way (the
    // last has no next). Recording first and sending a turn later read 1, 2, 3, 4, 5.
    assert.deepEqual(sentAtRecord, [2, 3, 4, 5, 5]);
    // Never more in flight than the concurrency, as the next one goes out.
    assert.deepEqual(inFlightAtRecord, [1, 1, 1, 1, 0]);
    assert.equal(progress.finished, 5);
    assert.equal(progress.inFlight, 0);
  });

  test('every record is written before the run returns', async () => {
    const ids: number[] = [];
    const { result } = run(8, 40, (r) => ids.push(r.id));
    await result;
    assert.deepEqual(
      [...ids].sort((a, b) => a - b),
      Array.from({ length: 40 }, (_, i) => i),
    );
  });

  test('a record that cannot be written fails the run, and nothing more is sent', async () => {
    let calls = 0;
    const { progress, result } = run(2, 50, () => {
      calls++;
      if (calls === 1) throw new Error('disk full');
    });
    await assert.rejects(result, /disk full/);
    // The users in flight when it failed end; none starts another.
    assert.ok(progress.sent <= 4, `sent ${progress.sent}`);
    assert.equal(progress.inFlight, 0);
  });
});

describe('open-loop record failure', () => {
  const open = (rate: number, maxConcurrency: number, onRecord: (r: RequestRecord) => void) =>
    run({ mode: 'open', arrival: 'constant', rate, maxConcurrency }, 40, onRecord);

  test('arrivals waiting over the cap are not sent once a record cannot be written', async () => {
    let calls = 0;
    const { progress, result } = open(2000, 1, () => {
      if (++calls === 1) throw new Error('disk full');
    });
    await assert.rejects(result, /disk full/);
    assert.ok(progress.sent <= 3, `sent ${progress.sent} of 40`);
  });

  test('the run fails as the record fails, not at the next arrival', async () => {
    const startedAt = performance.now();
    const { result } = open(0.2, 4, () => {
      throw new Error('disk full');
    });
    await assert.rejects(result, /disk full/);
    // The next arrival was 5 s away.
    assert.ok(performance.now() - startedAt < 4000, `${performance.now() - startedAt} ms`);
  });
});
