/**
 * Session workloads (issue 16 parts 3 and 4, the workload side): what each turn of a multi-turn
 * chat or an agent task sends, checked message by message, with token counts under the real
 * o200k_base tokenizer.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import type { Answer, ChatMessage, RequestSpec } from '../../../src/backends/types.js';
import type { RequestRecord } from '../../../src/record.js';
import { parseAgentTrace } from '../../../src/workload/agentTrace.js';
import {
  agentTools,
  CallGraphRun,
  type ConversationStep,
  type ConversationWorkload,
  type ConversationWorkloadOptions,
  createConversationWorkload,
  SESSION_ID_STRIDE,
  sessionBounds,
  type TurnOutcome,
} from '../../../src/workload/conversations.js';
import { parseDataset, readDataset } from '../../../src/workload/datasets.js';
import { sampleLength, streamSeed } from '../../../src/workload/distributions.js';
import { createPromptFactory, type PromptFactory } from '../../../src/workload/prompts.js';
import {
  type AgentShape,
  findScenario,
  type Scenario,
  type SessionShape,
} from '../../../src/workload/scenarios.js';
import { createTokenizer, type Tokenizer } from '../../../src/workload/tokenizer.js';
import { parseTrace, readTrace, traceSessions } from '../../../src/workload/trace.js';
import { toolsPromptText } from '../../../src/workload/words.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => join(REPO, 'test/fixtures/workload', name);

let tokenizer: Tokenizer;
let prompts: PromptFactory;
let count: (text: string) => number;

before(async () => {
  tokenizer = await createTokenizer('o200k_base');
  prompts = await createPromptFactory(tokenizer, { seed: 99 });
  count = tokenizer.countSync as (text: string) => number;
});

const fixed = (value: number) => ({ kind: 'fixed' as const, value });

function chatScenario(session: Partial<SessionShape> = {}, input = 40, output = 30): Scenario {
  return {
    name: 'multi-turn',
    input: fixed(input),
    output: fixed(output),
    session: {
      turns: fixed(5),
      thinkTimeMs: fixed(1500),
      history: 'reference',
      systemPromptTokens: 100,
      ...session,
    },
  };
}

function workload(o: Partial<ConversationWorkloadOptions> & { scenario: Scenario }) {
  return createConversationWorkload({ prompts, seed: 7, promptOverheadTokens: 7, ...o });
}

/** A finished request as the load generator records it: due at `dueMs`, ended `latencyMs` later. */
function outcome(dueMs: number, latencyMs: number, answer?: Answer): TurnOutcome {
  const record = { scheduledAt: dueMs, sentAt: dueMs, endAt: dueMs + latencyMs } as RequestRecord;
  return answer ? { record, answer } : { record };
}

/** Runs a session to its end, answering every request with `answer(step, call)`. */
function play(
  w: ConversationWorkload,
  sessionId: number,
  answer: (step: number, call: number) => Answer | undefined = () => undefined,
): ConversationStep[] {
  const conversation = w(sessionId);
  const steps: ConversationStep[] = [];
  let previous: TurnOutcome[] | undefined;
  for (let step = conversation.next(); step; step = conversation.next(previous)) {
    const index = steps.length;
    steps.push(step);
    assert.ok(index < 100, 'the session ends');
    previous = step.requests.map((_, c) => outcome(0, 10, answer(index, c)));
  }
  return steps;
}

/** Tokens of the messages' texts (contents, tool-call names and arguments) plus `overhead`. */
function tokensOf(messages: readonly ChatMessage[], overhead: number): number {
  let n = overhead;
  for (const m of messages) {
    if (m.content) n += count(m.content);
    for (const c of m.tool_calls ?? []) n += count(c.function.name) + count(c.function.arguments);
  }
  return n;
}

const roles = (spec: RequestSpec) => (spec.messages ?? []).map((m) => m.role).join(',');

