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
import { createRng } from '../../../src/rng.js';
import { calibrate } from '../../../src/session/calibrate.js';
import { replayTraceVirtual } from '../../../src/session/sizeTrace.js';
import { pointFromRecords, relativeErrors, replayPoint } from '../../../src/sim/calibrate.js';
import { EngineCluster } from '../../../src/sim/cluster.js';
import { type TraceEntry, traceLoad } from '../../../src/workload/trace.js';
import { tempDir } from '../../helpers/cli.js';
import { HIDDEN, l40sEngine } from '../../helpers/perturbed.js';

const BLOCK = 512;

/** Chats that grow turn by turn (each turn re-sends its chat), opening with one shared block. */
function chatTrace(n: number): TraceEntry[] {
  const rng = createRng(5);
  const chats: number[][] = [];
  let next = 1;
  let atMs = 0;
  const out: TraceEntry[] = [];
  for (let i = 0; i < n; i++) {
    let ids: number[];
    if (chats.length > 0 && rng.next() < 0.7) {
      const c = rng.int(chats.length);
      ids = [...chats[c], next++];
      chats[c] = ids;
    } else {
      ids = [0, next++];
      chats.push(ids);
    }
    out.push({
      atMs: Math.round(atMs),
      inputTokens: (ids.length - 1) * BLOCK + 1 + rng.int(BLOCK),
      outputTokens: 8 + rng.int(40),
      hashIds: ids,
    });
    atMs += rng.exponential(250);
  }
  return out;
}

const entries = chatTrace(80);
const truth = l40sEngine({ ...HIDDEN, enablePrefixCaching: true });

/** The trace run on the hidden engine, as a server's records. */
function measured(): RequestRecord[] {
  const records: RequestRecord[] = [];
  replayTraceVirtual(new EngineCluster(truth), {
    entries,
    speed: 1,
    blockTokens: BLOCK,
    onRecord: (r) => records.push(r),
  });
  return records.sort((a, b) => a.id - b.id);
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
      flags: {
        model: 'llama-3-8b',
        gpu: 'l40s',
        enablePrefixCaching: true,
        mbu: HIDDEN.mbu,
        stepOverheadMs: HIDDEN.stepOverheadMs,
        perSeqOverheadUs: HIDDEN.perSeqOverheadUs,
        frontendLatencyMs: HIDDEN.frontendLatencyMs,
      },
      fit: 'mfu',
    });
    const mfu = result.file.fitted.mfu?.value;
    assert.ok(
      mfu !== undefined && Math.abs(mfu - HIDDEN.mfu) < 0.02,
      `fitted mfu ${mfu} (hidden ${HIDDEN.mfu}); warnings: ${result.warnings.join('; ')}`,
    );
  });
});
