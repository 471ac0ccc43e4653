/**
 * Issue 54: llm-d Benchmark Reports (0.2, 0.2.1) read as runs, from llm-d's own published
 * examples; damaged and hostile files get a clear error with a stable code, never a crash.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { InfergaugeError } from '../../../src/errors.js';
import {
  isLlmdReport,
  isoDurationSeconds,
  MAX_LLMD_REPORT_BYTES,
  nestingDepth,
  readLlmdReport,
} from '../../../src/results/foreign/llmd.js';

const fixtures = 'test/fixtures/llm-d';
const v02Text = readFileSync(`${fixtures}/br_v0_2_example.yaml`, 'utf8');
const v021Text = readFileSync(`${fixtures}/br_v0_2_1_example.yaml`, 'utf8');

function refused(text: string, code: string, pattern: RegExp) {
  assert.throws(
    () => readLlmdReport(text, 'report.yaml'),
    (err: unknown) => {
      assert.ok(err instanceof InfergaugeError, String(err));
      assert.equal(err.code, code);
      assert.equal(err.exitCode, 2);
      assert.match(err.message, /^report\.yaml: not a readable llm-d Benchmark Report: /);
      assert.match(err.message, pattern);
      return true;
    },
  );
}

/** The example with one change made to its parsed form. */
// biome-ignore lint/suspicious/noExplicitAny: a test edits the parsed example at any depth
function edited(change: (doc: Record<string, any>) => void): string {
  const doc = parse(v02Text);
  change(doc);
  return stringify(doc);
}

