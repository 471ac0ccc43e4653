import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import type { Distribution } from '../metrics/distribution.js';
import { percentileOfSorted } from '../metrics/distribution.js';
import type { RunSummary } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';
import type { Manifest } from '../results/schemas.js';

/**
 * llm-d's Benchmark Report, version 0.2 (llm-d/llm-d-benchmark,
 * llmdbenchmark/analysis/benchmark_report/br_v0_2_json_schema.json; copy and provenance in
 * test/fixtures/llm-d/README.md): one report per run, as inference-perf writes one per stage.
 * Only what infergauge measured or was told is written; what it does not know is left out
 * (every such field is optional or nullable in the schema), never filled with a guess.
 */
export const LLMD_REPORT_VERSION = '0.2';

/** The schema's statistics block: `units` and `mean` required, the rest optional. */
export interface LlmdStatistics {
  units: string;
  mean: number;
  stddev?: number;
  min?: number;
  p50?: number;
  p90?: number;
  p95?: number;
  p99?: number;
  p99p9?: number;
  max?: number;
}

export interface LlmdSequenceLength {
  distribution: 'fixed' | 'gaussian' | 'uniform' | 'other';
  value: number;
  std_dev?: number;
  min?: number;
  max?: number;
}

export interface LlmdBenchmarkReport {
  version: typeof LLMD_REPORT_VERSION;
  run: {
    uid: string;
    eid?: string;
    time?: { start?: string; end?: string; duration?: string };
    description?: string;
    keywords?: string[];
  };
  scenario: { stack?: unknown[]; load: unknown };
  results: {
    request_performance: {
      aggregate: {
        requests: {
          total: number;
          failures: number;
          input_length?: LlmdStatistics;
          output_length?: LlmdStatistics;
        };
        latency: Partial<
          Record<
            | 'time_to_first_token'
            | 'normalized_time_per_output_token'
            | 'time_per_output_token'
            | 'inter_token_latency'
            | 'request_latency',
            LlmdStatistics
          >
        >;
        throughput: Partial<
          Record<
            'input_token_rate' | 'output_token_rate' | 'total_token_rate' | 'request_rate',
            LlmdStatistics
          >
        >;
      };
    };
  };
}

export interface LlmdReportContext {
  summary: RunSummary;
  manifest: Manifest;
  /** The run's records (warm-up included: they are left out here), for the length statistics. */
  records: RequestRecord[];
  /** The run's name in its results directory (a sweep point's folder). */
  name: string;
  /** A sweep's point index: llm-d's `stage`, as inference-perf numbers its stages. */
  stage?: number;
}

/** infergauge's percentile names to the schema's. */
const PERCENTILE_FIELDS = [
  ['p50', 'p50'],
  ['p90', 'p90'],
  ['p95', 'p95'],
  ['p99', 'p99'],
  ['p99_9', 'p99p9'],
] as const;

/** A summary distribution in ms as the schema's statistics in `units`, scaled by `scale`. */
function statisticsOf(d: Distribution, units: string, scale: number): LlmdStatistics | undefined {
  if (d.count === 0 || !Number.isFinite(d.mean)) return undefined;
  const s: LlmdStatistics = { units, mean: d.mean * scale };
  const set = (field: Exclude<keyof LlmdStatistics, 'units' | 'mean'>, value: number) => {
    if (Number.isFinite(value)) s[field] = value * scale;
  };
  set('stddev', d.stddev);
  set('min', d.min);
  for (const [ours, theirs] of PERCENTILE_FIELDS) set(theirs, d[ours]);
  set('max', d.max);
  return s;
}

/** Statistics of raw values, with the summary's definitions (population stddev, numpy percentiles). */
function statisticsOfValues(values: number[], units: string): LlmdStatistics | undefined {
  if (values.length === 0) return undefined;
  const sorted = Float64Array.from(values).sort();
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const variance = values.reduce((a, b) => a + (b - mean) ** 2, 0) / values.length;
  const s: LlmdStatistics = { units, mean, stddev: Math.sqrt(variance), min: sorted[0] };
  for (const [ours, theirs] of PERCENTILE_FIELDS) {
    s[theirs] = percentileOfSorted(
      sorted,
      { p50: 50, p90: 90, p95: 95, p99: 99, p99_9: 99.9 }[ours],
    );
  }
  s.max = sorted[sorted.length - 1];
  return s;
}

