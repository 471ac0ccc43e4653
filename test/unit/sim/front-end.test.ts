/** The API server's one loop (FrontEndLoop): each request's synchronous part, then the queue. */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FrontEndLoop } from '../../../src/sim/frontEnd.js';

function loop(workNs: number) {
  const f = new FrontEndLoop<string>(workNs);
  const left: [string, number][] = [];
  return { f, left, note: (item: string, atNs: number) => left.push([item, atNs]) };
}

describe('FrontEndLoop', () => {
  test('one request alone leaves after its own part', () => {
    const { f, left, note } = loop(10);
    f.enter('a', 100);
    assert.equal(f.nextLeaveNs(), 110);
    f.advance(109, note);
    assert.deepEqual(left, []);
    f.advance(110, note);
    assert.deepEqual(left, [['a', 110]]);
    assert.equal(f.nextLeaveNs(), undefined);
  });

  test('a burst leaves together once every part has run, in arrival order', () => {
    const { f, left, note } = loop(10);
    // Arrivals spread within the first part: each continuation queues behind all of them.
    for (const [id, at] of [
      ['a', 0],
      ['b', 2],
      ['c', 5],
      ['d', 9],
    ] as const) {
      f.enter(id, at);
    }
    assert.equal(f.nextLeaveNs(), 40);
    f.advance(39, note);
    assert.equal(left.length, 0);
    f.advance(1000, note);
    assert.deepEqual(left, [
      ['a', 40],
      ['b', 40],
      ['c', 40],
      ['d', 40],
    ]);
  });

  test('an arrival after a part ended does not hold that request back', () => {
    // a's part runs 0-10; b comes at 12, after it: a leaves at 10, b at 22.
    const { f, left, note } = loop(10);
    f.enter('a', 0);
    f.enter('b', 12);
    f.advance(100, note);
    assert.deepEqual(left, [
      ['a', 10],
      ['b', 22],
    ]);
  });

  test('an arrival during a part delays it: the loop runs the newcomer first', () => {
    const { f, left, note } = loop(10);
    f.enter('a', 0);
    assert.equal(f.nextLeaveNs(), 10);
    f.enter('b', 5);
    assert.equal(f.nextLeaveNs(), 20);
    // c comes during b's part (10-20), after a's: a leaves with b, at 20; b after c, at 30.
    f.enter('c', 15);
    f.advance(100, note);
    assert.deepEqual(left, [
      ['a', 20],
      ['b', 30],
      ['c', 30],
    ]);
  });

  test('a request whose client left never leaves, and its part still takes the loop', () => {
    const { f, left, note } = loop(10);
    f.enter('a', 0);
    f.enter('b', 0);
    assert.equal(f.remove('a'), true);
    assert.equal(f.remove('a'), false);
    f.advance(100, note);
    assert.deepEqual(left, [['b', 20]]);
  });
});
