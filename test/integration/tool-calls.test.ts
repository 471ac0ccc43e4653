import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BACKENDS } from '../../src/backends/index.js';
import type { TargetConfig } from '../../src/loadgen/http.js';
import { requestMetrics } from '../../src/metrics/requestMetrics.js';
import type { RequestRecord } from '../../src/record.js';
import { runAgainst } from '../helpers/run.js';
import {
  chatEvent,
  DONE,
  type ScriptedReply,
  type Step,
  startScriptedServer,
  usageEvent,
} from '../helpers/scriptedServer.js';

/**
 * Issue 16 part 1: a streamed tool call is output. Its events count for TTFT, ITL and TPOT like
 * content and reasoning, kept apart as `toolCallChars` and `firstToolCallAt` (docs/metrics.md),
 * with the server's usage as the token count. Before, a tool-call-only answer had 0 output
 * tokens and no TTFT or ITL: its latency vanished from the summary.
 */

const GAP_MS = 20;
/** The lower bound a scripted wait of GAP_MS gives on any machine (timers never fire early). */
const AT_LEAST_MS = GAP_MS - 1;

/** `delta.tool_calls` as OpenAI, vLLM and SGLang send it: a list of partial calls. */
const toolDelta = (index: number, fn: Record<string, string>, first = false) =>
  chatEvent({
    tool_calls: [
      { index, ...(first ? { id: `call_${index}`, type: 'function' } : {}), function: fn },
    ],
  });
