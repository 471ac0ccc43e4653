import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rescale } from '../../../src/backends/timeline.js';

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('rescale: bounded work and exact sums for any total', () => {
  test('proportional shares, leftovers to the largest remainders, at least one per event', () => {
    const tokens = [1, 0, 1, 1];
    rescale(tokens, 8);
    assert.deepEqual(tokens, [3, 0, 3, 2]);
    const floored = [100, 1, 1, 1];
    rescale(floored, 50);
    assert.deepEqual(floored, [47, 1, 1, 1]);
  });

  test('a total past 2^53 ends at once (one at a time, it never did)', () => {
    // Five ways, the floors leave tokens over that adding one at a time never handed out.
    const tokens = [1, 1, 1, 1, 1];
    rescale(tokens, 9715559134754884);
    assert.ok(tokens.every((t) => t > 1.9e15));
    rescale(tokens, Number.POSITIVE_INFINITY);
    assert.ok(tokens.every(Number.isFinite), 'a non-finite total is left alone');
  });

  test('many events, a big and a small total: sums exact, linearithmic', () => {
    const n = 200_000;
    const many = Array.from({ length: n }, (_, i) => (i === 0 ? n : 1));
    rescale(many, n + 1);
    assert.equal(sum(many), n + 1);
    assert.ok(many.every((t) => t >= 1));
    const spread = Array.from({ length: n }, () => 1);
    rescale(spread, 2 ** 40 + 7);
    assert.equal(sum(spread), 2 ** 40 + 7);
  });
});
