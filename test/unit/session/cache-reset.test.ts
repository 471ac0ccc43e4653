/**
 * `--reset-cache`: the engines' reset routes as the simulator serves them (a reset empties the
 * cache; a busy engine refuses as vLLM and SGLang refuse), the route chosen per engine, and a
 * server that cannot be reset refused before anything is sent.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXIT, InfergaugeError } from '../../../src/errors.js';
import { benchmark, parseRunPlan } from '../../../src/index.js';
import {
  CACHE_RESET_ERROR,
  cacheResetRoute,
  resetServerCache,
} from '../../../src/session/cacheReset.js';
import { prepareCapacity, runCapacity } from '../../../src/session/profiles/capacity.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import { fetchTruth } from '../../../src/sim/truth.js';

const PROMPT = Array.from({ length: 256 }, (_, i) => `w${i}`).join(' ');

async function complete(sim: RunningSimulator, maxTokens = 2, prompt = PROMPT): Promise<void> {
  const res = await fetch(`${sim.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: sim.model, prompt, max_tokens: maxTokens }),
  });
  await res.text();
}

async function lastCached(sim: RunningSimulator): Promise<number | undefined> {
  const truth = await fetchTruth(sim.url);
  return truth.at(-1)?.cachedPromptTokens;
}

/** The simulator's answer to a request still arriving: one started and left streaming. */
async function inFlight(sim: RunningSimulator): Promise<AbortController> {
  const abort = new AbortController();
  const res = await fetch(`${sim.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: sim.model, prompt: PROMPT, max_tokens: 8000, stream: true }),
    signal: abort.signal,
  });
  // Its first bytes: it holds its blocks now.
  await res.body?.getReader().read();
  return abort;
}

describe('the simulator serves the engines reset routes', () => {
  let sim: RunningSimulator;
  before(async () => {
    sim = await startSimulator({ model: 'llama-3.1-8b', gpu: 'h100', timeScale: 0.05 });
  });
  after(() => sim.stop());

  test('vLLM /reset_prefix_cache empties the cache: the same prompt hits before, not after', async () => {
    await complete(sim);
    await complete(sim);
    assert.ok(((await lastCached(sim)) ?? 0) >= 240, 'the repeat hits its blocks');
    const res = await fetch(`${sim.url}/reset_prefix_cache?reset_external=false`, {
      method: 'POST',
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { success: true });
    await complete(sim);
    assert.equal(await lastCached(sim), 0);
  });

  test('a reset while a request holds blocks is refused, by both routes, and changes nothing', async () => {
    await complete(sim);
    const abort = await inFlight(sim);
    try {
      const vllm = await fetch(`${sim.url}/reset_prefix_cache`, { method: 'POST' });
      assert.deepEqual(await vllm.json(), { success: false });
      const sglang = await fetch(`${sim.url}/flush_cache`, { method: 'POST' });
      assert.equal(sglang.status, 400);
      assert.match(await sglang.text(), /Failed to reset prefix cache because some blocks/);
    } finally {
      abort.abort();
    }
    await complete(sim);
    assert.ok(((await lastCached(sim)) ?? 0) >= 240, 'the refused reset kept the cache');
  });
});

describe('the SGLang personality flushes only when idle', () => {
  let sim: RunningSimulator;
  before(async () => {
    sim = await startSimulator({
      model: 'llama-3.1-8b',
      gpu: 'h100',
      enginePersonality: 'sglang',
      timeScale: 0.05,
    });
  });
  after(() => sim.stop());

  test('/flush_cache: 400 with a request running, 200 once idle', async () => {
    const abort = await inFlight(sim);
    try {
      const busy = await fetch(`${sim.url}/flush_cache`);
      assert.equal(busy.status, 400);
      assert.match(await busy.text(), /pending requests. #queue-req: 0, #running-req: 1/);
    } finally {
      abort.abort();
    }
    // The cancelled request leaves at the engine's next step.
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await fetch(`${sim.url}/flush_cache`, { method: 'POST' })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(status, 200);
  });
});

describe('cacheResetRoute', () => {
  test('vLLM and the simulator by /reset_prefix_cache, SGLang by /flush_cache', () => {
    assert.deepEqual(cacheResetRoute('vllm', 'openai'), {
      engine: 'vllm',
      method: 'POST',
      path: '/reset_prefix_cache',
    });
    assert.equal(
      (cacheResetRoute('infergauge-sim', 'openai') as { path: string }).path,
      '/reset_prefix_cache',
    );
    assert.equal((cacheResetRoute('sglang', 'openai') as { path: string }).path, '/flush_cache');
    // SGLang's native API names its engine where the server did not.
    assert.equal((cacheResetRoute(undefined, 'sglang') as { path: string }).path, '/flush_cache');
  });

  test('an engine without a reset route, or an unknown one, is a problem that says what to do', () => {
    const tgi = cacheResetRoute('tgi', 'openai') as { problem: string };
    assert.match(tgi.problem, /tgi has no route that empties its prefix cache.*restart the server/);
    const unknown = cacheResetRoute(undefined, 'openai') as { problem: string };
    assert.match(unknown.problem, /did not say which engine it is/);
  });
});

/** A vLLM-like server: its model list, and the reset route answered by `reset`. */
async function fakeVllm(reset: (res: ServerResponse) => void) {
  const seen: string[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ data: [{ id: 'm', owned_by: 'vllm' }] }));
      } else if (req.url?.startsWith('/reset_prefix_cache')) {
        reset(res);
      } else {
        res.writeHead(404);
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const VLLM = { engine: 'vllm', method: 'POST', path: '/reset_prefix_cache' } as const;

describe('a server that cannot be reset', () => {
  test('404 (vLLM without dev mode): the fix is VLLM_SERVER_DEV_MODE=1, exit 2', async () => {
    const fake = await fakeVllm((res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"detail":"Not Found"}');
    });
    try {
      await assert.rejects(resetServerCache(fake.url, VLLM, { headers: {} }), (err) => {
        assert.ok(err instanceof InfergaugeError);
        assert.equal(err.code, CACHE_RESET_ERROR);
        assert.equal(err.exitCode, EXIT.invalidOptions);
        assert.match(
          err.message,
          /answered 404 to POST \/reset_prefix_cache.*VLLM_SERVER_DEV_MODE=1/,
        );
        return true;
      });
    } finally {
      await fake.close();
    }
  });

  test('a refusal is tried again, then said with the engine rule and the fix', async () => {
    const fake = await fakeVllm((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"success":false}\u001b[2J');
    });
    try {
      await assert.rejects(
        resetServerCache(fake.url, VLLM, { headers: {}, tries: 3, retryMs: 1 }),
        /refused to empty its prefix cache 3 times \(\{"success":false\}\): vLLM resets only with no KV block in use/,
      );
      assert.equal(fake.seen.filter((s) => s.startsWith('POST /reset_prefix_cache')).length, 3);
    } finally {
      await fake.close();
    }
  });

  test('an older vLLM answering 200 with no body is taken as done', async () => {
    const fake = await fakeVllm((res) => {
      res.writeHead(200);
      res.end();
    });
    try {
      await resetServerCache(fake.url, VLLM, { headers: {} });
    } finally {
      await fake.close();
    }
  });

  test('a run with --reset-cache against it sends no request: the error comes first', async () => {
    const fake = await fakeVllm((res) => {
      res.writeHead(404);
      res.end();
    });
    try {
      const plan = parseRunPlan({ url: fake.url, requests: 4, resetCache: true });
      await assert.rejects(benchmark(plan, {}), /VLLM_SERVER_DEV_MODE=1/);
      assert.ok(
        !fake.seen.some((s) => s.includes('completions')),
        `nothing sent: ${fake.seen.join(', ')}`,
      );
    } finally {
      await fake.close();
    }
  });
});

describe('every manifest records the cache state it ran in', () => {
  let sim: RunningSimulator;
  let dir: string;
  before(async () => {
    sim = await startSimulator({ model: 'llama-3.1-8b', gpu: 'h100', timeScale: 0.02 });
    dir = mkdtempSync(join(tmpdir(), 'ig-cache-state-'));
  });
  after(async () => {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  function run(name: string, resetCache: boolean) {
    const out = join(dir, name);
    const plan = parseRunPlan({
      url: sim.url,
      inputTokens: '64',
      outputTokens: '2',
      sharedPrefix: 64,
      requests: 8,
      concurrency: 2,
      out,
      ...(resetCache ? { resetCache: true } : {}),
    });
    return benchmark(plan, {}).then(() => ({
      manifest: JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {
        cacheState?: unknown;
      },
      summary: JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as {
        cacheState?: unknown;
        validity: { reasons: { code: string }[] };
      },
    }));
  }

  test('flushed with --reset-cache (no prefix_cache_uncontrolled), uncontrolled without', async () => {
    const flushed = await run('flushed', true);
    assert.equal(flushed.manifest.cacheState, 'flushed');
    assert.equal(flushed.summary.cacheState, 'flushed');
    const codes = (r: typeof flushed) => r.summary.validity.reasons.map((x) => x.code);
    assert.ok(!codes(flushed).includes('prefix_cache_uncontrolled'), codes(flushed).join());
    const left = await run('uncontrolled', false);
    assert.equal(left.manifest.cacheState, 'uncontrolled');
    assert.ok(codes(left).includes('prefix_cache_uncontrolled'), codes(left).join());
  });
});

describe('capacity --reset-cache', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ig-capacity-reset-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const search = (url: string, out: string) => {
    const prepared = prepareCapacity(
      { url, batches: '1,2', inputTokens: '16', outputTokens: '2', resetCache: true },
      {},
    );
    assert.deepEqual(prepared.problems, []);
    return runCapacity(prepared.settings, { ...prepared.run, out }, new AbortController().signal);
  };

  test('every step starts flushed', async () => {
    const sim = await startSimulator({ model: 'llama-3.1-8b', gpu: 'h100', timeScale: 0.02 });
    try {
      const out = join(dir, 'search');
      await search(sim.url, out);
      for (const batch of ['batch-1', 'batch-2']) {
        const m = JSON.parse(readFileSync(join(out, batch, 'manifest.json'), 'utf8'));
        assert.equal(m.cacheState, 'flushed', batch);
      }
    } finally {
      await sim.stop();
    }
  });

  test('a server that cannot be reset is refused before the first step', async () => {
    const fake = await fakeVllm((res) => {
      res.writeHead(404);
      res.end();
    });
    try {
      await assert.rejects(search(fake.url, join(dir, 'refused')), /VLLM_SERVER_DEV_MODE=1/);
      assert.ok(!fake.seen.some((x) => x.includes('completions')), fake.seen.join(', '));
    } finally {
      await fake.close();
    }
  });
});
