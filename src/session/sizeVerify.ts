/**
 * `infergauge size --calibration FILE --verify URL`: the loop closed on the user's server. After
 * the search, one replica of the recommendation (or the nearest deployment the server is) is
 * measured on the server at its share of the traffic, set against the calibrated simulator's
 * prediction of the same workload, and the result goes into the calibration: its history, and a
 * refit when the server contradicts the prediction.
 */
import { renameSync, writeFileSync } from 'node:fs';
import {
  evaluateThresholds,
  parseThresholds,
  type Threshold,
  thresholdName,
  thresholdValue,
} from '../analysis/thresholds.js';
import { describeError } from '../errors.js';
import type { RunSummary } from '../metrics/summary.js';
import { validityOf } from '../metrics/validity.js';
import { parseRunPlan } from '../plan/runPlan.js';
import { failedToRun, nothingSucceeded } from '../report/failures.js';
import { claimNewDir } from '../results/runFiles.js';
import { CalibrationRefused, predictionModelOf, withValues } from '../sim/calibrate.js';
import {
  type CalibrationFile,
  type CalibrationVerification,
  type CalibrationWarning,
  readCalibrationFile,
  type VerifiedFigure,
} from '../sim/calibrationFile.js';
import { LEAVE_ONE_OUT_MISS_MAX } from '../sim/calibrationWarnings.js';
import { EngineModel, type EngineModelOptions } from '../sim/engineModel.js';
import { resolveEngine } from '../sim/options.js';
import { intervalOf, PREDICTION_LEVEL, predictFigures, residualOf } from '../sim/prediction.js';
import { formatLengthDistribution } from '../workload/distributions.js';
import { refitCalibration, withCalibrationPoint } from './calibrate.js';
import { redactUrl } from './outputs/otlp.js';
import { benchmark } from './run.js';
import {
  type SizedDeployment,
  type SizeOptions,
  type SizePointSimulator,
  type SizeResult,
  sizePointSimulator,
} from './size.js';

/** Requests measured on the server by default: as many as each of size's virtual runs. */
export const DEFAULT_VERIFY_REQUESTS = 300;
/**
 * Without an interval, a figure off by less than this is taken as agreeing however small the
 * calibration's leave-one-out error: medians of a few hundred requests scatter 2-5 % from run
 * to run (calibrationWarnings.ts POINT_MISS_MAX says the same), which no fit can predict.
 */
const NOISE_FLOOR = 0.05;

export interface SizeVerifyOptions {
  /** The server: one replica of the calibrated engine (its base URL, as `run --url` takes it). */
  url: string;
  /** The served model's name (default: the server's first in /v1/models). */
  model?: string;
  /** Requests measured (default DEFAULT_VERIFY_REQUESTS; a tenth more first as warm-up). */
  requests?: number;
  /** Record the check, but do not refit a calibration it contradicts (a warning says so). */
  noRefit?: boolean;
  /** The size results directory: the run goes under it (the calibration keeps it as a point). */
  out: string;
  /** Where the API key is read from (OPENAI_API_KEY), as `run` reads it. */
  env?: NodeJS.ProcessEnv;
  onNotice?: (message: string) => void;
}

/** The engine the server is, as a size row describes a deployment. */
export interface ServedEngine {
  model: string;
  gpuName: string;
  tp: number;
  dtype: string;
  kvCacheDtype: string;
  maxNumSeqs: number;
  personality: string;
}

export type VerifyLoad = { mode: 'rate'; rate: number } | { mode: 'users'; users: number };

/** Where to measure: one replica of a deployment, at its share of the traffic. */
export interface VerifyPoint {
  /**
   * `recommended`: the top row is the calibrated engine; `calibrated-row`: the best-ranked row
   * that is; `calibrated-engine`: no row is, so the calibrated engine itself.
   */
  how: 'recommended' | 'calibrated-row' | 'calibrated-engine';
  /** The row one replica of which is measured (absent: the calibrated engine, no row). */
  row?: SizedDeployment;
  /** The replicas the traffic is shared over (the load measured is one's share). */
  dp: number;
  load: VerifyLoad;
  /** Why this point, in a sentence. */
  why: string;
}

