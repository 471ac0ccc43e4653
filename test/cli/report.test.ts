/**
 * `infergauge report`: everything re-rendered from saved records (CSV, Markdown, vLLM's result
 * JSON), and CI thresholds with their exit code.
 */
import assert from 'node:assert/strict';
import { cpSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { z } from 'zod';
import type { RunSummary } from '../../src/metrics/summary.js';
import { parseCsv, requestsCsv } from '../../src/report/csv.js';
import { readLlmdReport } from '../../src/results/foreign/llmd.js';
import { findRunDirs, loadSavedRuns, readRunRecords } from '../../src/results/reader.js';
import { runCli, tempDir } from '../helpers/cli.js';

describe('infergauge report', () => {
  let dir: string;
  let printed: RunSummary;
  before(async () => {
    dir = join(tempDir('ig-report-'), 'run');
    const result = await runCli([
      'run',
      '--simulate',
      '--requests',
      '120',
      '--concurrency',
      '8',
      '--input-tokens',
      'uniform:100:300',
      '--output-tokens',
      '64',
      '--slo',
      'ttft<200',
      '--out',
      dir,
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    printed = JSON.parse(result.stdout) as RunSummary;
  });

  test('a run writes report.html; the summary re-computed from records equals the printed one', async () => {
    assert.ok(existsSync(join(dir, 'report.html')));
    const [run] = await loadSavedRuns(dir);
    // As JSON, as it was printed: an empty distribution (ttftc of a run without tool calls)
    // is NaN in memory and null in JSON.
    assert.deepEqual(JSON.parse(JSON.stringify(run.summary)), printed);
  });

  test('CSV parses back to the same numbers; Markdown and the vLLM result JSON', async () => {
    const csvDir = join(dir, 'csv');
    const md = join(dir, 'summary.md');
    const result = await runCli(['report', dir, '--csv', csvDir, '--md', md, '--compat', 'vllm']);
    assert.equal(result.code, 0, result.stderr);
    const requestsText = readFileSync(join(csvDir, 'requests.csv'), 'utf8');
    // Written as the records stream by: the same bytes as from every record held at once.
    assert.equal(requestsText, requestsCsv(await readRunRecords(dir)));
    const requests = parseCsv(requestsText);
    assert.equal(requests.length, 121);
    const header = requests[0];
    const col = (name: string) => header.indexOf(name);
    const ttfts = requests.slice(1).map((r) => Number(r[col('ttft_ms')]));
    const sorted = [...ttfts].sort((a, b) => a - b);
    assert.equal(sorted[0], printed.latency.ttftMs.min);
    assert.equal(sorted[sorted.length - 1], printed.latency.ttftMs.max);
    const runs = parseCsv(readFileSync(join(csvDir, 'runs.csv'), 'utf8'));
    const r = Object.fromEntries(runs[0].map((k, i) => [k, runs[1][i]]));
    assert.equal(Number(r.ttft_p99_ms), printed.latency.ttftMs.p99);
    assert.equal(Number(r.p99_ttft_ms), printed.latency.ttftMs.p99, 'vLLM name, same number');
    assert.equal(Number(r.output_throughput), printed.throughput.outputTokensPerS);
    assert.equal(Number(r.goodput_requests_per_s), printed.goodput?.requestsPerS);

    const text = readFileSync(md, 'utf8');
    assert.match(text, /\*\*Load:\*\* 8 concurrent requests \(measured /);
    assert.match(text, /\| TTFT \| [\d,.]+ \|/);

    const vllm = JSON.parse(readFileSync(join(dir, 'vllm-bench-result.json'), 'utf8'));
    assert.equal(vllm.completed, 120);
    assert.equal(vllm.max_concurrency, 8);
    assert.equal(vllm.total_output_tokens, 120 * 64);
    assert.equal(vllm.ttfts.length, 120);
    assert.ok(Math.abs(vllm.median_ttft_ms - printed.latency.ttftMs.p50) < 1e-9);
    assert.ok(Math.abs(vllm.p99_e2el_ms - printed.latency.e2eMs.p99) < 1e-9);
    // vLLM's TPOT: (latency - ttft) / (output_len - 1), the same as ours here.
    assert.ok(Math.abs(vllm.mean_tpot_ms - printed.latency.tpotMs.mean) < 1e-6);
    // vLLM's ITL is per chunk; the simulator sends one token per chunk, so they agree.
    assert.ok(Math.abs(vllm.median_itl_ms - printed.latency.itlMs.p50) < 1e-9);
    for (const key of [
      'request_throughput',
      'output_throughput',
      'total_token_throughput',
      'std_ttft_ms',
    ]) {
      assert.equal(typeof vllm[key], 'number', key);
    }
  });

  test('thresholds: met exits 0, failed exits 3 and says by how much', async () => {
    const met = await runCli([
      'report',
      dir,
      '--threshold',
      'ttft.p99<100000',
      '--threshold',
      'outputThroughput>1',
    ]);
    assert.equal(met.code, 0, met.stderr);
    const failed = await runCli(['report', dir, '--threshold', 'ttft.p50<1']);
    assert.equal(failed.code, 3);
    assert.match(failed.stderr, /threshold failed: ttft\.p50/);
    const run = await runCli([
      'run',
      '--simulate',
      '--requests',
      '20',
      '--out',
      join(tempDir('ig-report-'), 'gated'),
      '--threshold',
      'failureRate<0.01',
      '--threshold',
      'e2e.p99<1',
    ]);
    assert.equal(run.code, 3, run.stderr);
    assert.match(run.stderr, /threshold failed: e2e\.p99/);
    const bad = await runCli(['report', dir, '--threshold', 'speed>>3']);
    assert.equal(bad.code, 2);
  });

  test('a refused option writes nothing; outputs in folders not yet made are made', async () => {
    // A copy of the run without its report.html: any written file would be a new one.
    const copy = join(tempDir('ig-report-clean-'), 'run');
    cpSync(dir, copy, { recursive: true });
    rmSync(join(copy, 'report.html'));
    const out = join(tempDir('ig-report-out-'), 'nodir');
    for (const args of [
      ['--threshold', 'speed>>3'],
      ['--compat', 'vllm2', '--md', join(out, 'x.md')],
    ]) {
      const refused = await runCli(['report', copy, ...args]);
      assert.equal(refused.code, 2, refused.stderr);
      assert.equal(refused.stdout, '');
      assert.ok(!existsSync(join(copy, 'report.html')), `${args.join(' ')} wrote report.html`);
      assert.ok(!existsSync(out));
    }
    const made = await runCli([
      'report',
      copy,
      '--md',
      join(out, 'x.md'),
      '--compat',
      'vllm',
      '--compat-out',
      join(out, 'deeper', 'vllm.json'),
    ]);
    assert.equal(made.code, 0, made.stderr);
    assert.match(readFileSync(join(out, 'x.md'), 'utf8'), /^#+ infergauge: run$/m);
    assert.ok(existsSync(join(out, 'deeper', 'vllm.json')));
  });

  test('plan and server warnings (temperature) reach every output of report, as in summary.json', async () => {
    const hot = join(tempDir('ig-report-hot-'), 'run');
    const run = await runCli([
      'run',
      '--simulate',
      '--requests',
      '20',
      '--temperature',
      '0.5',
      '--out',
      hot,
      '--no-html',
    ]);
    assert.equal(run.code, 0, run.stderr);
    const saved = JSON.parse(readFileSync(join(hot, 'summary.json'), 'utf8')) as RunSummary;
    assert.ok(saved.warnings.some((w) => w.code === 'nonzero_temperature'));
    const md = join(hot, 'summary.md');
    const result = await runCli(['report', hot, '--md', md]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(readFileSync(md, 'utf8'), /temperature 0\.5: sampling noise/);
    assert.match(readFileSync(join(hot, 'report.html'), 'utf8'), /nonzero_temperature/);
    const [again] = await loadSavedRuns(hot);
    assert.deepEqual(again.summary.warnings, saved.warnings);
  });
});

describe('infergauge report --compat llm-d', () => {
  test("a sweep: one Benchmark Report per point in its folder, its stage the point's index, each valid", async () => {
    const out = join(tempDir('ig-report-llmd-'), 'sweep');
    const sweep = await runCli([
      'sweep',
      '--simulate',
      '--levels',
      '1,4',
      '--requests',
      '12',
      '--warmup',
      '0',
      '--out',
      out,
      '--no-html',
    ]);
    assert.equal(sweep.code, 0, sweep.stderr);
    const refused = await runCli([
      'report',
      out,
      '--compat',
      'llm-d',
      '--compat-out',
      join(out, 'x.yaml'),
    ]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--compat-out names one report/);
    const result = await runCli(['report', out, '--compat', 'llm-d']);
    assert.equal(result.code, 0, result.stderr);
    const schema = z.fromJSONSchema(
      JSON.parse(readFileSync('test/fixtures/llm-d/br_v0_2_json_schema.json', 'utf8')),
    );
    const points = findRunDirs(out);
    assert.equal(points.length, 2);
    for (const [index, point] of points.entries()) {
      const path = join(point, 'benchmark_report_v0.2,_infergauge.yaml');
      assert.ok(result.stdout.includes(`llm-d benchmark report: ${path}`), result.stdout);
      const text = readFileSync(path, 'utf8');
      const doc = parse(text);
      const checked = schema.safeParse(doc);
      assert.ok(checked.success, JSON.stringify(checked.error?.issues));
      assert.equal(doc.scenario.load.standardized.stage, index);
      const saved = JSON.parse(readFileSync(join(point, 'summary.json'), 'utf8')) as RunSummary;
      const back = readLlmdReport(text, path);
      assert.equal(back.summary.requests.completed, saved.requests.completed);
      assert.equal(doc.run.eid !== undefined, true, 'the sweep is the experiment');
    }
  });
});