describe('synthetic multi-turn sessions', () => {
  test('a 5-turn session: turn k sends the shared system prompt, the history and a new message of exact length', () => {
    const steps = play(workload({ scenario: chatScenario() }), 3);
    assert.equal(steps.length, 5);
    const system = steps[0].requests[0].messages?.[0];
    assert.equal(system?.role, 'system');
    assert.equal(count(system?.content ?? ''), 100);
    for (const [k, step] of steps.entries()) {
      assert.equal(step.requests.length, 1);
      assert.equal(step.pauseMs, k === 0 ? 0 : 1500);
      const spec = step.requests[0];
      const messages = spec.messages ?? [];
      assert.equal(messages.length, 2 + 2 * k);
      assert.equal(roles(spec), ['system', ...Array(k).fill('user,assistant'), 'user'].join(','));
      // Each user message is 40 tokens, each reference answer the previous max_tokens (30).
      for (const m of messages.slice(1)) {
        assert.equal(
          count(m.content ?? ''),
          m.role === 'user' ? 40 : 30,
          `${m.role} of turn ${k + 1}`,
        );
      }
      assert.equal(spec.requestedInputTokens, 100 + 40 * (k + 1) + 30 * k + 7);
      assert.equal(spec.requestedInputTokens, tokensOf(messages, 7));
      assert.equal(spec.requestedOutputTokens, 30);
      assert.equal(spec.prompt, messages.map((m) => m.content).join('\n'));
      assert.equal(spec.captureAnswer, undefined, 'reference history needs no answer');
      // The history is re-sent exactly: turn k's messages start with turn k-1's.
      if (k > 0) {
        assert.deepEqual(messages.slice(0, messages.length - 2), steps[k - 1].requests[0].messages);
      }
    }
    const last = steps[4].requests[0].messages ?? [];
    const users = last.filter((m) => m.role === 'user').map((m) => m.content);
    assert.equal(new Set(users).size, 5, 'a new user message each turn');
  });

  test('sessions share the system prompt, not their messages', () => {
    const w = workload({ scenario: chatScenario() });
    const a = w(0).next()?.requests[0].messages ?? [];
    const b = w(1).next()?.requests[0].messages ?? [];
    assert.deepEqual(a[0], b[0]);
    assert.notEqual(a[1].content, b[1].content);
    const none = workload({ scenario: chatScenario({ systemPromptTokens: 0 }) });
    assert.equal(roles(none(0).next()?.requests[0] as RequestSpec), 'user');
  });

  test("history 'actual': the model's answers, tool calls included, and every request keeps its answer", () => {
    const w = workload({ scenario: chatScenario({ history: 'actual', turns: fixed(3) }) });
    const answers: Answer[] = [
      { content: 'Paris is the capital of France.', toolCalls: [] },
      {
        content: '',
        toolCalls: [
          { id: '', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } },
        ],
      },
    ];
    const steps = play(w, 0, (step) => answers[step]);
    assert.equal(steps.length, 3);
    for (const step of steps) assert.equal(step.requests[0].captureAnswer, true);
    const messages = steps[2].requests[0].messages ?? [];
    assert.deepEqual(messages[2], {
      role: 'assistant',
      content: 'Paris is the capital of France.',
    });
    assert.deepEqual(messages[4], {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_0_1_0_0',
          type: 'function',
          function: { name: 'lookup', arguments: '{"q":"x"}' },
        },
      ],
    });
    assert.equal(steps[2].requests[0].requestedInputTokens, tokensOf(messages, 7));
    assert.equal(
      steps[1].requests[0].requestedInputTokens,
      100 + 40 + count('Paris is the capital of France.') + 40 + 7,
    );
  });

  test('turns and think times drawn per session from their distributions', () => {
    const scenario = chatScenario({
      turns: { kind: 'uniform', min: 1, max: 6 },
      thinkTimeMs: { kind: 'uniform', min: 0, max: 10_000 },
    });
    const w = workload({ scenario });
    const lengths = new Set<number>();
    const pauses = new Set<number>();
    for (let s = 0; s < 40; s++) {
      const steps = play(w, s);
      assert.equal(
        steps.length,
        sampleLength(scenario.session?.turns as never, streamSeed(7, 'session-turns'), s, 1),
      );
      lengths.add(steps.length);
      for (const step of steps.slice(1)) pauses.add(step.pauseMs);
    }
    assert.ok(lengths.size >= 4, `turns vary: ${[...lengths]}`);
    assert.ok(pauses.size > 20, 'think times vary');
    for (const p of pauses) assert.ok(p >= 0 && p <= 10_000);
  });

  test('determinism: the same seed and session id give the same session; another seed or id another', () => {
    const scenario = chatScenario({ turns: { kind: 'uniform', min: 2, max: 6 } }, 0, 0);
    scenario.input = { kind: 'uniform', min: 5, max: 50 };
    scenario.output = { kind: 'uniform', min: 5, max: 50 };
    const a = play(workload({ scenario }), 12);
    const again = play(workload({ scenario }), 12);
    assert.deepEqual(again, a);
    assert.notDeepEqual(play(workload({ scenario }), 13), a);
    assert.notDeepEqual(play(workload({ scenario, seed: 8 }), 12), a);
    // Request index i of session s draws its lengths as record id s x STRIDE + i.
    assert.equal(
      a[1].requests[0].requestedOutputTokens,
      sampleLength(scenario.output, streamSeed(7, 'output'), 12 * SESSION_ID_STRIDE + 1),
    );
  });
});

