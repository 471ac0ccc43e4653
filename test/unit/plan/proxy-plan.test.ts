import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { planFileOptions } from '../../../src/plan/planFile.js';
import { planFileOf } from '../../../src/plan/printPlan.js';
import {
  PlanError,
  parseRunPlan,
  planProxySettings,
  type RunPlanInput,
  redactPlan,
} from '../../../src/plan/runPlan.js';

const SECRET = 'hunter2';

function problems(input: RunPlanInput, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseRunPlan(input, env);
  } catch (err) {
    if (err instanceof PlanError) return err.problems;
    throw err;
  }
  return [];
}

describe('the proxy in a plan', () => {
  test('--proxy URL, --no-proxy (false), or the environment', () => {
    const url = 'https://api.example.com';
    const env = { HTTPS_PROXY: 'http://env.corp:3128', NO_PROXY: 'internal.corp' };
    const flag = parseRunPlan({ url, proxy: `http://me:${SECRET}@flag.corp:8080` }, env);
    assert.deepEqual(planProxySettings(flag, env), {
      http: `http://me:${SECRET}@flag.corp:8080`,
      https: `http://me:${SECRET}@flag.corp:8080`,
      noProxy: 'internal.corp',
    });
    assert.equal(planProxySettings(parseRunPlan({ url, proxy: false }, env), env), undefined);
    assert.equal(planProxySettings(parseRunPlan({ url }, env), env)?.https, 'http://env.corp:3128');
    // The built-in simulator is a child on loopback: never through a proxy.
    assert.equal(planProxySettings(parseRunPlan({}, env), env), undefined);
  });

  test('a proxy that cannot be used is a problem naming where it came from, never its credentials', () => {
    const flagged = problems({ url: 'http://a.example', proxy: `socks5://me:${SECRET}@p:1080` });
    assert.equal(flagged.length, 1);
    assert.match(flagged[0] as string, /^--proxy cannot be used: .*http:\/\/ proxies only/);
    const fromEnv = problems(
      { url: 'https://a.example' },
      { https_proxy: `socks5://me:${SECRET}@p:1080` },
    );
    assert.equal(fromEnv.length, 1);
    assert.match(fromEnv[0] as string, /^HTTPS_PROXY \(from the environment\): .*--no-proxy/);
    assert.doesNotMatch([...flagged, ...fromEnv].join('\n'), new RegExp(SECRET));
    // Not used: the target is listed in NO_PROXY, --no-proxy is given, or it is http://.
    assert.deepEqual(
      problems({ url: 'https://a.example' }, { HTTPS_PROXY: 'socks5://p', NO_PROXY: '*' }),
      [],
    );
    assert.deepEqual(
      problems({ url: 'https://a.example', proxy: false }, { HTTPS_PROXY: 'socks5://p' }),
      [],
    );
    assert.deepEqual(problems({ url: 'http://a.example' }, { HTTPS_PROXY: 'socks5://p' }), []);
  });

  test('the saved and printed plan keep the proxy without its credentials', () => {
    const input = { url: 'http://a.example', proxy: `http://me:${SECRET}@p.corp:3128` };
    const plan = parseRunPlan(input);
    assert.equal(redactPlan(plan).proxy, 'http://p.corp:3128');
    const printed = stringify(planFileOf(input, redactPlan(plan)));
    assert.doesNotMatch(printed, new RegExp(SECRET));
    const file = planFileOptions(parse(printed), 'printed.yaml');
    assert.equal(file.options.proxy, 'http://p.corp:3128');
    // `proxy: false` in a plan file is --no-proxy.
    const off = planFileOptions(parse('url: http://a.example\nproxy: false\n'), 'plan.yaml');
    assert.equal(parseRunPlan(off.options as RunPlanInput).proxy, false);
  });
});
