import { Command, Option } from '@commander-js/extra-typings';
import { BACKEND_NAMES } from '../backends/index.js';
import { EXIT } from '../errors.js';
import type { PlanFileOptions } from '../plan/planFile.js';
import { RUN_DEFAULTS, type RunPlan, recordsFormatNotice } from '../plan/runPlan.js';
import { failedToRun } from '../report/failures.js';
import type { ScenarioRow } from '../report/scenarios.js';
import { renderTerminalSummary } from '../report/terminal.js';
import { savedSummary } from '../results/runFiles.js';
import type { RunOptions } from '../session/prepare.js';
import type { PlanRunResult, ScenarioResult } from '../session/run.js';
import { parseExportTimeoutS } from '../session/userOutputs.js';
import { scenarioPresetsHelp } from '../workload/scenarios.js';
import { TRACE_BLOCK_TOKENS } from '../workload/trace.js';
import {
  collect,
  type Interrupts,
  listenForInterrupts,
  printNotice,
  printProblems,
  printWarnings,
  runAction,
  useColor,
} from './common.js';
import { addEngineFlags } from './engineFlags.js';
import { progressOutputs } from './progress.js';
import { gate, thresholdOption } from './report.js';

const d = RUN_DEFAULTS;

export function runCommand(): Command {
  const command = addRunOptions(
    new Command('run').description(
      'Benchmark an OpenAI-compatible streaming endpoint (without --url: the built-in simulator).',
    ),
  );
  return command.action((options, cmd) =>
    runAction('run', async () => {
      const merged = await withPlanFile(options, cmd, 'run');
      return merged ? run(merged) : EXIT.invalidOptions;
    }),
  );
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
    .option(
      '--rate <r>',
      'open loop: requests per second, instead of --concurrency; inf sends every request at once (vLLM offline)',
    )
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
      'replay a trace: Mooncake JSONL (hash_ids become shared prefixes), Azure LLM inference CSV, BurstGPT CSV, JSONL of {at_ms, input_tokens, output_tokens}, or an agentic trace (calls that wait for calls: infergauge JSONL, Weka, GuideLLM graphs)',
    )
    .option('--trace-speed <x>', 'replay the trace x times faster (default: 1)')
    .option(
      '--trace-window <start:end>',
      "replay only the trace's arrivals in [START, END) seconds from its first, starting at 0",
    )
    .option(
      '--trace-max-gap-s <s>',
      'cap every idle gap between arrivals to S seconds (after --trace-window, before --trace-speed)',
    )
    .option(
      '--trace-block-tokens <n>',
      `tokens per Mooncake hash_ids block (default: ${TRACE_BLOCK_TOKENS}); requests sharing ids share exactly those tokens`,
    )
    .option(
      '--tool-wait-cap-s <s>',
      "agentic trace: cut each call's recorded tool wait to at most S seconds",
    )
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
    .option(
      '--until <rule>',
      "stop once a percentile's 95% interval is this narrow, within --requests/--duration: 'ttft.p99±5%', 'e2e.p50±10ms' (ttft, itl, tpot, e2e)",
    )
    .option(
      '--warmup <n>',
      'requests (sessions, in a session scenario) sent first and not counted (default: 0)',
    )
    .option('--scenario <list>', `workload presets to run in turn: ${scenarioPresetsHelp()}`)
    .option(
      '--sessions <n>',
      `session scenarios (multi-turn, agent): measured sessions; --concurrency and --rate then count sessions (default: ${d.sessions})`,
    )
    .option('--turns <dist>', 'multi-turn: turns per session, N or a distribution (default: 5)')
    .option(
      '--think-time <ms>',
      'multi-turn: milliseconds from an answer to the next turn, N or a distribution (default: 1000)',
    )
    .option(
      '--history <kind>',
      "multi-turn: the earlier answers sent back, actual (the model's) or reference (the dataset's, or synthetic) (default: actual)",
    )
    .option(
      '--max-answer-mb <mb>',
      'multi-turn and agents: the most answer text a request keeps for the next turn; past it the request ends as too_large (default: 16)',
    )
    .option(
      '--system-prompt <n>',
      "session scenarios: tokens of the system prompt every session shares (default: the scenario's)",
    )
    .option(
      '--reasoning-effort <level>',
      'reasoning models: send reasoning_effort low, medium or high',
    )
    .option(
      '--thinking <on|off>',
      'reasoning models: send chat_template_kwargs.enable_thinking (Qwen3, DeepSeek on vLLM and SGLang)',
    )
    .option(
      '--input-tokens <dist>',
      `prompt tokens: N, uniform:MIN:MAX, normal:MEAN:SD, poisson:MEAN, lognormal:MEAN:SD[:MIN[:MAX]] (default: ${d.inputTokens})`,
    )
    .option('--output-tokens <dist>', `max_tokens, in the same forms (default: ${d.outputTokens})`)
    .option(
      '--tokenizer <name>',
      'prompt token counting: words, o200k_base, cl100k_base, server (its /tokenize) or a tokenizer.json path (default: words)',
    )
    .option('--shared-prefix <n>', 'tokens every prompt starts with (exercises prefix caching)')
    .option('--ignore-eos', 'ask the server for exactly --output-tokens (vLLM, SGLang: ignore_eos)')
    .option(
      '--prefix-hit-rate <r>',
      'build prompts that hit the prefix cache at this rate (0..1): shared prefixes, sent once before the clock, then text of their own',
    )
    .option(
      '--reset-cache',
      "empty the server's prefix cache before every run and sweep point (vLLM /reset_prefix_cache with VLLM_SERVER_DEV_MODE=1, SGLang /flush_cache)",
    )
    .option(
      '--continuous-usage-stats',
      'ask for usage on every event (vLLM) to count tokens per event exactly',
    )
    .option('--temperature <t>', `sampling temperature (default: ${d.temperature})`)
    .option(
      '--timeout <s>',
      `per-request limit in seconds, from sending to the last byte (default: ${d.timeoutS})`,
    )
    .option(
      '--grace <s>',
      `after Ctrl-C, seconds in-flight requests may finish before they are cancelled (default: ${d.graceS})`,
    )
    .option('--slo <list>', "per-request SLOs for goodput, e.g. 'ttft<500,tpot<50,e2e<10000' (ms)")
    .option('--seed <n>', `seed for prompts and arrivals (default: ${d.seed})`)
    .option(
      '--prediction-draws <n>',
      'with --calibration on the simulator: draws of the fitted values behind the prediction intervals (default: 32; 0: none)',
    )
    .option(
      '--prompt-salt <n>',
      "mixed into every prompt with --seed; repeats a run's prompts exactly as its manifest.json records (default: a fresh one per run, so no run reads a prefix cache another filled)",
    )
    .option(
      '--api-key-env <var>',
      'environment variable holding the API key (default: OPENAI_API_KEY when set)',
    )
    .addOption(
      new Option('--header <header>', "extra request header 'Name: value' (repeatable)").argParser(
        collect,
      ),
    )
    .option('--extra-body <json>', 'JSON object merged into every request body')
    .option('--out <dir>', 'results directory (default: infergauge-results/<UTC time>-<label>/)')
    .option('--label <name>', 'label for the default results directory (default: sim or run)')
    .addOption(tagOption())
    .option('--note <text>', noteHelp)
    .addOption(serverInfoOption())
    .option(
      '--records-format <format>',
      'jsonl (records.jsonl) or jsonl.gz (records.jsonl.gz: gzip-compressed, under half the size; zcat reads it) (default: jsonl)',
    )
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
      'worker threads sending the load, each with its own event loop and connections; 0 sends it from the main thread (default: one per usable core but one, at most one per request slot; 0 on one core)',
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
    .addOption(outputOption())
    .addOption(new Option('--export <name[=arg]>').argParser(collect).hideHelp())
    .option(
      '--export-timeout-s <s>',
      'seconds an --output module of your own may take to load, or to finish a point or the session, before it is dropped with a notice (default: 10)',
    )
    .addOption(thresholdOption())
    .option(
      '--simulate',
      'virtual time: run the workload through the simulated engine without HTTP or waiting',
    )
    .option(
      '--time-scale <x>',
      'built-in simulator: real seconds per simulated second (default: 1)',
    );
  addConnectionOptions(command);
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>);
  return command;
}

