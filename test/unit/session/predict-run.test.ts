/**
 * `run --simulate --calibration`: the run's figures get prediction intervals (session/
 * predictVirtual.ts), saved in summary.json, kept when a report summarises the records again,
 * shown on the terminal and in the HTML report; an uncalibrated run gets none.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { RunSummary } from '../../../src/metrics/summary.js';
import type { RunPlan } from '../../../src/plan/runPlan.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';
import { loadReportInput } from '../../../src/results/load.js';
import { loadSavedRuns } from '../../../src/results/reader.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { runPlan } from '../../../src/session/run.js';
import type { PreparedRun } from '../../../src/session/target.js';
import { calibrationFixture, writeCalibration } from '../../helpers/calibration.js';

const dir = mkdtempSync(join(tmpdir(), 'infergauge-predict-run-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const calibration = writeCalibration(dir);

/** A short virtual run (40 requests at concurrency 4) with these flags; its summary. */
async function simulate(
  flags: Record<string, unknown>,
  out?: string,
): Promise<{ summary: RunSummary; dir?: string }> {
  const prepared = prepareRun({
    simulate: true,
    requests: '40',
    concurrency: '4',
    inputTokens: '256',
    outputTokens: '32',
    ...(out !== undefined ? { out } : {}),
    ...flags,
  });
  assert.deepEqual(prepared.problems, []);
  const done = await runPlan(prepared as PreparedRun & { plan: RunPlan }, {
    outputs: [],
    save: out !== undefined,
  });
  const r = done.results[0];
  return { summary: r.summary, ...(r.dir ? { dir: r.dir } : {}) };
}

const METRICS = ['ttftMs', 'itlMs', 'tpotMs', 'e2eMs'] as const;

describe('a calibrated simulated run predicts with intervals', () => {
  test('summary.json: each latency median inside its interval, the statistics and throughput too', async () => {
    const out = join(dir, 'calibrated');
    const { summary, dir: runDir } = await simulate({ calibration }, out);
    assert.ok(runDir);
    const saved = JSON.parse(readFileSync(join(runDir, 'summary.json'), 'utf8')) as RunSummary;
    for (const m of METRICS) {
      const d = saved.latency[m];
      const p = d.prediction;
      assert.ok(p, `${m} has a prediction`);
      assert.ok(p.low <= d.p50 && d.p50 <= p.high, `${m}: ${p.low} <= ${d.p50} <= ${p.high}`);
      assert.ok(
        p.high / p.low > 1.02 && p.high / p.low < 2,
        `${m}: informative, ${p.low}-${p.high}`,
      );
      assert.equal(p.level, 0.9);
      const p99 = p.statistics.p99;
      assert.ok(p99 && p99.low <= d.p99 && d.p99 <= p99.high, `${m} p99`);
    }
    const t = saved.throughput.prediction?.outputTokensPerS;
    assert.ok(t && t.low <= saved.throughput.outputTokensPerS);
    assert.ok(saved.throughput.outputTokensPerS <= t.high);
    // 40 requests: every draw replays the whole run (drawRequests is absent).
    assert.deepEqual(saved.prediction, {
      calibration,
      statistic: 'p50',
      level: 0.9,
      draws: 32,
      covarianceFrom: 'fit',
    });
    // A report summarises the records again: the prediction came from replays, and stays.
    const [again] = await loadSavedRuns(out);
    assert.deepEqual(again.summary.latency.ttftMs.prediction, saved.latency.ttftMs.prediction);
    assert.deepEqual(again.summary.prediction, saved.prediction);

    const text = renderTerminalSummary(summary, { color: false });
    assert.match(text, /90% prediction intervals \(calibration .*calibration\.json, 32 draws;/);
    const ttft = summary.latency.ttftMs;
    const range = ttft.prediction as NonNullable<typeof ttft.prediction>;
    // TTFT's line under the prediction heading: `p50 21.40 (19.80-23.30)`, at the table's precision.
    const line = text
      .split('90% prediction intervals')[1]
      ?.split('\n')
      .find((l) => /^\s*TTFT/.test(l));
    const shown = line
      ?.match(/p50 ([\d.]+) \(([\d.]+)-([\d.]+)\)/)
      ?.slice(1)
      .map(Number);
    assert.ok(shown, `TTFT as 21.40 (19.80-23.30) in:\n${text}`);
    for (const [i, v] of [ttft.p50, range.low, range.high].entries()) {
      assert.ok(Math.abs(shown[i] - v) <= 0.05 + v * 1e-3, `${shown[i]} shows ${v}`);
    }
    assert.match(text, /predicted {4}[\d,.]+ \([\d,.]+-[\d,.]+\) output tok\/s/);

    const html = renderHtmlReport(await loadReportInput(out));
    assert.match(html, /<small class="prediction"[^>]*>predicted [\d,.]+-[\d,.]+<\/small>/);
    assert.match(html, /90% prediction interval from the calibration/);
  });

  test('an uncalibrated run, or --prediction-draws 0, has none', async () => {
    for (const flags of [{}, { calibration, predictionDraws: '0' }]) {
      const { summary } = await simulate(flags);
      assert.equal(summary.prediction, undefined);
      for (const m of METRICS) assert.equal(summary.latency[m].prediction, undefined, m);
      assert.equal(summary.throughput.prediction, undefined);
      assert.doesNotMatch(renderTerminalSummary(summary, { color: false }), /prediction/);
    }
  });

  test('a fitted value given as a flag is exact: the interval is the residual scatter alone', async () => {
    const only = writeCalibration(dir, 'mbu.json', calibrationFixture({ mbu: [0.7, 0.3] }, 0.05));
    const { summary } = await simulate({ calibration: only, mbu: '0.6' });
    assert.deepEqual(summary.prediction?.heldByFlags, ['mbu']);
    const d = summary.latency.tpotMs;
    const p = d.prediction;
    assert.ok(p);
    // Nothing drawn moves: TPOT's interval is exp(-+t sigma), sigma the RMS of its residuals
    // (-5 %, 0, +5 %) widened by 9 residuals over 8, t the 95th percentile of Student's t with
    // the 3 runs less a third of the 1 value fitted, 8/3 degrees of freedom (2.4783).
    const rms = Math.sqrt((Math.log(0.95) ** 2 + Math.log(1.05) ** 2) / 3);
    const sigma = rms * Math.sqrt(9 / 8);
    const z = 2.4783;
    assert.ok(Math.abs(p.high / d.p50 - Math.exp(z * sigma)) < 1e-3, `${p.high / d.p50}`);
    assert.ok(Math.abs(d.p50 / p.low - Math.exp(z * sigma)) < 1e-3, `${d.p50 / p.low}`);
  });

  test('the calibration path is escaped in the HTML report', async () => {
    const hostile = writeCalibration(dir, '<i>x.json');
    const out = join(dir, 'hostile');
    await simulate({ calibration: hostile, predictionDraws: '2' }, out);
    const html = renderHtmlReport(await loadReportInput(out));
    assert.ok(!html.includes('<i>x'));
    assert.ok(html.includes('&lt;i&gt;x.json'));
  });
});
