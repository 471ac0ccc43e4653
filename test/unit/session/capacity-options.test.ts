import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { prepareCapacity } from '../../../src/session/profiles/capacity.js';

describe('capacity options, checked by the library', () => {
  test('every problem at once, each naming its flag; no key is read from an unnamed variable', () => {
    const { problems, run } = prepareCapacity(
      { apiKeyEnv: 'NOT_SET', url: 'http://user:pw@localhost:8000', timeScale: '2' },
      {},
    );
    assert.equal(problems.length, 3, problems.join('\n'));
    assert.match(problems[0], /^--time-scale applies to the built-in simulator/);
    assert.match(problems[1], /^--api-key-env names NOT_SET, which is not set/);
    assert.match(problems[2], /^--url holds credentials/);
    assert.equal(run.apiKey, undefined);
  });

  test('the proxy as run takes it: --proxy, --no-proxy, the environment, never the simulator', () => {
    const env = { HTTP_PROXY: 'http://env.corp:3128', NO_PROXY: 'internal.corp' };
    const url = 'http://gpu-host:8000';
    assert.deepEqual(prepareCapacity({ url }, env).run.proxy, {
      http: 'http://env.corp:3128',
      noProxy: 'internal.corp',
    });
    assert.equal(prepareCapacity({ url, proxy: false }, env).run.proxy, undefined);
    assert.equal(prepareCapacity({ url, proxy: 'p:8080' }, env).run.proxy?.http, 'p:8080');
    assert.equal(prepareCapacity({}, env).run.proxy, undefined);
    const bad = prepareCapacity({ url, proxy: 'socks5://me:hunter2@p:1080' }, {}).problems;
    assert.equal(bad.length, 1);
    assert.match(bad[0] as string, /^--proxy cannot be used: .*http:\/\/ proxies only/);
    assert.doesNotMatch(bad[0] as string, /hunter2/);
  });

  test('a batch no client can hold is refused with the bound and why', () => {
    for (const [o, flag] of [
      [{ batches: '1,100000' }, '--batches'],
      [{ maxBatch: '100000' }, '--max-batch'],
    ] as const) {
      const { problems } = prepareCapacity({ url: 'http://localhost:8000', ...o }, {});
      assert.equal(problems.length, 1, problems.join('\n'));
      assert.match(problems[0], new RegExp(`^${flag} must be at most 65536 \\(got 100000\\)`));
    }
  });

  test('the default key is OPENAI_API_KEY; a --url run predicts only with a model given', () => {
    const { problems, run } = prepareCapacity(
      { url: 'http://localhost:8000' },
      { OPENAI_API_KEY: 'sk-test' },
    );
    assert.deepEqual(problems, []);
    assert.equal(run.apiKey, 'sk-test');
    assert.equal(run.url, 'http://localhost:8000');
    assert.equal(run.simulatorArgs, undefined);
    assert.equal(run.prediction, undefined);
  });

  test('the built-in simulator: its arguments, and the prediction of the same engine', () => {
    const { problems, run, settings } = prepareCapacity(
      { model: 'llama-3-8b', timeScale: '2', inputTokens: '1024' },
      {},
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(run.simulatorArgs?.slice(0, 4), [
      '--model',
      'llama-3-8b',
      '--time-scale',
      '2',
    ]);
    assert.equal(settings.inputTokens, 1024);
    assert.ok((run.prediction?.maxBatch ?? 0) > 0);
  });
});

test('--prompt-salt: a fresh salt per search unless given; a bad one is a problem', () => {
  const fresh = [
    prepareCapacity({}, {}).settings.promptSalt,
    prepareCapacity({}, {}).settings.promptSalt,
  ];
  assert.ok(fresh.every((s) => Number.isInteger(s) && s > 0));
  assert.notEqual(fresh[0], fresh[1]);
  assert.equal(prepareCapacity({ promptSalt: '9' }, {}).settings.promptSalt, 9);
  const { problems } = prepareCapacity({ promptSalt: '4294967296' }, {});
  assert.match(
    problems.join('\n'),
    /^--prompt-salt must be a whole number >= 0 and <= 4294967295 \(got "4294967296"\)/m,
  );
});