/** What `size --verify` found; size.json keeps it as `verification`. */
export interface SizeVerification extends Omit<CalibrationVerification, 'at'> {
  at: string;
  /** The calibration file checked (and written). */
  calibration: string;
  how: VerifyPoint['how'];
  /** Each SLO on the server, as `--threshold` says it. */
  slo: { metric: string; ok: boolean; message: string }[];
  /** The server could not be measured (unreachable, every request failed): nothing compared. */
  error?: string;
}

/** A deployment's engine in words: `NVIDIA L40S TP1 bf16 KV bf16 max-seqs 256 vllm-v1`. */
export function engineText(d: Omit<ServedEngine, 'model'>): string {
  return `${d.gpuName} TP${d.tp} ${d.dtype} KV ${d.kvCacheDtype} max-seqs ${d.maxNumSeqs} ${d.personality}`;
}

/** Whether a row is the engine the server runs (what the calibration was fitted on). */
function isServed(row: SizedDeployment, served: ServedEngine): boolean {
  // The KV format and max-num-seqs are the server's settings too: a row that changes them is a
  // deployment the server is not, whose capacity the server cannot show.
  return (
    row.gpuName === served.gpuName &&
    row.tp === served.tp &&
    row.dtype === served.dtype &&
    row.kvCacheDtype === served.kvCacheDtype &&
    row.maxNumSeqs === served.maxNumSeqs &&
    row.personality === served.personality
  );
}

function shareOf(traffic: VerifyLoad, dp: number): VerifyLoad {
  return traffic.mode === 'rate'
    ? { mode: 'rate', rate: traffic.rate / dp }
    : { mode: 'users', users: Math.ceil(traffic.users / dp) };
}

const loadText = (l: VerifyLoad) =>
  l.mode === 'rate' ? `${Number(l.rate.toPrecision(3))} req/s` : `${l.users} users`;

/**
 * Where to measure (pure): the recommendation when it is the served engine; else the
 * best-ranked row that is; else the served engine itself at the load one replica of the
 * recommendation carries, or, past what the search found it holds, at its capacity (the
 * nearest load it serves within the SLOs). `deployments` are size's ranked rows; `sameModel`:
 * size's model is the calibration's (another model: no row is the server).
 */