/** `--tag TAG`, repeatable: the series a run belongs to (src/plan/annotations.ts). */
export function tagOption() {
  return new Option(
    '--tag <tag>',
    'tag the results, repeatable: `infergauge history` groups and filters runs by tag (letters, digits, . _ : - /)',
  ).argParser(collect);
}

export const noteHelp = 'one line about this run, kept in its manifest.json';

/** `--server-info KEY=VALUE`, repeatable: what the server does not say about itself. */
export function serverInfoOption() {
  return new Option(
    '--server-info <key=value>',
    'a fact about the server for the manifest, repeatable: engine flags, tp=4, gpu=H100x8 (never a secret)',
  ).argParser(collect);
}

/** `--output NAME[=ARG]`, repeatable (`--export`, its old name, is read too). */
export function outputOption() {
  return new Option(
    '--output <name[=arg]>',
    "send the session's events to another output too, repeatable: ui[=[HOST:]PORT] (a live page), prometheus[=PORT] (/metrics to scrape), otlp=URL (OpenTelemetry), points=FILE (a JSON line per finished point), or a module of your own, ./my-output.js[=ARG] (docs/cli.md, Outputs)",
  ).argParser(collect);
}

/** How a command reaches its server (run, sweep, probe, capacity): the proxy, TLS, HTTP/2. */
export function addConnectionOptions(command: Command): Command {
  return command
    .option(
      '--proxy <url>',
      'send through this http:// proxy (credentials as http://user:password@host:port), instead of HTTPS_PROXY/HTTP_PROXY; NO_PROXY still applies',
    )
    .option('--no-proxy', 'ignore HTTPS_PROXY, HTTP_PROXY and NO_PROXY: connect directly')
    .option(
      '--ca-cert <file>',
      "PEM file of CA certificates to trust besides the system's, for an https --url signed by a private CA (curl --cacert)",
    )
    .option(
      '--client-cert <file>',
      'PEM client certificate, when the server asks for one (mTLS; curl --cert)',
    )
    .option('--client-key <file>', 'PEM private key of --client-cert (curl --key)')
    .option(
      '--client-key-passphrase-env <var>',
      "environment variable holding --client-key's passphrase",
    )
    .option(
      '--insecure',
      "do not verify the server's TLS certificate (curl -k); the results carry a warning",
    )
    .option(
      '--tls-servername <name>',
      'name sent as SNI and checked against the certificate, when --url gives an address',
    )
    .option(
      '--http2 <mode>',
      'auto (HTTP/2 where an https:// server offers it), on (also h2c on http://) or off (default: auto)',
    );
}

