import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Command, Option } from '@commander-js/extra-typings';
import { logUpdateStderr } from 'log-update';
import { prefillWarning } from '../analysis/traps.js';
import { BACKEND_NAMES } from '../backends/index.js';
import { withApiKey } from '../backends/request.js';
import { EXIT } from '../errors.js';
import { createRunClock, type RunClock } from '../loadgen/clock.js';
import type { TargetConfig } from '../loadgen/http.js';
import type { LoadgenProgress } from '../loadgen/run.js';
import { maxParts, type ShardPart, shardOf, wholeRun } from '../loadgen/shard.js';
import {
  defaultWorkers,
  runWorkers,
  WORKER_START_LEAD_MS,
  type WorkersRun,
} from '../loadgen/workers.js';
import { type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import { PlanFileError, type PlanFileOptions, readPlanFile } from '../plan/planFile.js';
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
import { renderHtmlReport } from '../report/html.js';
import { loadReportInput } from '../report/load.js';
import { renderScenarioTable } from '../report/scenarios.js';
import { describeLoad, renderTerminalSummary } from '../report/terminal.js';
import { JsonlWriter, writeClientHealth } from '../results/jsonl.js';
import { writeJson } from '../results/layout.js';
import { type SimulatorProcess, spawnSimulator } from '../session/simulator.js';
import {
  discoverModel,
  localSourceProblems,
  measurePromptOverhead,
  type PreparedRun,
  probeDefaultMetrics,
  targetConfig,
  telemetrySources,
  tokenizerOptions,
  utcStamp,
  workloadSource,
} from '../session/target.js';
import { describeEngine, servedModelName } from '../sim/describe.js';
import { EngineModel, type EngineModelOptions } from '../sim/engineModel.js';
import { simulateRun } from '../sim/virtual.js';
import { recordTelemetry } from '../telemetry/scraper.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { VERSION } from '../version.js';
import { streamSeed } from '../workload/distributions.js';
import { createPromptFactory } from '../workload/prompts.js';
import { describeScenario, type Scenario } from '../workload/scenarios.js';
import { createTokenizer } from '../workload/tokenizer.js';
import { createWorkload, type WorkloadSource } from '../workload/workload.js';
import { addEngineFlags, engineFlagArgs, engineFromFlags, isEngineFlag } from './engineFlags.js';
import { gate, thresholdOption } from './report.js';

const d = RUN_DEFAULTS;

export function runCommand(): Command {
  const command = addRunOptions(
    new Command('run').description(
      'Benchmark an OpenAI-compatible streaming endpoint (without --url: the built-in simulator).',
    ),
  );
  return command.action(async (options, cmd) => {
    const merged = withPlanFile(options, cmd, 'run');
    process.exitCode = merged ? await run(merged) : EXIT.invalidOptions;
  });
}

/** The options of `run` (and of `plan`, which prints what `run` would do with them). */
export function addRunOptions(command: Command): Command {
  command
    .option(
      '--plan <file>',
      'YAML plan file: run options by flag name, and scenarios (flags override it)',
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
    .option('--arrival <kind>', 'open loop arrivals: poisson, constant or gamma (default: poisson)')
    .option(
      '--burstiness <b>',
      'gamma arrivals (as vLLM): 1 is Poisson, below 1 burstier, above 1 more regular',
    )
    .option(
      '--ramp-up <from:seconds>',
      'open loop: raise the rate linearly from FROM to --rate over SECONDS',
    )
    .option(
      '--trace <file>',
      'replay a trace: Mooncake JSONL, Azure LLM inference CSV, or JSONL of {at_ms, input_tokens, output_tokens}',
    )
    .option('--trace-speed <x>', 'replay the trace x times faster (default: 1)')
    .option(
      '--dataset <file>',
      'prompts from ShareGPT JSON, JSONL of {prompt|messages, max_tokens}, or a plain-text corpus sliced to --input-tokens',
    )
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
    .option(
      '--scenario <list>',
      'workload presets to run in turn: chat (256/256), creative (128/1024), summarize (4096/256), rag (8192/256)',
    )
    .option(
      '--input-tokens <dist>',
      `prompt tokens: N, uniform:MIN:MAX, normal:MEAN:SD, poisson:MEAN, lognormal:MEAN:SD (default: ${d.inputTokens})`,
    )
    .option('--output-tokens <dist>', `max_tokens, in the same forms (default: ${d.outputTokens})`)
    .option(
      '--tokenizer <name>',
      'prompt token counting: words, o200k_base, cl100k_base, server (its /tokenize) or a tokenizer.json path (default: words)',
    )
    .option('--shared-prefix <n>', 'tokens every prompt starts with (exercises prefix caching)')
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
    .option(
      '--workers <n>',
      'worker threads sending the load, each with its own event loop and connections (default: one per core but one, at most one per request slot)',
    )
    .option(
      '--shard <i/n>',
      'run only shard i (0-based) of n of this plan, for several machines; `infergauge merge` joins the shards',
    )
    .option(
      '--start-at <iso>',
      'start the schedule at this shared instant, e.g. 2026-11-29T23:00:00Z (shards on several machines)',
    )
    .option('--json', 'print the summary JSON to stdout instead of the table')
    .option('--no-html', 'do not write report.html next to the records')
    .addOption(thresholdOption())
    .option(
      '--simulate',
      'virtual time: run the workload through the simulated engine without HTTP or waiting',
    )
    .option(
      '--time-scale <x>',
      'built-in simulator: real seconds per simulated second (default: 1)',
    );
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>);
  return command;
}

/**
 * The options with a --plan file under them: command-line values win over the file's, and
 * commander's own defaults (e.g. chunkedPrefill true from --no-chunked-prefill) never do.
 * Prints the file's problems and returns undefined when it is invalid.
 */
export function withPlanFile(
  options: Record<string, unknown>,
  cmd: { getOptionValueSource(key: string): string | undefined },
  name: string,
): RunOptions | undefined {
  const path = options.plan as string | undefined;
  if (path === undefined) return options as RunOptions;
  let file: PlanFileOptions;
  try {
    file = readPlanFile(path);
  } catch (err) {
    if (!(err instanceof PlanFileError)) throw err;
    process.stderr.write(
      `infergauge ${name}: invalid plan\n${err.problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return undefined;
  }
  const merged: Record<string, unknown> = { ...file.options };
  for (const [key, value] of Object.entries(options)) {
    if (key === 'plan') continue;
    if (value !== undefined && cmd.getOptionValueSource(key) !== 'default') merged[key] = value;
    else if (!(key in merged)) merged[key] = value;
  }
  if (file.scenarios) merged.planScenarios = file.scenarios;
  return merged as RunOptions;
}

export type RunOptions = RunPlanInput & {
  json?: boolean;
  simulate?: boolean;
  timeScale?: string;
  /** CI thresholds (--threshold, repeatable). */
  threshold?: string[];
  /** false with --no-html: no report.html next to the records. */
  html?: boolean;
} & Record<string, unknown>;

/** `command`: the command whose options these are (shards are whole runs' parts: `run` only). */
export function prepareRun(options: RunOptions, command = 'run'): PreparedRun {
  const { json, simulate, timeScale, threshold: _threshold, html: _html, ...rest } = options;
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
    if (simulate && (input.workers ?? input.shard ?? input.startAt) !== undefined) {
      problems.push('--workers, --shard and --start-at apply to real-time runs, not to --simulate');
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
  if (command !== 'run' && (input.shard ?? input.startAt) !== undefined) {
    problems.push(
      `--shard and --start-at split one run over machines: they apply to infergauge run, not ${command}`,
    );
  } else if (plan && (plan.shard ?? plan.startAt) && plan.scenarios.length > 1) {
    problems.push(
      `--shard and --start-at give one run one shared start: run each of the ${plan.scenarios.length} scenarios as its own (e.g. --scenario ${plan.scenarios[0].name})`,
    );
  } else if (plan?.shard) {
    try {
      shardOf(wholeRun(plan.load, plan.warmupRequests, plan.requests), plan.shard);
    } catch (err) {
      problems.push(`--shard ${plan.shard.index}/${plan.shard.count}: ${(err as Error).message}`);
    }
  }
  const warnings = [...(simulated?.warnings ?? [])];
  if (plan && plan.temperature > 0) {
    warnings.push(
      `temperature ${plan.temperature}: sampling noise will move output lengths and timings from run to run`,
    );
  }
  return {
    ...(plan ? { plan } : {}),
    problems,
    warnings,
    ...(simulated?.engine ? { engine: simulated.engine } : {}),
    engineFlags,
    ...(simModel !== undefined ? { simModel } : {}),
    simulate: simulate === true,
    ...(timeScale !== undefined ? { timeScale } : {}),
    json: json === true,
  };
}

async function run(options: RunOptions): Promise<number> {
  const prepared = prepareRun(options);
  const { plan, problems, engineFlags, simModel, timeScale, json } = prepared;
  if (problems.length > 0 || !plan) {
    process.stderr.write(
      `infergauge run: invalid options\n${problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return EXIT.invalidOptions;
  }
  for (const w of prepared.warnings) process.stderr.write(`infergauge run: warning: ${w}\n`);
  const html = options.html !== false;
  if (prepared.simulate && prepared.engine) {
    return simulateVirtual(plan, prepared.engine, json, options.threshold, html);
  }
  const builtIn = plan.url === undefined;

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
    return await benchmark(
      plan,
      sim?.url ?? (plan.url as string),
      json,
      sim?.banner,
      options.threshold,
      html,
    );
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
  simulator: string | undefined,
  thresholds: string[] | undefined,
  html: boolean,
): Promise<number> {
  const apiKey = plan.apiKeyEnv ? process.env[plan.apiKeyEnv] : undefined;
  const { model, models } = await discoverModel(plan, url, apiKey);
  const server = {
    url,
    builtInSimulator: plan.url === undefined,
    ...(simulator ? { simulator } : {}),
    models,
  };
  const target = targetConfig(plan, url, model, apiKey);
  const tokenizer = await createTokenizer(
    plan.tokenizer,
    tokenizerOptions(plan, url, model, apiKey),
  );
  if (!tokenizer.exact) {
    process.stderr.write(
      `infergauge run: prompt lengths are approximate (${tokenizer.name}): pass --tokenizer server, o200k_base, cl100k_base or a tokenizer.json for exact counts\n`,
    );
  }
  const prompts = await createPromptFactory(tokenizer, { seed: streamSeed(plan.seed, 'prompts') });
  const overhead = await measurePromptOverhead(target, prompts);
  const results: ScenarioResult[] = [];
  const root = plan.out ?? join('infergauge-results', `${utcStamp()}-${plan.label}`);
  let code: number = EXIT.ok;
  for (const scenario of plan.scenarios) {
    const workload = {
      scenario: describeScenario(scenario),
      tokenizer: tokenizer.name,
      tokenizerExact: tokenizer.exact,
      promptOverheadTokens: overhead.tokens,
      ...(overhead.note ? { promptOverheadNote: overhead.note } : {}),
    };
    const outDir = plan.scenarios.length > 1 ? join(root, scenario.name) : root;
    const result = await runScenario(plan, {
      outDir,
      server,
      model,
      workload,
      target,
      apiKey,
      json,
      ...(simulator ? { simulator } : {}),
      workloadSource: workloadSource(plan, scenario, {
        url,
        model,
        apiKey,
        promptOverheadTokens: overhead.tokens,
      }),
    });
    results.push({ scenario, ...result });
    code = result.code;
    if (code === EXIT.interrupted) break;
  }
  if (plan.scenarios.length > 1) writeScenarioTable(root, results, json);
  if (html) await writeHtmlReport(root);
  if (code !== EXIT.ok) return code;
  return gate(
    'run',
    thresholds,
    results.map((r) => ({ name: r.scenario.name, summary: r.summary })),
  );
}

interface ScenarioResult {
  scenario: Scenario;
  summary: RunSummary;
  code: number;
}

/** A shard may start this late after --start-at; later, its schedule would start in a burst. */
const LATE_START_US = 1e6;

/**
 * One scenario: its own directory, records, telemetry and summary. The load (or this process's
 * shard of it) runs on worker threads; this thread writes their records as they come, merges
 * their summaries and draws progress.
 */
async function runScenario(
  plan: RunPlan,
  c: {
    outDir: string;
    server: Record<string, unknown>;
    model: string;
    workload: Record<string, unknown>;
    target: TargetConfig;
    apiKey: string | undefined;
    json: boolean;
    simulator?: string;
    workloadSource: WorkloadSource;
  },
): Promise<{ summary: RunSummary; code: number }> {
  const { outDir, model, target, apiKey, json, simulator } = c;
  const whole = wholeRun(plan.load, plan.warmupRequests, plan.requests);
  const part = plan.shard ? shardOf(whole, plan.shard) : whole;
  const workers = Math.min(plan.workers ?? defaultWorkers(part), maxParts(part));
  if (plan.workers !== undefined && workers < plan.workers) {
    process.stderr.write(
      `infergauge run: ${workers} workers, not ${plan.workers}: each needs at least one request in flight\n`,
    );
  }
  openRunDir(outDir);
  const writer = new JsonlWriter<RequestRecord>(join(outDir, 'records.jsonl'));
  const builder = new SummaryBuilder({
    load: part.load,
    ...(plan.slo ? { slo: plan.slo } : {}),
  });
  const stop = new AbortController();
  const cancel = new AbortController();
  const progress: LoadgenProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 };
  let draw: NodeJS.Timeout | undefined;
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
  let telemetry: ReturnType<typeof recordTelemetry> | undefined;
  let telemetryStart: NodeJS.Timeout | undefined;
  /** Once every worker is ready: the clock they share, the manifest, telemetry, progress. */
  const clockFor = () => {
    const clock = plan.startAt
      ? createRunClock({ originEpochMs: plan.startAt.epochMs })
      : createRunClock({ startInMs: WORKER_START_LEAD_MS });
    const lateUs = clock.nowUs();
    if (plan.startAt && lateUs > LATE_START_US) {
      throw new Error(
        `ready ${(lateUs / 1e6).toFixed(1)} s after --start-at ${plan.startAt.iso}, when the shared schedule had begun; choose a later --start-at (every shard must be running by then)`,
      );
    }
    if (plan.startAt && lateUs < -1e6) {
      process.stderr.write(
        `infergauge run: waiting ${(-lateUs / 1e6).toFixed(1)} s for --start-at ${plan.startAt.iso}\n`,
      );
    }
    writeManifest(plan, outDir, clock, {
      server: c.server,
      model,
      workload: c.workload,
      execution: {
        workers,
        ...(plan.shard ? { shard: plan.shard, shardLoad: part.load } : {}),
        ...(plan.startAt ? { startAt: plan.startAt.iso } : {}),
      },
    });
    const sampling = plan.telemetry;
    if (sampling) {
      // Sampling starts with the schedule, so every snapshot is on the run's timeline (timers
      // may fire up to a millisecond early: check the clock, not the timer).
      const start = () => {
        const leftMs = -clock.nowUs() / 1000;
        if (leftMs > 0) {
          telemetryStart = setTimeout(start, leftMs + 1);
          return;
        }
        telemetry = recordTelemetry({
          sources: telemetrySources(sampling),
          intervalMs: sampling.intervalS * 1000,
          nowMs: () => clock.nowUs() / 1000,
          headers: withApiKey(plan.headers, apiKey),
          sink: new JsonlWriter<TelemetrySnapshot>(join(outDir, 'telemetry.jsonl')),
        });
      };
      start();
    }
    if (process.stderr.isTTY && !json) {
      draw = setInterval(() => logUpdateStderr(progressLine(progress, clock.nowUs(), part)), 250);
    }
    return { clock, startAtUs: 0 };
  };
  const { backend: _backend, ...targetData } = target;
  let serverMetrics: ServerMetricsSummary | undefined;
  let run: WorkersRun;
  try {
    run = await runWorkers({
      workers,
      part: { ...part, measureFromId: plan.warmupRequests },
      job: {
        target: { ...targetData, backend: plan.backend },
        ...(plan.durationS !== undefined ? { durationS: plan.durationS } : {}),
        seed: plan.seed,
        workload: c.workloadSource,
        summaryContext: { load: part.load, ...(plan.slo ? { slo: plan.slo } : {}) },
      },
      clockFor,
      onRecords: (text, count) => writer.writeLines(text, count),
      progress,
      stopSignal: stop.signal,
      cancelSignal: cancel.signal,
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    clearTimeout(graceTimer);
    if (draw) {
      clearInterval(draw);
      logUpdateStderr.clear();
    }
    writer.close();
    clearTimeout(telemetryStart);
    serverMetrics = await telemetry?.stop();
  }
  for (const state of run.states) builder.merge(state);
  // Kept raw, so that `infergauge merge` can judge shards' threads as it judges workers.
  writeClientHealth(
    outDir,
    run.results.map((r) => r.clientHealth),
  );
  const interrupted = run.results.some((r) => r.stoppedBy === 'signal');
  const summary = builder.build({
    clientHealth: run.results.map((r) => r.clientHealth),
    interrupted,
    unsentRequests: run.results.reduce((n, r) => n + r.unsentRequests, 0),
  });
  // The server's warnings (KV cache full, preemptions) stand with the run's.
  if (serverMetrics) summary.warnings.push(...serverMetrics.warnings);
  addPlanWarnings(plan, summary);
  writeResults(plan, outDir, summary, json && plan.scenarios.length === 1, {
    model,
    ...(serverMetrics ? { serverMetrics } : {}),
    ...(simulator ? { simulator } : {}),
  });
  return { summary, code: interrupted ? EXIT.interrupted : EXIT.ok };
}

/** report.html next to the records; a failure to render never fails the run itself. */
export async function writeHtmlReport(dir: string): Promise<void> {
  try {
    writeFileSync(join(dir, 'report.html'), renderHtmlReport(await loadReportInput(dir)));
  } catch (err) {
    process.stderr.write(
      `infergauge: could not write ${join(dir, 'report.html')}: ${(err as Error).message}\n`,
    );
  }
}

/** Warnings about the plan itself, which the numbers depend on. */
function addPlanWarnings(plan: RunPlan, summary: RunSummary): void {
  const prefill = prefillWarning(summary);
  if (prefill) summary.warnings.push(prefill);
  if (plan.temperature > 0) {
    summary.warnings.push({
      code: 'nonzero_temperature',
      message: `temperature ${plan.temperature}: sampling noise moves output lengths and timings from run to run; benchmark at temperature 0`,
    });
  }
}

/** Several scenarios: one row each, printed and saved as scenarios.json in the parent folder. */
function writeScenarioTable(root: string, results: ScenarioResult[], json: boolean): void {
  const rows = results.map(({ scenario, summary: s }) => ({
    scenario: scenario.name,
    lengths: describeScenario(scenario),
    load: describeLoad(s),
    completed: s.requests.completed,
    failed: s.requests.failed,
    ttftP50Ms: s.latency.ttftMs.p50,
    ttftP99Ms: s.latency.ttftMs.p99,
    tpotP50Ms: s.latency.tpotMs.p50,
    itlP99Ms: s.latency.itlMs.p99,
    e2eP99Ms: s.latency.e2eMs.p99,
    outputTokensPerS: s.throughput.outputTokensPerS,
    requestsPerS: s.throughput.requestsPerS,
    meanConcurrency: s.load.meanConcurrency,
  }));
  writeJson(join(root, 'scenarios.json'), { scenarios: rows });
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ scenarios: Object.fromEntries(results.map((r) => [r.scenario.name, r.summary])) }, null, 2)}\n`,
    );
    return;
  }
  process.stdout.write(`\n${renderScenarioTable(rows)}\nAll scenarios: ${root}\n`);
}

/** Creates the run directory; refuses one that already holds a run. */
function openRunDir(outDir: string): void {
  if (existsSync(join(outDir, 'records.jsonl'))) {
    throw new Error(`${outDir} already holds a run (records.jsonl); choose another --out`);
  }
  mkdirSync(outDir, { recursive: true });
}

/** The run's manifest: what ran, where, when (the clock's origin) and how. */
function writeManifest(
  plan: RunPlan,
  outDir: string,
  clock: RunClock,
  about: {
    server: Record<string, unknown>;
    model: string;
    workload: Record<string, unknown>;
    execution?: Record<string, unknown>;
  },
): void {
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
    server: about.server,
    model: about.model,
    workload: about.workload,
    plan: redactPlan(plan),
    ...(about.execution ? { execution: about.execution } : {}),
    windows: {
      warmupRequests: plan.warmupRequests,
      measuredRequests: plan.requests ?? null,
      measuredDurationS: plan.durationS ?? null,
      note: 'warm-up requests are recorded with phase "warmup" and not counted; no request is sent after the measurement window closes',
    },
  });
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
 * `--simulate`: every scenario through the engine model in virtual time. Writes the same
 * records.jsonl, summary.json and manifest as a run against the HTTP simulator.
 */
async function simulateVirtual(
  plan: RunPlan,
  options: EngineModelOptions,
  json: boolean,
  thresholds: string[] | undefined,
  html: boolean,
): Promise<number> {
  try {
    new EngineModel(options);
  } catch (err) {
    process.stderr.write(
      `infergauge run: the simulated engine cannot start: ${(err as Error).message}\n`,
    );
    return EXIT.failure;
  }
  // The simulator counts one token per word: the words tokenizer is exact here.
  const tokenizer = await createTokenizer('words', { builtInSimulator: true });
  const root = plan.out ?? join('infergauge-results', `${utcStamp()}-${plan.label}`);
  const results: ScenarioResult[] = [];
  for (const scenario of plan.scenarios) {
    const engine = new EngineModel(options);
    const model = servedModelName(engine.config.model.id);
    const simulator = `${describeEngine(options)}, KV cache ${engine.memory.numGpuBlocks} blocks (${engine.memory.kvTokens} tokens); virtual time`;
    const outDir = plan.scenarios.length > 1 ? join(root, scenario.name) : root;
    try {
      openRunDir(outDir);
      writeManifest(plan, outDir, createRunClock(), {
        server: { virtualTime: true, simulator, memory: engine.memory },
        model,
        workload: {
          scenario: describeScenario(scenario),
          tokenizer: tokenizer.name,
          tokenizerExact: true,
          promptOverheadTokens: 0,
        },
      });
    } catch (err) {
      process.stderr.write(`infergauge run: ${(err as Error).message}\n`);
      return EXIT.failure;
    }
    const prompts = await createPromptFactory(tokenizer, {
      seed: streamSeed(plan.seed, 'prompts'),
      ...(scenario.sharedPrefixTokens ? { sharedPrefixTokens: scenario.sharedPrefixTokens } : {}),
    });
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
        nextRequest: createWorkload({
          scenario,
          prompts,
          seed: plan.seed,
          wordsAreTokens: true,
          ...(plan.trace ? { trace: plan.trace.entries } : {}),
          ...(plan.dataset ? { dataset: plan.dataset.data } : {}),
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
    addPlanWarnings(plan, summary);
    const c = engine.counters;
    writeResults(plan, outDir, summary, json && plan.scenarios.length === 1, {
      model,
      simulator: `${simulator}: ${result.simulatedS.toFixed(1)} simulated s in ${wallS.toFixed(2)} s, ${c.steps} steps, ${c.preemptions} preemptions, peak KV ${((c.peakUsedBlocks / engine.memory.numGpuBlocks) * 100).toFixed(1)}%`,
    });
    results.push({ scenario, summary, code: EXIT.ok });
  }
  if (plan.scenarios.length > 1) writeScenarioTable(root, results, json);
  if (html) await writeHtmlReport(root);
  return gate(
    'run',
    thresholds,
    results.map((r) => ({ name: r.scenario.name, summary: r.summary })),
  );
}

function progressLine(progress: LoadgenProgress, nowUs: number, part: ShardPart): string {
  if (nowUs < 0) return `starting in ${(-nowUs / 1e6).toFixed(1)} s (--start-at)`;
  const total =
    part.measured.count !== undefined ? part.measured.count + (part.warmup.count ?? 0) : undefined;
  const done = total !== undefined ? `${progress.finished}/${total}` : `${progress.finished}`;
  return `[${(nowUs / 1e6).toFixed(1)} s] ${done} finished, ${progress.inFlight} in flight, ${progress.failed} failed`;
}
