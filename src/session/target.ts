/**
 * The target of a session: where requests go (model discovery, the target config, tokenizer
 * and workload sources), what the server adds to every prompt, and which telemetry to scrape.
 */
import { randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { BACKENDS } from '../backends/index.js';
import { splitServerUrl, withApiKey } from '../backends/request.js';
import type { BackendOptions } from '../backends/types.js';
import { requestText } from '../httpText.js';
import { chooseProtocol, protocolNotice } from '../loadgen/h2.js';
import type { TargetConfig } from '../loadgen/http.js';
import { runLoadgen } from '../loadgen/run.js';
import {
  agentTraceSource,
  envVariable,
  planProxySettings,
  type RunPlan,
  telemetryAsked,
} from '../plan/runPlan.js';
import {
  PROXY_CREDENTIALS_FIX,
  PROXY_ERROR_CODE,
  PROXY_FIX,
  ProxyError,
  type ProxySettings,
  proxyFor,
} from '../proxy.js';
import type { RequestRecord } from '../record.js';
import type { CalibrationWarning } from '../sim/calibrationWarnings.js';
import { servedModelName } from '../sim/describe.js';
import { EngineModel, type EngineModelOptions, resolveEngineConfig } from '../sim/engineModel.js';
import type { EngineCalibration } from '../sim/options.js';
import type { OutsideValidation } from '../sim/validatedRange.js';
import type { ServerEnvironment } from '../telemetry/environment.js';
import { findOnPath, NVIDIA_SMI } from '../telemetry/gpu.js';
import { probeMetrics, type TelemetrySource } from '../telemetry/scraper.js';
import { type TlsMaterial, tlsConnectOptions, tlsFailure } from '../tls.js';
import { createBlockPrompts } from '../workload/blockPrompts.js';
import { MAX_PROMPT_SALT, promptStreamSeed } from '../workload/promptSalt.js';
import { createPromptFactory, type PromptFactory } from '../workload/prompts.js';
import type { Scenario } from '../workload/scenarios.js';
import {
  type CreateTokenizerOptions,
  createTokenizer,
  type Tokenizer,
} from '../workload/tokenizer.js';
import { TRACE_BLOCK_TOKENS } from '../workload/trace.js';
import type { WorkloadSource } from '../workload/workload.js';
import { resetTargetCache } from './cacheReset.js';
import { askServerEngine } from './serverEngine.js';
import type { SimulatorProcess } from './simulator.js';

/**
 * How the session says what the user should know while it works (the server's prompt
 * overhead, a default metrics scrape, ...): one line each; the command prints them.
 */
export type Notify = (message: string) => void;

/** A run's options, validated: the plan, the simulator's engine, or every problem found. */
export interface PreparedRun {
  plan?: RunPlan;
  problems: string[];
  warnings: string[];
  /** What the command says before the run that is not a warning (a trace's window, its implied hit rate). */
  notices: string[];
  /** The built-in simulator's engine options (no --url). */
  engine?: EngineModelOptions;
  /** Engine flags as given, to pass to the simulator process. */
  engineFlags: string[];
  /** What the --calibration file's fit warned of, which the results record (manifest.server). */
  calibrationWarnings?: CalibrationWarning[];
  /** The built-in simulator's own notices (outside its validated range), for manifest.server. */
  simulatorWarnings?: OutsideValidation[];
  /** The --calibration file the engine was built on: a run on it predicts, with intervals. */
  calibrated?: EngineCalibration;
  simModel?: string;
  simulate: boolean;
  /** --time-scale, read by parseFlagNumber in prepareRun. */
  timeScale?: number;
  json: boolean;
}

/** Where and how a plan's requests go. */
export function targetConfig(
  plan: RunPlan,
  url: string,
  model: string,
  apiKey: string | undefined,
): TargetConfig {
  return {
    ...requestOptions(plan, model),
    backend: BACKENDS[plan.backend],
    baseUrl: url,
    headers: plan.headers,
    timeoutMs: plan.timeoutS * 1000,
    ...(apiKey ? { apiKey } : {}),
    ...(plan.tls?.material ? { tls: plan.tls.material } : {}),
    ...(plan.http2 ? { http2: plan.http2 } : {}),
    ...proxyOf(plan),
  };
}

/** The plan's proxy settings, as an optional field: read from the environment now. */
function proxyOf(plan: RunPlan): { proxy?: ProxySettings } {
  const proxy = planProxySettings(plan, process.env);
  return proxy ? { proxy } : {};
}

/** How a plan's requests are shaped, whatever they are sent to (virtual time too). */
export function requestOptions(plan: RunPlan, model: string): BackendOptions {
  return {
    endpoint: plan.endpoint,
    model,
    temperature: plan.temperature,
    ignoreEos: plan.ignoreEos,
    continuousUsageStats: plan.continuousUsageStats,
    ...(plan.extraBody ? { extraBody: plan.extraBody } : {}),
    ...(plan.maxAnswerMb !== undefined
      ? { maxAnswerBytes: Math.round(plan.maxAnswerMb * 2 ** 20) }
      : {}),
  };
}

/** How a plan's tokenizer is made (and the server's reached, for `--tokenizer server`). */
export function tokenizerOptions(
  plan: RunPlan,
  url: string,
  model: string,
  apiKey: string | undefined,
): CreateTokenizerOptions {
  return {
    server: {
      url,
      model,
      backend: plan.backend,
      headers: withApiKey(plan.headers, apiKey),
      ...(plan.tls?.material ? { tls: plan.tls.material } : {}),
      ...proxyOf(plan),
    },
    builtInSimulator: plan.url === undefined,
  };
}

/**
 * What each worker thread builds a scenario's workload from (request `id` is then the same in
 * all of them): the tokenizer and how to reach the server's, the seed and the point's prompt
 * salt, the measured prompt overhead, and the trace or dataset.
 */
export function workloadSource(
  plan: RunPlan,
  scenario: Scenario,
  c: {
    url: string;
    model: string;
    apiKey: string | undefined;
    promptOverheadTokens: number;
    promptSalt: number;
  },
): WorkloadSource {
  return {
    scenario,
    tokenizer: plan.tokenizer,
    tokenizerOptions: tokenizerOptions(plan, c.url, c.model, c.apiKey),
    seed: plan.seed,
    promptSalt: c.promptSalt,
    promptOverheadTokens: c.promptOverheadTokens,
    ...(plan.trace ? { trace: plan.trace.entries } : {}),
    ...(plan.trace?.speed !== undefined ? { traceSpeed: plan.trace.speed } : {}),
    ...(plan.trace?.blockTokens !== undefined ? { traceBlockTokens: plan.trace.blockTokens } : {}),
    ...agentTraceSource(plan),
    ...(plan.dataset ? { dataset: plan.dataset.data } : {}),
  };
}

/**
 * Tokens the server adds to every prompt (BOS, the chat template): one request with a prompt
 * of known length, before the run. Subtracted from every prompt so the server counts exactly
 * what was asked for; skipped when the tokenizer is approximate or the server reports no usage.
 */
export async function measurePromptOverhead(
  target: TargetConfig,
  prompts: PromptFactory,
  onNotice: Notify,
): Promise<{ tokens: number; note?: string }> {
  if (!prompts.tokenizer.exact) return { tokens: 0, note: 'not measured: approximate tokenizer' };
  const probeTokens = 32;
  const prompt = prompts.make(-1, probeTokens);
  let record: RequestRecord | undefined;
  await runLoadgen({
    target: { ...target, ignoreEos: false },
    load: { mode: 'closed', concurrency: 1 },
    requests: 1,
    warmupRequests: 0,
    seed: 0,
    nextRequest: () => ({ prompt, requestedInputTokens: probeTokens, requestedOutputTokens: 1 }),
    onRecord: (r) => {
      record = r;
    },
  });
  if (!record || record.error || record.inputTokens === undefined) {
    const why = record?.error ? `the probe failed (${record.error.message})` : 'no usage reported';
    return { tokens: 0, note: `not measured: ${why}` };
  }
  const tokens = Math.max(0, record.inputTokens - probeTokens);
  if (tokens > 0) {
    onNotice(
      `the server adds ${tokens} tokens to every ${target.endpoint} prompt (BOS, template); prompts are shortened by as much`,
    );
  }
  return { tokens };
}

export function telemetrySources(telemetry: NonNullable<RunPlan['telemetry']>): TelemetrySource[] {
  const sources: TelemetrySource[] = [];
  if (telemetry.metricsUrl) sources.push({ kind: 'prometheus', url: telemetry.metricsUrl });
  if (telemetry.slotsUrl) sources.push({ kind: 'llamacpp-slots', url: telemetry.slotsUrl });
  if (telemetry.dcgmUrl) sources.push({ kind: 'dcgm', url: telemetry.dcgmUrl });
  if (telemetry.gpuMemory) sources.push({ kind: 'nvidia-smi' });
  if (telemetry.serverPid !== undefined)
    sources.push({ kind: 'process', pid: telemetry.serverPid });
  return sources;
}

/** Local sources that cannot work here, said before anything is sent. */
export function localSourceProblems(telemetry: NonNullable<RunPlan['telemetry']>): string[] {
  const problems: string[] = [];
  if (telemetry.gpuMemory && findOnPath(NVIDIA_SMI.file) === undefined) {
    problems.push(
      '--gpu-memory polls nvidia-smi, which is not on PATH (no NVIDIA driver on this machine?); for the GPUs of another machine use --dcgm-url (for example --dcgm-url http://gpu-host:9400/metrics)',
    );
  }
  const pid = telemetry.serverPid;
  if (pid !== undefined && !existsSync(`/proc/${pid}/status`)) {
    problems.push(
      existsSync('/proc/self/status')
        ? `--server-pid ${pid}: no such process on this machine (for example --server-pid $(pgrep -f "vllm serve"))`
        : `--server-pid reads /proc/<pid>/status, which this system (${process.platform}) does not have; it works on Linux`,
    );
  }
  return problems;
}

/**
 * With --url and no choice made about metrics: asks `<url>/metrics` once whether it serves
 * Prometheus text, and scrapes it during the run if so (saying so through `onNotice`);
 * otherwise the run goes on without it, silently.
 */
export async function probeDefaultMetrics(plan: RunPlan, onNotice: Notify): Promise<void> {
  const telemetry = plan.telemetry;
  if (telemetry?.metrics !== 'default' || telemetry.metricsUrl === undefined) return;
  const apiKey = plan.apiKeyEnv ? envVariable(process.env, plan.apiKeyEnv) : undefined;
  const probe = await probeMetrics(
    telemetry.metricsUrl,
    withApiKey(plan.headers, apiKey),
    undefined,
    plan.tls?.material,
    proxyOf(plan).proxy,
  );
  if (probe.ok) {
    onNotice(
      `scraping ${telemetry.metricsUrl} during the run (${probe.series} series; --no-server-metrics turns this off)`,
    );
    return;
  }
  delete telemetry.metrics;
  delete telemetry.metricsUrl;
  if (!telemetryAsked(telemetry)) delete plan.telemetry;
}

/** The model to request: --model, else the first the server lists. Throws when neither. */
export async function discoverModel(
  plan: RunPlan,
  url: string,
  apiKey: string | undefined,
): Promise<{ model: string; models: unknown }> {
  const backend = BACKENDS[plan.backend];
  const asked = backend.models
    ? await fetchModels(url, backend.models.path, apiKey, plan.headers, {
        tls: plan.tls?.material,
        proxy: proxyOf(plan).proxy,
      })
    : undefined;
  const models = asked?.models;
  const model = plan.model ?? (models !== undefined ? backend.models?.first(models) : undefined);
  // The proxy is in the way: --model would not get past it either.
  if (model === undefined && asked?.proxy !== undefined) throw new ProxyError(asked.proxy);
  if (model === undefined) {
    const where = `${url}${backend.models?.path ?? ''}`;
    // --model would not help: every request would fail the same handshake.
    if (asked?.tls) throw new Error(`could not reach ${where}: ${asked.tls}`);
    throw new Error(
      `could not learn the model from ${where} (${describeModelsError(models)}); pass --model NAME`,
    );
  }
  return { model, models };
}

async function fetchModels(
  url: string,
  path: string,
  apiKey: string | undefined,
  headers: Record<string, string>,
  via: { tls: TlsMaterial | undefined; proxy: ProxySettings | undefined },
): Promise<{ models: unknown; tls?: string; proxy?: string }> {
  const { origin, prefix } = splitServerUrl(url);
  try {
    const response = await requestText(`${origin}${prefix}${path}`, {
      headers: withApiKey(headers, apiKey),
      timeoutMs: 10_000,
      ...(via.tls ? { tls: via.tls } : {}),
      ...(via.proxy ? { proxy: via.proxy } : {}),
    });
    if (response.statusCode === 407) {
      const route = proxyFor(url, via.proxy);
      const error = `HTTP 407 from the proxy${route ? ` ${route.shown}` : ''}: ${PROXY_CREDENTIALS_FIX}, or ${PROXY_FIX}`;
      return { models: { error }, proxy: error };
    }
    if (response.statusCode !== 200) return { models: { error: `HTTP ${response.statusCode}` } };
    return { models: JSON.parse(response.body) as unknown };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === PROXY_ERROR_CODE) {
      const error = (err as Error).message;
      return { models: { error }, proxy: error };
    }
    const message = code ? `${code}: ${(err as Error).message}` : (err as Error).message;
    const failure = tlsFailure(err as Error, new URL(origin).hostname);
    return { models: { error: message }, ...(failure ? { tls: failure.message } : {}) };
  }
}

