import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import Table from 'cli-table3';
import pc from 'picocolors';
import { request } from 'undici';
import { openaiBackend } from '../backends/openai.js';
import { firstListedModel, splitServerUrl, withApiKey } from '../backends/request.js';
import type { Endpoint } from '../backends/types.js';
import { EXIT } from '../errors.js';
import { createRunClock } from '../loadgen/clock.js';
import { runLoadgen } from '../loadgen/run.js';
import {
  type CapacityLimit,
  type CapacityPrediction,
  type CapacityStep,
  capacityLimit,
  doublingBatches,
  predictCapacity,
  predictedKvUsage,
} from '../memory/capacity.js';
import { EngineStartError, planVllmMemory } from '../memory/footprint.js';
import { SummaryBuilder } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';
import { JsonlWriter } from '../results/jsonl.js';
import { type SimulatorProcess, spawnSimulator } from '../session/simulator.js';
import { utcStamp } from '../session/target.js';
import { resolveEngineConfig } from '../sim/engineModel.js';
import { recordTelemetry } from '../telemetry/scraper.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { VERSION } from '../version.js';
import { createSyntheticWorkload } from '../workload/synthetic.js';
import { addEngineFlags, engineFlagArgs, engineFromFlags } from './engineFlags.js';

interface CapacityOptions extends Record<string, unknown> {
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
  ignoreEos?: boolean;
  timeScale?: string;
  seed?: string;
  out?: string;
  json?: boolean;
}

export function capacityCommand(): Command {
  const command = new Command('capacity')
    .description(
      'The batch-to-OOM curve: raise concurrent long-context requests 1, 2, 4, ... until requests fail, the server preempts or fills its KV cache, or latency falls off a cliff; measured beside the analytic prediction.',
    )
    .option('--url <url>', 'server base URL (default: start the built-in simulator)')
    .option(
      '--model <preset|config.json>',
      'the served model, for the prediction (and the simulated model without --url)',
    )
    .option(
      '--model-name <name>',
      'model name sent in requests (default: the first the server lists)',
    )
    .option('--endpoint <kind>', 'completions or chat (default: completions, no chat template)')
    .option('--input-tokens <n>', 'prompt tokens per request (default: 4096)')
    .option('--output-tokens <n>', 'output tokens per request (default: 256)')
    .option('--max-batch <n>', 'largest batch to try (default: 256)')
    .option('--batches <list>', 'batches to try instead of doubling, e.g. 1,8,16,24,32')
    .option('--requests-per-step <n>', 'requests per batch size (default: 2 x batch, at least 4)')
    .option(
      '--cliff-factor <x>',
      'a jump of p99 TTFT or mean TPOT by this factor from one step to the next is a limit (default: 3)',
    )
    .option('--metrics-url <url>', 'Prometheus metrics of the server (default: <url>/metrics)')
    .option('--scrape-interval <s>', 'seconds between metric scrapes (default: 0.5)')
    .option('--timeout <s>', 'per-request limit in seconds (default: 600)')
    .option('--api-key-env <var>', 'environment variable holding the API key')
    .option('--ignore-eos', 'ask the server for exactly --output-tokens (vLLM, SGLang)')
    .option('--time-scale <x>', 'built-in simulator: real seconds per simulated second')
    .option('--seed <n>', 'seed for prompts (default: 42)')
    .option('--out <dir>', 'results directory (default: infergauge-results/<UTC time>-capacity/)')
    .option('--json', 'print capacity.json to stdout instead of the table');
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>);
  return command.action(async (options) => {
    process.exitCode = await capacity(options as CapacityOptions);
  });
}

interface Settings {
  endpoint: Endpoint;
  inputTokens: number;
  outputTokens: number;
  batches: number[];
  requestsPerStep?: number;
  cliffFactor: number;
  scrapeIntervalS: number;
  timeoutS: number;
  seed: number;
  ignoreEos: boolean;
}

