/**
 * Sessions of calls that wait for named calls (issue 55 item 2, an agentic trace's
 * dependencies): a call goes out as soon as the calls it waits for have ended plus its tool
 * wait, not when the slowest call of a step ends; live against a scripted loopback server and in
 * virtual time, in the same order.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import type { RequestRecord } from '../../../src/record.js';
import { EngineModel } from '../../../src/sim/engineModel.js';
import { simulateRun } from '../../../src/sim/virtual.js';
import { type AgentTask, parseAgentTrace } from '../../../src/workload/agentTrace.js';
import {
  type ConversationWorkload,
  createConversationWorkload,
  SESSION_ID_STRIDE,
} from '../../../src/workload/conversations.js';
import { createPromptFactory, type PromptFactory } from '../../../src/workload/prompts.js';
import { findScenario, type Scenario } from '../../../src/workload/scenarios.js';
import { createTokenizer } from '../../../src/workload/tokenizer.js';
import { runAgainst } from '../../helpers/run.js';
import {
  chatEvent,
  DONE,
  type ScriptedRequest,
  startScriptedServer,
  usageEvent,
} from '../../helpers/scriptedServer.js';

/**
 * plan fans out to a (slow: 200 output tokens) and b (after a 20 ms tool wait); d follows b;
 * merge waits for a and d, then 30 ms. d must go out long before a ends.
 */
const TRACE = [
  { call: 'plan', at_ms: 0, input_tokens: 40, output_tokens: 4 },
  { call: 'a', after: ['plan'], wait_ms: 0, new_tokens: 10, output_tokens: 200 },
  { call: 'b', after: ['plan'], wait_ms: 20, new_tokens: 10, output_tokens: 4 },
  { call: 'd', after: ['b'], wait_ms: 0, new_tokens: 10, output_tokens: 4 },
  { call: 'merge', after: ['a', 'd'], wait_ms: 30, input_tokens: 400, output_tokens: 4 },
]
  .map((c) => JSON.stringify({ session: 's', ...c }))
  .join('\n');
const NAMES = ['plan', 'a', 'b', 'd', 'merge'];

let tasks: AgentTask[];
let prompts: PromptFactory;
let scenario: Scenario;

before(async () => {
  tasks = parseAgentTrace(TRACE).tasks;
  assert.deepEqual(
    tasks[0].calls.map((c) => c.id),
    NAMES,
  );
  prompts = await createPromptFactory(await createTokenizer('words'), { seed: 3 });
  scenario = findScenario('multi-turn') as Scenario;
});

const workload = (): ConversationWorkload =>
  createConversationWorkload({ scenario, prompts, seed: 7, agentTasks: tasks });

const name = (r: RequestRecord) => NAMES[r.id % SESSION_ID_STRIDE];
const byName = (records: RequestRecord[]) => new Map(records.map((r) => [name(r), r]));

/** Holds each answer 1 ms per requested output token, so `a` is the slow one. */
function reply(request: ScriptedRequest) {
  const tokens = Number(request.body.max_tokens ?? request.body.max_completion_tokens ?? 1);
  return {
    steps: [
      { write: chatEvent({ content: 'x' }) },
      { wait: tokens },
      { write: usageEvent(3, 1) },
      { write: DONE },
    ],
  };
}

describe('sessions of dependent calls', () => {
  test('live: each call goes out once what it waits for has ended, plus its wait, and no sooner', async () => {
    const server = await startScriptedServer(reply);
    try {
      const { records, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        load: { mode: 'closed', concurrency: 1 },
        requests: 1,
        engine: { nextRequest: undefined, nextSession: workload() },
      });
      assert.equal(records.length, 5);
      const r = byName(records);
      const get = (n: string) => r.get(n) as RequestRecord;
      const [plan, a, b, d, merge] = NAMES.map(get);
      assert.ok(a.sentAt >= plan.endAt, 'a waits for plan');
      assert.ok(b.sentAt >= plan.endAt + 20, `b waits 20 ms after plan: ${b.sentAt - plan.endAt}`);
      assert.ok(d.sentAt >= b.endAt, 'd waits for b');
      // Sent as its own dependency ended, not with the slowest call of plan's fan-out.
      assert.ok(d.sentAt < a.endAt, `d at ${d.sentAt}, a ended at ${a.endAt}`);
      const last = Math.max(a.endAt, d.endAt);
      assert.ok(merge.sentAt >= last + 30, `merge ${merge.sentAt - last} ms after its last wait`);
      assert.deepEqual(
        records.map((x) => [name(x), x.turn, x.call, x.sessionDone]),
        [
          ['plan', 1, 0, undefined],
          ['a', 2, 0, undefined],
          ['b', 2, 1, undefined],
          ['d', 3, 0, undefined],
          ['merge', 4, 0, true],
        ],
      );
      const order = [...records].sort((x, y) => x.sentAt - y.sentAt).map(name);
      assert.deepEqual(order, NAMES);
      // merge's last dependency was a (plan, then a after 0 ms): 30 ms of the task waited on tools.
      assert.equal(merge.taskToolWaitMs, 30);
      assert.equal(summary.sessions?.agent?.toolWaitMs?.max, 30);
      assert.equal(summary.sessions?.agent?.completed, 1);
    } finally {
      await server.close();
    }
  });

  test('a failed call ends its task: calls in flight finish, none is sent after it', async () => {
    const server = await startScriptedServer((request) =>
      request.id % SESSION_ID_STRIDE === NAMES.indexOf('b')
        ? { status: 500, headers: { 'content-type': 'application/json' }, steps: [{ write: '{}' }] }
        : reply(request),
    );
    try {
      const { records, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        load: { mode: 'closed', concurrency: 1 },
        requests: 1,
        engine: { nextRequest: undefined, nextSession: workload() },
      });
      assert.deepEqual(records.map(name), ['plan', 'a', 'b']);
      assert.equal(records.find((r) => name(r) === 'b')?.status, 500);
      assert.ok(records.every((r) => r.sessionDone === undefined));
      assert.equal(summary.sessions?.failed, 1);
    } finally {
      await server.close();
    }
  });

  test('virtual time: the same order, each call due to the µs at its last dependency end plus its wait', () => {
    const records: RequestRecord[] = [];
    simulateRun({
      engine: new EngineModel({
        model: findModelPreset('llama-3-8b') as ModelSpec,
        gpu: findGpuPreset('h100') as GpuSpec,
        prefixCaching: true,
      }),
      load: { mode: 'closed', concurrency: 1 },
      requests: 1,
      warmupRequests: 0,
      seed: 7,
      endpoint: 'chat',
      nextSession: workload(),
      onRecord: (x) => records.push(x),
    });
    assert.equal(records.length, 5);
    const r = byName(records);
    const get = (n: string) => r.get(n) as RequestRecord;
    const us = (ms: number) => Math.round(ms * 1000);
    for (const [i, call] of tasks[0].calls.entries()) {
      const record = get(NAMES[i]);
      if (call.after.length === 0) continue;
      const due = Math.max(...call.after.map((j) => us(get(NAMES[j]).endAt))) + call.waitMs * 1000;
      assert.equal(us(record.sentAt), due, NAMES[i]);
    }
    assert.ok(get('d').sentAt < get('a').endAt);
    assert.deepEqual([...records].sort((x, y) => x.sentAt - y.sentAt).map(name), NAMES);
    assert.equal(
      records
        .filter((x) => x.sessionDone)
        .map(name)
        .join(),
      'merge',
    );
    // Calls after the same call share its prompt and answer as a prefix: b and a hit the cache.
    assert.ok((get('b').inputTokens ?? 0) > 40);
  });
});
