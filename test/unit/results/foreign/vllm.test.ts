import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { recordProblem } from '../../../../src/record.js';
import {
  ForeignInputError,
  MAX_FOREIGN_BYTES,
  parseForeign,
  readForeign,
} from '../../../../src/results/foreign/index.js';
import { vllmErrorKind } from '../../../../src/results/foreign/vllm.js';
import { REPO } from '../../../../tools/repo.js';

const FIXTURES = join(REPO, 'test/fixtures/foreign');
const fixture = (name: string) => join(FIXTURES, name);
const json = (name: string) =>
  JSON.parse(readFileSync(fixture(name), 'utf8')) as Record<string, unknown>;
/** Equal to the file's figure within floating-point noise (the file rounds nothing). */
const close = (a: number, b: unknown, what: string) =>
  assert.ok(Math.abs(a - (b as number)) < 1e-9 * Math.max(1, Math.abs(a)), `${what}: ${a} vs ${b}`);

describe('vLLM bench serve JSON', () => {
  it('rebuilds the per-request records of a --save-detailed file: counts and figures are the file’s', async () => {
    const file = json('vllm-bench-detailed.json');
    const [run] = await readForeign(fixture('vllm-bench-detailed.json'));
    assert.ok(run);
    assert.equal(run.format, 'vllm-bench');
    assert.equal(run.perRequest, true);
    assert.equal(run.model, 'Qwen/Qwen2.5-0.5B-Instruct');
    assert.equal(run.records?.length, 12);
    for (const r of run.records ?? []) assert.equal(recordProblem(r), undefined);
    const s = run.summary;
    assert.equal(s.requests.completed, file.completed);
    assert.equal(s.requests.failed, file.failed);
    assert.deepEqual(s.requests.errorsByKind, { http_4xx: 1 });
    assert.equal(s.tokens.output, file.total_output_tokens);
    assert.equal(s.tokens.input, file.total_input_tokens);
    // Where the definitions agree, the figures are vLLM's own.
    for (const [ours, theirs] of [
      ['ttftMs', 'ttft'],
      ['itlMs', 'itl'],
      ['e2eMs', 'e2el'],
    ] as const) {
      close(s.latency[ours].mean, file[`mean_${theirs}_ms`], `mean ${theirs}`);
      close(s.latency[ours].p50, file[`median_${theirs}_ms`], `median ${theirs}`);
      close(s.latency[ours].p99, file[`p99_${theirs}_ms`], `p99 ${theirs}`);
      close(s.latency[ours].stddev, file[`std_${theirs}_ms`], `std ${theirs}`);
    }
    // TPOT: vLLM's includes the tail after the last token (0.4 ms here over 5-9 gaps).
    const tpot = s.latency.tpotMs.mean;
    assert.ok(tpot < (file.mean_tpot_ms as number) && tpot > (file.mean_tpot_ms as number) - 0.1);
    close(s.durationS, file.duration, 'duration');
    assert.equal(run.load?.mode, 'closed');
    assert.ok(run.notes.some((n) => /numpy/.test(n)));
    assert.ok(run.notes.some((n) => /per streamed chunk/.test(n)));
  });

  it('reads a file without the per-request arrays as summary-only, and says so', async () => {
    const file = json('vllm-bench-summary.json');
    const [run] = await readForeign(fixture('vllm-bench-summary.json'));
    assert.ok(run);
    assert.equal(run.perRequest, false);
    assert.equal(run.records, undefined);
    assert.equal(run.summary.requests.completed, 11);
    assert.equal(run.summary.requests.failed, 1);
    assert.equal(run.summary.latency.ttftMs.p50, file.median_ttft_ms);
    assert.equal(run.summary.latency.tpotMs.p99, file.p99_tpot_ms);
    assert.ok(
      Number.isNaN(run.summary.latency.ttftMs.p90),
      'a percentile it did not save is unknown',
    );
    close(run.summary.throughput.requestsPerS, file.request_throughput, 'request throughput');
    assert.ok(run.notes.some((n) => /summary-only/.test(n) && /--save-detailed/.test(n)));
  });

  it('reads a file of the older benchmark_serving.py: no failed count, no start times (replayed on its load, said)', async () => {
    const file = json('vllm-bench-0.5-detailed.json');
    const [run] = await readForeign(fixture('vllm-bench-0.5-detailed.json'));
    assert.ok(run);
    assert.match(run.formatVersion ?? '', /benchmark_serving/);
    assert.equal(run.summary.requests.completed, file.completed);
    close(run.summary.latency.ttftMs.p50, file.median_ttft_ms, 'median ttft');
    close(run.summary.latency.itlMs.p99, file.p99_itl_ms, 'p99 itl');
    assert.deepEqual(run.load, { mode: 'open', rate: 4, arrival: 'poisson' });
    assert.ok(run.notes.some((n) => /sent at the mean rate, evenly spaced/.test(n)));
    const records = run.records ?? [];
    for (const [i, r] of records.entries()) assert.equal(r.sentAt, i * 250);
    // A closed loop's requests, without start times, are each sent when one of its slots frees.
    const closed = json('vllm-bench-0.5-detailed.json');
    closed.request_rate = 'inf';
    closed.max_concurrency = 2;
    const [replayed] = parseForeign(JSON.stringify(closed), 'x.json');
    const sent = (replayed?.records ?? []).map((r) => r.sentAt);
    const ends = (replayed?.records ?? []).map((r) => r.endAt);
    assert.deepEqual(sent.slice(0, 2), [0, 0]);
    assert.equal(sent[2], Math.min(ends[0] as number, ends[1] as number));
    assert.ok(replayed?.notes.some((n) => /replayed in file order on 2 slots/.test(n)));
  });

  it('tells error kinds from vLLM’s error text', () => {
    assert.equal(vllmErrorKind('Bad Request'), 'http_4xx');
    assert.equal(vllmErrorKind('Internal Server Error'), 'http_5xx');
    assert.equal(vllmErrorKind('Traceback ...\nasyncio.TimeoutError'), 'timeout');
    assert.equal(vllmErrorKind('Cannot connect to host localhost:8000'), 'connect');
    assert.equal(vllmErrorKind('something else'), 'stream_broken');
  });
});

