import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ChatMessage, RequestSpec } from '../../src/backends/types.js';
import type { RequestRecord } from '../../src/record.js';
import { type SimulatorProcess, spawnSimulator } from '../../src/session/simulator.js';
import type { ConversationWorkload } from '../../src/workload/conversations.js';
import { findScenario, type Scenario } from '../../src/workload/scenarios.js';
import { createTokenizer } from '../../src/workload/tokenizer.js';
import { splitWords } from '../../src/workload/words.js';
import { loadWorkload } from '../../src/workload/workload.js';
import { runAgainst } from '../helpers/run.js';
import { fetchTruth, startSim } from '../helpers/sim.js';

/**
 * Issue 16, end to end against the simulator: multi-turn sessions whose turn k carries the whole
 * history exactly (the model's own answers, counted under a real tokenizer by the client and in
 * words by the server), built by the conversation workload and run by the load generator.
 */

/** The workload as a worker thread builds it, and every request it made, by record order. */
async function sessionWorkload(scenario: Scenario, tokenizer = 'o200k_base') {
  const built = await loadWorkload({
    scenario,
    tokenizer,
    tokenizerOptions: {},
    seed: 11,
    promptSalt: 0,
    promptOverheadTokens: 0,
  });
  assert.ok('nextSession' in built);
  const sent = new Map<number, RequestSpec[]>();
  const nextSession: ConversationWorkload = (id) => {
    const inner = built.nextSession(id);
    return {
      next(previous) {
        const step = inner.next(previous);
        if (step) sent.set(id, [...(sent.get(id) ?? []), ...step.requests]);
        return step;
      },
    };
  };
  return { nextSession, sent };
}

const text = (m: ChatMessage) => m.content ?? '';

describe('multi-turn sessions against the simulator', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim();
  });
  after(() => sim.stop());

  test('turn k sends the system prompt, every earlier turn and answer, and the new message', async () => {
    const base = findScenario('multi-turn') as Scenario;
    const scenario: Scenario = {
      ...base,
      input: { kind: 'fixed', value: 24 },
      output: { kind: 'fixed', value: 12 },
      session: {
        ...(base.session as NonNullable<Scenario['session']>),
        turns: { kind: 'fixed', value: 5 },
        thinkTimeMs: { kind: 'fixed', value: 0 },
        systemPromptTokens: 40,
      },
    };
    const { nextSession, sent } = await sessionWorkload(scenario);
    const { records } = await runAgainst(sim.url, {
      target: { endpoint: 'chat', ignoreEos: true },
      load: { mode: 'closed', concurrency: 2 },
      requests: 2,
      engine: { nextRequest: undefined, nextSession },
    });
    assert.equal(records.length, 10);
    assert.ok(records.every((r) => r.error === undefined));
    const truth = new Map((await fetchTruth(sim.url)).map((t) => [Number(t.requestId), t]));
    const o200k = await createTokenizer('o200k_base');
    const count = (s: string) => (o200k.countSync as (t: string) => number)(s);
    for (const [sessionId, specs] of sent) {
      assert.equal(specs.length, 5);
      const session = records.filter((r) => r.sessionId === sessionId).sort((a, b) => a.id - b.id);
      for (let k = 0; k < 5; k++) {
        const messages = specs[k].messages as ChatMessage[];
        // system, then (user, assistant) x k, then the new user message.
        assert.deepEqual(
          messages.map((m) => m.role),
          ['system', ...Array(k).fill(['user', 'assistant']).flat(), 'user'],
        );
        // The client counts what it sends under the real tokenizer: 40 + 24 per user message,
        // and the answers as they came.
        const answers = messages.filter((m) => m.role === 'assistant').map(text);
        assert.equal(
          session[k].requestedInputTokens,
          40 + 24 * (k + 1) + answers.reduce((n, a) => n + count(a), 0),
        );
        for (const m of messages.filter((m) => m.role !== 'assistant')) {
          assert.equal(count(text(m)), m.role === 'system' ? 40 : 24);
        }
        if (k > 0) {
          // The history is the previous turn's messages plus the answer the server streamed.
          const previous = specs[k - 1].messages as ChatMessage[];
          assert.deepEqual(messages.slice(0, previous.length), previous);
          const answer = text(messages[previous.length]);
          const served = truth.get(session[k - 1].id);
          assert.equal(splitWords(answer).length, served?.outputTokens);
          assert.equal(served?.outputTokens, 12);
        }
        // The server processed exactly those messages (it counts words).
        const words = messages.reduce((n, m) => n + splitWords(text(m)).length, 0);
        assert.equal(truth.get(session[k].id)?.inputTokens, words);
        assert.equal(session[k].inputTokens, words);
      }
    }
  });
});

