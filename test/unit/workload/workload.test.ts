/**
 * Workloads the field uses: seeded length distributions, gamma and ramped arrivals, trace
 * replay (Mooncake, Azure, generic JSONL) and datasets (ShareGPT, JSONL, text). Every random
 * check is seeded, and its tolerance is a few standard errors of the statistic it checks.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { OpenLoadSpec } from '../../../src/load.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { describeLoad } from '../../../src/report/terminal.js';
import { createRng } from '../../../src/rng.js';
import {
  arrivalScheduleForLoad,
  createArrivalSchedule,
  openLoadProblems,
  rampIntegral,
} from '../../../src/workload/arrivals.js';
import { parseDataset, readDataset } from '../../../src/workload/datasets.js';
import {
  formatLengthDistribution,
  type LengthDistribution,
  lengthDistributionProblem,
  meanOf,
  parseLengthDistribution,
  sampleLength,
  streamSeed,
} from '../../../src/workload/distributions.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';
import { parseTrace, readTrace, traceLoad, traceReplay } from '../../../src/workload/trace.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => join(REPO, 'test/fixtures/workload', name);

function moments(xs: readonly number[]): { mean: number; sd: number } {
  const mean = xs.reduce((a, x) => a + x, 0) / xs.length;
  const variance = xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (xs.length - 1);
  return { mean, sd: Math.sqrt(variance) };
}

function correlation(xs: readonly number[], ys: readonly number[]): number {
  const mx = moments(xs);
  const my = moments(ys);
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += (xs[i] - mx.mean) * (ys[i] - my.mean);
  return s / ((xs.length - 1) * mx.sd * my.sd);
}

const N = 20_000;
const draws = (d: LengthDistribution, seed = 11, min?: number) =>
  Array.from({ length: N }, (_, id) => sampleLength(d, seed, id, min));

/** Mean within 4 standard errors of meanOf; every draw a whole number inside [lo, hi]. */
function checkDraws(d: LengthDistribution, lo: number, hi: number, min?: number): number[] {
  const xs = draws(d, 11, min);
  for (const x of xs) {
    assert.ok(Number.isInteger(x), `${formatLengthDistribution(d)}: ${x} is not whole`);
    assert.ok(x >= lo && x <= hi, `${formatLengthDistribution(d)}: ${x} outside [${lo}, ${hi}]`);
  }
  const { mean, sd } = moments(xs);
  const expected = meanOf(d, min);
  const se = sd / Math.sqrt(N);
  assert.ok(
    Math.abs(mean - expected) <= 4 * se + 1e-9,
    `${formatLengthDistribution(d)}: mean ${mean} vs ${expected} (SE ${se})`,
  );
  return xs;
}

