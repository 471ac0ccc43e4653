/**
 * The capacity profile: a closed loop of long-context requests at batch 1, 2, 4, ... until a
 * step fails, preempts, fills the KV cache or falls off a latency cliff (memory/capacity.ts).
 * Its steps run on a loop of their own, not a PointRunner: see CapacityTarget.
 */

import { join } from 'node:path';
import { cacheStateOf } from '../../analysis/prefixCache.js';
import { openaiBackend } from '../../backends/openai.js';
import { firstListedModel, splitServerUrl, withApiKey } from '../../backends/request.js';
import type { Endpoint } from '../../backends/types.js';
import { EXIT } from '../../errors.js';
import {
  checkedFlagNumber,
  type NumberRule,
  parseFlagList,
  parseFlagNumber,
  TIME_SCALE,
} from '../../flagNumber.js';
import { requestText } from '../../httpText.js';
import { concurrencyBoundProblem, MAX_CONCURRENCY } from '../../load.js';
import { createRunClock } from '../../loadgen/clock.js';
import {
  chooseProtocol,
  type Http2Mode,
  protocolNotice,
  type WireProtocol,
} from '../../loadgen/h2.js';
import { runLoadgen } from '../../loadgen/run.js';
import {
  atModelledSpeed,
  type CapacityLimit,
  type CapacityPrediction,
  type CapacityStep,
  capacityInterval,
  capacityLimit,
  doublingBatches,
  PREDICTED_STEP_FIELDS,
  type PredictedStepField,
  predictCapacity,
  predictedKvUsage,
  type StepPrediction,
} from '../../memory/capacity.js';
import { EngineStartError, planVllmMemory } from '../../memory/footprint.js';
import { type RunSummary, SummaryBuilder } from '../../metrics/summary.js';
import { warning } from '../../metrics/warnings.js';
import { noteField, serverInfoField, tagsField } from '../../plan/annotations.js';
import type { Field } from '../../plan/fields.js';
import { apiKeyFromEnv, urlCredentialsProblem } from '../../plan/runPlan.js';
import {
  PROXY_CREDENTIALS_FIX,
  PROXY_FIX,
  ProxyError,
  type ProxySettings,
  parseProxyUrl,
  proxyFor,
  proxySettings,
} from '../../proxy.js';
import type { CapacityReport } from '../../report/capacityText.js';
import { nothingSucceeded } from '../../report/failures.js';
import { writeResult } from '../../results/layout.js';
import { openRunDir } from '../../results/runFiles.js';
import type { CalibrationWarning } from '../../sim/calibrationWarnings.js';
import { type EngineModelOptions, resolveEngineConfig } from '../../sim/engineModel.js';
import { type EngineCalibration, engineFlagArgs, engineFromFlags } from '../../sim/options.js';
import { recordTelemetry } from '../../telemetry/scraper.js';
import type { ServerMetricsSummary } from '../../telemetry/summary.js';
import {
  readTlsOptions,
  type TlsMaterial,
  type TlsOptions,
  type TlsSettings,
  tlsConnectOptions,
  tlsFailure,
  tlsSettingsOf,
} from '../../tls.js';
import { VERSION } from '../../version.js';
import { MAX_PROMPT_SALT } from '../../workload/promptSalt.js';
import { describeScenario } from '../../workload/scenarios.js';
import { createSyntheticWorkload } from '../../workload/synthetic.js';
import { resetTargetCache } from '../cacheReset.js';
import type { Output, SessionEvents } from '../events.js';
import type { Point, PointResult, PointRunner } from '../point.js';
import { askServerEngine, environmentFields } from '../serverEngine.js';
import { inSession, resultsRoot } from '../session.js';
import { type SimulatorProcess, spawnSimulator } from '../simulator.js';
import { type Notify, randomPromptSalt } from '../target.js';
import { fixedScenario, type Profile, runProfile } from './profile.js';

