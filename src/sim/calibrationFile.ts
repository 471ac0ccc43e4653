/**
 * calibration.json: what `infergauge calibrate` fitted, and how `--calibration FILE` applies it
 * to a simulated engine, saying which fitted values do not transfer to the engine asked for.
 */
import { readFileSync } from 'node:fs';
import type { EngineModelOptions } from './engineModel.js';
import { DEFAULT_PERSONALITY } from './personality.js';
import type { MeasuredSteps } from './roofline.js';

/**
 * The version of the engine model's equations a fitted value belongs to. A fitted `mbu` means
 * "the share of bandwidth that makes *this* model's step times right": when the step model
 * changes, an old calibration means something else and is refused (refit it).
 */
export const SIM_MODEL_VERSION = 1;
export const CALIBRATION_FORMAT = 'infergauge-calibration';
export const CALIBRATION_SCHEMA = 1;

/**
 * The fitted parameters, by their engine-flag keys (SimEngineSettings), with their flags:
 * `mfu` for a 16-bit GEMM path, `mfu8bit` where the weights run at the 8-bit peak.
 */
const FIT_FLAGS = {
  mbu: '--mbu',
  mfu: '--mfu',
  mfu8bit: '--mfu-8bit',
  stepOverheadMs: '--step-overhead-ms',
  perSeqOverheadUs: '--per-seq-overhead-us',
  frontendLatencyMs: '--frontend-latency-ms',
} as const;
export type FitKey = keyof typeof FIT_FLAGS;
export const FIT_KEYS = Object.keys(FIT_FLAGS) as FitKey[];
export const fitFlag = (key: FitKey): string => FIT_FLAGS[key];

/** What is compared, per measured point: the medians a user quotes and the throughput. */
export interface PointMetrics {
  /** Median time to first token, ms. */
  ttftMs: number;
  /** Median time per output token after the first, ms (requests with 2+ output tokens). */
  tpotMs: number;
  /** Output tokens of the measured requests over the span from the first send to the last end. */
  outputTokPerS: number;
}

export interface FittedValue {
  value: number;
  /**
   * One standard error, from the fit's curvature and its residuals (Gauss-Newton), these taken
   * as at least 2 % however closely the points fit.
   */
  stdErr: number;
  /** The value one standard error either side, on the scale it is fitted on (log). */
  low: number;
  high: number;
  /** What the engine had before the fit. */
  before: number;
}

/** The engine a calibration was fitted on, as `--calibration` compares it. */
export interface CalibratedEngine {
  /** The engine flags it was fitted with (`--model`, `--gpu`, ...), for the record. */
  args: string[];
  personality: string;
  model: string;
  gpu: string;
  gpuFamily?: string;
  tp: number;
  dp: number;
  /** Weight format (its GEMM path decides whether `mfu` or `mfu8bit` was fitted). */
  dtype: string;
}

export interface CalibrationPointReport {
  label: string;
  /** The results directory it came from. */
  source: string;
  load: string;
  requests: number;
  measured: PointMetrics;
  predicted: PointMetrics;
  error: PointMetrics;
  leaveOneOut?: { predicted: PointMetrics; error: PointMetrics; heldKeys: FitKey[] };
}

/**
 * Step times measured on the server (calibrate `--steps`): for each prompt length the probe
 * had processed alone, the median prompt time the server reported. They replace the roofline's
 * step time at the sizes they span (roofline.ts MeasuredSteps).
 */
export interface CalibrationSteps {
  /** The results directories they were read from. */
  sources: string[];
  /** Ascending by prompt tokens processed; `requests` timed at each. */
  points: { tokens: number; ms: number; requests: number }[];
  /**
   * The front end the probe measured: the median of TTFT less the server's prompt time (held
   * as `--frontend-latency-ms` unless fitted).
   */
  frontendMs?: number;
}

