import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BACKENDS } from '../../src/backends/index.js';
import type { Backend } from '../../src/backends/types.js';
import type { TargetConfig } from '../../src/loadgen/http.js';
import type { RequestRecord } from '../../src/record.js';
import { runAgainst, type TestRun } from '../helpers/run.js';
import {
  chatEvent,
  DONE,
  type ScriptedReply,
  startScriptedServer,
  textEvent,
} from '../helpers/scriptedServer.js';
import {
  llamaFinal,
  llamaPartial,
  ollamaDone,
  ollamaGenerate,
  SSE_DONE,
  sglangMessage,
  tgiToken,
  tritonText,
} from '../helpers/wireFixtures.js';

/**
 * Issue 15, cases 2, 4 and 5: servers whose streams end without their protocol's end marker or
 * are cut mid-event (`truncated`, tokens kept), and servers that send counts that cannot be true
 * (they fall back to what was observed, with a `countProblem` and an `implausible_usage` warning).
 * Each run must end by itself: before the fix, one of these counts looped forever.
 */

const NDJSON = { 'content-type': 'application/x-ndjson' };

/** Runs the real engine against a server that answers request `id` with `replies[id]`. */
async function runScripted(
  backend: Backend,
  replies: ScriptedReply[],
  target: Partial<TargetConfig> = {},
): Promise<TestRun> {
  const server = await startScriptedServer((r) => replies[r.id]);
  try {
    return await runAgainst(server.url, {
      target: { backend, ...target },
      load: { mode: 'closed', concurrency: replies.length },
      requests: replies.length,
      outputTokens: 8,
    });
  } finally {
    await server.close();
  }
}

const say = (content: string) => chatEvent({ content });
const sse = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
/** A usage-only chunk written as raw text, so `1e400` (Infinity) and `1e17` reach the parser. */
const rawUsage = (prompt: string, completion: string) =>
  `data: {"choices":[],"usage":{"prompt_tokens":${prompt},"completion_tokens":${completion}}}\n\n`;
/** The last chat chunk, with a finish reason and no text. */
const finished = (reason = 'stop') =>
  sse({ choices: [{ index: 0, delta: {}, finish_reason: reason }] });

function assertTruncated(r: RequestRecord, message: RegExp, what: string): void {
  assert.equal(r.error?.kind, 'truncated', `${what}: ${JSON.stringify(r.error)}`);
  assert.match(r.error?.message ?? '', message, what);
}

/** A two-token TGI answer whose final event reports `generatedTokens`. */
const tgiAnswer = (generatedTokens: number, finishReason: string): ScriptedReply => ({
  steps: [
    { write: tgiToken(0, { id: 1, text: 'a' }) },
    {
      write: tgiToken(
        1,
        { id: 2, text: 'b' },
        { generatedText: 'ab', finishReason, generatedTokens, inputLength: 4 },
      ),
    },
  ],
});

/** Ollama's `done: true` line with the server's counts. */
const ollamaTotals = (evalCount: number, promptEvalCount: number) =>
  ollamaDone('generate', {
    doneReason: 'stop',
    promptEvalCount,
    evalCount,
    totalNs: 1e6,
    loadNs: 0,
    promptEvalNs: 1e5,
    evalNs: 1e5,
  });

const CUT = /cut mid-event/;
const NO_MARKER = /ended without its end marker/;

