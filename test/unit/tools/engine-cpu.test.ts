/**
 * The engine's CPU account the llama-server tests judge a measurement by (tools/llama/server.ts):
 * schedstat read per thread, differences over the threads in both snapshots, the waiting share
 * of the interval's wall time.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { type CpuSnapshot, cpuSnapshot, cpuUse } from '../../../tools/llama/server.js';

const snap = (atMs: number, threads: Record<string, [number, number]>): CpuSnapshot => ({
  atMs,
  threads: new Map(Object.entries(threads)),
});

test('cpuUse: on-CPU and waiting time over the interval, threads only in one snapshot left out', () => {
  const before = snap(1000, { '10': [5e6, 1e6], '11': [0, 0], gone: [9e9, 9e9] });
  // 100 ms later: thread 10 ran 60 ms and waited 20; 11 waited 5; "born" has no baseline.
  const after = snap(1100, { '10': [65e6, 21e6], '11': [0, 5e6], born: [7e9, 7e9] });
  const use = cpuUse(before, after);
  assert.equal(use.wallMs, 100);
  assert.equal(use.onCpuMs, 60);
  assert.equal(use.waitingMs, 25);
  assert.equal(use.waitShare, 0.25);
});

test('cpuUse: no time between the snapshots is no wait, not a division by zero', () => {
  assert.equal(cpuUse(snap(5, {}), snap(5, {})).waitShare, 0);
});

test('cpuSnapshot: this thread, busy for 30 ms, shows about that much on a CPU', {
  skip: !existsSync(`/proc/${process.pid}/task/${process.pid}/schedstat`) && 'no schedstat',
}, () => {
  const before = cpuSnapshot(process.pid, process.pid);
  assert.deepEqual([...before.threads.keys()], [String(process.pid)]);
  const start = performance.now();
  while (performance.now() - start < 30) {
    // spin
  }
  const use = cpuUse(before, cpuSnapshot(process.pid, process.pid));
  // On a CPU or waiting for one the whole time it spun, whatever the neighbours (steal aside).
  assert.ok(use.onCpuMs + use.waitingMs >= 20, JSON.stringify(use));
  assert.ok(use.onCpuMs > 0 && use.onCpuMs <= use.wallMs + 1, JSON.stringify(use));
  // All of the process's threads: the main one among them.
  assert.ok(cpuSnapshot(process.pid).threads.has(String(process.pid)));
});

test('cpuSnapshot: a process that is gone gives no threads, not an error', () => {
  assert.equal(cpuSnapshot(2 ** 22 + 1).threads.size, 0);
});