/** A rate the run measured once: its mean alone (the schema has no plain number for it). */
const rate = (value: number, units: string): LlmdStatistics | undefined =>
  Number.isFinite(value) ? { units, mean: value } : undefined;

/** A length distribution of the plan (workload/distributions.ts) in the schema's words. */
function sequenceLength(spec: unknown): LlmdSequenceLength | undefined {
  if (!spec || typeof spec !== 'object') return undefined;
  const d = spec as Record<string, unknown>;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  const bounds = (out: LlmdSequenceLength) => {
    const min = n(d.min);
    const max = n(d.max);
    // The schema's bounds are whole numbers (min >= 0, max >= 1).
    if (min !== undefined && min >= 0) out.min = Math.ceil(min);
    if (max !== undefined && max >= 1) out.max = Math.floor(max);
    return out;
  };
  switch (d.kind) {
    case 'fixed':
      return n(d.value) === undefined
        ? undefined
        : { distribution: 'fixed', value: d.value as number };
    case 'normal': {
      const mean = n(d.mean);
      const sd = n(d.sd);
      if (mean === undefined || sd === undefined) return undefined;
      return bounds({ distribution: 'gaussian', value: mean, std_dev: sd });
    }
    case 'uniform': {
      const min = n(d.min);
      const max = n(d.max);
      if (min === undefined || max === undefined) return undefined;
      return bounds({ distribution: 'uniform', value: (min + max) / 2 });
    }
    case 'poisson':
    case 'lognormal': {
      // No word for these in the schema: `other`, with the mean as its primary value.
      const mean = n(d.mean);
      return mean === undefined ? undefined : bounds({ distribution: 'other', value: mean });
    }
    case 'empirical': {
      const values = Array.isArray(d.values) ? d.values.filter((v) => n(v) !== undefined) : [];
      if (values.length === 0) return undefined;
      return { distribution: 'other', value: values.reduce((a, b) => a + b, 0) / values.length };
    }
    default:
      return undefined;
  }
}

const hash = (...parts: unknown[]) =>
  createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 32);

/** ISO 8601 duration of a number of seconds: `PT7.798249S`. */
export const isoDurationS = (seconds: number) => `PT${seconds}S`;

/**
 * The Benchmark Report of one run. Latencies in seconds (`s`, `s/token`), as inference-perf
 * writes them; statistics as infergauge's summary has them (population stddev, numpy's linear
 * percentiles, failed requests not in the latencies). llm-d's `time_per_output_token` is
 * infergauge's TPOT (per request, after the first token) and `inter_token_latency` its
 * per-token ITL; `normalized_time_per_output_token` is each completed request's E2E over its
 * output tokens.
 */
