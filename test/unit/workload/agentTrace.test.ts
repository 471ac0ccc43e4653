/**
 * Agentic traces (issue 55 item 2): infergauge's format, the Weka traces AIPerf replays and
 * GuideLLM's conversation graphs read into one model, and every bad reference refused with its
 * line.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  agentTraceFormat,
  isAgentTrace,
  parseAgentTrace,
  readAgentTrace,
} from '../../../src/workload/agentTrace.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => join(REPO, 'test/fixtures/workload', name);
const text = (name: string) => readFileSync(fixture(name), 'utf8');

test('the format is told by content, and single-request traces are not agentic', () => {
  assert.equal(agentTraceFormat(text('agent-trace.jsonl')), 'infergauge');
  assert.equal(agentTraceFormat(text('weka-one-subagent.json')), 'weka');
  assert.equal(agentTraceFormat(text('guidellm-graph.jsonl')), 'guidellm');
  for (const name of ['mooncake.jsonl', 'generic.jsonl', 'sessions.jsonl', 'azure.csv']) {
    assert.equal(isAgentTrace(text(name)), false, name);
  }
});

test('infergauge format: fan-out, a sub-agent and a fan-in, in dependency order', () => {
  const trace = readAgentTrace(fixture('agent-trace.jsonl'));
  assert.equal(trace.format, 'infergauge');
  assert.deepEqual(
    trace.tasks.map((t) => [t.sessionId, t.startMs, t.calls.length]),
    [
      ['task-1', 0, 6],
      ['7', 500, 2],
    ],
  );
  const [task] = trace.tasks;
  const ids = task.calls.map((c) => c.id);
  assert.deepEqual(ids, ['plan', 'search-a', 'search-b', 'explore', 'explore-2', 'merge']);
  const merge = task.calls[5];
  assert.deepEqual(
    merge.after.map((i) => ids[i]),
    ['search-a', 'search-b', 'explore-2'],
  );
  assert.equal(merge.waitMs, 30);
  assert.equal(merge.inputTokens, 260);
  assert.deepEqual(
    task.calls.map((c) => c.step),
    [1, 2, 2, 2, 3, 4],
  );
  assert.equal(task.calls[3].agent, 'explorer');
  assert.equal(task.calls[1].newTokens, 30);
  assert.equal(task.calls[0].startMs, 0);
});

test('calls written before what they wait for are reordered, not refused', () => {
  const lines = [
    '{"session": "s", "call": "b", "after": ["a"], "wait_ms": 5, "input_tokens": 20, "output_tokens": 2}',
    '{"session": "s", "call": "a", "at_ms": 3, "input_tokens": 10, "output_tokens": 2}',
  ];
  const [task] = parseAgentTrace(lines.join('\n')).tasks;
  assert.deepEqual(
    task.calls.map((c) => [c.id, c.after]),
    [
      ['a', []],
      ['b', [0]],
    ],
  );
});

test('a cycle is refused with the calls in it and their lines', () => {
  assert.throws(
    () => readAgentTrace(fixture('agent-trace-cycle.jsonl')),
    (err: Error) => {
      assert.match(err.message, /line 2: session "s" has a cycle of waits among calls/);
      assert.match(err.message, /"b" \(line 2\), "c" \(line 3\), "d" \(line 4\)/);
      assert.doesNotMatch(err.message, /"a" \(line 1\)/);
      return true;
    },
  );
});

test('duplicate ids, unknown and self references, waits on later calls, typos: each with its line', () => {
  assert.throws(
    () => readAgentTrace(fixture('agent-trace-bad.jsonl')),
    (err: Error) => {
      const m = err.message;
      assert.match(m, /line 2: session "s" already has call "a" \(line 1\)/);
      assert.match(m, /line 3: waits for call "zzz", which session "s" does not have/);
      assert.match(
        m,
        /line 4: waits for call "a" \(line 1\), which started later \(100 ms > 50 ms\)/,
      );
      assert.match(m, /line 5: waits for itself/);
      return true;
    },
  );
  // Fields are checked first: a line with a bad field is not looked at for references.
  assert.throws(
    () =>
      parseAgentTrace(
        '{"session": "s", "call": "e", "at_ms": 0, "input_tokens": 5, "new_tokens": 5, "output_tokens": 2, "wiat_ms": 3}',
      ),
    (err: Error) => {
      assert.match(err.message, /line 1: unknown field "wiat_ms"/);
      assert.match(err.message, /line 1: give exactly one of input_tokens/);
      return true;
    },
  );
  assert.throws(
    () => parseAgentTrace('{"session": "s", "call": "a", "input_tokens": 1, "output_tokens": 1}'),
    /line 1: waits for no call, so it needs its start time \(at_ms\)/,
  );
  assert.throws(
    () =>
      parseAgentTrace(
        '{"session": "s", "call": "a", "at_ms": 0, "input_tokens": 1, "output_tokens": -1}',
      ),
    /line 1: output_tokens must be a whole number/,
  );
});

test("Weka (AIPerf's agentic replay): the sub-agent forks after the call before it and the next call joins it", () => {
  const trace = readAgentTrace(fixture('weka-one-subagent.json'));
  assert.equal(trace.format, 'weka');
  const [task] = trace.tasks;
  assert.equal(task.sessionId, 'trace_sa');
  const ids = task.calls.map((c) => c.id);
  assert.deepEqual(ids, ['main:1', 'agent_001:2', 'main:3']);
  const [first, sub, last] = task.calls;
  assert.equal(first.inputTokens, 200);
  assert.equal(first.outputTokens, 30);
  assert.deepEqual(sub.after, [0]);
  assert.equal(sub.agent, 'agent_001');
  // think_time 0 recorded: the sub-agent starts as soon as its parent's call ends.
  assert.equal(sub.waitMs, 0);
  assert.deepEqual(last.after, [0, 1]);
  assert.equal(last.waitMs, 500);
  assert.equal(last.inputTokens, 400);
  // Without think_time the wait is the gap after the latest end of what the call waits for: the
  // sub-agent's (2 + 0.5 s), not the main call's before it (0 + 1 s).
  const o = JSON.parse(text('weka-one-subagent.json'));
  for (const r of o.requests) delete r.think_time;
  for (const r of o.requests[1].requests) delete r.think_time;
  const [bare] = parseAgentTrace(JSON.stringify(o)).tasks;
  assert.equal(bare.calls[1].waitMs, 1000); // 2 s - (0 + 1 s)
  assert.equal(bare.calls[2].waitMs, 3500); // 6 s - (2 + 0.5 s)
});

test('GuideLLM conversation graphs: parents are the waits, agent ids the sub-agents, prompt counts the new text', () => {
  const trace = readAgentTrace(fixture('guidellm-graph.jsonl'));
  assert.equal(trace.format, 'guidellm');
  const [task] = trace.tasks;
  const ids = task.calls.map((c) => c.id);
  assert.deepEqual(ids, ['main_0', 'main_1', 'branch_0_0', 'branch_0_1', 'main_2']);
  const main2 = task.calls[4];
  assert.deepEqual(
    main2.after.map((i) => ids[i]),
    ['main_1', 'branch_0_1'],
  );
  assert.equal(task.calls[2].agent, 'worker');
  assert.equal(task.calls[0].newTokens, 64);
  assert.equal(task.calls[0].inputTokens, undefined);
  assert.equal(main2.step, 4);
});

test('a Weka trace with a bad request names it by number', () => {
  const bad = JSON.stringify({
    id: 'x',
    block_size: 64,
    requests: [
      { t: 0, type: 'n', in: 10, out: 1 },
      { t: 1, type: 'q', in: 10, out: 1 },
      { t: 2, type: 'n', in: 'ten', out: 1 },
      { t: 3, type: 'subagent', agent_id: 'x', requests: [{ t: 3, type: 'subagent' }] },
    ],
  });
  assert.throws(
    () => parseAgentTrace(bad),
    (err: Error) => {
      assert.match(err.message, /request 2: type must be "n", "s" or "subagent", got "q"/);
      assert.match(err.message, /request 3: in must be a whole number/);
      assert.match(err.message, /request 4: sub-agent "x" holds a sub-agent: not read/);
      return true;
    },
  );
});

test('a trace of 150,000 tasks, and a session whose last call waits for 150,000 others, are read', () => {
  // Each once overflowed the stack (a spread of every task's start into Math.min) or took
  // minutes (a sorted ready list and a scanned wait list per call).
  const n = 150_000;
  const call = (session: string, id: string, at: number) =>
    `{"session":"${session}","call":"${id}","at_ms":${at},"input_tokens":1,"output_tokens":1}`;
  const tasks = parseAgentTrace(
    Array.from({ length: n }, (_, i) => call(`s${i}`, 'c', i)).join('\n'),
  );
  assert.equal(tasks.tasks.length, n);
  assert.equal(tasks.tasks[n - 1].startMs, n - 1);
  const lines = Array.from({ length: n }, (_, i) => call('s', `c${i}`, n - i));
  lines.push(
    JSON.stringify({
      session: 's',
      call: 'join',
      after: Array.from({ length: n }, (_, i) => `c${i}`),
      new_tokens: 1,
      output_tokens: 1,
    }),
  );
  const [task] = parseAgentTrace(lines.join('\n')).tasks;
  assert.equal(task.calls.length, n + 1);
  const join_ = task.calls[n];
  assert.equal(join_.id, 'join');
  assert.equal(join_.step, 2);
  assert.equal(join_.after.length, n);
  // The task starts at its earliest call (the last line's at_ms, 1 ms).
  assert.equal(task.calls[n - 1].startMs, 0);
  assert.equal(task.calls[0].startMs, n - 1);
});