/** `infergauge capacity`'s options, as parsed (engine flags besides). */
export interface CapacityOptions extends Record<string, unknown>, TlsOptions {
  url?: string;
  model?: string;
  modelName?: string;
  endpoint?: string;
  inputTokens?: string;
  outputTokens?: string;
  maxBatch?: string;
  batches?: string;
  requestsPerStep?: string;
  cliffFactor?: string;
  metricsUrl?: string;
  scrapeInterval?: string;
  timeout?: string;
  apiKeyEnv?: string;
  /** A proxy URL (--proxy), or false (--no-proxy); else the environment's. */
  proxy?: string | false;
  /** --http2: auto (absent), on or off, as run takes it. */
  http2?: string;
  ignoreEos?: boolean;
  /** --reset-cache: the server's prefix cache emptied before every step. */
  resetCache?: boolean;
  timeScale?: string;
  seed?: string;
  promptSalt?: string;
  /** --prediction-draws: the built-in simulator on a --calibration, its intervals' draws. */
  predictionDraws?: string;
  out?: string;
  json?: boolean;
  /** Repeatable --tag, --note and repeatable --server-info, as run takes them. */
  tag?: string[];
  note?: string;
  serverInfo?: string[];
}

export interface CapacitySettings {
  endpoint: Endpoint;
  inputTokens: number;
  outputTokens: number;
  batches: number[];
  requestsPerStep?: number;
  cliffFactor: number;
  scrapeIntervalS: number;
  timeoutS: number;
  seed: number;
  /**
   * Mixed into the prompts with the seed (workload/promptSalt.ts): a fresh one per search
   * unless --prompt-salt fixes it, so a second search does not read the first one's prefills.
   */
  promptSalt: number;
  ignoreEos: boolean;
  /** --reset-cache: empty the server's prefix cache before every step (session/cacheReset.ts). */
  resetCache: boolean;
  /** The built-in simulator's --time-scale (real seconds per simulated second). */
  timeScale?: number;
}

/** --tag, --note and --server-info, read as `run` reads them; a problem names the flag. */
function readAnnotations(
  o: CapacityOptions,
  problems: string[],
): Pick<CapacityRun, 'tags' | 'note' | 'serverInfo'> {
  const out: Pick<CapacityRun, 'tags' | 'note' | 'serverInfo'> = {};
  const read = <T>(flag: string, raw: unknown, field: Field<T>): T | undefined => {
    if (raw === undefined) return undefined;
    const r = field(raw);
    if ('problem' in r) problems.push(`${flag} ${r.problem}`);
    return 'value' in r ? r.value : undefined;
  };
  const tags = read('--tag', o.tag, tagsField);
  const note = read('--note', o.note, noteField);
  const serverInfo = read('--server-info', o.serverInfo, serverInfoField);
  if (tags) out.tags = tags;
  if (note !== undefined) out.note = note;
  if (serverInfo) out.serverInfo = serverInfo;
  return out;
}

/** The capacity search's settings from its options. */
export function capacitySettings(o: CapacityOptions, problems: string[]): CapacitySettings {
  const read = (flag: string, value: string | undefined, fallback: number, rule: NumberRule) =>
    checkedFlagNumber(
      value,
      rule,
      problems,
      `${flag} must be a ${rule.integer ? 'whole number' : 'number'} >= ${rule.min}${rule.max !== undefined ? ` and <= ${rule.max}` : ''} (got "${value}")`,
    ) ?? fallback;
  const num = (flag: string, value: string | undefined, fallback: number, min: number) =>
    read(flag, value, fallback, { min });
  const whole = (flag: string, value: string | undefined, fallback: number, min = 1) =>
    read(flag, value, fallback, { min, integer: true });
  const maxBatch = whole('--max-batch', o.maxBatch, 256);
  // A batch is requests in flight: one client holds no more than MAX_CONCURRENCY (src/load.ts).
  if (maxBatch > MAX_CONCURRENCY) problems.push(`--max-batch ${concurrencyBoundProblem(maxBatch)}`);
  let batches = doublingBatches(Math.min(maxBatch, MAX_CONCURRENCY));
  if (o.batches !== undefined) {
    const list = parseFlagList(o.batches, { min: 1, integer: true });
    if (list === undefined) {
      problems.push(
        `--batches must be whole numbers >= 1 separated by commas (got "${o.batches}")`,
      );
    } else batches = list;
    const over = list?.find((b) => b > MAX_CONCURRENCY);
    if (over !== undefined) problems.push(`--batches ${concurrencyBoundProblem(over)}`);
  }
  const scale = o.timeScale === undefined ? undefined : parseFlagNumber(o.timeScale, TIME_SCALE);
  if (scale && 'problem' in scale) problems.push(`--time-scale ${scale.problem}`);
  const endpoint = o.endpoint ?? 'completions';
  if (endpoint !== 'chat' && endpoint !== 'completions') {
    problems.push(`--endpoint must be chat or completions (got "${endpoint}")`);
  }
  return {
    endpoint: endpoint as Endpoint,
    inputTokens: whole('--input-tokens', o.inputTokens, 4096),
    outputTokens: whole('--output-tokens', o.outputTokens, 256),
    batches,
    ...(o.requestsPerStep !== undefined
      ? { requestsPerStep: whole('--requests-per-step', o.requestsPerStep, 4) }
      : {}),
    cliffFactor: num('--cliff-factor', o.cliffFactor, 3, 1.01),
    scrapeIntervalS: num('--scrape-interval', o.scrapeInterval, 0.5, 0.05),
    timeoutS: num('--timeout', o.timeout, 600, 0.001),
    seed: whole('--seed', o.seed, 42, 0),
    promptSalt:
      o.promptSalt === undefined
        ? randomPromptSalt()
        : read('--prompt-salt', o.promptSalt, 0, { min: 0, max: MAX_PROMPT_SALT, integer: true }),
    ignoreEos: o.ignoreEos === true,
    resetCache: o.resetCache === true,
    ...(scale && 'value' in scale ? { timeScale: scale.value } : {}),
  };
}