describe('length distributions', () => {
  test('parse and format: each syntax, round trip', () => {
    const cases: [string, LengthDistribution][] = [
      ['256', { kind: 'fixed', value: 256 }],
      ['uniform:128:512', { kind: 'uniform', min: 128, max: 512 }],
      ['normal:256:64', { kind: 'normal', mean: 256, sd: 64 }],
      ['normal:256:64:128:512', { kind: 'normal', mean: 256, sd: 64, min: 128, max: 512 }],
      ['normal:256:64:200', { kind: 'normal', mean: 256, sd: 64, min: 200 }],
      ['normal:256:64::300', { kind: 'normal', mean: 256, sd: 64, max: 300 }],
      ['poisson:256', { kind: 'poisson', mean: 256 }],
      ['lognormal:256:128', { kind: 'lognormal', mean: 256, sd: 128 }],
      ['empirical:12,40,300', { kind: 'empirical', values: [12, 40, 300] }],
    ];
    for (const [text, d] of cases) {
      assert.deepEqual(parseLengthDistribution(text), d, text);
      assert.equal(formatLengthDistribution(d), text);
    }
    assert.deepEqual(parseLengthDistribution(' Uniform:1:2 '), { kind: 'uniform', min: 1, max: 2 });
  });

  test('bad text: the error names it and shows the syntax', () => {
    for (const [text, why] of [
      ['uniform:512:128', /min 512 is above max 128/],
      ['uniform:1', /takes 2 values, got 1/],
      ['normal:256', /takes 2 to 4 values/],
      ['normal:256:-1', /sd a number >= 0/],
      ['normal:5:1:100', /keep only .*% of normal\(5, 1\)/],
      ['poisson:abc', /mean must be a number, got "abc"/],
      ['poisson:0', /mean must be > 0/],
      ['gaussian:1:2', /unknown kind "gaussian"/],
      ['12.5', /whole number/],
      ['', /must be a number|unknown kind/],
      ['empirical:1,,3', /value 2 must be a number/],
    ] as const) {
      assert.throws(
        () => parseLengthDistribution(text),
        (err: Error) =>
          err.message.includes(`"${text}"`) &&
          why.test(err.message) &&
          err.message.includes('uniform:MIN:MAX'),
        text,
      );
    }
  });

  test('fixed and uniform: bounds, integers, moments over 20,000 draws', () => {
    assert.deepEqual(new Set(draws({ kind: 'fixed', value: 300 })), new Set([300]));
    const xs = checkDraws({ kind: 'uniform', min: 128, max: 512 }, 128, 512);
    // Both ends are reached; the variance is that of a discrete uniform, (n^2 - 1) / 12.
    assert.equal(Math.min(...xs), 128);
    assert.equal(Math.max(...xs), 512);
    const { sd } = moments(xs);
    assert.ok(Math.abs(sd / Math.sqrt((385 ** 2 - 1) / 12) - 1) < 0.03, `sd ${sd}`);
  });

  test('normal: moments; truncated by re-drawing, with no pile-up at the bounds', () => {
    const plain = checkDraws({ kind: 'normal', mean: 256, sd: 64 }, 1, Number.POSITIVE_INFINITY);
    assert.ok(Math.abs(moments(plain).sd / 64 - 1) < 0.03);
    // Lengths are at least 1: the cut at 0.5 lifts the mean by 64 φ(3.99) / (1 - Φ(-3.99)).
    const lift = (64 * Math.exp(-0.5 * (255.5 / 64) ** 2)) / Math.sqrt(2 * Math.PI);
    assert.ok(Math.abs(meanOf({ kind: 'normal', mean: 256, sd: 64 }) - 256 - lift) < 1e-4);
    const d: LengthDistribution = { kind: 'normal', mean: 256, sd: 64, min: 200, max: 300 };
    const xs = checkDraws(d, 200, 300);
    // Truncated, the mean moves (toward the nearer bound's far side) and meanOf knows it.
    assert.ok(meanOf(d) < 256 && meanOf(d) > 245, `meanOf ${meanOf(d)}`);
    // Re-drawing, not clamping: the bound values are about as frequent as their neighbours.
    const count = (v: number) => xs.filter((x) => x === v).length;
    assert.ok(count(200) < 2 * count(201) + 20, `${count(200)} at 200, ${count(201)} at 201`);
    assert.ok(count(300) < 2 * count(299) + 20, `${count(300)} at 300, ${count(299)} at 299`);
  });

  test('poisson: mean and variance both the mean (large and small means); clamp to min', () => {
    const big = checkDraws({ kind: 'poisson', mean: 256 }, 1, Number.POSITIVE_INFINITY);
    assert.ok(Math.abs(moments(big).sd ** 2 / 256 - 1) < 0.06, `variance ${moments(big).sd ** 2}`);
    const small = checkDraws({ kind: 'poisson', mean: 4 }, 0, Number.POSITIVE_INFINITY, 0);
    assert.ok(Math.abs(moments(small).sd ** 2 / 4 - 1) < 0.06);
    assert.ok(small.includes(0));
    // With the default min of 1, zeros become 1 and meanOf adds exactly P(0) = e^-4.
    const clamped = checkDraws({ kind: 'poisson', mean: 4 }, 1, Number.POSITIVE_INFINITY);
    assert.ok(!clamped.includes(0));
    assert.ok(Math.abs(meanOf({ kind: 'poisson', mean: 4 }) - (4 + Math.exp(-4))) < 1e-9);
  });

  test('lognormal: the mean and sd given are those of the lengths', () => {
    const d: LengthDistribution = { kind: 'lognormal', mean: 256, sd: 128 };
    const xs = checkDraws(d, 1, Number.POSITIVE_INFINITY);
    assert.ok(Math.abs(moments(xs).sd / 128 - 1) < 0.05, `sd ${moments(xs).sd}`);
    // Right-skewed: the median is below the mean (exp(mu) = 256 / sqrt(1.25) = 229).
    const median = [...xs].sort((a, b) => a - b)[N / 2];
    assert.ok(Math.abs(median - 229) < 5, `median ${median}`);
  });

  test('empirical: only listed values, equally likely', () => {
    const values = [10, 20, 30, 1000];
    const xs = checkDraws({ kind: 'empirical', values }, 10, 1000);
    for (const v of values) {
      const share = xs.filter((x) => x === v).length / N;
      // Binomial SE of a share of 1/4 over 20,000: 0.0031.
      assert.ok(Math.abs(share - 0.25) < 0.0124, `${v}: ${share}`);
    }
  });

  test('deterministic in (seed, id) whatever the order of calls; streams independent', () => {
    const d: LengthDistribution = { kind: 'lognormal', mean: 500, sd: 300 };
    const forward = Array.from({ length: 500 }, (_, id) => sampleLength(d, 5, id));
    const order = Array.from({ length: 500 }, (_, i) => i);
    const rng = createRng(1);
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
    for (const id of order) assert.equal(sampleLength(d, 5, id), forward[id]);
    assert.notDeepEqual(
      Array.from({ length: 50 }, (_, id) => sampleLength(d, 6, id)),
      forward.slice(0, 50),
    );
    // Input and output streams of one seed, and neighbouring ids, are uncorrelated.
    const u: LengthDistribution = { kind: 'uniform', min: 1, max: 10_000 };
    const input = draws(u, streamSeed(9, 'input'));
    const output = draws(u, streamSeed(9, 'output'));
    const bound = 4 / Math.sqrt(N);
    assert.ok(Math.abs(correlation(input, output)) < bound);
    assert.ok(Math.abs(correlation(input.slice(1), input.slice(0, -1))) < bound);
    assert.notEqual(streamSeed(9, 'input'), streamSeed(9, 'output'));
    assert.equal(streamSeed(9, 'input'), streamSeed(9, 'input'));
  });

  test('a normal whose bounds a caller min pushes out of reach clamps instead of looping', () => {
    const d: LengthDistribution = { kind: 'normal', mean: 10, sd: 1 };
    assert.equal(lengthDistributionProblem(d), undefined);
    assert.equal(sampleLength(d, 1, 1, 500), 500);
    assert.equal(meanOf(d, 500), 500);
  });
});

