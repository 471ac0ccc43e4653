/**
 * Bounded log-normal lengths (`lognormal:MEAN:SD:MIN:MAX`, truncated by re-drawing) and the
 * `sharegpt` scenario preset (docs/workloads.md, "Length distributions" and "ShareGPT-like
 * lengths").
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRunPlan } from '../../../src/plan/runPlan.js';
import {
  formatLengthDistribution,
  lognormalParameters,
  meanOf,
  normalDeviate,
  parseLengthDistribution,
  requestRng,
  sampleLength,
  streamSeed,
} from '../../../src/workload/distributions.js';
import { createPromptFactory } from '../../../src/workload/prompts.js';
import { findScenario, maximumLength } from '../../../src/workload/scenarios.js';
import { createTokenizer } from '../../../src/workload/tokenizer.js';
import { createWorkload } from '../../../src/workload/workload.js';

const N = 20_000;

function draws(text: string, seed = 7, min = 1): number[] {
  const d = parseLengthDistribution(text);
  return Array.from({ length: N }, (_, id) => sampleLength(d, seed, id, min));
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('bounded log-normal', () => {
  test('every draw lies within [MIN, MAX] and the sample mean is the truncated mean', () => {
    const text = 'lognormal:256:512:16:1024';
    const xs = draws(text);
    assert.ok(Math.min(...xs) >= 16, `min ${Math.min(...xs)}`);
    assert.ok(Math.max(...xs) <= 1024, `max ${Math.max(...xs)}`);
    const expected = meanOf(parseLengthDistribution(text));
    // The tail past 1,024 is cut, so the mean sent is below the 256 written.
    assert.ok(expected < 256, `truncated mean ${expected}`);
    const sample = mean(xs);
    assert.ok(Math.abs(sample / expected - 1) < 0.03, `sample ${sample} vs ${expected}`);
  });

  test('a bound truncates (re-draws), it does not clamp: no pile-up at MAX', () => {
    // About 12 % of lognormal(256, 512) lies above 600: clamped, that share would sit at 600.
    const xs = draws('lognormal:256:512::600');
    const atMax = xs.filter((x) => x === 600).length / N;
    const nearMax = xs.filter((x) => x === 599).length / N;
    assert.ok(atMax < 0.002, `share at the bound ${atMax}`);
    assert.ok(atMax < 3 * nearMax + 0.001, `bound ${atMax} vs its neighbour ${nearMax}`);
  });

  test('without bounds the lengths are exactly those drawn before bounds existed', () => {
    const d = parseLengthDistribution('lognormal:256:128');
    const { mu, sigma } = lognormalParameters(256, 128);
    const seed = streamSeed(3, 'input');
    for (let id = 0; id < 500; id++) {
      const old = Math.max(
        1,
        Math.round(Math.exp(mu + sigma * normalDeviate(requestRng(seed, id)))),
      );
      assert.equal(sampleLength(d, seed, id), old);
    }
    assert.equal(formatLengthDistribution(d), 'lognormal:256:128');
  });

  test('the written form reads back, with either bound left empty', () => {
    for (const text of [
      'lognormal:256:128:16:4096',
      'lognormal:256:128::4096',
      'lognormal:256:128:16',
    ]) {
      assert.equal(formatLengthDistribution(parseLengthDistribution(text)), text);
    }
    assert.equal(maximumLength(parseLengthDistribution('lognormal:256:128::4096')), 4096);
    assert.equal(
      maximumLength(parseLengthDistribution('lognormal:256:128')),
      Number.POSITIVE_INFINITY,
    );
  });

  test('bad bounds are refused with the reason', () => {
    const cases: [string, RegExp][] = [
      ['lognormal:256:128:300:4096', /min 300 is above the mean 256/],
      ['lognormal:256:128:16:200', /max 200 is below the mean 256/],
      ['lognormal:256:128:16.5:4096', /min 16.5 must be a whole number/],
      ['lognormal:256:128:16:4096.5', /max 4096.5 must be a whole number/],
      ['lognormal:100:10000:90:110', /keep only .*% of lognormal\(100, 10000\)/],
      ['lognormal:256:128:1:2:3', /lognormal takes 2 to 4 values, got 5/],
    ];
    for (const [text, pattern] of cases) {
      assert.throws(() => parseLengthDistribution(text), pattern, text);
    }
  });

  test('a bad bound on the command line names the flag', () => {
    assert.throws(
      () => parseRunPlan({ url: 'http://127.0.0.1:1', outputTokens: 'lognormal:256:128:16:200' }),
      (err: Error) => /--output-tokens .*max 200 is below the mean 256/.test(err.message),
    );
  });
});

describe('sharegpt preset', () => {
  const scenario = findScenario('sharegpt');

  test("is a preset whose lengths stay within the benchmark sampler's filter", () => {
    assert.ok(scenario, 'sharegpt preset');
    const inputs = Array.from({ length: N }, (_, id) => sampleLength(scenario.input, 11, id));
    const outputs = Array.from({ length: N }, (_, id) => sampleLength(scenario.output, 12, id));
    assert.ok(Math.min(...inputs) >= 4 && Math.max(...inputs) <= 1024);
    assert.ok(Math.min(...outputs) >= 4 && Math.max(...outputs) <= 1024);
    for (let i = 0; i < N; i++) assert.ok(inputs[i] + outputs[i] <= 2048);
    // The published means of vLLM's ShareGPT sample: 217.4 in, 197.8 out.
    assert.ok(Math.abs(meanOf(scenario.input) - 217.4) < 1, `input mean ${meanOf(scenario.input)}`);
    assert.ok(Math.abs(meanOf(scenario.output) - 197.8) < 1, `output ${meanOf(scenario.output)}`);
    assert.ok(Math.abs(mean(inputs) / 217.4 - 1) < 0.03, `sampled input mean ${mean(inputs)}`);
    assert.ok(Math.abs(mean(outputs) / 197.8 - 1) < 0.03, `sampled output mean ${mean(outputs)}`);
    // Right-skewed like chat data: the median below the mean.
    const sorted = [...inputs].sort((a, b) => a - b);
    assert.ok(sorted[N / 2] < mean(inputs) * 0.9, `median ${sorted[N / 2]}`);
  });

  test('drives a seeded workload: the same seed asks the same lengths, another seed others', async () => {
    assert.ok(scenario);
    const tokenizer = await createTokenizer('o200k_base');
    const build = async (seed: number) =>
      createWorkload({
        scenario,
        seed,
        promptSalt: 0,
        prompts: await createPromptFactory(tokenizer, { seed: streamSeed(seed, 'prompts') }),
      });
    const a = await build(1);
    const b = await build(1);
    const c = await build(2);
    const lengths = (w: typeof a, id: number) => [
      w(id).requestedInputTokens,
      w(id).requestedOutputTokens,
    ];
    for (const id of [0, 1, 2, 50]) assert.deepEqual(lengths(a, id), lengths(b, id));
    assert.notDeepEqual(
      [0, 1, 2, 3].map((id) => lengths(a, id)),
      [0, 1, 2, 3].map((id) => lengths(c, id)),
    );
    // The prompt is exactly as long as asked, under the run's tokenizer.
    const spec = a(5);
    assert.equal(tokenizer.countSync?.(spec.prompt), spec.requestedInputTokens);
  });

  test('is accepted by --scenario', () => {
    const plan = parseRunPlan({ url: 'http://127.0.0.1:1', scenario: 'sharegpt' });
    assert.equal(plan.scenarios[0].name, 'sharegpt');
  });
});
