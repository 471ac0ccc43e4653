import { existsSync } from 'node:fs';
import { BACKEND_NAMES, BACKENDS, type BackendName } from '../backends/index.js';
import { REDACTED, SECRET_NAME, splitServerUrl } from '../backends/request.js';
import type { Endpoint } from '../backends/types.js';
import { UsageError } from '../errors.js';
import { parseFlagNumber } from '../flagNumber.js';
import type { LoadSpec } from '../load.js';
import { concurrencyBoundProblem, MAX_CONCURRENCY, parseShard, type ShardIndex } from '../load.js';
import type { SloCondition } from '../metrics/slo.js';
import { parseSlo } from '../metrics/slo.js';
import { type PrecisionTarget, readPrecisionTarget } from '../metrics/until.js';
import { type ProxySettings, parseProxyUrl, proxyFor, proxySettings } from '../proxy.js';
import { RECORDS_FORMATS, type RecordsFormat } from '../record.js';
import {
  readTlsOptions,
  type TlsMaterial,
  type TlsOptions,
  type TlsSettings,
  tlsSettingsOf,
} from '../tls.js';
import {
  AGENT_TRACE_SCENARIO,
  type AgentTrace,
  readAgentTraceIfAny,
} from '../workload/agentTrace.js';
import { openLoadProblems } from '../workload/arrivals.js';
import { IMPLIED_ENGINE_BLOCK_TOKENS, traceImpliedHitRate } from '../workload/blockPrompts.js';
import { SESSION_ID_STRIDE } from '../workload/conversations.js';
import { type Dataset, readDataset } from '../workload/datasets.js';
import {
  formatLengthDistribution,
  type LengthDistribution,
  parseLengthDistribution,
} from '../workload/distributions.js';
import { MAX_PROMPT_SALT } from '../workload/promptSalt.js';
import {
  isSessionScenario,
  maximumLength,
  parseScenarioList,
  type Scenario,
  withLengths,
} from '../workload/scenarios.js';
import {
  parseTraceWindow,
  readTrace,
  shapeTrace,
  TRACE_BLOCK_TOKENS,
  type TraceEntry,
  type TraceShaping,
  traceLoad,
  traceSessions,
} from '../workload/trace.js';
import type { WorkloadSource } from '../workload/workload.js';
import { noteField, serverInfoField, tagsField } from './annotations.js';
import {
  anything,
  either,
  type Field,
  flag,
  httpUrl,
  int,
  lengths,
  listOf,
  matching,
  number,
  oneOf,
  positive,
  readFields,
  text,
} from './fields.js';
import { type PlanScenario, scenarioFromPlan } from './planScenario.js';

/** Everything one `infergauge run` does, validated; the manifest stores it (API key redacted). */
export interface RunPlan {
  /** Base URL of an OpenAI-compatible server; undefined runs against the built-in simulator. */
  url?: string;
  /** Model name; undefined asks the server's `/v1/models` and takes the first. */
  model?: string;
  /** The server's wire protocol. */
  backend: BackendName;
  endpoint: Endpoint;
  load: LoadSpec;
  requests?: number;
  /** Measured sessions of the session scenarios (multi-turn, agent), which count sessions. */
  sessions?: number;
  durationS?: number;
  /**
   * `--until 'ttft.p99±5%'`: sending stops once this percentile's 95 % interval is this narrow
   * (src/metrics/until.ts), within the `requests` / `durationS` caps.
   */
  until?: PrecisionTarget;
  /** Sent first and not counted: requests, or sessions in a session scenario. */
  warmupRequests: number;
  /** The workloads to run, one after another (each its own records and summary). */
  scenarios: Scenario[];
  /** How prompt tokens are counted: 'words', 'o200k_base', 'cl100k_base', 'server' or a path. */
  tokenizer: string;
  /**
   * Trace replay: its entries give each request's time and lengths (not kept in the manifest),
   * and what reading it changed (sorted, shifted), for the command to warn about.
   */
  trace?: {
    path: string;
    entries: TraceEntry[];
    notes?: string[];
    /** What the replay does that the user asked for (window, gap cap, implied hit rate): said, not warned. */
    notices?: string[];
    /** Replay speed (`--trace-speed`): a session scenario divides its turns' gaps by it. */
    speed?: number;
    /** Tokens per `hash_ids` block (`--trace-block-tokens`; default TRACE_BLOCK_TOKENS). */
    blockTokens?: number;
    /** `--trace-window START:END`: the seconds of the trace replayed (then shifted to 0). */
    window?: { startS: number; endS: number };
    /** `--trace-max-gap-s`: the longest idle gap kept, and the trace time the cap removed. */
    maxGapS?: number;
    removedGapMs?: number;
    /**
     * The prefix-cache hit rate the entries' hash ids imply (traceImpliedHitRate, engine blocks
     * of IMPLIED_ENGINE_BLOCK_TOKENS), when they have hash ids.
     */
    impliedHitRate?: number;
    /** An agentic trace (calls that wait for others; `entries` then empty): its tasks. */
    agent?: AgentTrace;
    /** `--tool-wait-cap-s`: an agentic trace's recorded waits are cut to this (seconds). */
    toolWaitCapS?: number;
  };
  /** Prompts (and output lengths) from a dataset file. */
  dataset?: { path: string; data: Dataset };
  temperature: number;
  ignoreEos: boolean;
  /**
   * `--reset-cache`: the server's prefix cache is emptied before every run and sweep point, by
   * the engine's own route (session/cacheReset.ts); the manifest's cacheState says `flushed`.
   */
  resetCache?: boolean;
  /**
   * `--prefix-hit-rate`: the prefix-cache hit rate (0..1) the measured requests are built to
   * reach, after a prime phase (workload/hitRate.ts); the manifest's cacheState says `primed`.
   */
  prefixHitRate?: number;
  continuousUsageStats: boolean;
  /** MiB of answer a request that keeps its answer may hold (sessions, agents); default 16. */
  maxAnswerMb?: number;
  timeoutS: number;
  /**
   * `--http2`: `on` or `off`; absent is auto (HTTP/2 where an https:// endpoint offers it by
   * ALPN). The protocol chosen is the manifest's `server.protocol`.
   */
  http2?: 'on' | 'off' | 'auto';
  /** Seconds in-flight requests may take to finish after Ctrl-C before they are cancelled. */
  graceS: number;
  slo?: SloCondition[];
  seed: number;
  /**
   * A run on the simulator with --calibration: draws of the fitted values behind its prediction
   * intervals (docs/metrics.md, "Prediction intervals"); absent is PREDICTION_DRAWS, 0 none.
   */
  predictionDraws?: number;
  /**
   * Mixed into every prompt text with the seed (workload/promptSalt.ts), so that no two runs
   * send the same prompts to a server that caches prefixes. Absent until the run starts, which
   * draws a fresh one (a printed plan run twice must not repeat its prompts); the manifest's
   * plan holds the one used, and `--prompt-salt` fixes it to repeat a run's prompts exactly.
   */
  promptSalt?: number;
  /** Name of the environment variable holding the API key (the key itself is never stored). */
  apiKeyEnv?: string;
  headers: Record<string, string>;
  /**
   * The proxy (src/proxy.ts): a URL (`--proxy`), false for none (`--no-proxy`); absent,
   * the environment's (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), read as the run starts.
   */
  proxy?: string | false;
  extraBody?: Record<string, unknown>;
  out?: string;
  /**
   * `jsonl.gz` writes the records gzip-compressed (`records.jsonl.gz`); absent (the default):
   * plain `records.jsonl`.
   */
  recordsFormat?: RecordsFormat;
  label: string;
  /**
   * `--tag`: the series this run belongs to (`nightly`, `h100`), for `history` to filter and
   * group on; empty when none was given.
   */
  tags: string[];
  /** `--note`: one line about the run, as the user wrote it. */
  note?: string;
  /**
   * `--server-info KEY=VALUE`: what the user says about the server that it does not say itself
   * (engine flags, `tp=4`, `gpu=H100x8`); the manifest's `server.info`.
   */
  serverInfo?: Record<string, string>;
  /** Worker threads that send the load (default: one per core but one, at most one per user). */
  workers?: number;
  /** This process runs only this shard of the plan (`--shard i/N`; merge the shards after). */
  shard?: ShardIndex;
  /** The shared instant the run's schedule starts at (`--start-at`), for shards on many machines. */
  startAt?: { iso: string; epochMs: number };
  /**
   * Server-side sampling during the run, on the run's clock: the server's Prometheus metrics,
   * llama.cpp's `/slots`, a DCGM exporter, the local nvidia-smi, a local server's memory.
   */
  telemetry?: {
    /**
     * Whether the server's Prometheus metrics are scraped: `asked` (--server-metrics or
     * --metrics-url), or `default` (with --url, `<url>/metrics` is probed once before the run
     * and scraped only if it serves Prometheus text; without it, the built-in simulator's).
     * Absent with --no-server-metrics.
     */
    metrics?: 'asked' | 'default';
    /** Without --url, filled in with the built-in simulator's once it listens. */
    metricsUrl?: string;
    slotsUrl?: string;
    /** A dcgm-exporter's metrics (GPU memory of the server's machine). */
    dcgmUrl?: string;
    /** Poll the local `nvidia-smi` for GPU memory. */
    gpuMemory?: boolean;
    /** A local server process whose memory is read from `/proc/<pid>/status`. */
    serverPid?: number;
    intervalS: number;
  };
  /**
   * TLS towards an https:// target (src/tls.ts): the options as given, which the
   * manifest keeps, and `material`, the files read once (never written: redactPlan drops it,
   * so a redacted plan has none).
   */
  tls?: TlsSettings & { material?: TlsMaterial };
}