describe('arrival processes', () => {
  test('poisson without options: the same times as before this change', () => {
    // The schedule as it was: exponential gaps of mean 1000 / rate, the first at 0.
    const rng = createRng(3);
    let at = 0;
    const old = Array.from({ length: 200 }, (_, i) => {
      if (i > 0) at += rng.exponential(100);
      return at;
    });
    const next = createArrivalSchedule(10, 'poisson', 3);
    assert.deepEqual(
      Array.from({ length: 200 }, () => next()),
      old,
    );
  });

  for (const burstiness of [0.25, 0.5, 1, 4]) {
    test(`gamma, burstiness ${burstiness}: mean gap 1/rate, CV 1/sqrt(burstiness)`, () => {
      const n = 50_000;
      const next = createArrivalSchedule(10, 'gamma', 21, { burstiness });
      const times = Array.from({ length: n + 1 }, () => next());
      assert.equal(times[0], 0);
      const gaps = times.slice(1).map((t, i) => t - times[i]);
      assert.ok(gaps.every((g) => g >= 0));
      const { mean, sd } = moments(gaps);
      const cv = 1 / Math.sqrt(burstiness);
      // SE of the mean: 100 cv / sqrt(n); of the CV, about cv sqrt((2 + 6 / k) / 4n) for gamma(k).
      assert.ok(Math.abs(mean - 100) < (4 * 100 * cv) / Math.sqrt(n), `mean gap ${mean}`);
      const cvSe = cv * Math.sqrt((2 + 6 / burstiness) / (4 * n));
      assert.ok(Math.abs(sd / mean - cv) < 5 * cvSe, `CV ${sd / mean} vs ${cv}`);
    });
  }

  test('ramp 10 -> 1000 requests/s over 100 s: arrivals in the first and last tenth match the integrated rate', () => {
    const ramp = { fromRate: 10, seconds: 100 };
    const next = createArrivalSchedule(1000, 'poisson', 8, { rampUp: ramp });
    const times: number[] = [];
    for (let t = next(); t < 110_000; t = next()) times.push(t);
    assert.equal(times[0], 0);
    const between = (a: number, b: number) => times.filter((t) => t >= a && t < b).length;
    const expected = (a: number, b: number) =>
      rampIntegral(10, 1000, 100, b / 1000) - rampIntegral(10, 1000, 100, a / 1000);
    for (const [a, b] of [
      [0, 10_000],
      [90_000, 100_000],
      [100_000, 110_000],
    ]) {
      const mean = expected(a, b);
      // Poisson counts: sd = sqrt(mean). The first arrival at 0 adds one.
      assert.ok(
        Math.abs(between(a, b) - mean) < 4 * Math.sqrt(mean) + 1,
        `[${a}, ${b}) ms: ${between(a, b)} arrivals, expected ${mean}`,
      );
    }
    assert.ok(Math.abs(expected(0, 10_000) - 595) < 1e-9);
  });

  test('ramp with constant arrivals: arrival k is exactly where the integrated rate reaches k', () => {
    for (const [from, to] of [
      [1, 8],
      [0, 8],
      [8, 2],
      [5, 5],
    ]) {
      const next = createArrivalSchedule(to, 'constant', 1, {
        rampUp: { fromRate: from, seconds: 60 },
      });
      for (let k = 0; k < 700; k++) {
        const t = next();
        assert.ok(
          Math.abs(rampIntegral(from, to, 60, t / 1000) - k) < 1e-9,
          `${from}->${to} k=${k}`,
        );
      }
    }
  });

  test('trace: times scaled by speed, relative to the first, then Infinity', () => {
    const next = createArrivalSchedule(0, 'trace', 1, {
      trace: { timesMs: [1000, 1000, 1500, 4000], speed: 2 },
    });
    assert.deepEqual(
      Array.from({ length: 6 }, () => next()),
      [0, 0, 250, 1500, Infinity, Infinity],
    );
    const half = traceLoad(
      [0, 100, 300].map((atMs) => ({ atMs, inputTokens: 1, outputTokens: 1 })),
      { speed: 0.5 },
    );
    const slow = arrivalScheduleForLoad(half, 1);
    assert.deepEqual([slow(), slow(), slow(), slow()], [0, 200, 600, Infinity]);
    assert.ok(Math.abs(half.rate - 2 / 0.6) < 1e-9, 'the described rate is the replay rate');
  });

  test('invalid arrival options are errors that say what is wrong', () => {
    const base: OpenLoadSpec = { mode: 'open', rate: 4, arrival: 'poisson' };
    const cases: [OpenLoadSpec, RegExp][] = [
      [{ ...base, rate: 0 }, /rate must be a number > 0/],
      [{ ...base, burstiness: 0.5 }, /burstiness applies only to gamma/],
      [{ ...base, arrival: 'gamma', burstiness: 0 }, /burstiness must be a number > 0/],
      [{ ...base, rampUp: { fromRate: -1, seconds: 0 } }, /fromRate must be .* >= 0.*seconds must/],
      [{ ...base, arrival: 'trace' }, /need the trace times/],
      [
        { ...base, arrival: 'trace', trace: { timesMs: [0, 5, 3], speed: 1 } },
        /trace time 2 \(3\) is not a number >= the one before/,
      ],
      [{ ...base, arrival: 'trace', trace: { timesMs: [0], speed: 0 } }, /speed must be/],
      [{ ...base, maxConcurrency: 0 }, /maxConcurrency/],
    ];
    for (const [load, why] of cases) {
      assert.match(openLoadProblems(load).join('; '), why);
    }
    assert.throws(() => arrivalScheduleForLoad(cases[0][0], 1), /invalid arrivals: rate/);
  });

  test('describeLoad names each arrival kind', () => {
    const text = (load: OpenLoadSpec) =>
      describeLoad({ load: { ...load, meanConcurrency: 3.25 } } as RunSummary);
    assert.equal(
      text({ mode: 'open', rate: 8, arrival: 'gamma', burstiness: 0.5 }),
      '8.00 requests/s gamma arrivals (burstiness 0.5) (measured concurrency 3.3)',
    );
    assert.equal(
      text({ mode: 'open', rate: 8, arrival: 'poisson', rampUp: { fromRate: 1, seconds: 60 } }),
      'ramping 1 -> 8 requests/s over 60 s, poisson arrivals (measured concurrency 3.3)',
    );
    const entries = Array.from({ length: 1234 }, (_, i) => ({
      atMs: i * 10,
      inputTokens: 1,
      outputTokens: 1,
    }));
    const load = traceLoad(entries, { speed: 2, maxConcurrency: 16 });
    assert.equal(
      text(load),
      'trace replay at 2x (1,234 requests), at most 16 in flight (measured concurrency 3.3)',
    );
    // summary.json holds the trace's description, not its 1,234 times; read back, it still reads.
    const json = JSON.parse(JSON.stringify(load));
    assert.deepEqual(json.trace, { speed: 2, requests: 1234, spanMs: 12_330 });
    assert.equal(text(json), text(load));
    assert.equal(
      JSON.stringify(traceReplay([5, 15, 35], 1.5, 'x.jsonl')),
      '{"source":"x.jsonl","speed":1.5,"requests":3,"spanMs":30}',
    );
  });
});

