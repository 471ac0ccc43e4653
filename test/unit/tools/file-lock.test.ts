import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { withFileLock } from '../../../tools/fileLock.js';
import { tempDir } from '../../helpers/cli.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pid of a process that has exited (and been reaped), so no process has it now. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  return Number(child.stdout);
}

describe('withFileLock: one holder at a time, across processes', () => {
  test('a second caller waits for the first, then runs; the lock is gone after both', async () => {
    const lock = join(tempDir('ig-lock-'), 'build.lock');
    const events: string[] = [];
    let waitedOn: number | undefined;
    const first = withFileLock(lock, async () => {
      events.push('first start');
      await sleep(150);
      events.push('first end');
      return 1;
    });
    await sleep(20);
    const second = withFileLock(
      lock,
      async () => {
        events.push('second start');
        return 2;
      },
      { pollMs: 10, onWait: (pid) => (waitedOn = pid) },
    );
    assert.deepEqual(await Promise.all([first, second]), [1, 2]);
    assert.deepEqual(events, ['first start', 'first end', 'second start']);
    assert.equal(waitedOn, process.pid, 'the waiter names the holder');
    assert.equal(existsSync(lock), false);
  });

  test('the lock is released when the work throws', async () => {
    const lock = join(tempDir('ig-lock-'), 'build.lock');
    await assert.rejects(
      withFileLock(lock, async () => {
        throw new Error('the build failed');
      }),
      /the build failed/,
    );
    assert.equal(existsSync(lock), false);
    assert.equal(await withFileLock(lock, async () => 'again'), 'again');
  });

  test("a dead holder's lock is taken over; a live holder's is not", async () => {
    const dir = tempDir('ig-lock-');
    const stale = join(dir, 'stale.lock');
    writeFileSync(stale, String(deadPid()));
    // Older than the few seconds a just-created lock is given to hold its pid.
    utimesSync(stale, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    assert.equal(await withFileLock(stale, async () => 'taken over', { pollMs: 10 }), 'taken over');

    const held = join(dir, 'held.lock');
    writeFileSync(held, String(process.ppid));
    utimesSync(held, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const waiter = withFileLock(held, async () => 'ran', { pollMs: 10 });
    assert.equal(await Promise.race([waiter, sleep(300).then(() => 'waiting')]), 'waiting');
    rmSync(held);
    assert.equal(await waiter, 'ran', 'it runs once the holder lets go');
  });

  test('an empty lock file just created is a holder about to write its pid', async () => {
    const empty = join(tempDir('ig-lock-'), 'empty.lock');
    writeFileSync(empty, '');
    const waiter = withFileLock(empty, async () => 'ran', { pollMs: 10 });
    assert.equal(await Promise.race([waiter, sleep(300).then(() => 'waiting')]), 'waiting');
    rmSync(empty);
    assert.equal(await waiter, 'ran');
  });
});
