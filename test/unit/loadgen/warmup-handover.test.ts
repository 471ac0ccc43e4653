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
 * The boundary as the server saw it: when the first measured request was sent, how many
 * warm-up requests were still in flight, and whether any warm-up request ended after it.
 */
function boundary(records: RequestRecord[]) {
  const warm = records.filter((r) => r.phase === 'warmup');
  const measured = records.filter((r) => r.phase === 'measure');
  assert.ok(warm.length > 0 && measured.length > 0);
  const firstMeasured = Math.min(...measured.map((r) => r.sentAt));
  const lastWarmEnd = Math.max(...warm.map((r) => r.endAt));
  return {
    overlapMs: lastWarmEnd - firstMeasured,
    warmInFlight: warm.filter((r) => r.sentAt <= firstMeasured && r.endAt > firstMeasured).length,
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
      warmupRequests: 8,
      requests: 12,
      outputTokens: 8,
    });
    const b = boundary(records);
    assert.ok(b.overlapMs > 0, `${b.overlapMs} ms`);
    // The concurrency holds: the user that sent the first measured request had just finished;
    // the other three were still on warm-up requests (one may be ending in the same instant).
    assert.ok(b.warmInFlight >= 2, `${b.warmInFlight} warm-up requests in flight`);
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
      warmupRequests: 6,
      requests: 6,
      engine: { nextRequest: undefined, nextSession: () => chat() },
    });
    const b = boundary(records);
    assert.ok(b.overlapMs > 0, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 1, `${b.warmInFlight} warm-up requests in flight`);
  });

  test('split closed loop (workers, shards): each part hands over without draining', async () => {
    const records = await runSplit({ mode: 'closed', concurrency: 6 }, 12, 18, 3);
    assert.equal(records.length, 30);
    const b = boundary(records);
    assert.ok(b.overlapMs > 0, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 3, `${b.warmInFlight} warm-up requests in flight`);
  });

  test('split open loop (workers, shards): the interleaved schedule runs through', async () => {
    const records = await runSplit({ mode: 'open', rate: 200, arrival: 'constant' }, 12, 12, 3);
    assert.equal(records.length, 24);
    const b = boundary(records);
    assert.ok(b.overlapMs > 0, `${b.overlapMs} ms`);
    assert.ok(b.warmInFlight >= 3, `${b.warmInFlight} warm-up requests in flight`);
  });
});
