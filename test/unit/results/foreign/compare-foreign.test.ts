/**
 * `compare` takes another tool's result file wherever it takes a run directory (issue 54): an
 * infergauge run of the simulator against the same run saved as vLLM's `bench serve` JSON
 * (infergauge's own `--compat vllm` writer) pairs request by request and finds no difference;
 * the notes on what does not translate are printed beside it; a summary-only file is refused
 * with the reason.
 */

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_BOOTSTRAP } from '../../../../src/analysis/compare.js';
import type { LoadSpec } from '../../../../src/load.js';
import {
  compareTargets,
  renderHtml,
  renderJson,
  renderMarkdown,
  renderTerminal,
} from '../../../../src/report/compare.js';
import { vllmBenchResult } from '../../../../src/report/compat.js';
import { CompareInputError, readCompareTarget } from '../../../../src/results/compareInput.js';
import { ForeignInputError } from '../../../../src/results/foreign/index.js';
import type { SimulatorProcess } from '../../../../src/session/simulator.js';
import { REPO } from '../../../../tools/repo.js';
import { runAgainst, type TestRun } from '../../../helpers/run.js';
import { startSim } from '../../../helpers/sim.js';

const FIXTURES = join(REPO, 'test/fixtures/foreign');

describe('compare: a vLLM bench serve file against an infergauge run', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ig-compare-foreign-'));
  const load: LoadSpec = { mode: 'closed', concurrency: 4 };
  let sim: SimulatorProcess;
  let run: TestRun;
  let runDir: string;
  let vllmFile: string;
  before(async () => {
    sim = await startSim({ 'time-scale': 0.02 });
    run = await runAgainst(sim.url, { load, requests: 40 });
    runDir = join(dir, 'run');
    mkdirSync(runDir);
    writeFileSync(
      join(runDir, 'records.jsonl'),
      `${run.records.map((r) => JSON.stringify(r)).join('\n')}\n`,
    );
    writeFileSync(
      join(runDir, 'manifest.json'),
      JSON.stringify({ schemaVersion: 2, kind: 'run', plan: { load }, model: 'sim-llama-3-8b' }),
    );
    vllmFile = join(dir, 'vllm-sim.json');
    writeFileSync(
      vllmFile,
      JSON.stringify(
        vllmBenchResult(run.records, run.summary, {
          model: 'sim-llama-3-8b',
          backend: 'vllm',
          tokenizer: 'sim-llama-3-8b',
          date: '20261205-120000',
        }),
      ),
    );
  });
  after(async () => {
    await sim?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('pairs request by request, finds the same TTFT, and prints the notes in every rendering', async () => {
    const a = await readCompareTarget(runDir, 'run');
    const b = await readCompareTarget(vllmFile, 'vllm-sim.json');
    assert.equal(b.kind, 'foreign');
    assert.equal(b.units[0]?.summaries[0]?.summary.requests.completed, 40);
    // The same requests: vLLM's TTFT (seconds, rounded to the µs) is infergauge's.
    const ours = run.summary.latency.ttftMs;
    const theirs = b.units[0]?.summaries[0]?.summary.latency.ttftMs;
    assert.ok(theirs && Math.abs(theirs.p50 - ours.p50) < 0.002, `${theirs?.p50} vs ${ours.p50}`);
    const report = compareTargets([a, b], { ...DEFAULT_BOOTSTRAP, force: false }, undefined);
    assert.equal(report.candidates[0]?.pairs.length, 1);
    assert.ok(!report.candidates[0]?.pairs[0]?.refused);
    const terminal = renderTerminal(report, false);
    if (process.env.SHOW) console.log(terminal);
    assert.match(
      terminal,
      /vllm-sim\.json \(vLLM bench serve JSON, per request\): vLLM records ITL per streamed chunk/,
    );
    assert.match(renderMarkdown(report), /per request\): vLLM computes percentiles with numpy/);
    assert.match(renderHtml(report), /vLLM bench serve JSON, per request/);
    assert.match(renderJson(report), /vLLM bench serve JSON, per request/);
  });

  test('GuideLLM (one unit per benchmark, paired by load) and AIPerf files compare per request', async () => {
    for (const [name, units] of [
      ['guidellm-benchmarks.json', 2],
      ['aiperf-profile_export.jsonl', 1],
    ] as const) {
      const a = await readCompareTarget(join(FIXTURES, name), 'A');
      const b = await readCompareTarget(join(FIXTURES, name), 'B');
      assert.equal(a.units.length, units);
      const report = compareTargets([a, b], { ...DEFAULT_BOOTSTRAP, force: false }, undefined);
      const pairs = report.candidates[0]?.pairs ?? [];
      assert.equal(pairs.length, units, name);
      assert.ok(pairs.every((p) => !p.refused));
      assert.match(renderTerminal(report, false), /per request\): /);
    }
  });

  test('a summary-only file is refused with the reason and the way out', async () => {
    await assert.rejects(
      readCompareTarget(join(FIXTURES, 'vllm-bench-summary.json')),
      (err: unknown) =>
        err instanceof CompareInputError &&
        /statistics only, no per-request figures: compare pairs runs request by request/.test(
          err.message,
        ) &&
        /--save-detailed/.test(err.message),
    );
  });

  test('a file of no known format names the file', async () => {
    const other = join(dir, 'other.json');
    writeFileSync(other, '{"hello": 1}');
    await assert.rejects(
      readCompareTarget(other),
      (err: unknown) =>
        err instanceof ForeignInputError && err.message.startsWith(`${other}: not a result file`),
    );
  });
});
