import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fitBounds, fitCalibration, replayPoint, withValues } from '../../../src/sim/calibrate.js';
import type { FittedValue } from '../../../src/sim/calibrationFile.js';
import {
  drawValues,
  intervalOf,
  normalCdf,
  predictFigures,
  predictionModel,
  probabilityAtMost,
  residualOf,
  scatterOf,
  studentTCdf,
} from '../../../src/sim/prediction.js';
import { l40sEngine, measurePerturbed } from '../../helpers/perturbed.js';

const fitted = (value: number, logSd: number, floor = 0): FittedValue => ({
  value,
  stdErr: (value + floor) * logSd,
  low: (value + floor) * Math.exp(-logSd) - floor,
  high: (value + floor) * Math.exp(logSd) - floor,
  before: value,
});
const noErrors = [{ ttftMs: 0, tpotMs: 0, outputTokPerS: 0 }];

describe('prediction intervals', () => {
  test('a held guess is drawn with the values it moves: more step cost, a larger bandwidth share', () => {
    const base = l40sEngine({});
    const points = [
      measurePerturbed(1, 6, 32, 256),
      measurePerturbed(1, 4, 4096, 16),
      measurePerturbed(16, 32, 1024, 192),
      measurePerturbed(64, 128, 2048, 128),
    ];
    const fit = fitCalibration(base, points, {
      keys: ['mbu', 'mfu', 'frontendLatencyMs'],
      hold: { stepOverheadMs: 1.5, perSeqOverheadUs: 40 },
      guessed: ['stepOverheadMs'],
    });
    const c = fit.covariance;
    assert.ok(c, 'a covariance');
    const at = (k: string) => c.keys.indexOf(k as never);
    assert.deepEqual(c.keys.slice(-1), ['stepOverheadMs'], 'the guess joins the fitted keys');
    // A step that costs more leaves less time for the weights' reads: the fit would have raised
    // the bandwidth share to keep the decode points' TPOT, so the two move together.
    assert.ok(c.matrix[at('mbu')][at('stepOverheadMs')] > 0, JSON.stringify(c));
    assert.ok(
      Math.abs(c.matrix[at('stepOverheadMs')][at('stepOverheadMs')] - Math.LN2 ** 2) < 1e-12,
    );
  });

  test('the normal and Student t distribution functions', () => {
    assert.ok(Math.abs(normalCdf(0) - 0.5) < 1e-7);
    assert.ok(Math.abs(normalCdf(1.6448536) - 0.95) < 1e-6);
    assert.ok(Math.abs(normalCdf(-1.959964) - 0.025) < 1e-6);
    // Tables' 95 % points: t(1) 6.3138, t(4) 2.1318, t(30) 1.6973.
    assert.ok(Math.abs(studentTCdf(6.3138, 1) - 0.95) < 1e-5);
    assert.ok(Math.abs(studentTCdf(2.1318, 4) - 0.95) < 1e-5);
    assert.ok(Math.abs(studentTCdf(-1.6973, 30) - 0.05) < 1e-5);
    assert.equal(studentTCdf(0, 3), 0.5);
    // Few degrees of freedom widen the interval: t(4)'s 90 % is 2.1318 / 1.6449 of the normal's.
    const t4 = intervalOf(100, [], { sigma: 0.1, dof: 4 }, 0.9);
    assert.ok(t4 && Math.abs(Math.log(t4.high / 100) - 0.21318) < 1e-4, `${t4?.high}`);
  });

  test('with no draws, a figure’s interval is its residual scatter’s: value x exp(-+z sigma)', () => {
    const i = intervalOf(100, [], { sigma: 0.1 }, 0.9);
    assert.ok(i);
    assert.ok(Math.abs(i.low - 100 * Math.exp(-1.6448536 * 0.1)) < 1e-3, `${i.low}`);
    assert.ok(Math.abs(i.high - 100 * Math.exp(1.6448536 * 0.1)) < 1e-3, `${i.high}`);
    assert.equal(i.level, 0.9);
    // Draws all 20 % high move the whole interval up by that ratio.
    const up = intervalOf(100, [Math.log(1.2), Math.log(1.2)], { sigma: 0.1 }, 0.9);
    assert.ok(
      up && Math.abs(up.low / i.low - 1.2) < 1e-6 && Math.abs(up.high / i.high - 1.2) < 1e-6,
    );
    assert.equal(intervalOf(null, [0], { sigma: 0.1 }), undefined);
    assert.equal(intervalOf(0, [0], { sigma: 0.1 }), undefined);
  });

  test('the chance of meeting a limit, over the same mixture', () => {
    assert.ok(Math.abs(probabilityAtMost(100, 100, [0], { sigma: 0.1 }) - 0.5) < 1e-6);
    assert.ok(probabilityAtMost(100, 130, [0], { sigma: 0.1 }) > 0.99);
    assert.ok(probabilityAtMost(100, 80, [0], { sigma: 0.1 }) < 0.02);
    // Half the draws 50 % over the limit: at most about half the chance.
    const p = probabilityAtMost(100, 120, [0, Math.log(1.5)], { sigma: 0.02 });
    assert.ok(p > 0.49 && p < 0.51, `${p}`);
  });

  test('draws follow the covariance, on the fit’s log scale, within the bounds', () => {
    const model = predictionModel({
      fitted: { mbu: fitted(0.5, 0.1), mfu: fitted(0.4, 0.2) },
      covariance: {
        keys: ['mbu', 'mfu'],
        matrix: [
          [0.01, 0.016],
          [0.016, 0.04],
        ],
      },
      pointErrors: noErrors,
      bounds: fitBounds,
    });
    assert.equal(model.covarianceFrom, 'fit');
    const draws = drawValues(model, 4000, 3);
    assert.deepEqual(drawValues(model, 5, 3), draws.slice(0, 5), 'seeded');
    const a = draws.map((d) => Math.log(d.mbu as number));
    const b = draws.map((d) => Math.log(d.mfu as number));
    const mean = (x: number[]) => x.reduce((s, v) => s + v, 0) / x.length;
    const ma = mean(a);
    const mb = mean(b);
    const cov = mean(a.map((x, i) => (x - ma) * (b[i] - mb)));
    const sa = Math.sqrt(mean(a.map((x) => (x - ma) ** 2)));
    const sb = Math.sqrt(mean(b.map((x) => (x - mb) ** 2)));
    assert.ok(Math.abs(ma - Math.log(0.5)) < 0.01 && Math.abs(sa - 0.1) < 0.01, `${ma} ${sa}`);
    assert.ok(Math.abs(sb - 0.2) < 0.015, `${sb}`);
    assert.ok(Math.abs(cov / (sa * sb) - 0.8) < 0.05, `correlation ${cov / (sa * sb)}`);
    // A share's bound is 1: no draw passes it.
    const wide = predictionModel({
      fitted: { mbu: fitted(0.9, 0.5) },
      pointErrors: noErrors,
      bounds: fitBounds,
    });
    assert.equal(wide.covarianceFrom, 'standard-errors');
    // A value held because the runs could not tell it is drawn, known to a factor of 2.
    const held = predictionModel({
      fitted: { mbu: fitted(0.5, 0.1) },
      pointErrors: noErrors,
      bounds: fitBounds,
      unidentified: { frontendLatencyMs: 10 },
    });
    const front = drawValues(held, 4000, 5).map((d) =>
      Math.log((d.frontendLatencyMs as number) + 0.2),
    );
    const m = mean(front);
    const sd = Math.sqrt(mean(front.map((x) => (x - m) ** 2)));
    assert.ok(Math.abs(m - Math.log(10.2)) < 0.03 && Math.abs(sd - Math.LN2) < 0.03, `${m} ${sd}`);
    assert.ok(drawValues(wide, 500).every((d) => (d.mbu as number) <= 1));
  });

  test('the residual scatter is the runs’ misses, widened by the values fitted, at least 2 %', () => {
    const model = predictionModel({
      fitted: { mbu: fitted(0.5, 0.1) },
      pointErrors: [
        { ttftMs: 0.1, tpotMs: 0, outputTokPerS: 0.001 },
        { ttftMs: -0.1, tpotMs: 0, outputTokPerS: 0 },
      ],
      bounds: fitBounds,
    });
    // Six residuals, one value fitted: the RMS widened by sqrt(6 / 5).
    const rms = Math.sqrt((Math.log(1.1) ** 2 + Math.log(0.9) ** 2) / 2);
    assert.ok(Math.abs(model.scatter.ttftMs - rms * Math.sqrt(6 / 5)) < 1e-9);
    assert.equal(model.scatter.tpotMs, 0.02);
    assert.equal(scatterOf(model, 'itlMs'), 0.02);
    assert.equal(scatterOf(model, 'ttftMs'), model.scatter.ttftMs);
    assert.equal(scatterOf(model, 'e2eMs'), model.scatter.ttftMs);
  });

  test('a calibration’s intervals cover a held-out load, and are narrow where the runs tell its values', () => {
    const base = l40sEngine({});
    const points = [
      measurePerturbed(1, 6, 32, 256),
      measurePerturbed(1, 4, 4096, 16),
      measurePerturbed(16, 32, 1024, 192),
      measurePerturbed(64, 128, 2048, 128),
      measurePerturbed(128, 256, 512, 96),
    ];
    const fit = fitCalibration(base, points);
    assert.ok(fit.covariance && fit.covariance.keys.length === Object.keys(fit.fitted).length);
    const model = predictionModel({
      fitted: fit.fitted,
      ...(fit.covariance ? { covariance: fit.covariance } : {}),
      pointErrors: fit.points.map((p) => p.error),
      bounds: fitBounds,
    });
    const values = {
      ...fit.held,
      ...Object.fromEntries(Object.entries(fit.fitted).map(([k, v]) => [k, v.value])),
    };
    const held = measurePerturbed(8, 48, 512, 128);
    const figures = predictFigures(model, (v) => {
      const m = replayPoint(withValues(base, { ...values, ...v }), held);
      return { ttftMs: m.ttftMs, tpotMs: m.tpotMs, outputTokPerS: m.outputTokPerS };
    });
    assert.equal(figures.draws, 32);
    for (const m of ['ttftMs', 'tpotMs', 'outputTokPerS'] as const) {
      const range = intervalOf(figures.central[m], figures.deltas[m], residualOf(model, m));
      assert.ok(range && range.low <= held.measured[m] && held.measured[m] <= range.high, m);
      // Informative: the hidden constants are recovered, so the range is tens of per cent at most.
      assert.ok(range.high / range.low < 1.8, `${m}: ${range.low}-${range.high}`);
    }
  });
});
