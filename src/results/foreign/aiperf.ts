/**
 * AIPerf's exports (ai-dynamo/aiperf; docs/tutorials/working-with-profile-exports.md) read as
 * runs: `profile_export.jsonl`, one MetricRecordInfo per request (metadata with the request's
 * start and end in Unix ns; metrics in display units: TTFT, each inter-chunk gap, request
 * latency, token counts in ms and tokens), rebuilt into records; and
 * `profile_export_aiperf.json`, the run's statistics alone, summary-only.
 */
import type { LoadSpec } from '../../load.js';
import { MAX_CONCURRENCY } from '../../load.js';
import type { LatencySummary } from '../../metrics/summary.js';
import {
  type ErrorKind,
  MAX_RECORD_TIME_MS,
  MAX_REQUEST_EVENTS,
  type RequestRecord,
} from '../../record.js';
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

/** One line of profile_export.jsonl: its metadata's request start, and its metrics or error. */
export function isAiperfRecord(value: unknown): boolean {
  return (
    isObject(value) &&
    isObject(value.metadata) &&
    'request_start_ns' in value.metadata &&
    ('metrics' in value || 'error' in value)
  );
}

/** profile_export_aiperf.json: GenAI-Perf-shaped results, `{unit, avg, p50, ...}` per metric. */
export function isAiperfExport(value: unknown): boolean {
  if (!isObject(value)) return false;
  const has = (k: string) => isObject(value[k]) && 'unit' in (value[k] as Json);
  return has('request_throughput') && (has('time_to_first_token') || has('request_latency'));
}

const NOTES = {
  percentiles:
    'AIPerf computes percentiles with numpy (linear interpolation between closest ranks), as infergauge does.',
  warmup:
    'AIPerf’s warm-up requests (--warmup-request-count) are not in its profiling exports; nothing in the file is warm-up.',
  ttft: 'AIPerf times TTFT to its first response chunk and request latency to its last, as infergauge times first token and end.',
  itl: 'AIPerf’s inter_token_latency is (request latency - TTFT) / (output tokens - 1) per request, infergauge’s TPOT; infergauge’s ITL is per token gap, from AIPerf’s inter_chunk_latency with each chunk’s gap spread over the tokens it carried (spread evenly: the file has no tokens per chunk).',
  failures:
    'AIPerf keeps failed requests out of its latency statistics and counts them in error_request_count, as infergauge does.',
} as const;

function fail(source: string, what: string): never {
  throw new ForeignInputError(`${source}: not a readable AIPerf profile export: ${what}`);
}

/** A metric's value in the record (`{value, unit}`), checked: a time in ms or a count. */
function metric(
  source: string,
  metrics: Json,
  key: string,
  unit: 'ms' | 'tokens',
): number | undefined {
  const m = metrics[key];
  if (m === undefined || m === null) return undefined;
  const v = isObject(m) ? m.value : undefined;
  const ok =
    typeof v === 'number' &&
    Number.isFinite(v) &&
    v >= 0 &&
    (unit === 'ms' ? v <= MAX_RECORD_TIME_MS : Number.isSafeInteger(v));
  if (!ok) fail(source, `${key} is ${shown(v)}, not ${unit === 'ms' ? 'a time in ms' : 'a count'}`);
  if (isObject(m) && m.unit !== undefined && m.unit !== unit) {
    fail(source, `${key} is in ${shown(m.unit)}, not ${unit}`);
  }
  return v;
}

function errorKind(code: unknown, type: unknown, message: string): ErrorKind {
  if (typeof code === 'number') {
    if (code === 499) return 'cancelled';
    if (code >= 500 && code < 600) return 'http_5xx';
    if (code >= 400 && code < 500) return 'http_4xx';
  }
  return vllmErrorKind(`${typeof type === 'string' ? type : ''} ${message}`);
}

function loadOf(config: unknown, requests: number): LoadSpec {
  const loadgen = isObject(config) && isObject(config.loadgen) ? config.loadgen : {};
  const rate = num(loadgen.request_rate);
  const concurrency = num(loadgen.concurrency);
  const cap =
    concurrency !== undefined && concurrency > 0
      ? Math.min(MAX_CONCURRENCY, Math.floor(concurrency))
      : undefined;
  if (rate !== undefined && rate > 0) {
    return { mode: 'open', rate, arrival: 'poisson', ...(cap ? { maxConcurrency: cap } : {}) };
  }
  return { mode: 'closed', concurrency: cap ?? Math.max(1, Math.min(MAX_CONCURRENCY, requests)) };
}

