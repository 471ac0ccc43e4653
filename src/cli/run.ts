import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Command, Option } from '@commander-js/extra-typings';
import { logUpdateStderr } from 'log-update';
import { request } from 'undici';
import { BACKEND_NAMES, BACKENDS } from '../backends/index.js';
import { splitServerUrl, withApiKey } from '../backends/request.js';
import { createRunClock, type RunClock } from '../engine/clock.js';
import type { TargetConfig } from '../engine/http.js';
import { JsonlWriter } from '../engine/records.js';
import { type EngineProgress, runEngine } from '../engine/run.js';
import { type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import {
  PlanError,
  parseRunPlan,
  RUN_DEFAULTS,
  type RunPlan,
  type RunPlanInput,
  redactPlan,
  telemetryAsked,
} from '../plan/runPlan.js';
import type { RequestRecord } from '../record.js';
import { renderTerminalSummary } from '../report/terminal.js';
import { EngineModel, type EngineModelOptions } from '../sim/engineModel.js';
import { simulateRun } from '../sim/virtual.js';
import { findOnPath, NVIDIA_SMI } from '../telemetry/gpu.js';
import { probeMetrics, startScraper, type TelemetrySource } from '../telemetry/scraper.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import { type ServerMetricsSummary, summarizeTelemetry } from '../telemetry/summary.js';
import { VERSION } from '../version.js';
import { createSyntheticWorkload } from '../workload/synthetic.js';
import {
  addEngineFlags,
  describeEngine,
  engineFlagArgs,
  engineFromFlags,
  isEngineFlag,
} from './engineFlags.js';
import { type SimulatorProcess, spawnSimulator } from './simProcess.js';

export const EXIT = { ok: 0, failure: 1, invalidOptions: 2, interrupted: 130 } as const;

const d = RUN_DEFAULTS;

export function runCommand(): Command {
  const command = new Command('run')
    .description(
      'Benchmark an OpenAI-compatible streaming endpoint (without --url: the built-in simulator).',
    )
    .option(
      '--url <url>',
      'server base URL, e.g. http://127.0.0.1:8000 (default: start the built-in simulator)',
    )
    .option(
      '--model <name>',
      'model name (default: the first the server lists, e.g. GET /v1/models)',
    )
    .option(
      '--backend <name>',
      `wire protocol: ${BACKEND_NAMES.join(', ')} (default: openai, the OpenAI-compatible API)`,
    )
    .option(
      '--endpoint <kind>',
      `chat (/v1/chat/completions) or completions (/v1/completions) (default: ${d.endpoint})`,
    )
    .option('--concurrency <n>', `closed loop: requests kept in flight (default: ${d.concurrency})`)
    .option('--rate <r>', 'open loop: requests per second, instead of --concurrency')
    .option('--arrival <kind>', 'open loop arrivals: poisson or constant (default: poisson)')
    .option(
      '--max-concurrency <n>',
      'open loop: cap on requests in flight; the rest wait in the client',
    )
    .option(
      '--requests <n>',
      `measured requests to send (default: ${d.requests}, or unlimited with --duration)`,
    )
    .option(
      '--duration <s>',
      'measurement window in seconds (stops sending after it; in-flight requests finish)',
    )
    .option('--warmup <n>', 'requests sent first and not counted (default: 0)')
    .option('--input-tokens <n>', `prompt length in tokens (default: ${d.inputTokens})`)
    .option('--output-tokens <n>', `max_tokens of each request (default: ${d.outputTokens})`)
    .option('--ignore-eos', 'ask the server for exactly --output-tokens (vLLM, SGLang: ignore_eos)')
    .option(
      '--continuous-usage-stats',
      'ask for usage on every event (vLLM) to count tokens per event exactly',
    )
    .option('--temperature <t>', `sampling temperature (default: ${d.temperature})`)
    .option(
      '--timeout <s>',
      `per-request limit in seconds, headers to last token (default: ${d.timeoutS})`,
    )
    .option(
      '--grace <s>',
      `after Ctrl-C, seconds in-flight requests may finish before they are cancelled (default: ${d.graceS})`,
    )
    .option('--slo <list>', "per-request SLOs for goodput, e.g. 'ttft<500,tpot<50,e2e<10000' (ms)")
    .option('--seed <n>', `seed for prompts and arrivals (default: ${d.seed})`)
    .option(
      '--api-key-env <var>',
      'environment variable holding the API key (default: OPENAI_API_KEY when set)',
    )
    .addOption(
      new Option('--header <header>', "extra request header 'Name: value' (repeatable)").argParser(
        (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
      ),
    )
    .option('--extra-body <json>', 'JSON object merged into every request body')
    .option('--out <dir>', 'results directory (default: infergauge-results/<UTC time>-<label>/)')
    .option('--label <name>', 'label for the default results directory (default: sim or run)')
    .option(
      '--server-metrics [url]',
      "scrape the server's Prometheus metrics during the run into telemetry.jsonl (default: on when <url>/metrics answers, and for the built-in simulator)",
    )
    .option('--metrics-url <url>', 'the same as --server-metrics URL')
    .option('--no-server-metrics', "do not probe or scrape the server's /metrics")
    .option('--slots', "also read llama.cpp's GET /slots during the run")
    .option(
      '--dcgm-url <url>',
      "also scrape a dcgm-exporter (GPU memory of the server's machine), e.g. http://gpu-host:9400/metrics",
    )
    .option('--gpu-memory', 'also poll the local nvidia-smi for GPU memory')
    .option(
      '--server-pid <pid>',
      "also read a local server process's memory (RSS and peak) from /proc/<pid>/status",
    )
    .option('--scrape-interval <s>', 'seconds between scrapes (default: 1)')
    .option('--json', 'print the summary JSON to stdout instead of the table')
    .option(
      '--simulate',
      'virtual time: run the workload through the simulated engine without HTTP or waiting',
    )
    .option(
      '--time-scale <x>',
      'built-in simulator: real seconds per simulated second (default: 1)',
    );
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>);
  return command.action(async (options) => {
    process.exitCode = await run(options as RunOptions);
  });
}

type RunOptions = RunPlanInput & {
  json?: boolean;
  simulate?: boolean;
  timeScale?: string;
} & Record<string, unknown>;

async function run(options: RunOptions): Promise<number> {
  const { json, simulate, timeScale, ...rest } = options;
  const engineFlags = engineFlagArgs(rest);
  const input: RunPlanInput = Object.fromEntries(
    Object.entries(rest).filter(([key]) => !isEngineFlag(key)),
  );
  const builtIn = input.url === undefined;
  const problems: string[] = [];
  // Without --url, --model names the simulated model (a preset or a config.json).
  const simModel = builtIn ? input.model : undefined;
  if (builtIn) delete input.model;
  let plan: RunPlan | undefined;
  try {
    plan = parseRunPlan(input, process.env);
  } catch (err) {
    if (!(err instanceof PlanError)) throw err;
    problems.push(...err.problems);
  }
  let simulated: ReturnType<typeof engineFromFlags> | undefined;
  if (!builtIn) {
    if (simulate) problems.push('--simulate runs without a server: drop --url');
    if (engineFlags.length > 0 || timeScale !== undefined) {
      problems.push(
        `${[...engineFlags.filter((a) => a.startsWith('--')), ...(timeScale !== undefined ? ['--time-scale'] : [])].join(', ')} apply only to the built-in simulator (without --url)`,
      );
    }
  } else {
    simulated = engineFromFlags(simModel, rest);
    problems.push(...simulated.problems);
    if (timeScale !== undefined && !(Number(timeScale) > 0)) {
      problems.push(`--time-scale must be a number above 0 (got "${timeScale}")`);
    }
    if (simulate && timeScale !== undefined) {
      problems.push('--time-scale applies to the real-time simulator, not to --simulate');
    }
    if (simulate && plan && telemetryAsked(plan.telemetry)) {
      problems.push(
        '--server-metrics, --metrics-url, --slots, --dcgm-url, --gpu-memory and --server-pid need a running server; --simulate has none',
      );
    }
    // The default scrape of the simulator's /metrics: there is no server to scrape.
    if (simulate && plan) delete plan.telemetry;
  }
  if (plan?.telemetry) problems.push(...localSourceProblems(plan.telemetry));
  if (problems.length > 0 || !plan) {
    process.stderr.write(
      `infergauge run: invalid options\n${problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return EXIT.invalidOptions;
  }
  for (const w of simulated?.warnings ?? [])
    process.stderr.write(`infergauge run: warning: ${w}\n`);
  if (simulate && simulated?.engine) return simulateVirtual(plan, simulated.engine, json === true);

  let sim: SimulatorProcess | undefined;
  try {
    if (builtIn) {
      sim = await spawnSimulator([
        ...(simModel !== undefined ? ['--model', simModel] : []),
        ...(timeScale !== undefined ? ['--time-scale', timeScale] : []),
        ...engineFlags,
      ]);
      // The simulator serves /metrics: scrape it like any vLLM server (by default too).
      if (plan.telemetry?.metrics) plan.telemetry.metricsUrl ??= `${sim.url}/metrics`;
    } else await probeDefaultMetrics(plan);
    return await benchmark(plan, sim?.url ?? (plan.url as string), json === true, sim?.banner);
  } catch (err) {
    process.stderr.write(`infergauge run: ${(err as Error).message}\n`);
    return EXIT.failure;
  } finally {
    await sim?.stop();
  }
}

async function benchmark(
  plan: RunPlan,
  url: string,
  json: boolean,
  simulator?: string,
): Promise<number> {
  const apiKey = plan.apiKeyEnv ? process.env[plan.apiKeyEnv] : undefined;
  const backend = BACKENDS[plan.backend];
  const models = backend.models
    ? await fetchModels(url, backend.models.path, apiKey, plan.headers)
    : undefined;
  const model = plan.model ?? (models !== undefined ? backend.models?.first(models) : undefined);
  if (model === undefined) {
    throw new Error(
      `could not learn the model from ${url}${backend.models?.path ?? ''} (${describeModelsError(models)}); pass --model NAME`,
    );
  }
  const { outDir, clock } = openRunDir(
    plan,
    {
      url,
      builtInSimulator: plan.url === undefined,
      ...(simulator ? { simulator } : {}),
      models,
    },
    model,
  );

  const target: TargetConfig = {
    backend,
    baseUrl: url,
    endpoint: plan.endpoint,
    model,
    temperature: plan.temperature,
    ignoreEos: plan.ignoreEos,
    continuousUsageStats: plan.continuousUsageStats,
    headers: plan.headers,
    timeoutMs: plan.timeoutS * 1000,
    ...(apiKey ? { apiKey } : {}),
    ...(plan.extraBody ? { extraBody: plan.extraBody } : {}),
  };
  const writer = new JsonlWriter<RequestRecord>(join(outDir, 'records.jsonl'));
  const builder = new SummaryBuilder({
    load: plan.load,
    ...(plan.slo ? { slo: plan.slo } : {}),
  });
  const stop = new AbortController();
  const cancel = new AbortController();
  const progress: EngineProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 };
  const live = process.stderr.isTTY && !json;
  const draw = live
    ? setInterval(() => logUpdateStderr(progressLine(progress, clock.nowUs(), plan)), 250)
    : undefined;
  let graceTimer: NodeJS.Timeout | undefined;
  const onSignal = () => {
    if (stop.signal.aborted) {
      cancel.abort();
      return;
    }
    stop.abort();
    process.stderr.write(
      `\ninfergauge run: stopping; ${progress.inFlight} requests in flight get ${plan.graceS} s to finish (Ctrl-C again cancels them)\n`,
    );
    graceTimer = setTimeout(() => cancel.abort(), plan.graceS * 1000);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const snapshots: TelemetrySnapshot[] = [];
  const telemetryWriter = plan.telemetry
    ? new JsonlWriter<TelemetrySnapshot>(join(outDir, 'telemetry.jsonl'))
    : undefined;
  const scraper = plan.telemetry
    ? startScraper({
        sources: telemetrySources(plan.telemetry),
        intervalMs: plan.telemetry.intervalS * 1000,
        nowMs: () => clock.nowUs() / 1000,
        headers: withApiKey(plan.headers, apiKey),
        onSnapshot: (snapshot) => {
          snapshots.push(snapshot);
          telemetryWriter?.write(snapshot);
        },
      })
    : undefined;
  let result: Awaited<ReturnType<typeof runEngine>>;
  try {
    result = await runEngine(
      {
        target,
        load: plan.load,
        ...(plan.requests !== undefined ? { requests: plan.requests } : {}),
        ...(plan.durationS !== undefined ? { durationS: plan.durationS } : {}),
        warmupRequests: plan.warmupRequests,
        seed: plan.seed,
        nextRequest: createSyntheticWorkload({
          inputTokens: plan.inputTokens,
          outputTokens: plan.outputTokens,
          seed: plan.seed,
        }),
        onRecord: (record) => {
          writer.write(record);
          builder.add(record);
        },
        stopSignal: stop.signal,
        cancelSignal: cancel.signal,
        clock,
      },
      progress,
    );
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    clearTimeout(graceTimer);
    if (draw) {
      clearInterval(draw);
      logUpdateStderr.clear();
    }
    writer.close();
    await scraper?.stop();
    telemetryWriter?.close();
  }
  const interrupted = result.stoppedBy === 'signal';
  const summary = builder.build({
    clientHealth: result.clientHealth,
    interrupted,
    unsentRequests: result.unsentRequests,
  });
  const serverMetrics = plan.telemetry ? summarizeTelemetry(snapshots) : undefined;
  // The server's warnings (KV cache full, preemptions) stand with the run's.
  if (serverMetrics) summary.warnings.push(...serverMetrics.warnings);
  writeResults(plan, outDir, summary, json, {
    model,
    ...(serverMetrics ? { serverMetrics } : {}),
    ...(simulator ? { simulator } : {}),
  });
  return interrupted ? EXIT.interrupted : EXIT.ok;
}

/** Creates the run directory and writes its manifest; refuses to overwrite a finished run. */
function openRunDir(
  plan: RunPlan,
  server: Record<string, unknown>,
  model: string,
): { outDir: string; clock: RunClock } {
  const outDir = plan.out ?? join('infergauge-results', `${utcStamp()}-${plan.label}`);
  if (existsSync(join(outDir, 'records.jsonl'))) {
    throw new Error(`${outDir} already holds a run (records.jsonl); choose another --out`);
  }
  mkdirSync(outDir, { recursive: true });
  const clock = createRunClock();
  writeJson(join(outDir, 'manifest.json'), {
    schemaVersion: 1,
    tool: { name: 'infergauge', version: VERSION },
    startedAt: clock.originIso,
    node: process.version,
    host: {
      hostname: hostname(),
      platform: process.platform,
      arch: process.arch,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model,
    },
    server,
    model,
    plan: redactPlan(plan),
    windows: {
      warmupRequests: plan.warmupRequests,
      measuredRequests: plan.requests ?? null,
      measuredDurationS: plan.durationS ?? null,
      note: 'warm-up requests are recorded with phase "warmup" and not counted; no request is sent after the measurement window closes',
    },
  });
  return { outDir, clock };
}

/** Writes summary.json and prints the summary (table, or JSON with --json). */
function writeResults(
  plan: RunPlan,
  outDir: string,
  summary: RunSummary,
  json: boolean,
  extra: { model: string; serverMetrics?: ServerMetricsSummary; simulator?: string },
): void {
  const saved = extra.serverMetrics ? { ...summary, serverMetrics: extra.serverMetrics } : summary;
  writeJson(join(outDir, 'summary.json'), saved);
  if (json) {
    process.stdout.write(`${JSON.stringify(saved, null, 2)}\n`);
    return;
  }
  process.stdout.write(
    `${renderTerminalSummary(summary, {
      color: process.stdout.isTTY === true,
      model: extra.model,
      endpoint: plan.backend === 'openai' ? plan.endpoint : `${plan.backend} native`,
      outDir,
      ...(extra.serverMetrics ? { serverMetrics: extra.serverMetrics } : {}),
      ...(extra.simulator ? { simulator: extra.simulator } : {}),
    })}\n`,
  );
}

/**
 * `--simulate`: the whole workload through the engine model in virtual time. Writes the same
 * records.jsonl, summary.json and manifest as a run against the HTTP simulator.
 */
function simulateVirtual(plan: RunPlan, options: EngineModelOptions, json: boolean): number {
  let engine: EngineModel;
  try {
    engine = new EngineModel(options);
  } catch (err) {
    process.stderr.write(
      `infergauge run: the simulated engine cannot start: ${(err as Error).message}\n`,
    );
    return EXIT.failure;
  }
  const model = `sim-${engine.config.model.id.replace(/[^A-Za-z0-9._-]+/g, '-')}`;
  const simulator = `${describeEngine(options)}, KV cache ${engine.memory.numGpuBlocks} blocks (${engine.memory.kvTokens} tokens); virtual time`;
  let outDir: string;
  try {
    ({ outDir } = openRunDir(plan, { virtualTime: true, simulator, memory: engine.memory }, model));
  } catch (err) {
    process.stderr.write(`infergauge run: ${(err as Error).message}\n`);
    return EXIT.failure;
  }
  const writer = new JsonlWriter<RequestRecord>(join(outDir, 'records.jsonl'));
  const builder = new SummaryBuilder({ load: plan.load, ...(plan.slo ? { slo: plan.slo } : {}) });
  const startedMs = performance.now();
  let result: ReturnType<typeof simulateRun>;
  try {
    result = simulateRun({
      engine,
      load: plan.load,
      ...(plan.requests !== undefined ? { requests: plan.requests } : {}),
      ...(plan.durationS !== undefined ? { durationS: plan.durationS } : {}),
      warmupRequests: plan.warmupRequests,
      seed: plan.seed,
      endpoint: plan.endpoint,
      nextRequest: createSyntheticWorkload({
        inputTokens: plan.inputTokens,
        outputTokens: plan.outputTokens,
        seed: plan.seed,
      }),
      onRecord: (record) => {
        writer.write(record);
        builder.add(record);
      },
    });
  } finally {
    writer.close();
  }
  const wallS = (performance.now() - startedMs) / 1000;
  const summary = builder.build({ unsentRequests: result.unsentRequests });
  const c = engine.counters;
  writeResults(plan, outDir, summary, json, {
    model,
    simulator: `${simulator}: ${result.simulatedS.toFixed(1)} simulated s in ${wallS.toFixed(2)} s, ${c.steps} steps, ${c.preemptions} preemptions, peak KV ${((c.peakUsedBlocks / engine.memory.numGpuBlocks) * 100).toFixed(1)}%`,
  });
  return EXIT.ok;
}

function telemetrySources(telemetry: NonNullable<RunPlan['telemetry']>): TelemetrySource[] {
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
function localSourceProblems(telemetry: NonNullable<RunPlan['telemetry']>): string[] {
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
 * Prometheus text, and scrapes it during the run if so (saying so on stderr); otherwise the
 * run goes on without it, silently.
 */
async function probeDefaultMetrics(plan: RunPlan): Promise<void> {
  const telemetry = plan.telemetry;
  if (telemetry?.metrics !== 'default' || telemetry.metricsUrl === undefined) return;
  const apiKey = plan.apiKeyEnv ? process.env[plan.apiKeyEnv] : undefined;
  const probe = await probeMetrics(telemetry.metricsUrl, withApiKey(plan.headers, apiKey));
  if (probe.ok) {
    process.stderr.write(
      `infergauge run: scraping ${telemetry.metricsUrl} during the run (${probe.series} series; --no-server-metrics turns this off)\n`,
    );
    return;
  }
  delete telemetry.metrics;
  delete telemetry.metricsUrl;
  if (!telemetryAsked(telemetry)) delete plan.telemetry;
}

function progressLine(progress: EngineProgress, nowUs: number, plan: RunPlan): string {
  const total = plan.requests !== undefined ? plan.requests + plan.warmupRequests : undefined;
  const done = total !== undefined ? `${progress.finished}/${total}` : `${progress.finished}`;
  return `[${(nowUs / 1e6).toFixed(1)} s] ${done} finished, ${progress.inFlight} in flight, ${progress.failed} failed`;
}

async function fetchModels(
  url: string,
  path: string,
  apiKey: string | undefined,
  headers: Record<string, string>,
): Promise<unknown> {
  const { origin, prefix } = splitServerUrl(url);
  try {
    const response = await request(`${origin}${prefix}${path}`, {
      headers: withApiKey(headers, apiKey),
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    const text = await response.body.text();
    if (response.statusCode !== 200) return { error: `HTTP ${response.statusCode}` };
    return JSON.parse(text) as unknown;
  } catch (err) {
    const code = (err as { code?: string }).code;
    return { error: code ? `${code}: ${(err as Error).message}` : (err as Error).message };
  }
}

/** A compact UTC timestamp for default results directories, e.g. 20261129T204932Z. */
export function utcStamp(): string {
  return new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

function describeModelsError(models: unknown): string {
  const error = (models as { error?: unknown } | undefined)?.error;
  return typeof error === 'string' ? error : 'no models listed';
}
