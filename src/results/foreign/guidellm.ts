/**
 * GuideLLM's `benchmarks.json` / `benchmarks.yaml` (vllm-project/guidellm,
 * src/guidellm/benchmark/schemas/report.py: GenerativeBenchmarksReport, schema version 2) read
 * as runs, one per benchmark. Each request's stats carry its start, first and last token
 * iteration, end, token counts and iterations (times in Unix seconds), but not the time of each
 * chunk: the records are rebuilt with the chunks between first and last token evenly spaced,
 * which is exactly what GuideLLM's own ITL assumes (a request's mean gap, weighted by its
 * tokens). Where the file keeps only a sample of the requests (`sample_size`), the run is read
 * from GuideLLM's statistics, summary-only.
 */
import type { LoadSpec } from '../../load.js';
import { MAX_CONCURRENCY } from '../../load.js';
import type { LatencySummary } from '../../metrics/summary.js';
import { MAX_RECORD_TIME_MS, MAX_REQUEST_EVENTS, type RequestRecord } from '../../record.js';
import { factText } from '../../telemetry/environment.js';
import {
  ForeignInputError,
  isObject,
  type Json,
  num,
  type StatsMs,
  shown,
  summaryOfRecords,
  summaryOfStats,
} from './build.js';
import type { ForeignRun } from './types.js';
import { vllmErrorKind } from './vllm.js';

/** A GuideLLM report: a `benchmarks` list of generative benchmarks, each with its metrics. */
export function isGuidellmReport(value: unknown): boolean {
  if (!isObject(value) || !Array.isArray(value.benchmarks)) return false;
  const first = value.benchmarks[0];
  return (
    (isObject(value.metadata) && 'guidellm_version' in value.metadata) ||
    (isObject(first) &&
      (first.type_ === 'generative_benchmark' ||
        (isObject(first.metrics) && 'time_to_first_token_ms' in first.metrics)))
  );
}

const NOTES = {
  percentiles:
    'GuideLLM takes percentiles from the cumulative distribution without interpolation (the smallest value whose share reaches p); infergauge interpolates linearly between closest ranks, so small samples differ in their tails.',
  warmup:
    'GuideLLM leaves the requests of its warm-up and cool-down phases out of each benchmark; none are in the file.',
  ttft: 'GuideLLM times TTFT from request start to the first token iteration (a streamed chunk with a token), as infergauge does.',
  itl: 'GuideLLM keeps no per-chunk times: the chunks between first and last token are spread evenly, so per-token ITL within a request is its mean gap (GuideLLM’s own ITL, weighted by tokens), and chunk-gap spread is lost.',
  tpot: 'GuideLLM’s time_per_output_token includes the first token ((last token - start) / tokens); infergauge’s TPOT excludes it ((last - first) / (tokens - 1)).',
  failures:
    'GuideLLM keeps errored and incomplete requests in separate groups; infergauge counts both as failed (incomplete ones as cancelled) and leaves them out of the latencies.',
} as const;

function fail(source: string, what: string): never {
  throw new ForeignInputError(`${source}: not a readable GuideLLM benchmarks file: ${what}`);
}

function time(source: string, field: string, v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    fail(source, `${field} is ${shown(v)}, not a time`);
  }
  return v;
}

function tokens(source: string, field: string, v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    fail(source, `${field} is ${shown(v)}, not a count`);
  }
  return v;
}

/** GuideLLM's scheduling strategy as infergauge's load. */
function loadOf(strategy: unknown, requests: number): LoadSpec {
  const s = isObject(strategy) ? strategy : {};
  const cap = num(s.max_concurrency);
  const capped =
    cap !== undefined && cap > 0 ? Math.min(MAX_CONCURRENCY, Math.floor(cap)) : undefined;
  const rate = num(s.rate);
  if ((s.type_ === 'constant' || s.type_ === 'poisson') && rate !== undefined && rate > 0) {
    return {
      mode: 'open',
      rate,
      arrival: s.type_ === 'constant' ? 'constant' : 'poisson',
      ...(capped !== undefined ? { maxConcurrency: capped } : {}),
    };
  }
  if (s.type_ === 'synchronous') return { mode: 'closed', concurrency: 1 };
  const streams = num(s.streams);
  if (s.type_ === 'concurrent' && streams !== undefined && streams > 0) {
    return { mode: 'closed', concurrency: Math.min(MAX_CONCURRENCY, Math.floor(streams)) };
  }
  // `throughput`: everything at once, held to max_concurrency if set.
  return {
    mode: 'closed',
    concurrency: capped ?? Math.max(1, Math.min(MAX_CONCURRENCY, requests)),
  };
}

