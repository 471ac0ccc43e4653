/** A load that needs more sockets than the process may open is said before it fails with EMFILE. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inFlightBound, openFilesLimit, openFilesNotice } from '../../../src/loadgen/openFiles.js';
import { wholeRun } from '../../../src/loadgen/shard.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max processes             514923               514923               processes
Max open files            20000                20000                files
Max locked memory         8388608              8388608              bytes
`;

test('the soft open-files limit is read from /proc/self/limits; none elsewhere', () => {
  assert.equal(
    openFilesLimit(() => LIMITS),
    20_000,
  );
  assert.equal(
    openFilesLimit(() => LIMITS.replace(/20000 {16}20000/, 'unlimited            unlimited')),
    undefined,
  );
  assert.equal(
    openFilesLimit(() => {
      throw new Error('ENOENT');
    }),
    undefined,
  );
  // On Linux, this process's own limit is a number.
  if (process.platform === 'linux') assert.ok((openFilesLimit() ?? 0) > 0);
});

test('requests in flight: a closed loop its concurrency, --rate inf the whole run, an open loop its cap or nothing', () => {
  assert.equal(inFlightBound(wholeRun({ mode: 'closed', concurrency: 64 }, 0, 100)), 64);
  assert.equal(
    inFlightBound(
      wholeRun({ mode: 'open', rate: Number.POSITIVE_INFINITY, arrival: 'poisson' }, 10, 20_000),
    ),
    20_010,
  );
  assert.equal(
    inFlightBound(
      wholeRun({ mode: 'open', rate: 50, arrival: 'poisson', maxConcurrency: 300 }, 0, 100),
    ),
    300,
  );
  assert.equal(
    inFlightBound(wholeRun({ mode: 'open', rate: 50, arrival: 'poisson' }, 0, 100)),
    undefined,
  );
});

test('the notice comes only past the limit, names it and both ways out', () => {
  const run = (concurrency: number) => wholeRun({ mode: 'closed', concurrency }, 0, 100_000);
  assert.equal(openFilesNotice(run(10_000), 20_000), undefined);
  assert.equal(openFilesNotice(run(30_000), undefined), undefined);
  const notice = openFilesNotice(
    wholeRun({ mode: 'open', rate: Number.POSITIVE_INFINITY, arrival: 'poisson' }, 0, 20_000),
    20_000,
  );
  assert.match(
    notice ?? '',
    /^20,000 requests in flight need a socket each, and this process may open 20,000 files \(ulimit -n\)/,
  );
  assert.match(notice ?? '', /ulimit -n 32768/);
  assert.match(notice ?? '', /--shard/);
});
