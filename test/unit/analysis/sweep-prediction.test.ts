/**
 * A calibrated sweep (analysis/sweep.ts): its points' prediction intervals, averaged over repeats,
 * the --find-max capacity's interval from them, and the table's lines that show them.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  averageRepeats,
  maxLoadInterval,
  parseAggregateSlos,
  type SweepPoint,
} from '../../../src/analysis/sweep.js';
import type { RunPlan } from '../../../src/plan/runPlan.js';
import { renderSweep, type ScenarioSweep } from '../../../src/report/sweepText.js';
import { prepareSweep, runSweep } from '../../../src/session/profiles/sweep.js';
import type { PreparedRun } from '../../../src/session/target.js';
import { writeCalibration } from '../../helpers/calibration.js';
import { tempDir } from '../../helpers/cli.js';

/** A point whose TTFT p99 is `ttft` ms, predicted within -10 % and +20 % of it. */
function point(level: number, ttft: number, failed = 0): SweepPoint {
  return {
    scenario: 'default',
    level,
    repeat: 0,
    meanConcurrency: level,
    outputTokensPerS: 100 * level,
    requestsPerS: level,
    perUserTokensPerS: 30,
    ttftP50Ms: ttft / 2,
    ttftP99Ms: ttft,
    itlP50Ms: 20,
    itlP99Ms: 25,
    tpotP50Ms: 20,
    e2eP50Ms: 2000,
    e2eP99Ms: 2500,
    completed: 100,
    failed,
    meanInputTokens: 512,
    meanOutputTokens: 100,
    prediction: {
      level: 0.9,
      ranges: {
        ttftP99Ms: { low: ttft * 0.9, high: ttft * 1.2 },
        outputTokensPerS: { low: 90 * level, high: 110 * level },
      },
    },
  };
}

const slos = parseAggregateSlos('ttft.p99<300');

describe('a calibrated sweep’s predictions', () => {
  test('the capacity’s interval: where each end of the binding figure crosses its limit', () => {
    // TTFT p99 100, 280, 320, 400 ms at 1 to 4: the search found 2 within 300 ms.
    const points = [point(1, 100), point(2, 280), point(3, 320), point(4, 400)];
    const r = maxLoadInterval(points, slos, { best: 2, integer: false });
    assert.ok(r);
    assert.equal(r.level, 0.9);
    // High ends 120, 336: 300 is crossed between 1 and 2, on the log of the figure.
    const low = 1 + Math.log(300 / 120) / Math.log(336 / 120);
    assert.ok(Math.abs(r.low - low) < 1e-9, `${r.low}`);
    // Low ends 90, 252, 288, 360: between 3 and 4.
    const high = 3 + Math.log(300 / 288) / Math.log(360 / 288);
    assert.ok(Math.abs(r.high - high) < 1e-9, `${r.high}`);
    // Whole users for a concurrency.
    const whole = maxLoadInterval(points, slos, { best: 2, integer: true });
    assert.deepEqual(whole, { low: 1, high: 3, level: 0.9 });
    // The capacity found always lies inside.
    const tight = maxLoadInterval([point(1, 100), point(2, 200), point(3, 320)], slos, {
      best: 2,
      integer: true,
    });
    assert.ok(tight && tight.low <= 2 && 2 <= tight.high);
  });

  test('failures are past every limit, nothing is extrapolated, none without predictions', () => {
    const failing = [point(1, 100), point(2, 150, 3)];
    assert.deepEqual(maxLoadInterval(failing, slos, { best: 1, integer: true }), {
      low: 1,
      high: 1,
      level: 0.9,
    });
    const within = [point(1, 100), point(2, 150)];
    assert.equal(maxLoadInterval(within, slos, { best: 2, integer: true })?.high, 2);
    const first = [point(1, 280), point(2, 500)];
    assert.equal(maxLoadInterval(first, slos, { best: 1, integer: true })?.low, 0);
    const plain = within.map(({ prediction: _, ...p }) => p);
    assert.equal(maxLoadInterval(plain, slos, { best: 2, integer: true }), undefined);
  });

  test('repeats average their ranges end by end', () => {
    const [avg] = averageRepeats([point(2, 200), { ...point(2, 100), repeat: 1 }]);
    assert.deepEqual(avg.prediction?.ranges.ttftP99Ms, { low: 135, high: 180 });
  });

  test('the table shows each point’s predicted figures, and the capacity its interval', () => {
    const points = [point(1, 100), point(2, 200)];
    const text = renderSweep(
      'sim',
      'concurrency',
      [
        {
          scenario: 'default',
          points,
          search: {
            best: 2,
            bestPoint: points[1],
            failedAt: 3,
            tried: [],
            prediction: { low: 2, high: 3, level: 0.9 },
            slos: ['ttft.p99<300'],
            binding: 'ttft.p99<300',
          },
          recommendations: [],
          warnings: [],
        },
      ],
      false,
    );
    assert.match(text, /90% prediction intervals from the calibration/);
    assert.match(
      text,
      /concurrency 2: out tok\/s 200\.0 \(180\.0-220\.0\), TTFT p99 200\.0 \(180\.0-240\.0\)/,
    );
    assert.match(
      text,
      /Capacity under ttft\.p99<300: 2 concurrent users \(90% prediction interval 2-3\)/,
    );
  });

  test('sweep --simulate --calibration: sweep.json’s points and --find-max capacity carry them', async () => {
    const dir = tempDir('ig-sweep-prediction-');
    const out = join(dir, 'sweep');
    const { settings, prepared, problems } = prepareSweep({
      simulate: true,
      calibration: writeCalibration(dir),
      levels: '1,8',
      requests: '24',
      inputTokens: '1024',
      outputTokens: '8',
      slo: 'ttft.p99<400',
      findMax: true,
      maxLevel: '16',
      predictionDraws: '8',
      out,
    });
    assert.deepEqual(problems, []);
    await runSweep(prepared as PreparedRun & { plan: RunPlan }, settings, {
      stop: new AbortController().signal,
      say: () => {},
      html: false,
    });
    const saved = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as {
      scenarios: ScenarioSweep[];
    };
    const [sweep] = saved.scenarios;
    for (const p of sweep.points) {
      const r = p.prediction?.ranges.ttftP99Ms;
      assert.ok(r && r.low <= p.ttftP99Ms && p.ttftP99Ms <= r.high, `level ${p.level}`);
    }
    const search = sweep.search;
    assert.ok(search?.prediction, 'the capacity has an interval');
    assert.ok(search.prediction.low <= search.best && search.best <= search.prediction.high);
  });
});