const finishedWith = (reason: string) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: reason }] })}\n\n`;

/** A weather call's arguments in 17 pieces, as a recorded TGI answer streamed them. */
const ARGUMENT_PIECES = [
  '{"',
  'location',
  '":',
  ' "',
  'Paris',
  ',',
  ' France',
  '",',
  ' "',
  'unit',
  '":',
  ' "',
  'cel',
  'sius',
  '"',
  '}',
  ' ',
];

function paced(events: string[]): Step[] {
  return events.flatMap((write) => [{ wait: GAP_MS }, { write }]);
}

async function runOne(
  reply: ScriptedReply,
  target: Partial<TargetConfig> = {},
): Promise<{ record: RequestRecord; summary: Awaited<ReturnType<typeof runAgainst>>['summary'] }> {
  const server = await startScriptedServer(() => reply);
  try {
    const { records, summary } = await runAgainst(server.url, {
      target: { endpoint: 'chat', ...target },
      requests: 1,
      outputTokens: 64,
    });
    return { record: records[0], summary };
  } finally {
    await server.close();
  }
}

describe('tool calls are output', () => {
  test('a tool-call-only answer (17 argument events) has TTFT, ITL and TPOT, with usage as the count', async () => {
    const events = [
      chatEvent({ role: 'assistant' }),
      toolDelta(0, { name: 'get_weather', arguments: '' }, true),
      ...ARGUMENT_PIECES.map((a) => toolDelta(0, { arguments: a })),
    ];
    const { record, summary } = await runOne({
      steps: [
        ...paced(events),
        { write: finishedWith('tool_calls') },
        { write: usageEvent(40, 18) },
        { write: DONE },
      ],
    });
    assert.equal(record.error, undefined, record.error?.message);
    assert.equal(record.outputTokens, 18);
    assert.equal(record.outputTokensSource, 'server');
    assert.equal(record.finishReason, 'tool_calls');
    assert.equal(record.firstContentAt, undefined, 'a tool call is not visible content');
    assert.equal(record.firstToolCallAt, record.firstTokenAt, 'the name is the first output');
    const chars = record.events.toolCallChars ?? [];
    assert.equal(
      chars.reduce((a, b) => a + b, 0),
      'get_weather'.length + ARGUMENT_PIECES.join('').length,
    );
    assert.equal(record.events.tokens.filter((k) => k > 0).length, 18, 'one event per token');
    const m = requestMetrics(record);
    assert.ok((m.ttftMs as number) >= 2 * AT_LEAST_MS, `TTFT ${m.ttftMs}`);
    assert.equal(m.ttftcMs, m.ttftMs);
    assert.ok((m.tpotMs as number) >= AT_LEAST_MS, `TPOT ${m.tpotMs}`);
    assert.equal(summary.latency.ttftMs.count, 1);
    assert.equal(summary.latency.ttftcMs.count, 1);
    assert.equal(summary.latency.itlMs.count, 17, 'outputTokens - 1 per-token gaps');
    // The median, not the minimum: on a busy machine one late read brings two paced events
    // together (a gap near 0), while most gaps are still the server's.
    assert.ok(summary.latency.itlMs.p50 >= AT_LEAST_MS, `ITL p50 ${summary.latency.itlMs.p50}`);
  });

  test('parallel calls (their own indices), TGI single-object deltas, and content before a call', async () => {
    const parallel = [
      toolDelta(0, { name: 'a', arguments: '' }, true),
      toolDelta(1, { name: 'bb', arguments: '' }, true),
      toolDelta(0, { arguments: '{"x":1}' }),
      toolDelta(1, { arguments: '{"y":22}' }),
    ];
    const both = await runOne({
      steps: [...paced(parallel), { write: finishedWith('tool_calls') }, { write: DONE }],
    });
    assert.equal(both.record.error, undefined);
    assert.equal(both.record.outputTokens, 4, 'one per event without usage');
    assert.deepEqual(both.record.events.toolCallChars, [1, 2, 7, 8, 0]);

    // TGI's OpenAI route before 3.0 sent `tool_calls` as one object, and no [DONE].
    const tgi = (fn: Record<string, string>) =>
      chatEvent({ tool_calls: { index: 0, id: '', type: 'function', function: fn } });
    const single = await runOne({
      steps: [
        ...paced([tgi({ name: 'f', arguments: '{' }), tgi({ arguments: '}' })]),
        { write: finishedWith('eos_token') },
      ],
    });
    assert.equal(single.record.error, undefined, single.record.error?.message);
    assert.equal(single.record.outputTokens, 2);
    assert.ok(single.record.firstToolCallAt !== undefined);

    const mixed = await runOne({
      steps: [
        ...paced([
          chatEvent({ content: 'Let me check.' }),
          toolDelta(0, { name: 'f', arguments: '{}' }, true),
        ]),
        { write: finishedWith('tool_calls') },
        { write: DONE },
      ],
    });
    const r = mixed.record;
    assert.equal(r.firstTokenAt, r.firstContentAt, 'the text came first');
    assert.ok((r.firstToolCallAt as number) - (r.firstContentAt as number) >= AT_LEAST_MS);
  });

  test('Ollama /api/chat: a whole call in message.tool_calls (arguments as an object)', async () => {
    const line = (value: unknown) => `${JSON.stringify(value)}\n`;
    const call = { function: { name: 'get_weather', arguments: { city: 'Paris' } } };
    const { record } = await runOne(
      {
        headers: { 'content-type': 'application/x-ndjson' },
        steps: [
          { wait: GAP_MS },
          {
            write: line({
              model: 'm',
              message: { role: 'assistant', content: '', tool_calls: [call] },
              done: false,
            }),
          },
          {
            write: line({
              model: 'm',
              message: { role: 'assistant', content: '' },
              done: true,
              done_reason: 'stop',
              eval_count: 12,
              prompt_eval_count: 30,
            }),
          },
        ],
      },
      { backend: BACKENDS.ollama },
    );
    assert.equal(record.error, undefined, record.error?.message);
    assert.equal(record.outputTokens, 12);
    assert.deepEqual(record.events.toolCallChars, [
      'get_weather'.length + JSON.stringify(call.function.arguments).length,
      0,
    ]);
    assert.ok((requestMetrics(record).ttftcMs as number) >= AT_LEAST_MS);
  });

  test('a server that answers one JSON body: its message.tool_calls are the output', async () => {
    const body = JSON.stringify({
      choices: [
        {
          index: 0,
          finish_reason: 'tool_calls',
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'c', type: 'function', function: { name: 'f', arguments: '{"q":1}' } },
            ],
          },
        },
      ],
      usage: { prompt_tokens: 9, completion_tokens: 7 },
    });
    const { record } = await runOne({
      headers: { 'content-type': 'application/json' },
      steps: [{ write: body }],
    });
    assert.equal(record.error, undefined, record.error?.message);
    assert.equal(record.outputTokens, 7);
    assert.ok(record.firstToolCallAt !== undefined);
    assert.equal(record.firstContentAt, undefined);
  });
});