describe('server counts that cannot be true fall back to what was observed', () => {
  test('usage.completion_tokens past 2^53, 1e17, negative, Infinity, fractional, over max_tokens, under the events', async () => {
    const counts = ['9715559134754884', '1e17', '-5', '1e400', '2.5', '100000000', '1'];
    const replies = counts.map((completion) => ({
      steps: [
        // Five events: 9715559134754884 split five ways leaves tokens that x++ never handed out.
        ...['a', 'b', 'c', 'd', 'e'].map((text) => ({ write: say(text) })),
        { write: finished() },
        { write: rawUsage('3', completion) },
        { write: DONE },
      ],
    }));
    const started = Date.now();
    const { records, summary } = await runScripted(BACKENDS.openai, replies, {
      endpoint: 'chat',
    });
    assert.ok(Date.now() - started < 20_000, 'the run ended by itself');
    assert.equal(records.length, counts.length);
    const expected = [
      ['9715559134754884', 'not_a_count'],
      ['100000000000000000', 'not_a_count'],
      ['-5', 'not_a_count'],
      ['Infinity', 'not_a_count'],
      ['2.5', 'not_a_count'],
      ['100000000', 'above_limit'],
      ['1', 'below_events'],
    ];
    records.forEach((r, i) => {
      const what = `completion_tokens ${counts[i]}`;
      assert.equal(r.error, undefined, what);
      assert.equal(r.outputTokens, 5, `${what}: the five token events`);
      assert.equal(r.outputTokensSource, 'events', what);
      assert.deepEqual(r.events.tokens, [1, 1, 1, 1, 1, 0, 0], what);
      assert.equal(r.inputTokens, 3, `${what}: the prompt count was fine`);
      // Infinity and 1e17 survive records.jsonl as text.
      const back = JSON.parse(JSON.stringify(r)) as RequestRecord;
      assert.deepEqual(
        back.countProblem,
        { field: 'usage.completion_tokens', value: expected[i][0], reason: expected[i][1] },
        what,
      );
    });
    const warning = summary.warnings.find((w) => w.code === 'implausible_usage');
    assert.ok(warning, JSON.stringify(summary.warnings));
    assert.match(warning.message, /^7 requests/);
    assert.equal(summary.tokens.output, 5 * counts.length);
    const perS = summary.throughput.outputTokensPerS;
    assert.ok(Number.isFinite(perS) && perS > 0 && perS < 1e6, `output tok/s ${perS}`);
  });

  test('prompt counts and per-event counts are checked too', async () => {
    const usage = (n: unknown) => ({ usage: { prompt_tokens: 3, completion_tokens: n } });
    const { records, summary } = await runScripted(
      BACKENDS.openai,
      [
        // A negative prompt count: the input falls back to the requested length.
        { steps: [{ write: say('a') }, { write: finished() }, { write: rawUsage('-7', '1') }] },
        // Per-event usage (continuous usage stats) that runs backwards into nonsense.
        {
          steps: [
            { write: chatEvent({ content: 'a' }, usage(1)) },
            { write: chatEvent({ content: 'b' }, usage(-4)) },
            { write: finished() },
            { write: DONE },
          ],
        },
      ],
      { endpoint: 'chat' },
    );
    const [prompt, perEvent] = records;
    assert.equal(prompt.error, undefined);
    assert.deepEqual(prompt.countProblem, {
      field: 'usage.prompt_tokens',
      value: '-7',
      reason: 'not_a_count',
    });
    assert.equal(prompt.inputTokensSource, 'requested');
    assert.equal(prompt.outputTokens, 1);
    assert.equal(perEvent.error, undefined);
    assert.equal(perEvent.countProblem?.value, '-4');
    assert.equal(perEvent.outputTokens, 2, 'one per event, never a negative delta');
    assert.ok(summary.warnings.some((w) => w.code === 'implausible_usage'));
  });

  test('native counts: tokens_predicted, eval_count, generated_tokens, meta_info, timings', async () => {
    const llama = await runScripted(BACKENDS.llamacpp, [
      {
        steps: [
          { write: llamaPartial('a', [1], 1) },
          { write: llamaPartial('b', [2], 2) },
          {
            write: sse({
              content: '',
              tokens: [],
              stop: true,
              stop_type: 'limit',
              tokens_predicted: 9715559134754884,
              tokens_evaluated: 16,
              timings: { prompt_n: 16, prompt_ms: -1, predicted_n: 2, predicted_ms: 5 },
            }),
          },
        ],
      },
    ]);
    const ollama = await runScripted(BACKENDS.ollama, [
      {
        headers: NDJSON,
        steps: [
          { write: ollamaGenerate('a') },
          { write: ollamaGenerate('b') },
          {
            write: ollamaTotals(-3, 16),
          },
        ],
      },
    ]);
    const tgi = await runScripted(BACKENDS.tgi, [tgiAnswer(1e17, 'length')]);
    const sglang = await runScripted(BACKENDS.sglang, [
      {
        steps: [
          { write: sglangMessage('a', 1) },
          {
            write:
              'data: {"text":"ab","meta_info":{"finish_reason":{"type":"length"},"prompt_tokens":4,"completion_tokens":1e400}}\n\n',
          },
          { write: SSE_DONE },
        ],
      },
    ]);
    const cases: [string, TestRun, string, string][] = [
      ['llamacpp', llama, 'tokens_predicted', '9715559134754884'],
      ['ollama', ollama, 'eval_count', '-3'],
      ['tgi', tgi, 'details.generated_tokens', '100000000000000000'],
      ['sglang', sglang, 'meta_info.completion_tokens', 'Infinity'],
    ];
    for (const [name, run, field, value] of cases) {
      const r = run.records[0];
      assert.equal(r.error, undefined, `${name}: ${JSON.stringify(r.error)}`);
      assert.equal(r.outputTokens, 2, `${name}: the tokens seen`);
      assert.deepEqual(r.countProblem, { field, value, reason: 'not_a_count' }, name);
      assert.ok(
        run.summary.warnings.some((w) => w.code === 'implausible_usage'),
        name,
      );
    }
    // A negative server duration is dropped, the rest of the timings kept.
    assert.deepEqual(llama.records[0].serverTiming, {
      prefillTokens: 16,
      decodeMs: 5,
      decodeTokens: 2,
    });
  });
});

