/**
 * The read model (src/results/runView.ts): one streaming pass gives what the full load gave
 * (the same summary, the same distribution values), its chart samples stay bounded, and its
 * memory per request is a few typed-array entries whatever the run's length.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ItlEvents, RunSampleBuilder } from '../../../src/analysis/compare.js';
import { MAX_FAILURE_GROUPS } from '../../../src/metrics/failureGroups.js';
import { requestMetrics } from '../../../src/metrics/requestMetrics.js';
import { summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { latencyCharts, MAX_SERIES_POINTS, timelineCharts } from '../../../src/report/charts.js';
import { loadReportInput } from '../../../src/results/load.js';
import { loadSavedRuns, readRunRecords, readSummary } from '../../../src/results/reader.js';
import {
  chartsOf,
  checkHeap,
  MAX_CHART_ITL_EVENTS,
  REQUEST_STATE,
  ReadMemoryError,
  RunViewBuilder,
  TimeBins,
} from '../../../src/results/runView.js';
import { REPO } from '../../../tools/repo.js';

const RUN = join(REPO, 'test/fixtures/report/run');

/** `n` records of `tokens` one-token events each, sent 20 ms apart; every 50th fails. */
function synthetic(n: number, tokens = 4): RequestRecord[] {
  const records: RequestRecord[] = [];
  for (let id = 0; id < n; id++) {
    const sentAt = id * 20;
    if (id % 50 === 49) {
      records.push({
        id,
        phase: 'measure',
        scheduledAt: sentAt,
        sentAt,
        endAt: sentAt + 5,
        status: 500,
        requestedInputTokens: 64,
        requestedOutputTokens: tokens,
        outputTokens: 0,
        outputTokensSource: 'server',
        events: { dtUs: [], tokens: [], contentChars: [] },
        error: { kind: 'http_5xx', message: `HTTP 500 #${id}`, status: 500 },
      });
      continue;
    }
    const dtUs = Array.from({ length: tokens }, (_, i) => (i === 0 ? 50_000 : 10_000 + (id % 7)));
    const endAt = sentAt + dtUs.reduce((a, b) => a + b, 0) / 1000;
    records.push({
      id,
      phase: 'measure',
      scheduledAt: sentAt,
      sentAt,
      firstTokenAt: sentAt + 50,
      firstContentAt: sentAt + 50,
      lastTokenAt: endAt,
      endAt,
      status: 200,
      requestedInputTokens: 64,
      requestedOutputTokens: tokens,
      outputTokens: tokens,
      outputTokensSource: 'server',
      events: { dtUs, tokens: dtUs.map(() => 1), contentChars: dtUs.map(() => 4) },
    });
  }
  return records;
}

describe('the read model, one pass', () => {
  test('gives the summary and the distributions of the full load of a small run', async () => {
    const records = await readRunRecords(RUN);
    const saved = readSummary(RUN);
    assert.ok(saved);
    const [run] = await loadSavedRuns(RUN, () => {}, { charts: true });
    const full = summarize(records, { load: run.summary.load });
    assert.deepEqual(run.summary.latency, full.latency, 'every percentile, exactly');
    assert.deepEqual(run.summary.throughput, full.throughput);
    assert.equal(run.requests, records.length);
    // The chart columns hold each record's values as requestMetrics gives them.
    const charts = run.charts;
    assert.ok(charts);
    records.forEach((r, i) => {
      const m = requestMetrics(r);
      assert.equal(charts.columns.id[i], r.id);
      assert.equal(charts.columns.endAt[i] - charts.columns.sentAt[i], m.e2eMs);
      if (charts.columns.state[i] === REQUEST_STATE.completed) {
        assert.equal(charts.columns.ttftMs[i], m.ttftMs ?? Number.NaN);
      }
    });
    // The ITL curve's samples weigh exactly the summary's per-token count.
    let tokens = 0;
    for (const t of charts.itl.tokens) tokens += t;
    assert.equal(tokens, full.latency.itlMs.count);
    // The report input reuses the pass: the same chart data, no records held.
    const input = await loadReportInput(RUN, () => {}, { runs: [run] });
    assert.ok(input.kind === 'run');
    assert.equal(input.charts, charts);
    assert.equal(input.records, undefined);
  });

  test('charts drawn from the model equal those drawn from the records', () => {
    const records = synthetic(3000);
    const summary = summarize(records, { load: { mode: 'closed', concurrency: 2 } });
    const fromView = latencyCharts({ summary, charts: chartsOf(records), telemetry: [] });
    assert.deepEqual(
      fromView.map((c) => c.id),
      ['ttft-cdf', 'itl-cdf', 'tpot-cdf', 'e2e-cdf'],
    );
    // E2E curve: the sorted E2E of the completed requests.
    const e2e = records
      .filter((r) => !r.error)
      .map((r) => r.endAt - r.sentAt)
      .sort((a, b) => a - b);
    const curve = fromView[3];
    assert.ok(curve.kind === 'xy');
    assert.equal(curve.series[0].data[0][0], e2e[0]);
    assert.equal(curve.series[0].data.at(-1)?.[0], e2e.at(-1));
  });
});