describe('ShareGPT sessions', () => {
  test('allTurns keeps every human turn and its answer; without it, the first turn only as before', () => {
    const all = readDataset(fixture('sharegpt-multiturn.json'), undefined, { allTurns: true });
    assert.equal(all.format, 'sharegpt');
    assert.deepEqual(
      all.entries.map((e) => e.turns),
      [
        [
          { user: 'What is the capital of France?', answer: 'Paris is the capital of France.' },
          {
            user: 'And how many people live there?',
            answer: 'About two million people live in the city itself.',
          },
          { user: 'Thanks!' },
        ],
        [{ user: 'Name a prime.' }, { user: 'Another one?', answer: '7' }],
      ],
    );
    assert.equal(all.skipped, 1);
    const first = readDataset(fixture('sharegpt-multiturn.json'));
    assert.equal(first.format, 'sharegpt');
    assert.deepEqual(first.entries, [
      { prompt: 'What is the capital of France?', outputText: 'Paris is the capital of France.' },
      { prompt: 'Name a prime.', outputText: 'An answer to an empty message is left out.' },
    ]);
  });

  test('session s replays conversation s mod n: the history, the k-th human message, max_tokens of the reference answer', () => {
    const dataset = readDataset(fixture('sharegpt-multiturn.json'), undefined, { allTurns: true });
    const scenario = chatScenario({ systemPromptTokens: 0, thinkTimeMs: fixed(200) }, 40, 33);
    const w = workload({ scenario, dataset });
    const steps = play(w, 2); // 2 mod 2 = conversation 0
    assert.equal(steps.length, 3);
    const last = steps[2].requests[0];
    assert.deepEqual(last.messages, [
      { role: 'user', content: 'What is the capital of France?' },
      { role: 'assistant', content: 'Paris is the capital of France.' },
      { role: 'user', content: 'And how many people live there?' },
      { role: 'assistant', content: 'About two million people live in the city itself.' },
      { role: 'user', content: 'Thanks!' },
    ]);
    assert.deepEqual(
      steps.map((s) => s.requests[0].requestedOutputTokens),
      [
        count('Paris is the capital of France.'),
        count('About two million people live in the city itself.'),
        33, // no reference answer: the scenario's output
      ],
    );
    assert.deepEqual(
      steps.map((s) => s.pauseMs),
      [0, 200, 200],
    );
    assert.equal(last.requestedInputTokens, tokensOf(last.messages ?? [], 7));
    // Conversation 1: consecutive user messages where the first had no answer.
    const other = play(w, 1);
    assert.deepEqual(other[1].requests[0].messages, [
      { role: 'user', content: 'Name a prime.' },
      { role: 'user', content: 'Another one?' },
    ]);
  });

  test("history 'actual' sends the model's answers instead of the dataset's", () => {
    const dataset = readDataset(fixture('sharegpt-multiturn.json'), undefined, { allTurns: true });
    const w = workload({
      scenario: chatScenario({ history: 'actual', systemPromptTokens: 0 }),
      dataset,
    });
    const steps = play(w, 0, (step) => ({ content: `model answer ${step}`, toolCalls: [] }));
    assert.deepEqual(
      (steps[2].requests[0].messages ?? []).filter((m) => m.role === 'assistant'),
      [
        { role: 'assistant', content: 'model answer 0' },
        { role: 'assistant', content: 'model answer 1' },
      ],
    );
  });

  test("history 'actual': a hostile answer (4 MB of letters, no space) is counted in bounded time (issue 27 case 5)", (t) => {
    const capped = tokenizer.countCapped as (text: string) => number;
    // Random lowercase letters: one pre-token, quadratic to count whole (400 KB took ~100 s).
    const bytes = new Uint8Array(4 * 1024 * 1024);
    let a = 27;
    for (let i = 0; i < bytes.length; i++) {
      a = (Math.imul(a, 1103515245) + 12345) >>> 0;
      bytes[i] = 97 + ((a >>> 16) % 26);
    }
    const hostile = new TextDecoder('latin1').decode(bytes);
    const w = workload({ scenario: chatScenario({ history: 'actual', turns: fixed(3) }) });
    const conversation = w(0);
    conversation.next();
    const started = performance.now();
    const second = conversation.next([
      outcome(0, 10, {
        content: hostile,
        toolCalls: [
          { id: '', type: 'function', function: { name: 'f', arguments: hostile.slice(0, 1e6) } },
        ],
      }),
    ]);
    const ms = performance.now() - started;
    t.diagnostic(`next() after a 4 MB answer took ${ms.toFixed(0)} ms`);
    assert.ok(ms < 20_000, `${ms.toFixed(0)} ms`);
    const spec = second?.requests[0] as RequestSpec;
    const answerTokens = capped(hostile) + capped(`f${hostile.slice(0, 1e6)}`);
    assert.equal(spec.requestedInputTokens, 100 + 40 + answerTokens + 40 + 7);
    const chars = hostile.length + 1e6 + 1;
    assert.ok(answerTokens > 0.3 * chars && answerTokens < chars, `${answerTokens} tokens`);
    // An ordinary answer is counted exactly, as before.
    const small = { content: 'Paris is the capital of France.', toolCalls: [] };
    assert.equal(capped(small.content), count(small.content));
  });

  test('a prompt dataset has no conversations to replay', () => {
    const dataset = parseDataset('{"prompt": "hi"}\n', 'jsonl');
    assert.throws(() => workload({ scenario: chatScenario(), dataset }), /ShareGPT/);
  });
});

