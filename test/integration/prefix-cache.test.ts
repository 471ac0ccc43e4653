/**
 * Issue 47: the same run twice against one caching server (the simulator serves vLLM V1's
 * prefix cache and its counters) reads cached prefills the second time, and the summary says so
 * with `prefix_cache_hits`; the first run, against a cold cache, does not.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { benchmark, parseRunPlan } from '../../src/index.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { startSim } from '../helpers/sim.js';

interface Saved {
  warnings: { code: string; severity?: string; message: string; detail?: string }[];
  serverMetrics?: { prefixCache?: { hitRate: number } };
  validity: { verdict: string; reasons: { code: string; verdict: string }[] };
}

describe('prefix_cache_hits against a caching server', () => {
  let sim: SimulatorProcess;
  let dir: string;
  before(async () => {
    sim = await startSim();
    dir = mkdtempSync(join(tmpdir(), 'ig-prefix-cache-'));
  });
  after(async () => {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function run(name: string, options: Record<string, unknown> = {}): Promise<Saved> {
    const out = join(dir, name);
    const plan = parseRunPlan({
      url: sim.url,
      inputTokens: '256',
      outputTokens: '4',
      requests: 16,
      concurrency: 4,
      seed: 7,
      out,
      ...options,
    });
    await benchmark(plan, {});
    return JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as Saved;
  }

  test('a repeated run is warned of its cached prompts; the first and a shared-prefix run are not', async () => {
    // The same prompt salt twice sends the same prompts twice (a fresh salt per run would not).
    const first = await run('first', { promptSalt: 7 });
    assert.ok(!first.warnings.some((w) => w.code === 'prefix_cache_hits'), JSON.stringify(first));
    const second = await run('second', { promptSalt: 7 });
    assert.ok((second.serverMetrics?.prefixCache?.hitRate ?? 0) > 0.9, JSON.stringify(second));
    const w = second.warnings.find((x) => x.code === 'prefix_cache_hits');
    assert.ok(w, second.warnings.map((x) => x.code).join(','));
    assert.equal(w.severity, 'warning');
    assert.match(
      w.message,
      /^prefix cache uncontrolled: the server served (9\d|100)\.\d% of prompt tokens from its prefix cache/,
    );
    assert.match(w.detail ?? '', /prefix-cache counters: [\d,]+ of [\d,]+ prompt tokens/);
    // The verdict: the cache nobody controlled puts the second run in doubt (a busy machine may
    // make it invalid besides, for the client's own limits).
    assert.notEqual(second.validity.verdict, 'valid');
    assert.ok(
      second.validity.reasons.some(
        (r) => r.code === 'prefix_cache_hits' && r.verdict === 'caution',
      ),
    );
    // A workload that asks for a shared prefix is not warned of the hits it asked for, but a
    // server at --url kept what earlier runs left: its cache was not controlled either.
    const shared = await run('shared', { sharedPrefix: 128, promptSalt: 7 });
    assert.ok(!shared.warnings.some((x) => x.code === 'prefix_cache_hits'));
    assert.deepEqual(
      shared.validity.reasons.map((r) => r.code).filter((c) => c.startsWith('prefix_cache')),
      ['prefix_cache_uncontrolled'],
    );
  });
});