describe('damaged and hostile files', () => {
  const good = () => json('vllm-bench-detailed.json');
  const problem = (value: unknown, pattern: RegExp) =>
    assert.throws(
      () => parseForeign(typeof value === 'string' ? value : JSON.stringify(value), 'x.json'),
      (err: unknown) => err instanceof ForeignInputError && pattern.test(err.message),
    );

  it('truncated JSON, another document and wrong types are errors that name the file and the fault', () => {
    const text = readFileSync(fixture('vllm-bench-detailed.json'), 'utf8');
    problem(text.slice(0, text.length / 2), /^x\.json: not JSON/);
    problem({ hello: 1 }, /^x\.json: not a result file of a format/);
    problem([1, 2], /not a result file/);
    problem(
      { ...good(), ttfts: 'abc' },
      /^x\.json: not a readable vLLM bench serve result: ttfts is not an array/,
    );
    problem(
      { ...good(), itls: [...(good().itls as unknown[]).slice(1)] },
      /itls has 11 entries and ttfts 12/,
    );
    problem({ ...good(), completed: -3 }, /completed is -3, not a count/);
    const negative = good();
    (negative.ttfts as number[])[2] = -0.5;
    problem(negative, /ttfts\[2\] is -0\.5/);
    const nan = good();
    (nan.itls as unknown[][]).splice(0, 1, [0.01, 'NaN']);
    problem(nan, /itls\[0\]\[1\] is "NaN"/);
    // A megabyte of text with escape sequences where a number belongs: quoted clipped, one line.
    const noisy = good();
    (noisy.ttfts as unknown[])[1] = `\u001b[2J${'A'.repeat(2 ** 20)}`;
    assert.throws(
      () => parseForeign(JSON.stringify(noisy), 'x.json'),
      (err: unknown) =>
        err instanceof ForeignInputError &&
        err.message.length < 200 &&
        !/\p{Cc}/u.test(err.message) &&
        /ttfts\[1\] is "\\u001b\[2JAAAA.*\.\.\./.test(err.message),
    );
    const huge = good();
    (huge.ttfts as number[])[0] = 1e300;
    problem(huge, /ttfts\[0\] is 1e\+300/);
  });

  it('control characters in a model name or error text never reach the output', () => {
    const file = good();
    file.model_id = 'evil\u001b[31m\nmodel';
    (file.errors as string[])[5] = 'Bad\u0007 Request\u001b]0;x\u0007';
    const [run] = parseForeign(JSON.stringify(file), 'x.json');
    assert.ok(run);
    assert.doesNotMatch(run.model ?? '', /\p{Cc}/u);
    const failed = run.records?.find((r) => r.error);
    assert.doesNotMatch(failed?.error?.message ?? '', /\p{Cc}/u);
  });

  it('a file past the size bound is refused before it is read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ig-foreign-'));
    const path = join(dir, 'big.json');
    writeFileSync(path, '');
    const { truncateSync } = await import('node:fs');
    truncateSync(path, MAX_FOREIGN_BYTES + 1); // sparse: no disk used
    await assert.rejects(
      readForeign(path),
      (err: unknown) =>
        err instanceof ForeignInputError && /big\.json: .*MiB, past the 256 MiB/.test(err.message),
    );
    await assert.rejects(readForeign(join(dir, 'missing.json')), /cannot read .*missing\.json/);
  });
});

describe("infergauge's own --compat vllm file", () => {
  it('holds every request in every per-request array, failed ones too, and reads back with its failures', async () => {
    const { vllmBenchResult } = await import('../../../../src/report/compat.js');
    const { phasedRecords } = await import('../../../helpers/phasedRecords.js');
    const { SummaryBuilder } = await import('../../../../src/metrics/summary.js');
    const records = phasedRecords(4, { requests: 12 });
    records[5] = { ...records[5], error: { kind: 'http_5xx', message: 'HTTP 503' } };
    const builder = new SummaryBuilder({ load: { mode: 'closed', concurrency: 4 } } as never);
    for (const r of records) builder.add(r);
    const file = vllmBenchResult(records, builder.build({}), {
      model: 'm',
      backend: 'vllm',
      tokenizer: 'm',
      date: '20261206-120000',
    });
    for (const key of ['input_lens', 'output_lens', 'ttfts', 'itls', 'errors'] as const) {
      assert.equal(file[key].length, 12, key);
    }
    // serve.py's defaults for a failed request: ttft 0.0, itl [], output length 0.
    assert.deepEqual([file.ttfts[5], file.itls[5], file.output_lens[5]], [0, [], 0]);
    const [run] = parseForeign(JSON.stringify(file), 'ours.json');
    assert.equal(run.summary.requests.completed, 11);
    assert.equal(run.summary.requests.failed, 1);
  });
});
