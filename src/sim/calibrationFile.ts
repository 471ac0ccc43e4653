/**
 * calibration.json: what `infergauge calibrate` fitted, and how `--calibration FILE` applies it
 * to a simulated engine, saying which fitted values do not transfer to the engine asked for.
 */
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { z as Zod } from 'zod';
import { InfergaugeError } from '../errors.js';
import { parseJsonText } from '../jsonText.js';
import { ENGINE_LIMITS } from './engineLimits.js';
import type { EngineModelOptions } from './engineModel.js';
import { DEFAULT_PERSONALITY } from './personality.js';
import type { MeasuredSteps } from './roofline.js';

/**
 * The version of the engine model's equations a fitted value belongs to. A fitted `mbu` means
 * "the share of bandwidth that makes *this* model's step times right": when the step model
 * changes, an old calibration means something else and is refused (refit it).
 */
// 2 (issue 57): the sampled rows' logits and the GEMM ceiling entered the step, the request path
// its parts: a share or step cost fitted under 1 had absorbed the logits.
export const SIM_MODEL_VERSION = 2;
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

/**
 * The fitted values' covariance on the scale the fit moves them on, ln(value + floor) (the
 * floors are calibrate.ts fitBounds'): Gauss-Newton's (JᵀWJ)⁻¹ times the residual variance, this
 * taken as at least 2 % squared. Prediction intervals sample it (prediction.ts); without it (a
 * file from before intervals) each value's own standard error is taken as independent.
 */
export interface FitCovariance {
  /** The order of the matrix's rows and columns. */
  keys: FitKey[];
  matrix: number[][];
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
  /**
   * A `size --verify` run added without a refit: its error is a prediction's, not a residual of
   * the fit (prediction.ts leaves it out of the residual scatter).
   */
  fromVerification?: true;
  leaveOneOut?: {
    predicted: PointMetrics;
    error: PointMetrics;
    heldKeys: FitKey[];
    /** The prediction's intervals from the fit without this run (prediction.ts). */
    interval?: Partial<Record<keyof PointMetrics, { low: number; high: number; level: number }>>;
  };
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
  covariance?: FitCovariance;
  /** calibrate's `--max-requests` where not its default: a refit reads the runs as the fit did. */
  maxRequests?: number;
  /** Step times measured on the server, used in the fit and wherever the engine is the same. */
  steps?: CalibrationSteps;
  points: CalibrationPointReport[];
  /** Median absolute relative error, in the fit and leaving each point out. */
  medianAbsError: { fit: PointMetrics; leaveOneOut?: PointMetrics };
  /**
   * Of the left-out runs' measured figures, how many fell inside the intervals predicted without
   * them, at what level: the intervals checked against runs they did not see.
   */
  leaveOneOutCoverage?: { level: number; inside: number; figures: number };
  simulations: number;
  /**
   * What the fit could not explain (calibrationWarnings.ts), repeated by every command that uses
   * the file; absent in files written before the checks (read as none said).
   */
  warnings?: CalibrationWarning[];
  /**
   * `size --verify`'s checks of this calibration against the server, oldest first (absent in
   * files never checked). A refit keeps them: they are the file's history, not its fit's.
   */
  verifications?: CalibrationVerification[];
}

/** One figure of a verification: the calibrated simulator's prediction and the server's. */
export interface VerifiedFigure {
  /** `ttft.p50`, `itl.p99`, `sloAttainment`, as `--slo` names it. */
  metric: string;
  predicted: number | null;
  /** The prediction interval, where one was drawn (sim/prediction.ts). */
  interval?: { low: number; high: number; level: number };
  measured: number | null;
  /** measured / predicted - 1. */
  error?: number;
  /** Whether the measured value is inside the interval (or within `tolerance` without one). */
  inside?: boolean;
  /** Without an interval: the relative error allowed (the calibration's leave-one-out error). */
  tolerance?: number;
}

/** `size --verify`: one recommendation measured on the server and set against its prediction. */
export interface CalibrationVerification {
  /** ISO time the check ended. */
  at: string;
  /** The deployment measured one replica of: `h100 TP1 bf16 vllm-v1 x 3`. */
  deployment: string;
  /** How the operating point was chosen, and why there (the recommendation's, the nearest one). */
  chosen: string;
  /** One replica's load as measured: an open loop's rate, or a closed loop's users. */
  load: { mode: 'rate'; rate: number } | { mode: 'users'; users: number };
  /** The server, with no credentials (no user, password or query). */
  server: string;
  requests: number;
  figures: VerifiedFigure[];
  /**
   * The medians the calibration is fitted on (TTFT's and TPOT's) each inside its interval at
   * `decidedBy.level`, so that the check together is at the prediction's level (two figures at
   * 95 %: a right calibration is contradicted about one time in ten, not one in two as five
   * figures at 90 % each would be); the tails are shown, not judged. Older entries: every
   * figure inside its 90 % interval.
   */
  inside: boolean;
  decidedBy?: { figures: string[]; level: number };
  /** The SLOs held on the server at this load. */
  sloHeld: boolean;
  /**
   * The measured run's verdict (docs/metrics.md) and its reasons' codes: an invalid run is
   * recorded but neither refits the calibration nor warns of it.
   */
  validity?: { verdict: 'valid' | 'caution' | 'invalid'; reasons: string[] };
  /** The calibration was refitted with this run; or why not. */
  refitted: boolean;
  /** An agreeing run joined the calibration's points without a refit. */
  addedAsPoint?: boolean;
  refitProblem?: string;
  /** The run's results directory. */
  dir: string;
}