/** One request's stats as a record; `origin` is the benchmark's first request start (s). */
function recordOf(
  source: string,
  stats: Json,
  id: number,
  group: 'successful' | 'errored' | 'incomplete',
  origin: number,
): RequestRecord {
  const info = isObject(stats.info) ? stats.info : {};
  const t = isObject(info.timings) ? info.timings : {};
  const at = `requests.${group}[${id}]`;
  const start =
    time(source, `${at}.request_start_time`, stats.request_start_time ?? t.request_start) ??
    time(source, `${at}.start_time`, stats.start_time);
  const end =
    time(source, `${at}.request_end_time`, stats.request_end_time ?? t.request_end) ??
    time(source, `${at}.end_time`, stats.end_time);
  if (start === undefined || end === undefined) fail(source, `${at} has no start or end time`);
  const first = time(
    source,
    `${at}.first_token_iteration`,
    t.first_token_iteration ?? stats.first_token_time,
  );
  const last = time(
    source,
    `${at}.last_token_iteration`,
    t.last_token_iteration ?? stats.last_token_time,
  );
  const input = tokens(source, `${at}.prompt_tokens`, stats.prompt_tokens) ?? 0;
  const output = tokens(source, `${at}.output_tokens`, stats.output_tokens) ?? 0;
  const iterations = tokens(source, `${at}.token_iterations`, t.token_iterations) ?? output;
  const ms = (s: number) => {
    const v = Math.round((s - origin) * 1e6) / 1000;
    if (!(Math.abs(v) <= MAX_RECORD_TIME_MS)) fail(source, `${at}: a time ${s} s out of the run`);
    return v;
  };
  const sentAt = ms(start);
  const record: RequestRecord = {
    id,
    phase: 'measure',
    scheduledAt: sentAt,
    sentAt,
    endAt: Math.max(sentAt, ms(end)),
    requestedInputTokens: input,
    requestedOutputTokens: output,
    inputTokens: input,
    inputTokensSource: 'server',
    outputTokens: 0,
    outputTokensSource: 'server',
    events: { dtUs: [], tokens: [], contentChars: [] },
  };
  if (group !== 'successful') {
    const text =
      typeof info.error === 'string'
        ? info.error
        : typeof stats.error === 'string'
          ? stats.error
          : '';
    record.error =
      group === 'incomplete'
        ? { kind: 'cancelled', message: factText(text) ?? 'incomplete when the benchmark ended' }
        : {
            kind: vllmErrorKind(text),
            message: factText(text) ?? 'errored (GuideLLM kept no error text)',
          };
    return record;
  }
  if (first === undefined || last === undefined || output === 0) return record;
  const events = Math.max(1, Math.min(iterations, output, MAX_REQUEST_EVENTS - 1));
  const firstUs = Math.max(0, Math.round((first - start) * 1e6));
  const spanUs = Math.max(0, Math.round((last - first) * 1e6));
  const dtUs = [firstUs];
  const perEvent = [events === 1 ? output : 1];
  // The rest: evenly spaced in whole µs (the remainder on the first gaps), tokens likewise.
  for (let j = 1; j < events; j++) {
    dtUs.push(Math.floor(spanUs / (events - 1)) + (j - 1 < spanUs % (events - 1) ? 1 : 0));
    const rest = output - 1;
    perEvent.push(Math.floor(rest / (events - 1)) + (j - 1 < rest % (events - 1) ? 1 : 0));
  }
  record.firstTokenAt = Math.round((sentAt + firstUs / 1000) * 1000) / 1000;
  record.firstContentAt = record.firstTokenAt;
  record.lastTokenAt = Math.round((record.firstTokenAt + spanUs / 1000) * 1000) / 1000;
  record.endAt = Math.max(record.endAt, record.lastTokenAt);
  record.outputTokens = output;
  record.events = { dtUs, tokens: perEvent, contentChars: dtUs.map(() => 0) };
  return record;
}

/** GuideLLM's successful-group statistics of one metric, in ms. */
function statsOf(metrics: Json, key: string, scale: number): StatsMs | undefined {
  const group = isObject(metrics[key]) ? (metrics[key] as Json).successful : undefined;
  if (!isObject(group)) return undefined;
  const p = isObject(group.percentiles) ? group.percentiles : {};
  const v = (x: unknown) => {
    const n = num(x);
    return n === undefined ? undefined : n * scale;
  };
  const out: StatsMs = {};
  const set = (k: keyof StatsMs, x: number | undefined) => {
    if (x !== undefined) out[k] = x;
  };
  set('count', num(group.count));
  set('mean', v(group.mean));
  set('stddev', v(group.std_dev));
  set('min', v(group.min));
  set('p50', v(group.median ?? p.p50));
  set('p90', v(p.p90));
  set('p95', v(p.p95));
  set('p99', v(p.p99));
  set('p99_9', v(p.p999));
  set('max', v(group.max));
  return out;
}