/**
 * The analytic capacity of a described deployment (every data-parallel replica's pool), or the
 * reason it has none: the engine would not start, with the engine's own message.
 */
export function predictDeploymentCapacity(
  engine: EngineModelOptions,
  settings: CapacitySettings,
): { prediction: CapacityPrediction } | { note: string } {
  const config = resolveEngineConfig(engine);
  try {
    const plan = planVllmMemory(config);
    const sequenceTokens = settings.inputTokens + settings.outputTokens;
    return { prediction: predictCapacity(plan, sequenceTokens, config.blockSize, config.dp) };
  } catch (err) {
    if (!(err instanceof EngineStartError)) throw err;
    return { note: err.message };
  }
}

/**
 * Everything `capacity` takes from its options, checked: the settings, the target (the built-in
 * simulator's arguments without --url), the API key, and the analytic prediction where the
 * model and GPU are known. `problems` lists what is wrong with the options (exit 2); a built-in
 * simulator that could not start throws.
 */
export function prepareCapacity(
  o: CapacityOptions,
  env: NodeJS.ProcessEnv = process.env,
): {
  settings: CapacitySettings;
  run: Omit<CapacityRun, 'progress' | 'outputs' | 'onNotice'>;
  problems: string[];
  /** What the engine's options warn of (a --calibration's transfer notes and its fit's warnings). */
  warnings: string[];
} {
  const problems: string[] = [];
  const settings = capacitySettings(o, problems);
  const builtIn = o.url === undefined;
  // The prediction needs the served model and GPU: given, or the simulator's own.
  const wantsPrediction = builtIn || o.model !== undefined || o.gpu !== undefined;
  const built = wantsPrediction ? engineFromFlags(o.model, o) : undefined;
  if (built) problems.push(...built.problems);
  const warnings = built?.warnings ?? [];
  if (!builtIn && o.timeScale !== undefined) {
    problems.push('--time-scale applies to the built-in simulator (without --url)');
  }
  const { apiKey } = apiKeyFromEnv(o.apiKeyEnv, env, problems);
  const badUrl = o.url === undefined ? undefined : urlCredentialsProblem('--url', o.url);
  if (badUrl) problems.push(badUrl);
  const tls = readTlsOptions(o, [o.url, o.metricsUrl], env, problems);
  // As `run` takes it (src/proxy.ts); never for the built-in simulator, a child on loopback.
  let proxy: ProxySettings | undefined;
  if (o.url !== undefined && !badUrl) {
    proxy = proxySettings(
      { ...(typeof o.proxy === 'string' ? { proxy: o.proxy } : {}), noProxy: o.proxy === false },
      env,
    );
    try {
      if (typeof o.proxy === 'string') parseProxyUrl(o.proxy);
      proxyFor(o.url, proxy);
    } catch (err) {
      problems.push(
        `${typeof o.proxy === 'string' ? '--proxy' : 'the proxy from the environment'} cannot be used: ${(err as Error).message}`,
      );
    }
  }
  const annotations = readAnnotations(o, problems);
  let http2: 'on' | 'off' | undefined;
  if (o.http2 !== undefined && !['auto', 'on', 'off'].includes(o.http2)) {
    problems.push(`--http2 must be auto, on or off (got "${o.http2}")`);
  } else if (o.http2 === 'on' || o.http2 === 'off') http2 = o.http2;
  const run: Omit<CapacityRun, 'progress' | 'outputs' | 'onNotice'> = {
    ...(builtIn
      ? {
          simulatorArgs: [
            ...(o.model !== undefined ? ['--model', o.model] : []),
            ...(o.timeScale !== undefined ? ['--time-scale', o.timeScale] : []),
            ...engineFlagArgs(o),
          ],
        }
      : { url: o.url }),
    ...(o.modelName !== undefined ? { modelName: o.modelName } : {}),
    ...(o.metricsUrl !== undefined ? { metricsUrl: o.metricsUrl } : {}),
    ...(proxy ? { proxy } : {}),
    ...(http2 ? { http2 } : {}),
    apiKey,
    ...(tls ? { tls } : {}),
    ...(o.out !== undefined ? { out: o.out } : {}),
    ...(built?.calibration ? { calibrationWarnings: built.calibration.warnings } : {}),
    // The built-in simulator on a calibration predicts: its steps get intervals by replays.
    ...(builtIn && built?.calibrated && built.engine
      ? { calibrated: built.calibrated, engine: built.engine }
      : {}),
    ...annotations,
  };
  if (o.predictionDraws !== undefined) {
    const draws = checkedFlagNumber(
      o.predictionDraws,
      { min: 0, max: 1000, integer: true },
      problems,
      `--prediction-draws must be a whole number >= 0 and <= 1000 (got "${o.predictionDraws}")`,
    );
    if (draws !== undefined) run.predictionDraws = draws;
  }
  if (problems.length > 0 || !built?.engine) return { settings, run, problems, warnings };
  const predicted = predictDeploymentCapacity(built.engine, settings);
  if ('note' in predicted && builtIn) {
    throw new Error(`the built-in simulator cannot start: ${predicted.note}`);
  }
  if ('note' in predicted) run.predictionNote = predicted.note;
  else run.prediction = predicted.prediction;
  return { settings, run, problems, warnings };
}

