import { type Warning, warning } from '../metrics/warnings.js';
import { type CommonTelemetry, commonFields } from './common.js';
import { seriesName } from './prometheus.js';
import type { TelemetrySnapshot } from './snapshot.js';

/** Server-side numbers over the run, from scraped snapshots. */
export interface ServerMetricsSummary {
  scrapes: number;
  failedScrapes: number;
  /** First error message, when scrapes failed. */
  firstError?: string;
  /** From the first to the last successful scrape. */
  windowS: number;
  /** Monotonic counters (`*_total`, `*_sum`, `*_count`): growth over the window. */
  counters: Record<string, { delta: number; perS: number }>;
  /** Everything else but histogram buckets: its range over the window. */
  gauges: Record<string, { min: number; mean: number; max: number; last: number }>;
  /** The server's memory and load in common words (see `commonFields`), when it told any. */
  memory?: ServerMemorySummary;
  /** The server's prefix-cache hit rate over the window, when it reports one. */
  prefixCache?: PrefixCacheSummary;
  /** What the server's numbers warn of: `kv_cache_full`, `preemptions`. */
  warnings: Warning[];
}

/** The prefix-cache hit rate over the scrape window (docs/metrics.md, "Server-side numbers"). */
export interface PrefixCacheSummary {
  /** 0..1: cached prompt tokens / queried prompt tokens, or the server's own rate. */
  hitRate: number;
  /** The series it came from: `hits / queries` counters, or the gauge averaged over scrapes. */
  from: string;
  /** From the counters: prompt tokens found in the cache and looked up during the window. */
  hitTokens?: number;
  queriedTokens?: number;
}

/**
 * Where a prefix-cache hit rate comes from, in order of preference: vLLM's token counters (v1,
 * then their deprecated `gpu_` names, never both summed), else a server's own rate gauge: vLLM
 * v0's `gpu_prefix_cache_hit_rate`, SGLang's `cache_hit_rate` (of its recent batches),
 * trtllm-serve's `kv_cache_hit_rate`.
 */
const PREFIX_COUNTERS = [
  ['vllm:prefix_cache_hits_total', 'vllm:prefix_cache_queries_total'],
  ['vllm:gpu_prefix_cache_hits_total', 'vllm:gpu_prefix_cache_queries_total'],
] as const;
const PREFIX_GAUGES = [
  'vllm:gpu_prefix_cache_hit_rate',
  'sglang:cache_hit_rate',
  'trtllm_kv_cache_hit_rate',
] as const;

/** Range of a gauge over the scrapes that carried it. */
export interface Range {
  mean: number;
  max: number;
}

/**
 * The common fields over the run: gauges by mean and maximum over the scrapes that carried
 * them, counters by their growth from the first to the last scrape (a counter that drops, as
 * when the server restarts, counts again from zero).
 */
export interface ServerMemorySummary {
  /** Scrapes that carried at least one common field. */
  scrapes: number;
  /** Share of the KV cache in use, 0..1. */
  kvCacheUsage?: Range;
  running?: Range;
  waiting?: Range;
  /** Requests preempted (retracted) during the run. */
  preemptions?: number;
  /** Prompt and generated tokens the server counted during the run. */
  promptTokens?: number;
  generationTokens?: number;
  /** GPU memory in use, summed over GPUs, and the GPUs' memory in all. */
  gpuMemoryUsedBytes?: Range & { total?: number };
  /** Resident memory of the server process, and its high-water mark since it started. */
  processRssBytes?: Range & { peak?: number };
}

/** KV usage at or above this counts as a full cache. */
export const KV_FULL = 0.99;

const COUNTER = /(_total|_sum|_count)$/;

/**
 * Summarises snapshots: counters by their growth (first to last scrape), gauges by min, mean,
 * max and last value; the common fields (KV cache, queue, preemptions, GPU and process memory)
 * by their means, peaks and growth, with warnings when the KV cache filled up or requests were
 * preempted. Histogram buckets and prometheus_client's `_created` timestamps stay in
 * `telemetry.jsonl` only.
 */
export function summarizeTelemetry(snapshots: TelemetrySnapshot[]): ServerMetricsSummary {
  const ok = snapshots.filter((s) => s.values !== undefined);
  const failed = snapshots.filter((s) => s.error !== undefined);
  const summary: ServerMetricsSummary = {
    scrapes: snapshots.length,
    failedScrapes: failed.length,
    windowS: ok.length > 1 ? (ok[ok.length - 1].at - ok[0].at) / 1000 : 0,
    counters: {},
    gauges: {},
    warnings: [],
  };
  if (failed.length > 0) summary.firstError = failed[0].error;
  const first = new Map<string, number>();
  const last = new Map<string, number>();
  const gauges = new Map<string, { min: number; max: number; sum: number; n: number }>();
  for (const snapshot of ok) {
    for (const [key, value] of Object.entries(snapshot.values as Record<string, number>)) {
      const name = seriesName(key);
      if (name.endsWith('_bucket') || name.endsWith('_created') || !Number.isFinite(value)) {
        continue;
      }
      if (!first.has(key)) first.set(key, value);
      last.set(key, value);
      if (COUNTER.test(name)) continue;
      const g = gauges.get(key);
      if (g) {
        g.min = Math.min(g.min, value);
        g.max = Math.max(g.max, value);
        g.sum += value;
        g.n++;
      } else gauges.set(key, { min: value, max: value, sum: value, n: 1 });
    }
  }
  for (const [key, value] of last) {
    if (COUNTER.test(seriesName(key))) {
      const delta = value - (first.get(key) as number);
      summary.counters[key] = { delta, perS: summary.windowS > 0 ? delta / summary.windowS : 0 };
    }
  }
  for (const [key, g] of gauges) {
    summary.gauges[key] = {
      min: g.min,
      mean: g.sum / g.n,
      max: g.max,
      last: last.get(key) as number,
    };
  }
  const prefixCache = prefixCacheHitRate(summary);
  if (prefixCache) summary.prefixCache = prefixCache;
  const memory = summarizeCommon(ok);
  if (memory) {
    summary.memory = memory;
    summary.warnings = memoryWarnings(memory);
  }
  return summary;
}

