import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestMetrics } from '../../src/metrics/requestMetrics.js';
import type { RequestRecord } from '../../src/record.js';
import { runAgainst } from '../helpers/run.js';
import { chatEvent, DONE, type Step, startScriptedServer } from '../helpers/scriptedServer.js';

/**
 * Issue 16 part 2 (metrics): a reasoning model's answer. The first reasoning token, the first
 * answer text and the thinking time between them are kept per request; the reasoning share of
 * the output comes from `usage.completion_tokens_details.reasoning_tokens` where the server
 * sends it, else from the events that carried reasoning only.
 */

const GAP_MS = 20;
/** The lower bound a scripted wait gives on any machine (timers never fire early). */
const AT_LEAST_MS = GAP_MS - 1;
const THOUGHTS = 6;
const ANSWER = 4;

function stream(usage: Record<string, unknown>): Step[] {
  const events = [
    chatEvent({ role: 'assistant', content: '' }),
    ...Array.from({ length: THOUGHTS }, (_, i) => chatEvent({ reasoning_content: `step ${i} ` })),
    ...Array.from({ length: ANSWER }, (_, i) => chatEvent({ content: `word${i} ` })),
  ];
  return [
    ...events.flatMap((write) => [{ wait: GAP_MS }, { write }]),
    {
      write: `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
    },
    { write: `data: ${JSON.stringify({ choices: [], usage })}\n\n` },
    { write: DONE },
  ];
}

async function runOne(usage: Record<string, unknown>): Promise<RequestRecord> {
  const server = await startScriptedServer(() => ({ steps: stream(usage) }));
  try {
    const { records } = await runAgainst(server.url, {
      target: { endpoint: 'chat' },
      requests: 1,
      outputTokens: 64,
    });
    return records[0];
  } finally {
    await server.close();
  }
}

test('reasoning: first reasoning token, thinking time, and the server split of the output', async () => {
  // The server says 30 of the 40 output tokens were reasoning (events carried several each).
  const record = await runOne({
    prompt_tokens: 12,
    completion_tokens: 40,
    completion_tokens_details: { reasoning_tokens: 30 },
  });
  assert.equal(record.error, undefined, record.error?.message);
  assert.equal(record.outputTokens, 40);
  assert.equal(record.reasoningTokens, 30);
  assert.equal(record.reasoningTokensSource, 'server');
  assert.equal(record.firstReasoningAt, record.firstTokenAt, 'it thought first');
  const m = requestMetrics(record);
  assert.ok((m.thinkingMs as number) >= THOUGHTS * AT_LEAST_MS, `thinking ${m.thinkingMs} ms`);
  assert.equal(
    m.thinkingMs,
    (record.firstContentAt as number) - (record.firstReasoningAt as number),
  );
  const answerMs = record.endAt - (record.firstContentAt as number);
  assert.equal(m.visibleOutputSpeedTokS, ((40 - 30) / answerMs) * 1000);
});

test('reasoning without the server split: counted from the reasoning-only events', async () => {
  const record = await runOne({ prompt_tokens: 12, completion_tokens: THOUGHTS + ANSWER });
  assert.equal(record.error, undefined, record.error?.message);
  assert.equal(record.reasoningTokens, THOUGHTS);
  assert.equal(record.reasoningTokensSource, 'events');
  // A split that cannot be true (more reasoning than output) is not used.
  const bad = await runOne({
    prompt_tokens: 12,
    completion_tokens: THOUGHTS + ANSWER,
    completion_tokens_details: { reasoning_tokens: 99 },
  });
  assert.equal(bad.reasoningTokens, THOUGHTS);
  assert.equal(bad.reasoningTokensSource, 'events');
});