export interface CapacityRun {
  /** Whether to start the built-in simulator (no --url), with these arguments. */
  simulatorArgs?: string[];
  url?: string;
  /** The model to request (--model-name), else the first the server lists. */
  modelName?: string;
  metricsUrl?: string;
  /** The proxy settings the server is reached by (src/proxy.ts). */
  proxy?: ProxySettings;
  /** --http2 on or off; absent is auto (src/loadgen/h2.ts chooseProtocol). */
  http2?: Exclude<Http2Mode, 'auto'>;
  apiKey: string | undefined;
  /** TLS towards an https:// server (src/tls.ts): the settings the manifest keeps, the material. */
  tls?: TlsSettings & { material: TlsMaterial };
  prediction?: CapacityPrediction;
  predictionNote?: string;
  /** What the --calibration file's fit warned of (the prediction and the simulator use it). */
  calibrationWarnings?: CalibrationWarning[];
  /** The --calibration the built-in simulator runs on, and its engine: the steps' replays. */
  calibrated?: EngineCalibration;
  engine?: EngineModelOptions;
  /** Draws behind the steps' prediction intervals (default PREDICTION_DRAWS; 0: none). */
  predictionDraws?: number;
  /** The results directory (default: a new one under infergauge-results/). */
  out?: string;
  /** --tag, --note, --server-info: the manifest's plan carries them, as a run's does. */
  tags?: string[];
  note?: string;
  serverInfo?: Record<string, string>;
  /** A line before each step runs (for a terminal watching it). */
  progress?: (line: string) => void;
  /** Outputs besides the results directory. */
  outputs?: readonly Output[];
  onNotice?: Notify;
}

/**
 * Runs the capacity search as one session; returns capacity.json, as saved in `root`, a step
 * per directory under it.
 */