/** Hits over queries grown in the window (summed over series), else the mean of a rate gauge. */
function prefixCacheHitRate(summary: ServerMetricsSummary): PrefixCacheSummary | undefined {
  const growth = (name: string) => {
    let total: number | undefined;
    for (const [key, c] of Object.entries(summary.counters)) {
      if (seriesName(key) === name) total = (total ?? 0) + c.delta;
    }
    return total;
  };
  for (const [hitsName, queriesName] of PREFIX_COUNTERS) {
    const hits = growth(hitsName);
    const queries = growth(queriesName);
    if (hits === undefined || queries === undefined) continue;
    // No lookups in the window (or a restart made the counters drop): no rate to tell.
    if (!(queries > 0) || hits < 0 || hits > queries) return undefined;
    return {
      hitRate: hits / queries,
      from: `${hitsName} / ${queriesName}`,
      hitTokens: hits,
      queriedTokens: queries,
    };
  }
  for (const name of PREFIX_GAUGES) {
    const means = Object.entries(summary.gauges)
      .filter(([key]) => seriesName(key) === name)
      .map(([, g]) => g.mean);
    if (means.length > 0) {
      return { hitRate: means.reduce((a, b) => a + b, 0) / means.length, from: `${name} (mean)` };
    }
  }
  return undefined;
}

type GaugeField = Exclude<keyof CommonTelemetry, CounterField>;
type CounterField = 'preemptions' | 'promptTokens' | 'generationTokens';
const COUNTER_FIELDS: CounterField[] = ['preemptions', 'promptTokens', 'generationTokens'];

/** The common fields of every snapshot, summarised (undefined when no snapshot had one). */
function summarizeCommon(snapshots: TelemetrySnapshot[]): ServerMemorySummary | undefined {
  const gauges = new Map<GaugeField, { sum: number; n: number; max: number }>();
  // Counter growth per source, so two sources never mix their counts.
  const counters = new Map<string, { last: number; growth: number }>();
  let scrapes = 0;
  for (const snapshot of [...snapshots].sort((a, b) => a.at - b.at)) {
    const fields = commonFields(snapshot.values ?? {});
    const entries = Object.entries(fields) as [keyof CommonTelemetry, number][];
    if (entries.length === 0) continue;
    scrapes++;
    for (const [field, value] of entries) {
      if ((COUNTER_FIELDS as string[]).includes(field)) {
        const id = `${snapshot.source}:${field}`;
        const c = counters.get(id);
        if (!c) counters.set(id, { last: value, growth: 0 });
        else {
          c.growth += value >= c.last ? value - c.last : value;
          c.last = value;
        }
        continue;
      }
      const g = gauges.get(field as GaugeField);
      if (g) {
        g.sum += value;
        g.n++;
        g.max = Math.max(g.max, value);
      } else gauges.set(field as GaugeField, { sum: value, n: 1, max: value });
    }
  }
  if (scrapes === 0) return undefined;
  const range = (field: GaugeField): Range | undefined => {
    const g = gauges.get(field);
    return g ? { mean: g.sum / g.n, max: g.max } : undefined;
  };
  const memory: ServerMemorySummary = { scrapes };
  const kv = range('kvCacheUsage');
  if (kv) memory.kvCacheUsage = kv;
  const running = range('running');
  if (running) memory.running = running;
  const waiting = range('waiting');
  if (waiting) memory.waiting = waiting;
  for (const field of COUNTER_FIELDS) {
    let growth: number | undefined;
    for (const [id, c] of counters) {
      if (id.endsWith(`:${field}`)) growth = Math.max(growth ?? c.growth, c.growth);
    }
    if (growth !== undefined) memory[field] = growth;
  }
  const gpu = range('gpuMemoryUsedBytes');
  if (gpu) {
    const total = gauges.get('gpuMemoryTotalBytes')?.max;
    memory.gpuMemoryUsedBytes = total !== undefined ? { ...gpu, total } : gpu;
  }
  const rss = range('processRssBytes');
  if (rss) {
    const peak = gauges.get('processPeakRssBytes')?.max;
    memory.processRssBytes = peak !== undefined ? { ...rss, peak } : rss;
  }
  return memory;
}

/** `kv_cache_full` when the KV cache peaked at 99 % or more, `preemptions` when any happened. */
function memoryWarnings(memory: ServerMemorySummary): Warning[] {
  const warnings: Warning[] = [];
  if (memory.kvCacheUsage && memory.kvCacheUsage.max >= KV_FULL) {
    const { max: peak, mean } = memory.kvCacheUsage;
    warnings.push(warning('kv_cache_full', { peak, mean, limit: KV_FULL }));
  }
  if (memory.preemptions !== undefined && memory.preemptions > 0) {
    warnings.push(warning('preemptions', { preemptions: memory.preemptions }));
  }
  return warnings;
}