describe('the read model stays bounded', () => {
  test('the timeline is sampled to a bounded number of points', () => {
    const records = synthetic(20_000);
    const charts = chartsOf(records);
    const summary = summarize(records, { load: { mode: 'closed', concurrency: 2 } });
    const specs = timelineCharts({ summary, charts, telemetry: [] });
    assert.deepEqual(
      specs.map((c) => c.id),
      ['latency-timeline', 'load-timeline'],
    );
    for (const spec of specs) {
      assert.ok(spec.kind === 'xy');
      for (const series of spec.series) {
        assert.ok(series.data.length <= MAX_SERIES_POINTS, `${spec.id} ${series.name}`);
      }
    }
  });

  test('time bins grow wider instead of longer', () => {
    const bins = new TimeBins();
    bins.add(0.5, 1);
    bins.add(3_600_000 * 6, 2); // six hours in
    const out = bins.done();
    assert.ok(out.length <= 100_000);
    assert.equal(bins.widthMs, 1000);
    assert.equal(out[0], 1);
    assert.equal(out[out.length - 1], 2);
  });

  test('200k requests cost a few typed-array entries each', () => {
    const n = 200_000;
    const sample = new RunSampleBuilder(100_000);
    const view = new RunViewBuilder({ charts: true, sample });
    for (const r of synthetic(n, 4)) view.add(r);
    const charts = view.charts();
    assert.ok(charts);
    assert.equal(charts.requests, n);
    let columnBytes = 0;
    for (const column of Object.values(charts.columns)) {
      assert.equal(column.length, n);
      columnBytes += column.byteLength;
    }
    assert.ok(columnBytes / n <= 6 * 8 + 2, `${columnBytes / n} bytes per request`);
    // Token events: 4 per request, 800k in all; the model keeps a bounded share.
    assert.ok(charts.itl.values.length <= MAX_CHART_ITL_EVENTS);
    assert.ok(charts.itl.every > 1);
    assert.ok(charts.tokenBins.output.length <= 100_000);
    assert.equal(charts.failures.groups.length, MAX_FAILURE_GROUPS);
    assert.equal(charts.failures.failed, n / 50);
    assert.equal(charts.failures.distinct, n / 50);
    assert.equal(charts.failures.ungrouped, 0);
    const s = sample.build();
    assert.equal(s.counted, n);
    assert.ok(s.itlValue.length <= 100_000);
    assert.ok(s.itlEvery > 1);
    assert.equal(s.itlStart.length, n + 1);
  });

  test('thinned ITL events keep whole requests: every k-th, all its events', () => {
    const itl = new ItlEvents(10);
    for (let request = 0; request < 8; request++) {
      if (itl.begin()) for (let e = 0; e < 3; e++) itl.add(request, 1);
      itl.end();
    }
    assert.equal(itl.every, 4);
    assert.deepEqual([...itl.values.view()], [0, 0, 0, 4, 4, 4]);
    assert.deepEqual([...itl.start()], [0, 3, 3, 3, 3, 6, 6, 6, 6]);
  });

  test('a heap near its limit stops the read with a clear error, exit 1, not a V8 abort', () => {
    const limit = 4096 * 2 ** 20;
    checkHeap('records.jsonl', '8,192 records', {
      used_heap_size: limit / 2,
      heap_size_limit: limit,
    });
    assert.throws(
      () =>
        checkHeap('records.jsonl', '8,192 records', {
          used_heap_size: 0.9 * limit,
          heap_size_limit: limit,
        }),
      (err: unknown) =>
        err instanceof ReadMemoryError &&
        err.exitCode === 1 &&
        err.code === 'IG_OUT_OF_MEMORY' &&
        /records\.jsonl filled the JavaScript heap .* after 8,192 records/.test(err.message) &&
        /NODE_OPTIONS=--max-old-space-size=8192/.test(err.message),
    );
  });
});
