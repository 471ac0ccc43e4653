/**
 * `infergauge calibrate`: measured runs of one server in, calibration.json out. Reads the runs
 * (run directories, sweeps, probes), works out the engine they ran on (the flags given, else the
 * built-in simulator's flags their manifests recorded), fits the simulator to them
 * (sim/calibrate.ts) and predicts each run from the others.
 */
import { realpathSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { parseFlagNumber } from '../flagNumber.js';
import type { LoadSpec } from '../load.js';
import type { RequestRecord } from '../record.js';
import { resultPath } from '../results/layout.js';
import {
  findRunDirs,
  isDirectory,
  readManifest,
  readSummary,
  savedLoad,
} from '../results/reader.js';
import { streamRecords } from '../results/runView.js';
import {
  allowedFitKeys,
  buildCalibrationFile,
  type CalibrationFit,
  type CalibrationPoint,
  CalibrationRefused,
  engineValues,
  fitCalibration,
  fitKeysFor,
  leaveOneOut,
  MAX_FOLDS,
  median,
  pointFromRecords,
  relativeErrors,
  replayedHitShare,
  replayPoint,
  withHitShare,
} from '../sim/calibrate.js';
import {
  type CalibrationFile,
  type CalibrationSteps,
  FIT_KEYS,
  type FitKey,
  fitFlag,
  measuredStepsOf,
} from '../sim/calibrationFile.js';
import {
  type CalibrationWarning,
  heldUnidentified,
  type PointCacheFacts,
} from '../sim/calibrationWarnings.js';
import { EngineModel } from '../sim/engineModel.js';
import {
  ENGINE_FLAGS,
  engineSettingsFromArgs,
  engineSettingsFromFlags,
  flagName,
  resolveEngine,
  type SimEngineSettings,
} from '../sim/options.js';
import { agentTools } from '../workload/conversations.js';
import type { Scenario } from '../workload/scenarios.js';
import { readTrace, TRACE_BLOCK_TOKENS, type TraceEntry, traceWindow } from '../workload/trace.js';
import { countWords, toolsPromptText } from '../workload/words.js';
import type { CalibrateProgress } from './calibrateProgress.js';

export interface CalibrateOptions {
  /** Engine flags as the command line parsed them (`model`, `gpu`, `tp`, `mbu`, ...). */
  flags: Record<string, unknown>;
  /** Flag names (`mbu,step-overhead-ms`) of the parameters to fit (default: all that apply). */
  fit?: string;
  /** Requests of each run replayed, from its first sent (default 500), as typed. */
  maxRequests?: string | number;
  /** Hold what the runs cannot identify at the engine's value (with a warning) instead of refusing. */
  holdUnidentified?: boolean;
  /**
   * Results directories of a step probe (`probe prefill --batches 1`) on a server that reports
   * its prompt times: measured step times, used in place of the roofline's (not fit points).
   */
  steps?: readonly string[];
  /** Told as the runs are read, the fit replays them and each is predicted from the others. */
  onProgress?: (p: CalibrateProgress) => void;
}

export interface CalibrationResult {
  file: CalibrationFile;
  /** The engine in words (model, GPU, TP, personality). */
  engine: string;
  /** Where the engine's settings came from. */
  engineFrom: 'flags' | 'manifests';
  warnings: string[];
  wallS: number;
}

/** A run read for calibration: what the fit needs of each record, no events. */
type Slim = Pick<
  RequestRecord,
  | 'id'
  | 'phase'
  | 'scheduledAt'
  | 'sentAt'
  | 'firstTokenAt'
  | 'lastTokenAt'
  | 'endAt'
  | 'outputTokens'
  | 'inputTokens'
  | 'requestedInputTokens'
  | 'cachedInputTokens'
  | 'error'
  | 'sessionId'
  | 'turn'
>;

const DEFAULT_MAX_REQUESTS = 500;

/**
 * Fits the simulator to the runs under `dirs`. Throws a UsageError-like Error with problems
 * (CalibrationRefused) when the runs cannot identify what is asked, naming what to measure.
 */
export async function calibrate(
  dirs: readonly string[],
  o: CalibrateOptions,
): Promise<CalibrationResult> {
  const started = performance.now();
  const problems: string[] = [];
  const runDirs: string[] = [];
  // A link passed over in a results tree (dangling, a loop) is said once, however often walked.
  const skipped = new Set<string>();
  const findRuns = (dir: string) => findRunDirs(dir, undefined, (m) => skipped.add(m));
  // The step probe's runs are not fit points, though they may sit under a fit directory.
  const stepRuns = new Set(
    (o.steps ?? []).flatMap((d) => (isDirectory(d) ? findRuns(d).map((r) => realpathSync(r)) : [])),
  );
  const fitRuns = new Set<string>();
  for (const dir of dirs) {
    if (!isDirectory(dir)) {
      problems.push(
        `${dir} is not a directory (give results directories of runs, sweeps or probes)`,
      );
      continue;
    }
    const found = findRuns(dir);
    if (found.length === 0) problems.push(`${dir} holds no run (no records.jsonl at or under it)`);
    // By real path: two directories given, or one inside the other, read each run once.
    for (const run of found) {
      const real = realpathSync(run);
      if (stepRuns.has(real) || fitRuns.has(real)) continue;
      fitRuns.add(real);
      runDirs.push(run);
    }
  }
  let maxRequests = DEFAULT_MAX_REQUESTS;
  if (o.maxRequests !== undefined) {
    const read = parseFlagNumber(o.maxRequests, { integer: true, min: 1 });
    if ('value' in read) maxRequests = read.value;
    else problems.push(`--max-requests ${read.problem}`);
  }
  const { settings, from } = engineSettings(runDirs, o.flags, problems);
  const fitKeys = parseFitKeys(o.fit, problems);
  if (problems.length > 0) throw new CalibrationRefused(problems);
  const resolved = resolveEngine(settings);
  if (!resolved.engine) throw new CalibrationRefused(resolved.problems);
  const warnings = [...resolved.warnings];
  const steps = o.steps?.length
    ? await readSteps(o.steps, findRuns, problems, warnings)
    : undefined;
  warnings.push(...skipped);
  if (problems.length > 0) throw new CalibrationRefused(problems);
  const measuredSteps = steps && measuredStepsOf(steps);
  const base = measuredSteps ? { ...resolved.engine, measuredSteps } : resolved.engine;

  const progress = o.onProgress ?? (() => {});
  const points: (CalibrationPoint & {
    source: string;
    loadText: string;
    cache: PointCacheFacts;
  })[] = [];
  const blockSize = new EngineModel(base).config.blockSize;
  for (const [i, dir] of runDirs.entries()) {
    const point = await readCalibrationPoint(dir, maxRequests, blockSize, problems, warnings);
    if (point) points.push(point);
    progress({ stage: 'reading', runs: i + 1, of: runDirs.length });
  }
  if (problems.length > 0) throw new CalibrationRefused(problems);

  // Held: every fit key given as a flag (the user's value), and those --fit leaves out.
  const hold: Partial<Record<FitKey, number>> = {};
  const given = engineSettingsFromFlags(o.flags).settings as Record<string, unknown>;
  for (const k of FIT_KEYS) if (typeof given[k] === 'number') hold[k] = given[k] as number;
  // The probe measured the front end (TTFT less the server's own prompt time): held, unless
  // --fit names it.
  if (steps?.frontendMs !== undefined && !fitKeys?.includes('frontendLatencyMs')) {
    hold.frontendLatencyMs ??= steps.frontendMs;
  }
  const applicable = allowedFitKeys(base);
  for (const k of fitKeys ?? []) {
    if (!applicable.includes(k)) {
      problems.push(
        `--fit ${fitFlag(k).slice(2)}: this engine's GEMMs run on the ${k === 'mfu' ? '8-bit' : '16-bit'} path; fit ${k === 'mfu' ? 'mfu-8bit' : 'mfu'} instead`,
      );
    }
  }
  if (problems.length > 0) throw new CalibrationRefused(problems);
  let keys = (fitKeys ?? fitKeysFor(base)).filter((k) => hold[k] === undefined);
  let fit: CalibrationFit | undefined;
  let simulations = 0;
  const held: CalibrationWarning[] = [];
  /** Held by --hold-unidentified at the engine's values, which the fit takes as guesses. */
  const guessed: FitKey[] = [];
  const values = engineValues(base);
  while (!fit) {
    const parameters = keys.length;
    const onSimulated = () => {
      simulations++;
      progress({ stage: 'fitting', runs: points.length, parameters, simulations });
    };
    try {
      fit = fitCalibration(base, points, { keys, hold, guessed, onSimulated });
    } catch (err) {
      // --hold-unidentified: what the runs cannot tell is held at the engine's value, and said;
      // one key at a time, the least known first (the refusal names it last). Keys that trade
      // off against each other are each unidentified, but what they do together is not:
      // holding one lets the fit find the other. Held together, the runs' decode time stayed at
      // the engine's defaults (three real-time loads of the HTTP simulator: TPOT -33 %).
      if (!(err instanceof CalibrationRefused) || !o.holdUnidentified || err.keys.length === 0) {
        throw err;
      }
      const k = err.keys[err.keys.length - 1];
      keys = keys.filter((x) => x !== k);
      guessed.push(k);
      const flag = fitFlag(k);
      const why =
        err.problems.find((p) => p.startsWith(`${flag} `)) ??
        err.problems.find((p) => p.includes(flag)) ??
        err.problems.join('; ');
      held.push(heldUnidentified(k, values[k], why));
    }
  }
  let folds = { done: 0, of: Math.min(points.length, MAX_FOLDS) };
  const loo = leaveOneOut(base, points, fit, {
    unidentified: held.flatMap((w) => {
      const key = FIT_KEYS.find((k) => fitFlag(k) === w.parameter);
      return key ? [key] : [];
    }),
    onFold: (done, of) => {
      folds = { done, of };
    },
    onSimulated: () => {
      simulations++;
      progress({ stage: 'cross-checking', folds: folds.done, of: folds.of, simulations });
    },
  });
  const model = new EngineModel(base).config;
  const file = buildCalibrationFile(
    {
      args: engineArgs(settings),
      personality: model.personality,
      model: model.model.name,
      gpu: model.gpu.name,
      ...(model.gpu.family ? { gpuFamily: model.gpu.family } : {}),
      tp: model.tp,
      dp: model.dp,
      dtype: model.weights.dtype,
    },
    fit,
    points.map((p) => ({
      label: p.label,
      source: p.source,
      load: p.loadText,
      requests: p.requests.filter((r) => !r.warmup).length,
      measured: p.measured,
      cache: p.cache,
    })),
    loo,
    steps,
    held,
  );
  // What a refit (size --verify) must read again as this fit did.
  if (maxRequests !== DEFAULT_MAX_REQUESTS) file.maxRequests = maxRequests;
  return {
    file,
    engine: `${model.model.name} ${model.weights.dtype} on ${model.tp > 1 ? `TP${model.tp} ` : ''}${model.dp > 1 ? `DP${model.dp} ` : ''}${model.gpu.name}, ${model.personality}`,
    engineFrom: from,
    warnings,
    wallS: (performance.now() - started) / 1000,
  };
}

/**
 * A measured run joined to a calibration without refitting it (a `size --verify` that agreed):
 * a point replayed on the calibrated engine, whose prediction is from the fit that did not see
 * it, so it is the point's leave-one-out too; the fit's values and medians stay as they were, and
 * a later refit takes the run as one of the calibration's own.
 */
export async function withCalibrationPoint(
  file: CalibrationFile,
  path: string,
  dir: string,
): Promise<CalibrationFile> {
  const resolved = resolveEngine({ calibration: path });
  if (!resolved.engine) throw new CalibrationRefused(resolved.problems);
  const problems: string[] = [];
  const warnings: string[] = [];
  const blockSize = new EngineModel(resolved.engine).config.blockSize;
  const point = await readCalibrationPoint(
    dir,
    file.maxRequests ?? DEFAULT_MAX_REQUESTS,
    blockSize,
    problems,
    warnings,
  );
  if (!point || problems.length > 0) throw new CalibrationRefused(problems);
  const predicted = replayPoint(resolved.engine, point);
  const error = relativeErrors(predicted, point.measured);
  return {
    ...file,
    points: [
      ...file.points,
      {
        label: point.label,
        source: dir,
        load: point.loadText,
        requests: point.requests.filter((r) => !r.warmup).length,
        measured: point.measured,
        predicted,
        error,
        leaveOneOut: { predicted, error, heldKeys: [] },
        // Not fitted on: its error is a held-out one, no residual of the fit's.
        fromVerification: true,
      },
    ],
  };
}

/**
 * The calibration fitted again on its own runs (points[].source) and `added`, the way it was fitted: the engine of its args, the same values
 * held, the same keys fitted (what --hold-unidentified held is offered to the fit again and held
 * again if still unidentified), the same step probe. Sources are found from the working
 * directory, else beside the file; one that is gone refuses the refit (CalibrationRefused).
 */
export async function refitCalibration(
  file: CalibrationFile,
  path: string,
  added: readonly string[],
): Promise<CalibrationFile> {
  const problems: string[] = [];
  const locate = (source: string) => {
    for (const dir of [source, resolve(dirname(path), source)]) if (isDirectory(dir)) return dir;
    problems.push(`${source}: the calibration's run is not there (from here or beside ${path})`);
    return source;
  };
  // The points include the runs of earlier checks that agreed (withCalibrationPoint); an
  // invalid measurement never became one.
  const earlier = file.points.map((p) => locate(p.source));
  const steps = file.steps?.sources.map(locate);
  if (problems.length > 0) throw new CalibrationRefused(problems);
  const unidentified = (file.warnings ?? []).flatMap((w) => {
    const key = FIT_KEYS.find((k) => fitFlag(k) === w.parameter);
    return w.code === 'calibration_held_unidentified' && key ? [key] : [];
  });
  const held = Object.fromEntries(
    Object.entries(file.held).filter(([k]) => !unidentified.includes(k as FitKey)),
  );
  const fit = [...(Object.keys(file.fitted) as FitKey[]), ...unidentified];
  const result = await calibrate([...earlier, ...added], {
    flags: { ...engineSettingsFromArgs(file.engine.args), ...held },
    fit: fit.map((k) => fitFlag(k).slice(2)).join(','),
    ...(steps?.length ? { steps } : {}),
    ...(unidentified.length > 0 ? { holdUnidentified: true } : {}),
    ...(file.maxRequests !== undefined ? { maxRequests: file.maxRequests } : {}),
  });
  return result.file;
}

/** `--fit mbu,step-overhead-ms` as keys; undefined when not given. */
function parseFitKeys(text: string | undefined, problems: string[]): FitKey[] | undefined {
  if (text === undefined) return undefined;
  const keys: FitKey[] = [];
  // `--fit ''`: nothing (with --steps, the measured steps and the held values alone).
  for (const name of text.split(',').flatMap((s) => s.trim().replace(/^--/, '') || [])) {
    const key = FIT_KEYS.find((k) => fitFlag(k) === `--${name}`);
    if (key) keys.push(key);
    else {
      problems.push(
        `--fit: "${name}" is not a fitted parameter; choose from ${FIT_KEYS.map((k) => fitFlag(k).slice(2)).join(', ')}`,
      );
    }
  }
  return keys;
}

/**
 * The engine's settings: the flags given when they name the model or GPU; else the built-in
 * simulator's flags the runs' manifests recorded (all the same), less the fitted parameters
 * (what was set there is what the fit is to find).
 */
function engineSettings(
  runDirs: string[],
  flags: Record<string, unknown>,
  problems: string[],
): { settings: SimEngineSettings; from: 'flags' | 'manifests' } {
  const read = engineSettingsFromFlags(flags);
  problems.push(...read.problems);
  const model = flags.model as string | undefined;
  const settings: SimEngineSettings = { ...read.settings, ...(model ? { model } : {}) };
  for (const k of FIT_KEYS) delete (settings as Record<string, unknown>)[k];
  if (model !== undefined || settings.gpu !== undefined || settings.gpuSpec !== undefined) {
    return { settings, from: 'flags' };
  }
  const recorded = runDirs.map((dir) => {
    const server = readManifest(dir)?.server as { simulatorArgs?: unknown } | undefined;
    return Array.isArray(server?.simulatorArgs) ? (server.simulatorArgs as string[]) : undefined;
  });
  const first = recorded[0];
  if (runDirs.length > 0 && first && recorded.every((r) => r?.join('\0') === first.join('\0'))) {
    const fromArgs = engineSettingsFromArgs(first);
    for (const k of FIT_KEYS) delete (fromArgs as Record<string, unknown>)[k];
    delete fromArgs.calibration;
    return { settings: { ...fromArgs, ...settings }, from: 'manifests' };
  }
  if (runDirs.length > 0) {
    problems.push(
      first && recorded.every(Boolean)
        ? 'the runs were made on differently set up simulators: calibrate one engine at a time'
        : 'calibrate needs the engine the runs measured: --model (a preset or config.json) and --gpu or --gpu-spec, with --tp, --dtype and --engine-personality as it was served',
    );
  }
  return { settings, from: 'flags' };
}

/** Settings back to flags, for the record. */
function engineArgs(settings: SimEngineSettings): string[] {
  const args: string[] = [];
  if (typeof settings.model === 'string') args.push('--model', settings.model);
  for (const f of ENGINE_FLAGS) {
    const v = (settings as Record<string, unknown>)[f.key];
    if (v === undefined || typeof v === 'object') continue;
    if (f.kind === 'boolean') {
      if (f.key === 'chunkedPrefill' ? v === false : v === true) args.push(flagName(f));
    } else args.push(flagName(f), String(v));
  }
  return args;
}

/**
 * A session run's prompt start every session shares, from the scenario its plan recorded: the
 * system prompt, after an agent's tool schemas (counted in words, as the built-in simulator
 * does; another tokenizer differs by a few tokens of a block).
 */
function sharedPrefixTokens(manifest: Record<string, unknown> | undefined): number | undefined {
  const plan = manifest?.plan as { scenarios?: unknown } | undefined;
  const name = manifest?.scenario;
  const scenario = (Array.isArray(plan?.scenarios) ? (plan.scenarios as Scenario[]) : []).find(
    (s) => s?.name === name,
  );
  if (scenario?.agent) {
    const { systemPromptTokens, tools } = scenario.agent;
    return systemPromptTokens + countWords(toolsPromptText(agentTools(tools)));
  }
  return scenario?.session?.systemPromptTokens;
}

/**
 * A trace replay's block ids, read again from the trace its manifest names (records and
 * manifests keep no prompts, nor the trace's entries) with the block size and window the run
 * read it with (its ids are checked against that size, and request `id` was entry `id` of the
 * window). Only where every request's asked length is its entry's, so that a changed file is
 * never taken for the run's; else, and where the file is gone, the run is replayed sharing no
 * prefix, as a run of single requests is, and said.
 */
function traceOfRun(
  dir: string,
  manifest: Record<string, unknown> | undefined,
  records: readonly { id: number; requestedInputTokens: number }[],
  warnings: string[],
): { hashIdsOf: (id: number) => readonly number[] | undefined; blockTokens: number } | undefined {
  const plan = manifest?.plan as
    | { trace?: { path?: unknown; blockTokens?: unknown; window?: unknown } }
    | undefined;
  const path = plan?.trace?.path;
  if (typeof path !== 'string') return undefined;
  const saved = plan?.trace?.blockTokens;
  const blockTokens =
    typeof saved === 'number' && Number.isSafeInteger(saved) && saved >= 1
      ? saved
      : TRACE_BLOCK_TOKENS;
  const window = savedWindow(plan?.trace?.window);
  let entries: TraceEntry[];
  try {
    entries = readTrace(path, undefined, undefined, blockTokens);
    // The gap cap moves arrivals only: the window alone decides which entry a request was.
    if (window) entries = traceWindow(entries, window.startS, window.endS);
  } catch (err) {
    warnings.push(
      `${dir}: the trace it replayed cannot be read here (${(err as Error).message.split('\n')[0]}): its requests are replayed sharing no prefix`,
    );
    return undefined;
  }
  if (!entries.some((e) => e.hashIds !== undefined)) return undefined;
  const unlike = records.filter((r) => {
    const e = entries[r.id];
    return !e || Math.max(1, e.inputTokens) !== r.requestedInputTokens;
  }).length;
  if (unlike > 0) {
    warnings.push(
      `${dir}: ${unlike} of ${records.length} requests did not ask for the lengths of ${path}'s entries (a changed file): its prefix sharing is not replayed`,
    );
    return undefined;
  }
  return { hashIdsOf: (id) => entries[id]?.hashIds, blockTokens };
}

/** A manifest's `--trace-window` (plan.trace.window) read back, or undefined. */
function savedWindow(raw: unknown): { startS: number; endS: number } | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { startS, endS } = raw as { startS?: unknown; endS?: unknown };
  return typeof startS === 'number' && typeof endS === 'number' && startS >= 0 && endS > startS
    ? { startS, endS }
    : undefined;
}