export function chooseVerifyPoint(
  deployments: readonly SizedDeployment[],
  served: ServedEngine,
  traffic: VerifyLoad,
  sameModel = true,
): VerifyPoint {
  const feasible = deployments.filter((d) => d.feasible);
  const top = feasible[0];
  const match = sameModel ? feasible.find((d) => isServed(d, served)) : undefined;
  const rowText = (d: SizedDeployment) => `${engineText(d)} x ${d.dp}`;
  if (top && match === top) {
    return {
      how: 'recommended',
      row: top,
      dp: top.dp,
      load: shareOf(traffic, top.dp),
      why: `the recommendation (${rowText(top)}) is the calibrated engine: one replica at its share of the traffic`,
    };
  }
  if (top && match) {
    return {
      how: 'calibrated-row',
      row: match,
      dp: match.dp,
      load: shareOf(traffic, match.dp),
      why: `the recommendation (${rowText(top)}) is not the engine the server runs; the best-ranked deployment that is (${rowText(match)}), one replica at its share`,
    };
  }
  // No feasible row is the server: the served engine itself, where the search says it stands.
  const own = sameModel ? deployments.find((d) => isServed(d, served)) : undefined;
  const capacity = own?.capacityPerReplica;
  const notFound = sameModel
    ? 'no deployment the server runs serves the traffic'
    : `size's model is not the calibrated ${served.model}`;
  if (top) {
    const share = shareOf(traffic, top.dp);
    const wanted = share.mode === 'rate' ? share.rate : share.users;
    if (capacity !== undefined && capacity < wanted) {
      return {
        how: 'calibrated-engine',
        dp: top.dp,
        load: atLoad(traffic, capacity),
        why: `${notFound}; one replica of the recommendation (${rowText(top)}) carries ${loadText(share)}, past the ${loadText(atLoad(traffic, capacity))} the server's engine holds within the SLOs: measured there, the nearest load it serves`,
      };
    }
    return {
      how: 'calibrated-engine',
      dp: top.dp,
      load: share,
      why: `${notFound}; the server's engine at the load one replica of the recommendation (${rowText(top)}) carries`,
    };
  }
  if (capacity !== undefined) {
    return {
      how: 'calibrated-engine',
      dp: Math.max(
        1,
        Math.ceil((traffic.mode === 'rate' ? traffic.rate : traffic.users) / capacity),
      ),
      load: atLoad(traffic, capacity),
      why: `no deployment serves the traffic; the server's engine at ${loadText(atLoad(traffic, capacity))}, the most the search found it holds within the SLOs`,
    };
  }
  // Not even a light load holds (or the engine does not start in the model): the light load the
  // search tried first, where a miss is the engine's and not the load's.
  const light: VerifyLoad =
    traffic.mode === 'rate'
      ? { mode: 'rate', rate: traffic.rate / 64 }
      : { mode: 'users', users: 1 };
  return {
    how: 'calibrated-engine',
    dp: 1,
    load: light,
    why: `no deployment serves the traffic and the server's engine has no capacity within the SLOs in the model (${own?.reason ?? notFound}); measured at light load (${loadText(light)}), where the search judged it`,
  };
}

function atLoad(traffic: VerifyLoad, value: number): VerifyLoad {
  return traffic.mode === 'rate'
    ? { mode: 'rate', rate: value }
    : { mode: 'users', users: Math.max(1, Math.floor(value)) };
}

/** The figures compared: the medians a user quotes, then each SLO's own metric. */
export function verifiedMetrics(slo: string): Threshold[] {
  const medians = parseThresholds(['ttft.p50<1', 'tpot.p50<1', 'itl.p50<1']);
  const slos = parseThresholds([slo]).filter((t) => t.unit !== 'verdict');
  const seen = new Set<string>();
  return [...medians, ...slos].filter((t) => {
    const name = thresholdName(t);
    if (seen.has(name)) return false;
    seen.add(name);
    return true;
  });
}

/** Which of the fit's figures (its leave-one-out errors) a metric is judged by: TTFT's, TPOT's or throughput's. */
export function fittedMetricOf(metric: string): 'ttftMs' | 'tpotMs' | 'outputTokPerS' | undefined {
  const base = metric.split('.')[0];
  if (base === 'ttft') return 'ttftMs';
  if (base === 'tpot' || base === 'itl' || base === 'e2e') return 'tpotMs';
  if (base === 'outputThroughput') return 'outputTokPerS';
  return undefined;
}

/** The prediction of each figure: its value, and its interval where one was drawn. */
export interface Prediction {
  central: Record<string, number | null>;
  intervals: Record<string, { low: number; high: number; level: number } | undefined>;
  /** The deciding figures' intervals at the check's per-figure level (DECIDING). */
  decision?: Record<string, { low: number; high: number; level: number } | undefined>;
}

/**
 * The figures a check is decided on: the medians the calibration is fitted on (ITL's median is
 * TPOT's, not a third witness). Each at 1 - (1 - level) / 2, so that a right calibration passes
 * both at about the prediction's level.
 */
export const DECIDING = ['ttft.p50', 'tpot.p50'] as const;
const DECISION_LEVEL = 1 - (1 - PREDICTION_LEVEL) / DECIDING.length;

