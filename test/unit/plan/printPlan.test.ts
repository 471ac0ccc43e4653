/**
 * `plan --print` writes a plan file that `--plan` reads back to the same effective plan: options
 * as commander gives them (text, booleans, lists) go through the printed YAML, the plan-file
 * reader and prepareRun again, and the run plan and simulated engine come out equal.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { planFileOptions } from '../../../src/plan/planFile.js';
import { planFileOf } from '../../../src/plan/printPlan.js';
import { type RunPlan, redactPlan } from '../../../src/plan/runPlan.js';
import type { RunOptions } from '../../../src/session/prepare.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => join(REPO, 'test/fixtures/workload', name);

/** The plan without what the printed file cannot carry: presets' one-line briefs for --help. */
function comparable(plan: RunPlan | undefined) {
  assert.ok(plan);
  return { ...plan, scenarios: plan.scenarios.map(({ brief: _brief, ...s }) => s) };
}

function roundTrip(options: Record<string, unknown>) {
  const first = prepareRun(options as RunOptions);
  assert.deepEqual(first.problems, []);
  const yaml = stringify(planFileOf(options, redactPlan(first.plan as RunPlan)));
  const file = planFileOptions(parse(yaml), 'printed.yaml');
  const again = prepareRun({
    ...file.options,
    ...(file.scenarios ? { planScenarios: file.scenarios } : {}),
  } as RunOptions);
  assert.deepEqual(again.problems, [], yaml);
  return { first, again, yaml };
}

describe('plan --print reads back to the same plan', () => {
  const cases: [string, Record<string, unknown>][] = [
    ['the defaults', {}],
    [
      'an open loop with a duration, presets reshaped by the length flags, a simulated engine',
      {
        rate: '5',
        arrival: 'gamma',
        burstiness: '0.5',
        duration: '30',
        scenario: 'chat,creative',
        inputTokens: 'uniform:100:300',
        sharedPrefix: '64',
        gpu: 'h200',
        tp: '2',
        maxNumSeqs: '64',
        chunkedPrefill: false,
        simulate: true,
        label: '007',
        extraBody: '{"top_p": 0.9}',
        header: ['X-Tenant: a'],
        threshold: ['ttft.p99<500'],
      },
    ],
    [
      'session and agent presets with the session flags, reasoning flags',
      {
        scenario: 'multi-turn,agent',
        turns: 'uniform:2:4',
        thinkTime: '250',
        systemPrompt: '128',
        reasoningEffort: 'high',
        sessions: '12',
        concurrency: '4',
        seed: '7',
      },
    ],
    ['a session scenario alone, counted in sessions by default', { scenario: 'multi-turn' }],
    ['plain and session scenarios together', { scenario: 'chat,agent', requests: '30' }],
    ['every request at once under a cap', { rate: 'inf', maxConcurrency: '4' }],
    [
      'a real server with telemetry',
      {
        url: 'http://127.0.0.1:9/v1',
        model: 'm',
        endpoint: 'completions',
        serverMetrics: false,
        timeout: '30',
        ignoreEos: true,
        warmup: '3',
        tokenizer: 'o200k_base',
      },
    ],
    [
      'an agentic trace with its wait cap (the trace sets the scenario: none is written)',
      { trace: fixture('agent-trace.jsonl'), toolWaitCapS: '0.5', traceSpeed: '2' },
    ],
    [
      'a Mooncake trace windowed, its gaps capped, its block size given',
      {
        trace: fixture('mooncake-synthetic-3881.jsonl'),
        traceWindow: '0:30',
        traceMaxGapS: '1',
        traceBlockTokens: '512',
        maxConcurrency: '8',
      },
    ],
    [
      "a plan file's own scenarios",
      {
        planScenarios: [
          { preset: 'creative' },
          { name: 'rag-lite', 'input-tokens': 'normal:2048:256', 'output-tokens': 128 },
        ],
      },
    ],
  ];
  for (const [name, options] of cases) {
    test(name, () => {
      const { first, again, yaml } = roundTrip(options);
      assert.deepEqual(comparable(again.plan), comparable(first.plan), yaml);
      assert.deepEqual(again.engine, first.engine);
      assert.deepEqual(again.engineFlags, first.engineFlags);
      assert.equal(again.simulate, first.simulate);
    });
  }

  test('a credential header is left out, not sent as a placeholder', () => {
    const { yaml } = roundTrip({ header: ['Authorization: Bearer sk-1', 'X-A: b'] });
    assert.doesNotMatch(yaml, /sk-1|authorization/i);
    assert.match(yaml, /x-a: b/i);
  });
});

describe('a misspelt preset gets a did-you-mean', () => {
  test('in a plan file', () => {
    assert.throws(
      () => planFileOptions({ scenarios: [{ preset: 'creatve' }] }, 'plan.yaml'),
      (err: { problems?: string[] }) =>
        /scenarios\[0\]\.preset: unknown preset "creatve" \(did you mean "creative"\?\)/.test(
          err.problems?.join('\n') ?? '',
        ),
    );
  });
  test('in --scenario', () => {
    const prepared = prepareRun({ scenario: 'chat,sumarize' } as RunOptions);
    assert.match(prepared.problems.join('\n'), /"sumarize" \(did you mean "summarize"\?\)/);
    // Nothing near: no guess.
    const far = prepareRun({ scenario: 'xyzzy' } as RunOptions);
    assert.doesNotMatch(far.problems.join('\n'), /did you mean/);
  });
});

describe('outputs in a plan file', () => {
  test('outputs: and its old name export: are one list, in the order given; printed as outputs:', () => {
    const { options } = planFileOptions(
      { outputs: ['ui=0', 'points=a.jsonl'], export: 'prometheus=0' },
      'plan.yaml',
    );
    assert.deepEqual(options.output, ['ui=0', 'points=a.jsonl', 'prometheus=0']);
    const prepared = prepareRun({ output: ['points=a.jsonl'] } as RunOptions);
    const printed = planFileOf(
      { output: ['points=a.jsonl'] },
      redactPlan(prepared.plan as RunPlan),
    );
    assert.deepEqual(printed.outputs, ['points=a.jsonl']);
  });
});