/**
 * The step probe's runs: for each prompt length processed alone (a closed loop of one), the
 * median prompt time the server reported. Runs at other loads are passed over with a warning
 * (a probe's larger batches); no reported prompt time at all is a problem.
 */
async function readSteps(
  dirs: readonly string[],
  findRuns: (dir: string) => string[],
  problems: string[],
  warnings: string[],
): Promise<CalibrationSteps | undefined> {
  const bySize = new Map<number, number[]>();
  const frontend: number[] = [];
  const sources: string[] = [];
  for (const dir of dirs) {
    const runs = isDirectory(dir) ? findRuns(dir) : [];
    if (runs.length === 0) {
      problems.push(
        `--steps ${dir}: no run there (give a \`probe prefill --batches 1\` results directory)`,
      );
      continue;
    }
    let timed = 0;
    for (const run of runs) {
      const load = savedLoad(readSummary(run), readManifest(run));
      if (load?.mode !== 'closed' || load.concurrency !== 1) {
        warnings.push(
          `--steps: ${run} ran more than one request at a time and is left out (a step is timed from a prompt processed alone)`,
        );
        continue;
      }
      const read = await streamRecords(resultPath(run, 'records'), {
        add: (r) => {
          const t = r.serverTiming;
          if (r.phase !== 'measure' || r.error || !t?.prefillTokens || !t.prefillMs) return;
          const list = bySize.get(t.prefillTokens);
          if (list) list.push(t.prefillMs);
          else bySize.set(t.prefillTokens, [t.prefillMs]);
          if (r.firstTokenAt !== undefined) frontend.push(r.firstTokenAt - r.sentAt - t.prefillMs);
          timed++;
        },
      });
      if (read.damage.damaged) warnings.push(read.damage.message() ?? read.damage.file);
    }
    if (timed > 0) sources.push(dir);
    else {
      problems.push(
        `--steps ${dir}: no request there has a prompt time reported by the server (llama.cpp's llama-server and Ollama report one; vLLM, SGLang and TGI do not): leave out --steps`,
      );
    }
  }
  if (problems.length > 0) return undefined;
  const points = [...bySize.entries()]
    .sort(([a], [b]) => a - b)
    .map(([tokens, ms]) => ({ tokens, ms: median(ms), requests: ms.length }));
  if (points.length < 2) {
    problems.push(
      `--steps: the prompts were processed at ${points.length} length(s) only; a step table needs two or more (\`probe prefill --batches 1 --min-input 1 --max-input 512\`)`,
    );
    return undefined;
  }
  return {
    sources,
    points,
    ...(frontend.length > 0 ? { frontendMs: Math.max(0, median(frontend)) } : {}),
  };
}

