import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BACKEND_NAMES, BACKENDS } from '../../../src/backends/index.js';
import { createTextDeltas } from '../../../src/backends/triton.js';
import type { Backend, BackendOptions, RequestSpec } from '../../../src/backends/types.js';
import type { TargetConfig } from '../../../src/loadgen/http.js';
import { requestMetrics } from '../../../src/metrics/requestMetrics.js';
import type { RequestRecord } from '../../../src/record.js';
import { runAgainst } from '../../helpers/run.js';
import {
  type ScriptedReply,
  type ScriptedRequest,
  startScriptedServer,
} from '../../helpers/scriptedServer.js';
import {
  llamaError,
  llamaFinal,
  llamaPartial,
  llamaProgress,
  type OllamaTotals,
  ollamaChat,
  ollamaDone,
  ollamaError,
  ollamaGenerate,
  paced,
  SSE_DONE,
  sglangMessage,
  tgiError,
  tgiToken,
  tritonError,
  tritonText,
} from '../../helpers/wireFixtures.js';

const JSON_TYPE = 'application/json';
const NDJSON_TYPE = 'application/x-ndjson';

/** Runs the real engine against a fixture server; `reply` answers the n-th request. */
async function run(
  backend: Backend,
  reply: (request: ScriptedRequest) => ScriptedReply,
  options: { requests?: number; target?: Partial<TargetConfig> } = {},
): Promise<{ records: RequestRecord[]; requests: ScriptedRequest[] }> {
  const server = await startScriptedServer(reply);
  try {
    const { records } = await runAgainst(server.url, {
      target: { backend, ...options.target },
      requests: options.requests ?? 1,
    });
    return { records, requests: server.requests };
  } finally {
    await server.close();
  }
}

const ttft = (r: RequestRecord) => requestMetrics(r).ttftMs as number;
const e2e = (r: RequestRecord) => requestMetrics(r).e2eMs;

function assertOk(r: RequestRecord): void {
  assert.equal(r.error, undefined, `unexpected error: ${JSON.stringify(r.error)}`);
}

describe('llamacpp: POST /completion', () => {
  test('tokens, TTFT past the progress prelude, endAt at stop:true, timings', async () => {
    const { records, requests } = await run(BACKENDS.llamacpp, () => ({
      steps: [
        { write: llamaProgress(16) },
        { wait: 60 },
        ...paced(
          [
            llamaPartial(' Hello', [22557], 1),
            llamaPartial(' world', [1917], 2),
            // Half of a two-token character: a token that prints nothing yet.
            llamaPartial('', [195], 3),
            llamaPartial('é', [169], 4),
          ],
          25,
        ),
        { wait: 30 },
        {
          write: llamaFinal({
            predicted: 4,
            evaluated: 16,
            stopType: 'limit',
            promptMs: 12.5,
            predictedMs: 80,
          }),
        },
        { wait: 400 },
      ],
    }));
    const r = records[0];
    assertOk(r);
    assert.deepEqual(r.events.tokens, [0, 1, 1, 1, 1, 0]);
    assert.deepEqual(r.events.contentChars, [0, 6, 6, 0, 1, 0]);
    assert.equal(r.outputTokens, 4);
    assert.equal(r.outputTokensSource, 'server');
    assert.equal(r.inputTokens, 16);
    assert.equal(r.inputTokensSource, 'server');
    assert.ok(ttft(r) >= 55, `TTFT ${ttft(r)} ms must wait for the first token, not the prelude`);
    const tail = r.endAt - (r.lastTokenAt as number);
    assert.ok(tail >= 25 && tail < 200, `endAt is the stop:true message (${tail} ms after)`);
    assert.equal(r.finishReason, 'length');
    assert.deepEqual(r.serverTiming, {
      prefillMs: 12.5,
      prefillTokens: 16,
      decodeMs: 80,
      decodeTokens: 4,
    });
    const sent = requests[0];
    assert.equal(sent.method, 'POST');
    assert.equal(sent.path, '/completion');
    assert.equal(typeof sent.body.prompt, 'string');
    assert.equal(sent.body.n_predict, 8);
    assert.equal(sent.body.temperature, 0);
    assert.equal(sent.body.stream, true);
    assert.equal('ignore_eos' in sent.body, false);
  });

  test('an error event and an HTTP error body become categorised errors', async () => {
    const { records, requests } = await run(
      BACKENDS.llamacpp,
      ({ index: i }) =>
        i === 0
          ? {
              steps: [
                { write: llamaPartial(' Hi', [13347], 1) },
                { wait: 20 },
                {
                  write: llamaError(
                    500,
                    'Failed to decode the batch, n_batch = 512',
                    'server_error',
                  ),
                },
              ],
            }
          : {
              status: 400,
              headers: { 'content-type': JSON_TYPE },
              steps: [
                {
                  write: JSON.stringify({
                    error: {
                      code: 400,
                      message: 'the request exceeds the available context size, try increasing it',
                      type: 'exceed_context_size_error',
                    },
                  }),
                },
              ],
            },
      { requests: 2, target: { ignoreEos: true } },
    );
    assert.equal(requests[0].body.ignore_eos, true);
    assert.equal(records[0].error?.kind, 'http_5xx');
    assert.equal(records[0].error?.status, 500);
    assert.match(records[0].error?.message ?? '', /Failed to decode the batch/);
    assert.equal(records[1].error?.kind, 'http_4xx');
    assert.equal(records[1].error?.status, 400);
    assert.match(records[1].error?.message ?? '', /^HTTP 400: the request exceeds/);
  });
});

