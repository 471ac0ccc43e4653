/** The min-heap pops its items smallest key first, through any order of pushes and pops. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MinHeap } from '../../src/minHeap.js';
import { createRng } from '../../src/rng.js';

test('pops smallest first, pushes and pops interleaved, duplicates kept', () => {
  const rng = createRng(7);
  const heap = new MinHeap<{ k: number }>((x) => x.k);
  const reference: number[] = [];
  for (let round = 0; round < 2000; round++) {
    if (rng.int(3) > 0 || heap.size === 0) {
      const k = rng.int(100);
      heap.push({ k });
      reference.push(k);
    } else {
      reference.sort((a, b) => a - b);
      assert.equal(heap.pop()?.k, reference.shift());
    }
    assert.equal(heap.size, reference.length);
  }
  reference.sort((a, b) => a - b);
  for (const k of reference) assert.equal(heap.pop()?.k, k);
  assert.equal(heap.pop(), undefined);
});
