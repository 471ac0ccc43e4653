/**
 * Issue 54: llm-d's Benchmark Report v0.2 written from a run (`report --compat llm-d`), valid
 * against llm-d's published JSON Schema, and read back as a run with every headline figure.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { z } from 'zod';
import type { Distribution } from '../../../src/metrics/distribution.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { llmdBenchmarkReport, llmdReportYaml } from '../../../src/report/llmd.js';
import { readLlmdReport } from '../../../src/results/foreign/llmd.js';
import { loadSavedRuns, readRunRecords } from '../../../src/results/reader.js';

const fixtures = 'test/fixtures/llm-d';
const schemaOf = (version: string) =>
  z.fromJSONSchema(JSON.parse(readFileSync(`${fixtures}/br_v${version}_json_schema.json`, 'utf8')));
const v02 = schemaOf('0_2');
const v021 = schemaOf('0_2_1');

const runDir = 'test/fixtures/report/run';

async function writtenReport() {
  const [run] = await loadSavedRuns(runDir, () => {}, { summarize: true });
  const records = await readRunRecords(run.dir);
  const report = llmdBenchmarkReport({
    summary: run.summary,
    manifest: run.manifest,
    records,
    name: 'run',
  });
  return { run, records, report, yaml: llmdReportYaml(report) };
}

function issues(schema: z.ZodType, value: unknown) {
  const r = schema.safeParse(value);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

describe('llm-d Benchmark Report schema (their own, as published)', () => {
  test("accepts llm-d's examples, once their .inf concurrency (not JSON) is taken out", () => {
    // Upstream's 0.2 example carries 0.2.1's session_performance; 0.2.1 is its superset.
    const v02example = parse(readFileSync(`${fixtures}/br_v0_2_example.yaml`, 'utf8'));
    v02example.scenario.load.standardized.concurrency = null;
    assert.deepEqual(issues(v02, v02example), ['results: Unrecognized key: "session_performance"']);
    for (const [schema, file] of [
      [v021, 'br_v0_2_example.yaml'],
      [v021, 'br_v0_2_1_example.yaml'],
    ] as const) {
      const example = parse(readFileSync(`${fixtures}/${file}`, 'utf8'));
      assert.equal(example.scenario.load.standardized.concurrency, Number.POSITIVE_INFINITY);
      assert.ok(issues(schema, example).length > 0, 'the JSON Schema cannot say infinity');
      example.scenario.load.standardized.concurrency = null;
      assert.deepEqual(issues(schema, example), [], file);
    }
  });
});

describe('report --compat llm-d: the written report', () => {
  test('validates against the v0.2 schema (and so v0.2.1), as written to disk in YAML', async () => {
    const { yaml } = await writtenReport();
    const onDisk = parse(yaml);
    assert.deepEqual(issues(v02, onDisk), []);
    assert.deepEqual(issues(v021, onDisk), []);
    assert.equal(onDisk.version, '0.2');
  });

  test('the schema would catch a wrong unit, a missing uid or an invented field', async () => {
    const { report } = await writtenReport();
    const wrongUnit = structuredClone(report) as unknown as {
      results: {
        request_performance: { aggregate: { latency: { request_latency: { units: string } } } };
      };
    };
    wrongUnit.results.request_performance.aggregate.latency.request_latency.units = 'hours';
    assert.ok(issues(v02, wrongUnit).length > 0);
    const noUid = structuredClone(report) as unknown as { run: { uid?: string } };
    delete noUid.run.uid;
    assert.ok(issues(v02, noUid).length > 0);
    assert.ok(issues(v02, { ...structuredClone(report), extra: 1 }).length > 0);
  });

  test("latencies in seconds, the summary's statistics, lengths from the completed requests", async () => {
    const { run, records, report } = await writtenReport();
    const s = run.summary;
    const a = report.results.request_performance.aggregate;
    const ttft = a.latency.time_to_first_token;
    assert.equal(ttft?.units, 's');
    assert.equal(ttft?.mean, s.latency.ttftMs.mean / 1000);
    assert.equal(ttft?.p99p9, s.latency.ttftMs.p99_9 / 1000);
    assert.equal(a.latency.inter_token_latency?.units, 's/token');
    assert.equal(a.requests.total, s.requests.completed + s.requests.failed);
    const ok = records.filter((r) => r.phase === 'measure' && !r.error);
    const outputs = ok.reduce((sum, r) => sum + r.outputTokens, 0);
    assert.ok(Math.abs((a.requests.output_length?.mean ?? 0) * ok.length - outputs) < 1e-6);
    assert.equal(a.throughput.output_token_rate?.mean, s.throughput.outputTokensPerS);
    const load = report.scenario.load as { standardized: Record<string, unknown> };
    assert.equal(load.standardized.tool, 'infergauge');
    assert.equal(load.standardized.concurrency, 16);
    assert.equal(load.standardized.rate_qps, undefined, 'a closed loop has no rate');
    assert.deepEqual(load.standardized.input_seq_len, {
      distribution: 'gaussian',
      value: 256,
      std_dev: 96,
      min: 32,
      max: 768,
    });
  });
});

describe('report --compat llm-d: what infergauge does not know is left out, never guessed', () => {
  test('an open loop: its rate and cap; the sweep as experiment id; still valid', async () => {
    const { run, records } = await writtenReport();
    const report = llmdBenchmarkReport({
      summary: {
        ...run.summary,
        load: {
          mode: 'open',
          rate: 12.5,
          arrival: 'gamma',
          maxConcurrency: 64,
          meanConcurrency: 3,
        },
      },
      manifest: {
        ...run.manifest,
        id: 'run-1',
        parent: { id: 'sweep-9', kind: 'sweep', dir: 'x' },
      },
      records,
      name: 'r12.5',
      stage: 3,
    });
    const load = report.scenario.load as { standardized: Record<string, unknown> };
    assert.equal(load.standardized.rate_qps, 12.5);
    assert.equal(load.standardized.concurrency, 64);
    assert.equal(load.standardized.stage, 3);
    assert.equal(report.run.uid, 'run-1');
    assert.equal(report.run.eid, 'sweep-9');
    assert.deepEqual(issues(v02, parse(llmdReportYaml(report))), []);
    const back = readLlmdReport(llmdReportYaml(report), 'r.yaml');
    assert.deepEqual(back.load, {
      mode: 'open',
      rate: 12.5,
      arrival: 'poisson',
      maxConcurrency: 64,
    });
  });

  test('every request failed: no latency or length statistics, the failures counted, valid', async () => {
    const { run, records } = await writtenReport();
    const failedRecords = records.map((r) => ({
      ...r,
      error: { kind: 'http_5xx' as const, message: 'HTTP 500' },
    }));
    const nan = { ...run.summary.latency.ttftMs, count: 0, mean: Number.NaN };
    const summary: RunSummary = {
      ...run.summary,
      requests: { ...run.summary.requests, completed: 0, failed: 200 },
      latency: { ...run.summary.latency, ttftMs: nan, tpotMs: nan, itlMs: nan, e2eMs: nan },
      throughput: { ...run.summary.throughput, requestsPerS: 0, decodeTokensPerS: Number.NaN },
    };
    const report = llmdBenchmarkReport({
      summary,
      manifest: { ...run.manifest, plan: {} },
      records: failedRecords,
      name: 'down',
    });
    const a = report.results.request_performance.aggregate;
    assert.deepEqual(a.latency, {});
    assert.deepEqual(a.requests, { total: 200, failures: 200 });
    const load = report.scenario.load as { standardized: Record<string, unknown> };
    assert.equal(load.standardized.source, 'unknown');
    assert.equal(
      (load.standardized.input_seq_len as { distribution: string }).distribution,
      'other',
    );
    assert.deepEqual(issues(v02, parse(llmdReportYaml(report))), []);
    const back = readLlmdReport(llmdReportYaml(report), 'down.yaml');
    assert.equal(back.summary.requests.failed, 200);
    assert.ok(Number.isNaN(back.summary.latency.ttftMs.mean));
  });
});

describe('round trip: infergauge run -> llm-d report -> infergauge run', () => {
  const close = (actual: number, expected: number, what: string) =>
    assert.ok(
      Math.abs(actual - expected) <= 1e-12 * Math.max(1, Math.abs(expected)),
      `${what}: ${actual} vs ${expected}`,
    );
  const sameDistribution = (actual: Distribution, expected: Distribution, what: string) => {
    assert.ok(expected.count > 0, `${what} has samples`);
    for (const k of [
      'mean',
      'stddev',
      'min',
      'p50',
      'p90',
      'p95',
      'p99',
      'p99_9',
      'max',
    ] as const) {
      close(actual[k], expected[k], `${what}.${k}`);
    }
  };

  test('keeps every headline figure of the summary the report was written from', async () => {
    const { run, yaml } = await writtenReport();
    const back = readLlmdReport(yaml, 'benchmark_report_v0.2,_infergauge.yaml');
    const s: RunSummary = run.summary;
    const b = back.summary;
    assert.equal(back.format, 'llm-d');
    assert.equal(back.formatVersion, '0.2');
    assert.equal(back.perRequest, false);
    assert.equal(back.records, undefined);
    for (const key of ['ttftMs', 'tpotMs', 'itlMs', 'e2eMs'] as const) {
      sameDistribution(b.latency[key], s.latency[key], key);
    }
    for (const key of [
      'requestsPerS',
      'outputTokensPerS',
      'inputTokensPerS',
      'totalTokensPerS',
    ] as const) {
      assert.equal(b.throughput[key], s.throughput[key], key);
    }
    assert.deepEqual(b.requests, { ...s.requests, warmup: 0, errorsByKind: {} });
    assert.equal(b.durationS, s.durationS);
    assert.equal(b.tokens.input, s.tokens.input);
    assert.equal(b.tokens.output, s.tokens.output);
    assert.deepEqual(back.load, { mode: 'closed', concurrency: 16 });
    assert.equal(back.model, run.manifest.model);
    assert.equal(back.startedAt, run.manifest.startedAt);
    // And the figures are summary.json's as saved.
    const saved = JSON.parse(readFileSync(`${runDir}/summary.json`, 'utf8')) as RunSummary;
    sameDistribution(b.latency.ttftMs, saved.latency.ttftMs, 'saved ttftMs');
    sameDistribution(b.latency.e2eMs, saved.latency.e2eMs, 'saved e2eMs');
    close(b.throughput.outputTokensPerS, saved.throughput.outputTokensPerS, 'saved output tok/s');
  });
});