describe('a stream without its end marker, or cut mid-event, is truncated (tokens kept)', () => {
  test('openai chat and completions', async () => {
    const cut = 'data: {"choices":[{"index":0,"delta":{"content":"c"';
    for (const endpoint of ['chat', 'completions'] as const) {
      const piece = endpoint === 'chat' ? say : (text: string) => textEvent(text);
      const { records, summary } = await runScripted(
        BACKENDS.openai,
        [
          { steps: [{ write: piece('a') }, { write: piece('b') }, { end: true }] },
          { steps: [{ write: piece('a') }, { write: piece('b') }, { write: cut }, { end: true }] },
          // A cut right after a finish_reason: the answer was whole, only [DONE] is missing.
          { steps: [{ write: piece('a') }, { write: finished('length') }, { write: 'data: [DO' }] },
        ],
        { endpoint },
      );
      const [noMarker, cutEvent, afterFinish] = records;
      assertTruncated(noMarker, NO_MARKER, `${endpoint}: no marker`);
      assertTruncated(cutEvent, CUT, `${endpoint}: cut`);
      for (const r of [noMarker, cutEvent]) {
        assert.equal(r.outputTokens, 2, `${endpoint}: the tokens seen are kept`);
        assert.ok(r.lastTokenAt !== undefined);
      }
      assert.equal(afterFinish.error?.kind, 'truncated', `${endpoint}: bytes after the end`);
      assert.deepEqual(summary.requests.errorsByKind, { truncated: 3 });
    }
  });

  test('llama.cpp /completion: no stop:true, or cut; the last tokens_predicted is the count', async () => {
    const { records } = await runScripted(BACKENDS.llamacpp, [
      { steps: [{ write: llamaPartial('a', [1], 1) }, { write: llamaPartial('b', [2], 2) }] },
      {
        steps: [
          { write: llamaPartial('a', [1], 1) },
          // Two tokens held back as the start of a stop string: no text, a higher count.
          { write: llamaPartial('', [], 3) },
          { write: 'data: {"index":0,"content":"d","tokens":[4],"stop":fal' },
        ],
      },
    ]);
    assertTruncated(records[0], NO_MARKER, 'no stop:true');
    assert.match(records[0].error?.message ?? '', /stop: true/);
    assert.equal(records[0].outputTokens, 2);
    assertTruncated(records[1], CUT, 'cut');
    assert.equal(records[1].outputTokens, 3, 'the last tokens_predicted seen');
    assert.deepEqual(records[1].events.tokens, [1, 2]);
  });

  /** Two token events then a close, and one token event then `cut`: both truncated. */
  async function assertBothTruncated(
    backend: Backend,
    [first, second]: [string, string],
    cut: string,
    headers: Record<string, string> = {},
  ): Promise<void> {
    const { records } = await runScripted(backend, [
      { headers, steps: [{ write: first }, { write: second }] },
      { headers, steps: [{ write: first }, { write: cut }] },
    ]);
    assertTruncated(records[0], NO_MARKER, `${backend.name}: no end marker`);
    assert.equal(records[0].outputTokens, 2);
    assertTruncated(records[1], CUT, `${backend.name}: cut`);
    assert.equal(records[1].outputTokens, 1);
  }

  test('ollama: no done:true, or a line cut short', async () => {
    await assertBothTruncated(
      BACKENDS.ollama,
      [ollamaGenerate('a'), ollamaGenerate('b')],
      '{"model":"llama3.2","response":"b","do',
      NDJSON,
    );
  });

  test('tgi /generate_stream: no generated_text, or cut', async () => {
    await assertBothTruncated(
      BACKENDS.tgi,
      [tgiToken(0, { id: 1, text: 'a' }), tgiToken(1, { id: 2, text: 'b' })],
      'data: {"index":1,"token":{"id"',
    );
  });

  test('sglang /generate: no finish_reason and no [DONE], or cut', async () => {
    await assertBothTruncated(
      BACKENDS.sglang,
      [sglangMessage('a', 1), sglangMessage('ab', 2)],
      'data: {"text":"ab","meta_',
    );
  });

  test('triton generate_stream has no end marker: a clean close ends it, a cut does not', async () => {
    const { records } = await runScripted(BACKENDS.triton, [
      { steps: [{ write: tritonText('a') }, { write: tritonText('b') }] },
      { steps: [{ write: tritonText('a') }, { write: 'data: {"text_output":"b' }] },
    ]);
    assert.equal(records[0].error, undefined);
    assert.equal(records[0].outputTokens, 2);
    assertTruncated(records[1], CUT, 'cut');
    assert.equal(records[1].outputTokens, 1);
  });
});

