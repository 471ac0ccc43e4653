/**
 * The results store's schemas (src/results/schemas.ts) accept what infergauge writes: the
 * report fixtures (written by real runs, sweeps, probes and capacity searches: see
 * test/fixtures/report/generate.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCompare } from '../../../src/cli/compare.js';
import { loadReportInput } from '../../../src/results/load.js';
import { resultSchemas } from '../../../src/results/schemas.js';
import { REPO } from '../../../tools/repo.js';

const {
  capacitySchema,
  compareReportSchema,
  manifestSchema,
  probeSchema,
  scenariosSchema,
  summarySchema,
  sweepSchema,
} = resultSchemas();

const FIXTURES = join(REPO, 'test/fixtures/report/');
const read = (path: string) => JSON.parse(readFileSync(join(FIXTURES, path), 'utf8')) as unknown;

test('every results file of the report fixtures parses with its schema', () => {
  for (const run of ['run', 'run-telemetry', 'scenarios/chat', 'scenarios/summarize']) {
    assert.ok(summarySchema.safeParse(read(`${run}/summary.json`)).success, run);
    assert.ok(manifestSchema.safeParse(read(`${run}/manifest.json`)).success, run);
  }
  assert.ok(scenariosSchema.safeParse(read('scenarios/scenarios.json')).success);
  assert.ok(sweepSchema.safeParse(read('sweep/sweep.json')).success);
  assert.ok(probeSchema.safeParse(read('probe-prefill/probe.json')).success);
  assert.ok(probeSchema.safeParse(read('probe-decode/probe.json')).success);
  assert.ok(capacitySchema.safeParse(read('capacity/capacity.json')).success);
});

test('a summary without its latency is refused, naming the field', () => {
  const { latency: _, ...rest } = read('run/summary.json') as Record<string, unknown>;
  const parsed = summarySchema.safeParse(rest);
  assert.equal(parsed.success, false);
  assert.deepEqual(parsed.error?.issues[0]?.path, ['latency']);
});

test('compare --json parses with its schema', async () => {
  let out = '';
  const io = { out: (t: string) => (out += t), err: () => {}, color: false, exit: () => {} };
  const run = join(FIXTURES, 'run');
  const code = await runCompare([run, run], { json: true, resamples: '200' }, io);
  assert.equal(code, 0);
  assert.ok(compareReportSchema.safeParse(JSON.parse(out)).success);
});

test('a run of the previous layout (manifest version 1) is read as a run, and said so once', async () => {
  const problems: string[] = [];
  const input = await loadReportInput(join(FIXTURES, 'run'), (p) => problems.push(p));
  assert.equal(input.kind, 'run');
  assert.deepEqual(
    problems.filter((p) => /results layout 1 \(infergauge [\d.]+\): read as a run/.test(p)).length,
    1,
  );
});