export interface CalibrationFile {
  format: typeof CALIBRATION_FORMAT;
  schemaVersion: typeof CALIBRATION_SCHEMA;
  infergauge: string;
  /** The engine model's version (SIM_MODEL_VERSION) the values belong to. */
  simulatorModelVersion: number;
  createdAt: string;
  engine: CalibratedEngine;
  /** Fitted values with one standard error, and the engine's value before. */
  fitted: Partial<Record<FitKey, FittedValue>>;
  /** Values not fitted (the user's flags or the engine's defaults). */
  held: Partial<Record<FitKey, number>>;
  /** Step times measured on the server, used in the fit and wherever the engine is the same. */
  steps?: CalibrationSteps;
  points: CalibrationPointReport[];
  /** Median absolute relative error, in the fit and leaving each point out. */
  medianAbsError: { fit: PointMetrics; leaveOneOut?: PointMetrics };
  simulations: number;
}

/** Reads and checks a calibration file; throws an Error that names the problem and the fix. */
export function readCalibrationFile(path: string): CalibrationFile {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
  const file = data as Partial<CalibrationFile>;
  if (file?.format !== CALIBRATION_FORMAT) {
    throw new Error(`${path} is not a calibration file (write one with infergauge calibrate)`);
  }
  if (file.schemaVersion !== CALIBRATION_SCHEMA) {
    throw new Error(
      `${path} has schema ${String(file.schemaVersion)}, this infergauge reads ${CALIBRATION_SCHEMA}: refit it with infergauge calibrate`,
    );
  }
  if (file.simulatorModelVersion !== SIM_MODEL_VERSION) {
    throw new Error(
      `${path} was fitted to simulator model ${String(file.simulatorModelVersion)} (infergauge ${String(file.infergauge)}); this one is ${SIM_MODEL_VERSION}, whose equations give its values another meaning: refit it with infergauge calibrate on the same runs`,
    );
  }
  const values = { ...(file.held ?? {}), ...valuesOf(file.fitted ?? {}) };
  for (const [k, v] of Object.entries(values)) {
    if (!(FIT_KEYS as readonly string[]).includes(k) || !(typeof v === 'number' && v >= 0)) {
      throw new Error(`${path}: ${k} = ${String(v)} is not a calibrated value`);
    }
  }
  if (!file.engine || typeof file.engine.personality !== 'string') {
    throw new Error(`${path} does not say which engine it was fitted on: refit it`);
  }
  if (file.steps !== undefined && measuredStepsOf(file.steps) === undefined) {
    throw new Error(
      `${path}: its measured steps are not prompt lengths in ascending order with times above 0: refit it`,
    );
  }
  return file as CalibrationFile;
}

function valuesOf(fitted: Partial<Record<FitKey, FittedValue>>): Partial<Record<FitKey, number>> {
  const out: Partial<Record<FitKey, number>> = {};
  for (const [k, v] of Object.entries(fitted)) out[k as FitKey] = v?.value;
  return out;
}

/** What a calibration compares of the engine it is applied to, defaults filled in. */
function servedAs(engine: EngineModelOptions) {
  return {
    personality: engine.personality ?? DEFAULT_PERSONALITY,
    gpu: engine.gpu,
    weights: engine.weights ?? { dtype: 'bf16' as const },
    model: engine.model,
    tp: engine.tp ?? 1,
  };
}

/** The step table as the cost model takes it; undefined unless 2+ ascending sizes, times > 0. */
export function measuredStepsOf(steps: CalibrationSteps): MeasuredSteps | undefined {
  const points = Array.isArray(steps?.points) ? steps.points : [];
  const ok = points.every(
    (p, i) =>
      Number.isInteger(p?.tokens) &&
      p.tokens >= 1 &&
      Number.isFinite(p.ms) &&
      p.ms > 0 &&
      (i === 0 || p.tokens > points[i - 1].tokens),
  );
  if (!ok || points.length < 2) return undefined;
  return { tokens: points.map((p) => p.tokens), seconds: points.map((p) => p.ms / 1e3) };
}

