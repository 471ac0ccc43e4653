/**
 * `calibrate` from a trace replay: records keep no prompts, but a trace with block ids names
 * what they shared, so the fit replays the run with the prefix cache keyed by the ids. The
 * "server" is the simulator with hidden constants, measured in virtual time: the truth is exact.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { RequestRecord } from '../../../src/record.js';
import { calibrate } from '../../../src/session/calibrate.js';
import { replayTraceVirtual } from '../../../src/session/sizeTrace.js';
import { pointFromRecords, relativeErrors, replayPoint } from '../../../src/sim/calibrate.js';
import { EngineCluster } from '../../../src/sim/cluster.js';
import { type TraceEntry, traceLoad } from '../../../src/workload/trace.js';
import { chatTrace } from '../../helpers/chatTrace.js';
import { tempDir } from '../../helpers/cli.js';
import { HIDDEN, HOLD_ALL_BUT_MFU, l40sEngine } from '../../helpers/perturbed.js';

const BLOCK = 512;

/** Chats that grow a BLOCK a turn whatever the ids' block size `block`. */
const chats = (n: number, block = BLOCK) =>
  chatTrace(n, {
    seed: 5,
    continueChance: 0.7,
    blockTokens: block,
    turnTokens: BLOCK,
    outputTokens: { min: 8, spread: 40 },
    gapMs: (rng) => rng.exponential(250),
    gapAfter: true,
  });

const entries = chats(80);
const truth = l40sEngine({ ...HIDDEN, enablePrefixCaching: true });

/** The trace run on the hidden engine, as a server's records. */
function measured(run = entries, blockTokens = BLOCK): RequestRecord[] {
  const records: RequestRecord[] = [];
  replayTraceVirtual(new EngineCluster(truth), {
    entries: run,
    speed: 1,
    blockTokens,
    onRecord: (r) => records.push(r),
  });
  return records.sort((a, b) => a.id - b.id);
}

/** Mooncake JSONL of the entries. */
function mooncakeText(trace: readonly TraceEntry[]): string {
  return trace
    .map((e) =>
      JSON.stringify({
        timestamp: e.atMs,
        input_length: e.inputTokens,
        output_length: e.outputTokens,
        hash_ids: e.hashIds,
      }),
    )
    .join('\n');
}

describe('calibrate from a trace replay', () => {
  test("the replay keys the cache by the trace's block ids: the run's own TTFT, where without them it is far off", () => {
    const records = measured();
    const load = traceLoad(entries);
    const keyed = pointFromRecords('trace', load, records, undefined, {
      hashIdsOf: (id) => entries[id].hashIds,
      blockTokens: BLOCK,
    });
    assert.equal(keyed.traceBlockTokens, BLOCK);
    const bare = pointFromRecords('trace', load, records);
    const withIds = relativeErrors(replayPoint(truth, keyed), keyed.measured);
    const without = relativeErrors(replayPoint(truth, bare), bare.measured);
    assert.ok(Math.abs(withIds.ttftMs) < 0.01, `TTFT off by ${withIds.ttftMs}`);
    assert.ok(
      without.ttftMs > 0.2,
      `without the ids the replay computes every prompt (${without.ttftMs})`,
    );
  });

  // The run's manifest names the trace; calibrate reads its block ids again from the file.
  test('calibrate reads the block ids from the trace the manifest names, and fits the hidden MFU', async () => {
    const dir = tempDir('ig-calibrate-trace-');
    const tracePath = join(dir, 'trace.jsonl');
    writeFileSync(
      tracePath,
      entries
        .map((e) =>
          JSON.stringify({
            timestamp: e.atMs,
            input_length: e.inputTokens,
            output_length: e.outputTokens,
            hash_ids: e.hashIds,
          }),
        )
        .join('\n'),
    );
    const run = join(dir, 'run');
    mkdirSync(run);
    writeFileSync(
      join(run, 'records.jsonl'),
      measured()
        .map((r) => JSON.stringify(r))
        .join('\n'),
    );
    writeFileSync(
      join(run, 'manifest.json'),
      JSON.stringify({ plan: { load: traceLoad(entries), trace: { path: tracePath } } }),
    );
    const result = await calibrate([run], {
      flags: HOLD_ALL_BUT_MFU,
      fit: 'mfu',
    });
    const mfu = result.file.fitted.mfu?.value;
    assert.ok(
      mfu !== undefined && Math.abs(mfu - HIDDEN.mfu) < 0.02,
      `fitted mfu ${mfu} (hidden ${HIDDEN.mfu}); warnings: ${result.warnings.join('; ')}`,
    );
  });

  // A run of --trace-block-tokens 256 --trace-window 30:1000: the trace is read again with that
  // block size (512 would refuse its ids) and cut to that window (request id = window entry id).
  test("calibrate reads the trace with the run's block size and window", async () => {
    const block = 256;
    const run = chats(80, block);
    // 20 arrivals the window leaves out, then the run's entries from 30 s on.
    const before = chats(20, block).map((e, i) => ({ ...e, atMs: i * 1000 }));
    const file = [...before, ...run.map((e) => ({ ...e, atMs: e.atMs + 30_000 }))];
    const dir = tempDir('ig-calibrate-trace-window-');
    const tracePath = join(dir, 'trace.jsonl');
    writeFileSync(tracePath, mooncakeText(file));
    const runDir = join(dir, 'run');
    mkdirSync(runDir);
    writeFileSync(
      join(runDir, 'records.jsonl'),
      measured(run, block)
        .map((r) => JSON.stringify(r))
        .join('\n'),
    );
    writeFileSync(
      join(runDir, 'manifest.json'),
      JSON.stringify({
        plan: {
          load: traceLoad(run),
          trace: { path: tracePath, blockTokens: block, window: { startS: 30, endS: 1000 } },
        },
      }),
    );
    const result = await calibrate([runDir], { flags: HOLD_ALL_BUT_MFU, fit: 'mfu' });
    assert.deepEqual(
      result.warnings.filter((w) => w.includes('sharing')),
      [],
      'the prefix sharing is replayed',
    );
    const mfu = result.file.fitted.mfu?.value;
    assert.ok(
      mfu !== undefined && Math.abs(mfu - HIDDEN.mfu) < 0.02,
      `fitted mfu ${mfu} (hidden ${HIDDEN.mfu}); warnings: ${result.warnings.join('; ')}`,
    );
  });

  // An agentic trace's run names its trace too; its sessions are replayed as sessions, and the
  // file (no trace of single requests) is not read as one, nor warned about.
  test("a session run's trace is not read for block ids", async () => {
    const dir = tempDir('ig-calibrate-agent-');
    const runDir = join(dir, 'run');
    mkdirSync(runDir);
    writeFileSync(
      join(runDir, 'records.jsonl'),
      measured()
        .map((r) => JSON.stringify({ ...r, sessionId: r.id, turn: 0 }))
        .join('\n'),
    );
    writeFileSync(
      join(runDir, 'manifest.json'),
      JSON.stringify({
        plan: {
          load: traceLoad(entries),
          trace: { path: 'test/fixtures/workload/agent-trace.jsonl' },
        },
      }),
    );
    const result = await calibrate([runDir], { flags: HOLD_ALL_BUT_MFU, fit: 'mfu' });
    assert.deepEqual(
      result.warnings.filter((w) => w.includes('trace')),
      [],
    );
  });
});
