/**
 * Progress off a terminal (CI, a pipe): a heartbeat line while a point runs, a line as each
 * point ends where the command prints none of its own, and nothing once it has ended.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { progressOutputs } from '../../../src/cli/progress.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import type { PointFinished, PointStarted } from '../../../src/session/events.js';
import { plainProgressOutput } from '../../../src/session/progressOutput.js';

const session = { command: 'probe decode' } as PointStarted['session'];
const point = {
  scenario: 'decode',
  load: { mode: 'closed', concurrency: 8 },
} as PointStarted['point'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function finished(completed: number, failed: number, errorsByKind = {}): PointFinished {
  const summary = { requests: { completed, failed, warmup: 0, errorsByKind } } as RunSummary;
  return { session, point, summary } as PointFinished;
}

test('a heartbeat while the point runs, a line when it ends, then silence', async () => {
  const lines: string[] = [];
  let nowMs = 0;
  const out = plainProgressOutput({
    pointLines: true,
    intervalMs: 20,
    write: (l) => lines.push(l),
    now: () => nowMs,
  });
  const progress = { sent: 12, finished: 10, failed: 1, inFlight: 2 };
  out.pointStarted?.({ session, point, progress, totalRequests: 40 } as unknown as PointStarted);
  nowMs = 45_000;
  await sleep(70);
  assert.ok(lines.length >= 1, 'at least one heartbeat in 70 ms at one per 20 ms');
  assert.equal(
    lines[0],
    'infergauge probe decode: decode at concurrency 8: 10/40 finished, 1 failed, 2 in flight, 45 s\n',
  );
  lines.length = 0;
  nowMs = 61_000;
  await out.pointFinished?.(finished(38, 2));
  assert.deepEqual(lines, [
    'infergauge probe decode: decode at concurrency 8: 38 completed, 2 failed in 61.0 s\n',
  ]);
  await sleep(50);
  assert.equal(lines.length, 1, 'no heartbeat after the point ended');
});

test('a point where every request failed says so; pointLines false prints no end line', async () => {
  const lines: string[] = [];
  const out = plainProgressOutput({ pointLines: true, write: (l) => lines.push(l), now: () => 0 });
  out.pointStarted?.({ session, point } as unknown as PointStarted);
  await out.pointFinished?.(finished(0, 3, { http_5xx: 3 }));
  assert.match(lines[0], /decode at concurrency 8: all 3 requests failed \(http_5xx 3\) in 0\.0 s/);
  const quiet: string[] = [];
  const heartbeatOnly = plainProgressOutput({ pointLines: false, write: (l) => quiet.push(l) });
  heartbeatOnly.pointStarted?.({ session, point } as unknown as PointStarted);
  await heartbeatOnly.pointFinished?.(finished(3, 0));
  assert.deepEqual(quiet, []);
});

test('a terminal gets the redrawn line (or none), anything else the plain lines', () => {
  assert.deepEqual(
    progressOutputs({ isTTY: true }, { live: false, pointLines: true }).map((o) => o.name),
    [],
  );
  assert.deepEqual(
    progressOutputs({ isTTY: true }, { live: true, pointLines: true }).map((o) => o.name),
    ['progress'],
  );
  assert.equal(progressOutputs({}, { live: true, pointLines: false }).length, 1);
});