/**
 * The options before validation: as the command line gives them (strings), or as a program
 * does (numbers where the option is a number or a length; "256" and 256 read the same).
 */
/** The run's options as flags or a plan file give them; TLS as src/tls.ts names them. */
export interface RunPlanInput extends TlsOptions {
  url?: string;
  model?: string;
  backend?: string;
  endpoint?: string;
  concurrency?: string | number;
  rate?: string | number;
  arrival?: string;
  maxConcurrency?: string | number;
  requests?: string | number;
  sessions?: string | number;
  duration?: string | number;
  until?: string;
  warmup?: string | number;
  turns?: string | number;
  thinkTime?: string | number;
  history?: string;
  systemPrompt?: string | number;
  reasoningEffort?: string;
  thinking?: string;
  inputTokens?: string | number;
  outputTokens?: string | number;
  burstiness?: string | number;
  rampUp?: string;
  trace?: string;
  traceSpeed?: string | number;
  traceBlockTokens?: string | number;
  traceMaxGapS?: string | number;
  traceWindow?: string;
  toolWaitCapS?: string | number;
  dataset?: string;
  /** Comma-separated scenario presets. */
  scenario?: string;
  tokenizer?: string;
  sharedPrefix?: string | number;
  /** Scenarios written in a plan file (already validated for shape by the plan-file schema). */
  planScenarios?: PlanScenario[];
  temperature?: string | number;
  ignoreEos?: boolean;
  resetCache?: boolean;
  prefixHitRate?: string | number;
  continuousUsageStats?: boolean;
  maxAnswerMb?: string | number;
  timeout?: string | number;
  http2?: string;
  grace?: string | number;
  slo?: string;
  seed?: string | number;
  predictionDraws?: string | number;
  promptSalt?: string | number;
  apiKeyEnv?: string;
  header?: string[];
  /** A proxy URL (--proxy), or false (--no-proxy) to ignore the environment's. */
  proxy?: string | false;
  extraBody?: string;
  out?: string;
  recordsFormat?: string;
  label?: string;
  /** Repeatable --tag (a plan's `tags:`): one tag, or a list. */
  tag?: string | string[];
  note?: string;
  /** Repeatable --server-info KEY=VALUE. */
  serverInfo?: string | string[];
  /** `true` scrapes `<url>/metrics`; a string scrapes that URL; `false` (--no-server-metrics) none. */
  serverMetrics?: boolean | string;
  /** The same as a --server-metrics URL. */
  metricsUrl?: string;
  slots?: boolean;
  dcgmUrl?: string;
  gpuMemory?: boolean;
  serverPid?: string | number;
  scrapeInterval?: string | number;
  workers?: string | number;
  shard?: string;
  startAt?: string;
}

export const RUN_DEFAULTS = {
  concurrency: 16,
  requests: 200,
  sessions: 32,
  inputTokens: 256,
  outputTokens: 128,
  temperature: 0,
  timeoutS: 600,
  graceS: 10,
  seed: 42,
  endpoint: 'chat',
  arrival: 'poisson',
} as const;

/** How each field is spelled on the command line, with an example of a valid value. */
const FLAGS: Record<string, { flag: string; example: string }> = {
  url: { flag: '--url', example: '--url http://127.0.0.1:8000' },
  backend: { flag: '--backend', example: '--backend openai' },
  endpoint: { flag: '--endpoint', example: '--endpoint chat' },
  concurrency: { flag: '--concurrency', example: '--concurrency 16' },
  rate: { flag: '--rate', example: '--rate 2.5' },
  arrival: { flag: '--arrival', example: '--arrival gamma' },
  burstiness: { flag: '--burstiness', example: '--burstiness 0.5' },
  rampUp: { flag: '--ramp-up', example: '--ramp-up 1:60 (from 1 request/s over 60 s)' },
  trace: { flag: '--trace', example: '--trace mooncake_trace.jsonl' },
  traceSpeed: { flag: '--trace-speed', example: '--trace-speed 2' },
  traceBlockTokens: { flag: '--trace-block-tokens', example: '--trace-block-tokens 512' },
  traceMaxGapS: { flag: '--trace-max-gap-s', example: '--trace-max-gap-s 10' },
  traceWindow: { flag: '--trace-window', example: '--trace-window 600:1200 (seconds)' },
  toolWaitCapS: { flag: '--tool-wait-cap-s', example: '--tool-wait-cap-s 30' },
  dataset: { flag: '--dataset', example: '--dataset sharegpt.json' },
  maxConcurrency: { flag: '--max-concurrency', example: '--max-concurrency 64' },
  requests: { flag: '--requests', example: '--requests 200' },
  sessions: { flag: '--sessions', example: '--sessions 32' },
  turns: { flag: '--turns', example: '--turns 5 or uniform:3:8' },
  thinkTime: { flag: '--think-time', example: '--think-time 1000 or uniform:500:3000' },
  history: { flag: '--history', example: '--history actual' },
  systemPrompt: { flag: '--system-prompt', example: '--system-prompt 1024' },
  reasoningEffort: { flag: '--reasoning-effort', example: '--reasoning-effort high' },
  thinking: { flag: '--thinking', example: '--thinking on' },
  duration: { flag: '--duration', example: '--duration 60' },
  until: { flag: '--until', example: "--until 'ttft.p99±5%' --requests 20000" },
  warmup: { flag: '--warmup', example: '--warmup 10' },
  inputTokens: { flag: '--input-tokens', example: '--input-tokens 256 or uniform:128:512' },
  outputTokens: { flag: '--output-tokens', example: '--output-tokens 128 or poisson:128' },
  scenario: { flag: '--scenario', example: '--scenario chat,creative,summarize' },
  tokenizer: { flag: '--tokenizer', example: '--tokenizer o200k_base' },
  sharedPrefix: { flag: '--shared-prefix', example: '--shared-prefix 1024' },
  prefixHitRate: { flag: '--prefix-hit-rate', example: '--prefix-hit-rate 0.5' },
  temperature: { flag: '--temperature', example: '--temperature 0' },
  timeout: { flag: '--timeout', example: '--timeout 600' },
  http2: { flag: '--http2', example: '--http2 off' },
  maxAnswerMb: { flag: '--max-answer-mb', example: '--max-answer-mb 16' },
  grace: { flag: '--grace', example: '--grace 10' },
  slo: { flag: '--slo', example: "--slo 'ttft<500,tpot<50'" },
  seed: { flag: '--seed', example: '--seed 42' },
  predictionDraws: { flag: '--prediction-draws', example: '--prediction-draws 32 (0: none)' },
  promptSalt: {
    flag: '--prompt-salt',
    example: '--prompt-salt 1234 (as manifest.json records it)',
  },
  apiKeyEnv: { flag: '--api-key-env', example: '--api-key-env OPENAI_API_KEY' },
  header: { flag: '--header', example: "--header 'X-Tenant: a'" },
  proxy: { flag: '--proxy', example: '--proxy http://proxy.example.com:3128' },
  extraBody: { flag: '--extra-body', example: '--extra-body \'{"top_p": 1}\'' },
  label: { flag: '--label', example: '--label baseline' },
  tag: { flag: '--tag', example: '--tag nightly --tag h100' },
  note: { flag: '--note', example: "--note 'after the driver update'" },
  serverInfo: { flag: '--server-info', example: '--server-info tp=4 --server-info gpu=H100x8' },
  recordsFormat: { flag: '--records-format', example: '--records-format jsonl.gz' },
  serverMetrics: {
    flag: '--server-metrics',
    example: '--server-metrics http://127.0.0.1:8000/metrics',
  },
  metricsUrl: { flag: '--metrics-url', example: '--metrics-url http://127.0.0.1:8000/metrics' },
  dcgmUrl: { flag: '--dcgm-url', example: '--dcgm-url http://gpu-host:9400/metrics' },
  serverPid: { flag: '--server-pid', example: '--server-pid $(pgrep -f "vllm serve")' },
  scrapeInterval: { flag: '--scrape-interval', example: '--scrape-interval 1' },
  workers: { flag: '--workers', example: '--workers 4' },
  shard: { flag: '--shard', example: '--shard 0/4' },
  startAt: { flag: '--start-at', example: '--start-at 2026-11-29T23:00:00Z' },
  caCert: { flag: '--ca-cert', example: '--ca-cert company-ca.pem' },
  clientCert: { flag: '--client-cert', example: '--client-cert client.pem' },
  clientKey: { flag: '--client-key', example: '--client-key client.key' },
  clientKeyPassphraseEnv: {
    flag: '--client-key-passphrase-env',
    example: '--client-key-passphrase-env CLIENT_KEY_PASS',
  },
  insecure: { flag: '--insecure', example: '--insecure' },
  tlsServername: { flag: '--tls-servername', example: '--tls-servername api.internal' },
};

