/**
 * The server's engine and version, asked of loopback servers that answer each engine's own
 * endpoint in its real shape (the sources are cited in src/telemetry/environment.ts), and of
 * the built-in simulator. Hostile answers (huge, control characters, wrong types, not JSON, too
 * slow) record nothing or a capped string, and never throw.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { describe, test } from 'node:test';
import { askServerEngine, environmentFields } from '../../../src/session/serverEngine.js';
import { startSimulator } from '../../../src/sim/simulator.js';
import { MAX_FACT_CHARS, MAX_FACT_KEYS } from '../../../src/telemetry/environment.js';
import { VERSION } from '../../../src/version.js';
import { listenOnLoopback } from '../../helpers/scriptedServer.js';

/** An answer: a JSON value, or raw text; optionally after a delay. */
type Answer = { json?: unknown; text?: string; delayMs?: number; status?: number };

/** A server answering `routes` (every other path 404), recording each request's headers. */
async function engineServer(routes: Record<string, Answer>) {
  const seen: { path: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    seen.push({ path, headers: req.headers });
    const answer = Object.hasOwn(routes, path) ? routes[path] : undefined;
    const reply = () => {
      if (!answer) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
        return;
      }
      const body = answer.text ?? JSON.stringify(answer.json);
      res.writeHead(answer.status ?? 200, { 'content-type': 'application/json' }).end(body);
    };
    if (answer?.delayMs) setTimeout(reply, answer.delayMs);
    else reply();
  });
  const loopback = await listenOnLoopback(server);
  return { ...loopback, seen };
}