describe('trace sessions', () => {
  test('lines group by session_id / conversation_id in time order; lines without one are sessions of one turn', () => {
    const sessions = traceSessions(readTrace(fixture('sessions.jsonl')));
    assert.deepEqual(
      sessions.map((s) => [s.sessionId, s.startMs, s.turns.map((t) => t.inputTokens)]),
      [
        ['alice', 0, [60, 130, 100]],
        ['7', 500, [50, 70]],
        [undefined, 1500, [30]],
      ],
    );
    // Mooncake lines may carry one too.
    const mooncake = parseTrace(
      '{"timestamp": 5, "input_length": 9, "output_length": 1, "hash_ids": [0], "session_id": "s"}\n',
    );
    assert.equal(mooncake.entries[0].sessionId, 's');
    assert.throws(
      () => parseTrace('{"at_ms": 0, "input_tokens": 1, "output_tokens": 1, "session_id": ""}\n'),
      /line 1: session_id must be a non-empty string or a whole number/,
    );
    assert.throws(
      () =>
        parseTrace(
          '{"at_ms": 0, "input_tokens": 1, "output_tokens": 1, "session_id": 1, "conversation_id": 2}\n',
        ),
      /line 1: has session_id and conversation_id; give one/,
    );
  });

  test('turn inputs follow the trace (the new message is the growth), pauses are the gaps less the observed latency', () => {
    const sessions = traceSessions(readTrace(fixture('sessions.jsonl')));
    const scenario = chatScenario({ systemPromptTokens: 0 });
    const w = workload({ scenario, traceSessions: sessions, promptOverheadTokens: 5 });
    const alice = w(0);
    const t1 = alice.next() as ConversationStep;
    assert.equal(t1.pauseMs, 0);
    assert.equal(t1.requests[0].requestedInputTokens, 60);
    assert.equal(count(t1.requests[0].messages?.[0].content ?? ''), 55);
    assert.equal(t1.requests[0].requestedOutputTokens, 20);
    // Turn 2 at 4,000 ms; turn 1 took 1,200 ms from when it was due.
    const t2 = alice.next([outcome(0, 1200)]) as ConversationStep;
    assert.equal(t2.pauseMs, 4000 - 1200);
    const m2 = t2.requests[0].messages ?? [];
    assert.equal(roles(t2.requests[0]), 'user,assistant,user');
    assert.equal(count(m2[1].content ?? ''), 20, 'the reference answer: turn 1 output length');
    assert.equal(count(m2[2].content ?? ''), 130 - 5 - 55 - 20);
    assert.equal(t2.requests[0].requestedInputTokens, 130);
    assert.equal(t2.requests[0].requestedOutputTokens, 15);
    // Turn 3 at 9,000: a turn slower than the gap waits 0; a prompt shorter than the history
    // grows it by one token.
    const t3 = alice.next([outcome(4000, 6000)]) as ConversationStep;
    assert.equal(t3.pauseMs, 0);
    assert.equal(t3.requests[0].requestedInputTokens, 130 + 15 + 1);
    assert.equal(alice.next([outcome(9000, 10)]), undefined);
    // Replayed at speed 2, the gaps halve.
    const fast = createConversationWorkload({
      scenario,
      prompts,
      seed: 7,
      traceSessions: sessions,
      speed: 2,
    })(1);
    fast.next();
    assert.equal(fast.next([outcome(500, 100)])?.pauseMs, 2000 / 2 - 100);
    // Past the trace's last session, nothing.
    assert.equal(w(3).next(), undefined);
  });

  test("history 'actual' grows by the model's answer, and the next message fills the rest", () => {
    const sessions = traceSessions(readTrace(fixture('sessions.jsonl')));
    const w = workload({
      scenario: chatScenario({ history: 'actual', systemPromptTokens: 0 }),
      traceSessions: sessions,
      promptOverheadTokens: 0,
    });
    const alice = w(0);
    alice.next();
    const answer = { content: 'A short answer of some words.', toolCalls: [] };
    const t2 = alice.next([outcome(0, 100, answer)]) as ConversationStep;
    assert.equal(t2.requests[0].requestedInputTokens, 130);
    assert.equal(
      count(t2.requests[0].messages?.[2].content ?? ''),
      130 - 60 - count(answer.content),
    );
  });
});