/**
 * `--rate inf` (or a plan's `.inf`): vLLM's offline mode, every request at once. The one number
 * option that takes Infinity; every other refuses it (src/flagNumber.ts).
 */
const allAtOnce: Field<number> = (raw) =>
  raw === Number.POSITIVE_INFINITY || (typeof raw === 'string' && /^\s*inf(inity)?\s*$/i.test(raw))
    ? { value: Number.POSITIVE_INFINITY }
    : { problem: 'must be a number above 0, or inf (every request at once)' };

/** Requests in flight: a whole number from 1 to MAX_CONCURRENCY (src/load.ts says why). */
const concurrencyField: Field<number> = (raw) => {
  const n = parseFlagNumber(raw, { min: 1, integer: true });
  if ('value' in n && n.value > MAX_CONCURRENCY)
    return { problem: concurrencyBoundProblem(n.value) };
  return n;
};

/** A proxy URL: http://, or a bare `host:port` as curl takes it. */
const proxyUrl: Field<string> = (raw) => {
  if (typeof raw !== 'string') return { problem: 'must be a proxy URL such as http://host:port' };
  try {
    parseProxyUrl(raw.trim());
    return { value: raw.trim() };
  } catch (err) {
    return { problem: `cannot be used: ${(err as Error).message}` };
  }
};