/** A multi-turn scenario of `turns` turns with no think time. */
function multiTurn(o: { turns: number; input: number; output: number; system: number }): Scenario {
  const base = findScenario('multi-turn') as Scenario;
  return {
    ...base,
    input: { kind: 'fixed', value: o.input },
    output: { kind: 'fixed', value: o.output },
    session: {
      ...(base.session as NonNullable<Scenario['session']>),
      turns: { kind: 'fixed', value: o.turns },
      thinkTimeMs: { kind: 'fixed', value: 0 },
      systemPromptTokens: o.system,
    },
  };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const ttft = (r: RequestRecord) => (r.firstTokenAt as number) - r.sentAt;

test('prefix caching: turn 2+ hits the previous prompt and answer, and its TTFT falls', async () => {
  const scenario = multiTurn({ turns: 5, input: 512, output: 16, system: 2048 });
  const ttftByCaching: Record<string, { first: number; later: number }> = {};
  for (const caching of [true, false]) {
    const server = await spawnSimulator(
      caching ? ['--enable-prefix-caching'] : ['--no-enable-prefix-caching'],
    );
    try {
      const { nextSession } = await sessionWorkload(scenario, 'words');
      const { records } = await runAgainst(server.url, {
        target: { endpoint: 'chat', ignoreEos: true },
        load: { mode: 'closed', concurrency: 2 },
        requests: 2,
        engine: { nextRequest: undefined, nextSession },
      });
      assert.equal(records.length, 10);
      const truth = new Map((await fetchTruth(server.url)).map((t) => [Number(t.requestId), t]));
      for (const r of records) {
        const cached = truth.get(r.id)?.cachedPromptTokens ?? 0;
        if (!caching) assert.equal(cached, 0);
        // Turn 1 shares at most the system prompt with the other session's (sent together).
        if (!caching || r.turn === 1) continue;
        // Every full 16-token block of the previous turn's prompt and answer is a hit, but for
        // the answer's last token, which was sampled and never run through the model.
        const previous = records.find(
          (p) => p.sessionId === r.sessionId && p.turn === (r.turn as number) - 1,
        );
        const before = (previous?.inputTokens as number) + (previous?.outputTokens as number);
        assert.equal(cached, Math.floor((before - 1) / 16) * 16, `turn ${r.turn}`);
      }
      ttftByCaching[String(caching)] = {
        first: mean(records.filter((r) => r.turn === 1).map(ttft)),
        later: mean(records.filter((r) => (r.turn as number) > 1).map(ttft)),
      };
    } finally {
      await server.stop();
    }
  }
  const on = ttftByCaching.true;
  const off = ttftByCaching.false;
  // Turn 5 prefills about 4,600 tokens without the cache and about 530 with it.
  assert.ok(
    on.later < 0.6 * off.later,
    `TTFT of turns 2-5: ${on.later} ms cached, ${off.later} ms not`,
  );
});

test('agent task: fan-out tool calls, tool results paired by id, end-to-end = steps + tools', async () => {
  const server = await spawnSimulator([]);
  try {
    const base = findScenario('agent') as Scenario;
    const toolLatencyMs = 50;
    const scenario: Scenario = {
      ...base,
      input: { kind: 'fixed', value: 32 },
      output: { kind: 'fixed', value: 8 },
      agent: {
        steps: { kind: 'fixed', value: 3 },
        fanOut: 2,
        systemPromptTokens: 64,
        tools: 2,
        toolLatencyMs: { kind: 'fixed', value: toolLatencyMs },
        toolOutputTokens: { kind: 'fixed', value: 16 },
        answerTokens: { kind: 'fixed', value: 12 },
      },
    };
    const { nextSession, sent } = await sessionWorkload(scenario, 'words');
    const { records } = await runAgainst(server.url, {
      target: { endpoint: 'chat', ignoreEos: true },
      load: { mode: 'closed', concurrency: 2 },
      requests: 2,
      engine: { nextRequest: undefined, nextSession },
    });
    assert.equal(records.length, 14);
    // The tool schemas, calls and results count the same for the client and the server.
    for (const r of records) assert.equal(r.inputTokens, r.requestedInputTokens);
    for (const sessionId of [0, 1]) {
      const task = records.filter((r) => r.sessionId === sessionId).sort((a, b) => a.id - b.id);
      assert.deepEqual(
        task.map((r) => [r.turn, r.call]),
        [
          [1, 0],
          [1, 1],
          [2, 0],
          [2, 1],
          [3, 0],
          [3, 1],
          [4, undefined],
        ],
      );
      // Steps 1-3 answer with a streamed tool call (ttftc); the last with the answer text.
      for (const r of task.slice(0, 6))
        assert.ok(r.firstToolCallAt !== undefined && r.outputTokens === 8);
      assert.ok(task[6].firstContentAt !== undefined && task[6].firstToolCallAt === undefined);
      assert.equal(task[6].sessionDone, true);
      const steps = [1, 2, 3, 4].map((k) => task.filter((r) => r.turn === k));
      let stepsMs = 0;
      let sendDelayMs = 0;
      for (const [k, step] of steps.entries()) {
        const sent0 = Math.min(...step.map((r) => r.sentAt));
        stepsMs += Math.max(...step.map((r) => r.endAt)) - sent0;
        if (k === 0) continue;
        // Due exactly one tool latency after the previous step's last answer.
        const due = Math.max(...steps[k - 1].map((r) => r.endAt)) + toolLatencyMs;
        for (const r of step) assert.ok(Math.abs(r.scheduledAt - due) < 0.002);
        sendDelayMs += sent0 - due;
      }
      const taskMs = task[6].endAt - task[0].sentAt;
      const toolsMs = 3 * toolLatencyMs;
      // The identity holds to the microsecond; what timers add is the send delay alone.
      assert.ok(Math.abs(taskMs - (stepsMs + toolsMs + sendDelayMs)) < 0.01);
      assert.ok(sendDelayMs >= 0 && sendDelayMs < 3 * 25, `timer lateness ${sendDelayMs} ms`);
      // Step 2 sent each call's tool result right after the call, answering it by its id.
      const step2 = (sent.get(sessionId) as RequestSpec[])[2].messages as ChatMessage[];
      const calls = step2.filter((m) => m.role === 'assistant').flatMap((m) => m.tool_calls ?? []);
      const results = step2.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
      assert.equal(calls.length, 2);
      assert.deepEqual(
        results,
        calls.map((c) => c.id),
      );
      for (const c of calls) assert.match(c.id, /^chatcmpl-tool-/);
    }
  } finally {
    await server.stop();
  }
});