/**
 * A run directory as a calibration point, as calibrate reads it (its server's reported hits
 * included), or a problem saying why it cannot be one.
 */
export async function readCalibrationPoint(
  dir: string,
  maxRequests: number,
  /** The replayed engine's KV block size: the replay keeps whole cached blocks. */
  blockSize: number,
  problems: string[],
  warnings: string[],
): Promise<
  (CalibrationPoint & { source: string; loadText: string; cache: PointCacheFacts }) | undefined
> {
  const manifest = readManifest(dir);
  const summary = readSummary(dir);
  const load = savedLoad(summary, manifest);
  if (!load) {
    problems.push(`${dir}: neither summary.json nor manifest.json says what load it ran`);
    return undefined;
  }
  const warmup = Number(
    (manifest?.windows as { warmupRequests?: unknown } | undefined)?.warmupRequests ?? 0,
  );
  const records: Slim[] = [];
  const read = await streamRecords(resultPath(dir, 'records'), {
    add: (r) => {
      // Issue order: the first units sent (requests, or sessions), warm-up included (ids
      // count from 0).
      if ((r.sessionId ?? r.id) >= warmup + maxRequests) return;
      records.push({
        id: r.id,
        phase: r.phase,
        scheduledAt: r.scheduledAt,
        sentAt: r.sentAt,
        endAt: r.endAt,
        outputTokens: r.outputTokens,
        requestedInputTokens: r.requestedInputTokens,
        ...(r.firstTokenAt !== undefined ? { firstTokenAt: r.firstTokenAt } : {}),
        ...(r.lastTokenAt !== undefined ? { lastTokenAt: r.lastTokenAt } : {}),
        ...(r.inputTokens !== undefined ? { inputTokens: r.inputTokens } : {}),
        ...(r.cachedInputTokens !== undefined ? { cachedInputTokens: r.cachedInputTokens } : {}),
        ...(r.error ? { error: r.error } : {}),
        ...(r.sessionId !== undefined ? { sessionId: r.sessionId, turn: r.turn } : {}),
      });
    },
  });
  // What the reader skipped as damaged, said once per file (results/jsonl.ts ReadDamage).
  if (read.damage.damaged) warnings.push(read.damage.message() ?? read.damage.file);
  const label = relative(process.cwd(), dir) || dir;
  // A session run (an agentic trace, a trace of conversations) is replayed by its sessions,
  // which key their own prompts: a trace of single requests' block ids is not read for it.
  const sessionRun = records.some((r) => r.sessionId !== undefined);
  const trace = sessionRun ? undefined : traceOfRun(dir, manifest, records, warnings);
  const point = pointFromRecords(
    label,
    load as LoadSpec,
    records as RequestRecord[],
    sharedPrefixTokens(manifest),
    trace,
  );
  if (!point.requests.some((r) => !r.warmup)) {
    problems.push(`${dir}: no measured request succeeded; leave it out`);
    return undefined;
  }
  const cache = cacheFacts(summary, point);
  if (!cache.replayShares) {
    // The server's hits, per request where its records said, else its share of each prompt.
    withHitShare(point, cache.hitRate);
    if (cache.hitRate !== undefined) cache.replayedHitRate = replayedHitShare(point, blockSize);
  }
  return {
    ...point,
    source: dir,
    cache,
    loadText:
      load.mode === 'closed'
        ? `concurrency ${load.concurrency}${point.sessions ? ' (sessions)' : ''}`
        : `${load.rate} ${point.sessions ? 'sessions/s' : 'req/s'}${load.maxConcurrency !== undefined ? ` (max ${load.maxConcurrency} in flight)` : ''}`,
  };
}