function parseSettings(o: CapacityOptions, problems: string[]): Settings {
  const num = (flag: string, value: string | undefined, fallback: number, min: number) => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isFinite(n) || n < min) {
      problems.push(`${flag} must be a number >= ${min} (got "${value}")`);
      return fallback;
    }
    return n;
  };
  const whole = (flag: string, value: string | undefined, fallback: number, min = 1) => {
    const n = num(flag, value, fallback, min);
    if (!Number.isInteger(n)) problems.push(`${flag} must be a whole number (got "${value}")`);
    return n;
  };
  let batches = doublingBatches(whole('--max-batch', o.maxBatch, 256));
  if (o.batches !== undefined) {
    const list = o.batches.split(',').map((b) => Number(b.trim()));
    if (list.length === 0 || list.some((b) => !Number.isInteger(b) || b < 1)) {
      problems.push(
        `--batches must be whole numbers >= 1 separated by commas (got "${o.batches}")`,
      );
    } else batches = [...new Set(list)].sort((a, b) => a - b);
  }
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
    ignoreEos: o.ignoreEos === true,
  };
}

async function capacity(o: CapacityOptions): Promise<number> {
  const problems: string[] = [];
  const settings = parseSettings(o, problems);
  const builtIn = o.url === undefined;
  const engineArgs = engineFlagArgs(o);
  // The prediction needs the served model and GPU: given, or the simulator's own.
  const wantsPrediction = builtIn || o.model !== undefined || o.gpu !== undefined;
  const built = wantsPrediction ? engineFromFlags(o.model, o) : undefined;
  if (built) problems.push(...built.problems);
  if (!builtIn && o.timeScale !== undefined) {
    problems.push('--time-scale applies to the built-in simulator (without --url)');
  }
  const apiKey = o.apiKeyEnv !== undefined ? process.env[o.apiKeyEnv] : process.env.OPENAI_API_KEY;
  if (o.apiKeyEnv !== undefined && apiKey === undefined) {
    problems.push(`--api-key-env names ${o.apiKeyEnv}, which is not set in the environment`);
  }
  if (problems.length > 0) {
    process.stderr.write(
      `infergauge capacity: invalid options\n${problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return EXIT.invalidOptions;
  }
  const sequenceTokens = settings.inputTokens + settings.outputTokens;
  let prediction: CapacityPrediction | undefined;
  let predictionNote: string | undefined;
  if (built?.engine) {
    const config = resolveEngineConfig(built.engine);
    try {
      prediction = predictCapacity(planVllmMemory(config), sequenceTokens, config.blockSize);
    } catch (err) {
      if (!(err instanceof EngineStartError)) throw err;
      predictionNote = err.message;
      if (builtIn) {
        process.stderr.write(
          `infergauge capacity: the built-in simulator cannot start: ${err.message}\n`,
        );
        return EXIT.failure;
      }
    }
  }
  let sim: SimulatorProcess | undefined;
  const stop = new AbortController();
  const onSignal = () => {
    if (!stop.signal.aborted) {
      process.stderr.write('\ninfergauge capacity: stopping after the requests in flight\n');
    }
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    if (builtIn) {
      sim = await spawnSimulator([
        ...(o.model !== undefined ? ['--model', o.model] : []),
        ...(o.timeScale !== undefined ? ['--time-scale', o.timeScale] : []),
        ...engineArgs,
      ]);
    }
    const url = sim?.url ?? (o.url as string);
    const headers = withApiKey({}, apiKey);
    const model = o.modelName ?? (await firstModel(url, headers));
    const metricsUrl =
      o.metricsUrl ?? `${splitServerUrl(url).origin}${splitServerUrl(url).prefix}/metrics`;
    const outDir = o.out ?? join('infergauge-results', `${utcStamp()}-capacity`);
    mkdirSync(outDir, { recursive: true });
    const steps: CapacityStep[] = [];
    let limit: CapacityLimit | undefined;
    for (const batch of settings.batches) {
      if (stop.signal.aborted) break;
      if (process.stderr.isTTY && !o.json) process.stderr.write(`batch ${batch}...\n`);
      const step = await runStep({
        url,
        model,
        headers,
        apiKey,
        metricsUrl,
        batch,
        settings,
        dir: join(outDir, `batch-${batch}`),
        stopSignal: stop.signal,
      });
      if (prediction) step.predictedKvCacheUsage = predictedKvUsage(prediction, batch);
      limit = capacityLimit(step, steps[steps.length - 1], settings.cliffFactor);
      steps.push(step);
      if (limit) break;
    }
    const lastGood = limit ? steps[steps.length - 2] : steps[steps.length - 1];
    const result = {
      schemaVersion: 1,
      tool: { name: 'infergauge', version: VERSION },
      server: {
        url: builtIn ? 'built-in simulator' : url,
        model,
        simulator: sim?.banner,
        ...(o.timeScale !== undefined ? { timeScale: Number(o.timeScale) } : {}),
      },
      workload: {
        inputTokens: settings.inputTokens,
        outputTokens: settings.outputTokens,
        sequenceTokens,
        endpoint: settings.endpoint,
        requestsPerStep: settings.requestsPerStep ?? '2 x batch, at least 4',
      },
      prediction: prediction ?? null,
      ...(predictionNote ? { predictionNote } : {}),
      steps,
      limit: limit ?? null,
      capacity: lastGood?.batch ?? 0,
      interrupted: stop.signal.aborted,
    };
    writeFileSync(join(outDir, 'capacity.json'), `${JSON.stringify(result, null, 2)}\n`);
    if (o.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else {
      process.stdout.write(
        `${renderCapacity(result, steps, limit, prediction, process.stdout.isTTY === true)}\nResults: ${outDir}\n`,
      );
    }
    return stop.signal.aborted ? EXIT.interrupted : EXIT.ok;
  } catch (err) {
    process.stderr.write(`infergauge capacity: ${(err as Error).message}\n`);
    return EXIT.failure;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await sim?.stop();
  }
}

async function firstModel(url: string, headers: Record<string, string>): Promise<string> {
  const { origin, prefix } = splitServerUrl(url);
  const response = await request(`${origin}${prefix}/v1/models`, {
    headers,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  const text = await response.body.text();
  const model =
    response.statusCode === 200 ? firstListedModel(JSON.parse(text) as unknown) : undefined;
  if (model === undefined) {
    throw new Error(`could not learn the model from ${url}/v1/models; pass --model-name NAME`);
  }
  return model;
}

/** One batch size: a closed loop at `batch` with server metrics scraped on the run's clock. */
async function runStep(c: {
  url: string;
  model: string;
  headers: Record<string, string>;
  apiKey: string | undefined;
  metricsUrl: string;
  batch: number;
  settings: Settings;
  dir: string;
  stopSignal: AbortSignal;
}): Promise<CapacityStep> {
  const { batch, settings } = c;
  mkdirSync(c.dir, { recursive: true });
  const load = { mode: 'closed' as const, concurrency: batch };
  const records = new JsonlWriter<RequestRecord>(join(c.dir, 'records.jsonl'));
  const builder = new SummaryBuilder({ load });
  const clock = createRunClock();
  const telemetry = recordTelemetry({
    sources: [{ kind: 'prometheus', url: c.metricsUrl }],
    intervalMs: settings.scrapeIntervalS * 1000,
    nowMs: () => clock.nowUs() / 1000,
    headers: c.headers,
    sink: new JsonlWriter<TelemetrySnapshot>(join(c.dir, 'telemetry.jsonl')),
  });
  let server: ServerMetricsSummary | undefined;
  let result: Awaited<ReturnType<typeof runLoadgen>>;
  try {
    result = await runLoadgen({
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
      },
      load,
      requests: settings.requestsPerStep ?? Math.max(4, 2 * batch),
      warmupRequests: 0,
      seed: settings.seed,
      nextRequest: createSyntheticWorkload({
        inputTokens: settings.inputTokens,
        outputTokens: settings.outputTokens,
        seed: settings.seed + batch,
      }),
      onRecord: (record) => {
        records.write(record);
        builder.add(record);
      },
      stopSignal: c.stopSignal,
      clock,
    });
  } finally {
    records.close();
    server = await telemetry.stop();
  }
  const summary = builder.build({ clientHealth: result.clientHealth });
  writeFileSync(join(c.dir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  const step: CapacityStep = {
    batch,
    completed: summary.requests.completed,
    failed: summary.requests.failed,
    errorsByKind: summary.requests.errorsByKind as Record<string, number>,
    meanConcurrency: summary.load.meanConcurrency,
    outputTokensPerS: summary.throughput.outputTokensPerS,
    perUserTokensPerS: summary.latency.outputSpeedTokS.mean,
    ttftP50Ms: summary.latency.ttftMs.p50,
    ttftP99Ms: summary.latency.ttftMs.p99,
    tpotMeanMs: summary.latency.tpotMs.mean,
    itlP99Ms: summary.latency.itlMs.p99,
  };
  // The step's server numbers: peaks over its scrapes and the growth of the preemption counter.
  const m = server?.memory;
  if (m?.kvCacheUsage) step.kvCacheUsageMax = m.kvCacheUsage.max;
  if (m?.preemptions !== undefined) step.preemptions = m.preemptions;
  if (m?.waiting) step.waitingMax = m.waiting.max;
  if (m?.gpuMemoryUsedBytes) step.gpuMemoryUsedMaxBytes = m.gpuMemoryUsedBytes.max;
  return step;
}

const BAR_WIDTH = 40;

function renderCapacity(
  result: {
    server: { model: string; simulator?: string | undefined; timeScale?: number };
    workload: { sequenceTokens: number };
    capacity: number;
  },
  steps: CapacityStep[],
  limit: CapacityLimit | undefined,
  prediction: CapacityPrediction | undefined,
  color: boolean,
): string {
  const c = color ? pc : pc.createColors(false);
  const f = (n: number | undefined, digits = 0) =>
    n === undefined || Number.isNaN(n)
      ? '-'
      : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const pct = (x: number | undefined) => (x === undefined ? '-' : `${(x * 100).toFixed(1)}%`);
  const lines: string[] = [];
  lines.push(
    c.bold(
      `Capacity of ${result.server.model}: closed loop, ${f(result.workload.sequenceTokens)} tokens per sequence`,
    ),
  );
  if (result.server.simulator) lines.push(`Simulated server: ${result.server.simulator}`);
  lines.push('');
  const table = new Table({
    head: [
      'batch',
      'measured',
      'KV peak',
      'predicted',
      'preempt',
      'waiting',
      'GPU mem',
      'out tok/s',
      'per user',
      'TTFT p50',
      'TTFT p99',
      'TPOT',
      'ITL p99',
      'failed',
    ],
    colAligns: Array(14).fill('right'),
    style: { head: [], border: [] },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  for (const s of steps) {
    table.push([
      s.batch,
      f(s.meanConcurrency, 1),
      pct(s.kvCacheUsageMax),
      pct(s.predictedKvCacheUsage),
      f(s.preemptions),
      f(s.waitingMax),
      s.gpuMemoryUsedMaxBytes === undefined
        ? '-'
        : `${(s.gpuMemoryUsedMaxBytes / 2 ** 30).toFixed(1)} GiB`,
      f(s.outputTokensPerS),
      f(s.perUserTokensPerS, 1),
      f(s.ttftP50Ms, 1),
      f(s.ttftP99Ms, 1),
      f(s.tpotMeanMs, 1),
      f(s.itlP99Ms, 1),
      s.failed > 0 ? c.red(String(s.failed)) : '0',
    ]);
  }
  lines.push(table.toString());
  lines.push(
    `(latency in ms, throughput in output tokens/s at the measured concurrency${result.server.timeScale !== undefined ? `; the simulator ran at time scale ${result.server.timeScale}, so these are ${result.server.timeScale}x its modelled times and rates are 1/${result.server.timeScale} of them` : ''})`,
  );
  lines.push('');
  lines.push(
    `KV cache usage by batch: ${c.bold('█')} measured peak, ${c.cyan('|')} analytic prediction (100% at the right edge)`,
  );
  for (const s of steps) {
    const cells = Array<string>(BAR_WIDTH + 1).fill(' ');
    const measured = Math.round(Math.min(1, s.kvCacheUsageMax ?? 0) * BAR_WIDTH);
    for (let i = 0; i < measured; i++) cells[i] = '█';
    let overflow = '';
    if (s.predictedKvCacheUsage !== undefined) {
      const at = Math.round(Math.min(1, s.predictedKvCacheUsage) * BAR_WIDTH);
      cells[at] = c.cyan('|');
      if (s.predictedKvCacheUsage > 1)
        overflow = c.cyan(` predicted ${pct(s.predictedKvCacheUsage)}: does not fit`);
    }
    lines.push(`${String(s.batch).padStart(6)} ${cells.join('')}${overflow}`);
  }
  lines.push('');
  if (limit) lines.push(c.yellow(`Limit: ${limit.detail}.`));
  else lines.push(`No limit reached up to batch ${steps[steps.length - 1]?.batch ?? 0}.`);
  const predicted = prediction
    ? ` (analytic prediction: ${f(prediction.maxBatch)}, ${f(prediction.numGpuBlocks)} KV blocks / ${f(prediction.blocksPerSequence)} per sequence)`
    : '';
  lines.push(
    c.bold(
      `Capacity: ${f(result.capacity)} concurrent sequences of ${f(result.workload.sequenceTokens)} tokens${limit ? '' : ' or more'}${predicted}.`,
    ),
  );
  return lines.join('\n');
}
