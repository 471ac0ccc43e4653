/**
 * `size --calibration` with prediction intervals (issue 56): the front and the top rows get
 * intervals around their figures and a chance of meeting the SLOs, from a hand-built calibration
 * whose uncertainty is known; `--confidence` adds replicas to a row that only barely meets an
 * SLO and ranks it at their cost; the top rows the draws cannot tell apart are said.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { renderHtmlReport } from '../../../src/report/html.js';
import { renderSize } from '../../../src/report/sizeText.js';
import {
  type SizedDeployment,
  SizeError,
  type SizeOptions,
  type SizeResult,
  size,
} from '../../../src/session/size.js';
import { prepareSize } from '../../../src/session/sizeOptions.js';
import { betterShare } from '../../../src/session/sizePrediction.js';
import { sizeProgress } from '../../../src/session/sizeProgress.js';
import type { CalibrationFile } from '../../../src/sim/calibrationFile.js';
import { L40S_CALIBRATION } from '../../helpers/calibration.js';

const dir = mkdtempSync(join(tmpdir(), 'ig-size-prediction-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A fitted value with a standard error of `rel` on the log scale. */
const fitted = (value: number, rel: number) => ({
  value,
  stdErr: value * rel,
  low: value * Math.exp(-rel),
  high: value * Math.exp(rel),
  before: value,
});
const metrics = { ttftMs: 50, tpotMs: 20, outputTokPerS: 100 };
/** Llama-3-8B on an L40S, the bandwidth and compute shares each known to 5 %. */
const calibration: CalibrationFile = {
  ...L40S_CALIBRATION,
  fitted: { mbu: fitted(0.6, 0.05), mfu: fitted(0.45, 0.05) },
  held: {},
  covariance: {
    keys: ['mbu', 'mfu'],
    matrix: [
      [0.0025, 0],
      [0, 0.0025],
    ],
  },
  // Four runs (twelve residuals, two values fitted): a residual scatter of about 3 %.
  points: ['c1', 'c4', 'c16', 'c64'].map((label, i) => ({
    label,
    source: `runs/${label}`,
    load: `concurrency ${label.slice(1)}`,
    requests: 40,
    measured: metrics,
    predicted: metrics,
    error: { ttftMs: i % 2 ? 0.03 : -0.03, tpotMs: i % 2 ? -0.02 : 0.02, outputTokPerS: 0.01 },
  })),
  medianAbsError: { fit: { ttftMs: 0.03, tpotMs: 0.02, outputTokPerS: 0.01 } },
  simulations: 1,
};
const calibrationPath = join(dir, 'calibration.json');
writeFileSync(calibrationPath, JSON.stringify(calibration));

/**
 * One request a second: one L40S replica meets ITL p99 < 54 ms at about 52 ms (the SLO binds it
 * barely), an H100 at about 13 ms; the A100 costs most and is slower than the H100 (off the front).
 */
const options: SizeOptions = {
  model: 'llama-3-8b',
  traffic: { mode: 'rate', rate: 1 },
  scenario: {
    name: 'test',
    input: { kind: 'uniform', min: 128, max: 512 },
    output: { kind: 'uniform', min: 32, max: 96 },
  },
  slo: 'ttft.p99<1000,itl.p99<54',
  space: {
    gpus: [{ gpu: 'l40s' }, { gpu: 'h100' }, { gpu: 'a100-80' }],
    tps: [1],
    dtypes: [undefined],
    kvCacheDtypes: [undefined],
    maxNumSeqs: [undefined, 128],
    personalities: ['vllm-v1'],
  },
  prices: { l40s: 1, h100: 1.5, 'a100-80': 5 },
  engine: { maxModelLen: 2048 },
  requests: 120,
  calibration: calibrationPath,
};

const feasible = (r: SizeResult) => r.deployments.filter((d) => d.feasible);