export async function runCapacity(
  settings: CapacitySettings,
  c: CapacityRun,
  stop: AbortSignal,
): Promise<{ report: CapacityReport; root: string; code: number }> {
  const root = resultsRoot(c.out, 'capacity');
  const session = {
    command: 'capacity',
    kind: 'capacity' as const,
    root,
    plan: {
      ...settings,
      ...(c.url !== undefined ? { url: c.url } : {}),
      ...(c.http2 ? { http2: c.http2 } : {}),
      // The settings only: the material holds the key and its passphrase.
      ...(c.tls ? { tls: tlsSettingsOf(c.tls) } : {}),
      tags: c.tags ?? [],
      ...(c.note !== undefined ? { note: c.note } : {}),
      ...(c.serverInfo !== undefined ? { serverInfo: c.serverInfo } : {}),
    },
    html: false,
    stop,
    ...(c.outputs ? { outputs: c.outputs } : {}),
    ...(c.onNotice ? { onNotice: c.onNotice } : {}),
  };
  return inSession(session, async (session) => {
    const report = await capacitySession(settings, { ...c, out: root }, session, stop);
    // Precedence: interrupted, then no step had a success (a broken endpoint fails the search).
    const failed = nothingSucceeded(report.steps.map((step) => ({ requests: step })));
    return {
      report,
      root,
      code: stop.aborted ? EXIT.interrupted : failed ? EXIT.failure : EXIT.ok,
    };
  });
}

async function capacitySession(
  settings: CapacitySettings,
  c: CapacityRun & { out: string },
  session: SessionEvents,
  stop: AbortSignal,
): Promise<CapacityReport> {
  let sim: SimulatorProcess | undefined;
  try {
    if (c.simulatorArgs) sim = await spawnSimulator(c.simulatorArgs);
    const url = sim?.url ?? (c.url as string);
    const headers = withApiKey({}, c.apiKey);
    const tls = c.tls?.material;
    if (tls?.insecure) {
      c.onNotice?.(
        "--insecure: the server's TLS certificate is not verified, so these numbers may be another server's",
      );
    }
    const listed =
      c.modelName === undefined ? await firstModel(url, headers, tls, c.proxy) : undefined;
    const model = c.modelName ?? (listed as { model: string }).model;
    const { origin, prefix } = splitServerUrl(url);
    const route = proxyFor(url, c.proxy);
    const via = route?.shown;
    if (via) c.onNotice?.(`via proxy ${via} (--no-proxy or NO_PROXY bypasses it)`);
    // Once per search, as run decides it, so that every step speaks the same protocol (through
    // a proxy, asked inside its tunnel).
    const mode = c.http2 ?? 'auto';
    const protocol: WireProtocol = await chooseProtocol(
      origin,
      mode,
      tlsConnectOptions(tls),
      route,
    );
    if (protocol === 'h2' || url.startsWith('https:')) {
      c.onNotice?.(protocolNotice(mode, protocol));
    }
    // What the server says it is, as run asks it (src/session/serverEngine.ts); never fails.
    const environment = environmentFields(
      await askServerEngine(url, {
        headers: {},
        apiKey: c.apiKey,
        tls,
        proxy: c.proxy,
        ...(listed ? { models: listed.models } : {}),
      }),
      c.serverInfo,
    );
    // A server that cannot be reset is refused before the first step; then every step resets it.
    const reset = settings.resetCache
      ? () =>
          resetTargetCache({
            url,
            environment,
            plan: { backend: 'openai', headers: {}, tls: tls ? { material: tls } : undefined },
            apiKey: c.apiKey,
            config: { proxy: c.proxy },
          })
      : undefined;
    await reset?.();
    const { calibrated, engine } = c;
    const target = capacityTarget({
      ...(reset ? { reset } : {}),
      ...(sim && calibrated && engine
        ? {
            predict: async (summary: RunSummary, point: Point) => {
              const { predictRun } = await import('../predictVirtual.js');
              await predictRun(summary, {
                engine,
                calibrated,
                run: {
                  load: point.load,
                  ...(point.requests !== undefined ? { requests: point.requests } : {}),
                  warmupRequests: 0,
                  seed: settings.seed,
                  endpoint: settings.endpoint,
                },
                workload: async () => ({
                  nextRequest: point.nextRequest as NonNullable<Point['nextRequest']>,
                }),
                ...(c.predictionDraws !== undefined ? { draws: c.predictionDraws } : {}),
              });
            },
          }
        : {}),
      freshSimulator: sim !== undefined,
      session,
      server: sim
        ? {
            url,
            builtInSimulator: true,
            simulator: sim.banner,
            ...(c.calibrationWarnings ? { calibrationWarnings: c.calibrationWarnings } : {}),
            protocol,
            ...environment,
          }
        : { url, protocol, ...(via ? { proxy: via } : {}), ...environment },
      protocol,
      ...(c.proxy ? { proxy: c.proxy } : {}),
      url,
      model,
      headers,
      apiKey: c.apiKey,
      ...(tls ? { tls } : {}),
      metricsUrl: c.metricsUrl ?? `${origin}${prefix}/metrics`,
      settings,
      stop,
    });
    const { steps, limit } = await runProfile(capacityProfile(settings, c, stop), target, stop);
    // The capacity rests on whole steps only: the last before the limit, else the last whole one.
    const whole = steps.filter((step) => !step.interrupted);
    const lastGood = limit ? whole[whole.length - 2] : whole[whole.length - 1];
    const report: CapacityReport = {
      schemaVersion: 1,
      tool: { name: 'infergauge', version: VERSION },
      server: {
        url: sim ? 'built-in simulator' : url,
        model,
        simulator: sim?.banner,
        ...(settings.timeScale !== undefined ? { timeScale: settings.timeScale } : {}),
        ...(c.calibrationWarnings ? { calibrationWarnings: c.calibrationWarnings } : {}),
      },
      workload: {
        inputTokens: settings.inputTokens,
        outputTokens: settings.outputTokens,
        sequenceTokens: settings.inputTokens + settings.outputTokens,
        endpoint: settings.endpoint,
        requestsPerStep: settings.requestsPerStep ?? '2 x batch, at least 4',
      },
      prediction: c.prediction ?? null,
      ...(c.predictionNote ? { predictionNote: c.predictionNote } : {}),
      steps,
      limit: limit ?? null,
      capacity: lastGood?.batch ?? 0,
      interrupted: stop.aborted || steps.some((step) => step.interrupted),
    };
    const interval = capacityInterval(steps, settings.cliffFactor, report.capacity);
    if (interval) report.capacityPredictionInterval = interval;
    writeResult(c.out, 'capacity', report);
    return report;
  } finally {
    await sim?.stop();
  }
}