/** Whether the check agrees: every deciding figure measured inside its decision interval. */
export function agrees(
  figures: readonly VerifiedFigure[],
  decision: Prediction['decision'],
): boolean {
  const deciding = figures.filter((f) => decision?.[f.metric]);
  if (deciding.length === 0) return figures.every((f) => f.inside !== false);
  return deciding.every((f) => {
    const range = decision?.[f.metric];
    return (
      range !== undefined &&
      f.measured !== null &&
      f.measured >= range.low &&
      f.measured <= range.high
    );
  });
}

/**
 * Each figure predicted against measured (pure): inside its interval, or, without one, within
 * the calibration's leave-one-out error of it (at least the run-to-run noise).
 */
export function compareFigures(
  metrics: readonly Threshold[],
  prediction: Prediction,
  measured: RunSummary,
  calibration: Pick<CalibrationFile, 'medianAbsError'>,
): VerifiedFigure[] {
  const loo = calibration.medianAbsError.leaveOneOut;
  return metrics.map((t) => {
    const metric = thresholdName(t);
    const predicted = prediction.central[metric] ?? null;
    const value = thresholdValue(measured, t) ?? null;
    const interval = prediction.intervals[metric];
    const figure: VerifiedFigure = {
      metric,
      predicted,
      ...(interval ? { interval } : {}),
      measured: value,
    };
    if (predicted === null || value === null) return figure;
    if (predicted !== 0) figure.error = value / predicted - 1;
    if (interval) {
      figure.inside = value >= interval.low && value <= interval.high;
      return figure;
    }
    const key = fittedMetricOf(metric);
    if (key === undefined || figure.error === undefined) return figure;
    const stated = loo?.[key];
    const tolerance = Math.max(
      NOISE_FLOOR,
      typeof stated === 'number' && Number.isFinite(stated) ? stated : LEAVE_ONE_OUT_MISS_MAX,
    );
    figure.tolerance = tolerance;
    figure.inside = Math.abs(figure.error) <= tolerance;
    return figure;
  });
}

/** The served engine's description, from the calibration alone (what the server is). */
function servedEngineOf(path: string): { served: ServedEngine; engine: EngineModelOptions } {
  const resolved = resolveEngine({ calibration: path, dp: 1 });
  if (!resolved.engine) throw new Error(resolved.problems.join('; '));
  const config = new EngineModel(resolved.engine).config;
  return {
    engine: resolved.engine,
    served: {
      model: config.model.name,
      gpuName: config.gpu.name,
      tp: config.tp,
      dtype: config.weights.dtype,
      kvCacheDtype: config.kvDtype,
      maxNumSeqs: config.maxNumSeqs,
      personality: config.personality,
    },
  };
}

/** The engine size tried for a row (its candidate's settings with the calibration under them). */
function rowEngine(o: SizeOptions, row: SizedDeployment): EngineModelOptions {
  const { engineVersion, ...engine } = o.engine ?? {};
  const gpu = o.space.gpus.find((g) => (g.gpu ?? g.gpuSpec) === row.gpu) ?? { gpu: row.gpu };
  const resolved = resolveEngine({
    ...engine,
    ...(engineVersion !== undefined && row.personality === 'vllm-v1' ? { engineVersion } : {}),
    model: o.model,
    ...gpu,
    tp: row.tp,
    dtype: row.dtype,
    kvCacheDtype: row.kvCacheDtype as never,
    maxNumSeqs: row.maxNumSeqs,
    enginePersonality: row.personality as never,
    ...(o.calibration !== undefined ? { calibration: o.calibration } : {}),
    dp: 1,
  });
  if (!resolved.engine) throw new Error(resolved.problems.join('; '));
  return resolved.engine;
}

/** The figures of one simulated run, by name. */
function figuresOf(
  summary: RunSummary,
  metrics: readonly Threshold[],
): Record<string, number | null> {
  return Object.fromEntries(
    metrics.map((t) => [thresholdName(t), thresholdValue(summary, t) ?? null]),
  );
}

