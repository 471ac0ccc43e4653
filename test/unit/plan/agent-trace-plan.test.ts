/**
 * `--trace FILE` with an agentic trace (issue 55 item 2): told by content, it becomes a session
 * workload of the trace's tasks, started at their times; options that would shape the workload
 * are refused, and `--tool-wait-cap-s` is refused with any other trace.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { agentTraceSource, parseRunPlan, redactPlan } from '../../../src/plan/runPlan.js';
import { SESSION_ID_STRIDE } from '../../../src/workload/conversations.js';
import { describeScenario } from '../../../src/workload/scenarios.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => join(REPO, 'test/fixtures/workload', name);

test('an agentic trace runs its tasks as sessions, each at its first call', () => {
  const plan = parseRunPlan({
    trace: fixture('agent-trace.jsonl'),
    traceSpeed: 2,
    toolWaitCapS: 0.025,
  });
  assert.deepEqual(
    plan.scenarios.map((s) => s.name),
    ['agent-trace'],
  );
  assert.equal(plan.sessions, 2);
  // Its placeholder lengths are not said as the workload's (the manifest's scenario, plan).
  assert.equal(
    describeScenario(plan.scenarios[0]),
    "agent-trace: an agentic trace's tasks, each call sent once the calls it waits for have ended",
  );
  assert.equal(plan.trace?.agent?.format, 'infergauge');
  assert.equal(plan.trace?.entries.length, 0);
  assert.equal(plan.load.mode, 'open');
  assert.deepEqual(plan.load.mode === 'open' ? plan.load.trace?.timesMs : undefined, [0, 500]);
  const source = agentTraceSource(plan);
  assert.equal(source.agentTasks?.length, 2);
  assert.equal(source.toolWaitCapMs, 25);
  // The manifest keeps the cap, not the trace's calls.
  assert.deepEqual(redactPlan(plan).trace, {
    path: fixture('agent-trace.jsonl'),
    entries: [],
    toolWaitCapS: 0.025,
  });
  // The other formats are told too.
  const weka = parseRunPlan({ trace: fixture('weka-one-subagent.json') });
  assert.equal(weka.trace?.agent?.format, 'weka');
  const graph = parseRunPlan({ trace: fixture('guidellm-graph.jsonl') });
  assert.equal(graph.trace?.agent?.format, 'guidellm');
  // A single-request trace is not agentic, and has nothing for agentTraceSource.
  const mooncake = parseRunPlan({ trace: fixture('mooncake.jsonl') });
  assert.equal(mooncake.trace?.agent, undefined);
  assert.deepEqual(agentTraceSource(mooncake), {});
});

test('what would shape the workload is refused with an agentic trace; the cap needs one', () => {
  assert.throws(
    () =>
      parseRunPlan({
        trace: fixture('agent-trace.jsonl'),
        scenario: 'chat',
        inputTokens: 100,
      }),
    (err: Error) => {
      assert.match(err.message, /--scenario cannot be combined with an agentic --trace/);
      assert.match(err.message, /--input-tokens cannot be combined with an agentic --trace/);
      return true;
    },
  );
  assert.throws(
    () => parseRunPlan({ trace: fixture('mooncake.jsonl'), toolWaitCapS: 5 }),
    /--tool-wait-cap-s applies to an agentic trace/,
  );
  assert.throws(
    () => parseRunPlan({ trace: fixture('agent-trace-cycle.jsonl') }),
    /--trace: .*has a cycle of waits/s,
  );
});

test('a task of more calls than a session sends is said to be cut, not cut silently', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ig-agent-cut-'));
  try {
    const path = join(dir, 'long.jsonl');
    const lines = [
      '{"session":"short","call":"a","at_ms":0,"input_tokens":4,"output_tokens":1}',
      '{"session":"long","call":"c0","at_ms":0,"input_tokens":4,"output_tokens":1}',
    ];
    for (let i = 1; i <= SESSION_ID_STRIDE; i++) {
      lines.push(
        `{"session":"long","call":"c${i}","after":["c${i - 1}"],"new_tokens":1,"output_tokens":1}`,
      );
    }
    writeFileSync(path, lines.join('\n'));
    const plan = parseRunPlan({ trace: path });
    assert.equal(plan.trace?.notes?.length, 1);
    assert.match(
      plan.trace?.notes?.[0] ?? '',
      /1 of the trace's tasks have more than 10000 calls \(task "long": 10001\).*only the first 10000/,
    );
    assert.equal(parseRunPlan({ trace: fixture('agent-trace.jsonl') }).trace?.notes, undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--tool-wait-cap-s without a trace is refused, not ignored', () => {
  assert.throws(
    () => parseRunPlan({ toolWaitCapS: 5 }),
    (err: { problems?: string[] }) =>
      /--tool-wait-cap-s applies only with --trace/.test(err.problems?.join('\n') ?? ''),
  );
});