/** `--export` is `--output`'s old name: both land in `output`, in the order given. */
export function outputsUnderOneName(options: Record<string, unknown>): void {
  const old = options.export as string[] | undefined;
  if (old === undefined) return;
  options.output = [...((options.output as string[] | undefined) ?? []), ...old];
  delete options.export;
}

/**
 * The options with a --plan file under them: command-line values win over the file's, and
 * commander's own defaults (e.g. chunkedPrefill true from --no-chunked-prefill) never do.
 * Prints the file's problems and returns undefined when it is invalid.
 */
export async function withPlanFile(
  options: Record<string, unknown>,
  cmd: { getOptionValueSource(key: string): string | undefined },
  name: string,
): Promise<RunOptions | undefined> {
  outputsUnderOneName(options);
  const path = options.plan as string | undefined;
  if (path === undefined) return options as RunOptions;
  // YAML and the plan file's schema are loaded only for a plan file.
  const { PlanFileError, readPlanFile } = await import('../plan/planFile.js');
  let file: PlanFileOptions;
  try {
    file = readPlanFile(path);
  } catch (err) {
    if (!(err instanceof PlanFileError)) throw err;
    printProblems(name, err.problems, 'invalid plan');
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

async function run(options: RunOptions): Promise<number> {
  // Loaded when the command is chosen, so that other commands start without them.
  const [{ prepareRun }, { runPlan }, { loadOutputs }] = await Promise.all([
    import('../session/prepare.js'),
    import('../session/run.js'),
    import('../session/userOutputs.js'),
  ]);
  const prepared = prepareRun(options);
  const { plan, json } = prepared;
  if (prepared.problems.length > 0 || !plan) return printProblems('run', prepared.problems);
  printWarnings('run', prepared.warnings);
  for (const n of prepared.notices) printNotice('run', n);
  const longRun = recordsFormatNotice(plan);
  if (longRun) printNotice('run', longRun);
  // Virtual time does not wait on anything: Ctrl-C ends it as it ends any program.
  const interrupts = prepared.simulate ? undefined : listenForInterrupts();
  let done: PlanRunResult;
  try {
    const exported = await loadOutputs(options.output, exportLimits('run', options, interrupts));
    // Ctrl-C while a module loaded: nothing has started, nothing is opened.
    if (interrupts?.stop.aborted) return EXIT.interrupted;
    done = await runPlan(
      { ...prepared, plan },
      {
        ...(interrupts ? { stop: interrupts.stop, cancel: interrupts.cancel } : {}),
        onNotice: (message) => printNotice('run', message),
        onStopping: (inFlight, graceS) =>
          process.stderr.write(
            `\ninfergauge run: stopping; ${inFlight} requests in flight get ${graceS} s to finish (Ctrl-C again cancels them)\n`,
          ),
        outputs: [
          // The summary follows each scenario: off a terminal, the heartbeat alone.
          ...progressOutputs(process.stderr, {
            live: !json && !prepared.simulate,
            pointLines: false,
          }),
          ...exported,
        ],
        ...exportTimeout(options),
        html: options.html !== false,
        onScenario: (result) => printSummary(plan, result, json && plan.scenarios.length === 1),
      },
    );
  } finally {
    interrupts?.dispose();
  }
  // Stopped before the first scenario began: nothing was measured.
  if (done.results.length === 0) return done.code;
  if (done.scenarioRows) await printScenarios(done, done.scenarioRows, json);
  // Precedence: interrupted (130), then nothing succeeded (1), then the thresholds (3).
  if (done.code === EXIT.failure) {
    printNotice('run', failedToRun(done.results.map((r) => r.summary)));
  }
  if (done.code !== EXIT.ok) return done.code;
  return gate(
    'run',
    options.threshold,
    done.results.map((r) => ({ name: r.scenario.name, summary: r.summary })),
  );
}

/**
 * How --output modules are loaded: within --export-timeout-s, a late one told on stderr, none
 * waited for after Ctrl-C; an output may stop the session as Ctrl-C does (the page's Stop).
 */
export function exportLimits(command: string, options: RunOptions, interrupts?: Interrupts) {
  return {
    ...exportTimeout(options),
    onNotice: (message: string) => printNotice(command, message),
    ...(interrupts ? { stop: interrupts.stop, requestStop: interrupts.interrupt } : {}),
  };
}

/** --export-timeout-s as the session takes it (prepareRun has refused a bad value). */
export function exportTimeout(options: RunOptions): { exportTimeoutS?: number } {
  const { seconds } = parseExportTimeoutS(options.exportTimeoutS);
  return seconds !== undefined ? { exportTimeoutS: seconds } : {};
}

/** report.html next to the records; a failure to render never fails the run itself. */
export async function writeHtmlReport(dir: string): Promise<void> {
  const { saveHtmlReport } = await import('../session/htmlOutput.js');
  await saveHtmlReport(dir, (problem) => process.stderr.write(`infergauge: ${problem}\n`));
}

/** One scenario's summary: the table, or with --json (one scenario) the summary as saved. */
function printSummary(plan: RunPlan, r: ScenarioResult, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(savedSummary(r.summary, r.serverMetrics), null, 2)}\n`);
    return;
  }
  process.stdout.write(
    `${renderTerminalSummary(r.summary, {
      color: useColor(process.stdout),
      model: r.model,
      endpoint: plan.backend === 'openai' ? plan.endpoint : `${plan.backend} native`,
      outDir: r.dir,
      ...(r.serverMetrics ? { serverMetrics: r.serverMetrics } : {}),
      ...(r.simulator ? { simulator: r.simulator } : {}),
    })}\n`,
  );
}

/** Several scenarios: one row each (or with --json, every summary by scenario). */
async function printScenarios(done: PlanRunResult, rows: ScenarioRow[], json: boolean) {
  if (json) {
    const summaries = Object.fromEntries(done.results.map((r) => [r.scenario.name, r.summary]));
    process.stdout.write(`${JSON.stringify({ scenarios: summaries }, null, 2)}\n`);
    return;
  }
  const { renderScenarioTable } = await import('../report/scenarios.js');
  process.stdout.write(`\n${renderScenarioTable(rows)}\nAll scenarios: ${done.root}\n`);
}
