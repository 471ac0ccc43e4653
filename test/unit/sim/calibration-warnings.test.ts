/**
 * A fit that cannot explain its runs says so (issue 56, item 2): the checks on every fit, the
 * warnings in calibration.json, and their repetition by every command that uses the file. The
 * measured runs are virtual runs of the simulator with hidden constants, so that a clean fit is
 * exactly clean and a forced one is forced by a known amount.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { renderCalibration } from '../../../src/report/calibrationText.js';
import { cacheFacts } from '../../../src/session/calibrate.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { prepareCapacity } from '../../../src/session/profiles/capacity.js';
import { runPlan } from '../../../src/session/run.js';
import { prepareSize } from '../../../src/session/sizeOptions.js';
import {
  buildCalibrationFile,
  type CalibrationPoint,
  fitBounds,
  fitCalibration,
  leaveOneOut,
} from '../../../src/sim/calibrate.js';
import {
  type CalibrationFile,
  calibrationFromValue,
  readCalibrationFile,
} from '../../../src/sim/calibrationFile.js';
import {
  CALIBRATION_WARNING_CODES,
  checkCalibration,
  LEAVE_ONE_OUT_MISS_MAX,
  POINT_MISS_MAX,
} from '../../../src/sim/calibrationWarnings.js';
import { resolveEngine } from '../../../src/sim/options.js';
import { HIDDEN, l40sEngine, measurePerturbed } from '../../helpers/perturbed.js';

const dir = mkdtempSync(join(tmpdir(), 'ig-calibration-warnings-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const ENGINE = {
  args: ['--model', 'llama-3-8b', '--gpu', 'l40s'],
  personality: 'vllm-v1',
  model: 'Llama-3-8B',
  gpu: 'L40S 48GB',
  tp: 1,
  dp: 1,
  dtype: 'bf16',
};
const EXACT = { ttftMs: 0, tpotMs: 0, outputTokPerS: 0 };

/** The fit of `keys` to `points` on `base`, its leave-one-out, and the file it writes. */
function calibrated(
  base: ReturnType<typeof l40sEngine>,
  points: CalibrationPoint[],
  keys: Parameters<typeof fitCalibration>[2],
): CalibrationFile {
  const fit = fitCalibration(base, points, keys);
  const loo = leaveOneOut(base, points, fit);
  return buildCalibrationFile(
    ENGINE,
    fit,
    points.map((p) => ({
      label: p.label,
      source: p.label,
      load: 'closed',
      requests: p.requests.length,
      measured: p.measured,
    })),
    loo,
  );
}

// Decode-bound runs at three loads: they tell --mbu and --step-overhead-ms apart; the rest of
// the engine is held at the hidden values, so a clean fit has nothing left to explain.
const { mbu: _mbu, stepOverheadMs: _step, ...rest } = HIDDEN;
const points = [
  measurePerturbed(1, 6, 64, 192),
  measurePerturbed(8, 16, 256, 128),
  measurePerturbed(32, 48, 512, 96),
];

