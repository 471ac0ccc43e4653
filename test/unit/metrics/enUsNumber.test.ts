/**
 * enUsNumber (metrics/format.ts) writes what toLocaleString('en-US') writes, character for
 * character, without ICU: checked against ICU itself over values of every magnitude, ties
 * (1.005, 2.5, 0.125), carries (9.995, 999.5), negatives rounding to zero and the edges it hands
 * to ICU (exponents, NaN, Infinity).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { enUsNumber } from '../../../src/metrics/format.js';
import { createRng } from '../../../src/rng.js';

const icu = (v: number, min: number, max: number) =>
  v.toLocaleString('en-US', { minimumFractionDigits: min, maximumFractionDigits: max });

const DIGITS: [number, number][] = [
  [0, 0],
  [0, 1],
  [0, 2],
  [0, 3],
  [0, 4],
  [1, 1],
  [2, 2],
  [3, 3],
  [1, 4],
];

const EDGES = [
  0,
  -0,
  1,
  -1,
  0.5,
  -0.5,
  1.5,
  2.5,
  -2.5,
  1.005,
  1.015,
  0.125,
  0.0005,
  9.995,
  99.95,
  999.5,
  9999.5,
  999_999.5,
  -999.5,
  0.001,
  -0.001,
  -0.0004,
  1e-6,
  1.5e-6,
  1e-7,
  -3e-9,
  123456789.125,
  1e20,
  9.99e20,
  1e21,
  1.5e22,
  Number.MAX_SAFE_INTEGER,
  0.1 + 0.2,
  1 / 3,
  2 / 3,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  Number.MIN_VALUE,
  Number.MAX_VALUE,
];

test('enUsNumber writes what ICU writes for edge values', () => {
  for (const v of EDGES) {
    for (const [min, max] of DIGITS)
      assert.equal(enUsNumber(v, min, max), icu(v, min, max), `${v} ${min}..${max}`);
  }
});

test('enUsNumber writes what ICU writes for 20,000 values across magnitudes', () => {
  const rng = createRng(51);
  for (let i = 0; i < 20_000; i++) {
    const magnitude = 10 ** (rng.int(19) - 7);
    let v = (rng.next() - 0.3) * magnitude;
    // Short decimals (ties at the rounding digit) as often as long ones.
    if (i % 2 === 0) v = Number(v.toPrecision(1 + rng.int(6)));
    const [min, max] = DIGITS[i % DIGITS.length] as [number, number];
    assert.equal(enUsNumber(v, min, max), icu(v, min, max), `${v} ${min}..${max}`);
  }
});