describe('tgi: POST /generate_stream', () => {
  test('one token per event, special ones too; details give totals and prompt length', async () => {
    const { records, requests } = await run(BACKENDS.tgi, () => ({
      steps: [
        { wait: 50 },
        ...paced(
          [
            tgiToken(1, { id: 22557, text: 'Hello' }),
            tgiToken(2, { id: 1917, text: ' world' }),
            tgiToken(3, { id: 0, text: '!' }),
            tgiToken(
              4,
              { id: 2, text: '</s>', special: true },
              {
                generatedText: 'Hello world!',
                finishReason: 'eos_token',
                generatedTokens: 4,
                inputLength: 16,
              },
            ),
          ],
          25,
        ),
        { wait: 400 },
      ],
    }));
    const r = records[0];
    assertOk(r);
    assert.deepEqual(r.events.tokens, [1, 1, 1, 1]);
    assert.deepEqual(r.events.contentChars, [5, 6, 1, 0], 'a special token is no visible text');
    assert.equal(r.outputTokens, 4);
    assert.equal(r.outputTokensSource, 'server');
    assert.equal(r.tokenCountMismatch, undefined);
    assert.equal(r.inputTokens, 16);
    assert.equal(r.finishReason, 'stop');
    assert.ok(ttft(r) >= 45, `TTFT ${ttft(r)} ms`);
    assert.equal(r.endAt, r.lastTokenAt, 'the final token event ends the request');
    assert.ok(e2e(r) < 300, `e2e ${e2e(r)} ms: not the close 400 ms later`);
    const sent = requests[0];
    assert.equal(sent.path, '/generate_stream');
    assert.equal(typeof sent.body.inputs, 'string');
    assert.deepEqual(sent.body.parameters, { max_new_tokens: 8, do_sample: false, details: true });
  });

  test('sampling, an error event and a 422 validation body', async () => {
    const validation =
      'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 2100 `inputs` tokens and 8 `max_new_tokens`';
    const { records, requests } = await run(
      BACKENDS.tgi,
      ({ index: i }) => {
        if (i === 0) {
          return {
            steps: [
              { write: tgiToken(1, { id: 22557, text: 'Hello' }) },
              { wait: 20 },
              {
                write: tgiError(
                  'Request failed during generation: Server error: CUDA out of memory',
                  'generation',
                ),
              },
            ],
          };
        }
        if (i === 1) return { steps: [{ write: tgiError(validation, 'validation') }] };
        return {
          status: 422,
          headers: { 'content-type': JSON_TYPE },
          steps: [{ write: JSON.stringify({ error: validation, error_type: 'validation' }) }],
        };
      },
      { requests: 3, target: { temperature: 0.7 } },
    );
    assert.deepEqual(requests[0].body.parameters, {
      max_new_tokens: 8,
      do_sample: true,
      details: true,
      temperature: 0.7,
    });
    assert.equal(records[0].error?.kind, 'http_5xx');
    assert.match(records[0].error?.message ?? '', /CUDA out of memory/);
    assert.equal(records[1].error?.kind, 'http_4xx');
    assert.equal(records[1].error?.status, 422);
    assert.equal(records[2].error?.kind, 'http_4xx');
    assert.equal(records[2].error?.status, 422);
    assert.match(records[2].error?.message ?? '', /^HTTP 422: Input validation error/);
  });
});

