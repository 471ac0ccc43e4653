/**
 * --tag, --note and --server-info: what is refused (exit 2, naming the flag and the fix), what a
 * plan file may write (text, a list, a mapping), and that `plan --print` reads back the same.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { MAX_NOTE_CHARS, MAX_SERVER_INFO_KEYS, MAX_TAGS } from '../../../src/plan/annotations.js';
import { planFileOptions } from '../../../src/plan/planFile.js';
import { planFileOf } from '../../../src/plan/printPlan.js';
import { parseRunPlan, redactPlan } from '../../../src/plan/runPlan.js';
import { prepareRun, type RunOptions } from '../../../src/session/prepare.js';
import { prepareCapacity } from '../../../src/session/profiles/capacity.js';

function problemsOf(options: Record<string, unknown>): string[] {
  return prepareRun(options as RunOptions).problems;
}

describe('--tag, --note, --server-info', () => {
  test('land in the plan, and so in every manifest', () => {
    const plan = parseRunPlan({
      tag: ['nightly', 'h100', 'team/serving:v2', 'nightly'],
      note: '  after the driver update ',
      serverInfo: ['tp=4', 'vllm-flags=--enable-prefix-caching --max-num-seqs 256'],
    });
    assert.deepEqual(plan.tags, ['nightly', 'h100', 'team/serving:v2']);
    assert.equal(plan.note, 'after the driver update');
    assert.deepEqual(plan.serverInfo, {
      tp: '4',
      'vllm-flags': '--enable-prefix-caching --max-num-seqs 256',
    });
    const stored = redactPlan(plan);
    assert.deepEqual(stored.tags, plan.tags);
    assert.deepEqual(stored.serverInfo, plan.serverInfo);
    assert.deepEqual(parseRunPlan({}).tags, []);
    // Engine flags that count tokens are facts, not credentials.
    assert.deepEqual(parseRunPlan({ serverInfo: ['max-num-batched-tokens=8192'] }).serverInfo, {
      'max-num-batched-tokens': '8192',
    });
  });

  test('bad values are refused, each naming its flag and what to do', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ tag: ['a,b'] }, /^--tag "a,b" may hold only .*give each tag its own --tag/],
      [{ tag: ['has space'] }, /^--tag "has space" may hold only letters/],
      [{ tag: [''] }, /^--tag must not be empty/],
      [{ tag: ['x'.repeat(65)] }, /^--tag .* 65 characters long; a tag holds at most 64/],
      [
        { tag: Array.from({ length: MAX_TAGS + 1 }, (_, i) => `t${i}`) },
        /^--tag is given 17 times; a run carries at most 16 tags/,
      ],
      [{ note: 'two\nlines' }, /^--note must be one line without control characters/],
      [{ note: 'bell\u0007' }, /^--note must be one line/],
      [{ note: 'x'.repeat(MAX_NOTE_CHARS + 1) }, /^--note is 501 characters long/],
      [{ note: '   ' }, /^--note must not be empty/],
      [{ serverInfo: ['tp'] }, /^--server-info "tp" must be KEY=VALUE/],
      [{ serverInfo: ['=4'] }, /^--server-info "=4" must be KEY=VALUE/],
      [{ serverInfo: ['tp='] }, /^--server-info tp has no value: give tp=VALUE/],
      [{ serverInfo: ['api-key=sk-123'] }, /^--server-info api-key: a key named like a credential/],
      [{ serverInfo: ['hf_token=x'] }, /credential is refused/],
      [{ serverInfo: ['tp=4', 'tp=8'] }, /^--server-info tp is given twice: keep one/],
      [{ serverInfo: ['flags=a\u001b[2Jb'] }, /^--server-info flags: the value must be one line/],
      [{ serverInfo: [`v=${'x'.repeat(201)}`] }, /^--server-info v: the value is 201 characters/],
      [
        { serverInfo: Array.from({ length: MAX_SERVER_INFO_KEYS + 1 }, (_, i) => `k${i}=1`) },
        /gives 33 keys; a run carries at most 32/,
      ],
    ];
    for (const [options, expected] of cases) {
      const problems = problemsOf(options);
      assert.equal(problems.length, 1, JSON.stringify({ options, problems }));
      assert.match(problems[0], expected);
    }
    // A secret's value is never echoed back in the message.
    assert.doesNotMatch(problemsOf({ serverInfo: ['api-key=sk-123'] })[0], /sk-123/);
  });

  test('a plan file gives tags as text or a list, server-info as text, a list or a mapping', () => {
    const one = planFileOptions({ tags: 'nightly', 'server-info': 'tp=4', note: 42 }, 'p.yaml');
    assert.deepEqual(one.options, { tag: ['nightly'], serverInfo: ['tp=4'], note: '42' });
    const mapping = planFileOptions(
      { tags: ['a', 'b'], 'server-info': { tp: 4, 'prefix-caching': true } },
      'p.yaml',
    );
    assert.deepEqual(mapping.options, {
      tag: ['a', 'b'],
      serverInfo: ['tp=4', 'prefix-caching=true'],
    });
    assert.throws(
      () => planFileOptions({ 'server-info': { tp: [4] } }, 'p.yaml'),
      /server-info: must be KEY=VALUE text, a list of it, or a mapping/,
    );
  });

  test('plan --print writes them back, and the printed plan reads back the same', () => {
    const options = {
      tag: ['nightly', 'h100'],
      note: 'first of the series',
      serverInfo: ['tp=4', 'gpu=H100x8'],
    };
    const first = prepareRun(options as RunOptions);
    assert.deepEqual(first.problems, []);
    const printed = planFileOf(options, redactPlan(first.plan as NonNullable<typeof first.plan>));
    assert.deepEqual(printed.tags, ['nightly', 'h100']);
    assert.equal(printed.note, 'first of the series');
    assert.deepEqual(printed['server-info'], { tp: '4', gpu: 'H100x8' });
    const file = planFileOptions(parse(stringify(printed)), 'printed.yaml');
    const again = prepareRun(file.options as RunOptions);
    assert.deepEqual(again.problems, []);
    assert.deepEqual(again.plan?.tags, first.plan?.tags);
    assert.equal(again.plan?.note, first.plan?.note);
    assert.deepEqual(again.plan?.serverInfo, first.plan?.serverInfo);
  });

  test('capacity takes them as run does', () => {
    const ok = prepareCapacity({ tag: ['nightly'], note: 'n', serverInfo: ['tp=2'] }, {});
    assert.deepEqual(ok.problems, []);
    assert.deepEqual(ok.run.tags, ['nightly']);
    assert.equal(ok.run.note, 'n');
    assert.deepEqual(ok.run.serverInfo, { tp: '2' });
    const bad = prepareCapacity({ tag: ['a b'], serverInfo: ['password=x'] }, {});
    assert.equal(bad.problems.length, 2);
    assert.match(bad.problems[0], /^--tag "a b" may hold only/);
    assert.match(bad.problems[1], /^--server-info password: a key named like a credential/);
  });
});