/**
 * The point predicted with its intervals: the calibrated engine's virtual run, and the same run
 * at draws of the fitted values (sim/prediction.ts), each figure's interval the draws' spread
 * with the fit's residual scatter around it.
 */
function predict(
  simulate: SizePointSimulator,
  engine: EngineModelOptions,
  load: VerifyLoad,
  metrics: readonly Threshold[],
  file: CalibrationFile,
): Prediction {
  const x = load.mode === 'rate' ? load.rate : load.users;
  const model = predictionModelOf(file);
  const predicted = predictFigures(model, (values) =>
    figuresOf(simulate(withValues(engine, values), x).summary, metrics),
  );
  const intervals: Prediction['intervals'] = {};
  const decision: Prediction['decision'] = {};
  for (const [name, value] of Object.entries(predicted.central)) {
    const residual = residualOf(model, name);
    intervals[name] = intervalOf(value, predicted.deltas[name] ?? [], residual);
    if ((DECIDING as readonly string[]).includes(name)) {
      decision[name] = intervalOf(value, predicted.deltas[name] ?? [], residual, DECISION_LEVEL);
    }
  }
  return { central: predicted.central, intervals, decision };
}

/**
 * The check after a search: run only after a whole one (a stopped search or stopped predictions
 * settle no recommendation: `skipped` says which). What stops the check itself (a calibration
 * file that cannot be read) is `failure`, for the caller to throw once the search's result is
 * written.
 */
export async function verifyAfterSearch(
  o: SizeOptions,
  result: SizeResult,
  v: SizeVerifyOptions,
): Promise<{ verification?: SizeVerification; skipped?: string; failure?: unknown }> {
  if (result.interrupted || result.prediction?.interrupted) {
    return {
      skipped: `not run, the ${result.interrupted ? 'search' : 'predictions'} stopped before the recommendation was settled`,
    };
  }
  try {
    return { verification: await verifySize(o, result, v) };
  } catch (failure) {
    return { failure };
  }
}

/**
 * Verifies a size result on the server: chooses the point, measures it, predicts it, compares,
 * and records the check in the calibration (refitting it when contradicted, unless `noRefit`).
 * Throws only on what the caller got wrong (no calibration, a trace); a server that cannot be
 * measured is the result's `error`.
 */