describe('triton: POST /v2/models/{model}/generate_stream', () => {
  test('delta and cumulative text_output give the same timeline; errors', async () => {
    const deltas = ['Hello', ' world', '!', ''];
    const cumulative = ['Hello', 'Hello world', 'Hello world!', 'Hello world!'];
    const { records, requests } = await run(
      BACKENDS.triton,
      ({ index: i }) => {
        if (i === 0) return { steps: [{ wait: 50 }, ...paced(deltas.map(tritonText), 25)] };
        if (i === 1) return { steps: [{ wait: 50 }, ...paced(cumulative.map(tritonText), 25)] };
        if (i === 2) {
          return {
            steps: [
              { write: tritonText('Hello') },
              { wait: 20 },
              {
                write: tritonError(
                  'Executor failed process requestId 7 due to the following error',
                ),
              },
            ],
          };
        }
        return {
          status: 400,
          headers: { 'content-type': JSON_TYPE },
          steps: [
            {
              write: JSON.stringify({
                error: "Request for unknown model: 'ensemble' is not found",
              }),
            },
          ],
        };
      },
      { requests: 4, target: { model: 'ensemble' } },
    );
    for (const r of records.slice(0, 2)) {
      assertOk(r);
      assert.deepEqual(r.events.contentChars, [5, 6, 1, 0]);
      assert.deepEqual(r.events.tokens, [1, 1, 1, 0]);
      assert.equal(r.outputTokens, 3);
      assert.equal(r.outputTokensSource, 'events');
      assert.equal(r.inputTokensSource, 'requested');
      assert.ok(ttft(r) >= 45, `TTFT ${ttft(r)} ms`);
      assert.ok(r.endAt - (r.lastTokenAt as number) >= 20, 'ends when the response closes');
    }
    assert.equal(records[2].error?.kind, 'http_5xx');
    assert.match(records[2].error?.message ?? '', /Executor failed/);
    assert.equal(records[3].error?.kind, 'http_4xx');
    assert.match(records[3].error?.message ?? '', /^HTTP 400: Request for unknown model/);
    assert.equal(requests[0].path, '/v2/models/ensemble/generate_stream');
    assert.deepEqual(Object.keys(requests[0].body).sort(), ['max_tokens', 'stream', 'text_input']);
    assert.equal(requests[0].body.max_tokens, 8);
    assert.equal(requests[0].body.stream, true);
  });
});

const OLLAMA_TOTALS: OllamaTotals = {
  doneReason: 'stop',
  promptEvalCount: 16,
  evalCount: 3,
  totalNs: 150_000_000,
  loadNs: 2_500_000,
  promptEvalNs: 12_500_000,
  evalNs: 60_000_000,
};