describe('agent tasks', () => {
  const agentScenario = (fanOut: number): Scenario => ({
    name: 'agent',
    input: fixed(60),
    output: fixed(90),
    agent: {
      steps: fixed(2),
      fanOut,
      systemPromptTokens: 300,
      tools: 3,
      toolLatencyMs: { kind: 'uniform', min: 100, max: 9000 },
      toolOutputTokens: fixed(25),
      answerTokens: fixed(400),
    },
  });
  const call = (id: string, name: string, args: string) => ({
    id,
    type: 'function' as const,
    function: { name, arguments: args },
  });

  test('fan-out 2: parallel calls on one history, tool results paired by tool_call_id, pause = slowest tool, final answer', () => {
    const w = workload({ scenario: agentScenario(2) });
    const task = w(4);
    const s1 = task.next() as ConversationStep;
    assert.equal(s1.pauseMs, 0);
    assert.equal(s1.requests.length, 2);
    assert.deepEqual(s1.requests[0], s1.requests[1], 'the same history');
    const r = s1.requests[0];
    assert.equal(roles(r), 'system,user');
    assert.equal(count(r.messages?.[0].content ?? ''), 300);
    assert.equal(count(r.messages?.[1].content ?? ''), 60);
    assert.deepEqual(r.tools, agentTools(3));
    assert.deepEqual(
      r.tools?.map((t) => t.function.name),
      ['search_documents', 'read_documents', 'create_documents'],
    );
    assert.equal(r.toolChoice, 'auto');
    assert.equal(r.captureAnswer, true);
    assert.equal(r.requestedOutputTokens, 90);
    // The schemas as a chat template renders them (toolsPromptText).
    const toolsTokens = count(toolsPromptText(agentTools(3)));
    assert.equal(r.requestedInputTokens, 300 + 60 + toolsTokens + 7);
    // The same system prompt and tools for every task.
    const other = w(5).next()?.requests[0];
    assert.deepEqual(other?.messages?.[0], r.messages?.[0]);
    assert.notDeepEqual(other?.messages?.[1], r.messages?.[1]);

    // Call 0 answers two tool calls (the second without an id); call 1 answers in text.
    const s2 = task.next([
      outcome(0, 800, {
        content: '',
        toolCalls: [
          call('call_abc', 'search_documents', '{"query":"q"}'),
          call('', 'read_documents', '{}'),
        ],
      }),
      outcome(0, 900, { content: 'I would rather answer directly.', toolCalls: [] }),
    ]) as ConversationStep;
    assert.equal(s2.requests.length, 2);
    const m = s2.requests[0].messages ?? [];
    assert.equal(roles(s2.requests[0]), 'system,user,assistant,tool,tool,assistant,user');
    assert.deepEqual(
      m[2].tool_calls?.map((c) => c.id),
      ['call_abc', 'call_4_0_0_1'],
    );
    assert.equal(m[2].content, null);
    assert.deepEqual([m[3].tool_call_id, m[4].tool_call_id], ['call_abc', 'call_4_0_0_1']);
    assert.deepEqual(m[5], { role: 'assistant', content: 'I would rather answer directly.' });
    for (const i of [3, 4, 6]) assert.equal(count(m[i].content ?? ''), 25);
    assert.equal(new Set([m[3].content, m[4].content, m[6].content]).size, 3);
    assert.equal(s2.requests[0].requestedInputTokens, tokensOf(m, 7) + toolsTokens);
    // Tool results are drawn per (request, tool call): request index i of task s is record
    // s x STRIDE + i, and its tool call j draws as id record x 1024 + j.
    const latency = (index: number, j: number) =>
      sampleLength(
        agentScenario(2).agent?.toolLatencyMs as never,
        streamSeed(7, 'agent-tool-latency'),
        (4 * SESSION_ID_STRIDE + index) * 1024 + j,
        0,
      );
    assert.equal(s2.pauseMs, Math.max(latency(0, 0), latency(0, 1), latency(1, 0)));

    const s3 = task.next([
      outcome(0, 500, { content: '', toolCalls: [call('x1', 'list_documents', '{}')] }),
      outcome(0, 500, { content: '', toolCalls: [call('x2', 'run_documents', '{}')] }),
    ]) as ConversationStep;
    assert.equal(s3.requests.length, 1, 'the final answer is one request');
    const final = s3.requests[0];
    assert.equal(final.toolChoice, 'none');
    assert.deepEqual(final.tools, agentTools(3));
    assert.equal(final.requestedOutputTokens, 400);
    assert.equal(final.captureAnswer, true);
    assert.equal(s3.pauseMs, Math.max(latency(2, 0), latency(3, 0)));
    assert.equal(
      roles(final),
      'system,user,assistant,tool,tool,assistant,user,assistant,tool,assistant,tool',
    );
    assert.equal(task.next([outcome(0, 100, { content: 'done', toolCalls: [] })]), undefined);
  });

  test('determinism: the same seed and task id give the same task', () => {
    const answer = (step: number, c: number): Answer => ({
      content: '',
      toolCalls: [call('', 'search_documents', `{"query":"${step}-${c}"}`)],
    });
    const a = play(workload({ scenario: agentScenario(2) }), 9, answer);
    assert.equal(a.length, 3);
    assert.deepEqual(play(workload({ scenario: agentScenario(2) }), 9, answer), a);
    assert.notDeepEqual(play(workload({ scenario: agentScenario(2) }), 10, answer), a);
  });

  test('no tools: no tool_choice either', () => {
    const scenario = agentScenario(1);
    if (scenario.agent) scenario.agent.tools = 0;
    const steps = play(workload({ scenario }), 0);
    assert.equal(steps.length, 3);
    for (const step of steps) {
      assert.equal(step.requests[0].tools, undefined);
      assert.equal(step.requests[0].toolChoice, undefined);
    }
  });
});

