import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { forEachTokenGap, requestMetrics } from '../../src/metrics/requestMetrics.js';
import { parseSlo } from '../../src/metrics/slo.js';
import { type RunSummary, summarize } from '../../src/metrics/summary.js';
import { validityOf } from '../../src/metrics/validity.js';
import type { RequestRecord } from '../../src/record.js';
import { readRecords } from '../../src/results/jsonl.js';
import { runCli, tempDir } from '../helpers/cli.js';

/** METRICS.md section 2 and 3 identities, over a real run of the CLI against the simulator. */
describe('identities over a real run', () => {
  const out = join(tempDir('ig-id-'), 'run');
  const records: RequestRecord[] = [];
  let summary: RunSummary;
  before(async () => {
    const result = await runCli([
      'run',
      '--requests',
      '60',
      '--warmup',
      '6',
      '--concurrency',
      '6',
      '--input-tokens',
      '40',
      '--output-tokens',
      '24',
      '--slo',
      'ttft<200,tpot<20',
      '--out',
      out,
    ]);
    assert.equal(result.code, 0, result.stderr);
    for await (const r of readRecords(join(out, 'records.jsonl'))) records.push(r);
    summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
  });

  test('per request: sum(itl) = last - first, mean(itl) = tpot, e2e >= ttft, ttfb <= ttft', () => {
    assert.equal(records.length, 66);
    for (const r of records) {
      const m = requestMetrics(r);
      const itl: number[] = [];
      forEachTokenGap(r, (gap, k) => {
        for (let i = 0; i < k; i++) itl.push(gap / k);
      });
      const sum = itl.reduce((a, b) => a + b, 0);
      const decode = (r.lastTokenAt as number) - (r.firstTokenAt as number);
      assert.ok(Math.abs(sum - decode) < 1e-6, `sum(itl) ${sum} vs ${decode}`);
      assert.ok(Math.abs(sum / itl.length - (m.tpotMs as number)) < 1e-6);
      assert.ok(m.e2eMs >= (m.ttftMs as number));
      assert.ok((m.ttfbMs as number) <= (m.ttftMs as number));
      assert.equal(itl.length, r.outputTokens - 1);
    }
  });

  test('run level: rates times duration give the totals; measured concurrency within the load', () => {
    const measured = records.filter((r) => r.phase === 'measure');
    assert.equal(summary.requests.completed, 60);
    assert.equal(summary.requests.warmup, 6);
    const { durationS, throughput, tokens } = summary;
    const first = Math.min(...measured.map((r) => r.sentAt));
    const last = Math.max(...measured.map((r) => r.endAt));
    assert.ok(Math.abs(durationS - (last - first) / 1000) < 1e-9);
    assert.ok(Math.abs(throughput.outputTokensPerS * durationS - tokens.output) < 1e-6);
    assert.ok(Math.abs(throughput.requestsPerS * durationS - 60) < 1e-6);
    assert.ok(
      Math.abs(
        throughput.totalTokensPerS - throughput.inputTokensPerS - throughput.outputTokensPerS,
      ) < 1e-6,
    );
    assert.equal(tokens.output, 60 * 24);
    assert.ok(summary.load.meanConcurrency > 0 && summary.load.meanConcurrency <= 6 + 1e-9);
    assert.equal(summary.latency.itlMs.count, 60 * 23);
    assert.ok(summary.latency.ttftMs.p50 <= summary.latency.ttftMs.p99);
    assert.ok(summary.goodput !== undefined && summary.goodput.sloAttainment > 0.9);
  });

  test('the summary is a pure function of the records: re-summarised from disk it is the same', () => {
    const again = summarize(records, {
      load: { mode: 'closed', concurrency: 6 },
      slo: parseSlo('ttft<200,tpot<20'),
    });
    // The server's metrics (scraped by default) and their warnings come from telemetry.jsonl.
    // The verdict judges the warnings, client health's among them: checked against them below.
    // The cache's state is the session's fact (it emptied or primed the cache), not the records'.
    const {
      clientHealth: _inRunOnly,
      cacheState: _sessionFact,
      warnings,
      serverMetrics,
      validity,
      ...rest
    } = summary as RunSummary & { serverMetrics?: { warnings: { code: string }[] } };
    assert.deepEqual(validity, validityOf(warnings));
    const { clientHealth: _none, warnings: againWarnings, ...againRest } = again;
    assert.deepEqual(JSON.parse(JSON.stringify(againRest)), rest);
    // Warnings from in-run client health (a busy machine raises them) are not in the records.
    const fromServer = new Set([
      'client_limited',
      'coalesced_events',
      ...(serverMetrics?.warnings ?? []).map((w) => w.code),
    ]);
    assert.deepEqual(
      againWarnings.map((w) => w.code),
      warnings.filter((w) => !fromServer.has(w.code)).map((w) => w.code),
    );
  });
});
