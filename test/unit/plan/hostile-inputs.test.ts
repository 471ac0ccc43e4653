/**
 * Issue 15, the pure cores behind bad input: the one number reading of options, the plan's
 * redaction of credentials (defence in depth), and trace notes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseFlagNumber } from '../../../src/flagNumber.js';
import { parseRunPlan, redactPlan } from '../../../src/plan/runPlan.js';
import { parseTrace } from '../../../src/workload/trace.js';

describe('parseFlagNumber', () => {
  test('an empty value, Infinity, NaN and hex are no numbers; bounds say what is allowed', () => {
    for (const text of ['', '  ', 'Infinity', '1e309', 'NaN', '0x10', '1_000', 'abc']) {
      assert.ok('problem' in parseFlagNumber(text), JSON.stringify(text));
    }
    assert.match((parseFlagNumber('', {}) as { problem: string }).problem, /not an empty value/);
    assert.deepEqual(parseFlagNumber(' 42 ', { integer: true, min: 0 }), { value: 42 });
    assert.deepEqual(parseFlagNumber('2.5e1'), { value: 25 });
    assert.deepEqual(parseFlagNumber('1.5', { integer: true }), {
      problem: 'must be a whole number (got 1.5)',
    });
    assert.deepEqual(parseFlagNumber('0', { above: 0 }), {
      problem: 'must be a number above 0 (got 0)',
    });
    assert.deepEqual(parseFlagNumber(70000, { min: 0, max: 65535, integer: true }), {
      problem: 'must be a whole number >= 0 and <= 65535 (got 70000)',
    });
  });
});

describe('redactPlan', () => {
  test('hides secret-named --extra-body fields at any depth and userinfo in every URL', () => {
    const plan = parseRunPlan({
      url: 'http://127.0.0.1:8000',
      extraBody: JSON.stringify({
        top_p: 1,
        api_key: 'sk-1',
        apiKey: 'sk-2',
        nested: { Authorization: 'Bearer x', list: [{ client_secret: 's', n: 3 }] },
        password: 'p',
      }),
    });
    // Refused when given; a plan built another way (the library) is still redacted.
    plan.url = 'http://user:pw@127.0.0.1:8000/v1';
    if (plan.telemetry) {
      plan.telemetry.metricsUrl = 'http://m:pw@127.0.0.1:8000/metrics';
      plan.telemetry.dcgmUrl = 'https://d:pw@gpu:9400/metrics';
    }
    const redacted = redactPlan(plan);
    assert.deepEqual(redacted.extraBody, {
      top_p: 1,
      api_key: '<redacted>',
      apiKey: '<redacted>',
      nested: { Authorization: '<redacted>', list: [{ client_secret: '<redacted>', n: 3 }] },
      password: '<redacted>',
    });
    assert.equal(redacted.url, 'http://127.0.0.1:8000/v1');
    assert.equal(redacted.telemetry?.metricsUrl, 'http://127.0.0.1:8000/metrics');
    assert.equal(redacted.telemetry?.dcgmUrl, 'https://gpu:9400/metrics');
    assert.doesNotMatch(JSON.stringify(redacted), /pw@|sk-|Bearer/);
    assert.equal(plan.extraBody?.api_key, 'sk-1', 'the plan that is sent is untouched');
  });

  test('parseRunPlan refuses credentials in --url and --metrics-url', () => {
    assert.throws(
      () => parseRunPlan({ url: 'http://a:b@h:1', metricsUrl: 'http://c:d@h:2/metrics' }),
      (err: Error & { problems?: string[] }) =>
        err.problems?.filter((p) => /holds credentials/.test(p)).length === 2,
    );
  });
});

describe('trace notes', () => {
  test('sorted and shifted times are said; an ordered trace from 0 says nothing', () => {
    const notes: string[] = [];
    const { entries } = parseTrace(
      '{"at_ms": 50, "input_tokens": 1, "output_tokens": 1}\n{"at_ms": -20, "input_tokens": 1, "output_tokens": 1}\n',
      { source: 't.jsonl', onNote: (n) => notes.push(n) },
    );
    assert.deepEqual(
      entries.map((e) => e.atMs),
      [0, 70],
    );
    assert.equal(notes.length, 2);
    assert.match(notes[0], /1 of 2 entries come earlier/);
    assert.match(notes[1], /shifted by \+20 ms/);
    const quiet: string[] = [];
    parseTrace('{"at_ms": 0, "input_tokens": 1, "output_tokens": 1}\n', {
      onNote: (n) => quiet.push(n),
    });
    assert.deepEqual(quiet, []);
  });
});
