/**
 * Issue 55 item 1: a Mooncake trace replayed against the simulator with prefix caching (vLLM's
 * hash blocks) reaches the hit rate its hash_ids imply, read from the server's counters: the
 * block-exact prompts share on the server exactly what the trace says they share.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { benchmark, parseRunPlan } from '../../src/index.js';
import { type SimulatorProcess, spawnSimulator } from '../../src/session/simulator.js';
import { traceImpliedHitRate } from '../../src/workload/blockPrompts.js';
import { readTrace } from '../../src/workload/trace.js';
import { REPO } from '../../tools/repo.js';

const TRACE = join(REPO, 'test/fixtures/workload/mooncake-synthetic-3881.jsonl');

describe('a Mooncake replay against a caching simulator', () => {
  let sim: SimulatorProcess;
  let dir: string;
  before(async () => {
    // Fast engine time, a cache that holds the whole cut (no eviction), a context that holds
    // its longest prompt.
    sim = await spawnSimulator([
      '--time-scale',
      '0.0001',
      '--num-gpu-blocks-override',
      '400000',
      '--max-model-len',
      '131072',
      '--enable-prefix-caching',
    ]);
    dir = mkdtempSync(join(tmpdir(), 'ig-trace-prefix-'));
  });
  after(async () => {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the server-reported hit rate is within 2 points of traceImpliedHitRate', async (t) => {
    const out = join(dir, 'replay');
    const plan = parseRunPlan({
      url: sim.url,
      trace: TRACE,
      // One request at a time, in trace order: the implied rate's premise (each prefill done
      // before the next), whatever the machine's speed.
      maxConcurrency: 1,
      traceSpeed: 1000,
      endpoint: 'completions',
      seed: 5,
      out,
    });
    await benchmark(plan, {});
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as {
      serverMetrics?: { prefixCache?: { hitRate: number } };
      requests?: { failed?: number };
    };
    const implied = traceImpliedHitRate(readTrace(TRACE), {
      blockTokens: 512,
      engineBlockTokens: 16,
    });
    const served = summary.serverMetrics?.prefixCache?.hitRate;
    assert.ok(served !== undefined, JSON.stringify(summary.serverMetrics));
    assert.ok(implied > 0.5, `${implied}`);
    t.diagnostic(`served ${served}, implied ${implied}`);
    assert.ok(Math.abs(served - implied) <= 0.02, `served ${served}, implied ${implied}`);
  });
});
