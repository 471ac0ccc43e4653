import { z } from 'zod';
import { BACKEND_NAMES, BACKENDS, type BackendName } from '../backends/index.js';
import { splitServerUrl } from '../backends/request.js';
import type { Endpoint } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import type { SloCondition } from '../metrics/slo.js';
import { parseSlo } from './slo.js';

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
  durationS?: number;
  warmupRequests: number;
  inputTokens: number;
  outputTokens: number;
  temperature: number;
  ignoreEos: boolean;
  continuousUsageStats: boolean;
  timeoutS: number;
  /** Seconds in-flight requests may take to finish after Ctrl-C before they are cancelled. */
  graceS: number;
  slo?: SloCondition[];
  seed: number;
  /** Name of the environment variable holding the API key (the key itself is never stored). */
  apiKeyEnv?: string;
  headers: Record<string, string>;
  extraBody?: Record<string, unknown>;
  out?: string;
  label: string;
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
}

/** The options as they arrive from the command line (strings), before validation. */
export interface RunPlanInput {
  url?: string;
  model?: string;
  backend?: string;
  endpoint?: string;
  concurrency?: string;
  rate?: string;
  arrival?: string;
  maxConcurrency?: string;
  requests?: string;
  duration?: string;
  warmup?: string;
  inputTokens?: string;
  outputTokens?: string;
  temperature?: string;
  ignoreEos?: boolean;
  continuousUsageStats?: boolean;
  timeout?: string;
  grace?: string;
  slo?: string;
  seed?: string;
  apiKeyEnv?: string;
  header?: string[];
  extraBody?: string;
  out?: string;
  label?: string;
  /** `true` scrapes `<url>/metrics`; a string scrapes that URL; `false` (--no-server-metrics) none. */
  serverMetrics?: boolean | string;
  /** The same as a --server-metrics URL. */
  metricsUrl?: string;
  slots?: boolean;
  dcgmUrl?: string;
  gpuMemory?: boolean;
  serverPid?: string;
  scrapeInterval?: string;
}

export const RUN_DEFAULTS = {
  concurrency: 16,
  requests: 200,
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
  arrival: { flag: '--arrival', example: '--arrival poisson' },
  maxConcurrency: { flag: '--max-concurrency', example: '--max-concurrency 64' },
  requests: { flag: '--requests', example: '--requests 200' },
  duration: { flag: '--duration', example: '--duration 60' },
  warmup: { flag: '--warmup', example: '--warmup 10' },
  inputTokens: { flag: '--input-tokens', example: '--input-tokens 256' },
  outputTokens: { flag: '--output-tokens', example: '--output-tokens 128' },
  temperature: { flag: '--temperature', example: '--temperature 0' },
  timeout: { flag: '--timeout', example: '--timeout 600' },
  grace: { flag: '--grace', example: '--grace 10' },
  slo: { flag: '--slo', example: "--slo 'ttft<500,tpot<50'" },
  seed: { flag: '--seed', example: '--seed 42' },
  apiKeyEnv: { flag: '--api-key-env', example: '--api-key-env OPENAI_API_KEY' },
  header: { flag: '--header', example: "--header 'X-Tenant: a'" },
  extraBody: { flag: '--extra-body', example: '--extra-body \'{"top_p": 1}\'' },
  label: { flag: '--label', example: '--label baseline' },
  serverMetrics: {
    flag: '--server-metrics',
    example: '--server-metrics http://127.0.0.1:8000/metrics',
  },
  metricsUrl: { flag: '--metrics-url', example: '--metrics-url http://127.0.0.1:8000/metrics' },
  dcgmUrl: { flag: '--dcgm-url', example: '--dcgm-url http://gpu-host:9400/metrics' },
  serverPid: { flag: '--server-pid', example: '--server-pid $(pgrep -f "vllm serve")' },
  scrapeInterval: { flag: '--scrape-interval', example: '--scrape-interval 1' },
};

const int = (min: number) =>
  z.coerce
    .number({ error: 'must be a number' })
    .int({ error: 'must be a whole number' })
    .min(min, { error: `must be at least ${min}` });
const positive = () =>
  z.coerce.number({ error: 'must be a number' }).positive({ error: 'must be greater than 0' });

const schema = z
  .object({
    url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
    model: z.string().min(1).optional(),
    backend: z
      .enum(BACKEND_NAMES as [BackendName, ...BackendName[]], {
        error: `must be one of ${BACKEND_NAMES.join(', ')}`,
      })
      .optional(),
    endpoint: z.enum(['chat', 'completions'], { error: 'must be chat or completions' }).optional(),
    concurrency: int(1).optional(),
    rate: positive().optional(),
    arrival: z.enum(['poisson', 'constant'], { error: 'must be poisson or constant' }).optional(),
    maxConcurrency: int(1).optional(),
    requests: int(1).optional(),
    duration: positive().optional(),
    warmup: int(0).optional(),
    inputTokens: int(1).optional(),
    outputTokens: int(1).optional(),
    temperature: z.coerce.number({ error: 'must be a number' }).min(0).max(2).optional(),
    ignoreEos: z.boolean().optional(),
    continuousUsageStats: z.boolean().optional(),
    timeout: positive().optional(),
    grace: z.coerce.number({ error: 'must be a number' }).min(0).optional(),
    slo: z.string().optional(),
    seed: int(0).optional(),
    apiKeyEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'must be an environment variable name' })
      .optional(),
    header: z.array(z.string()).optional(),
    extraBody: z.string().optional(),
    out: z.string().min(1).optional(),
    serverMetrics: z
      .union([
        z.boolean(),
        z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
      ])
      .optional(),
    metricsUrl: z
      .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
      .optional(),
    slots: z.boolean().optional(),
    dcgmUrl: z
      .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
      .optional(),
    gpuMemory: z.boolean().optional(),
    serverPid: int(1).optional(),
    scrapeInterval: positive().optional(),
    label: z
      .string()
      .regex(/^[A-Za-z0-9._-]+$/, { error: 'may hold only letters, digits, dot, dash, underscore' })
      .optional(),
  })
  .strict();

