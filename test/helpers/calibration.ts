/**
 * A calibration.json as `infergauge calibrate` writes one (sim/calibrate.ts buildCalibrationFile),
 * built by hand: fitted values with a covariance and three runs' residuals, for the commands that
 * predict with a calibration (their intervals) to read.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CALIBRATION_FORMAT,
  CALIBRATION_SCHEMA,
  type CalibrationFile,
  type FitKey,
  type FittedValue,
  SIM_MODEL_VERSION,
} from '../../src/sim/calibrationFile.js';

/** What calibration.json says of itself and of its engine: Llama-3-8B bf16 on one L40S, vLLM V1. */
export const L40S_CALIBRATION = {
  format: CALIBRATION_FORMAT,
  schemaVersion: CALIBRATION_SCHEMA,
  infergauge: '0.1.0',
  simulatorModelVersion: SIM_MODEL_VERSION,
  createdAt: '2026-12-06T00:00:00.000Z',
  engine: {
    args: ['--model', 'llama-3-8b', '--gpu', 'l40s'],
    personality: 'vllm-v1',
    model: 'Llama-3-8B',
    gpu: 'L40S 48GB',
    gpuFamily: 'ada',
    tp: 1,
    dp: 1,
    dtype: 'bf16',
  },
} satisfies Partial<CalibrationFile>;

/** A fitted value with a relative standard error `logSd` (its one-s.e. range on the log scale). */
const fitted = (value: number, logSd: number): FittedValue => ({
  value,
  stdErr: value * logSd,
  low: value * Math.exp(-logSd),
  high: value * Math.exp(logSd),
  before: value,
});

/**
 * Llama-3-8B on an L40S, `values` fitted (each with its relative standard error, uncorrelated
 * but for mbu and mfu), three runs missing by `miss` (relative) either way on TTFT.
 */
export function calibrationFixture(
  values: Partial<Record<FitKey, [value: number, logSd: number]>> = {
    mbu: [0.7, 0.05],
    mfu: [0.5, 0.1],
    frontendLatencyMs: [5, 0.2],
  },
  miss = 0.03,
): CalibrationFile {
  const keys = Object.keys(values) as FitKey[];
  const sd = keys.map((k) => (values[k] as [number, number])[1]);
  const matrix = keys.map((a, i) =>
    keys.map((b, j) => {
      if (i === j) return sd[i] * sd[i];
      const pair = new Set([a, b]);
      return pair.has('mbu') && pair.has('mfu') ? 0.5 * sd[i] * sd[j] : 0;
    }),
  );
  const measured = { ttftMs: 30, tpotMs: 20, outputTokPerS: 100 };
  return {
    ...L40S_CALIBRATION,
    fitted: Object.fromEntries(keys.map((k) => [k, fitted(...(values[k] as [number, number]))])),
    held: {},
    covariance: { keys, matrix },
    points: [-1, 0, 1].map((sign, i) => ({
      label: `c${i + 1}`,
      source: `runs/c${i + 1}`,
      load: `concurrency ${2 ** i}`,
      requests: 40,
      measured,
      predicted: measured,
      error: { ttftMs: sign * miss, tpotMs: sign * miss, outputTokPerS: sign * miss },
    })),
    medianAbsError: { fit: { ttftMs: miss, tpotMs: miss, outputTokPerS: miss } },
    simulations: 12,
  };
}

/** calibrationFixture(...) written as `name` in `dir`; returns its path. */
export function writeCalibration(
  dir: string,
  name = 'calibration.json',
  file: CalibrationFile = calibrationFixture(),
): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(file, null, 2));
  return path;
}
