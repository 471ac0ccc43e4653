/**
 * Session and reasoning options in a plan (issue 16): what the presets and flags build, and the
 * combinations refused before anything is sent, each naming the flag and the fix.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { planFileOptions, scenarioFromPlan } from '../../../src/plan/planFile.js';
import { parseRunPlan, type RunPlanInput } from '../../../src/plan/runPlan.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { planProblems } from '../../helpers/plan.js';

const problems = planProblems;

describe('session scenarios in a plan', () => {
  test('presets and flags: sessions counted, shapes and reasoning applied', () => {
    const plan = parseRunPlan({
      scenario: 'multi-turn,agent,reasoning',
      turns: 'uniform:2:4',
      thinkTime: '0',
      history: 'reference',
      systemPrompt: '100',
      thinking: 'off',
      reasoningEffort: 'low',
      sessions: '7',
      concurrency: '3',
    });
    assert.equal(plan.sessions, 7);
    assert.equal(plan.requests, 200, 'the reasoning scenario keeps the request count');
    const [multi, agent, reasoning] = plan.scenarios;
    assert.deepEqual(multi.session, {
      turns: { kind: 'uniform', min: 2, max: 4 },
      thinkTimeMs: { kind: 'fixed', value: 0 },
      history: 'reference',
      systemPromptTokens: 100,
    });
    assert.equal(agent.agent?.systemPromptTokens, 100);
    assert.equal(agent.agent?.fanOut, 2);
    for (const s of plan.scenarios) {
      assert.deepEqual(s.reasoning, { effort: 'low', enableThinking: false });
    }
    assert.equal(reasoning.session, undefined);
  });

  test('each misuse is refused with the flag and the fix', () => {
    const cases: [RunPlanInput, RegExp][] = [
      [{ sessions: '4' }, /--sessions counts the sessions of a session scenario/],
      [{ turns: '3' }, /--turns shapes multi-turn sessions: add --scenario multi-turn/],
      [{ systemPrompt: '64' }, /--system-prompt applies to session scenarios/],
      [{ scenario: 'multi-turn', requests: '10' }, /use --sessions N/],
      [
        { scenario: 'agent', url: 'http://127.0.0.1:1', backend: 'tgi' },
        /sends conversations as chat messages: use --backend openai --endpoint chat/,
      ],
      [{ scenario: 'multi-turn', endpoint: 'completions' }, /--endpoint chat/],
      [{ scenario: 'multi-turn', history: 'yesterday' }, /--history must be actual or reference/],
      [{ scenario: 'reasoning', thinking: 'maybe' }, /--thinking must be on or off/],
      [
        { scenario: 'reasoning', reasoningEffort: 'max' },
        /--reasoning-effort must be low, medium or high/,
      ],
    ];
    for (const [input, expected] of cases) {
      const said = problems(input);
      assert.ok(
        said.some((p) => expected.test(p)),
        `${JSON.stringify(input)}: ${said.join(' | ')}`,
      );
    }
  });

  test('a session scenario with a JSONL dataset is refused; in virtual time it runs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ig-sessions-'));
    const jsonl = join(dir, 'd.jsonl');
    writeFileSync(jsonl, '{"prompt": "hi"}\n');
    assert.ok(
      problems({ scenario: 'multi-turn', dataset: jsonl }).some((p) =>
        /must be ShareGPT conversations/.test(p),
      ),
    );
    const prepared = prepareRun({ scenario: 'multi-turn', simulate: true, sessions: '2' });
    assert.deepEqual(prepared.problems, []);
  });

  test('a plan file shapes sessions over a preset, field by field', () => {
    const file = planFileOptions(
      {
        scenarios: [
          { preset: 'multi-turn', session: { turns: 3, 'think-time-ms': 'uniform:0:50' } },
          { name: 'tools', 'input-tokens': 64, 'output-tokens': 16, agent: { 'fan-out': 3 } },
          { preset: 'chat', reasoning: { effort: 'high' } },
        ],
      },
      'plan.yaml',
    );
    const [multi, tools, chat] = (file.scenarios ?? []).map((s, i) => scenarioFromPlan(s, i));
    assert.deepEqual(multi.session, {
      turns: { kind: 'fixed', value: 3 },
      thinkTimeMs: { kind: 'uniform', min: 0, max: 50 },
      history: 'actual',
      systemPromptTokens: 512,
    });
    assert.equal(tools.agent?.fanOut, 3);
    assert.equal(tools.agent?.tools, 8, "the agent preset's other fields");
    assert.deepEqual(chat.reasoning, { effort: 'high' });
    assert.throws(
      () => planFileOptions({ scenarios: [{ preset: 'agent', agent: { fanout: 2 } }] }, 'p.yaml'),
      /unknown field "scenarios\[0\]\.agent\.fanout"/,
    );
    assert.throws(
      () =>
        scenarioFromPlan(
          { name: 'both', 'input-tokens': 8, 'output-tokens': 8, session: {}, agent: {} },
          0,
        ),
      /has both session and agent/,
    );
  });
});