/** Reads profile_export.jsonl's parsed lines; `skipped` lines did not parse. */
export function readAiperfRecords(lines: unknown[], path: string, skipped: number): ForeignRun {
  let origin = Number.POSITIVE_INFINITY;
  for (const line of lines) {
    const s =
      isObject(line) && isObject(line.metadata) ? num(line.metadata.request_start_ns) : undefined;
    if (s !== undefined && s >= 0) origin = Math.min(origin, s);
  }
  if (!Number.isFinite(origin)) fail(path, 'no line has a request_start_ns');
  const records: RequestRecord[] = [];
  for (const [i, line] of lines.entries()) {
    const at = `${path} line ${i + 1}`;
    if (!isObject(line) || !isObject(line.metadata)) fail(at, 'not a record (no metadata)');
    const meta = line.metadata;
    if (meta.benchmark_phase !== undefined && meta.benchmark_phase !== 'profiling') continue;
    const startNs = num(meta.request_start_ns);
    if (startNs === undefined || startNs < 0) fail(at, 'request_start_ns is not a time');
    const ms = (ns: number) => {
      const v = Math.round((ns - origin) / 1000) / 1000;
      if (!(v >= 0 && v <= MAX_RECORD_TIME_MS)) fail(at, `a time ${ns} ns out of the run`);
      return v;
    };
    const sentAt = ms(startNs);
    const metrics = isObject(line.metrics) ? line.metrics : {};
    const input =
      metric(at, metrics, 'input_sequence_length', 'tokens') ??
      metric(at, metrics, 'error_isl', 'tokens') ??
      0;
    const output =
      metric(at, metrics, 'output_sequence_length', 'tokens') ??
      metric(at, metrics, 'output_token_count', 'tokens') ??
      0;
    const endNs = num(meta.request_end_ns);
    const record: RequestRecord = {
      id: records.length,
      phase: 'measure',
      scheduledAt: sentAt,
      sentAt,
      endAt: endNs !== undefined && endNs >= startNs ? ms(endNs) : sentAt,
      requestedInputTokens: input,
      requestedOutputTokens: output,
      inputTokens: input,
      inputTokensSource: 'tokenizer',
      outputTokens: 0,
      outputTokensSource: 'tokenizer',
      events: { dtUs: [], tokens: [], contentChars: [] },
    };
    if (isObject(line.error) || meta.was_cancelled === true) {
      const e = isObject(line.error) ? line.error : {};
      const message = factText(e.message) ?? factText(e.type) ?? 'cancelled';
      record.error = {
        kind: meta.was_cancelled === true ? 'cancelled' : errorKind(e.code, e.type, message),
        message,
        ...(typeof e.code === 'number' && e.code >= 100 && e.code < 600 ? { status: e.code } : {}),
      };
      records.push(record);
      continue;
    }
    const ttft = metric(at, metrics, 'time_to_first_token', 'ms');
    if (ttft === undefined || output === 0) {
      records.push(record);
      continue;
    }
    const gapsValue = isObject(metrics.inter_chunk_latency)
      ? metrics.inter_chunk_latency.value
      : [];
    if (!Array.isArray(gapsValue)) fail(at, 'inter_chunk_latency is not a list');
    if (gapsValue.length >= MAX_REQUEST_EVENTS)
      fail(at, `inter_chunk_latency has ${gapsValue.length} gaps, past the bound`);
    const dtUs = [Math.round(ttft * 1000)];
    for (const [j, g] of gapsValue.entries()) {
      if (typeof g !== 'number' || !Number.isFinite(g) || g < 0 || g > MAX_RECORD_TIME_MS) {
        fail(at, `inter_chunk_latency[${j}] is ${shown(g)}, not a time in ms`);
      }
      dtUs.push(Math.round(g * 1000));
    }
    const chunks = dtUs.length;
    const tokens = dtUs.map((_, j) => Math.floor(output / chunks) + (j < output % chunks ? 1 : 0));
    const totalUs = dtUs.reduce((a, b) => a + b, 0);
    record.firstTokenAt = Math.round((sentAt + dtUs[0] / 1000) * 1000) / 1000;
    record.firstContentAt = record.firstTokenAt;
    record.lastTokenAt = Math.round((sentAt + totalUs / 1000) * 1000) / 1000;
    record.endAt = Math.max(record.endAt, record.lastTokenAt);
    record.outputTokens = output;
    record.events = { dtUs, tokens, contentChars: dtUs.map(() => 0) };
    records.push(record);
  }
  records.sort((a, b) => a.sentAt - b.sentAt);
  for (const [i, r] of records.entries()) r.id = i;
  const load: LoadSpec = {
    mode: 'closed',
    concurrency: Math.max(1, Math.min(MAX_CONCURRENCY, peakInFlight(records))),
  };
  const notes: string[] = [
    NOTES.percentiles,
    NOTES.warmup,
    NOTES.ttft,
    NOTES.itl,
    NOTES.failures,
    'profile_export.jsonl does not say the load: it is taken as a closed loop at the most requests the records had in flight at once; give compare --force if the other side’s load is stated otherwise.',
  ];
  if (skipped > 0) {
    notes.push(
      `${skipped} line${skipped === 1 ? '' : 's'} of the file did not parse (a run cut short, a damaged line) and ${skipped === 1 ? 'was' : 'were'} skipped.`,
    );
  }
  return {
    format: 'aiperf',
    formatVersion: 'profile_export.jsonl',
    source: path,
    records,
    summary: summaryOfRecords(records, load),
    perRequest: true,
    load,
    notes,
  };
}

