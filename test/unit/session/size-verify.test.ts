/**
 * `size --verify`'s pure parts: which operating point it measures (the recommendation when it
 * is the server's engine, else the best row that is, else the server's engine at one replica's
 * share or the nearest load it holds), how a figure is judged against its prediction, the
 * warning a contradicted calibration carries, the flags, and the terminal's view.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SummaryBuilder } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { renderVerification } from '../../../src/report/sizeVerifyText.js';
import type { SizedDeployment } from '../../../src/session/size.js';
import { prepareSize } from '../../../src/session/sizeOptions.js';
import {
  chooseVerifyPoint,
  compareFigures,
  contradicted,
  fittedMetricOf,
  recordVerification,
  type ServedEngine,
  type SizeVerification,
  verifiedMetrics,
} from '../../../src/session/sizeVerify.js';
import { type CalibrationFile, readCalibrationFile } from '../../../src/sim/calibrationFile.js';
import { L40S_CALIBRATION } from '../../helpers/calibration.js';

const SERVED: ServedEngine = {
  model: 'Llama-3-8B',
  gpuName: 'H100 SXM 80GB',
  tp: 1,
  dtype: 'bf16',
  kvCacheDtype: 'bf16',
  maxNumSeqs: 1024,
  personality: 'vllm-v1',
};

const row = (o: Partial<SizedDeployment>): SizedDeployment => ({
  gpu: 'h100',
  gpuName: SERVED.gpuName,
  tp: 1,
  dp: 2,
  gpus: 2,
  dtype: 'bf16',
  kvCacheDtype: 'bf16',
  maxNumSeqs: 1024,
  personality: 'vllm-v1',
  feasible: true,
  capacityPerReplica: 6,
  ...o,
});

describe('chooseVerifyPoint', () => {
  test('the recommendation, when it is the served engine: one replica at its share of the rate', () => {
    const p = chooseVerifyPoint([row({ dp: 4 }), row({ gpu: 'l40s', gpuName: 'L40S' })], SERVED, {
      mode: 'rate',
      rate: 20,
    });
    assert.equal(p.how, 'recommended');
    assert.equal(p.dp, 4);
    assert.deepEqual(p.load, { mode: 'rate', rate: 5 });
  });

  test('a closed loop shares its users rounded up', () => {
    const p = chooseVerifyPoint([row({ dp: 3 })], SERVED, { mode: 'users', users: 10 });
    assert.deepEqual(p.load, { mode: 'users', users: 4 });
  });

  test('else the best-ranked row that is the served engine, at its own replicas', () => {
    const fp8 = row({ dtype: 'fp8', dp: 1 });
    const kvFp8 = row({ kvCacheDtype: 'fp8', dp: 1 });
    const seqs = row({ maxNumSeqs: 256, dp: 1 });
    const served = row({ dp: 5 });
    const p = chooseVerifyPoint([fp8, kvFp8, seqs, served], SERVED, { mode: 'rate', rate: 20 });
    assert.equal(p.how, 'calibrated-row');
    assert.equal(p.row, served);
    assert.deepEqual(p.load, { mode: 'rate', rate: 4 });
    assert.match(p.why, /not the engine the server runs/);
  });

  test('an infeasible row of the served engine is not measured as a deployment', () => {
    const top = row({ gpu: 'h200', gpuName: 'H200', dp: 2 });
    const own = row({ feasible: false, dp: 0, capacityPerReplica: 9 });
    const p = chooseVerifyPoint([top, own], SERVED, { mode: 'rate', rate: 12 });
    assert.equal(p.how, 'calibrated-engine');
    assert.equal(p.row, undefined);
    // 6 req/s a replica of the recommendation, within the 9 the engine holds.
    assert.deepEqual(p.load, { mode: 'rate', rate: 6 });
  });

  test("past the served engine's capacity, the nearest load it serves, and why", () => {
    const top = row({ gpu: 'h200', gpuName: 'H200', dp: 1 });
    const own = row({ feasible: false, dp: 0, capacityPerReplica: 3 });
    const p = chooseVerifyPoint([top, own], SERVED, { mode: 'rate', rate: 12 });
    assert.deepEqual(p.load, { mode: 'rate', rate: 3 });
    assert.match(p.why, /carries 12 req\/s, past the 3 req\/s .* the nearest load it serves/);
  });

  test('another model: no row is the server, whatever it matches', () => {
    const p = chooseVerifyPoint([row({ dp: 2 })], SERVED, { mode: 'users', users: 8 }, false);
    assert.equal(p.how, 'calibrated-engine');
    assert.deepEqual(p.load, { mode: 'users', users: 4 });
    assert.match(p.why, /not the calibrated Llama-3-8B/);
  });

  test('nothing feasible and no capacity: light load, said', () => {
    const own = row({ feasible: false, dp: 0, capacityPerReplica: undefined, reason: 'misses' });
    const p = chooseVerifyPoint([own], SERVED, { mode: 'rate', rate: 64 });
    assert.deepEqual(p.load, { mode: 'rate', rate: 1 });
    assert.match(p.why, /light load/);
  });
});

/** A summary of `n` requests of one TTFT and TPOT (ms), ten tokens each. */
function summaryOf(ttftMs: number, tpotMs: number, n = 40) {
  const b = new SummaryBuilder({ load: { mode: 'closed', concurrency: 1 } });
  for (let id = 0; id < n; id++) {
    const sentAt = id * 1000;
    const dtUs = [ttftMs * 1000, ...Array.from({ length: 9 }, () => tpotMs * 1000)];
    const end = sentAt + ttftMs + 9 * tpotMs;
    b.add({
      id,
      phase: 'measure',
      scheduledAt: sentAt,
      sentAt,
      firstTokenAt: sentAt + ttftMs,
      firstContentAt: sentAt + ttftMs,
      lastTokenAt: end,
      endAt: end,
      requestedInputTokens: 100,
      requestedOutputTokens: 10,
      status: 200,
      outputTokens: 10,
      outputTokensSource: 'server',
      events: { dtUs, tokens: dtUs.map(() => 1), contentChars: dtUs.map(() => 4) },
    } satisfies RequestRecord);
  }
  return b.build();
}