describe('trace files', () => {
  test('Mooncake JSONL: sorted by time (ties in file order), shifted to 0', () => {
    assert.deepEqual(readTrace(fixture('mooncake.jsonl')), [
      {
        atMs: 0,
        inputTokens: 6955,
        outputTokens: 52,
        hashIds: [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354],
      },
      {
        atMs: 0,
        inputTokens: 6472,
        outputTokens: 26,
        hashIds: [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366],
      },
      { atMs: 1518, inputTokens: 2012, outputTokens: 1, hashIds: [0, 427, 428, 429] },
      { atMs: 3053, inputTokens: 915, outputTokens: 355, hashIds: [0, 462] },
    ]);
  });

  test('Azure CSV: 100 ns timestamps kept exact, CRLF lines, out-of-order rows sorted', () => {
    const { format, entries } = parseTrace(
      '\n' + 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,1,2\n',
    );
    assert.equal(format, 'azure');
    assert.deepEqual(entries, [{ atMs: 0, inputTokens: 1, outputTokens: 2 }]);
    const azure = readTrace(fixture('azure.csv'));
    const expected = [
      [0, 34, 12],
      [0.0001, 4808, 10],
      [19.4101, 3180, 8],
      [397.5591, 110, 27],
      [13_319.4101, 7433, 14],
    ];
    assert.equal(azure.length, expected.length);
    azure.forEach((e, i) => {
      assert.ok(Math.abs(e.atMs - expected[i][0]) < 1e-6, `row ${i}: ${e.atMs}`);
      assert.deepEqual([e.inputTokens, e.outputTokens], expected[i].slice(1));
    });
    // A UTC offset is honoured.
    const zoned = parseTrace(
      'TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 01:00:00+01:00,1,1\n2024-05-10 00:00:01Z,1,1\n',
    ).entries;
    assert.deepEqual(
      zoned.map((e) => e.atMs),
      [0, 1000],
    );
  });

  test('generic JSONL: at_ms in ms, timestamp_s and time in seconds', () => {
    assert.deepEqual(readTrace(fixture('generic.jsonl')), [
      { atMs: 0, inputTokens: 200, outputTokens: 30 },
      { atMs: 1000, inputTokens: 100, outputTokens: 20 },
      { atMs: 2500, inputTokens: 300, outputTokens: 40 },
    ]);
  });

  test('malformed lines are errors with their line numbers, never skipped', () => {
    assert.throws(
      () => readTrace(fixture('mooncake-bad.jsonl')),
      (err: Error) => {
        const m = err.message;
        return (
          m.includes('mooncake-bad.jsonl: 5 problems') &&
          m.includes('line 2: timestamp must be a number, got "soon"') &&
          /line 3: not valid JSON/.test(m) &&
          m.includes('line 5: input_length must be a whole number from 0 to 16777216, got -3') &&
          m.includes('line 5: output_length must be a whole number from 0 to 16777216, got 5.5') &&
          m.includes('line 6: expected a JSON object')
        );
      },
    );
    assert.throws(
      () => readTrace(fixture('azure-bad.csv')),
      (err: Error) => {
        const m = err.message;
        return (
          m.includes('4 problems') &&
          m.includes('line 3: TIMESTAMP must look like 2023-11-16 18:15:46.6805900') &&
          m.includes('line 4: TIMESTAMP') &&
          m.includes(
            'line 5: ContextTokens must be a whole number from 0 to 16777216, got "ten"',
          ) &&
          m.includes('line 6: expected 3 fields, got 2')
        );
      },
    );
    assert.throws(
      () =>
        parseTrace(
          '{"at_ms": 1, "time": 2, "input_tokens": 1, "output_tokens": 1}\n{"at_ms": 1, "input_tokens": 1}\n',
        ),
      /line 1: has at_ms and time; give one time\n {2}line 2: output_tokens must be a whole number from 0 to 16777216, got nothing/,
    );
    // Past 10 problems, the rest are counted.
    const many = Array.from({ length: 25 }, () => '{"timestamp": 1}').join('\n');
    assert.throws(
      () => parseTrace(many, { format: 'mooncake' }),
      (err: Error) =>
        err.message.includes('50 problems') && err.message.includes('... and 40 more'),
    );
    assert.throws(() => parseTrace('\n\n'), /the trace is empty/);
    assert.throws(() => parseTrace('TIMESTAMP,ContextTokens\n'), /lacks GeneratedTokens/);
    assert.throws(() => parseTrace('hello\n'), /not a trace this reads/);
  });
});