/** Batch after batch until a limit, the last batch, or the stop. */
async function* capacityProfile(
  s: CapacitySettings,
  c: CapacityRun & { out: string },
  stop: AbortSignal,
): Profile<{ steps: CapacityStep[]; limit: CapacityLimit | undefined }> {
  const steps: CapacityStep[] = [];
  let limit: CapacityLimit | undefined;
  for (const batch of s.batches) {
    if (!stop.aborted) c.progress?.(`batch ${batch}...\n`);
    const result = yield {
      load: { mode: 'closed', concurrency: batch },
      scenario: fixedScenario(`batch ${batch}`, s.inputTokens, s.outputTokens),
      requests: s.requestsPerStep ?? Math.max(4, 2 * batch),
      dir: join(c.out, `batch-${batch}`),
      nextRequest: createSyntheticWorkload({
        inputTokens: s.inputTokens,
        outputTokens: s.outputTokens,
        // Each batch its own seed: no batch reads the prefills of the one before it.
        seed: s.seed + batch,
        promptSalt: s.promptSalt,
      }),
    };
    if (!result) break;
    // Judged and reported at the modelled hardware's speed, whatever the simulator's scale.
    const measured = capacityStep(batch, result);
    const step = s.timeScale !== undefined ? atModelledSpeed(measured, s.timeScale) : measured;
    const intervals = stepPrediction(step, result.summary);
    if (intervals) step.predictionIntervals = intervals;
    if (c.prediction) step.predictedKvCacheUsage = predictedKvUsage(c.prediction, batch);
    steps.push(step);
    // A step cut short is reported as it stands, and judged on nothing: the search ends there.
    if (step.interrupted) break;
    limit = capacityLimit(step, steps[steps.length - 2], s.cliffFactor);
    if (limit) break;
  }
  return { steps, limit };
}

/**
 * A step's prediction intervals from its summary's: each range as a ratio to the summary's own
 * figure, set on the step's (which a --time-scale has put at the modelled hardware's speed).
 */
