/**
 * Issue 47's README scenario, end to end: two identical `run`s against one simulator server
 * that caches prefixes (vLLM V1's default). With a fresh prompt salt per run (the default) the
 * second run finds nothing of the first in the cache and `compare` names no reason; with the
 * same `--prompt-salt` on both it hits the cache, and `compare` says the comparison is not like
 * for like and why.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseRunPlan, type RunPlan } from '../../src/plan/runPlan.js';
import { compareTargets, renderTerminal } from '../../src/report/compare.js';
import { readCompareTarget } from '../../src/results/compareInput.js';
import { prepareSweep, runSweep } from '../../src/session/profiles/sweep.js';
import { benchmark } from '../../src/session/run.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import type { PreparedRun } from '../../src/session/target.js';
import { tempDir } from '../helpers/cli.js';
import { chatEvent, DONE, startScriptedServer, usageEvent } from '../helpers/scriptedServer.js';
import { startSim } from '../helpers/sim.js';

describe('prompt salt against a caching server (the README before/after workflow)', () => {
  let sim: SimulatorProcess;
  const root = tempDir('ig-salt-');
  before(async () => {
    // vLLM V1 (the default personality) caches prefixes.
    sim = await startSim({ model: 'llama-3-8b', gpu: 'h100' });
  });
  after(() => sim.stop());

  const run = async (name: string, salt?: number) => {
    const out = join(root, name);
    const plan = parseRunPlan({
      url: sim.url,
      concurrency: 4,
      requests: 24,
      inputTokens: 128,
      outputTokens: 4,
      ignoreEos: true,
      workers: 0,
      out,
      ...(salt !== undefined ? { promptSalt: salt } : {}),
    });
    const result = await benchmark(plan, { onNotice: () => {} });
    assert.equal(result.code, 0);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    return { out, hitRate: summary.serverMetrics?.prefixCache?.hitRate as number, manifest };
  };
  const compare = async (a: string, b: string) => {
    const report = compareTargets(
      [await readCompareTarget(a), await readCompareTarget(b)],
      { confidence: 0.95, resamples: 200, seed: 42, minEffect: 0.01, force: false },
      undefined,
    );
    const pair = report.candidates[0].pairs[0];
    // A loaded test machine may limit the client (its event loop late): a true reason, but
    // not this test's; compare-unlike.test.ts holds it.
    const codes = pair.unlike.map((u) => u.code).filter((c) => c !== 'client_limited_run');
    return { codes, text: renderTerminal(report, false) };
  };

  test('fresh salts: the second run reads nothing from the cache, and compare names no reason', async () => {
    const first = await run('before');
    const second = await run('after');
    const salts = [first.manifest.plan.promptSalt, second.manifest.plan.promptSalt];
    assert.ok(
      salts.every((s) => Number.isInteger(s) && s > 0),
      `salts ${salts}`,
    );
    assert.notEqual(salts[0], salts[1]);
    assert.equal(first.manifest.workload.promptSalt, salts[0], "the run's point keeps its salt");
    assert.ok(second.hitRate < 0.05, `hit rate ${second.hitRate} after a run with other prompts`);
    const { codes, text } = await compare(first.out, second.out);
    assert.deepEqual(codes, []);
    assert.doesNotMatch(text, /prefix-cache|identical prompts/);
  });

  test('the same --prompt-salt twice: the cache serves the second run, and compare says so', async () => {
    const first = await run('same-a', 4242);
    const second = await run('same-b', 4242);
    assert.equal(second.manifest.plan.promptSalt, 4242);
    assert.ok(first.hitRate < 0.05, `first hit rate ${first.hitRate}`);
    assert.ok(second.hitRate > 0.8, `second hit rate ${second.hitRate}: the same prompts again`);
    const { codes, text } = await compare(first.out, second.out);
    assert.deepEqual(codes, ['prefix_cache_differs', 'identical_prompts']);
    assert.match(text, /Verdicts: .*; not like for like: prefix-cache hit rate A \d+ %, B \d+ %/);
  });
});

test('a sweep sends every level prompts of its own (the issue saw the same first prompts at each)', async () => {
  const server = await startScriptedServer(() => ({
    steps: [{ write: chatEvent({ content: 'x' }) }, { write: usageEvent(32, 1) }, { write: DONE }],
  }));
  try {
    const { settings, prepared, problems } = prepareSweep({
      url: server.url,
      model: 'm',
      levels: '1,2,4',
      requests: '8',
      inputTokens: '32',
      outputTokens: '1',
      serverMetrics: false,
      workers: '0',
      out: join(tempDir('ig-salt-sweep-'), 'sweep'),
    });
    assert.deepEqual(problems, []);
    await runSweep(prepared as PreparedRun & { plan: RunPlan }, settings, {
      stop: new AbortController().signal,
      say: () => {},
      html: false,
    });
    const firstWords = (body: Record<string, unknown>) => {
      const messages = body.messages as { content: string }[] | undefined;
      const text = messages ? messages[messages.length - 1].content : String(body.prompt);
      return text.split(' ').slice(0, 6).join(' ');
    };
    const sent = server.requests.filter((r) => r.path.endsWith('/completions'));
    // 3 levels of 8 requests with their warm-ups, and the one that measures the prompt overhead.
    assert.ok(sent.length >= 25, `${sent.length} requests`);
    const starts = new Set(sent.map((r) => firstWords(r.body)));
    assert.equal(starts.size, sent.length, 'no two requests of the sweep start alike');
  } finally {
    await server.close();
  }
});
