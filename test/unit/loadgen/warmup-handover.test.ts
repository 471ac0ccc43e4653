/**
 * The warm-up hands over to the measured phase without draining, in every loop: the first
 * measured request goes out while warm-up requests are still in flight, so the load the server
 * sees holds its level across the boundary (docs/cli.md, `--warmup`). A drain would send
 * nothing measured until the last warm-up request had ended. Against the in-process simulator.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RequestSpec } from '../../../src/backends/types.js';
import type { LoadSpec } from '../../../src/load.js';
import { splitPart, wholeRun } from '../../../src/loadgen/shard.js';
import type { RequestRecord } from '../../../src/record.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import type { Conversation } from '../../../src/workload/conversations.js';
import { runAgainst } from '../../helpers/run.js';

let sim: RunningSimulator;
before(async () => {
  // Requests of some 40 ms: long beside a 5 ms arrival gap or a user's turn-around.
  sim = await startSimulator({
    port: 0,
    host: '127.0.0.1',
    engine: 'scripted',
    timing: { itlMs: 5 },
  });
});
after(() => sim.stop());

/**
 * The boundary as the server saw it: how long the last warm-up request ran past the first
 * measured send, and how many warm-up requests were still unfinished at that send.
 *
 * The scripted engine gives every request the same duration, so a closed loop's users move in
 * lockstep: with a warm-up a multiple of the concurrency, its last wave would end together just
 * before the measured wave, drained or not. The warm-ups below are not multiples, so that a
 * wave holds both and a drain would show as a wait of a whole request.
 */
function boundary(records: RequestRecord[]) {
  const warm = records.filter((r) => r.phase === 'warmup');
  const measured = records.filter((r) => r.phase === 'measure');
  assert.ok(warm.length > 0 && measured.length > 0);
  const firstMeasured = Math.min(...measured.map((r) => r.sentAt));
  const lastWarmEnd = Math.max(...warm.map((r) => r.endAt));
  return {
    overlapMs: lastWarmEnd - firstMeasured,
    warmInFlight: warm.filter((r) => r.endAt > firstMeasured).length,
  };
}

/** Runs `load` split into `parts` engines at once (what --workers and --shard run), merged. */
async function runSplit(
  load: LoadSpec,
  warmupRequests: number,
  requests: number,
  parts: number,
): Promise<RequestRecord[]> {
  const split = splitPart(wholeRun(load, warmupRequests, requests), parts);
  const runs = await Promise.all(
    split.map((part) =>
      runAgainst(sim.url, {
        load: part.load,
        outputTokens: 8,
        engine: { ids: { ...part, measureFromId: warmupRequests } },
      }),
    ),
  );
  return runs.flatMap((r) => r.records);
}

/** A two-turn chat with no pause between turns. */
function chat(): Conversation {
  let turn = 0;
  return {
    next() {
      if (turn === 2) return undefined;
      turn++;
      const request: RequestSpec = {
        prompt: `question ${turn}`,
        messages: [{ role: 'user', content: `question ${turn}` }],
        requestedInputTokens: 4,
        requestedOutputTokens: 8,
      };
      return { pauseMs: 0, requests: [request] };
    },
  };
}

describe('warm-up hand-over', () => {
  test('closed loop: a user done warming up sends measured while the others still warm up', async () => {
    const { records } = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 4 },
      warmupRequests: 6,
      requests: 12,
      outputTokens: 8,
    });
    const b = boundary(records);
    // The second wave: two users on the last warm-up requests, two on the first measured, sent
    // in the same instant (a loaded machine may skew the users: 2 or 3 in flight); drained, the
    // measured would wait for every warm-up answer (an overlap under 0).
    assert.ok(b.overlapMs > 0, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 1, `${b.warmInFlight} warm-up requests in flight`);
  });

  test('open loop: arrivals keep their schedule across the boundary', async () => {
    const { records } = await runAgainst(sim.url, {
      load: { mode: 'open', rate: 200, arrival: 'constant' },
      warmupRequests: 10,
      requests: 10,
      outputTokens: 8,
    });
    const b = boundary(records);
    assert.ok(b.overlapMs > 0, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 3, `${b.warmInFlight} warm-up requests in flight`);
    // The first measured arrival is due one gap (5 ms) after the last warm-up one, not after
    // the warm-up's answers.
    const scheduled = records.map((r) => r.scheduledAt).sort((x, y) => x - y);
    const gap = scheduled[10] - scheduled[9];
    assert.ok(gap < 20, `${gap} ms between the last warm-up arrival and the first measured`);
  });

  test('sessions: a measured session starts while warm-up sessions are still talking', async () => {
    const { records } = await runAgainst(sim.url, {
      target: { endpoint: 'chat' },
      load: { mode: 'closed', concurrency: 3 },
      warmupRequests: 4,
      requests: 6,
      engine: { nextRequest: undefined, nextSession: () => chat() },
    });
    const b = boundary(records);
    // The second wave: one user on the last warm-up session, two on measured ones.
    assert.ok(b.overlapMs > 10, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 1, `${b.warmInFlight} warm-up requests in flight`);
  });

  test('split closed loop (workers, shards): each part hands over without draining', async () => {
    // Three parts of two users, three warm-up requests each: each part's second wave holds
    // one warm-up request and one measured.
    const records = await runSplit({ mode: 'closed', concurrency: 6 }, 9, 18, 3);
    assert.equal(records.length, 27);
    const b = boundary(records);
    assert.ok(b.overlapMs > 10, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 2, `${b.warmInFlight} warm-up requests in flight`);
  });

  test('split open loop (workers, shards): the interleaved schedule runs through', async () => {
    const records = await runSplit({ mode: 'open', rate: 200, arrival: 'constant' }, 12, 12, 3);
    assert.equal(records.length, 24);
    const b = boundary(records);
    assert.ok(b.overlapMs > 0, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 3, `${b.warmInFlight} warm-up requests in flight`);
  });
});
