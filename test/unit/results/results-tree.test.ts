/**
 * Results trees with links (issue 48): a loop back up the tree once counted each run twice (3
 * runs, 6 fit points) and a dangling link crashed calibrate and report with ENOENT. Each folder
 * is read once by its real path; a link that leads nowhere is passed over and named.
 */
import assert from 'node:assert/strict';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, test } from 'node:test';
import type { RequestRecord } from '../../../src/record.js';
import { walkResultsTree } from '../../../src/results/layout.js';
import { findRunDirs, loadSavedRuns } from '../../../src/results/reader.js';
import { calibrate } from '../../../src/session/calibrate.js';
import { replayRecords } from '../../../src/sim/calibrate.js';
import { tempDir } from '../../helpers/cli.js';
import { HIDDEN, l40sEngine, measurePerturbed } from '../../helpers/perturbed.js';

function writeRun(dir: string, records: RequestRecord[], concurrency: number): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'records.jsonl'), records.map((r) => JSON.stringify(r)).join('\n'));
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify({ plan: { load: { mode: 'closed', concurrency } } }),
  );
}

/**
 * Three runs (a, b, c/d) and every kind of link: a loop to the root, a second name for a run,
 * a link to nothing, a link to itself.
 */
function hostileTree(withRecords: (i: number) => [RequestRecord[], number]): string {
  const root = tempDir('ig-results-tree-');
  ['a', 'b', join('c', 'd')].forEach((name, i) => {
    const [records, concurrency] = withRecords(i);
    writeRun(join(root, name), records, concurrency);
  });
  symlinkSync(root, join(root, 'a', 'loop'));
  symlinkSync(join(root, 'b'), join(root, 'latest'));
  symlinkSync(join(root, 'gone'), join(root, 'dangling'));
  symlinkSync(join(root, 'self'), join(root, 'self'));
  return root;
}

const truth = l40sEngine(HIDDEN);
const points = [
  measurePerturbed(1, 6, 32, 128, truth),
  measurePerturbed(8, 24, 256, 96, truth),
  measurePerturbed(1, 3, 1500, 16, truth),
];
const runTree = () =>
  hostileTree((i) => [
    replayRecords(truth, points[i]),
    (points[i].load as { concurrency: number }).concurrency,
  ]);

describe('results trees with links', () => {
  test('each folder once by its real path; loops, second names and dangling links said', () => {
    const root = hostileTree(() => [[], 1]);
    // By the folder's own name: the temporary root's random suffix may end in one of them.
    const tree = walkResultsTree(root, (d) => ['a', 'b', 'd'].includes(basename(d)));
    assert.deepEqual(tree.dirs, [join(root, 'a'), join(root, 'b'), join(root, 'c', 'd')]);
    const said = tree.skipped.join('\n');
    assert.match(said, new RegExp(`${join(root, 'a', 'loop')} is ${root} again .*read once`));
    assert.match(said, new RegExp(`${join(root, 'latest')} is ${join(root, 'b')} again`));
    assert.match(said, new RegExp(`${join(root, 'dangling')}: a link to nothing.*skipped`));
    assert.match(said, new RegExp(`${join(root, 'self')}: a link that leads back to itself`));
    const heard: string[] = [];
    assert.equal(findRunDirs(root, 3, (m) => heard.push(m)).length, 3);
    assert.equal(heard.length, tree.skipped.length);
  });

  test('calibrate: 3 runs are 3 fit points, the dangling link a warning, no ENOENT', async () => {
    const root = runTree();
    const result = await calibrate([root], {
      flags: { model: 'llama-3-8b', gpu: 'l40s' },
      fit: 'mbu,step-overhead-ms',
    });
    assert.equal(result.file.points.length, 3);
    assert.ok(result.warnings.some((w) => w.includes(join(root, 'dangling'))));
    // The same tree given twice, or a folder inside it beside it: each run once still.
    const twice = await calibrate([root, join(root, 'b'), join(root, 'latest')], {
      flags: { model: 'llama-3-8b', gpu: 'l40s' },
      fit: 'mbu,step-overhead-ms',
    });
    assert.equal(twice.file.points.length, 3);
  });

  test('report: the runs read once, the dangling link named, no ENOENT', async () => {
    const root = runTree();
    const problems: string[] = [];
    const runs = await loadSavedRuns(root, (m) => problems.push(m));
    assert.equal(runs.length, 3);
    assert.ok(problems.some((m) => m.includes(join(root, 'dangling'))));
  });
});