describe('legitimate ends stay successes', () => {
  test("openai: finish_reason without [DONE] (TGI's OpenAI route), usage after it", async () => {
    const { records, summary } = await runScripted(
      BACKENDS.openai,
      [
        { steps: [{ write: say('a') }, { write: say('b') }, { write: finished() }] },
        {
          steps: [
            { write: say('a') },
            { write: finished('length') },
            { write: rawUsage('3', '1') },
          ],
        },
        // The last event's blank line never came, but its data arrived whole.
        { steps: [{ write: say('a') }, { write: 'data: [DONE]\n' }] },
      ],
      { endpoint: 'chat' },
    );
    assert.equal(summary.requests.failed, 0, JSON.stringify(records.map((r) => r.error)));
    assert.equal(records[0].outputTokens, 2);
    assert.equal(records[0].finishReason, 'stop');
    assert.equal(records[1].outputTokensSource, 'server');
    assert.equal(records[1].inputTokens, 3);
  });

  test('llama.cpp: a stop string held back counts as tokens (mid-stream and in stop:true)', async () => {
    const final = (predicted: number) =>
      llamaFinal({ predicted, evaluated: 16, stopType: 'word', promptMs: 2, predictedMs: 8 });
    const { records } = await runScripted(BACKENDS.llamacpp, [
      {
        steps: [
          { write: llamaPartial(' Hello', [1], 1) },
          { write: llamaPartial('', [], 3) },
          { write: final(3) },
        ],
      },
      {
        steps: [
          { write: llamaPartial(' Hello', [1], 1) },
          { wait: 30 },
          { write: llamaPartial(' world', [2], 2) },
          { wait: 30 },
          { write: final(4) },
        ],
      },
    ]);
    for (const r of records) {
      assert.equal(r.error, undefined, JSON.stringify(r.error));
      assert.equal(r.tokenCountMismatch, undefined, 'the events add up to the server total');
      assert.equal(r.finishReason, 'stop');
      assert.equal(r.countProblem, undefined);
    }
    assert.deepEqual(records[0].events.tokens, [1, 2, 0]);
    assert.equal(records[0].outputTokens, 3);
    assert.deepEqual(records[1].events.tokens, [1, 1, 2]);
    assert.equal(records[1].outputTokens, 4);
    const tail = records[1].endAt - (records[1].lastTokenAt as number);
    assert.ok(Math.abs(tail) < 0.01, `the held tokens came with stop:true (${tail} ms before)`);
  });

  test('sglang: a finish_reason without [DONE]; tgi: the final event; ollama: done:true', async () => {
    const sglang = await runScripted(BACKENDS.sglang, [
      {
        steps: [
          { write: sglangMessage('a', 1) },
          { write: sglangMessage('ab', 2, { type: 'stop' }) },
        ],
      },
    ]);
    assert.equal(sglang.records[0].error, undefined);
    assert.equal(sglang.records[0].outputTokens, 2);
    const tgi = await runScripted(BACKENDS.tgi, [tgiAnswer(2, 'eos_token')]);
    assert.equal(tgi.records[0].error, undefined);
    const ollama = await runScripted(BACKENDS.ollama, [
      {
        headers: NDJSON,
        steps: [
          { write: ollamaGenerate('a') },
          {
            // The done line without its trailing newline: whole, so it counts.
            write: ollamaTotals(1, 4).trimEnd(),
          },
        ],
      },
    ]);
    assert.equal(ollama.records[0].error, undefined);
    assert.equal(ollama.records[0].outputTokens, 1);
  });
});
