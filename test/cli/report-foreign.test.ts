/**
 * `report FILE` on another tool's result file (issue 54): the process writes the run directory
 * beside the file and its report, says the notes on stderr, replaces its own earlier import and
 * never overwrites a directory it did not write.
 */

import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { REPO } from '../../tools/repo.js';
import { runCli, tempDir } from '../helpers/cli.js';

const FIXTURE = join(REPO, 'test/fixtures/foreign/vllm-bench-detailed.json');

test('report FILE: a run directory beside the file, its report, the notes; again replaces it; a foreign --out is refused', async () => {
  const dir = tempDir('ig-report-foreign-');
  const file = join(dir, 'vllm.json');
  copyFileSync(FIXTURE, file);
  const first = await runCli(['report', file]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stderr, /vllm\.json: read as vLLM bench serve JSON, per request/);
  assert.match(first.stderr, /vLLM records ITL per streamed chunk/);
  assert.ok(existsSync(join(dir, 'vllm.json.infergauge', 'report.html')));
  const again = await runCli(['report', file]);
  assert.equal(again.code, 0, again.stderr);
  const kept = join(dir, 'mine');
  mkdirSync(kept);
  writeFileSync(join(kept, 'notes.txt'), 'mine');
  const refused = await runCli(['report', file, '--out', kept]);
  assert.equal(refused.code, 2);
  assert.match(
    refused.stderr,
    /mine exists and is not an earlier import of .*vllm\.json: give another --out/,
  );
  assert.ok(existsSync(join(kept, 'notes.txt')));
});