/** A plan that cannot run, with the flag to change and an example of a valid value. */
export class PlanError extends Error {
  readonly code = 'IG_PLAN_INVALID';
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

function problem(field: string, message: string): string {
  const spelling = FLAGS[field];
  return spelling
    ? `${spelling.flag} ${message} (for example ${spelling.example})`
    : `${field} ${message}`;
}

/** Validates command-line input into a RunPlan, or throws PlanError naming every bad field. */
export function parseRunPlan(input: RunPlanInput, env: NodeJS.ProcessEnv = {}): RunPlan {
  const parsed = schema.safeParse(
    Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)),
  );
  // Every problem is reported at once, so one attempt fixes them all.
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((issue) => problem(String(issue.path[0] ?? ''), issue.message));
  if (input.concurrency !== undefined && input.rate !== undefined) {
    problems.push(
      '--concurrency and --rate cannot be combined: --concurrency N keeps N requests in flight (closed loop), --rate R sends R requests/s (open loop); cap an open loop with --max-concurrency',
    );
  }
  if (input.maxConcurrency !== undefined && input.rate === undefined) {
    problems.push(
      problem('maxConcurrency', 'applies only with --rate; for a closed loop use --concurrency'),
    );
  }
  if (input.arrival !== undefined && input.rate === undefined) {
    problems.push(problem('arrival', 'applies only with --rate'));
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
  for (const h of input.header ?? []) {
    const colon = h.indexOf(':');
    if (colon <= 0) {
      problems.push(problem('header', `"${h}" must look like "Name: value"`));
      continue;
    }
    headers[h.slice(0, colon).trim().toLowerCase()] = h.slice(colon + 1).trim();
  }
  let apiKeyEnv = input.apiKeyEnv;
  if (apiKeyEnv !== undefined && env[apiKeyEnv] === undefined) {
    problems.push(problem('apiKeyEnv', `names ${apiKeyEnv}, which is not set in the environment`));
  }
  if (apiKeyEnv === undefined && env.OPENAI_API_KEY !== undefined) apiKeyEnv = 'OPENAI_API_KEY';
  if (parsed.success) problems.push(...backendProblems(parsed.data));
  if (!parsed.success || problems.length > 0) throw new PlanError(problems);
  const o = parsed.data;

  const load: LoadSpec =
    o.rate !== undefined
      ? {
          mode: 'open',
          rate: o.rate,
          arrival: o.arrival ?? RUN_DEFAULTS.arrival,
          ...(o.maxConcurrency !== undefined ? { maxConcurrency: o.maxConcurrency } : {}),
        }
      : { mode: 'closed', concurrency: o.concurrency ?? RUN_DEFAULTS.concurrency };
  const requests = o.requests ?? (o.duration === undefined ? RUN_DEFAULTS.requests : undefined);
  const plan: RunPlan = {
    backend: o.backend ?? 'openai',
    endpoint: o.endpoint ?? BACKENDS[o.backend ?? 'openai'].supports.endpoints[0],
    load,
    warmupRequests: o.warmup ?? 0,
    inputTokens: o.inputTokens ?? RUN_DEFAULTS.inputTokens,
    outputTokens: o.outputTokens ?? RUN_DEFAULTS.outputTokens,
    temperature: o.temperature ?? RUN_DEFAULTS.temperature,
    ignoreEos: o.ignoreEos ?? false,
    continuousUsageStats: o.continuousUsageStats ?? false,
    timeoutS: o.timeout ?? RUN_DEFAULTS.timeoutS,
    graceS: o.grace ?? RUN_DEFAULTS.graceS,
    seed: o.seed ?? RUN_DEFAULTS.seed,
    headers,
    label: o.label ?? (o.url === undefined ? 'sim' : 'run'),
  };
  if (o.url !== undefined) plan.url = o.url;
  if (o.model !== undefined) plan.model = o.model;
  if (requests !== undefined) plan.requests = requests;
  if (o.duration !== undefined) plan.durationS = o.duration;
  if (slo) plan.slo = slo;
  if (apiKeyEnv !== undefined) plan.apiKeyEnv = apiKeyEnv;
  if (extraBody) plan.extraBody = extraBody;
  if (o.out !== undefined) plan.out = o.out;
  const telemetry = telemetryPlan(o);
  if (telemetry) plan.telemetry = telemetry;
  return plan;
}

/**
 * What is sampled during the run. The server's `/metrics` is on by default (probed first when
 * it is a --url server), so every run against a server with metrics carries its memory story.
 */
function telemetryPlan(o: z.infer<typeof schema>): RunPlan['telemetry'] {
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

/** What the chosen backend cannot do, said before anything is sent. */
function backendProblems(o: z.infer<typeof schema>): string[] {
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

/** The plan as stored in the manifest: header values that look like credentials are hidden. */
export function redactPlan(plan: RunPlan): RunPlan {
  const headers = Object.fromEntries(
    Object.entries(plan.headers).map(([k, v]) => [
      k,
      /auth|key|token|secret|cookie/i.test(k) ? '<redacted>' : v,
    ]),
  );
  return { ...plan, headers };
}
