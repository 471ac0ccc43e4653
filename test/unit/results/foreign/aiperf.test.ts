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
const aggregate = () =>
  JSON.parse(readFileSync(fixture('aiperf-profile_export_aiperf.json'), 'utf8')) as Record<
    string,
    { avg: number; p50: number; p99: number }
  >;
/** The file's times are ns; records keep whole µs, so figures agree to 1e-3 ms. */
const near = (a: number, b: number, what: string) =>
  assert.ok(Math.abs(a - b) <= 1e-3, `${what}: ${a} vs ${b}`);

describe('AIPerf profile exports', () => {
  it('profile_export.jsonl: per request, with AIPerf’s own aggregate figures', async () => {
    const agg = aggregate();
    const [run] = await readForeign(fixture('aiperf-profile_export.jsonl'));
    assert.ok(run);
    assert.equal(run.format, 'aiperf');
    assert.equal(run.perRequest, true);
    assert.equal(run.records?.length, 10);
    for (const r of run.records ?? []) assert.equal(recordProblem(r), undefined);
    const s = run.summary;
    assert.equal(s.requests.completed, agg.request_count?.avg);
    assert.equal(s.requests.failed, agg.error_request_count?.avg);
    assert.deepEqual(s.requests.errorsByKind, { http_5xx: 1 });
    assert.equal(s.tokens.output, agg.total_output_tokens?.avg);
    for (const [ours, theirs] of [
      ['ttftMs', 'time_to_first_token'],
      ['e2eMs', 'request_latency'],
      // AIPerf's ITL per request is infergauge's TPOT; its inter-chunk gaps our chunk gaps.
      ['tpotMs', 'inter_token_latency'],
      ['chunkGapMs', 'inter_chunk_latency'],
    ] as const) {
      const t = agg[theirs];
      assert.ok(t);
      near(s.latency[ours].mean, t.avg, `mean ${theirs}`);
      near(s.latency[ours].p50, t.p50, `p50 ${theirs}`);
      near(s.latency[ours].p99, t.p99, `p99 ${theirs}`);
    }
    // The last token is the sum of the gaps, each rounded to the µs: a few µs at most.
    const durationMs = (agg.benchmark_duration?.avg ?? 0) * 1000;
    assert.ok(Math.abs(s.durationS * 1000 - durationMs) < 0.01, `${s.durationS} s`);
    assert.ok(run.notes.some((n) => /infergauge’s TPOT/.test(n)));
  });

  it('profile_export_aiperf.json: summary-only, its statistics as they are', async () => {
    const agg = aggregate();
    const [run] = await readForeign(fixture('aiperf-profile_export_aiperf.json'));
    assert.ok(run);
    assert.equal(run.perRequest, false);
    assert.equal(run.model, 'Qwen/Qwen3-0.6B');
    assert.deepEqual(run.load, { mode: 'closed', concurrency: 2 });
    assert.equal(run.summary.latency.ttftMs.p99, agg.time_to_first_token?.p99);
    assert.equal(run.summary.latency.tpotMs.mean, agg.inter_token_latency?.avg);
    assert.equal(run.summary.requests.completed, 9);
    assert.ok(run.notes.some((n) => /statistics only/.test(n)));
  });

  it('a torn last line is skipped and said; a damaged field is an error naming the line', () => {
    const text = readFileSync(fixture('aiperf-profile_export.jsonl'), 'utf8');
    const torn = text.slice(0, text.length - 40);
    const [run] = parseForeign(torn, 'p.jsonl');
    assert.equal(run?.records?.length, 9);
    assert.ok(run?.notes.some((n) => /1 line of the file did not parse/.test(n)));
    const lines = text.trim().split('\n');
    const bad = JSON.parse(lines[2] as string);
    bad.metrics.inter_chunk_latency.value[1] = -4;
    lines[2] = JSON.stringify(bad);
    assert.throws(
      () => parseForeign(lines.join('\n'), 'p.jsonl'),
      (err: unknown) =>
        err instanceof ForeignInputError &&
        /^p\.jsonl line 3: .*inter_chunk_latency\[1\] is -4/.test(err.message),
    );
    const seconds = JSON.parse(lines[0] as string);
    seconds.metrics.time_to_first_token.unit = 's';
    lines[0] = JSON.stringify(seconds);
    assert.throws(
      () => parseForeign(lines.join('\n'), 'p.jsonl'),
      /time_to_first_token is in "s", not ms/,
    );
  });
});