describe('calibration warnings', () => {
  test('a fit that explains its runs carries no warning, and says its checks passed', () => {
    const file = calibrated(l40sEngine({}), points, {
      keys: ['mbu', 'stepOverheadMs'],
      hold: rest,
    });
    assert.deepEqual(file.warnings, []);
    const text = renderCalibration(file, 'engine', 0.1, (k) => k);
    assert.match(text, /checks: no fitted value at a bound/);
  });

  test('a fit held against the truth is stopped at a bound and misses its runs, by name and figure', () => {
    // The step cost held at 10x the truth: only a bandwidth share above 1 could make up for it.
    const file = calibrated(l40sEngine({}), points, {
      keys: ['mbu'],
      hold: { ...rest, stepOverheadMs: 40 },
    });
    const codes = (file.warnings ?? []).map((w) => w.code);
    const bound = file.warnings?.find((w) => w.code === 'calibration_at_bound');
    assert.ok(bound, `no bound warning in ${codes.join(', ')}`);
    assert.equal(bound.parameter, '--mbu');
    assert.equal(bound.boundKind, 'max');
    assert.equal(bound.bound, 1);
    assert.match(bound.message, /--mbu stopped at the search's upper bound 1:/);
    const missed = file.warnings?.filter((w) => w.code === 'calibration_point_missed') ?? [];
    assert.ok(missed.length > 0, `no missed run in ${codes.join(', ')}`);
    for (const w of missed) {
      assert.ok(Math.abs(w.error ?? 0) > POINT_MISS_MAX);
      assert.equal(w.threshold, POINT_MISS_MAX);
      assert.ok(points.some((p) => p.label === w.run));
    }
    // And it says so wherever it is shown.
    const text = renderCalibration(file, 'engine', 0.1, (k) => k);
    assert.match(text, /The fit cannot explain everything: \d+ warnings/);
    assert.match(text, /calibration_at_bound: --mbu stopped/);
  });

  test('each parameter check fires on its own figures, physics first', () => {
    const bounds = fitBounds;
    const check = (key: 'mbu' | 'mfu' | 'perSeqOverheadUs', v: Record<string, number>) =>
      checkCalibration({
        fitted: { [key]: { before: 0.5, ...v } as never },
        bounds,
        points: [],
      });
    const physics = check('mbu', { value: 1.2, stdErr: 0.01, low: 1.19, high: 1.21 });
    assert.deepEqual(
      physics.map((w) => [w.code, w.boundKind, w.bound]),
      [['calibration_outside_physics', 'physics', 1]],
    );
    const cost = check('perSeqOverheadUs', { value: -3, stdErr: 1, low: -4, high: -2 });
    assert.equal(cost[0].code, 'calibration_outside_physics');
    // The case: a compute share near 1 known to ± 0.56.
    const loose = check('mfu', { value: 0.9, stdErr: 0.56, low: 0.5, high: 1.6 });
    assert.deepEqual(
      loose.map((w) => w.code),
      ['calibration_range_crosses_bound'],
    );
    assert.match(
      loose[0].message,
      /--mfu 0\.9: its 68 % range 0\.5 \.\. 1\.6 passes the upper bound 1 \(a share above 1\)/,
    );
    const unknown = check('perSeqOverheadUs', { value: 3, stdErr: 8, low: 0.5, high: 20 });
    assert.deepEqual(
      unknown.map((w) => w.code),
      ['calibration_unidentified'],
    );
    assert.match(unknown[0].message, /--hold-unidentified/);
    // Well inside, known to 2 %: nothing.
    assert.deepEqual(check('mbu', { value: 0.6, stdErr: 0.012, low: 0.588, high: 0.612 }), []);
  });

  test('a run missed, or predicted from the others far off, is named with its worst figure', () => {
    const w = checkCalibration({
      fitted: {},
      bounds: fitBounds,
      points: [
        { label: 'a', error: { ttftMs: 0.05, tpotMs: -0.2, outputTokPerS: 0.1 } },
        {
          label: 'b',
          error: { ttftMs: 0.1, tpotMs: 0, outputTokPerS: 0 },
          leaveOneOut: { error: { ttftMs: 0.4, tpotMs: 0.3, outputTokPerS: Number.NaN } },
        },
        // At the limits: not past them.
        {
          label: 'c',
          error: { ...EXACT, tpotMs: POINT_MISS_MAX },
          leaveOneOut: { error: { ...EXACT, ttftMs: -LEAVE_ONE_OUT_MISS_MAX } },
        },
      ],
    });
    assert.deepEqual(
      w.map((x) => [x.code, x.run, x.metric, x.error]),
      [
        ['calibration_point_missed', 'a', 'tpotMs', -0.2],
        ['calibration_leave_one_out_missed', 'b', 'ttftMs', 0.4],
      ],
    );
    assert.match(w[0].message, /a: the fit misses its TPOT by -20% \(more than 15%\)/);
  });

  test("prefix-cache hits the replay did not model are warned of with the server's hit rate", () => {
    const plain = { label: 'c8', error: EXACT };
    // The middle load: 40 % of prompt tokens from the cache, on a replay that shares none.
    const summary = {
      serverMetrics: { prefixCache: { hitRate: 0.4, from: 'vllm:prefix_cache_hits / queries' } },
    } as never;
    const facts = cacheFacts(summary, {});
    assert.deepEqual(facts, {
      replayShares: false,
      hitRate: 0.4,
      from: "the server's vllm:prefix_cache_hits / queries",
    });
    const [w, ...more] = checkCalibration({
      fitted: {},
      bounds: fitBounds,
      points: [{ ...plain, cache: facts }],
    });
    assert.equal(more.length, 0);
    assert.equal(w.code, 'calibration_unmodelled_cache_hits');
    assert.equal(w.hitRate, 0.4);
    assert.match(w.message, /40\.0% of prompt tokens from its prefix cache/);
    // usage's cached tokens of the measured requests win over the server's window.
    const usage = cacheFacts(
      {
        tokens: { cachedInput: { cached: 30, ofInput: 1000, requests: 10, source: 'usage' } },
        serverMetrics: { prefixCache: { hitRate: 0.4, from: 'x' } },
      } as never,
      {},
    );
    assert.equal(usage.hitRate, 0.03);
    // 3 % is within the scatter; a replay that shares prompts modelled its hits.
    const quiet = [
      usage,
      cacheFacts(summary, { sharedPrefixTokens: 500 }),
      cacheFacts(undefined, {}),
    ];
    for (const cache of quiet) {
      assert.deepEqual(
        checkCalibration({ fitted: {}, bounds: fitBounds, points: [{ ...plain, cache }] }),
        [],
      );
    }
    // A sharing workload on a cache nobody emptied, with no hit rate: said, without a figure.
    const unknown = cacheFacts({ cacheState: 'uncontrolled' } as never, {
      sharedPrefixTokens: 500,
    });
    const [u] = checkCalibration({
      fitted: {},
      bounds: fitBounds,
      points: [{ ...plain, cache: unknown }],
    });
    assert.equal(u.code, 'calibration_cache_state_unknown');
  });

  test('a file with warnings is read back and repeated, once and first, by a command that uses it', () => {
    const file = calibrated(l40sEngine({}), points, {
      keys: ['mbu'],
      hold: { ...rest, stepOverheadMs: 40 },
    });
    const warnings = file.warnings ?? [];
    assert.ok(warnings.length > 0);
    for (const w of warnings) assert.ok(CALIBRATION_WARNING_CODES.includes(w.code));
    const path = join(dir, 'warned.json');
    writeFileSync(path, JSON.stringify(file));
    assert.deepEqual(readCalibrationFile(path).warnings, JSON.parse(JSON.stringify(warnings)));

    const resolved = resolveEngine({ calibration: path });
    assert.deepEqual(resolved.problems, []);
    assert.equal(resolved.calibration?.warnings.length, warnings.length);
    const notices = resolved.warnings.slice(0, warnings.length);
    assert.deepEqual(notices, resolved.calibration?.notices);
    warnings.forEach((w, i) => {
      assert.equal(notices[i], `--calibration ${path}: the fit warned [${w.code}] ${w.message}`);
    });
    // Each once: nothing else the engine warns of repeats them.
    for (const n of notices) assert.equal(resolved.warnings.filter((x) => x === n).length, 1);

    // A run on it: said before the run, recorded for its manifest.
    const prepared = prepareRun({ simulate: true, calibration: path });
    assert.deepEqual(prepared.problems, []);
    assert.deepEqual(prepared.warnings.slice(0, notices.length), notices);
    assert.equal(prepared.calibrationWarnings?.length, warnings.length);

    // capacity says them before it starts; size before its search, and not again per candidate.
    const capacity = prepareCapacity({ calibration: path }, {});
    assert.deepEqual(capacity.warnings.slice(0, notices.length), notices);
    // ... and its results record them (capacity.json's server, each step's manifest).
    assert.equal(capacity.run.calibrationWarnings?.length, warnings.length);
    const size = prepareSize({
      model: 'llama-3-8b',
      rate: '2',
      slo: 'ttft.p99<500',
      gpu: 'l40s',
      calibration: path,
    });
    assert.deepEqual(size.problems, []);
    assert.deepEqual(size.notes?.slice(-notices.length), notices);
  });

  test("a calibrated run's manifest records the warnings its calibration carried", async () => {
    const file = calibrated(l40sEngine({}), points, {
      keys: ['mbu'],
      hold: { ...rest, stepOverheadMs: 40 },
    });
    const path = join(dir, 'for-run.json');
    writeFileSync(path, JSON.stringify(file));
    const out = join(dir, 'run');
    const prepared = prepareRun({
      simulate: true,
      calibration: path,
      requests: '3',
      outputTokens: '4',
      out,
    });
    assert.deepEqual(prepared.problems, []);
    await runPlan(prepared as never, { html: false });
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.deepEqual(
      manifest.server.calibrationWarnings.map((w: { code: string }) => w.code),
      (file.warnings ?? []).map((w) => w.code),
    );
  });

  test('a file written before the checks (no warnings field) still reads, and warns of nothing', () => {
    const file = calibrated(l40sEngine({}), points, {
      keys: ['mbu', 'stepOverheadMs'],
      hold: rest,
    }) as Partial<CalibrationFile>;
    delete file.warnings;
    const path = join(dir, 'old.json');
    writeFileSync(path, JSON.stringify(file));
    assert.equal(readCalibrationFile(path).warnings, undefined);
    const resolved = resolveEngine({ calibration: path });
    assert.deepEqual(resolved.problems, []);
    assert.equal(resolved.calibration, undefined);
    assert.ok(!resolved.warnings.some((w) => w.includes('the fit warned')));
    // A warning of a code this version does not know (a newer infergauge's) is kept, not refused.
    const newer = calibrationFromValue(
      { ...file, warnings: [{ code: 'calibration_future', message: 'x', extra: 1 }] },
      'newer.json',
    );
    assert.equal(newer.warnings?.[0].code, 'calibration_future');
    assert.throws(
      () => calibrationFromValue({ ...file, warnings: [{ code: 3 }] }, 'bad.json'),
      /bad\.json: warnings\.0\.code/,
    );
  });
});