function stepPrediction(step: CapacityStep, summary: RunSummary): StepPrediction | undefined {
  if (!summary.prediction) return undefined;
  const { latency, throughput } = summary;
  const of: Record<PredictedStepField, [number, { low: number; high: number } | undefined]> = {
    outputTokensPerS: [throughput.outputTokensPerS, throughput.prediction?.outputTokensPerS],
    ttftP50Ms: [latency.ttftMs.p50, latency.ttftMs.prediction],
    ttftP99Ms: [latency.ttftMs.p99, latency.ttftMs.prediction?.statistics?.p99],
    tpotMeanMs: [latency.tpotMs.mean, latency.tpotMs.prediction?.statistics?.mean],
    itlP99Ms: [latency.itlMs.p99, latency.itlMs.prediction?.statistics?.p99],
  };
  const ranges: StepPrediction['ranges'] = {};
  for (const field of PREDICTED_STEP_FIELDS) {
    const [figure, range] = of[field];
    if (!range || !(figure > 0)) continue;
    ranges[field] = {
      low: (step[field] * range.low) / figure,
      high: (step[field] * range.high) / figure,
    };
  }
  return { level: summary.prediction.level, ranges };
}

function capacityStep(batch: number, { summary, serverMetrics }: PointResult): CapacityStep {
  const step: CapacityStep = {
    batch,
    completed: summary.requests.completed,
    failed: summary.requests.failed,
    errorsByKind: summary.requests.errorsByKind as Record<string, number>,
    ...(summary.requests.firstErrorByKind
      ? { firstErrorByKind: summary.requests.firstErrorByKind as Record<string, string> }
      : {}),
    meanConcurrency: summary.load.meanConcurrency,
    outputTokensPerS: summary.throughput.outputTokensPerS,
    perUserTokensPerS: summary.latency.outputSpeedTokS.mean,
    ttftP50Ms: summary.latency.ttftMs.p50,
    ttftP99Ms: summary.latency.ttftMs.p99,
    tpotMeanMs: summary.latency.tpotMs.mean,
    itlP99Ms: summary.latency.itlMs.p99,
    ...(summary.interrupted ? { interrupted: true as const } : {}),
  };
  // The step's server numbers: peaks over its scrapes and the growth of the preemption counter.
  const m = serverMetrics?.memory;
  if (m?.kvCacheUsage) step.kvCacheUsageMax = m.kvCacheUsage.max;
  if (m?.preemptions !== undefined) step.preemptions = m.preemptions;
  if (m?.waiting) step.waitingMax = m.waiting.max;
  if (m?.gpuMemoryUsedBytes) step.gpuMemoryUsedMaxBytes = m.gpuMemoryUsedBytes.max;
  return step;
}

async function firstModel(
  url: string,
  headers: Record<string, string>,
  tls: TlsMaterial | undefined,
  proxy: ProxySettings | undefined,
): Promise<{ model: string; models: unknown }> {
  const { origin, prefix } = splitServerUrl(url);
  let response: Awaited<ReturnType<typeof requestText>>;
  try {
    response = await requestText(`${origin}${prefix}/v1/models`, {
      headers,
      timeoutMs: 10_000,
      ...(tls ? { tls } : {}),
      ...(proxy ? { proxy } : {}),
    });
  } catch (err) {
    // --model-name would not help: every request would fail the same handshake.
    const failure = tlsFailure(err as Error, new URL(origin).hostname);
    if (failure) throw new Error(`could not reach ${url}/v1/models: ${failure.message}`);
    throw err;
  }
  if (response.statusCode === 407) {
    throw new ProxyError(
      `HTTP 407 from the proxy ${proxyFor(url, proxy)?.shown ?? ''}: ${PROXY_CREDENTIALS_FIX}, or ${PROXY_FIX}`,
    );
  }
  const models = response.statusCode === 200 ? (JSON.parse(response.body) as unknown) : undefined;
  const model = models !== undefined ? firstListedModel(models) : undefined;
  if (model === undefined) {
    throw new Error(`could not learn the model from ${url}/v1/models; pass --model-name NAME`);
  }
  // The list's `owned_by` names most engines, where their own endpoints say nothing.
  return { model, models };
}

/**
 * Runs capacity's points: a closed loop over OpenAI-compatible HTTP with server metrics
 * scraped on the run's clock. Not createPointRunner, which would add the prompt-overhead
 * request, client-health.json and the server metrics inside summary.json to every step.
 */