describe('datasets', () => {
  test('ShareGPT: the first human turn, the first model turn after it; no-prompt conversations counted out', () => {
    const d = readDataset(fixture('sharegpt.json'));
    assert.equal(d.format, 'sharegpt');
    assert.deepEqual(d.entries, [
      { prompt: 'What is the capital of France?', outputText: 'Paris is the capital of France.' },
      { prompt: 'Name a prime.', outputText: '7' },
      { prompt: 'An unanswered question' },
    ]);
    assert.equal(d.skipped, 2);
  });

  test('ShareGPT errors name the entry and the field', () => {
    assert.throws(
      () => readDataset(fixture('sharegpt-bad.json')),
      (err: Error) =>
        err.message.includes('3 problems') &&
        err.message.includes('entry 1: conversations must be an array, got "nope"') &&
        err.message.includes('entry 2: conversations[1].value must be a string, got 42') &&
        err.message.includes('entry 3: expected an object'),
    );
    assert.throws(() => parseDataset('{"a": 1}', 'sharegpt'), /JSON array of \{conversations/);
    assert.throws(() => parseDataset('[{"conversations": []}]', 'sharegpt'), /no entries/);
  });

  test('JSONL: prompt or messages, max_tokens as the output length', () => {
    const d = readDataset(fixture('prompts.jsonl'));
    assert.equal(d.format, 'jsonl');
    assert.deepEqual(d.entries, [
      { prompt: 'Summarise the plot of Hamlet.', outputTokens: 128 },
      {
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'Hi' },
        ],
      },
      { prompt: 'Write a haiku about rivers.', outputTokens: 20 },
    ]);
  });

  test('JSONL errors name the line and the field', () => {
    assert.throws(
      () => readDataset(fixture('prompts-bad.jsonl')),
      (err: Error) => {
        const m = err.message;
        return (
          m.includes('5 problems') &&
          m.includes('line 2: has both prompt and messages') &&
          m.includes('line 3: needs prompt') &&
          m.includes('line 4: max_tokens must be a whole number from 1 to 16777216, got 0') &&
          m.includes('line 5: messages[0].content must be a string (multimodal') &&
          /line 6: not valid JSON/.test(m)
        );
      },
    );
    assert.throws(() => readDataset(fixture('empty.jsonl')), /empty.jsonl: no entries/);
  });

  test('text corpus: the whole text; format detected from extension and content', () => {
    const d = readDataset(fixture('corpus.txt'));
    assert.equal(d.format, 'text');
    assert.ok(d.format === 'text' && d.text.startsWith('The river runs past the old mill'));
    assert.equal(parseDataset('\ufeff  [ ]', 'text').format, 'text');
    assert.throws(() => parseDataset(' \n', 'text'), /text corpus is empty/);
    // Given explicitly, the format wins over the extension.
    assert.throws(() => readDataset(fixture('corpus.txt'), 'jsonl'), /line 1: not valid JSON/);
  });
});

describe('synthetic requests (issue 29)', () => {
  test('a prompt is built when read, the same each time, and a spread copies it', () => {
    const spec = createSyntheticWorkload({ inputTokens: 12, outputTokens: 5, seed: 4 })(3);
    assert.equal(spec.prompt.split(' ').length, 12);
    assert.equal(spec.prompt, spec.prompt);
    const copy = { ...spec, requestedOutputTokens: 9 };
    assert.equal(copy.prompt, spec.prompt);
    assert.deepEqual(
      [copy.promptWords, copy.requestedInputTokens, copy.requestedOutputTokens],
      [12, 12, 9],
    );
  });
});
