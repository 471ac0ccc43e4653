/**
 * `run --simulate --trace`: a trace's block ids key the engine's prefix cache in virtual time
 * (sim/traceKeys.ts), so requests that share blocks are served from the cache as over HTTP.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { RunPlan } from '../../../src/plan/runPlan.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { runPlan } from '../../../src/session/run.js';
import type { PreparedRun } from '../../../src/session/target.js';

const dir = mkdtempSync(join(tmpdir(), 'infergauge-trace-virtual-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Twelve requests of eight 512-token blocks, 300 ms apart, every one opening with the same six. */
const lines = Array.from({ length: 12 }, (_, i) => ({
  timestamp: i * 300,
  input_length: 8 * 512,
  output_length: 4,
  hash_ids: [1, 2, 3, 4, 5, 6, 100 + 2 * i, 101 + 2 * i],
}));

async function meanTtftMs(withIds: boolean): Promise<number> {
  const path = join(dir, 'trace.jsonl');
  writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n'));
  const prepared = prepareRun({
    simulate: true,
    trace: path,
    model: 'llama-3.1-8b',
    gpu: 'l40s',
    enablePrefixCaching: true,
  });
  assert.deepEqual(prepared.problems, []);
  const run = prepared as PreparedRun & { plan: RunPlan };
  const { plan } = run;
  // The entries as the trace reader gives them with their ids (issue 55 part 1 reads them).
  plan.trace?.entries.forEach((e, i) => {
    if (withIds) Object.assign(e, { hashIds: lines[i].hash_ids });
    else delete (e as { hashIds?: unknown }).hashIds;
  });
  const done = await runPlan(run, { outputs: [], save: false });
  const summary = done.results[0].summary;
  assert.equal(summary.requests.completed, 12);
  return summary.latency.ttftMs.mean;
}

test('run --simulate --trace: requests sharing blocks by their ids are served from the cache', async () => {
  const shared = await meanTtftMs(true);
  const alone = await meanTtftMs(false);
  // 6 of 8 blocks from the cache for 11 of 12 requests: about a third of the prefill is left.
  assert.ok(shared < 0.5 * alone, `mean TTFT ${shared} ms with ids, ${alone} ms without`);
});