/** Every option of a plan and how its raw value is read (a problem names the flag). */
const OPTIONS = {
  url: httpUrl,
  model: text(1),
  backend: oneOf(BACKEND_NAMES, `must be one of ${BACKEND_NAMES.join(', ')}`),
  endpoint: oneOf(['chat', 'completions'], 'must be chat or completions'),
  concurrency: concurrencyField,
  rate: either(positive(), allAtOnce),
  arrival: oneOf(['poisson', 'constant', 'gamma'], 'must be poisson, constant or gamma'),
  burstiness: positive(),
  rampUp: matching(/^\d+(\.\d+)?:\d+(\.\d+)?$/, 'must be FROM_RATE:SECONDS'),
  trace: text(1),
  traceSpeed: positive(),
  traceBlockTokens: int(1),
  traceMaxGapS: positive(),
  traceWindow: traceWindowField,
  toolWaitCapS: number({ min: 0 }),
  dataset: text(1),
  maxConcurrency: concurrencyField,
  requests: int(1),
  sessions: int(1),
  turns: lengths(),
  thinkTime: lengths(),
  history: oneOf(['actual', 'reference'], 'must be actual or reference'),
  systemPrompt: int(0),
  reasoningEffort: oneOf(['low', 'medium', 'high'], 'must be low, medium or high'),
  thinking: oneOf(['on', 'off'], 'must be on or off'),
  duration: positive(),
  until: ((raw) =>
    typeof raw === 'string'
      ? readPrecisionTarget(raw)
      : { problem: 'must be text' }) as Field<PrecisionTarget>,
  warmup: int(0),
  inputTokens: lengths(),
  outputTokens: lengths(),
  scenario: text(1),
  tokenizer: text(1),
  sharedPrefix: int(0),
  planScenarios: listOf(anything<PlanScenario>()),
  temperature: number({ min: 0, max: 2 }),
  ignoreEos: flag,
  resetCache: flag,
  prefixHitRate: number({ min: 0, max: 1 }),
  continuousUsageStats: flag,
  maxAnswerMb: positive(),
  timeout: positive(),
  http2: oneOf(['auto', 'on', 'off'], 'must be auto, on or off'),
  grace: number({ min: 0 }),
  slo: text(),
  seed: int(0),
  predictionDraws: number({ min: 0, max: 1000, integer: true }),
  promptSalt: number({ min: 0, max: MAX_PROMPT_SALT, integer: true }),
  apiKeyEnv: matching(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'),
  header: listOf(text()),
  proxy: ((raw) => (raw === false ? { value: false } : proxyUrl(raw))) as Field<string | false>,
  extraBody: text(),
  out: text(1),
  recordsFormat: oneOf(RECORDS_FORMATS, `must be ${RECORDS_FORMATS.join(' or ')}`),
  serverMetrics: either(flag, httpUrl),
  metricsUrl: httpUrl,
  slots: flag,
  dcgmUrl: httpUrl,
  gpuMemory: flag,
  serverPid: int(1),
  scrapeInterval: positive(),
  // 0 sends from the main thread (no worker threads), as bench:client does.
  workers: int(0),
  shard: text(),
  startAt: text(),
  label: matching(/^[A-Za-z0-9._-]+$/, 'may hold only letters, digits, dot, dash, underscore'),
  tag: tagsField,
  note: noteField,
  serverInfo: serverInfoField,
  caCert: text(1),
  clientCert: text(1),
  clientKey: text(1),
  clientKeyPassphraseEnv: matching(
    /^[A-Za-z_][A-Za-z0-9_]*$/,
    'must be an environment variable name',
  ),
  insecure: flag,
  tlsServername: text(1),
};
/** The options of a plan, each read into its type. */
type ValidOptions = ReturnType<typeof readFields<typeof OPTIONS>>['values'];

/** A plan that cannot run, with the flag to change and an example of a valid value. */
export class PlanError extends UsageError {
  constructor(problems: string[]) {
    super(problems, 'IG_PLAN_INVALID');
  }
}

/** A multi-line message as one problem, its later lines indented under it. */
function indent(message: string): string {
  return message.replace(/\n\s*/g, '\n      ');
}

function problem(field: string, message: string): string {
  const spelling = Object.hasOwn(FLAGS, field) ? FLAGS[field] : undefined;
  return spelling
    ? `${spelling.flag} ${message} (for example ${spelling.example})`
    : `${field} ${message}`;
}

/**
 * `--prefix-hit-rate` builds every prompt itself (shared prefixes, then text of its own) from a
 * fixed prompt length: what shapes prompts otherwise cannot come with it.
 */
function hitRateProblems(input: RunPlanInput, scenarios: readonly Scenario[]): string[] {
  const problems: string[] = [];
  const with_ = (what: string) =>
    `--prefix-hit-rate cannot be combined with ${what}: it builds every prompt itself (shared prefixes, then text of its own)`;
  if (input.sharedPrefix !== undefined) problems.push(with_('--shared-prefix'));
  if (input.trace !== undefined) problems.push(with_('--trace'));
  if (input.dataset !== undefined) problems.push(with_('--dataset'));
  for (const sc of scenarios) {
    if (isSessionScenario(sc)) {
      problems.push(with_(`the session scenario ${sc.name} (its turns share their history)`));
    } else if (sc.input.kind !== 'fixed') {
      problems.push(
        `--prefix-hit-rate needs one prompt length, so the shared prefix is the same share of every prompt: scenario ${sc.name} draws its --input-tokens (for example --input-tokens 1024)`,
      );
    }
  }
  return problems;
}

/** Options that only mean something together, or that contradict each other. */
function combinationProblems(input: RunPlanInput): string[] {
  const problems: string[] = [];
  if (input.concurrency !== undefined && input.rate !== undefined) {
    problems.push(
      '--concurrency and --rate cannot be combined: --concurrency N keeps N requests in flight (closed loop), --rate R sends R requests/s (open loop); cap an open loop with --max-concurrency',
    );
  }
  // Open loops both: a trace replay is capped as a rate is (traceLoad takes the cap).
  if (input.maxConcurrency !== undefined && input.rate === undefined && input.trace === undefined) {
    problems.push(
      problem(
        'maxConcurrency',
        'applies only with --rate or --trace; for a closed loop use --concurrency',
      ),
    );
  }
  for (const key of ['arrival', 'burstiness', 'rampUp'] as const) {
    if (input[key] !== undefined && input.rate === undefined) {
      problems.push(problem(key, 'applies only with --rate'));
    } else if (input[key] !== undefined && 'value' in allAtOnce(input.rate)) {
      problems.push(
        problem(key, 'shapes arrivals at a finite --rate; --rate inf sends all at once'),
      );
    }
  }
  // The rule shortens a run; it never makes one endless: a cap of the user's own is its bound.
  if (
    input.until !== undefined &&
    input.requests === undefined &&
    input.duration === undefined &&
    input.sessions === undefined &&
    input.trace === undefined
  ) {
    problems.push(
      problem(
        'until',
        'needs a cap to stop at if the target is never met: give --requests N or --duration S',
      ),
    );
  }
  if (input.duration !== undefined && 'value' in allAtOnce(input.rate)) {
    problems.push(
      '--rate inf sends every request at once: give --requests N (or --sessions N) instead of --duration',
    );
  }
  if (input.trace !== undefined) {
    for (const key of ['rate', 'concurrency', 'arrival', 'duration'] as const) {
      if (input[key] !== undefined) {
        problems.push(
          `${FLAGS[key]?.flag ?? key} cannot be combined with --trace: the trace sets when each request is sent`,
        );
      }
    }
    if (input.dataset !== undefined) {
      problems.push(
        "--trace and --dataset cannot be combined: the trace already sets each request's lengths",
      );
    }
  } else {
    for (const key of [
      'traceSpeed',
      'traceBlockTokens',
      'traceMaxGapS',
      'traceWindow',
      'toolWaitCapS',
    ] as const) {
      if (input[key] !== undefined) problems.push(problem(key, 'applies only with --trace'));
    }
  }
  if (input.burstiness !== undefined && input.arrival !== undefined && input.arrival !== 'gamma') {
    problems.push(
      problem('burstiness', 'shapes gamma arrivals: drop --arrival or use --arrival gamma'),
    );
  }
  return problems;
}

/** Validates command-line input into a RunPlan, or throws PlanError naming every bad field. */
export function parseRunPlan(input: RunPlanInput, env: NodeJS.ProcessEnv = {}): RunPlan {
  // Every problem is reported at once, so one attempt fixes them all.
  const { values: o, problems } = readFields(OPTIONS, { ...input }, problem);
  // The checks below that read the values need every value valid.
  const valid = problems.length === 0;
  problems.push(...combinationProblems(input));
  let trace: RunPlan['trace'];
  if (input.trace !== undefined) {
    try {
      const agent = readAgentTraceIfAny(input.trace);
      if (!agent) trace = shapedTrace(input.trace, o);
      else {
        trace = { path: input.trace, entries: [], agent };
        const cut = agentTasksCut(agent);
        if (cut) trace.notes = [cut];
        for (const key of ['traceBlockTokens', 'traceMaxGapS', 'traceWindow'] as const) {
          if (input[key] !== undefined) {
            problems.push(
              problem(key, 'applies to a trace of single requests, not an agentic trace'),
            );
          }
        }
      }
    } catch (err) {
      problems.push(`--trace: ${indent((err as Error).message)}`);
    }
  }
  if (input.tokenizer !== undefined) {
    const tokenizerProblem = tokenizerPathProblem(input.tokenizer);
    if (tokenizerProblem) problems.push(tokenizerProblem);
  }
  let shard: ShardIndex | undefined;
  if (input.shard !== undefined) {
    try {
      shard = parseShard(input.shard);
    } catch (err) {
      problems.push((err as Error).message);
    }
    if (input.url === undefined) {
      problems.push(
        '--shard runs one part of a load on a server the shards share: pass its --url (for the simulator, start one with `infergauge sim --port 8000`)',
      );
    }
  }
  let startAt: RunPlan['startAt'];
  if (input.startAt !== undefined) {
    const epochMs = Date.parse(input.startAt);
    if (!/^\d{4}-\d\d-\d\dT/.test(input.startAt) || Number.isNaN(epochMs)) {
      problems.push(problem('startAt', `must be an ISO-8601 instant (got "${input.startAt}")`));
    } else startAt = { iso: new Date(epochMs).toISOString(), epochMs };
  }
  let slo: SloCondition[] | undefined;
  if (input.slo !== undefined) {
    try {
      slo = parseSlo(input.slo);
    } catch (err) {
      problems.push(problem('slo', (err as Error).message));
    }
  }
  let extraBody: Record<string, unknown> | undefined;
  if (input.extraBody !== undefined) {
    try {
      const value: unknown = JSON.parse(input.extraBody);
      if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error();
      extraBody = value as Record<string, unknown>;
    } catch {
      problems.push(problem('extraBody', 'must be a JSON object'));
    }
  }
  const headers: Record<string, string> = {};
  for (const [i, h] of (input.header ?? []).entries()) {
    const colon = h.indexOf(':');
    // Header values are often credentials: a problem names the header, never its value.
    if (colon <= 0) {
      problems.push(
        problem('header', `number ${i + 1} has no "Name:" part: it must look like "Name: value"`),
      );
      continue;
    }
    const name = h.slice(0, colon).trim().toLowerCase();
    const value = h.slice(colon + 1).trim();
    const bad = controlCharacterProblem(`--header ${JSON.stringify(name)}`, `${name}${value}`);
    if (bad) problems.push(bad);
    headers[name] = value;
  }
  const { apiKeyEnv } = apiKeyFromEnv(input.apiKeyEnv, env, problems);
  for (const key of ['url', 'metricsUrl', 'dcgmUrl', 'serverMetrics'] as const) {
    const url = input[key];
    const bad = typeof url === 'string' ? urlCredentialsProblem(FLAGS[key].flag, url) : undefined;
    if (bad) problems.push(bad);
  }
  if (valid && o.url !== undefined && o.proxy === undefined) {
    problems.push(...envProxyProblems(o.url, env));
  }
  if (valid) problems.push(...backendProblems(o));
  if (input.toolWaitCapS !== undefined && input.trace !== undefined && trace && !trace.agent) {
    problems.push(
      problem('toolWaitCapS', 'applies to an agentic trace (calls that wait for other calls)'),
    );
  }
  const scenarios = !valid
    ? []
    : trace?.agent
      ? agentTraceScenarios(input, problems)
      : buildScenarios(o, problems);
  let dataset: RunPlan['dataset'];
  if (input.dataset !== undefined) {
    try {
      // Sessions replay whole conversations; single requests only their first turn.
      const allTurns = scenarios.some(isSessionScenario);
      dataset = { path: input.dataset, data: readDataset(input.dataset, undefined, { allTurns }) };
    } catch (err) {
      problems.push(`--dataset: ${indent((err as Error).message)}`);
    }
    if (dataset?.data.format !== 'text' && input.inputTokens !== undefined) {
      problems.push(
        '--input-tokens does not apply to a prompt dataset: its prompts are used as they are (a plain-text corpus is sliced to --input-tokens)',
      );
    }
  }
  if (valid) problems.push(...sessionProblems(o, scenarios, dataset?.data, trace?.agent));
  if (valid && o.prefixHitRate !== undefined) problems.push(...hitRateProblems(input, scenarios));
  const tls = valid ? tlsPlan(o, env, problems) : undefined;
  if (problems.length > 0) throw new PlanError(problems);

  let load: LoadSpec;
  // A session scenario replays the trace's sessions: each starts at its first request's time.
  const replayedSessions =
    trace && !trace.agent && scenarios.some(isSessionScenario)
      ? traceSessions(trace.entries)
      : undefined;
  if (trace && o.traceSpeed !== undefined) trace.speed = o.traceSpeed;
  if (trace && o.toolWaitCapS !== undefined) trace.toolWaitCapS = o.toolWaitCapS;
  if (trace?.agent) {
    // Each task starts at its first call's time, as trace sessions do.
    const starts = trace.agent.tasks.map((t) => ({
      atMs: t.startMs,
      inputTokens: 0,
      outputTokens: 0,
    }));
    load = traceLoad(starts, {
      speed: o.traceSpeed ?? 1,
      source: trace.path,
      ...(o.maxConcurrency !== undefined ? { maxConcurrency: o.maxConcurrency } : {}),
    });
  } else if (trace && replayedSessions) {
    load = traceLoad(
      replayedSessions.map((session) => session.turns[0]),
      {
        speed: o.traceSpeed ?? 1,
        source: trace.path,
        shaping: traceShaping(trace),
        ...(o.maxConcurrency !== undefined ? { maxConcurrency: o.maxConcurrency } : {}),
      },
    );
  } else if (trace) {
    load = traceLoad(trace.entries, {
      speed: o.traceSpeed ?? 1,
      source: trace.path,
      shaping: traceShaping(trace),
      ...(o.maxConcurrency !== undefined ? { maxConcurrency: o.maxConcurrency } : {}),
    });
  } else if (o.rate === Number.POSITIVE_INFINITY) {
    // vLLM's --request-rate inf: every request arrives at 0, so --max-concurrency (or the whole
    // run) is the number in flight: a closed loop of that many, refilled until the last is sent.
    const sessions = scenarios.some(isSessionScenario);
    const units = sessions
      ? (o.sessions ?? RUN_DEFAULTS.sessions)
      : (o.requests ?? RUN_DEFAULTS.requests);
    load = { mode: 'closed', concurrency: o.maxConcurrency ?? units };
    if (load.concurrency > MAX_CONCURRENCY) {
      throw new PlanError([
        `--rate inf sends all ${units} ${sessions ? 'sessions' : 'requests'} at once, and the number in flight ${concurrencyBoundProblem(units)}; or cap it with --max-concurrency`,
      ]);
    }
  } else if (o.rate !== undefined) {
    const [fromRate, seconds] = (o.rampUp ?? '').split(':').map(Number);
    load = {
      mode: 'open',
      rate: o.rate,
      arrival: o.arrival ?? (o.burstiness !== undefined ? 'gamma' : RUN_DEFAULTS.arrival),
      ...(o.burstiness !== undefined ? { burstiness: o.burstiness } : {}),
      ...(o.rampUp !== undefined ? { rampUp: { fromRate, seconds } } : {}),
      ...(o.maxConcurrency !== undefined ? { maxConcurrency: o.maxConcurrency } : {}),
    };
    const loadProblems = openLoadProblems(load);
    if (loadProblems.length > 0) throw new PlanError(loadProblems);
  } else load = { mode: 'closed', concurrency: o.concurrency ?? RUN_DEFAULTS.concurrency };
  // A trace replays all its entries unless --requests takes fewer.
  const requests =
    o.requests ??
    (trace ? trace.entries.length : o.duration === undefined ? RUN_DEFAULTS.requests : undefined);
  const sessions =
    o.sessions ??
    trace?.agent?.tasks.length ??
    replayedSessions?.length ??
    (o.duration === undefined ? RUN_DEFAULTS.sessions : undefined);
  const plan: RunPlan = {
    backend: o.backend ?? 'openai',
    endpoint: o.endpoint ?? BACKENDS[o.backend ?? 'openai'].supports.endpoints[0],
    load,
    warmupRequests: o.warmup ?? 0,
    scenarios,
    tokenizer: o.tokenizer ?? 'words',
    temperature: o.temperature ?? RUN_DEFAULTS.temperature,
    ignoreEos: o.ignoreEos ?? false,
    ...(o.resetCache ? { resetCache: true } : {}),
    ...(o.prefixHitRate !== undefined ? { prefixHitRate: o.prefixHitRate } : {}),
    continuousUsageStats: o.continuousUsageStats ?? false,
    timeoutS: o.timeout ?? RUN_DEFAULTS.timeoutS,
    graceS: o.grace ?? RUN_DEFAULTS.graceS,
    seed: o.seed ?? RUN_DEFAULTS.seed,
    headers,
    label: o.label ?? (o.url === undefined ? 'sim' : 'run'),
    tags: o.tag ?? [],
  };
  if (o.note !== undefined) plan.note = o.note;
  if (o.serverInfo !== undefined) plan.serverInfo = o.serverInfo;
  if (o.url !== undefined) plan.url = o.url;
  if (o.promptSalt !== undefined) plan.promptSalt = o.promptSalt;
  if (o.predictionDraws !== undefined) plan.predictionDraws = o.predictionDraws;
  if (o.maxAnswerMb !== undefined) plan.maxAnswerMb = o.maxAnswerMb;
  if (o.model !== undefined) plan.model = o.model;
  if (requests !== undefined) plan.requests = requests;
  if (scenarios.some(isSessionScenario) && sessions !== undefined) plan.sessions = sessions;
  if (o.duration !== undefined) plan.durationS = o.duration;
  if (o.until !== undefined) plan.until = o.until;
  if (slo) plan.slo = slo;
  if (apiKeyEnv !== undefined) plan.apiKeyEnv = apiKeyEnv;
  if (o.proxy !== undefined) plan.proxy = o.proxy;
  if (extraBody) plan.extraBody = extraBody;
  if (o.out !== undefined) plan.out = o.out;
  if (o.recordsFormat !== undefined) plan.recordsFormat = o.recordsFormat;
  if (o.http2 !== undefined && o.http2 !== 'auto') plan.http2 = o.http2;
  const telemetry = telemetryPlan(o);
  if (telemetry) plan.telemetry = telemetry;
  if (trace) plan.trace = trace;
  if (trace?.impliedHitRate !== undefined && plan.tokenizer === 'words' && o.url !== undefined) {
    // Words are tokens only on the built-in simulator: elsewhere blocks share their text, but
    // not exactly B tokens each.
    trace.notes = [
      ...(trace.notes ?? []),
      `--trace hash_ids under --tokenizer words: requests share their blocks' text, but a block is ${trace.blockTokens ?? TRACE_BLOCK_TOKENS} tokens only roughly on a real server; give --tokenizer (the model's tokenizer.json, or server) for block-exact prefixes`,
    ];
  }
  if (dataset) plan.dataset = dataset;
  if (o.workers !== undefined) plan.workers = o.workers;
  if (shard) plan.shard = shard;
  if (startAt) plan.startAt = startAt;
  if (tls) plan.tls = tls;
  return plan;
}

/** The TLS options (src/tls.ts), their files read and checked now. */
function tlsPlan(
  o: ValidOptions,
  env: NodeJS.ProcessEnv,
  problems: string[],
): RunPlan['tls'] | undefined {
  return readTlsOptions(o, [o.url, o.metricsUrl, o.dcgmUrl, o.serverMetrics], env, problems);
}

/**
 * A long run (an hour or more, or over 100,000 requests) that did not choose its records format:
 * one line suggesting the compressed one; undefined otherwise.
 */
export function recordsFormatNotice(plan: RunPlan): string | undefined {
  if (plan.recordsFormat !== undefined) return undefined;
  if ((plan.durationS ?? 0) < 3600 && (plan.requests ?? 0) <= 100_000) return undefined;
  return 'a long run: --records-format jsonl.gz writes the records gzip-compressed (records.jsonl.gz, under half the size; zcat reads it)';
}

/**
 * An agentic trace sets the workload (agent-trace, a session scenario): the options that shape
 * one are refused rather than ignored.
 */
function agentTraceScenarios(input: RunPlanInput, problems: string[]): Scenario[] {
  const shaping = [
    'scenario',
    'planScenarios',
    'inputTokens',
    'outputTokens',
    'sharedPrefix',
    'turns',
    'thinkTime',
    'history',
    'systemPrompt',
  ] as const;
  for (const key of shaping) {
    if (input[key] === undefined) continue;
    const flag = key === 'planScenarios' ? "a plan file's scenarios" : (FLAGS[key]?.flag ?? key);
    problems.push(
      `${flag} cannot be combined with an agentic --trace: the trace sets every call's lengths and waits`,
    );
  }
  return [AGENT_TRACE_SCENARIO];
}

/**
 * A session sends at most SESSION_ID_STRIDE requests (record ids are `session x stride + call`),
 * so a longer task is cut to its first calls in dependency order (every wait still resolves):
 * said, as the trace then is not replayed whole.
 */
function agentTasksCut(agent: AgentTrace): string | undefined {
  const long = agent.tasks.filter((t) => t.calls.length > SESSION_ID_STRIDE);
  if (long.length === 0) return undefined;
  const first = long[0];
  return `${long.length} of the trace's tasks have more than ${SESSION_ID_STRIDE} calls (task ${JSON.stringify(first.sessionId)}: ${first.calls.length}): a session sends at most ${SESSION_ID_STRIDE}, so only the first ${SESSION_ID_STRIDE} calls of each, in the order they wait for each other, are sent`;
}

/** What a workload needs of an agentic trace (WorkloadSource's agentTasks, toolWaitCapMs). */
export function agentTraceSource(
  plan: RunPlan,
): Pick<WorkloadSource, 'agentTasks' | 'toolWaitCapMs'> {
  const trace = plan.trace;
  if (!trace?.agent) return {};
  return {
    agentTasks: trace.agent.tasks,
    ...(trace.toolWaitCapS !== undefined ? { toolWaitCapMs: trace.toolWaitCapS * 1000 } : {}),
  };
}

/** The measured count of a scenario: its sessions (multi-turn, agent) or its requests. */
export function measuredCount(plan: RunPlan, scenario: Scenario): number | undefined {
  return isSessionScenario(scenario) ? plan.sessions : plan.requests;
}

const NAMED_TOKENIZERS = ['words', 'o200k_base', 'cl100k_base', 'server'];

/** A tokenizer.json path (or directory) that is not there, said before anything starts. */
function tokenizerPathProblem(spec: string): string | undefined {
  if (NAMED_TOKENIZERS.includes(spec) || spec.trim() === '') return undefined;
  const path = spec.startsWith('hf:') ? spec.slice(3) : spec;
  if (existsSync(path)) return undefined;
  return `--tokenizer ${spec}: no such file or directory; pass ${NAMED_TOKENIZERS.join(', ')}, or the path of a local tokenizer.json (or a directory holding one)`;
}

/**
 * What is sampled during the run. The server's `/metrics` is on by default (probed first when
 * it is a --url server), so every run against a server with metrics carries its memory story.
 */
function telemetryPlan(o: ValidOptions): RunPlan['telemetry'] {
  const server = o.url === undefined ? undefined : splitServerUrl(o.url);
  const base = server ? server.origin + server.prefix : '';
  const telemetry: NonNullable<RunPlan['telemetry']> = { intervalS: o.scrapeInterval ?? 1 };
  const asked = typeof o.serverMetrics === 'string' ? o.serverMetrics : o.metricsUrl;
  if (asked !== undefined) {
    telemetry.metrics = 'asked';
    telemetry.metricsUrl = asked;
  } else if (o.serverMetrics !== false) {
    telemetry.metrics = o.serverMetrics === true ? 'asked' : 'default';
    // Without --url the built-in simulator's /metrics is filled in once it listens.
    if (server) telemetry.metricsUrl = `${base}/metrics`;
  }
  if (o.slots) telemetry.slotsUrl = `${base}/slots`;
  if (o.dcgmUrl !== undefined) telemetry.dcgmUrl = o.dcgmUrl;
  if (o.gpuMemory) telemetry.gpuMemory = true;
  if (o.serverPid !== undefined) telemetry.serverPid = o.serverPid;
  const sources = [
    telemetry.metrics,
    telemetry.slotsUrl,
    telemetry.dcgmUrl,
    telemetry.gpuMemory,
    telemetry.serverPid,
  ];
  return sources.some((x) => x !== undefined) ? telemetry : undefined;
}

/** Telemetry the user asked for (not the default scrape of `/metrics`). */
export function telemetryAsked(telemetry: RunPlan['telemetry']): boolean {
  if (!telemetry) return false;
  const { metrics, slotsUrl, dcgmUrl, gpuMemory, serverPid } = telemetry;
  return metrics === 'asked' || [slotsUrl, dcgmUrl, gpuMemory, serverPid].some((x) => x);
}

/**
 * The scenarios to run: a plan file's, the --scenario presets, or one default; --input-tokens,
 * --output-tokens and --shared-prefix apply over every one of them.
 */
function buildScenarios(o: ValidOptions, problems: string[]): Scenario[] {
  let scenarios: Scenario[] = [
    {
      name: 'default',
      input: { kind: 'fixed', value: RUN_DEFAULTS.inputTokens },
      output: { kind: 'fixed', value: RUN_DEFAULTS.outputTokens },
    },
  ];
  if (o.planScenarios !== undefined && o.scenario !== undefined) {
    problems.push("--scenario and a plan file's scenarios cannot be combined: keep one of them");
    return [];
  }
  try {
    if (o.planScenarios !== undefined) {
      scenarios = (o.planScenarios as PlanScenario[]).map((s, i) => scenarioFromPlan(s, i));
    } else if (o.scenario !== undefined) scenarios = parseScenarioList(o.scenario);
  } catch (err) {
    problems.push(
      o.scenario !== undefined
        ? problem('scenario', (err as Error).message)
        : (err as Error).message,
    );
    return [];
  }
  const names = new Set<string>();
  for (const s of scenarios) {
    if (names.has(s.name))
      problems.push(`scenario "${s.name}" is listed twice: give each a distinct name`);
    names.add(s.name);
  }
  return scenarios.map((s) => {
    const scenario = withSessionFlags(withLengths(s, o.inputTokens, o.outputTokens), o);
    if (o.sharedPrefix !== undefined) scenario.sharedPrefixTokens = o.sharedPrefix;
    for (const [field, d] of [
      ['inputTokens', scenario.input],
      ['outputTokens', scenario.output],
    ] as const) {
      if (lowestLength(d) < 1) {
        problems.push(
          problem(
            field,
            `can be 0 in scenario "${scenario.name}" (${formatLengthDistribution(d)}): servers refuse ${field === 'inputTokens' ? 'an empty prompt (vLLM: "the decoder prompt cannot be empty")' : 'max_tokens 0 (vLLM: "max_tokens must be at least 1")'}; every length must be at least 1`,
          ),
        );
      }
    }
    const prefix = scenario.sharedPrefixTokens ?? 0;
    // Shorter draws are lifted to the prefix; a distribution that never reaches it is an error.
    if (prefix > 0 && maximumLength(scenario.input) < prefix) {
      problems.push(
        `scenario "${scenario.name}": --shared-prefix ${prefix} is longer than its longest prompt (${formatLengthDistribution(scenario.input)}); prompts must hold the prefix`,
      );
    }
    return scenario;
  });
}

/** --turns, --think-time, --history, --system-prompt and the reasoning flags over a scenario. */
function withSessionFlags(s: Scenario, o: ValidOptions): Scenario {
  const scenario = { ...s };
  if (scenario.session) {
    scenario.session = {
      ...scenario.session,
      ...(o.turns !== undefined ? { turns: parseLengthDistribution(o.turns) } : {}),
      ...(o.thinkTime !== undefined ? { thinkTimeMs: parseLengthDistribution(o.thinkTime) } : {}),
      ...(o.history !== undefined ? { history: o.history } : {}),
      ...(o.systemPrompt !== undefined ? { systemPromptTokens: o.systemPrompt } : {}),
    };
  }
  if (scenario.agent && o.systemPrompt !== undefined) {
    scenario.agent = { ...scenario.agent, systemPromptTokens: o.systemPrompt };
  }
  if (o.reasoningEffort !== undefined || o.thinking !== undefined) {
    scenario.reasoning = {
      ...scenario.reasoning,
      ...(o.reasoningEffort !== undefined ? { effort: o.reasoningEffort } : {}),
      ...(o.thinking !== undefined ? { enableThinking: o.thinking === 'on' } : {}),
    };
  }
  return scenario;
}

/**
 * What a session scenario (multi-turn, agent) cannot do with the other options: its history
 * and tool calls are chat messages, and it counts sessions.
 */
function sessionProblems(
  o: ValidOptions,
  scenarios: Scenario[],
  dataset: Dataset | undefined,
  agentTrace: AgentTrace | undefined,
): string[] {
  const problems: string[] = [];
  const sessions = scenarios.filter(isSessionScenario);
  const names = sessions.map((s) => s.name).join(', ');
  if (sessions.length === 0) {
    if (o.sessions !== undefined) {
      problems.push(
        problem(
          'sessions',
          'counts the sessions of a session scenario: add --scenario multi-turn or agent (or use --requests)',
        ),
      );
    }
    for (const key of ['turns', 'thinkTime', 'history'] as const) {
      if (o[key] !== undefined) {
        problems.push(
          problem(
            key,
            'shapes multi-turn sessions: add --scenario multi-turn (or a plan scenario with session:)',
          ),
        );
      }
    }
    if (o.systemPrompt !== undefined) {
      problems.push(
        problem('systemPrompt', 'applies to session scenarios: add --scenario multi-turn or agent'),
      );
    }
    return problems;
  }
  if (o.requests !== undefined && sessions.length === scenarios.length) {
    problems.push(
      `--requests does not apply to ${names}: a session scenario counts sessions; use --sessions N (each session sends several requests)`,
    );
  }
  if ((o.backend ?? 'openai') !== 'openai' || o.endpoint === 'completions') {
    problems.push(
      `scenario ${names} sends conversations as chat messages: use --backend openai --endpoint chat (vLLM, SGLang, TGI, llama.cpp and Ollama all serve /v1/chat/completions)`,
    );
  }
  if (o.trace !== undefined && !agentTrace) {
    problems.push(
      `--trace cannot drive scenario ${names}: replay a trace with single-request scenarios`,
    );
  }
  if (dataset !== undefined && dataset.format !== 'sharegpt') {
    problems.push(
      `--dataset for scenario ${names} must be ShareGPT conversations (a ${dataset.format} file has no turns)`,
    );
  }
  if (dataset !== undefined && sessions.some((s) => s.agent)) {
    problems.push(
      '--dataset does not apply to the agent scenario: its turns are tool calls and tool results',
    );
  }
  return problems;
}

/** The smallest length `d` can ask for; drawn distributions are kept at 1 or more when drawn. */
function lowestLength(d: LengthDistribution): number {
  switch (d.kind) {
    case 'fixed':
      return d.value;
    case 'uniform':
      return d.min;
    case 'empirical':
      return Math.min(...d.values);
    default:
      return 1;
  }
}

/** What the chosen backend cannot do, said before anything is sent. */
function backendProblems(o: ValidOptions): string[] {
  const name = o.backend ?? 'openai';
  const { supports } = BACKENDS[name];
  const problems: string[] = [];
  if (o.endpoint !== undefined && !supports.endpoints.includes(o.endpoint)) {
    problems.push(
      `--endpoint ${o.endpoint} is not offered by --backend ${name} (it has ${supports.endpoints.join(', ') || 'one route'})`,
    );
  }
  if (o.ignoreEos && !supports.ignoreEos) {
    problems.push(`--ignore-eos is not supported by --backend ${name}: its output may stop early`);
  }
  if (o.continuousUsageStats && !supports.continuousUsageStats) {
    problems.push(
      `--continuous-usage-stats is an OpenAI/vLLM option, not one of --backend ${name}`,
    );
  }
  if (supports.modelRequired && o.model === undefined) {
    problems.push(`--backend ${name} needs --model NAME (the model is part of the request)`);
  }
  if (o.url === undefined && o.slots) {
    problems.push('--slots reads llama.cpp servers and needs --url');
  }
  const other = o.slots || o.dcgmUrl !== undefined || o.gpuMemory || o.serverPid !== undefined;
  if (o.scrapeInterval !== undefined && o.serverMetrics === false && !other) {
    problems.push(
      '--scrape-interval applies only when something is scraped; --no-server-metrics turned it all off',
    );
  }
  if (o.serverMetrics === false && o.metricsUrl !== undefined) {
    problems.push(
      '--no-server-metrics and --metrics-url contradict each other: keep one (for example --metrics-url http://127.0.0.1:8000/metrics)',
    );
  }
  if (
    typeof o.serverMetrics === 'string' &&
    o.metricsUrl !== undefined &&
    o.serverMetrics !== o.metricsUrl
  ) {
    problems.push(
      `--server-metrics ${o.serverMetrics} and --metrics-url ${o.metricsUrl} name two URLs; --metrics-url is the same option, keep one (for example --metrics-url ${o.metricsUrl})`,
    );
  }
  if (name !== 'openai' && o.url === undefined) {
    problems.push(
      `the built-in simulator speaks --backend openai; pass --url for --backend ${name}`,
    );
  }
  return problems;
}

/**
 * A header or key that would be sent with a CR, LF, NUL or other control character (a key read
 * from a file with a Windows line end): no HTTP request may carry it, so the run cannot start.
 * `what` names where it came from; the value itself is never shown.
 */
export function controlCharacterProblem(what: string, value: string): string | undefined {
  // Tab is allowed inside a header value (RFC 9110 field-value); nothing else below 0x20 is.
  const control = [...value].some((c) => {
    const code = c.charCodeAt(0);
    return (code < 0x20 && c !== '\t') || code === 0x7f;
  });
  if (!control) return undefined;
  return `${what} contains a line break or control character (e.g. a Windows line end read from a file): remove it (the value is not shown)`;
}

/**
 * The API key a command sends: the variable `named` (--api-key-env; a problem when it is not
 * set), else OPENAI_API_KEY when set. A key with a control character in it is a problem.
 */
export function apiKeyFromEnv(
  named: string | undefined,
  env: NodeJS.ProcessEnv,
  problems: string[],
): { apiKey?: string; apiKeyEnv?: string } {
  if (named !== undefined && envVariable(env, named) === undefined) {
    problems.push(problem('apiKeyEnv', `names ${named}, which is not set in the environment`));
  }
  const apiKeyEnv = named ?? (env.OPENAI_API_KEY !== undefined ? 'OPENAI_API_KEY' : undefined);
  const apiKey = apiKeyEnv === undefined ? undefined : envVariable(env, apiKeyEnv);
  if (apiKeyEnv === undefined || apiKey === undefined) return apiKeyEnv ? { apiKeyEnv } : {};
  const bad = apiKeyProblem(apiKeyEnv, apiKey, named !== undefined);
  if (bad) problems.push(bad);
  return { apiKey, apiKeyEnv };
}

/**
 * The environment variable `name`, own keys only: `--api-key-env constructor` names no variable,
 * not Object's function (which was read as the key and ended the run on a TypeError).
 */
export function envVariable(env: NodeJS.ProcessEnv, name: string): string | undefined {
  return Object.hasOwn(env, name) ? env[name] : undefined;
}

/** The API key in environment variable `name` (`named`: by --api-key-env, else by default). */
function apiKeyProblem(name: string, key: string, named: boolean): string | undefined {
  return controlCharacterProblem(
    named
      ? `--api-key-env ${name}: the API key in ${name}`
      : `the API key in ${name} (the default --api-key-env)`,
    key,
  );
}

/**
 * The proxy settings a plan's requests go by (src/proxy.ts): none for the built-in
 * simulator (a child process on loopback that no proxy could reach); else `--proxy`, or with
 * `--no-proxy` none, or the environment's.
 */
export function planProxySettings(
  plan: RunPlan,
  env: NodeJS.ProcessEnv,
): ProxySettings | undefined {
  if (plan.url === undefined) return undefined;
  return proxySettings(
    {
      ...(typeof plan.proxy === 'string' ? { proxy: plan.proxy } : {}),
      noProxy: plan.proxy === false,
    },
    env,
  );
}

/** An environment proxy (HTTPS_PROXY...) the target `url` would go through that cannot be used. */
function envProxyProblems(url: string, env: NodeJS.ProcessEnv): string[] {
  try {
    proxyFor(url, proxySettings({}, env));
    return [];
  } catch (err) {
    const variable = url.startsWith('https:') ? 'HTTPS_PROXY' : 'HTTP_PROXY';
    return [
      `${variable} (from the environment): ${(err as Error).message}; unset it, or pass --no-proxy or --proxy URL`,
    ];
  }
}

/**
 * A URL with `user:password@`: it is not sent as Basic auth, and it would be written to the
 * manifest and reports. Refused, with where credentials go instead.
 */
export function urlCredentialsProblem(flag: string, url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.username === '' && parsed.password === '') return undefined;
  return `${flag} holds credentials (user:password@), which would be written to manifest.json and the reports: remove them and pass the credentials with --api-key-env VAR (a bearer key) or --header 'authorization: Basic ...'`;
}