/** The checks on a fit (calibrationWarnings.ts builds them): each code keeps its meaning. */
export const CALIBRATION_WARNING_CODES = [
  'calibration_outside_physics',
  'calibration_at_bound',
  'calibration_range_crosses_bound',
  'calibration_unidentified',
  'calibration_held_unidentified',
  'calibration_point_missed',
  'calibration_leave_one_out_missed',
  'calibration_unmodelled_cache_hits',
  'calibration_cache_state_unknown',
  'calibration_verify_contradicted',
] as const;
export type CalibrationWarningCode = (typeof CALIBRATION_WARNING_CODES)[number];

/** One warning as calibration.json keeps it: code, one sentence, and the figures it names. */
export interface CalibrationWarning {
  code: CalibrationWarningCode;
  message: string;
  /** The fitted parameter, as its flag (`--mfu`). */
  parameter?: string;
  value?: number;
  stdErr?: number;
  low?: number;
  high?: number;
  /** The bound reached or crossed, and which. */
  bound?: number;
  boundKind?: 'min' | 'max' | 'physics';
  /** The run, as calibrate's table labels it. */
  run?: string;
  metric?: 'ttftMs' | 'tpotMs' | 'outputTokPerS';
  /** Relative error, simulated against measured (0.2: 20 % high). */
  error?: number;
  /** The limit crossed, in the figure's unit. */
  threshold?: number;
  /** Share of prompt tokens the server served from its prefix cache, and where it said so. */
  hitRate?: number;
  /** Of it, the share the replay started cached (whole blocks of each request's hit). */
  replayedHitRate?: number;
  from?: string;
}

/** The largest calibration file read: a fit of 500 runs writes a few hundred KiB. */
const CALIBRATION_MAX_BYTES = 16 * 1024 * 1024;

/** A calibration file that cannot be read or is not one; `field` is the first field at fault. */
export class CalibrationFileError extends InfergaugeError {
  constructor(
    readonly path: string,
    message: string,
    readonly field?: string,
  ) {
    super(`${path}${field !== undefined ? `: ${field}` : ''}: ${message}`, 'IG_CALIBRATION_FILE');
  }
}

/**
 * zod is required at first use (it ships CommonJS): every command reads the engine flags, few
 * are given a calibration.
 */
const require = createRequire(import.meta.url);

/** calibration.json's schema, built at first use: every field a reader uses, with its range. */
function fileSchema() {
  const { z } = require('zod') as { z: typeof Zod };
  const bounded = (key: FitKey) => {
    const { min, max } = ENGINE_LIMITS[key];
    return z
      .number({ error: 'must be a number' })
      .min(min, { error: `must be at least ${min} (${fitFlag(key)}'s range is ${min} to ${max})` })
      .max(max, {
        error: `must be at most ${max}: no engine has it (${fitFlag(key)}'s range is ${min} to ${max})`,
      });
  };
  const finite = z.number({ error: 'must be a finite number' });
  const count = (min: number) =>
    z.number({ error: 'must be a whole number' }).int({ error: 'must be a whole number' }).min(min);
  const fittedValue = (key: FitKey) =>
    z.looseObject({
      value: bounded(key),
      stdErr: finite.min(0),
      low: finite,
      high: finite,
      before: finite,
    });
  const keyed = <T extends Zod.ZodType>(of: (key: FitKey) => T) =>
    z.strictObject(
      Object.fromEntries(FIT_KEYS.map((k) => [k, of(k).optional()])) as Record<
        FitKey,
        Zod.ZodOptional<T>
      >,
    );
  // A median of no value is written as null (JSON has no NaN).
  const metrics = z.looseObject({
    ttftMs: finite.nullable(),
    tpotMs: finite.nullable(),
    outputTokPerS: finite.nullable(),
  });
  return z.looseObject({
    format: z.literal(CALIBRATION_FORMAT),
    schemaVersion: z.literal(CALIBRATION_SCHEMA),
    infergauge: z.string(),
    simulatorModelVersion: z.literal(SIM_MODEL_VERSION),
    createdAt: z.string(),
    engine: z.looseObject({
      args: z.array(z.string()),
      personality: z.string(),
      model: z.string(),
      gpu: z.string(),
      gpuFamily: z.string().optional(),
      tp: count(1),
      dp: count(1),
      dtype: z.string(),
    }),
    fitted: keyed(fittedValue),
    held: keyed(bounded),
    maxRequests: count(1).optional(),
    covariance: z
      .looseObject({
        keys: z.array(z.enum(FIT_KEYS)),
        matrix: z.array(z.array(finite)),
      })
      .refine(
        (c) =>
          c.matrix.length === c.keys.length &&
          c.matrix.every((row, i) => row.length === c.keys.length && row[i] >= 0),
        { error: 'must be a square matrix over its keys with no negative variance' },
      )
      .optional(),
    steps: z
      .looseObject({
        sources: z.array(z.string()),
        points: z
          .array(
            z.looseObject({
              tokens: count(1),
              // One prompt's step: a minute is far past any measured one.
              ms: finite.gt(0, { error: 'must be above 0' }).max(60_000),
              requests: count(0),
            }),
          )
          .min(2, { error: 'needs two or more prompt lengths' })
          .refine((points) => points.every((p, i) => i === 0 || p.tokens > points[i - 1].tokens), {
            error: 'must be in ascending order of tokens',
          }),
        frontendMs: bounded('frontendLatencyMs').optional(),
      })
      .optional(),
    points: z.array(
      z.looseObject({
        label: z.string(),
        source: z.string(),
        load: z.string(),
        requests: count(0),
        measured: metrics,
        predicted: metrics,
        error: metrics,
      }),
    ),
    medianAbsError: z.looseObject({ fit: metrics, leaveOneOut: metrics.optional() }),
    simulations: count(0),
    // Codes this version does not know are kept and repeated: a newer infergauge's checks.
    warnings: z.array(z.looseObject({ code: z.string(), message: z.string() })).optional(),
    // The history is for people and later checks: an entry this version cannot read is kept,
    // never a reason to refuse the fit.
    verifications: z.array(z.looseObject({})).optional(),
  });
}