/** The most requests in flight at once. */
function peakInFlight(records: readonly RequestRecord[]): number {
  const edges = records.flatMap((r) => [
    [r.sentAt, 1],
    [r.endAt, -1],
  ]);
  edges.sort((a, b) => (a[0] as number) - (b[0] as number) || (a[1] as number) - (b[1] as number));
  let now = 0;
  let peak = 0;
  for (const [, d] of edges) {
    now += d as number;
    peak = Math.max(peak, now);
  }
  return peak;
}

/** Reads profile_export_aiperf.json: summary-only. */
export function readAiperfExport(file: Json, path: string): ForeignRun {
  const stats = (key: string): StatsMs | undefined => {
    const m = file[key];
    if (!isObject(m)) return undefined;
    if (m.unit !== 'ms') fail(path, `${key} is in ${shown(m.unit)}, not ms`);
    const out: StatsMs = {};
    for (const [ours, theirs] of [
      ['mean', 'avg'],
      ['stddev', 'std'],
      ['min', 'min'],
      ['p50', 'p50'],
      ['p90', 'p90'],
      ['p95', 'p95'],
      ['p99', 'p99'],
      ['max', 'max'],
    ] as const) {
      const v = num(m[theirs]);
      if (v !== undefined) out[ours] = v;
    }
    return out;
  };
  const avg = (key: string) => {
    const m = file[key];
    return isObject(m) ? num(m.avg) : undefined;
  };
  const completed = Math.round(avg('request_count') ?? 0);
  const failed = Math.round(avg('error_request_count') ?? 0);
  const config = file.input_config;
  const load = loadOf(config, completed + failed);
  const latency: Partial<Record<keyof LatencySummary, StatsMs>> = {};
  const ttft = stats('time_to_first_token');
  if (ttft) latency.ttftMs = ttft;
  const e2e = stats('request_latency');
  if (e2e) latency.e2eMs = e2e;
  // AIPerf's ITL is infergauge's TPOT; its inter-chunk latency is per chunk, not per token.
  const tpot = stats('inter_token_latency');
  if (tpot) latency.tpotMs = tpot;
  const endpoint = isObject(config) && isObject(config.endpoint) ? config.endpoint : {};
  const model = Array.isArray(endpoint.model_names) ? factText(endpoint.model_names[0]) : undefined;
  const url = factText(endpoint.url);
  const summary = summaryOfStats({
    load,
    completed,
    failed,
    durationS: avg('benchmark_duration') ?? 0,
    inputTokens: Math.round(avg('total_isl') ?? 0),
    outputTokens: Math.round(avg('total_output_tokens') ?? avg('total_osl') ?? 0),
    latency,
  });
  // AIPerf writes the start as local time without a zone: read as written.
  const started = typeof file.start_time === 'string' ? Date.parse(file.start_time) : Number.NaN;
  return {
    format: 'aiperf',
    formatVersion: 'profile_export_aiperf.json',
    ...(Number.isFinite(started) ? { startedAt: new Date(started).toISOString() } : {}),
    source: path,
    summary,
    perRequest: false,
    load,
    ...(model !== undefined ? { model } : {}),
    ...(url !== undefined ? { url } : {}),
    notes: [
      NOTES.percentiles,
      NOTES.warmup,
      NOTES.ttft,
      'AIPerf’s inter_token_latency is (request latency - TTFT) / (output tokens - 1) per request: it is read as TPOT; infergauge’s per-token ITL is not in this file.',
      NOTES.failures,
      'profile_export_aiperf.json holds statistics only: read summary-only; profile_export.jsonl beside it has the requests.',
    ],
  };
}