/** A JSON value with every field named like a secret, at any depth, hidden. */
function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, SECRET_NAME.test(k) ? REDACTED : redactSecrets(v)]),
  );
}

/** A URL without its `user:password@` (defence in depth: such a URL is refused at parse). */
function withoutUserinfo(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username === '' && parsed.password === '') return url;
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return url;
  }
}

/** A proxy URL without credentials (a bare `host:port` has none to lose). */
export function proxyWithoutUserinfo(proxy: string): string {
  const at = proxy.lastIndexOf('@');
  if (at < 0) return proxy;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(proxy)?.[0] ?? '';
  return `${scheme}${proxy.slice(at + 1)}`;
}

/**
 * The plan as stored in the manifest and printed by `plan --print`: header values and
 * --extra-body fields named like credentials are hidden, and no URL keeps a `user:password@`.
 */
export function redactPlan(plan: RunPlan): RunPlan {
  const headers = Object.fromEntries(
    Object.entries(plan.headers).map(([k, v]) => [k, SECRET_NAME.test(k) ? REDACTED : v]),
  );
  // Trace entries and dataset contents stay in their files: the manifest names them.
  // TLS material (a private key, its passphrase) is never written: the settings name the files.
  const { trace, dataset, url, extraBody, telemetry, tls, proxy, ...rest } = plan;
  const urls = telemetry
    ? (['metricsUrl', 'slotsUrl', 'dcgmUrl'] as const).filter((k) => telemetry[k] !== undefined)
    : [];
  return {
    ...rest,
    ...(url !== undefined ? { url: withoutUserinfo(url) } : {}),
    ...(proxy !== undefined
      ? { proxy: proxy === false ? false : proxyWithoutUserinfo(proxy) }
      : {}),
    ...(extraBody ? { extraBody: redactSecrets(extraBody) as Record<string, unknown> } : {}),
    ...(telemetry
      ? {
          telemetry: {
            ...telemetry,
            ...Object.fromEntries(urls.map((k) => [k, withoutUserinfo(telemetry[k] as string)])),
          },
        }
      : {}),
    headers,
    ...(tls ? { tls: tlsSettingsOf(tls) } : {}),
    ...(trace
      ? {
          trace: {
            path: trace.path,
            entries: [],
            ...traceShaping(trace),
            // calibrate reads the trace again and keys its blocks with the block size.
            ...(trace.blockTokens !== undefined ? { blockTokens: trace.blockTokens } : {}),
            // The cap changes what was sent; the trace's own contents stay out of the manifest.
            ...(trace.toolWaitCapS !== undefined ? { toolWaitCapS: trace.toolWaitCapS } : {}),
          },
        }
      : {}),
    ...(dataset
      ? { dataset: { path: dataset.path, data: { format: dataset.data.format } as Dataset } }
      : {}),
  };
}

