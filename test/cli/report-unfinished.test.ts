/**
 * A multi-scenario run killed before its end: no scenarios.json, and the scenario it was in has
 * no summary.json. `report` on its folder still reports every scenario, saying the run did not
 * finish (issue 15 case 6).
 */
import assert from 'node:assert/strict';
import { cpSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { REPO } from '../../tools/repo.js';
import { runCli, tempDir } from '../helpers/cli.js';

const FIXTURE = join(REPO, 'test/fixtures/report/scenarios');

test('report on a killed multi-scenario run reports the scenario folders it left, and says so', async () => {
  const dir = join(tempDir('ig-killed-scenarios-'), 'run');
  cpSync(FIXTURE, dir, { recursive: true });
  rmSync(join(dir, 'scenarios.json'));
  rmSync(join(dir, 'summarize', 'summary.json'));
  const result = await runCli(['report', dir]);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stderr, /no scenarios\.json: the multi-scenario run did not finish/);
  assert.match(result.stderr, /summarize.*did not finish|did not finish.*summarize/s);
  const html = readFileSync(join(dir, 'report.html'), 'utf8');
  for (const name of ['chat', 'summarize']) assert.ok(html.includes(`>${name}<`), name);
});