export function llmdBenchmarkReport(context: LlmdReportContext): LlmdBenchmarkReport {
  const { summary, manifest: m, records, name } = context;
  const measured = records.filter((r) => r.phase === 'measure');
  const ok = measured.filter((r) => !r.error && r.firstTokenAt !== undefined);
  const plan = (m.plan ?? {}) as Record<string, unknown>;
  const scenarios = Array.isArray(plan.scenarios)
    ? (plan.scenarios as Record<string, unknown>[])
    : [];
  // One scenario's planned lengths describe the run; a mix of scenarios has no single one.
  const only = scenarios.length === 1 ? scenarios[0] : undefined;
  const requestedInput = measured.map((r) => r.requestedInputTokens);
  const inputSeqLen =
    sequenceLength(only?.input) ??
    ({
      distribution: 'other',
      value:
        requestedInput.length > 0
          ? requestedInput.reduce((a, b) => a + b, 0) / requestedInput.length
          : 0,
    } satisfies LlmdSequenceLength);
  const load = summary.load;
  const standardized: Record<string, unknown> = {
    tool: 'infergauge',
    tool_version: m.tool?.version ?? 'unknown',
    // Synthetic prompts of the planned lengths are random text; anything else is not known here.
    source: only?.input && typeof only.input === 'object' ? 'random' : 'unknown',
    stage: context.stage ?? 0,
    input_seq_len: inputSeqLen,
  };
  const outputSeqLen = sequenceLength(only?.output);
  if (outputSeqLen) standardized.output_seq_len = outputSeqLen;
  if (load.mode === 'open') {
    if (load.rate > 0 && Number.isFinite(load.rate)) standardized.rate_qps = load.rate;
    if (load.maxConcurrency !== undefined) standardized.concurrency = load.maxConcurrency;
  } else if (Number.isFinite(load.concurrency)) {
    standardized.concurrency = load.concurrency;
  }
  const { meanConcurrency: _measured, ...loadSpec } = load;
  const stack: unknown[] = [];
  if (m.model !== undefined) {
    const server = (m.server ?? {}) as Record<string, unknown>;
    // infergauge knows the model it asked for; not the engine, its version or the accelerator
    // (an inference_engine component requires them), so the server is a generic component.
    const tool = typeof server.simulator === 'string' ? 'infergauge-simulator' : 'unknown';
    stack.push({
      metadata: { schema_version: '0.0.1', label: 'server', cfg_id: hash(m.model, server) },
      standardized: { kind: 'generic', tool, tool_version: 'unknown', model: { name: m.model } },
      native: {},
    });
  }
  const latency: LlmdBenchmarkReport['results']['request_performance']['aggregate']['latency'] = {};
  const l = summary.latency;
  const put = (key: keyof typeof latency, s: LlmdStatistics | undefined) => {
    if (s) latency[key] = s;
  };
  put('time_to_first_token', statisticsOf(l.ttftMs, 's', 1e-3));
  put(
    'normalized_time_per_output_token',
    statisticsOfValues(
      ok.filter((r) => r.outputTokens > 0).map((r) => (r.endAt - r.sentAt) / 1000 / r.outputTokens),
      's/token',
    ),
  );
  put('time_per_output_token', statisticsOf(l.tpotMs, 's/token', 1e-3));
  put('inter_token_latency', statisticsOf(l.itlMs, 's/token', 1e-3));
  put('request_latency', statisticsOf(l.e2eMs, 's', 1e-3));
  const requests: LlmdBenchmarkReport['results']['request_performance']['aggregate']['requests'] = {
    total: summary.requests.completed + summary.requests.failed,
    failures: summary.requests.failed,
  };
  const inputLength = statisticsOfValues(
    ok.map((r) => r.inputTokens ?? r.requestedInputTokens),
    'count',
  );
  if (inputLength) requests.input_length = inputLength;
  const outputLength = statisticsOfValues(
    ok.map((r) => r.outputTokens),
    'count',
  );
  if (outputLength) requests.output_length = outputLength;
  const t = summary.throughput;
  const throughput: LlmdBenchmarkReport['results']['request_performance']['aggregate']['throughput'] =
    {};
  for (const [key, value, units] of [
    ['input_token_rate', t.inputTokensPerS, 'tokens/s'],
    ['output_token_rate', t.outputTokensPerS, 'tokens/s'],
    ['total_token_rate', t.totalTokensPerS, 'tokens/s'],
    ['request_rate', t.requestsPerS, 'queries/s'],
  ] as const) {
    const s = rate(value, units);
    if (s) throughput[key] = s;
  }
  const time: NonNullable<LlmdBenchmarkReport['run']['time']> = {
    duration: isoDurationS(summary.durationS),
  };
  if (m.startedAt !== undefined) time.start = m.startedAt;
  if (m.endedAt !== undefined) time.end = m.endedAt;
  const run: LlmdBenchmarkReport['run'] = {
    uid: m.id ?? hash(m.startedAt, name, summary.durationS),
    time,
    description: `infergauge run ${name}`,
    keywords: ['infergauge'],
  };
  if (m.parent?.id !== undefined) run.eid = m.parent.id;
  return {
    version: LLMD_REPORT_VERSION,
    run,
    scenario: {
      ...(stack.length > 0 ? { stack } : {}),
      load: {
        metadata: { schema_version: '0.0.1', cfg_id: hash(loadSpec, m.workload) },
        standardized,
        native: { config: { load: loadSpec, workload: m.workload ?? null } },
      },
    },
    results: {
      request_performance: {
        aggregate: {
          requests,
          latency,
          throughput,
        },
      },
    },
  };
}

/** The report as YAML, the form llm-d's harness saves (`benchmark_report_v0.2,_*.yaml`). */
export function llmdReportYaml(report: LlmdBenchmarkReport): string {
  // YAML 1.1, as llm-d reads it (PyYAML): strings such as `yes` or `1_000` are quoted.
  return stringify(report, { lineWidth: 0, version: '1.1' });
}
