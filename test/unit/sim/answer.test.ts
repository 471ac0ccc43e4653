import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type AnswerPlan,
  answerWords,
  DEFAULT_ANSWER_OPTIONS,
  planAnswer,
  promptWords,
  wholeCalls,
} from '../../../src/sim/answer.js';

const TOOLS = [
  { type: 'function', function: { name: 'search', parameters: {} } },
  { type: 'function', function: { name: 'open', parameters: {} } },
];
const options = { ...DEFAULT_ANSWER_OPTIONS, parallelToolCalls: 4 };

function plan(body: Record<string, unknown>, tokens: number, id = 'r1'): AnswerPlan {
  const planned = planAnswer(body, tokens, id, options);
  assert.ok(typeof planned !== 'string', String(planned));
  return planned;
}

test('bad tool requests are refused with the field named', () => {
  const refused = (body: Record<string, unknown>) => planAnswer(body, 4, 'r', options);
  assert.match(
    String(refused({ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'x' } } })),
    /Tool 'x' has not been passed in `tools`/,
  );
  assert.match(String(refused({ tools: TOOLS, tool_choice: 'sometimes' })), /`tool_choice`/);
  assert.match(String(refused({ tools: [{ type: 'function' }] })), /`tools\[\]\.function\.name`/);
  assert.match(String(refused({ tool_choice: 'required' })), /needs `tools`/);
});

test("a call's generated words are the words its next-turn history renders (the cache key)", () => {
  for (const tokens of [1, 2, 3, 9, 17]) {
    const p = plan({ tools: TOOLS, tool_choice: 'required', reasoning_effort: 'low' }, tokens);
    const message = { role: 'assistant', content: null, tool_calls: wholeCalls(p) };
    const rendered = promptWords('chat', { messages: [message] });
    assert.ok(Array.isArray(rendered));
    // Reasoning is not sent back: the rendered words are the answer's after its reasoning.
    assert.deepEqual(rendered, answerWords(p, tokens).slice(p.reasoningTokens), `${tokens}`);
    for (const call of wholeCalls(p) as { function: { arguments: string } }[]) {
      JSON.parse(call.function.arguments);
    }
  }
});

test("'auto' answers with tool calls for the seeded share of requests, the same every time", () => {
  const share = { ...options, toolCallShare: 0.3 };
  const draws = (seed: number) =>
    Array.from({ length: 2000 }, (_, i) => {
      const p = planAnswer({ tools: TOOLS }, 4, String(i), { ...share, seed });
      return typeof p !== 'string' && p.calls.length > 0;
    });
  const calls = draws(1).filter(Boolean).length;
  assert.ok(calls > 500 && calls < 700, `${calls} of 2000`);
  assert.deepEqual(draws(1), draws(1));
  assert.notDeepEqual(draws(1), draws(2));
});

test('parallel calls: never more than tokens, one when the request forbids it or names a tool', () => {
  assert.equal(plan({ tools: TOOLS, tool_choice: 'required' }, 3).calls.length, 3);
  assert.equal(plan({ tools: TOOLS, tool_choice: 'required' }, 10).calls.length, 4);
  assert.equal(
    plan({ tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false }, 10).calls.length,
    1,
  );
  const named = plan(
    { tools: TOOLS, tool_choice: { type: 'function', function: { name: 'open' } } },
    10,
  );
  assert.deepEqual(
    named.calls.map((c) => [c.name, c.tokens]),
    [['open', 10]],
  );
  assert.equal(named.finishReason, 'stop');
});