describe('compareFigures', () => {
  const metrics = verifiedMetrics('ttft.p99<500,itl.p99<50');
  const loo = {
    medianAbsError: {
      fit: {} as never,
      leaveOneOut: { ttftMs: 0.08, tpotMs: 0.02, outputTokPerS: 0.01 },
    },
  };

  test('the medians, then the SLO metrics, each once', () => {
    assert.deepEqual(
      metrics.map((t) => `${t.metric}.${t.stat}`),
      ['ttft.p50', 'tpot.p50', 'itl.p50', 'ttft.p99', 'itl.p99'],
    );
    assert.equal(fittedMetricOf('itl.p99'), 'tpotMs');
    assert.equal(fittedMetricOf('sloAttainment'), undefined);
  });

  test('without an interval: within the leave-one-out error, taken as at least 5 %', () => {
    const measured = summaryOf(107, 10.4);
    const figures = compareFigures(
      metrics,
      { central: { 'ttft.p50': 100, 'tpot.p50': 10, 'ttft.p99': 80 }, intervals: {} },
      measured,
      loo,
    );
    const by = Object.fromEntries(figures.map((f) => [f.metric, f]));
    assert.equal(by['ttft.p50'].inside, true, 'off 7 %, within the 8 % stated');
    assert.equal(by['ttft.p50'].tolerance, 0.08);
    assert.equal(by['tpot.p50'].tolerance, 0.05, "2 % stated, a median's scatter is more");
    assert.equal(by['tpot.p50'].inside, true);
    assert.equal(by['ttft.p99'].inside, false, '107 against 80 is 34 % off');
    assert.equal(by['itl.p50'].inside, undefined, 'not predicted: no verdict');
  });

  test('with an interval, inside or not is the interval', () => {
    const [f] = compareFigures(
      verifiedMetrics('ttft.p50<500').slice(0, 1),
      {
        central: { 'ttft.p50': 100 },
        intervals: { 'ttft.p50': { low: 90, high: 105, level: 0.9 } },
      },
      summaryOf(107, 10),
      loo,
    );
    assert.equal(f.inside, false);
    assert.equal(f.tolerance, undefined);
    assert.ok(Math.abs((f.error ?? 0) - 0.07) < 1e-9);
  });
});

test('a contradicted calibration warns with its worst figure and where it was measured', () => {
  const w = contradicted({
    figures: [
      {
        metric: 'ttft.p50',
        predicted: 100,
        measured: 180,
        error: 0.8,
        inside: false,
        tolerance: 0.05,
      },
      {
        metric: 'tpot.p50',
        predicted: 10,
        measured: 12,
        error: 0.2,
        inside: false,
        tolerance: 0.05,
      },
    ],
    dir: 'sizing/verify',
    deployment: 'H100 TP1 x 2',
    load: { mode: 'rate', rate: 4 },
    refitProblem: 'not refitted: --verify-no-refit',
  });
  assert.equal(w.code, 'calibration_verify_contradicted');
  assert.equal(w.error, 0.8);
  assert.equal(w.run, 'sizing/verify');
  assert.match(w.message, /ttft\.p50 predicted 100, measured 180; tpot\.p50/);
  assert.match(w.message, /--verify-no-refit/);
});