test('tool schemas render as json.dumps does in a chat template (tojson)', () => {
  // Python: json.dumps({"type": "function", "function": {"name": "f", "parameters": {...}}})
  assert.equal(
    toolsPromptText([
      {
        type: 'function',
        function: { name: 'f', parameters: { type: 'object', required: ['q'], properties: {} } },
      },
      {
        type: 'function',
        function: { name: 'g', description: 'né', parameters: { n: 1.5, b: true, z: null } },
      },
    ]),
    '{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": ["q"], "properties": {}}}}\n' +
      '{"type": "function", "function": {"name": "g", "description": "né", "parameters": {"n": 1.5, "b": true, "z": null}}}',
  );
});

test('session bounds for the hard deadline: the shape, the longest conversation, the widest trace gap', () => {
  const base: Scenario = {
    name: 's',
    input: { kind: 'fixed', value: 8 },
    output: { kind: 'fixed', value: 8 },
    session: {
      turns: { kind: 'uniform', min: 2, max: 6 },
      thinkTimeMs: { kind: 'fixed', value: 700 },
      history: 'actual',
      systemPromptTokens: 0,
    },
  };
  assert.deepEqual(sessionBounds(base), { steps: 6, pauseMs: 700 });
  const dataset = parseDataset(
    JSON.stringify([
      {
        conversations: [
          { from: 'human', value: 'a' },
          { from: 'gpt', value: 'b' },
        ],
      },
      {
        conversations: ['1', '2', '3'].flatMap((v) => [
          { from: 'human', value: v },
          { from: 'gpt', value: v },
        ]),
      },
    ]),
    'sharegpt',
    'mem',
    { allTurns: true },
  );
  assert.deepEqual(sessionBounds(base, { dataset }), { steps: 3, pauseMs: 700 });
  const trace = parseTrace(
    [
      { at_ms: 0, input_tokens: 4, output_tokens: 2, session_id: 'a' },
      { at_ms: 100, input_tokens: 4, output_tokens: 2, session_id: 'b' },
      { at_ms: 900, input_tokens: 9, output_tokens: 2, session_id: 'a' },
    ]
      .map((l) => JSON.stringify(l))
      .join('\n'),
    { format: 'jsonl', source: 'mem' },
  );
  assert.deepEqual(sessionBounds(base, { traceSessions: traceSessions(trace.entries), speed: 2 }), {
    steps: 2,
    pauseMs: 450,
  });
  const { session: _session, ...plain } = base;
  const agent = findScenario('agent')?.agent as AgentShape;
  assert.deepEqual(sessionBounds({ ...plain, agent }), { steps: 5, pauseMs: 200 });
  assert.deepEqual(sessionBounds(plain), { steps: 1, pauseMs: 0 });
});