function readBenchmark(report: Json, b: unknown, index: number, path: string): ForeignRun {
  const source = `${path} benchmarks[${index}]`;
  if (!isObject(b)) fail(source, 'not an object');
  const metrics = isObject(b.metrics) ? b.metrics : fail(source, 'no metrics');
  const config = isObject(b.config) ? b.config : {};
  const totals = isObject(metrics.request_totals) ? metrics.request_totals : {};
  const successful = tokens(source, 'request_totals.successful', totals.successful) ?? 0;
  const errored = tokens(source, 'request_totals.errored', totals.errored) ?? 0;
  const incomplete = tokens(source, 'request_totals.incomplete', totals.incomplete) ?? 0;
  const requests = isObject(b.requests) ? b.requests : {};
  const groups = (['successful', 'errored', 'incomplete'] as const).map((g) => {
    const list = requests[g] ?? [];
    if (!Array.isArray(list)) fail(source, `requests.${g} is not a list`);
    return [g, list] as const;
  });
  const kept = groups.reduce((n, [, list]) => n + list.length, 0);
  const all = successful + errored + incomplete;
  const backend = isObject(config.backend) ? config.backend : {};
  const reportConfig = isObject(report.config) ? report.config : {};
  const model = factText(backend.model) ?? factText(reportConfig.model);
  const url = factText(backend.target) ?? factText(reportConfig.target);
  const meta = isObject(report.metadata) ? report.metadata : {};
  const version = factText(meta.guidellm_version);
  const load = loadOf(config.strategy, all);
  const startedAt = num(b.start_time);
  const base = {
    format: 'guidellm' as const,
    formatVersion: `report v${num(meta.version) ?? 1}${version ? ` (guidellm ${version})` : ''}`,
    source,
    load,
    ...(model !== undefined ? { model } : {}),
    ...(url !== undefined ? { url } : {}),
    ...(startedAt !== undefined ? { startedAt: new Date(startedAt * 1000).toISOString() } : {}),
  };
  const notes: string[] = [NOTES.percentiles, NOTES.warmup, NOTES.ttft];
  if (kept > 0 && kept === all) {
    let origin = Number.POSITIVE_INFINITY;
    for (const [, list] of groups) {
      for (const r of list) {
        const s = isObject(r) ? (num(r.request_start_time) ?? num(r.start_time)) : undefined;
        if (s !== undefined && s >= 0) origin = Math.min(origin, s);
      }
    }
    if (!Number.isFinite(origin)) origin = 0;
    const records: RequestRecord[] = [];
    for (const [group, list] of groups) {
      for (const r of list) {
        if (!isObject(r)) fail(source, `requests.${group} holds a non-object`);
        records.push(recordOf(source, r, records.length, group, origin));
      }
    }
    // Issue order: GuideLLM groups the requests by status.
    records.sort((x, y) => x.sentAt - y.sentAt);
    for (const [i, r] of records.entries()) r.id = i;
    notes.push(NOTES.itl, NOTES.tpot, NOTES.failures);
    return { ...base, records, summary: summaryOfRecords(records, load), perRequest: true, notes };
  }
  const latency: Partial<Record<keyof LatencySummary, StatsMs>> = {};
  for (const [key, field, scale] of [
    ['ttftMs', 'time_to_first_token_ms', 1],
    ['itlMs', 'inter_token_latency_ms', 1],
    ['e2eMs', 'request_latency', 1000],
  ] as const) {
    const stats = statsOf(metrics, field, scale);
    // ITL counts token gaps: GuideLLM's count is of requests.
    if (stats && key === 'itlMs') delete stats.count;
    if (stats) latency[key] = stats;
  }
  const sum = (key: string) => {
    const g = isObject(metrics[key]) ? (metrics[key] as Json).successful : undefined;
    return isObject(g) ? (num(g.total_sum) ?? 0) : 0;
  };
  const sm = isObject(b.scheduler_metrics) ? b.scheduler_metrics : {};
  const durationS =
    num(b.duration) ??
    Math.max(0, (num(sm.measure_end_time) ?? 0) - (num(sm.measure_start_time) ?? 0));
  notes.push(
    NOTES.tpot,
    NOTES.failures,
    kept === 0
      ? 'The file keeps no per-request stats (GuideLLM --sample-requests 0): GuideLLM’s own statistics are read, summary-only.'
      : `The file keeps ${kept} of ${all} requests (GuideLLM samples them, --sample-requests): GuideLLM’s own statistics are read, summary-only; TPOT is left out (its definition differs).`,
  );
  const summary = summaryOfStats({
    load,
    completed: successful,
    failed: errored + incomplete,
    durationS,
    inputTokens: Math.round(sum('prompt_token_count')),
    outputTokens: Math.round(sum('output_token_count')),
    latency,
  });
  return { ...base, summary, perRequest: false, notes };
}

/** Reads a parsed GuideLLM report: one run per benchmark. */
export function readGuidellmReport(report: Json, path: string): ForeignRun[] {
  const benchmarks = report.benchmarks as unknown[];
  if (benchmarks.length === 0) fail(path, 'its benchmarks list is empty');
  return benchmarks.map((b, i) => readBenchmark(report, b, i, path));
}
