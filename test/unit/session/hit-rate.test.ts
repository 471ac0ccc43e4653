/**
 * `--prefix-hit-rate R`: shared prefixes of round(R x input / block) blocks, primed before the
 * clock, reach R over the measured phase on an engine that caches blocks: the simulator over
 * HTTP (its /metrics counters) and in virtual time (its own counters), within 3 points.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  cacheStatePhrase,
  readCacheState,
  readPrefixHitRate,
} from '../../../src/analysis/prefixCache.js';
import { benchmark, parseRunPlan } from '../../../src/index.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';
import { hitRateSetup, judgeHitRate, primeServer } from '../../../src/session/hitRatePrime.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { runPlan } from '../../../src/session/run.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import {
  engineBlockTokens,
  HIT_RATE_PREFIXES,
  hitRateOutcome,
  hitRatePlan,
  PRIME_FIRST_ID,
} from '../../../src/workload/hitRate.js';
import { createPromptFactory } from '../../../src/workload/prompts.js';
import { findScenario, type Scenario } from '../../../src/workload/scenarios.js';
import { createTokenizer } from '../../../src/workload/tokenizer.js';
import { target } from '../../helpers/run.js';

interface Saved {
  cacheState?: unknown;
  prefixHitRate?: { target: number; achieved?: number; from?: string };
  serverMetrics?: { prefixCache?: { hitRate: number; from: string } };
  warnings: { code: string; message: string }[];
  requests: { completed: number };
}

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'ig-hit-rate-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const read = (out: string, file: string) => JSON.parse(readFileSync(join(out, file), 'utf8'));

describe('hitRatePlan', () => {
  test('the prefix is the rate of the prompt in whole blocks of the engine', () => {
    const p = hitRatePlan({ rate: 0.5, inputTokens: 1000, blockTokens: 16, overheadTokens: 0 });
    assert.ok(!('problem' in p));
    assert.equal(p.prefixTokens, 496);
    assert.equal(p.prefixes, HIT_RATE_PREFIXES);
    const sglang = hitRatePlan({ rate: 0.5, inputTokens: 1000, blockTokens: 1, overheadTokens: 0 });
    assert.equal((sglang as { prefixTokens: number }).prefixTokens, 500);
    assert.equal(engineBlockTokens('vllm'), 16);
    assert.equal(engineBlockTokens('sglang'), 1);
    // TensorRT-LLM's 32 (PyTorch) or 64 (trtllm-build), and an engine not known: 64 fits both.
    assert.equal(engineBlockTokens('trtllm'), 64);
    assert.equal(engineBlockTokens(undefined), 64);
  });

  test('a rate the prompt cannot hold (its own text, the template) is refused with the most it can', () => {
    const p = hitRatePlan({ rate: 1, inputTokens: 256, blockTokens: 16, overheadTokens: 8 });
    assert.ok('problem' in p);
    assert.match(p.problem, /holds at most 240 tokens of shared prefix in blocks of 16, 93\.8%/);
  });

  test('a miss is more than 3 points off; nothing measured is no miss', () => {
    assert.equal(hitRateOutcome(0.5, { hitRate: 0.52, from: 'x' }).missed, false);
    assert.equal(hitRateOutcome(0.5, { hitRate: 0.46, from: 'x' }).missed, true);
    assert.deepEqual(hitRateOutcome(0.5, undefined), { target: 0.5, missed: false });
  });
});

test('prompt id k mod 8 starts with prefix k; prefix 0 is the one shared prefix of before', async () => {
  const tokenizer = await createTokenizer('words', { builtInSimulator: true });
  const one = await createPromptFactory(tokenizer, { seed: 5, sharedPrefixTokens: 32 });
  const eight = await createPromptFactory(tokenizer, {
    seed: 5,
    sharedPrefixTokens: 32,
    sharedPrefixes: 8,
  });
  const head = (text: string) => text.split(' ').slice(0, 32).join(' ');
  assert.equal(head(eight.make(0, 40)), head(one.make(0, 40)));
  assert.equal(head(eight.make(3, 40)), head(eight.make(11, 40)));
  assert.equal(head(eight.make(3, 40)), head(eight.make(PRIME_FIRST_ID + 3, 40)));
  assert.notEqual(head(eight.make(3, 40)), head(eight.make(4, 40)));
  // Text of its own after the prefix.
  assert.notEqual(eight.make(3, 40), eight.make(11, 40));
});

describe('--prefix-hit-rate against the simulator over HTTP', () => {
  let sim: RunningSimulator;
  before(async () => {
    sim = await startSimulator({ model: 'llama-3.1-8b', gpu: 'h100', timeScale: 0.02 });
  });
  after(() => sim.stop());

  test('0.5 lands within 3 points, measured over the measured phase; the manifest says primed', async () => {
    const out = join(dir, 'http');
    await benchmark(
      parseRunPlan({
        url: sim.url,
        inputTokens: '1000',
        outputTokens: '2',
        requests: 48,
        concurrency: 4,
        prefixHitRate: 0.5,
        resetCache: true,
        out,
      }),
      {},
    );
    const summary = read(out, 'summary.json') as Saved;
    const hit = summary.serverMetrics?.prefixCache?.hitRate ?? Number.NaN;
    assert.ok(Math.abs(hit - 0.5) <= 0.03, `hit rate ${hit}`);
    assert.match(summary.serverMetrics?.prefixCache?.from ?? '', /vllm:prefix_cache_hits_total/);
    assert.deepEqual(summary.prefixHitRate, {
      target: 0.5,
      achieved: hit,
      from: summary.serverMetrics?.prefixCache?.from,
    });
    assert.deepEqual(summary.cacheState, { primed: 0.5 });
    assert.deepEqual(read(out, 'manifest.json').cacheState, { primed: 0.5 });
    const codes = summary.warnings.map((w) => w.code);
    assert.ok(!codes.includes('prefix_hit_rate_missed'), codes.join());
    const line = renderTerminalSummary(summary as unknown as RunSummary, { color: false })
      .split('\n')
      .find((l) => l.startsWith('Prefix cache at the start:'));
    assert.match(
      line ?? '',
      /^Prefix cache at the start: primed for 50% hits; \d+\.?\d*% hit over the measured phase$/,
    );
    assert.ok(!codes.includes('prefix_cache_uncontrolled'), codes.join());
  });
});

// The built-in simulator says only `infergauge-sim`: its prefixes are rounded to its own
// personality's blocks (TensorRT-LLM's 64), not vLLM's 16, which would cache 256 of 304 tokens.
test("the built-in simulator over HTTP: prefixes in its personality's own blocks", async () => {
  const out = join(dir, 'trtllm-http');
  const prepared = prepareRun({
    enginePersonality: 'trtllm',
    enablePrefixCaching: true,
    timeScale: '0.02',
    inputTokens: '1024',
    outputTokens: '2',
    requests: '24',
    concurrency: '4',
    prefixHitRate: '0.3',
    out,
  });
  assert.deepEqual(prepared.problems, []);
  await runPlan(prepared as never, { html: false });
  const summary = read(out, 'summary.json') as Saved;
  const hit = summary.prefixHitRate?.achieved ?? Number.NaN;
  assert.ok(Math.abs(hit - 0.3) <= 0.03, `hit rate ${hit}`);
});

describe('--prefix-hit-rate in virtual time', () => {
  async function virtual(name: string, o: Record<string, unknown>) {
    const out = join(dir, name);
    const prepared = prepareRun({
      simulate: true,
      inputTokens: '1000',
      outputTokens: '2',
      requests: '200',
      concurrency: '16',
      prefixHitRate: '0.5',
      out,
      ...o,
    });
    assert.deepEqual(prepared.problems, []);
    await runPlan(prepared as never, { html: false });
    return read(out, 'summary.json') as Saved;
  }

  test("0.5 lands within 3 points by the engine's own counters", async () => {
    const summary = await virtual('virtual', {});
    const hit = summary.prefixHitRate?.achieved ?? Number.NaN;
    assert.ok(Math.abs(hit - 0.5) <= 0.03, `hit rate ${hit}`);
    assert.equal(summary.prefixHitRate?.from, "the simulated engine's prefix-cache counters");
    assert.deepEqual(summary.cacheState, { primed: 0.5 });
    assert.ok(!summary.warnings.some((w) => w.code === 'prefix_hit_rate_missed'));
  });

  // Eight prefixes over four slots: a request finds its prefix in the host-memory prompt cache,
  // where the prime left the prompts that its later primes took the slots from (as over HTTP).
  test("llama.cpp's slots and host-memory cache are primed as the HTTP prime leaves them", async () => {
    const summary = await virtual('llamacpp', {
      enginePersonality: 'llamacpp',
      inputTokens: '256',
      outputTokens: '8',
      concurrency: '4',
      requests: '100',
    });
    const hit = summary.prefixHitRate?.achieved ?? Number.NaN;
    assert.ok(Math.abs(hit - 0.5) <= 0.03, `hit rate ${hit}`);
  });

  test('an engine without prefix caching misses, and says so', async () => {
    const summary = await virtual('uncached', { enablePrefixCaching: false });
    const w = summary.warnings.find((x) => x.code === 'prefix_hit_rate_missed');
    assert.ok(w, summary.warnings.map((x) => x.code).join());
    assert.match(w.message, /hit 0\.0% of prompt tokens .* not the 50\.0% asked/);
  });
});

// A server that takes the prime's requests and never answers: the second Ctrl-C must end the
// prime then, not --timeout later.
test('a cancelled prime aborts its requests and ends the point as interrupted', async () => {
  const server = createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const scenario = {
      ...(findScenario('chat') as Scenario),
      input: { kind: 'fixed', value: 64 },
    } as const;
    const setup = hitRateSetup(0.5, scenario, { blockTokens: 16, overheadTokens: 0 });
    const workload = {
      nextRequest: () => ({ prompt: 'x', requestedInputTokens: 64, requestedOutputTokens: 1 }),
    };
    const started = Date.now();
    await assert.rejects(
      primeServer(
        { config: target(url, { timeoutMs: 600_000 }), plan: { seed: 1 } } as never,
        setup,
        workload,
        AbortSignal.timeout(50),
      ),
      (err: Error & { exitCode?: number }) =>
        err.exitCode === 130 && /cancelled during the prime phase/.test(err.message),
    );
    assert.ok(Date.now() - started < 30_000, 'ended long before the request timeout');
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test("the built-in simulator over HTTP rounds the prefixes to its personality's block (TensorRT-LLM's 64), which its engine name does not tell", async () => {
  const out = join(dir, 'trtllm-live');
  const prepared = prepareRun({
    enginePersonality: 'trtllm',
    enablePrefixCaching: true,
    timeScale: '0.02',
    inputTokens: '1000',
    outputTokens: '2',
    requests: '24',
    concurrency: '4',
    prefixHitRate: '0.3',
    out,
  } as never);
  assert.deepEqual(prepared.problems, []);
  await runPlan(prepared as never, { html: false });
  const summary = read(out, 'summary.json') as Saved;
  // round(300 / 64) x 64 = 320 tokens of 1000 shared, all of it in whole blocks (16-token
  // rounding asked for 304, of which the engine's 64-token blocks cached 256: 25.6 %).
  const hit = summary.prefixHitRate?.achieved ?? Number.NaN;
  assert.ok(Math.abs(hit - 0.32) <= 0.005, `hit rate ${hit}`);
  assert.ok(!summary.warnings.some((w) => w.code === 'prefix_hit_rate_missed'));
});

test('the plan refuses what shapes prompts otherwise, and drawn lengths', () => {
  assert.throws(
    () => parseRunPlan({ prefixHitRate: 0.5, sharedPrefix: 64 }),
    /--prefix-hit-rate cannot be combined with --shared-prefix/,
  );
  assert.throws(
    () => parseRunPlan({ prefixHitRate: 0.5, inputTokens: 'uniform:100:200' }),
    /--prefix-hit-rate needs one prompt length/,
  );
  assert.throws(() => parseRunPlan({ prefixHitRate: 1.5 }), /--prefix-hit-rate/);
});

test('saved cache states and hit rates are read back as what they can be, or not at all', () => {
  assert.equal(readCacheState('flushed'), 'flushed');
  assert.deepEqual(readCacheState({ primed: 0.25 }), { primed: 0.25 });
  assert.equal(readCacheState('\u001b[2Jflushed'), undefined);
  assert.equal(readCacheState({ primed: 7 }), undefined);
  assert.deepEqual(readPrefixHitRate({ target: 0.5, achieved: 'x', from: 3 }), { target: 0.5 });
  assert.equal(readPrefixHitRate({ achieved: 0.5 }), undefined);
  assert.equal(cacheStatePhrase('uncontrolled'), 'uncontrolled');
  assert.equal(
    cacheStatePhrase({ primed: 0.5 }, { achieved: 0.4963 }),
    'primed for 50% hits; 49.6% hit over the measured phase',
  );
});

test('llama-server: the rate is what its prompt-tokens-processed counter skipped, without warm-up', () => {
  const setup = hitRateSetup(
    0.5,
    { name: 'x', input: { kind: 'fixed', value: 1000 }, output: { kind: 'fixed', value: 2 } },
    { blockTokens: 1, overheadTokens: 0 },
  );
  assert.equal(setup.scenario.sharedPrefixTokens, 500);
  const judged = (warmup: number, processed: number) => {
    const summary = {
      warnings: [],
      tokens: { input: 40_000 },
      requests: { warmup },
    } as unknown as RunSummary;
    judgeHitRate(
      setup,
      { counters: { 'llamacpp:prompt_tokens_total': { delta: processed, perS: 0 } } },
      summary,
    );
    return summary;
  };
  const slots = judged(0, 30_000);
  assert.equal(slots.prefixHitRate?.achieved, 0.25);
  assert.match(slots.prefixHitRate?.from ?? '', /llamacpp:prompt_tokens_total/);
  // Fewer slots than prefixes: a miss, said with the target.
  assert.deepEqual(
    slots.warnings.map((w) => w.code),
    ['prefix_hit_rate_missed'],
  );
  const notes: string[] = [];
  const withWarmup = judged(8, 20_000);
  assert.equal(withWarmup.prefixHitRate?.achieved, undefined);
  judgeHitRate(setup, undefined, withWarmup, (n) => notes.push(n));
  assert.match(notes[0] ?? '', /the rate reached is not measured/);
});
