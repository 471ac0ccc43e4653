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
}

const COUNTER = /(_total|_sum|_count)$/;

/**
 * Summarises snapshots: counters by their growth (first to last scrape), gauges by min, mean,
 * max and last value. Histogram buckets stay in `telemetry.jsonl` only.
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
  };
  if (failed.length > 0) summary.firstError = failed[0].error;
  const first = new Map<string, number>();
  const last = new Map<string, number>();
  const gauges = new Map<string, { min: number; max: number; sum: number; n: number }>();
  for (const snapshot of ok) {
    for (const [key, value] of Object.entries(snapshot.values as Record<string, number>)) {
      const name = seriesName(key);
      if (name.endsWith('_bucket') || !Number.isFinite(value)) continue;
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
  return summary;
}
