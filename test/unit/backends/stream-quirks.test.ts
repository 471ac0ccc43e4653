import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { requestMetrics } from '../../../src/metrics/requestMetrics.js';
import type { RequestRecord } from '../../../src/record.js';
import { runAgainst } from '../../helpers/run.js';
import {
  chatEvent,
  DONE,
  type Step,
  startScriptedServer,
  textEvent,
  usageEvent,
} from '../../helpers/scriptedServer.js';

/** Sends one request to a server that answers with `steps`, and returns its record. */
async function oneRecord(
  steps: Step[],
  endpoint: 'chat' | 'completions' = 'chat',
  response: { status?: number; headers?: Record<string, string> } = {},
): Promise<RequestRecord> {
  const server = await startScriptedServer(() => ({ ...response, steps }));
  try {
    const { records } = await runAgainst(server.url, { target: { endpoint }, requests: 1 });
    return records[0];
  } finally {
    await server.close();
  }
}

const role = chatEvent({ role: 'assistant', content: '' });
const say = (content: string) => chatEvent({ content });

describe('stream quirks', () => {
  test('a role-only first event sent at once does not count as the first token', async () => {
    const r = await oneRecord([
      { write: role },
      { wait: 60 },
      { write: say('Hello') },
      { write: say(' world') },
      { write: usageEvent(5, 2) },
      { write: DONE },
    ]);
    const m = requestMetrics(r);
    assert.equal(r.error, undefined);
    assert.deepEqual(r.events.tokens, [0, 1, 1, 0]);
    assert.ok((m.ttftMs as number) >= 55, `TTFT ${m.ttftMs} ms must include the 60 ms wait`);
    // The headers (and the role event) came before the server's 60 ms wait: at least half of it
    // separates them, whatever the machine adds to the client's first read.
    assert.ok(
      (m.ttftMs as number) - (m.ttfbMs as number) >= 30,
      `headers came at once: TTFB ${m.ttfbMs} ms, TTFT ${m.ttftMs} ms`,
    );
  });

  test('empty content events are events but not tokens', async () => {
    const r = await oneRecord([
      { write: role },
      { write: say('') },
      { wait: 30 },
      { write: say('a') },
      { write: say('') },
      { write: say('b') },
      { write: DONE },
    ]);
    assert.deepEqual(r.events.tokens, [0, 0, 1, 0, 1]);
    assert.equal(r.outputTokens, 2);
    assert.equal(r.outputTokensSource, 'events');
    assert.ok((requestMetrics(r).ttftMs as number) >= 25);
  });

  test('keep-alive comments are not events', async () => {
    const r = await oneRecord([
      { write: ': keep-alive\n\n' },
      { wait: 30 },
      { write: ':\n\n' },
      { write: say('x') },
      { write: DONE },
    ]);
    assert.deepEqual(r.events.tokens, [1]);
    assert.ok((requestMetrics(r).ttftMs as number) >= 25);
  });

  test('a usage-only final event gives the counts and is not a token', async () => {
    const r = await oneRecord([
      { write: say('one') },
      { wait: 20 },
      { write: say(' two') },
      { wait: 40 },
      { write: usageEvent(7, 2) },
      { write: DONE },
    ]);
    assert.equal(r.outputTokens, 2);
    assert.equal(r.outputTokensSource, 'server');
    assert.equal(r.inputTokens, 7);
    assert.equal(r.inputTokensSource, 'server');
    assert.deepEqual(r.events.tokens, [1, 1, 0]);
    assert.ok(
      (r.endAt as number) - (r.lastTokenAt as number) >= 35,
      'last token is not the usage event',
    );
  });

  test('usage in the same event as the final choice (llama.cpp) counts', async () => {
    const r = await oneRecord([
      { write: say('a') },
      { write: say('b') },
      {
        write: `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })}\n\n`,
      },
      { write: DONE },
    ]);
    assert.equal(r.outputTokens, 2);
    assert.equal(r.outputTokensSource, 'server');
    assert.equal(r.finishReason, 'stop');
  });

  test('an event may carry several tokens: spread by the final usage', async () => {
    const r = await oneRecord([
      { write: say('a b c') },
      { wait: 30 },
      { write: say(' d e f') },
      { wait: 30 },
      { write: say(' g h') },
      { write: usageEvent(4, 8) },
      { write: DONE },
    ]);
    assert.deepEqual(r.events.tokens, [3, 3, 2, 0]);
    assert.equal(r.outputTokens, 8);
    assert.equal(
      r.tokenCountMismatch,
      undefined,
      'one-per-event guesses are expected to be rescaled',
    );
    const m = requestMetrics(r);
    // TPOT spreads the decode time over 7 gaps; ITL gives each later token g/3 or g/2.
    assert.ok(
      Math.abs(
        (m.tpotMs as number) - ((r.lastTokenAt as number) - (r.firstTokenAt as number)) / 7,
      ) < 1e-9,
    );
  });

  test('an event may carry several tokens: per-event usage (continuous usage stats)', async () => {
    const usage = (n: number) => ({
      usage: { prompt_tokens: 4, completion_tokens: n, total_tokens: 4 + n },
    });
    const r = await oneRecord([
      { write: chatEvent({ role: 'assistant', content: '' }, usage(0)) },
      { write: chatEvent({ content: 'a' }, usage(1)) },
      { write: chatEvent({ content: 'b c' }, usage(3)) },
      { write: chatEvent({ content: 'd e f g' }, usage(7)) },
      { write: usageEvent(4, 8) },
      { write: DONE },
    ]);
    assert.deepEqual(r.events.tokens, [0, 1, 2, 5, 0], 'deltas rescaled to the final total');
    assert.equal(r.tokenCountMismatch, 1, 'server deltas (7) disagreed with its total (8)');
    assert.equal(r.outputTokens, 8);
  });

  test('reasoning_content counts as output but is kept apart for TTFC', async () => {
    const r = await oneRecord([
      { write: role },
      { wait: 20 },
      { write: chatEvent({ reasoning_content: 'thinking' }) },
      { wait: 50 },
      { write: chatEvent({ reasoning_content: ' more' }) },
      { write: say('answer') },
      { write: DONE },
    ]);
    const m = requestMetrics(r);
    assert.equal(r.outputTokens, 3);
    assert.deepEqual(r.events.reasoningChars, [0, 8, 5, 0]);
    assert.deepEqual(r.events.contentChars, [0, 0, 0, 6]);
    assert.ok((m.ttfcMs as number) - (m.ttftMs as number) >= 45, 'TTFC waits for visible content');
  });

  test('vLLM reasoning field `reasoning` also counts', async () => {
    const r = await oneRecord([
      { write: chatEvent({ reasoning: 'hm' }) },
      { write: say('ok') },
      { write: DONE },
    ]);
    assert.equal(r.outputTokens, 2);
    assert.deepEqual(r.events.reasoningChars, [2, 0]);
  });

  test('the request ends at [DONE], even if the server keeps the response open', async () => {
    const r = await oneRecord([{ write: say('a') }, { write: DONE }, { wait: 300 }, { end: true }]);
    assert.equal(r.error, undefined);
    assert.ok(requestMetrics(r).e2eMs < 150, `e2e ${requestMetrics(r).e2eMs} ms`);
  });

  test('a clean close without [DONE] after a finish_reason ends the stream successfully', async () => {
    // TGI's OpenAI route before 2.1.1 sent no [DONE] (huggingface/text-generation-inference#2221).
    const last = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'b' }, finish_reason: 'length' }] })}\n\n`;
    const r = await oneRecord([{ write: say('a') }, { write: last }, { end: true }]);
    assert.equal(r.error, undefined);
    assert.equal(r.outputTokens, 2);
  });

  test('CRLF line ends', async () => {
    const crlf = (s: string) => s.replace(/\n/g, '\r\n');
    const r = await oneRecord([
      { write: crlf(say('a')) },
      { write: crlf(say('b')) },
      { write: crlf(DONE) },
    ]);
    assert.equal(r.error, undefined);
    assert.deepEqual(r.events.tokens, [1, 1]);
  });

  test('`data:` without a space', async () => {
    const tight = (s: string) => s.replace(/^data: /, 'data:');
    const r = await oneRecord([
      { write: tight(say('a')) },
      { write: tight(say('b')) },
      { write: 'data:[DONE]\n\n' },
    ]);
    assert.equal(r.error, undefined);
    assert.deepEqual(r.events.tokens, [1, 1]);
  });

  test('events split across network reads, including inside a UTF-8 character', async () => {
    const bytes = Buffer.from(say('héllo'), 'utf8');
    const cut = bytes.indexOf(Buffer.from('é', 'utf8')) + 1;
    const r = await oneRecord([
      { write: bytes.subarray(0, cut) },
      { wait: 40 },
      { write: bytes.subarray(cut) },
      { write: DONE.slice(0, 8) },
      { wait: 10 },
      { write: DONE.slice(8) },
    ]);
    assert.equal(r.error, undefined);
    assert.deepEqual(r.events.tokens, [1]);
    assert.deepEqual(r.events.contentChars, [5], 'the split character decodes whole');
    assert.ok(
      (requestMetrics(r).ttftMs as number) >= 35,
      'an event counts when its last byte arrives',
    );
  });

  test('events that arrive in one network read are counted as coalesced', async () => {
    const server = await startScriptedServer(() => ({
      steps: [
        { write: say('a') },
        { wait: 30 },
        { write: say('b') + say('c') + say('d') },
        { wait: 30 },
        { write: say('e') },
        { write: DONE },
      ],
    }));
    try {
      const { records, result, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        requests: 1,
      });
      assert.deepEqual(records[0].events.tokens, [1, 1, 1, 1, 1]);
      assert.equal(result.clientHealth.tokenEvents, 5);
      assert.equal(result.clientHealth.coalescedTokenEvents, 2, 'c and d came with b');
      assert.ok(summary.warnings.some((w) => w.code === 'coalesced_events'));
    } finally {
      await server.close();
    }
  });

  test('completions: text events', async () => {
    const r = await oneRecord(
      [
        { write: textEvent('a') },
        { write: textEvent('') },
        { write: textEvent(' b') },
        { write: usageEvent(2, 2) },
        { write: DONE },
      ],
      'completions',
    );
    assert.deepEqual(r.events.tokens, [1, 0, 1, 0]);
    assert.equal(r.outputTokens, 2);
  });

  test('a server that ignores stream:true and answers JSON: one event at the end', async () => {
    const body = JSON.stringify({
      choices: [
        { index: 0, message: { role: 'assistant', content: 'abc' }, finish_reason: 'stop' },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
    });
    const r = await oneRecord([{ wait: 30 }, { write: body }], 'chat', {
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(r.error, undefined);
    assert.equal(r.outputTokens, 5);
    assert.equal(r.firstTokenAt, r.lastTokenAt);
  });
});
