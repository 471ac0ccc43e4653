/**
 * `size --prices`: a price is a finite number above 0 and below a bound no GPU-hour reaches;
 * anything else (YAML's .inf and .nan, a negative, text, an exponent typo) is refused naming
 * the GPU and the fix, from a file (bad usage, exit 2) or from a library caller.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SizeError, size } from '../../../src/session/size.js';
import { prepareSize } from '../../../src/session/sizeOptions.js';
import { readPriceFile } from '../../../src/session/sizePrices.js';

const dir = mkdtempSync(join(tmpdir(), 'ig-prices-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const priceFile = (text: string) => {
  const path = join(dir, `prices-${files++}.yaml`);
  writeFileSync(path, text);
  return path;
};
const flags = (prices: string) => ({
  model: 'llama-3-8b',
  rate: '2',
  slo: 'ttft.p99<500',
  gpu: 'h100',
  prices,
});

describe('size --prices', () => {
  test('each price that no GPU-hour can have is named with its GPU and the fix', () => {
    const cases: [string, RegExp][] = [
      ['h100: .inf', /h100 must be a price per GPU-hour, a finite number > 0 \(got Infinity\)/],
      ['h100: -.inf', /got -Infinity/],
      ['h100: .nan', /got NaN/],
      ['h100: -2.49', /h100 must be a price .* \(got -2.49\); e.g. "h100: 2.49"/],
      ['h100: 0', /got 0\)/],
      ['h100: "2.49"', /got "2.49"/],
      ['h100: null', /got null/],
      ['h100: [1, 2]', /got \[1,2\]/],
      ['h100: 2.49e9', /h100: a price per GPU-hour of 2490000000 is over 1,000,000/],
    ];
    for (const [text, message] of cases) {
      const path = priceFile(text);
      const prepared = prepareSize(flags(path));
      assert.equal(prepared.options, undefined, text);
      assert.equal(prepared.problems.length, 1, text);
      assert.match(prepared.problems[0], new RegExp(`^--prices: ${path.replace(/[.]/g, '\\.')}: `));
      assert.match(prepared.problems[0], message, text);
    }
    // Every bad price at once, not the first only.
    const both = prepareSize(flags(priceFile('h100: .inf\nl40s: -1\na100: 1.5\n')));
    assert.match(both.problems.join(), /h100 .*; l40s /);
  });

  test('a good table reads; not a table, no file and a huge file say so', () => {
    assert.deepEqual(
      { ...readPriceFile(priceFile('h100: 2.49\nl40s: 0.86\n')) },
      { h100: 2.49, l40s: 0.86 },
    );
    assert.match(
      prepareSize(flags(priceFile('- 1\n- 2\n'))).problems.join(),
      /must map GPU ids to prices/,
    );
    assert.match(
      prepareSize(flags(join(dir, 'nope.yaml'))).problems.join(),
      /nope\.yaml: no such file/,
    );
    assert.match(
      prepareSize(flags(priceFile(`# ${'x'.repeat(2 * 1024 * 1024)}\n`))).problems.join(),
      /too large for a price table/,
    );
    assert.match(prepareSize(flags(priceFile('h100: [\n'))).problems.join(), /cannot read .*: /);
  });

  test('a library caller gets the same refusal before anything runs', async () => {
    const err = await size({
      model: 'llama-3-8b',
      traffic: { mode: 'rate', rate: 2 },
      scenario: {
        name: 't',
        input: { kind: 'fixed', value: 64 },
        output: { kind: 'fixed', value: 16 },
      },
      slo: 'ttft.p99<500',
      space: {
        gpus: [{ gpu: 'h100' }],
        tps: [1],
        dtypes: [undefined],
        kvCacheDtypes: [undefined],
        maxNumSeqs: [undefined],
        personalities: ['vllm-v1'],
      },
      prices: { h100: Number.NaN, l40s: Number.POSITIVE_INFINITY },
    }).catch((e: unknown) => e);
    assert.ok(err instanceof SizeError);
    assert.equal(err.problems.length, 2);
    assert.match(err.problems[0], /^h100 must be a price per GPU-hour/);
  });

  test("a library caller's other numbers and axes are checked as the flags are", async () => {
    const base = {
      model: 'llama-3-8b',
      scenario: {
        name: 't',
        input: { kind: 'fixed' as const, value: 64 },
        output: { kind: 'fixed' as const, value: 16 },
      },
      slo: 'ttft.p99<500',
    };
    const err = await size({
      ...base,
      traffic: { mode: 'rate', rate: Number.NaN },
      space: {
        gpus: [],
        tps: [0, 1.5],
        dtypes: [undefined],
        kvCacheDtypes: [undefined],
        maxNumSeqs: [-1],
        personalities: ['vllm-v1'],
      },
      requests: 3,
      maxDp: Number.POSITIVE_INFINITY,
    }).catch((e: unknown) => e);
    assert.ok(err instanceof SizeError);
    assert.deepEqual(
      err.problems.map((p) => p.split(' ')[0]),
      ['traffic.rate', 'requests', 'maxDp', 'space.gpus', 'space.tps', 'space.maxNumSeqs'],
    );
  });
});