async function ask(routes: Record<string, Answer>, models?: unknown, timeoutMs?: number) {
  const server = await engineServer(routes);
  try {
    return await askServerEngine(server.url, {
      headers: {},
      ...(models !== undefined ? { models } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    });
  } finally {
    await server.close();
  }
}

const modelsOwnedBy = (owner: string) => ({
  object: 'list',
  data: [{ id: 'm', object: 'model', created: 0, owned_by: owner }],
});

describe('each engine, by its own endpoint', () => {
  test('vLLM: GET /version, named by the model list', async () => {
    assert.deepEqual(
      await ask({ '/version': { json: { version: '0.8.5' } } }, modelsOwnedBy('vllm')),
      {
        engine: 'vllm',
        engineVersion: '0.8.5',
      },
    );
  });

  test('trtllm-serve: the same /version shape, named by owned_by tensorrt_llm', async () => {
    const env = await ask(
      { '/version': { json: { version: '0.19.0' } } },
      modelsOwnedBy('tensorrt_llm'),
    );
    assert.deepEqual(env, { engine: 'trtllm', engineVersion: '0.19.0' });
  });

  test('SGLang: GET /get_server_info, its arguments filtered, never its api_key', async () => {
    const env = await ask({
      '/get_server_info': {
        json: {
          model_path: 'meta-llama/Llama-3.1-8B-Instruct',
          tp_size: 2,
          dp_size: 1,
          api_key: 'sk-should-never-be-kept',
          mem_fraction_static: 0.88,
          internal_states: [{ avg_spec_accept_length: 1 }],
          version: '0.4.6.post4',
        },
      },
      // A /version that another router in front might answer: SGLang's own shape wins.
      '/version': { json: { version: '9.9.9' } },
    });
    assert.equal(env.engine, 'sglang');
    assert.equal(env.engineVersion, '0.4.6.post4');
    assert.deepEqual(env.buildInfo, { tp_size: '2', dp_size: '1', mem_fraction_static: '0.88' });
    assert.doesNotMatch(JSON.stringify(env), /should-never/);
  });

  test('SGLang, newer: GET /server_info', async () => {
    const env = await ask({ '/server_info': { json: { model_path: 'x', version: '0.5.0' } } });
    assert.deepEqual(env, { engine: 'sglang', engineVersion: '0.5.0' });
  });

  test('TGI: GET /info', async () => {
    const env = await ask({
      '/info': {
        json: {
          model_id: 'meta-llama/Llama-3.1-8B-Instruct',
          model_sha: '0e9e39f',
          model_dtype: 'torch.float16',
          model_device_type: 'cuda',
          model_pipeline_tag: 'text-generation',
          max_concurrent_requests: 128,
          max_input_tokens: 4095,
          max_total_tokens: 4096,
          version: '3.2.3',
          sha: 'a094729386b5689aabfba40b7fdb207142dec8d5',
          docker_label: 'sha-a094729',
        },
      },
    });
    assert.equal(env.engine, 'tgi');
    assert.equal(env.engineVersion, '3.2.3');
    assert.equal(env.buildInfo?.docker_label, 'sha-a094729');
    assert.equal(env.buildInfo?.model_dtype, 'torch.float16');
    assert.equal(env.buildInfo?.max_total_tokens, '4096');
  });

  test('llama.cpp: GET /props build_info', async () => {
    const env = await ask({
      '/props': {
        json: {
          default_generation_settings: { n_ctx: 4096, params: {} },
          total_slots: 4,
          model_path: '/models/llama.gguf',
          chat_template: '{{ messages }}',
          build_info: 'b5120-2a0ab4e',
        },
      },
    });
    assert.deepEqual(env, {
      engine: 'llamacpp',
      engineVersion: 'b5120-2a0ab4e',
      buildInfo: { total_slots: '4', n_ctx: '4096' },
    });
  });

  test('Ollama: GET /api/version', async () => {
    assert.deepEqual(await ask({ '/api/version': { json: { version: '0.5.7' } } }), {
      engine: 'ollama',
      engineVersion: '0.5.7',
    });
  });

  test('Triton: GET /v2 server metadata', async () => {
    const env = await ask({
      '/v2': { json: { name: 'triton', version: '2.50.0', extensions: ['classification'] } },
    });
    assert.deepEqual(env, { engine: 'triton', engineVersion: '2.50.0' });
  });

  test('a server that answers none of them: nothing recorded', async () => {
    assert.deepEqual(await ask({}), {});
    // Only the model list: the engine, without a version.
    assert.deepEqual(await ask({}, modelsOwnedBy('vllm')), { engine: 'vllm' });
    // An unknown owner names nothing.
    assert.deepEqual(await ask({}, modelsOwnedBy('openai')), {});
  });

  test('the built-in simulator answers /version with its own name and the tool version', async () => {
    const sim = await startSimulator();
    try {
      const env = await askServerEngine(sim.url, { headers: {} });
      assert.deepEqual(env, { engine: 'infergauge-sim', engineVersion: VERSION });
    } finally {
      await sim.stop();
    }
  });

  test('asked with the run headers and API key, as discovery is', async () => {
    const server = await engineServer({ '/version': { json: { version: '1' } } });
    try {
      await askServerEngine(server.url, {
        headers: { 'x-tenant': 'a' },
        apiKey: 'sk-test-key-123',
      });
      const version = server.seen.find((s) => s.path === '/version');
      assert.equal(version?.headers.authorization, 'Bearer sk-test-key-123');
      assert.equal(version?.headers['x-tenant'], 'a');
    } finally {
      await server.close();
    }
  });
});

describe('hostile answers record nothing or a capped string, and never throw', () => {
  test('a huge version is capped; control characters are stripped', async () => {
    const env = await ask({ '/version': { json: { version: `0.9.0${'9'.repeat(100_000)}` } } });
    assert.equal(env.engineVersion?.length, MAX_FACT_CHARS);
    assert.ok(env.engineVersion?.endsWith('...'));
    const escaped = await ask({ '/version': { json: { version: '\u001b[2J0.9\r\n\u0007.1' } } });
    assert.equal(escaped.engineVersion, '[2J0.9   .1');
  });

  test('wrong types, not JSON, an error status: nothing', async () => {
    for (const answer of [
      { json: { version: { major: 1 } } },
      { json: { version: null } },
      { json: ['0.8.5'] },
      { json: '0.8.5' },
      { text: '<html>not found</html>' },
      { text: '{"version": "0.8' },
      { json: { version: '0.8.5' }, status: 500 },
      { json: { version: '   ' } },
    ]) {
      assert.deepEqual(await ask({ '/version': answer }), {}, JSON.stringify(answer));
    }
  });

  test('an answer over 1 MiB is not read', async () => {
    const env = await ask({
      '/version': { text: `{"version":"1","pad":"${'x'.repeat(2 ** 21)}"}` },
    });
    assert.deepEqual(env, {});
  });

  test('a server slower than the timeout: nothing, and the ask ends at the timeout', async () => {
    const started = Date.now();
    const env = await ask(
      { '/version': { json: { version: '1' }, delayMs: 2_000 } },
      undefined,
      100,
    );
    assert.deepEqual(env, {});
    assert.ok(Date.now() - started < 1_500, `took ${Date.now() - started} ms`);
  });

  test('many build facts: at most MAX_FACT_KEYS, each capped; secret-named keys dropped', async () => {
    const json: Record<string, unknown> = { model_id: 'm', version: '1', sha: 'x'.repeat(500) };
    const env = await ask({ '/info': { json } });
    assert.equal(env.buildInfo?.sha?.length, MAX_FACT_CHARS);
    assert.ok(Object.keys(env.buildInfo ?? {}).length <= MAX_FACT_KEYS);
  });

  test('a server echoing the API key in its version gets it masked', async () => {
    const server = await engineServer({
      '/version': { json: { version: 'built with key sk-live-secret-value-42' } },
    });
    try {
      const env = await askServerEngine(server.url, {
        headers: {},
        apiKey: 'sk-live-secret-value-42',
      });
      assert.equal(env.engineVersion, 'built with key <redacted>');
    } finally {
      await server.close();
    }
  });

  test('nothing listening: nothing, no throw', async () => {
    const server = await engineServer({});
    const { url } = server;
    await server.close();
    assert.deepEqual(await askServerEngine(url, { headers: {} }), {});
  });
});

describe('environmentFields', () => {
  test('--server-info gpu= fills in the GPUs where nothing measured them', () => {
    assert.deepEqual(environmentFields({ engine: 'vllm' }, { gpu: 'H100x8', tp: '8' }), {
      engine: 'vllm',
      gpu: { type: 'H100', count: 8, source: 'server-info' },
      info: { gpu: 'H100x8', tp: '8' },
    });
    const measured = { type: 'NVIDIA H100 80GB HBM3', count: 2, source: 'dcgm' as const };
    assert.deepEqual(environmentFields({ gpu: measured }, { gpu: 'A100x1' }).gpu, measured);
    assert.deepEqual(environmentFields({}, undefined), {});
  });
});