describe("llm-d's published examples read as runs", () => {
  test('0.2: summary-only, units converted to ms, the open load, the model', () => {
    const run = readLlmdReport(v02Text, 'br_v0_2_example.yaml');
    assert.equal(run.format, 'llm-d');
    assert.equal(run.formatVersion, '0.2');
    assert.equal(run.perRequest, false);
    assert.equal(run.records, undefined);
    const s = run.summary;
    assert.deepEqual(s.requests, { completed: 500, failed: 0, warmup: 0, errorsByKind: {} });
    assert.ok(Math.abs(s.latency.ttftMs.mean - 36.8578234128654) < 1e-9);
    assert.ok(Math.abs(s.latency.ttftMs.p99_9 - 57.0147572150454) < 1e-9);
    assert.ok(Math.abs(s.latency.itlMs.mean - 36.8578234128654) < 1e-9);
    assert.ok(Number.isNaN(s.latency.itlMs.p99), 'a percentile the report lacks stays unknown');
    assert.equal(s.latency.ttftMs.count, 500);
    assert.ok(Math.abs(s.durationS - 49.97206788184121) < 1e-12);
    assert.equal(s.throughput.requestsPerS, 2262.448);
    assert.ok(Number.isNaN(s.throughput.decodeTokensPerS));
    assert.equal(s.tokens.input, Math.round(2262.448 * 500));
    assert.deepEqual(run.load, { mode: 'open', rate: 10, arrival: 'poisson' });
    assert.equal(run.model, 'Qwen/Qwen3-0.6B');
    assert.equal(run.startedAt, '2025-11-05T18:00:42Z');
    assert.ok(run.notes.some((n) => /inference-perf 0\.3\.0's/.test(n)));
    assert.ok(run.notes.some((n) => /Stage 3/.test(n)));
    assert.ok(run.notes.some((n) => /Arrival process not stated/.test(n)));
  });

  test('0.2.1 (a superset) reads the same way', () => {
    const run = readLlmdReport(v021Text, 'br_v0_2_1_example.yaml');
    assert.equal(run.formatVersion, '0.2.1');
    assert.ok(run.summary.requests.completed > 0);
    assert.ok(Number.isFinite(run.summary.latency.ttftMs.mean));
  });

  test("an unquoted version (YAML's number 0.2) reads as '0.2'", () => {
    const run = readLlmdReport(v02Text.replace("version: '0.2'", 'version: 0.2'), 'r.yaml');
    assert.equal(run.formatVersion, '0.2');
  });

  test('JSON reads as YAML does', () => {
    const doc = parse(v02Text);
    doc.scenario.load.standardized.concurrency = 64;
    const run = readLlmdReport(JSON.stringify(doc), 'report.json');
    assert.deepEqual(run.load, { mode: 'open', rate: 10, arrival: 'poisson', maxConcurrency: 64 });
  });

  test('detected by content: every version (0.1 to be refused by name); other JSON and scalars no', () => {
    assert.equal(isLlmdReport(parse(v02Text)), true);
    assert.equal(isLlmdReport(parse(v021Text)), true);
    const v01Text = readFileSync(`${fixtures}/br_v0_1_example.yaml`, 'utf8');
    assert.equal(isLlmdReport(parse(v01Text)), true);
    refused(
      v01Text,
      'IG_LLMD_REPORT_INVALID',
      /version 0\.1 is not read \(versions 0\.2, 0\.2\.1 are\)/,
    );
    assert.equal(isLlmdReport({ version: '0.2', results: {} }), false);
    assert.equal(isLlmdReport({ ttfts: [1], itls: [[1]] }), false);
    for (const v of [null, 42, 'text', [], undefined]) assert.equal(isLlmdReport(v), false);
  });

  test('failures and incomplete requests are failed; ms units taken as they are', () => {
    const run = readLlmdReport(
      edited((d) => {
        const a = d.results.request_performance.aggregate;
        a.requests.failures = 20;
        a.requests.incomplete = 5;
        a.latency.request_latency = { units: 'ms', mean: 1500, p99: 2500 };
      }),
      'r.yaml',
    );
    assert.equal(run.summary.requests.completed, 475);
    assert.equal(run.summary.requests.failed, 25);
    assert.equal(run.summary.latency.e2eMs.mean, 1500);
    assert.equal(run.summary.latency.e2eMs.p99, 2500);
    assert.ok(run.notes.some((n) => /5 incomplete/.test(n)));
  });

  test("nesting is measured without parsing: llm-d's examples are shallow", () => {
    assert.ok(nestingDepth(v02Text) <= 12, String(nestingDepth(v02Text)));
    assert.ok(nestingDepth(JSON.stringify(parse(v021Text), null, 2)) <= 12);
    assert.equal(nestingDepth('a: "[[[[" # [[[[\nb: [[1]]'), 2);
  });

  test('ISO 8601 durations', () => {
    assert.equal(isoDurationSeconds('PT7.798249S'), 7.798249);
    assert.equal(isoDurationSeconds('PT1H2M3.5S'), 3723.5);
    assert.equal(isoDurationSeconds('P1DT1S'), 86401);
    for (const bad of ['P', 'PT', '7s', 'PT-1S', ''])
      assert.equal(isoDurationSeconds(bad), undefined);
  });
});

describe('damaged and hostile reports: a clear error, never a crash', () => {
  test('truncated JSON and YAML', () => {
    const json = JSON.stringify(parse(v02Text));
    refused(json.slice(0, json.length / 2), 'IG_LLMD_REPORT_INVALID', /not YAML or JSON/);
    // YAML cut mid-document can still parse: what is missing is then named.
    refused(v02Text.slice(0, 300), 'IG_LLMD_REPORT_INVALID', /: no results$/);
  });

  test('wrong types and units name the field', () => {
    refused(
      edited((d) => {
        d.results.request_performance.aggregate.requests.total = 'many';
      }),
      'IG_LLMD_REPORT_INVALID',
      /results\.request_performance\.aggregate\.requests\.total/,
    );
    refused(
      edited((d) => {
        d.results.request_performance.aggregate.latency.time_to_first_token.units = 'hours';
      }),
      'IG_LLMD_REPORT_INVALID',
      /latency\.time_to_first_token: units hours are not s or ms/,
    );
    for (const units of ['constructor', '__proto__', 'toString']) {
      refused(
        edited((d) => {
          d.results.request_performance.aggregate.throughput.request_rate.units = units;
        }),
        'IG_LLMD_REPORT_INVALID',
        /throughput\.request_rate: units .* are not queries\/s/,
      );
    }
    refused(
      edited((d) => {
        d.results.request_performance.aggregate.latency.time_to_first_token.mean = null;
      }),
      'IG_LLMD_REPORT_INVALID',
      /time_to_first_token\.mean/,
    );
  });

  test('versions not read are named', () => {
    refused(
      edited((d) => {
        d.version = '0.1';
      }),
      'IG_LLMD_REPORT_INVALID',
      /version 0\.1 is not read \(versions 0\.2, 0\.2\.1 are\)/,
    );
    for (const text of ['', '42', 'null', '[]', '- a\n- b']) {
      refused(text, 'IG_LLMD_REPORT_INVALID', /not a mapping with version, run and results/);
    }
    refused('run: {uid: x}\nresults: {}', 'IG_LLMD_REPORT_INVALID', /: no version$/);
    refused("version: '0.2'\nrun: {}", 'IG_LLMD_REPORT_INVALID', /: no run\.uid or results$/);
  });

  test('a document over the size limit is refused unread', () => {
    const started = performance.now();
    refused(
      `version: '0.2'\n#${'x'.repeat(MAX_LLMD_REPORT_BYTES)}`,
      'IG_LLMD_REPORT_TOO_LARGE',
      /over the \d+-byte limit/,
    );
    assert.ok(performance.now() - started < 1000);
  });

  test('alias bombs, deep nesting and duplicate keys', () => {
    const bomb = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      ...Array.from({ length: 9 }, (_, i) => {
        const p = String.fromCharCode(97 + i);
        const n = String.fromCharCode(98 + i);
        return `${n}: &${n} [*${p},*${p},*${p},*${p},*${p},*${p},*${p},*${p},*${p}]`;
      }),
    ].join('\n');
    refused(bomb, 'IG_LLMD_REPORT_INVALID', /not YAML or JSON/);
    refused('['.repeat(200_000), 'IG_LLMD_REPORT_TOO_DEEP', /nested over 100 levels/);
    refused(`${'{"a":'.repeat(500)}1${'}'.repeat(500)}`, 'IG_LLMD_REPORT_TOO_DEEP', /nested/);
    const block = Array.from({ length: 200 }, (_, i) => `${'  '.repeat(i)}a:`).join('\n');
    refused(block, 'IG_LLMD_REPORT_TOO_DEEP', /nested/);
    // Just under the bound the parser itself answers, and its answer is a clear error too.
    refused('['.repeat(99), 'IG_LLMD_REPORT_INVALID', /not YAML or JSON/);
    refused("version: '0.2'\nversion: '0.2'\n", 'IG_LLMD_REPORT_INVALID', /not YAML or JSON/);
  });

  test('control characters and huge strings: read as data, messages short', () => {
    // Server and file text is untrusted and kept as it is; what shows it strips control
    // characters (the command line's error printing, the terminal and HTML renderers).
    const esc = '\u001b]0;owned\u0007\u001b[2J';
    const run = readLlmdReport(
      edited((d) => {
        d.scenario.stack[0].standardized.model.name = `Qwen${esc}`;
        d.scenario.load.standardized.tool = `perf${esc}`;
      }),
      'r.yaml',
    );
    assert.equal(run.model, `Qwen${esc}`);
    const huge = 'u'.repeat(1_000_000);
    assert.throws(
      () =>
        readLlmdReport(
          edited((d) => {
            d.results.request_performance.aggregate.latency.request_latency.units = huge;
          }),
          'r.yaml',
        ),
      (err: Error) =>
        err.message.length < 400 && /request_latency: units u+\.\.\. are not/.test(err.message),
    );
    assert.throws(
      () =>
        readLlmdReport(
          edited((d) => {
            d.version = huge;
          }),
          'r.yaml',
        ),
      (err: Error) => err.message.length < 400,
    );
  });
});