function traceWindowField(raw: unknown): ReturnType<Field<{ startS: number; endS: number }>> {
  const read = parseTraceWindow(typeof raw === 'string' ? raw : '');
  return 'problem' in read ? read : { value: read };
}

/**
 * The trace a run replays: read with its block size, cut to --trace-window, its idle gaps capped
 * by --trace-max-gap-s, in that order (--trace-speed then divides what is left); every change is
 * said in the notes, and so is the hit rate its hash ids imply. `size --trace` shapes its trace
 * here too, so that it sizes what run replays.
 */
export function shapedTrace(
  path: string,
  o: {
    traceBlockTokens?: number;
    traceWindow?: { startS: number; endS: number };
    traceMaxGapS?: number;
    requests?: number;
    warmup?: number;
  },
): NonNullable<RunPlan['trace']> {
  const notes: string[] = [];
  const blockTokens = o.traceBlockTokens ?? TRACE_BLOCK_TOKENS;
  const shaped = shapeTrace(
    readTrace(path, undefined, (note) => notes.push(note), blockTokens),
    {
      ...(o.traceWindow ? { window: o.traceWindow } : {}),
      ...(o.traceMaxGapS !== undefined ? { maxGapS: o.traceMaxGapS } : {}),
    },
    'replayed',
  );
  const { entries } = shaped;
  const notices = [...shaped.notices];
  const trace: NonNullable<RunPlan['trace']> = { path, entries, ...shaped.shaping };
  if (o.traceBlockTokens !== undefined) trace.blockTokens = o.traceBlockTokens;
  if (entries.some((e) => e.hashIds !== undefined)) {
    // Of what is sent: warm-up and measured requests take the first entries, in order.
    const sent =
      o.requests !== undefined
        ? Math.min(entries.length, (o.warmup ?? 0) + o.requests)
        : entries.length;
    const rate = traceImpliedHitRate(entries.slice(0, sent), {
      blockTokens,
      engineBlockTokens: IMPLIED_ENGINE_BLOCK_TOKENS,
    });
    trace.impliedHitRate = rate;
    const which =
      sent < entries.length
        ? `the first ${sent} requests' hash_ids imply`
        : `the trace's hash_ids imply`;
    notices.push(
      `${which} a prefix-cache hit rate of ${(rate * 100).toFixed(1)}% (an unbounded cache of ${IMPLIED_ENGINE_BLOCK_TOKENS}-token blocks, each prefill done before the next request; requests in flight together miss what neither has cached yet)`,
    );
  }
  if (notes.length > 0) trace.notes = notes;
  if (notices.length > 0) trace.notices = notices;
  return trace;
}

/** The plan's trace shaping as the replay's JSON (the manifest's load) records it. */
function traceShaping(trace: NonNullable<RunPlan['trace']>): TraceShaping {
  return {
    ...(trace.window ? { window: trace.window } : {}),
    ...(trace.maxGapS !== undefined
      ? { maxGapS: trace.maxGapS, removedGapMs: trace.removedGapMs ?? 0 }
      : {}),
    ...(trace.impliedHitRate !== undefined
      ? {
          blockTokens: trace.blockTokens ?? TRACE_BLOCK_TOKENS,
          impliedHitRate: trace.impliedHitRate,
        }
      : {}),
  };
}
