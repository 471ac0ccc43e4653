/**
 * The library's public face (src/index.ts), used as a program would: run a plan against the
 * built-in simulator, load what it wrote, render it and gate it on thresholds.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  benchmark,
  EXIT,
  evaluateThresholds,
  loadReportInput,
  loadSavedRuns,
  markdownSummary,
  parseRunPlan,
  parseThresholds,
  renderHtmlReport,
  UsageError,
} from '../../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'infergauge-library-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a plan runs, its directory loads and renders, and thresholds judge it', async () => {
  const plan = parseRunPlan({
    concurrency: '2',
    requests: '6',
    inputTokens: '32',
    outputTokens: '16',
    ignoreEos: true,
    out: join(dir, 'run'),
  });
  const notices: string[] = [];
  const result = await benchmark(plan, { onNotice: (m) => notices.push(m) });
  assert.equal(result.code, EXIT.ok);
  assert.equal(result.root, join(dir, 'run'));
  const [measured] = result.results;
  assert.equal(measured.summary.requests.completed, 6);
  assert.equal(measured.summary.tokens.output, 6 * 16);

  const input = await loadReportInput(result.root);
  assert.equal(input.kind, 'run');
  assert.match(renderHtmlReport(input), /^<!doctype html>/i);

  // Re-summarised from the raw records, the run reads as it was measured.
  const runs = await loadSavedRuns(result.root);
  assert.equal(runs.length, 1);
  assert.equal(runs[0].summary.requests.completed, 6);
  assert.match(markdownSummary('library', runs), /\| TTFT/);

  const passed = evaluateThresholds(runs[0].summary, parseThresholds(['failureRate<0.01']));
  assert.equal(passed.ok, true);
  const failed = evaluateThresholds(runs[0].summary, parseThresholds(['ttft.p99<0.001']));
  assert.equal(failed.ok, false);
});

test('bad input is a UsageError with exit code 2 and every problem', () => {
  assert.throws(
    () => parseRunPlan({ concurrency: '0', requests: 'many' }),
    (err: unknown) =>
      err instanceof UsageError && err.exitCode === EXIT.invalidOptions && err.problems.length >= 2,
  );
});