describe('agentic traces (issue 55 item 2)', () => {
  test("a call continues its agent's longest history, adds the answers it waits for, and meets the trace's whole-prompt count", () => {
    const { tasks } = parseAgentTrace(readFileSync(fixture('agent-trace.jsonl'), 'utf8'));
    const w = workload({ scenario: chatScenario(), agentTasks: tasks, toolWaitCapMs: 25 });
    const graph = w(0).graph;
    assert.ok(graph);
    const specs = graph.calls.map((_, i) => graph.request(i, []));
    const contents = (s: RequestSpec) => (s.messages ?? []).map((m) => m.content ?? '');
    const tokens = (s: RequestSpec) => contents(s).reduce((n, c) => n + count(c), 0);
    const [plan, searchA, searchB, explore, explore2, merge] = specs;
    // Whole-prompt inputs are met exactly (the overhead included); new_tokens adds that many.
    assert.equal(plan.requestedInputTokens, 120);
    assert.equal(merge.requestedInputTokens, 260);
    assert.equal(explore2.requestedInputTokens, 80);
    for (const s of specs) assert.equal(tokens(s) + 7, s.requestedInputTokens);
    assert.equal(count(contents(searchA).at(-1) as string), 30);
    // Fan-out: both continue plan's prompt and answer, so they share that prefix.
    const planned = [...contents(plan)];
    assert.deepEqual(contents(searchA).slice(0, planned.length), planned);
    assert.deepEqual(contents(searchB).slice(0, planned.length), planned);
    assert.equal(searchA.messages?.[planned.length]?.role, 'assistant');
    assert.ok(searchA.prompt.startsWith(plan.prompt));
    // The sub-agent starts fresh: plan's answer is its task, plan's prompt is not in it.
    assert.equal(explore.messages?.length, 2);
    assert.equal(explore.messages?.[0].content, searchA.messages?.[planned.length]?.content);
    // Fan-in: merge continues search-a (the longer of its agent's) and adds the others' answers.
    assert.deepEqual(contents(merge).slice(0, contents(searchA).length), contents(searchA));
    // Waits are capped (--tool-wait-cap-s): 40 ms recorded, 25 ms sent; roots start at their time.
    assert.deepEqual(
      graph.calls.map((c) => [c.turn, c.call, c.delayMs]),
      [
        [1, 0, 0],
        [2, 0, 25],
        [2, 1, 10],
        [2, 2, 0],
        [3, 0, 20],
        [4, 0, 25],
      ],
    );
    assert.equal(w(1).graph?.calls.length, 2);
    assert.equal(w(2).graph?.calls.length, 0);
    assert.deepEqual(
      sessionBounds(chatScenario(), { agentTasks: tasks, toolWaitCapMs: 25, speed: 2 }),
      {
        steps: 4,
        pauseMs: 20,
      },
    );
  });
});

