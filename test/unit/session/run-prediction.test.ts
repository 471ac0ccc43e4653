/**
 * A calibrated run's prediction fields (metrics/runPrediction.ts, session/predictVirtual.ts addRunPrediction): which figures get one, the shape
 * summary.json keeps, and what a summary rebuilt from its records keeps of them.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  drawRequestsFor,
  keepRunPrediction,
  type RunFigure,
  runFigures,
} from '../../../src/metrics/runPrediction.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { addRunPrediction } from '../../../src/session/predictVirtual.js';
import { fitBounds } from '../../../src/sim/calibrate.js';
import { predictionModel, studentTCdf } from '../../../src/sim/prediction.js';

const dist = (p50: number, count = 100) => ({
  count,
  mean: p50 * 1.1,
  stddev: 1,
  min: p50 / 2,
  p50,
  p90: p50 * 1.5,
  p95: p50 * 1.6,
  p99: p50 * 2,
  p99_9: p50 * 2.2,
  max: p50 * 3,
});

/** The parts of a summary the prediction reads and writes. */
function summaryOf(): RunSummary {
  return {
    latency: { ttftMs: dist(20), itlMs: dist(10), tpotMs: dist(10, 0), e2eMs: dist(1000) },
    throughput: {
      requestsPerS: 4,
      outputTokensPerS: 500,
      inputTokensPerS: 1000,
      totalTokensPerS: 1500,
      decodeTokensPerS: 490,
    },
  } as unknown as RunSummary;
}

/** One value fitted, residuals of 10 % on TTFT and nothing elsewhere (the 2 % floor). */
const model = predictionModel({
  fitted: { mbu: { value: 0.5, stdErr: 0.05, low: 0.45, high: 0.55, before: 0.5 } },
  pointErrors: [
    { ttftMs: 0.1, tpotMs: 0, outputTokPerS: 0 },
    { ttftMs: -0.1, tpotMs: 0, outputTokPerS: 0 },
  ],
  bounds: fitBounds,
});
/** The 95th percentile of the residual's t (its degrees of freedom: 2 runs less a third of 1 value fitted). */
const Z90 = tQuantile(0.95, model.dof);

function tQuantile(p: number, dof: number): number {
  let lo = 0;
  let hi = 50;
  for (let i = 0; i < 100; i++) {
    const mid = (lo + hi) / 2;
    if (studentTCdf(mid, dof) < p) lo = mid;
    else hi = mid;
  }
  return lo;
}

describe('a calibrated run’s prediction fields', () => {
  test('the residual is a t of the fit’s degrees of freedom', () => {
    assert.ok(Math.abs(model.dof - 5 / 3) < 1e-12, `${model.dof}`);
    assert.ok(Math.abs(Z90 - 3.36) < 1e-2, `${Z90}`);
  });

  test('draws replay a sixteenth of the run, at least 64 requests and four per request in flight', () => {
    assert.equal(drawRequestsFor({ requests: 200, concurrency: 16 }), 64);
    assert.equal(drawRequestsFor({ requests: 40, concurrency: 4 }), 40, 'never more than the run');
    assert.equal(drawRequestsFor({ requests: 20_000, concurrency: 64 }), 1250);
    assert.equal(drawRequestsFor({ requests: 20_000, concurrency: 512 }), 2048);
    assert.equal(drawRequestsFor({}), undefined, 'a run bounded by its duration replays it');
  });

  test('figures by name, null where the run has none', () => {
    const f = runFigures(summaryOf());
    assert.equal(f['ttftMs.p50'], 20);
    assert.equal(f['ttftMs.mean'], 22);
    assert.equal(f['e2eMs.p99'], 2000);
    assert.equal(f['tpotMs.p50'], null, 'no samples');
    assert.equal(f['throughput.outputTokensPerS'], 500);
  });

  test('the median’s interval at the top, the other statistics under it, throughput, and how once', () => {
    const s = summaryOf();
    const names = Object.keys(runFigures(s)) as RunFigure[];
    // Every draw 10 % up on TTFT, none moved elsewhere: TTFT's interval moves up by that ratio.
    const deltas = Object.fromEntries(
      names.map((n) => [n, n.startsWith('ttft') ? [Math.log(1.1), Math.log(1.1)] : [0, 0]]),
    ) as Record<RunFigure, number[]>;
    addRunPrediction(s, { deltas, draws: 2 }, model, {
      calibration: 'cal.json',
      drawRequests: 64,
    });
    const t = s.latency.ttftMs.prediction;
    assert.ok(t);
    const sigma = model.scatter.ttftMs;
    assert.ok(sigma > 0.1, `TTFT's scatter is its residuals' ${sigma}`);
    assert.ok(Math.abs(t.low - 20 * 1.1 * Math.exp(-Z90 * sigma)) < 1e-3, `${t.low}`);
    assert.ok(Math.abs(t.high - 20 * 1.1 * Math.exp(Z90 * sigma)) < 1e-3, `${t.high}`);
    assert.equal(t.level, 0.9);
    assert.deepEqual(Object.keys(t.statistics).sort(), ['mean', 'p90', 'p95', 'p99']);
    assert.ok(t.statistics.p99 && t.statistics.p99.low < 40 && 40 * 1.1 < t.statistics.p99.high);
    // ITL takes TPOT's scatter (the 2 % floor); E2E the wider of TTFT's and TPOT's.
    const itl = s.latency.itlMs.prediction;
    assert.ok(itl && Math.abs(itl.high / 10 - Math.exp(Z90 * 0.02)) < 1e-4);
    const e2e = s.latency.e2eMs.prediction;
    assert.ok(e2e && Math.abs(e2e.high / 1000 - Math.exp(Z90 * sigma)) < 1e-4);
    assert.equal(s.latency.tpotMs.prediction, undefined, 'no samples, no prediction');
    const tp = s.throughput.prediction;
    assert.ok(tp?.outputTokensPerS && tp.requestsPerS && tp.level === 0.9);
    assert.ok(tp.outputTokensPerS.low < 500 && 500 < tp.outputTokensPerS.high);
    assert.deepEqual(s.prediction, {
      calibration: 'cal.json',
      drawRequests: 64,
      statistic: 'p50',
      level: 0.9,
      draws: 2,
      covarianceFrom: 'standard-errors',
    });
  });

  test('a summary rebuilt from its records keeps the saved prediction', () => {
    const saved = summaryOf();
    const names = Object.keys(runFigures(saved)) as RunFigure[];
    const deltas = Object.fromEntries(names.map((n) => [n, [0]])) as Record<RunFigure, number[]>;
    addRunPrediction(saved, { deltas, draws: 1 }, model, { calibration: 'cal.json' });
    const rebuilt = summaryOf();
    keepRunPrediction(rebuilt, JSON.parse(JSON.stringify(saved)));
    assert.deepEqual(rebuilt.prediction, saved.prediction);
    assert.deepEqual(rebuilt.latency.ttftMs.prediction, saved.latency.ttftMs.prediction);
    assert.deepEqual(rebuilt.throughput.prediction, saved.throughput.prediction);
    const plain = summaryOf();
    keepRunPrediction(plain, summaryOf());
    assert.equal(plain.prediction, undefined);
    assert.equal(plain.latency.ttftMs.prediction, undefined);
  });
});