describe('size: prediction intervals', () => {
  let central: SizeResult;
  let confident: SizeResult;
  const told: number[][] = [];
  before(async () => {
    central = await size({
      ...options,
      intervalRows: 3,
      onPredictions: (rows, draws) => told.push([rows, draws]),
    });
    confident = await size({ ...options, intervalRows: 3, confidence: 0.9 });
  });

  test('the front and the top rows get intervals around their figures, and the chance of meeting every SLO', () => {
    const rows = feasible(central);
    assert.equal(rows.length, 6);
    const predicted = rows.filter((d) => d.prediction);
    assert.equal(central.prediction?.rows, predicted.length);
    // Told once, before the draws: the central ranking does not move.
    assert.deepEqual(told, [[predicted.length, 32]]);
    const lines: string[] = [];
    sizeProgress({ terminal: false, write: (t) => lines.push(t) }).predicting(4, 32);
    assert.deepEqual(lines, [
      'infergauge size: predicting 4 deployments (the Pareto front and the top rows) at 32 draws of the calibration each\n',
    ]);
    rows.forEach((d, i) => {
      // Every row on the front or among the first three has one; no other.
      assert.equal(d.prediction !== undefined, i < 3 || d.pareto === true, `row ${i + 1}`);
    });
    assert.ok(
      rows.some((d) => !d.prediction),
      'the dear A100s are neither top nor on the front',
    );
    for (const d of predicted) {
      const p = d.prediction as NonNullable<SizedDeployment['prediction']>;
      assert.equal(p.level, 0.9);
      assert.equal(p.draws, 32);
      for (const f of ['ttftP99Ms', 'itlP99Ms', 'tpotP99Ms', 'outputTokPerS'] as const) {
        const value = d.at?.[f] as number;
        const range = p.at[f];
        assert.ok(
          range && range.low < value && value < range.high,
          `${f}: ${JSON.stringify(range)}`,
        );
        // Two shares known to 5 % and a few per cent of scatter: tens of per cent at most.
        assert.ok(range.high / range.low < 1.6, `${f}: ${range.low}-${range.high}`);
      }
      assert.deepEqual(
        p.slos.map((s) => s.slo),
        ['ttft.p99<1000', 'itl.p99<54'],
      );
      assert.equal(p.slos[1].value, d.at?.itlP99Ms);
      // Every SLO at once is no surer than the least sure of them.
      assert.ok(p.sloChance <= Math.min(...p.slos.map((s) => s.chance)) + 1e-12);
    }
    const l40s = rows.filter((d) => d.gpu === 'l40s');
    assert.deepEqual(
      l40s.map((d) => d.dp),
      [1, 1],
    );
    for (const d of l40s) {
      // 52 ms against 54: it meets the SLO at the fitted values, but not surely.
      assert.equal(d.prediction?.tightest, 'itl.p99<54');
      const chance = d.prediction?.sloChance as number;
      assert.ok(chance > 0.3 && chance < 0.9, `${chance}`);
    }
    for (const d of rows.filter((x) => x.gpu === 'h100')) {
      assert.ok((d.prediction?.sloChance as number) > 0.99);
    }
  });

  test('--confidence 0.9 adds replicas to the row that barely meets the SLO, and ranks it at their cost', () => {
    const rows = feasible(confident);
    const l40s = rows.filter((d) => d.gpu === 'l40s');
    assert.equal(l40s.length, 2);
    for (const d of l40s) {
      const p = d.prediction as NonNullable<SizedDeployment['prediction']>;
      assert.equal(p.centralDp, 1);
      assert.ok(d.dp > 1);
      assert.ok((p.centralSloChance as number) < 0.9 && p.sloChance >= 0.9);
      assert.equal(d.costPerHour, d.dp * 1);
      assert.equal(d.gpus, d.dp);
      // Half the load on each replica: a shorter ITL than at one.
      const before = feasible(central).find(
        (c) => c.maxNumSeqs === d.maxNumSeqs && c.gpu === 'l40s',
      );
      assert.ok((d.at?.itlP99Ms as number) < (before?.at?.itlP99Ms as number));
      assert.equal(d.pareto, false, 'dearer and slower than an H100');
    }
    // The H100s are now cheapest: first, and the recommendation is said to have changed.
    assert.equal(feasible(central)[0].gpu, 'l40s');
    assert.equal(rows[0].gpu, 'h100');
    assert.match(confident.prediction?.centralFirst?.label ?? '', /^l40s TP1 x1 /);
    assert.ok((confident.prediction?.centralFirst?.sloChance as number) < 0.9);
    for (const d of rows.filter((x) => x.prediction)) {
      assert.ok((d.prediction?.sloChance as number) >= 0.9);
    }
  });

  test('says which top rows the draws cannot tell apart', () => {
    // Central: the L40S may miss its ITL SLO (a chance under 90 %), so it is not surely better
    // than the dearer H100, nor the H100 than it: the first rows cannot be told apart.
    const leaders = central.prediction?.leaders ?? [];
    assert.equal(leaders[0], 1);
    assert.ok(leaders.some((rank) => central.deployments[rank - 1].gpu === 'h100'));
    // At 90 %: the H100s are cheaper and sure, told apart from the L40Ss; the two H100s (the
    // same engine at two max-num-seqs that the load never reaches) are not told apart.
    const ranks = confident.prediction?.leaders ?? [];
    assert.deepEqual(
      ranks.map((rank) => confident.deployments[rank - 1].gpu),
      ['h100', 'h100'],
    );
    assert.deepEqual(confident.deployments[0].prediction?.sameAs, [2]);
    const table = renderSize(confident, 15, '1 req/s');
    assert.match(table, /P\(SLOs\)/);
    assert.match(table, /itl\.p99 \d+\.\d \(\d+\.\d-\d+\.\d\)/);
    assert.match(table, / 2 \(\+1\) /);
    assert.match(
      table,
      /--confidence changed the recommendation: the central ranking's first, l40s/,
    );
    assert.match(table, /Top 2 cannot be told apart within the calibration's uncertainty/);
  });

  test('a row more replicas do not bring to the confidence is ruled out, saying how far they took it', async () => {
    const alone = { ...options.space, gpus: [{ gpu: 'l40s' }], maxNumSeqs: [undefined] };
    const light = await size({
      ...options,
      space: alone,
      traffic: { mode: 'rate', rate: 0.05 },
      slo: 'itl.p99<1000',
      predictionDraws: 0,
    });
    // An ITL SLO 3 % above an idle replica's: the fitted values meet it, their draws often not,
    // and no number of replicas goes below an idle one.
    const idle = light.deployments[0].at?.itlP99Ms as number;
    const r = await size({
      ...options,
      space: alone,
      traffic: { mode: 'rate', rate: 0.5 },
      slo: `itl.p99<${(idle * 1.03).toFixed(1)}`,
      confidence: 0.95,
    });
    const [row] = r.deployments;
    assert.equal(row.feasible, false);
    assert.match(
      row.reason ?? '',
      /^under --confidence 0\.95: meets the SLOs with chance \d+ % at \d+ replicas, and at most \d+ % with more \(at \d+, more replicas no longer raise it\)$/,
    );
    assert.ok((row.prediction?.sloChance as number) < 0.95);
    assert.equal(row.pareto, undefined);
  });

  test('a row better in the draws: cheaper while meeting the SLOs, or as cheap and faster beyond the run-to-run noise', () => {
    const one = [{ group: 'ttftMs', upper: true }];
    const sure = { z: [[5], [5]], ttft: [100, 100], layout: one };
    const unsure = { z: [[5], [-5]], ttft: [100, 100], layout: one };
    const cheap = { costPerHour: 1, gpus: 1 };
    const dear = { costPerHour: 2, gpus: 2 };
    // Cheaper and sure: better in every draw; cheaper and missing in one draw of two: half.
    assert.ok(betterShare(cheap, sure, dear, sure) > 0.99);
    assert.ok(Math.abs(betterShare(cheap, unsure, dear, sure) - 0.5) < 0.01);
    // Dearer: better only where the cheaper one misses and it does not.
    assert.ok(Math.abs(betterShare(dear, sure, cheap, unsure) - 0.5) < 0.01);
    // The same cost: 1 % faster is within the noise, 20 % faster is not.
    const faster = (ms: number) => ({ z: [[5], [5]], ttft: [ms, ms], layout: one });
    assert.ok(betterShare(cheap, faster(99), cheap, faster(100)) < 0.9);
    assert.ok(betterShare(cheap, faster(80), cheap, faster(100)) > 0.99);
    // Two SLOs at their limits: on one metric they share its residual (a half), on two
    // metrics they are independent (a quarter); an upper and a lower limit a scatter either
    // side of the figure hold together where the residual is between them.
    const twice = (layout: { group: string; upper: boolean }[], z: number[]) =>
      betterShare(cheap, { z: [z], ttft: [1], layout }, dear, { z: [z], ttft: [1], layout });
    const up = (group: string) => ({ group, upper: true });
    assert.ok(Math.abs(twice([up('ttftMs'), up('ttftMs')], [0, 0]) - 0.5) < 1e-6);
    assert.ok(Math.abs(twice([up('ttftMs'), up('tpotMs')], [0, 0]) - 0.25) < 1e-6);
    const between = twice([up('ttftMs'), { group: 'ttftMs', upper: false }], [1, 1]);
    assert.ok(Math.abs(between - 0.6827) < 1e-3, `${between}`);
  });

  test('report.html shows the chances and the lines about them, escaped', () => {
    const json = { schemaVersion: 1, traffic: options.traffic, slo: options.slo, ...confident };
    json.deployments = json.deployments.map((d, i) => (i === 0 ? { ...d, gpu: '<b>h100' } : d));
    const html = renderHtmlReport({ kind: 'size', dir, size: json });
    assert.match(html, /<th[^>]*>P\(SLOs\)<\/th>/);
    assert.match(html, /changed the recommendation/);
    assert.ok(html.includes('#1 &lt;b&gt;h100 TP1 x1'), 'a GPU id is escaped in the lines');
    assert.ok(!html.includes('<b>h100'));
  });
});

describe('size: prediction options', () => {
  test('need a calibration, and their ranges', async () => {
    const flags = {
      model: 'llama-3-8b',
      rate: '1',
      slo: 'ttft.p99<500',
      gpu: 'l40s',
    };
    assert.match(
      prepareSize({ ...flags, confidence: '0.9', intervalRows: '3' }).problems.join('\n'),
      /--interval-rows, --confidence need --calibration FILE/,
    );
    const ranges = prepareSize({
      ...flags,
      calibration: calibrationPath,
      confidence: '0.999',
      predictionDraws: '-1',
    }).problems.join('\n');
    assert.match(ranges, /--confidence must be a number >= 0.5 and <= 0.99 \(got 0.999\)/);
    assert.match(ranges, /--prediction-draws must be a whole number >= 0/);
    assert.equal(
      prepareSize({ ...flags, calibration: calibrationPath, confidence: '0.8' }).options
        ?.confidence,
      0.8,
    );
    const { calibration: _, ...uncalibrated } = options;
    await assert.rejects(
      size({ ...uncalibrated, confidence: 0.9 }),
      (err: unknown) => err instanceof SizeError && /needs --calibration/.test(err.message),
    );
  });

  test('without a calibration there are no intervals, and the table says why', async () => {
    const { calibration: _, ...uncalibrated } = options;
    const r = await size({
      ...uncalibrated,
      space: { ...options.space, gpus: [{ gpu: 'h100' }], maxNumSeqs: [undefined] },
    });
    assert.equal(r.prediction, undefined);
    assert.ok(r.deployments.every((d) => d.prediction === undefined));
    assert.match(
      renderSize(r, 15, '1 req/s'),
      /No intervals: they come from a calibration's uncertainty/,
    );
  });
});
