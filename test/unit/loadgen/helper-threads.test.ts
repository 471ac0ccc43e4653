/**
 * yieldHelperThreads lowers every other thread of the process to nice 19 and leaves the main
 * thread's priority alone, once per process.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { getPriority } from 'node:os';
import { test } from 'node:test';
import { yieldHelperThreads } from '../../../src/loadgen/helperThreads.js';

test('the helper threads drop to nice 19, the main thread keeps its priority', {
  skip: existsSync('/proc/self/task') ? false : 'no /proc/self/task on this system',
}, () => {
  const mainBefore = getPriority(process.pid);
  const helpers = readdirSync('/proc/self/task')
    .map(Number)
    .filter((tid) => tid !== process.pid);
  // Node starts V8's platform threads before any JavaScript runs.
  assert.ok(helpers.length > 0, 'a Node process has helper threads');
  assert.ok(yieldHelperThreads() >= helpers.length - 1, 'it lowered the threads it found');
  for (const tid of helpers) {
    let nice: number;
    try {
      nice = getPriority(tid);
    } catch {
      continue; // ended since the listing
    }
    assert.equal(nice, 19, `thread ${tid}`);
  }
  assert.equal(getPriority(process.pid), mainBefore);
  assert.equal(yieldHelperThreads(), 0, 'once per process');
});