describe('size --verify flags', () => {
  const base = {
    model: 'llama-3-8b',
    rate: '4',
    slo: 'ttft.p99<500',
    gpu: 'h100',
  };

  test('needs --calibration and --out, and not a trace or sessions', () => {
    const p = prepareSize({ ...base, verify: 'http://127.0.0.1:8000' });
    assert.ok(
      p.problems.some((m) => m.includes('--calibration FILE')),
      p.problems.join('\n'),
    );
    assert.ok(
      p.problems.some((m) => m.includes('give --out DIR')),
      p.problems.join('\n'),
    );
    const sessions = prepareSize({ ...base, scenario: 'multi-turn', verify: 'http://h:1' });
    assert.ok(sessions.problems.some((m) => m.includes('session scenario')));
  });

  test('its flags need it, and a URL that is not http is refused without being quoted', () => {
    assert.ok(
      prepareSize({ ...base, verifyRequests: '40' }).problems.some((m) =>
        m.startsWith('--verify-requests applies only with --verify'),
      ),
    );
    const bad = prepareSize({ ...base, verify: 'ftp://user:secret@host', out: 'x' });
    assert.ok(bad.problems.some((m) => m.includes('http:// or https://')));
    assert.ok(!bad.problems.join(' ').includes('secret'));
    const few = prepareSize({ ...base, verify: 'http://h:1', verifyRequests: '5', out: 'x' });
    assert.ok(few.problems.some((m) => m.startsWith('--verify-requests')));
  });
});

test('the terminal view: predicted with its interval, measured, the verdict; server text made safe', () => {
  const text = renderVerification({
    calibration: 'calibration.json',
    deployment: 'H100 TP1 x 2 (one replica measured)',
    chosen: 'the recommendation\u001b[31m is the calibrated engine',
    load: { mode: 'rate', rate: 4 },
    server: 'http://127.0.0.1:8000/',
    requests: 300,
    figures: [
      {
        metric: 'ttft.p50',
        predicted: 21.4,
        interval: { low: 19.8, high: 23.3, level: 0.9 },
        measured: 22,
        error: 0.028,
        inside: true,
      },
      {
        metric: 'tpot.p50',
        predicted: 10,
        measured: 13,
        error: 0.3,
        inside: false,
        tolerance: 0.08,
      },
    ],
    inside: false,
    sloHeld: true,
    slo: [{ metric: 'ttft.p99', ok: true, message: 'ttft.p99 = 40 ms, under 500 ms' }],
    refitted: true,
    dir: 'sizing/verify',
  });
  assert.match(text, /ttft\.p50\W+21\.4 \(19\.8-23\.3\)\W+22\W+\+3%\W+inside/);
  assert.match(text, /OFF BY MORE THAN 8%/);
  assert.match(text, /refitted with this run/);
  assert.ok(!text.includes('\u001b'));
});

describe('the check into calibration.json', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ig-size-verify-record-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const metrics = { ttftMs: 40, tpotMs: 12, outputTokPerS: 900 };
  const FILE: CalibrationFile = {
    ...L40S_CALIBRATION,
    fitted: { mfu: { value: 0.4, stdErr: 0.01, low: 0.39, high: 0.41, before: 0.65 } },
    held: { mbu: 0.55 },
    points: [
      {
        label: 'c1',
        source: join(dir, 'gone'),
        load: 'concurrency 1',
        requests: 8,
        measured: metrics,
        predicted: metrics,
        error: { ttftMs: 0, tpotMs: 0, outputTokPerS: 0 },
      },
    ],
    medianAbsError: { fit: { ttftMs: 0, tpotMs: 0, outputTokPerS: 0 } },
    simulations: 3,
  };
  const verification = (o: Partial<SizeVerification>): SizeVerification => ({
    at: '2026-12-06T01:00:00.000Z',
    calibration: 'cal.json',
    how: 'recommended' as const,
    deployment: 'L40S TP1 x 1',
    chosen: 'the recommendation',
    load: { mode: 'users' as const, users: 4 },
    server: 'http://127.0.0.1:8000/',
    requests: 20,
    dir: join(dir, 'verify'),
    figures: [
      { metric: 'ttft.p50', predicted: 40, measured: 80, error: 1, inside: false, tolerance: 0.05 },
    ],
    inside: false,
    sloHeld: true,
    slo: [],
    refitted: false,
    ...o,
  });
  const write = (name: string) => {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify(FILE));
    return path;
  };

  test('an invalid measurement is recorded, neither refitting nor warning', async () => {
    const path = write('invalid.json');
    const v = verification({ validity: { verdict: 'invalid', reasons: ['requests_failed'] } });
    await recordVerification(path, FILE, v, { url: 'http://x', out: dir });
    const file = readCalibrationFile(path);
    assert.equal(file.verifications?.length, 1);
    assert.equal(file.verifications?.[0].refitted, false);
    assert.match(v.refitProblem ?? '', /invalid \(requests_failed\)/);
    assert.equal(file.warnings, undefined);
  });

  test('a refit whose runs are gone is refused, and the file warns of the contradiction', async () => {
    const path = write('gone.json');
    const v = verification({ validity: { verdict: 'caution', reasons: [] } });
    await recordVerification(path, FILE, v, { url: 'http://x', out: dir });
    const file = JSON.parse(readFileSync(path, 'utf8')) as CalibrationFile;
    assert.equal(v.refitted, false);
    assert.match(
      v.refitProblem ?? '',
      /the refit was refused: .*gone: the calibration's run is not there/,
    );
    assert.deepEqual(
      file.warnings?.map((w) => w.code),
      ['calibration_verify_contradicted'],
    );
    assert.deepEqual(file.fitted, FILE.fitted, 'the fit is kept');
  });
});