export async function verifySize(
  o: SizeOptions,
  result: SizeResult,
  v: SizeVerifyOptions,
): Promise<SizeVerification> {
  const path = o.calibration;
  if (path === undefined)
    throw new Error('--verify needs --calibration: the calibration it checks');
  const traffic = o.traffic;
  if (traffic.mode === 'trace' || traffic.sessions) {
    throw new Error(
      '--verify measures one replica at its share of a rate or of users: a trace or a session scenario is not verified',
    );
  }
  const file = readCalibrationFile(path);
  const { served, engine: servedEngine } = servedEngineOf(path);
  const sizeModel = resolveEngine({ model: o.model }).engine?.model.name;
  const point = chooseVerifyPoint(
    result.deployments,
    served,
    traffic.mode === 'rate'
      ? { mode: 'rate', rate: traffic.rate }
      : { mode: 'users', users: traffic.users },
    sizeModel === served.model,
  );
  const requests = v.requests ?? DEFAULT_VERIFY_REQUESTS;
  const metrics = verifiedMetrics(o.slo);
  const server = redactUrl(v.url);
  const deployment = point.row
    ? `${engineText(point.row)} x ${point.row.dp} (one replica measured)`
    : `${engineText(served)} (the server's engine)`;
  const dir = claimNewDir(v.out, 'verify');
  v.onNotice?.(
    `verifying on ${server}: ${deployment} at ${loadText(point.load)}, ${requests} requests (${point.why})`,
  );
  const base = {
    at: new Date().toISOString(),
    calibration: path,
    how: point.how,
    deployment,
    chosen: point.why,
    load: point.load,
    server,
    requests,
    dir,
  };
  // The engine predicted is resolved first (a problem there is the caller's, before any run);
  // the prediction itself after the measurement, whose client it would otherwise leave
  // collecting the garbage of 33 virtual runs.
  const engine = point.row ? rowEngine(o, point.row) : servedEngine;
  const prediction = async () =>
    predict(await sizePointSimulator({ ...o, requests }), engine, point.load, metrics, file);
  let measured: RunSummary;
  try {
    const plan = parseRunPlan(
      {
        url: v.url,
        ...(v.model !== undefined ? { model: v.model } : {}),
        // size's virtual runs send prompts of the asked lengths to /v1/completions and take
        // every token asked for: the measurement is of the same workload.
        endpoint: 'completions',
        ignoreEos: true,
        ...(point.load.mode === 'rate'
          ? { rate: point.load.rate, arrival: 'poisson' }
          : { concurrency: point.load.users }),
        requests,
        warmup: Math.ceil(requests / 10),
        scenario: o.scenario.name,
        inputTokens: formatLengthDistribution(o.scenario.input),
        outputTokens: formatLengthDistribution(o.scenario.output),
        seed: o.seed ?? 42,
        ...(o.requestSlo !== undefined ? { slo: o.requestSlo } : {}),
        out: dir,
      },
      v.env ?? {},
    );
    const done = await benchmark(plan, v.onNotice ? { onNotice: v.onNotice } : {});
    const summaries = done.results.map((r) => r.summary);
    if (summaries.length === 0) throw new Error('the run was stopped before it measured anything');
    if (nothingSucceeded(summaries)) throw new Error(failedToRun(summaries));
    measured = summaries[0];
  } catch (err) {
    // The URL as given may carry credentials (a query's key): messages name it without them,
    // and the flag to pass is size's.
    const bare = v.url.endsWith('/') ? server : server.replace(/\/$/, '');
    const predicted = await prediction();
    const message = describeError(err)
      .split(v.url)
      .join(bare)
      .replace('pass --model NAME', 'pass --verify-model NAME');
    return {
      ...base,
      figures: metrics.map((t) => ({
        metric: thresholdName(t),
        predicted: predicted.central[thresholdName(t)] ?? null,
        measured: null,
      })),
      inside: false,
      sloHeld: false,
      slo: [],
      refitted: false,
      error: message,
    };
  }
  const predicted = await prediction();
  const figures = compareFigures(metrics, predicted, measured, file);
  const inside = agrees(figures, predicted.decision);
  const decidedBy = DECIDING.filter((m) => predicted.decision?.[m]);
  const slo = evaluateThresholds(measured, parseThresholds([o.slo])).results.map((r) => ({
    metric: thresholdName(r.threshold),
    ok: r.ok,
    message: r.message,
  }));
  const validity = validityOf(measured.warnings);
  const verification: SizeVerification = {
    ...base,
    at: new Date().toISOString(),
    figures,
    inside,
    ...(decidedBy.length > 0 ? { decidedBy: { figures: decidedBy, level: DECISION_LEVEL } } : {}),
    sloHeld: slo.every((s) => s.ok),
    slo,
    validity: {
      verdict: validity.verdict,
      reasons: [...new Set(validity.reasons.map((r) => r.code))],
    },
    refitted: false,
  };
  await recordVerification(path, file, verification, v);
  return verification;
}

/**
 * The check into the calibration: its history gains the entry; a contradicted check refits the
 * calibration on its runs and this one (the same held values and fitted keys), or, not refitted
 * (`noRefit`, a refit refused), leaves a warning every command using the file repeats.
 */
