/**
 * yieldHelperThreads lowers the threads the process had when infergauge loaded (Node's own) to
 * nice 19, once, where the process may use one core, and leaves the main thread and worker
 * threads started since alone.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { getPriority } from 'node:os';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { yieldHelperThreads } from '../../../src/loadgen/helperThreads.js';

const threads = () => new Set(readdirSync('/proc/self/task').map(Number));

/** A thread's nice value; undefined once it has ended. */
function niceOf(tid: number): number | undefined {
  try {
    return getPriority(tid);
  } catch {
    return undefined;
  }
}

test('on one usable core the helper threads drop to nice 19; the main thread and later workers keep theirs', {
  skip: existsSync('/proc/self/task') ? false : 'no /proc/self/task on this system',
}, async () => {
  const before = threads();
  // A worker started after the module loaded, as a program's (or infergauge's) own would be. It
  // stays alive until terminated: a worker whose script ends exits, and its thread id with it
  // (getPriority then failed with ESRCH when the worker ended first).
  const worker = new Worker(
    "require('node:worker_threads').parentPort.postMessage(require('node:fs').readlinkSync('/proc/thread-self')); setInterval(() => {}, 1000)",
    { eval: true },
  );
  const workerTid = Number(
    String(await new Promise((resolve) => worker.once('message', resolve)))
      .split('/')
      .pop(),
  );
  try {
    const mainBefore = getPriority(process.pid);
    // With two usable cores a helper has a core of its own: nothing is lowered.
    assert.equal(yieldHelperThreads(2), 0, 'two usable cores');
    assert.ok(
      [...before].every((tid) => niceOf(tid) === undefined || niceOf(tid) === mainBefore),
      'no thread lowered with two usable cores',
    );
    // Node starts V8's platform threads before any JavaScript runs.
    assert.ok(yieldHelperThreads(1) >= 4, 'the V8 helpers were lowered on one core');
    const lowered = [...before].filter((tid) => tid !== process.pid && niceOf(tid) === 19);
    assert.ok(lowered.length >= 4, `${lowered.length} helpers at nice 19`);
    assert.equal(getPriority(process.pid), mainBefore, 'the main thread');
    assert.equal(getPriority(workerTid), mainBefore, 'a worker started since');
    assert.equal(yieldHelperThreads(1), 0, 'once per process');
  } finally {
    await worker.terminate();
  }
});
