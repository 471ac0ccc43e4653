/**
 * `capacity` on the built-in simulator with --calibration: each step's figures get prediction
 * intervals (replays of the step in virtual time), and the capacity an interval from them
 * (memory/capacity.ts capacityInterval), in capacity.json and on the terminal.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { type CapacityStep, capacityInterval } from '../../../src/memory/capacity.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { type CapacityReport, renderCapacity } from '../../../src/report/capacityText.js';
import { prepareCapacity, runCapacity } from '../../../src/session/profiles/capacity.js';
import { writeCalibration } from '../../helpers/calibration.js';
import { tempDir } from '../../helpers/cli.js';

const dir = tempDir('ig-capacity-prediction-');

/** A step whose TTFT p99 is `ttft`, predicted within -10 % and +10 % of it. */
function step(batch: number, ttft: number, spread = 0.1): CapacityStep {
  return {
    batch,
    completed: 4,
    failed: 0,
    errorsByKind: {},
    meanConcurrency: batch,
    outputTokensPerS: 100 * batch,
    perUserTokensPerS: 30,
    ttftP50Ms: ttft / 2,
    ttftP99Ms: ttft,
    tpotMeanMs: 20,
    itlP99Ms: 25,
    predictionIntervals: {
      level: 0.9,
      ranges: {
        ttftP99Ms: { low: ttft * (1 - spread), high: ttft * (1 + spread) },
        tpotMeanMs: { low: 18, high: 22 },
      },
    },
  };
}

describe('a calibrated capacity search', () => {
  test('the capacity judged again at each end of the steps’ ranges', () => {
    // A cliff (3x) from 2 to 4 at the figures; the ends move together, so it stays.
    const steps = [step(1, 100), step(2, 110), step(4, 400)];
    assert.deepEqual(capacityInterval(steps, 3, 2), { low: 2, high: 2, level: 0.9 });
    // Ranges that widen with the batch: at the high end the jump from 2 to 4 passes 3x, at the
    // low end it does not, and the search would have gone on past 4.
    const widening = [step(1, 100, 0), step(2, 110, 0), step(4, 320, 0.2)];
    assert.deepEqual(capacityInterval(widening, 3, 4), { low: 2, high: 4, level: 0.9 });
    const plain = steps.map(({ predictionIntervals: _, ...s }) => s);
    assert.equal(capacityInterval(plain, 3, 2), undefined);
  });

  test('the built-in simulator on a calibration: steps and capacity with intervals', async () => {
    const calibration = writeCalibration(dir);
    const prepared = prepareCapacity({
      calibration,
      batches: '1,2',
      inputTokens: '64',
      outputTokens: '8',
      timeScale: '0.2',
      promptSalt: '1',
      predictionDraws: '8',
    });
    assert.deepEqual(prepared.problems, []);
    const out = join(dir, 'search');
    const { report } = await runCapacity(
      prepared.settings,
      { ...prepared.run, out },
      new AbortController().signal,
    );
    const saved = JSON.parse(readFileSync(join(out, 'capacity.json'), 'utf8')) as CapacityReport;
    assert.deepEqual(saved.capacityPredictionInterval, report.capacityPredictionInterval);
    const range = saved.capacityPredictionInterval;
    assert.ok(range && range.low <= saved.capacity && saved.capacity <= range.high);
    for (const s of saved.steps) {
      const p = s.predictionIntervals;
      assert.ok(p, `batch ${s.batch} has intervals`);
      // At the modelled GPU's speed, as the step's own figures are (--time-scale 0.2).
      for (const field of ['outputTokensPerS', 'ttftP99Ms', 'tpotMeanMs'] as const) {
        const r = p.ranges[field];
        assert.ok(r && r.low <= s[field] && s[field] <= r.high, `batch ${s.batch} ${field}`);
      }
    }
    // The step's own summary.json keeps them, as a run's does.
    const summary = JSON.parse(
      readFileSync(join(out, 'batch-1', 'summary.json'), 'utf8'),
    ) as RunSummary;
    assert.equal(summary.prediction?.draws, 8);
    const text = renderCapacity(saved, false);
    assert.match(text, /batch 1: out tok\/s [\d.,]+ \([\d.,]+-[\d.,]+\), TTFT p99/);
    assert.match(
      text,
      /Capacity: 2 concurrent sequences of 72 tokens or more \(90% prediction interval/,
    );
  });
});