/**
 * Why the measured steps do not apply to `engine` (another personality's kernels, another
 * device, model, weight format or TP), or undefined when they do.
 */
export function stepsMismatch(
  file: CalibrationFile,
  engine: EngineModelOptions,
): string | undefined {
  const e = file.engine;
  const now = servedAs(engine);
  const differs = (
    [
      ['engine', e.personality, now.personality],
      ['device', e.gpu, now.gpu.name],
      ['model', e.model, now.model.name],
      ['weights', e.dtype, now.weights.dtype],
      ['TP', e.tp, now.tp],
    ] as const
  ).filter(([, was, is]) => was !== is);
  if (differs.length === 0) return undefined;
  return `its step times were measured on ${e.model} ${e.dtype} on ${e.gpu} (${e.personality}, TP${e.tp}) and are not used with another ${differs.map(([what]) => what).join(', ')}: here steps are the roofline's, with the fitted values`;
}

/** Every value a calibration sets: the fitted ones and those it held. */
export function calibratedValues(file: CalibrationFile): Partial<Record<FitKey, number>> {
  return { ...file.held, ...valuesOf(file.fitted) };
}

/**
 * What does not carry over from the engine the calibration was fitted on to `config`, one
 * sentence each: another personality (its overheads are another engine's), another GPU
 * architecture (its bandwidth and GEMM shares), another GEMM path, model, TP.
 */
export function transferNotes(file: CalibrationFile, engine: EngineModelOptions): string[] {
  const e = file.engine;
  const config = servedAs(engine);
  const notes: string[] = [];
  const fitted = Object.keys(file.fitted) as FitKey[];
  const flags = (keys: FitKey[]) =>
    keys
      .filter((k) => fitted.includes(k))
      .map(fitFlag)
      .join(', ');
  if (e.personality !== config.personality) {
    const overheads = flags(['stepOverheadMs', 'perSeqOverheadUs', 'frontendLatencyMs']);
    if (overheads) {
      notes.push(
        `the calibration was fitted on ${e.personality}, this engine is ${config.personality}: its ${overheads} are the other engine's`,
      );
    }
  }
  const family = config.gpu.family ?? 'unknown';
  if (e.gpu !== config.gpu.name && (e.gpuFamily ?? 'unknown') !== family) {
    const shares = flags(['mbu', 'mfu', 'mfu8bit']);
    if (shares) {
      notes.push(
        `${shares} were fitted on ${e.gpu} (${e.gpuFamily ?? 'unknown architecture'}) and are kept on ${config.gpu.name} (${family}), another architecture: a guess, not a calibration; measure there and refit`,
      );
    }
  }
  const eightBit = config.weights.dtype === 'fp8' || config.weights.dtype === 'int8';
  if (eightBit && fitted.includes('mfu') && !fitted.includes('mfu8bit')) {
    notes.push(
      `--mfu was fitted on 16-bit GEMMs (${e.dtype}); these ${config.weights.dtype} weights run at the 8-bit peak, whose share (--mfu-8bit) keeps its default`,
    );
  } else if (!eightBit && fitted.includes('mfu8bit') && !fitted.includes('mfu')) {
    notes.push(
      `--mfu-8bit was fitted on ${e.dtype} GEMMs; these 16-bit weights use --mfu, which keeps its default`,
    );
  }
  if (e.model !== config.model.name) {
    notes.push(
      `fitted on ${e.model}, run on ${config.model.name}: the shares carry over; the per-step and per-sequence overheads may differ for another model`,
    );
  }
  if (e.tp !== config.tp) {
    notes.push(
      `fitted at TP${e.tp}, run at TP${config.tp}: the all-reduce is modelled, and the GEMM share is kept although smaller shards may reach less of the peak`,
    );
  }
  return notes;
}