/** A compact UTC timestamp for default results directories, e.g. 20261129T204932Z. */
export function utcStamp(): string {
  return new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

function describeModelsError(models: unknown): string {
  const error = (models as { error?: unknown } | undefined)?.error;
  return typeof error === 'string' ? error : 'no models listed';
}

/**
 * A fresh prompt salt for a run, sweep, probe or capacity search that did not fix one (never 0,
 * which is the unsalted stream of runs made before salts): see workload/promptSalt.ts.
 */
export function randomPromptSalt(): number {
  return randomInt(1, MAX_PROMPT_SALT + 1);
}

/** A server to measure: one at --url, or the built-in simulator in a process of its own. */
export interface LiveTarget {
  kind: 'live';
  plan: RunPlan;
  url: string;
  model: string;
  /** What the server listed (GET /v1/models), for the manifest. */
  models: unknown;
  /** What the server says it is (its engine and version), asked once (src/session/serverEngine.ts). */
  environment: ServerEnvironment;
  /** The proxy the requests go through, as `host:port` (never its credentials). */
  proxy?: string;
  apiKey: string | undefined;
  config: TargetConfig;
  tokenizer: Tokenizer;
  /** Tokens the server adds to every prompt (measurePromptOverhead). */
  promptOverhead: { tokens: number; note?: string };
  /** The built-in simulator's one-line description, when it is the target. */
  simulator?: string;
  /** The built-in simulator's engine flags (`--model`, `--gpu`, ...), as given. */
  simulatorArgs?: string[];
  /** What its --calibration file's fit warned of. */
  calibrationWarnings?: CalibrationWarning[];
  /** The simulator's own notices (outside its validated range). */
  simulatorWarnings?: OutsideValidation[];
  /** The --calibration file its engine was built on (prediction intervals). */
  calibrated?: EngineCalibration;
  /** The built-in simulator's engine, where a --calibration's intervals replay it. */
  engine?: EngineModelOptions;
  /**
   * The built-in simulator's KV block size (its personality's: 16, SGLang's 1, TensorRT-LLM's
   * 64, ...), which its `/version` (`infergauge-sim`) does not tell.
   */
  simulatorBlockTokens?: number;
  close(): Promise<void>;
}

/** The simulated engine in virtual time (--simulate): no HTTP, no waiting. */
export interface VirtualTarget {
  kind: 'virtual';
  plan: RunPlan;
  engine: EngineModelOptions;
  model: string;
  /** Words: the simulator counts one token per word, so this is exact. */
  tokenizer: Tokenizer;
  promptOverhead: { tokens: number; note?: string };
  /** The engine flags (`--model`, `--gpu`, ...), as given. */
  simulatorArgs: string[];
  /** What its --calibration file's fit warned of. */
  calibrationWarnings?: CalibrationWarning[];
  /** The simulator's own notices (outside its validated range). */
  simulatorWarnings?: OutsideValidation[];
  /** The --calibration file its engine was built on (prediction intervals). */
  calibrated?: EngineCalibration;
  close(): Promise<void>;
}

export type Target = LiveTarget | VirtualTarget;

/**
 * Gets a plan's target ready: starts the built-in simulator (no --url), learns the model,
 * makes the tokenizer and measures the server's prompt overhead. `probeMetrics`: with --url,
 * first ask whether the server's /metrics can be scraped by default (as `run` does).
 */
export async function openTarget(
  prepared: PreparedRun & { plan: RunPlan },
  o: { onNotice: Notify; probeMetrics?: boolean },
): Promise<Target> {
  const { plan } = prepared;
  // Drawn as the run starts, not when the plan is read: a plan printed and run twice must not
  // send the same prompts twice. The manifest's plan records it.
  plan.promptSalt ??= randomPromptSalt();
  // Recorded in the manifest, so that `infergauge calibrate` knows the engine it ran on.
  const simulatorArgs = [
    ...(prepared.simModel !== undefined ? ['--model', prepared.simModel] : []),
    ...prepared.engineFlags,
  ];
  const carried = {
    ...(prepared.calibrationWarnings?.length
      ? { calibrationWarnings: prepared.calibrationWarnings }
      : {}),
    ...(prepared.simulatorWarnings?.length
      ? { simulatorWarnings: prepared.simulatorWarnings }
      : {}),
    ...(prepared.calibrated ? { calibrated: prepared.calibrated } : {}),
  };
  if (prepared.simulate && prepared.engine) {
    const engine = prepared.engine;
    return {
      kind: 'virtual',
      plan,
      engine,
      model: servedModelName(new EngineModel(engine).config.model.id),
      tokenizer: await createTokenizer('words', { builtInSimulator: true }),
      promptOverhead: { tokens: 0 },
      simulatorArgs,
      ...carried,
      close: async () => {},
    };
  }
  let sim: SimulatorProcess | undefined;
  if (plan.url === undefined) {
    // The simulator's server code is loaded only to start it (no --url).
    const { spawnSimulator } = await import('./simulator.js');
    sim = await spawnSimulator([
      ...simulatorArgs,
      ...(prepared.timeScale !== undefined ? ['--time-scale', String(prepared.timeScale)] : []),
    ]);
    // The simulator serves /metrics: scrape it like any vLLM server (by default too).
    if (plan.telemetry?.metrics) plan.telemetry.metricsUrl ??= `${sim.url}/metrics`;
  }
  try {
    const url = sim?.url ?? (plan.url as string);
    // Said once, first: a proxy adds its own latency to every number that follows.
    const proxy = proxyFor(url, proxyOf(plan).proxy)?.shown;
    if (proxy) {
      o.onNotice(
        `via proxy ${proxy} (${plan.proxy ? '--proxy' : url.startsWith('https:') ? 'HTTPS_PROXY' : 'HTTP_PROXY'}; --no-proxy or NO_PROXY bypasses it)`,
      );
    }
    if (!sim && o.probeMetrics) await probeDefaultMetrics(plan, o.onNotice);
    const apiKey = plan.apiKeyEnv ? envVariable(process.env, plan.apiKeyEnv) : undefined;
    const { model, models } = await discoverModel(plan, url, apiKey);
    // Asked while the protocol, tokenizer and prompt overhead are worked out; it never throws.
    const asking = askServerEngine(url, {
      headers: plan.headers,
      apiKey,
      tls: plan.tls?.material,
      proxy: proxyOf(plan).proxy,
      models,
    });
    const config = targetConfig(plan, url, model, apiKey);
    // Once per run, so that every point, worker and shard speaks the same protocol; through a
    // proxy, asked inside its tunnel, as the requests will go.
    config.protocol = await chooseProtocol(
      splitServerUrl(url).origin,
      config.http2 ?? 'auto',
      tlsConnectOptions(config.tls),
      proxyFor(url, proxyOf(plan).proxy),
    );
    if (config.protocol === 'h2' || url.startsWith('https:')) {
      o.onNotice(protocolNotice(config.http2 ?? 'auto', config.protocol));
    }
    const tokenizer = await createTokenizer(
      plan.tokenizer,
      tokenizerOptions(plan, url, model, apiKey),
    );
    if (!tokenizer.exact) {
      o.onNotice(
        `prompt lengths are approximate (${tokenizer.name}): pass --tokenizer server, o200k_base, cl100k_base or a tokenizer.json for exact counts`,
      );
    }
    const prompts = await createPromptFactory(tokenizer, {
      seed: promptStreamSeed(plan.seed, plan.promptSalt),
    });
    // A server whose cache cannot be emptied is refused before anything is sent to it.
    if (plan.resetCache) {
      await resetTargetCache({ url, environment: await asking, plan, apiKey, config });
    }
    const promptOverhead = await measurePromptOverhead(config, prompts, o.onNotice);
    if (plan.trace?.entries.some((e) => e.hashIds !== undefined)) {
      // Once, before any point: a tokenizer that cannot keep the trace's block boundaries
      // refuses the run here (exit 2), not in each worker as it builds its workload.
      await createBlockPrompts({
        prompts,
        blockTokens: plan.trace.blockTokens ?? TRACE_BLOCK_TOKENS,
        overheadTokens: promptOverhead.tokens,
      }).verify(plan.trace.entries);
    }
    const environment = await asking;
    return {
      kind: 'live',
      plan,
      url,
      model,
      models,
      environment,
      ...(proxy ? { proxy } : {}),
      apiKey,
      config,
      tokenizer,
      promptOverhead,
      ...(sim ? { simulator: sim.banner, simulatorArgs, ...carried } : {}),
      // Its engine, for the virtual replays behind a calibrated run's prediction intervals.
      ...(sim && prepared.engine && prepared.calibrated ? { engine: prepared.engine } : {}),
      ...(sim && prepared.engine
        ? { simulatorBlockTokens: resolveEngineConfig(prepared.engine).blockSize }
        : {}),
      close: async () => {
        await sim?.stop();
      },
    };
  } catch (err) {
    await sim?.stop();
    throw err;
  }
}