function capacityTarget(c: {
  session: SessionEvents;
  server: Record<string, unknown>;
  url: string;
  model: string;
  headers: Record<string, string>;
  apiKey: string | undefined;
  tls?: TlsMaterial;
  metricsUrl: string;
  proxy?: ProxySettings;
  /** The protocol every step speaks, chosen once for the search. */
  protocol: WireProtocol;
  settings: CapacitySettings;
  stop: AbortSignal;
  /** --reset-cache: empties the server's prefix cache. */
  reset?: () => Promise<void>;
  /** The built-in simulator, started empty for the search. */
  freshSimulator: boolean;
  /** Sets a step's prediction intervals on its summary, before it is saved. */
  predict?: (summary: RunSummary, point: Point) => Promise<void>;
}): Pick<PointRunner, 'run'> {
  const { settings } = c;
  return {
    run: async (point) => {
      const { session } = c;
      if (point.dir !== undefined) openRunDir(point.dir);
      await c.reset?.();
      const info = session.nextPoint({
        ...(point.dir !== undefined ? { dir: point.dir } : {}),
        load: point.load,
        scenario: point.scenario.name,
      });
      const builder = new SummaryBuilder({ load: point.load });
      const cacheState = cacheStateOf({
        reset: c.reset !== undefined,
        freshSimulator: c.freshSimulator && info.index === 0,
      });
      const clock = createRunClock();
      const progress = { sent: 0, finished: 0, failed: 0, inFlight: 0 };
      session.pointStarted({
        point: info,
        manifest: {
          startedAt: clock.originIso,
          server: c.server,
          model: c.model,
          workload: {
            scenario: describeScenario(point.scenario),
            endpoint: settings.endpoint,
            tokenizer: 'words',
          },
          plan: session.info.plan,
          load: point.load,
          scenario: point.scenario.name,
          cacheState,
          windows: {
            warmupRequests: 0,
            measuredRequests: point.requests ?? null,
            measuredDurationS: null,
          },
        },
        progress,
        nowUs: () => clock.nowUs(),
        ...(point.requests !== undefined ? { totalRequests: point.requests } : {}),
      });
      const telemetry = recordTelemetry({
        sources: [{ kind: 'prometheus', url: c.metricsUrl }],
        intervalMs: settings.scrapeIntervalS * 1000,
        nowMs: () => clock.nowUs() / 1000,
        headers: c.headers,
        ...(c.tls ? { tls: c.tls } : {}),
        ...(c.proxy ? { proxy: c.proxy } : {}),
        sink: { write: (snapshot) => session.telemetry({ point: info, snapshot }), close() {} },
      });
      let serverMetrics: ServerMetricsSummary | undefined;
      let result: Awaited<ReturnType<typeof runLoadgen>>;
      try {
        result = await runLoadgen(
          {
            target: {
              backend: openaiBackend,
              baseUrl: c.url,
              endpoint: settings.endpoint,
              model: c.model,
              temperature: 0,
              ignoreEos: settings.ignoreEos,
              continuousUsageStats: false,
              headers: {},
              timeoutMs: settings.timeoutS * 1000,
              ...(c.apiKey ? { apiKey: c.apiKey } : {}),
              ...(c.tls ? { tls: c.tls } : {}),
              ...(c.proxy ? { proxy: c.proxy } : {}),
              protocol: c.protocol,
            },
            load: point.load,
            ...(point.requests !== undefined ? { requests: point.requests } : {}),
            warmupRequests: 0,
            seed: settings.seed,
            nextRequest: point.nextRequest as NonNullable<typeof point.nextRequest>,
            onRecord: (record) => {
              session.record(info, record);
              builder.add(record);
            },
            stopSignal: c.stop,
            clock,
          },
          progress,
        );
      } finally {
        serverMetrics = await telemetry.stop();
      }
      const summary = builder.build({
        clientHealth: result.clientHealth,
        // Its summary.json says so, as a run's does, and the step is judged on nothing.
        interrupted: result.stoppedBy === 'signal',
        unsentRequests: result.unsentRequests,
      });
      if (c.tls?.insecure) summary.warnings.push(warning('tls_unverified', {}));
      summary.cacheState = cacheState;
      if (summary.requests.completed > 0 && !summary.interrupted) {
        await c.predict?.(summary, point);
      }
      // The step's server metrics go into capacity.json's step, not beside its summary.
      await session.pointFinished({
        point: info,
        summary,
        ...(serverMetrics ? { serverMetrics } : {}),
        saveServerMetrics: false,
      });
      return { summary, point: info, ...(serverMetrics ? { serverMetrics } : {}) };
    },
  };
}