export async function recordVerification(
  path: string,
  file: CalibrationFile,
  verification: SizeVerification,
  v: SizeVerifyOptions,
): Promise<void> {
  let next = file;
  // A run its own checks call invalid (the load not delivered, requests failing) is no evidence
  // against the calibration: kept in the history, said, and nothing more.
  const invalid = verification.validity?.verdict === 'invalid';
  if (verification.inside && !invalid) {
    // An agreeing run is evidence too: one more point, without a refit.
    try {
      next = await withCalibrationPoint(file, path, verification.dir);
      verification.addedAsPoint = true;
    } catch (err) {
      v.onNotice?.(
        `--verify: the run is recorded but not added as a calibration point: ${
          err instanceof CalibrationRefused ? err.problems.join('; ') : describeError(err)
        }`,
      );
    }
  } else if (!verification.inside && invalid) {
    verification.refitProblem = `not refitted: the measurement is invalid (${verification.validity?.reasons.join(', ')}); measure again`;
  } else if (!verification.inside) {
    if (v.noRefit) verification.refitProblem = 'not refitted: --verify-no-refit';
    else {
      try {
        next = await refitCalibration(file, path, [verification.dir]);
        verification.refitted = true;
      } catch (err) {
        verification.refitProblem = `the refit was refused: ${
          err instanceof CalibrationRefused ? err.problems.join('; ') : describeError(err)
        }`;
      }
    }
  }
  const entry: CalibrationVerification = {
    at: verification.at,
    deployment: verification.deployment,
    chosen: verification.chosen,
    load: verification.load,
    server: verification.server,
    requests: verification.requests,
    figures: verification.figures,
    inside: verification.inside,
    ...(verification.decidedBy ? { decidedBy: verification.decidedBy } : {}),
    sloHeld: verification.sloHeld,
    ...(verification.validity ? { validity: verification.validity } : {}),
    refitted: verification.refitted,
    ...(verification.addedAsPoint ? { addedAsPoint: true } : {}),
    ...(verification.refitProblem ? { refitProblem: verification.refitProblem } : {}),
    dir: verification.dir,
  };
  let warnings: CalibrationWarning[] = [...(next.warnings ?? [])];
  if (!verification.inside && !verification.refitted && !invalid) {
    // The latest contradiction stands for the earlier ones (their runs are in the history).
    warnings = warnings.filter((w) => w.code !== 'calibration_verify_contradicted');
    warnings.push(contradicted(verification));
  }
  const written: CalibrationFile = {
    ...next,
    ...(warnings.length > 0 ? { warnings } : {}),
    verifications: [...(file.verifications ?? []), entry],
  };
  // Whole or not at all: a reader never sees half a calibration.
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(written, null, 2)}\n`);
  renameSync(temporary, path);
}

/** The warning a contradicted, unrefitted calibration carries: its worst figure, and where. */
export function contradicted(
  verification: Pick<
    SizeVerification,
    'figures' | 'dir' | 'deployment' | 'load' | 'refitProblem' | 'decidedBy'
  >,
): CalibrationWarning {
  const deciding = verification.decidedBy?.figures;
  const outside = verification.figures.filter(
    (f) => f.inside === false && (deciding === undefined || deciding.includes(f.metric)),
  );
  const worst = [...outside].sort((a, b) => Math.abs(b.error ?? 0) - Math.abs(a.error ?? 0))[0];
  const said = outside
    .map(
      (f) =>
        `${f.metric} predicted ${num(f.predicted)}${f.interval ? ` (${num(f.interval.low)}-${num(f.interval.high)})` : ''}, measured ${num(f.measured)}`,
    )
    .join('; ');
  return {
    code: 'calibration_verify_contradicted',
    message: `size --verify measured ${verification.deployment} at ${loadText(verification.load)} and the server contradicts the prediction (${said}); ${verification.refitProblem ?? 'not refitted'}: refit it with calibrate on its runs and ${verification.dir}`,
    run: verification.dir,
    ...(worst?.error !== undefined ? { error: worst.error } : {}),
    ...(worst?.tolerance !== undefined ? { threshold: worst.tolerance } : {}),
  };
}

/** Three significant figures; a missing value as a dash. */
const num = (v: number | null | undefined) =>
  v == null ? '-' : Math.abs(v) >= 1000 ? v.toFixed(0) : String(Number(v.toPrecision(3)));