/**
 * What a run's summary said of the server's prefix cache: the share of its measured requests'
 * prompt tokens the server said it served cached (usage's cached_tokens, llama.cpp's prompt
 * tokens processed), else the server's hit rate over the run (its /metrics), and whether the
 * replay reproduces prompt sharing at all (a shared system prompt, a trace's block ids,
 * sessions): hits a replay without sharing did not have are warned of (calibrationWarnings.ts).
 */
export function cacheFacts(
  summary: ReturnType<typeof readSummary>,
  point: Pick<CalibrationPoint, 'sharedPrefixTokens' | 'traceBlockTokens' | 'sessions'>,
): PointCacheFacts {
  const share = (x: unknown) =>
    typeof x === 'number' && Number.isFinite(x) && x >= 0 && x <= 1 ? x : undefined;
  const usage = summary?.tokens?.cachedInput;
  const usageRate = usage && usage.ofInput > 0 ? share(usage.cached / usage.ofInput) : undefined;
  const server = summary?.serverMetrics?.prefixCache;
  const serverRate = share(server?.hitRate);
  const [hitRate, from] =
    usageRate !== undefined
      ? [
          usageRate,
          usage?.source === 'prefill'
            ? "the server's prompt tokens processed"
            : "usage's cached_tokens",
        ]
      : serverRate !== undefined
        ? [
            serverRate,
            `the server's ${typeof server?.from === 'string' ? server.from : '/metrics'}`,
          ]
        : [undefined, undefined];
  return {
    replayShares:
      (point.sharedPrefixTokens ?? 0) > 0 ||
      point.traceBlockTokens !== undefined ||
      (point.sessions?.length ?? 0) > 0,
    ...(hitRate !== undefined ? { hitRate, from: from as string } : {}),
    ...(summary?.cacheState === 'uncontrolled' ? { uncontrolled: true } : {}),
  };
}
