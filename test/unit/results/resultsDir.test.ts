/**
 * Default results directories (claimNewDir): names are made to the second, so a loop of quick
 * runs must get `-2`, `-3` rather than fail on a directory that already holds a run.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { claimNewDir } from '../../../src/results/runFiles.js';

const root = mkdtempSync(join(tmpdir(), 'infergauge-claim-'));
after(() => rmSync(root, { recursive: true, force: true }));

test('the same name claimed three times gives name, name-2, name-3, each created', () => {
  const parent = join(root, 'a', 'infergauge-results');
  const dirs = [1, 2, 3].map(() => claimNewDir(parent, '20261206T031450Z-sim'));
  assert.deepEqual(dirs, [
    join(parent, '20261206T031450Z-sim'),
    join(parent, '20261206T031450Z-sim-2'),
    join(parent, '20261206T031450Z-sim-3'),
  ]);
  for (const dir of dirs) assert.ok(statSync(dir).isDirectory());
});

test('a name taken by another process (even an empty directory or a file) is skipped', () => {
  const parent = join(root, 'b');
  mkdirSync(join(parent, 'x'), { recursive: true });
  writeFileSync(join(parent, 'x-2'), '');
  assert.equal(claimNewDir(parent, 'x'), join(parent, 'x-3'));
});

test('an error other than a taken name is thrown, not retried for ever', () => {
  const file = join(root, 'not-a-dir');
  writeFileSync(file, '');
  assert.throws(() => claimNewDir(join(file, 'under'), 'x'), /ENOTDIR|EEXIST/);
});