let schema: ReturnType<typeof fileSchema> | undefined;

/**
 * Reads and checks a calibration file against its schema; throws a CalibrationFileError that
 * names the file, the first field at fault and the fix. Never quotes the file: only its name,
 * the field and what the field must be.
 */
export function readCalibrationFile(path: string): CalibrationFile {
  let text: string;
  try {
    const info = statSync(path);
    // A FIFO or a device would be read for ever; a huge file whole.
    if (!info.isFile() || info.size > CALIBRATION_MAX_BYTES) {
      throw new CalibrationFileError(
        path,
        `${info.isFile() ? `larger than any calibration (at most ${CALIBRATION_MAX_BYTES / 1024 / 1024} MiB)` : 'not a regular file'}; is it the right file?`,
      );
    }
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (err instanceof CalibrationFileError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new CalibrationFileError(
      path,
      code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? (err as Error).message})`,
    );
  }
  const parsed = parseJsonText(text);
  if ('problem' in parsed) {
    throw new CalibrationFileError(path, `${parsed.problem}: not a calibration file`);
  }
  return calibrationFromValue(parsed.value, path);
}

/** Checks a parsed calibration file (pure: tests call it with values); `path` names it. */
export function calibrationFromValue(value: unknown, path: string): CalibrationFile {
  const file = value as Partial<CalibrationFile> | null;
  const isObject = typeof file === 'object' && file !== null && !Array.isArray(file);
  if (!isObject || file.format !== CALIBRATION_FORMAT) {
    throw new CalibrationFileError(
      path,
      'is not a calibration file (write one with infergauge calibrate)',
    );
  }
  // The versions first: a file of another version is refitted, not repaired field by field.
  if (file.schemaVersion !== CALIBRATION_SCHEMA) {
    throw new CalibrationFileError(
      path,
      `has schema ${versionText(file.schemaVersion)}, this infergauge reads ${CALIBRATION_SCHEMA}: refit it with infergauge calibrate`,
    );
  }
  if (file.simulatorModelVersion !== SIM_MODEL_VERSION) {
    throw new CalibrationFileError(
      path,
      `was fitted to simulator model ${versionText(file.simulatorModelVersion)}${typeof file.infergauge === 'string' && /^[\w.+-]{1,40}$/.test(file.infergauge) ? ` (infergauge ${file.infergauge})` : ''}; this one is ${SIM_MODEL_VERSION}, whose equations give its values another meaning: refit it with infergauge calibrate on the same runs`,
    );
  }
  schema ??= fileSchema();
  const checked = schema.safeParse(value, { reportInput: true });
  if (!checked.success) {
    const issue = checked.error.issues[0];
    const field = issue.path.map(String).join('.') || '(top level)';
    const what =
      issue.code === 'invalid_type' && issue.input === undefined
        ? 'is missing'
        : issue.code === 'unrecognized_keys'
          ? `has a field that is not a fitted value (fitted values: ${FIT_KEYS.join(', ')})`
          : issue.message;
    const more = checked.error.issues.length - 1;
    throw new CalibrationFileError(
      path,
      `${what}${more > 0 ? ` (and ${more} more problem${more > 1 ? 's' : ''})` : ''}: refit it with infergauge calibrate`,
      field,
    );
  }
  return value as CalibrationFile;
}

/** A version as a message may show it: a number, else what kind of value it is. */
function versionText(v: unknown): string {
  return typeof v === 'number' && Number.isFinite(v)
    ? String(v)
    : v === undefined
      ? 'none'
      : `of type ${typeof v}`;
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