describe('ollama: NDJSON /api/generate and /api/chat', () => {
  test('generate: lines split across reads, done line totals and nanosecond timings', async () => {
    const split = Buffer.from(ollamaGenerate(' wörld'), 'utf8');
    const cut = split.indexOf(Buffer.from('ö', 'utf8')) + 1;
    const { records, requests } = await run(BACKENDS.ollama, () => ({
      headers: { 'content-type': NDJSON_TYPE },
      steps: [
        { wait: 50 },
        { write: ollamaGenerate('Hello') },
        { wait: 25 },
        { write: split.subarray(0, cut) },
        { wait: 25 },
        { write: split.subarray(cut) },
        { wait: 25 },
        { write: ollamaGenerate('!') + ollamaDone('generate', OLLAMA_TOTALS).slice(0, 40) },
        { wait: 25 },
        { write: ollamaDone('generate', OLLAMA_TOTALS).slice(40) },
        { wait: 400 },
      ],
    }));
    const r = records[0];
    assertOk(r);
    assert.deepEqual(r.events.contentChars, [5, 6, 1, 0], 'the split character decodes whole');
    assert.deepEqual(r.events.tokens, [1, 1, 1, 0]);
    assert.ok(r.events.dtUs[1] >= 45_000, 'a line counts when its last byte arrives');
    assert.equal(r.outputTokens, 3);
    assert.equal(r.outputTokensSource, 'server');
    assert.equal(r.inputTokens, 16);
    assert.equal(r.finishReason, 'stop');
    assert.deepEqual(r.serverTiming, {
      prefillMs: 12.5,
      prefillTokens: 16,
      decodeMs: 60,
      decodeTokens: 3,
      loadMs: 2.5,
    });
    assert.ok(ttft(r) >= 45, `TTFT ${ttft(r)} ms`);
    assert.ok(e2e(r) < 350, `e2e ${e2e(r)} ms: ends at the done line, not at the close`);
    const sent = requests[0];
    assert.equal(sent.path, '/api/generate');
    assert.equal(sent.body.model, 'sim-llama-3-8b');
    assert.equal(typeof sent.body.prompt, 'string');
    assert.equal(sent.body.stream, true);
    assert.deepEqual(sent.body.options, { num_predict: 8, temperature: 0 });
  });

  test('chat: message.thinking is reasoning, message.content the answer', async () => {
    const { records, requests } = await run(
      BACKENDS.ollama,
      () => ({
        headers: { 'content-type': NDJSON_TYPE },
        steps: [
          { wait: 30 },
          { write: ollamaChat({ content: '', thinking: 'Okay' }) },
          { wait: 25 },
          { write: ollamaChat({ content: '', thinking: ', the user' }) },
          { wait: 60 },
          ...paced([ollamaChat({ content: 'Hi' }), ollamaChat({ content: '!' })], 25),
          { write: ollamaDone('chat', { ...OLLAMA_TOTALS, evalCount: 4, doneReason: 'length' }) },
        ],
      }),
      { target: { endpoint: 'chat' } },
    );
    const r = records[0];
    assertOk(r);
    assert.deepEqual(r.events.reasoningChars, [4, 10, 0, 0, 0]);
    assert.deepEqual(r.events.contentChars, [0, 0, 2, 1, 0]);
    assert.equal(r.outputTokens, 4);
    assert.equal(r.finishReason, 'length');
    const m = requestMetrics(r);
    assert.ok((m.ttfcMs as number) - (m.ttftMs as number) >= 75, 'TTFC waits for the answer');
    assert.equal(requests[0].path, '/api/chat');
    const messages = requests[0].body.messages as { role: string; content: string }[];
    assert.equal(messages.length, 1);
    assert.equal(messages[0].role, 'user');
    assert.ok(messages[0].content.length > 0);
  });

  test('an error line mid-stream and a 404 error body', async () => {
    const { records } = await run(
      BACKENDS.ollama,
      ({ index: i }) =>
        i === 0
          ? {
              headers: { 'content-type': NDJSON_TYPE },
              steps: [
                { write: ollamaGenerate('Hello') },
                { wait: 20 },
                {
                  write: ollamaError(
                    'an error was encountered while running the model: unexpected EOF',
                  ),
                },
              ],
            }
          : {
              status: 404,
              headers: { 'content-type': JSON_TYPE },
              steps: [{ write: JSON.stringify({ error: "model 'x' not found" }) }],
            },
      { requests: 2 },
    );
    assert.equal(records[0].error?.kind, 'http_5xx');
    assert.match(records[0].error?.message ?? '', /unexpected EOF/);
    assert.equal(records[1].error?.kind, 'http_4xx');
    assert.equal(records[1].error?.status, 404);
    assert.equal(records[1].error?.message, "HTTP 404: model 'x' not found");
  });
});

