import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { recordProblem } from '../../../../src/record.js';
import {
  ForeignInputError,
  parseForeign,
  readForeign,
} from '../../../../src/results/foreign/index.js';
import { REPO } from '../../../../tools/repo.js';

const FIXTURES = join(REPO, 'test/fixtures/foreign');
const fixture = (name: string) => join(FIXTURES, name);
// biome-ignore lint/suspicious/noExplicitAny: a parsed fixture, read field by field
type Json = Record<string, any>;
const report = () => JSON.parse(readFileSync(fixture('guidellm-benchmarks.json'), 'utf8')) as Json;
/** The file's times are Unix seconds in doubles: rebuilt to the µs, means agree to 1e-3 ms. */
const near = (a: number, b: number, what: string, tolerance = 1e-3) =>
  assert.ok(Math.abs(a - b) <= tolerance, `${what}: ${a} vs ${b}`);

describe('GuideLLM benchmarks file', () => {
  it('reads each benchmark as a run, per request, with GuideLLM’s counts and means', async () => {
    const file = report();
    const runs = await readForeign(fixture('guidellm-benchmarks.json'));
    assert.equal(runs.length, 2);
    for (const [i, run] of runs.entries()) {
      const m = file.benchmarks[i].metrics;
      assert.equal(run.format, 'guidellm');
      assert.equal(run.perRequest, true);
      assert.match(run.source, new RegExp(`benchmarks\\[${i}\\]$`));
      assert.equal(run.model, 'Qwen/Qwen3-0.6B');
      for (const r of run.records ?? []) assert.equal(recordProblem(r), undefined);
      const s = run.summary;
      assert.equal(s.requests.completed, m.request_totals.successful);
      assert.equal(s.requests.failed, m.request_totals.errored + m.request_totals.incomplete);
      assert.equal(s.tokens.output, m.output_token_count.successful.total_sum);
      near(s.latency.ttftMs.mean, m.time_to_first_token_ms.successful.mean, 'mean TTFT');
      // GuideLLM's ITL: each request's mean gap weighted by its tokens less one, as ours.
      near(s.latency.itlMs.mean, m.inter_token_latency_ms.successful.mean, 'mean ITL');
      near(s.latency.e2eMs.mean, m.request_latency.successful.mean * 1000, 'mean E2E', 2e-3);
    }
    // An odd count: GuideLLM's median (no interpolation) is the middle sample, as ours.
    const first = runs[0]?.summary.latency.ttftMs;
    near(
      first?.p50 ?? 0,
      file.benchmarks[0].metrics.time_to_first_token_ms.successful.median,
      'median TTFT',
    );
    assert.deepEqual(runs[0]?.load, { mode: 'closed', concurrency: 1 });
    assert.deepEqual(runs[1]?.load, { mode: 'open', rate: 4, arrival: 'constant' });
    assert.deepEqual(runs[0]?.summary.requests.errorsByKind, { http_5xx: 1 });
    assert.ok(runs[0]?.notes.some((n) => /without interpolation/.test(n)));
    assert.ok(runs[0]?.notes.some((n) => /includes the first token/.test(n)));
  });

  it('reads benchmarks.yaml as the same run as its JSON', async () => {
    const [fromYaml] = await readForeign(fixture('guidellm-benchmarks.yaml'));
    const fromJson = (await readForeign(fixture('guidellm-benchmarks.json')))[1];
    assert.deepEqual(fromYaml?.records, fromJson?.records);
    assert.deepEqual(fromYaml?.summary.latency.ttftMs, fromJson?.summary.latency.ttftMs);
  });

  it('a file that keeps a sample of the requests is read from GuideLLM’s statistics, summary-only, and says so', () => {
    const file = report();
    file.benchmarks[1].requests.successful.splice(3, 4);
    const [, run] = parseForeign(JSON.stringify(file), 'g.json');
    assert.ok(run);
    assert.equal(run.perRequest, false);
    assert.equal(run.records, undefined);
    const m = file.benchmarks[1].metrics;
    assert.equal(run.summary.requests.completed, 10);
    assert.equal(run.summary.latency.ttftMs.p50, m.time_to_first_token_ms.successful.median);
    assert.equal(
      run.summary.latency.ttftMs.p99,
      m.time_to_first_token_ms.successful.percentiles.p99,
    );
    near(run.summary.latency.e2eMs.mean, m.request_latency.successful.mean * 1000, 'mean E2E');
    assert.ok(run.notes.some((n) => /keeps 6 of 10 requests/.test(n)));
  });

  it('damaged and hostile files: a clear error naming the benchmark and the field', () => {
    const problem = (text: string, pattern: RegExp) =>
      assert.throws(
        () => parseForeign(text, 'g.json'),
        (err: unknown) => err instanceof ForeignInputError && pattern.test(err.message),
      );
    const negative = report();
    negative.benchmarks[0].requests.successful[2].request_start_time = -1;
    problem(JSON.stringify(negative), /g\.json benchmarks\[0\]: .*request_start_time is -1/);
    const wrong = report();
    wrong.benchmarks[1].requests.errored = 'x';
    problem(JSON.stringify(wrong), /g\.json benchmarks\[1\]: .*requests\.errored is not a list/);
    problem(
      JSON.stringify({ benchmarks: [], metadata: { guidellm_version: '1' } }),
      /benchmarks list is empty/,
    );
    // YAML that expands aliases past the bound is refused, not expanded.
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 12; i++) {
      bomb.push(
        `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10)
          .fill(`*${String.fromCharCode(97 + i)}`)
          .join(', ')}]`,
      );
    }
    problem(bomb.join('\n'), /neither JSON nor YAML/);
    problem('benchmarks: [unclosed', /neither JSON nor YAML/);
  });
});