test('CallGraphRun: a call is due at its last dependency end plus its delay; the chain that ended last carries the waits', () => {
  const calls = [
    { after: [], delayMs: 0, turn: 1, call: 0 },
    { after: [0], delayMs: 0, turn: 2, call: 0 },
    { after: [0], delayMs: 20, turn: 2, call: 1 },
    { after: [2], delayMs: 0, turn: 3, call: 0 },
    { after: [1, 3], delayMs: 30, turn: 4, call: 0 },
  ];
  const graph = { calls, request: () => ({}) as RequestSpec };
  for (const slowUs of [500_000, 28_000]) {
    const run = new CallGraphRun(graph);
    assert.deepEqual(run.start(100), [{ call: 0, atUs: 100 }]);
    assert.deepEqual(run.end(0, 1_000), [
      { call: 1, atUs: 1_000 },
      { call: 2, atUs: 21_000 },
    ]);
    assert.deepEqual(run.end(2, 25_000), [{ call: 3, atUs: 25_000 }]);
    assert.deepEqual(run.end(3, 30_000), []);
    assert.equal(run.finished, false);
    // Call 1 ends at slowUs: merge is due 30 ms after whichever of 1 and 3 ended last.
    assert.deepEqual(run.end(1, slowUs), [{ call: 4, atUs: Math.max(slowUs, 30_000) + 30_000 }]);
    assert.equal(run.chainWaitMs(4), slowUs > 30_000 ? 30 : 50);
    assert.deepEqual(run.end(4, 600_000), []);
    assert.equal(run.finished, true);
  }
});