describe('sglang: POST /generate', () => {
  test('cumulative and incremental text give the same deltas; counts from meta_info', async () => {
    const length = { type: 'length', length: 5 };
    const cumulative = [
      sglangMessage('Hello', 1),
      sglangMessage('Hello world', 2),
      sglangMessage('Hello world, hi', 4),
      sglangMessage('Hello world, hi!', 5, length),
    ];
    const incremental = [
      sglangMessage('Hello', 1),
      sglangMessage(' world', 2),
      sglangMessage(', hi', 4),
      sglangMessage('!', 5, length),
    ];
    const { records, requests } = await run(
      BACKENDS.sglang,
      ({ index: i }) => ({
        steps: [
          { wait: 50 },
          ...paced(i === 0 ? cumulative : incremental, 25),
          { write: SSE_DONE },
          // Held open: the next request waits for this connection, so keep it short.
          { wait: 200 },
        ],
      }),
      { requests: 2, target: { ignoreEos: true } },
    );
    for (const r of records) {
      assertOk(r);
      assert.deepEqual(r.events.contentChars, [5, 6, 4, 1]);
      assert.deepEqual(r.events.tokens, [1, 1, 2, 1], 'per-event deltas of completion_tokens');
      assert.equal(r.outputTokens, 5);
      assert.equal(r.outputTokensSource, 'server');
      assert.equal(r.inputTokens, 16);
      assert.equal(r.finishReason, 'length');
      assert.ok(ttft(r) >= 45, `TTFT ${ttft(r)} ms`);
      assert.ok(e2e(r) < 180, `e2e ${e2e(r)} ms: ends at [DONE]`);
    }
    assert.equal(requests[0].path, '/generate');
    assert.equal(typeof requests[0].body.text, 'string');
    assert.equal(requests[0].body.stream, true);
    assert.deepEqual(requests[0].body.sampling_params, {
      max_new_tokens: 8,
      temperature: 0,
      ignore_eos: true,
    });
  });

  test('an error event and an aborted request', async () => {
    const { records } = await run(
      BACKENDS.sglang,
      ({ index: i }) => ({
        steps:
          i === 0
            ? [
                { write: sglangMessage('Hello', 1) },
                {
                  write: `data: ${JSON.stringify({
                    error: {
                      message:
                        "The input (5000 tokens) is longer than the model's context length (4096 tokens).",
                      type: 'invalid_request_error',
                      code: 400,
                    },
                  })}\n\n`,
                },
                { write: SSE_DONE },
              ]
            : [
                {
                  write: sglangMessage('', 0, {
                    type: 'abort',
                    message: 'Abort before prefill: the server is shutting down',
                    status_code: 503,
                    err_type: null,
                  }),
                },
                { write: SSE_DONE },
              ],
      }),
      { requests: 2 },
    );
    assert.equal(records[0].error?.kind, 'http_4xx');
    assert.equal(records[0].error?.status, 400);
    assert.match(records[0].error?.message ?? '', /longer than the model's context length/);
    assert.equal(records[1].error?.kind, 'http_5xx');
    assert.equal(records[1].error?.status, 503);
    assert.match(records[1].error?.message ?? '', /shutting down/);
  });
});

const SPEC: RequestSpec = {
  prompt: 'Tell me a story',
  requestedInputTokens: 4,
  requestedOutputTokens: 32,
};
const OPTIONS: BackendOptions = {
  endpoint: 'completions',
  model: 'm',
  temperature: 0,
  ignoreEos: false,
  continuousUsageStats: false,
};
const bodyOf = (backend: Backend, options: Partial<BackendOptions> = {}) =>
  JSON.parse(backend.request(SPEC, { ...OPTIONS, ...options }).body) as Record<string, unknown>;

describe('native backends: registry, requests and discovery', () => {
  test('registered after openai, with honest capabilities', () => {
    assert.deepEqual(BACKEND_NAMES, ['openai', 'llamacpp', 'tgi', 'triton', 'ollama', 'sglang']);
    for (const name of BACKEND_NAMES.slice(1)) {
      assert.equal(BACKENDS[name].name, name);
      assert.equal(BACKENDS[name].supports.continuousUsageStats, false);
    }
    assert.deepEqual(BACKENDS.ollama.supports.endpoints, ['chat', 'completions']);
    assert.equal(BACKENDS.triton.supports.modelRequired, true);
    assert.equal(BACKENDS.triton.models, undefined);
    assert.equal(BACKENDS.tgi.supports.ignoreEos, false);
    assert.equal(BACKENDS.ollama.supports.ignoreEos, false);
  });

  test('request bodies: sampling, ignore-eos and nested --extra-body', () => {
    assert.deepEqual(bodyOf(BACKENDS.triton, { ignoreEos: true, temperature: 0.8 }), {
      text_input: 'Tell me a story',
      max_tokens: 32,
      stream: true,
      temperature: 0.8,
      min_length: 32,
    });
    assert.equal(
      BACKENDS.triton.request(SPEC, { ...OPTIONS, model: 'my model' }).path,
      '/v2/models/my%20model/generate_stream',
    );
    assert.deepEqual(
      bodyOf(BACKENDS.ollama, { extraBody: { options: { num_ctx: 8192 }, keep_alive: -1 } })
        .options,
      {
        num_predict: 32,
        temperature: 0,
        num_ctx: 8192,
      },
    );
    assert.deepEqual(
      bodyOf(BACKENDS.tgi, { extraBody: { parameters: { top_k: 10 } } }).parameters,
      {
        max_new_tokens: 32,
        do_sample: false,
        details: true,
        top_k: 10,
      },
    );
    assert.deepEqual(
      bodyOf(BACKENDS.sglang, { extraBody: { sampling_params: { temperature: 0.5 } } })
        .sampling_params,
      { max_new_tokens: 32, temperature: 0.5 },
    );
    assert.equal(
      bodyOf(BACKENDS.llamacpp, { extraBody: { cache_prompt: false } }).cache_prompt,
      false,
    );
  });

  test('model discovery reads each server documented answer', () => {
    const first = (backend: Backend, body: unknown) => backend.models?.first(body);
    assert.equal(BACKENDS.tgi.models?.path, '/info');
    assert.equal(
      first(BACKENDS.tgi, {
        model_id: 'meta-llama/Llama-3.1-8B-Instruct',
        model_sha: '0e9e39f249a16976918f6564b8830bc894c89659',
        max_input_tokens: 4095,
        max_total_tokens: 4096,
        router: 'text-generation-router',
        version: '3.3.4',
      }),
      'meta-llama/Llama-3.1-8B-Instruct',
    );
    assert.equal(BACKENDS.ollama.models?.path, '/api/tags');
    assert.equal(
      first(BACKENDS.ollama, {
        models: [
          {
            name: 'llama3.2:latest',
            model: 'llama3.2:latest',
            modified_at: '2025-05-04T17:37:44.706015396-07:00',
            size: 2019393189,
            digest: 'a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72',
            details: { family: 'llama', parameter_size: '3.2B', quantization_level: 'Q4_K_M' },
          },
        ],
      }),
      'llama3.2:latest',
    );
    const list = { object: 'list', data: [{ id: 'qwen2.5-0.5b', object: 'model', owned_by: 'x' }] };
    assert.equal(first(BACKENDS.llamacpp, list), 'qwen2.5-0.5b');
    assert.equal(first(BACKENDS.sglang, list), 'qwen2.5-0.5b');
    assert.equal(first(BACKENDS.tgi, { error: 'HTTP 404' }), undefined);
  });

  test('text deltas: delta streams, cumulative streams, and a cumulative guess undone', () => {
    const feed = (texts: string[]) => {
      const delta = createTextDeltas();
      return texts.map((t) => delta(t));
    };
    assert.deepEqual(feed(['\n', '\n', 'Hi', ' there']), ['\n', '\n', 'Hi', ' there']);
    assert.deepEqual(feed(['Hi', 'Hi there', 'Hi there', 'Hi there!']), ['Hi', ' there', '', '!']);
    assert.deepEqual(feed([' the', ' theory', ' is']), [' the', 'ory', ' is']);
  });
});
