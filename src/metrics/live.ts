/**
 * Live metrics: what outputs (the dashboard, OTLP, Prometheus) see while a point runs. Each
 * measuring thread keeps a `LiveRecorder` and hands over what finished since its last turn as a
 * `LiveDelta` (plain data, sent between threads every second); the coordinating thread's
 * `LiveView` merges the deltas into the point's totals and a sliding window.
 *
 * Live numbers are for watching, not for the record: percentiles come from log buckets (within
 * 0.6 % of a sample's value), the window is cut at whole seconds of arrival, and the summary at
 * the end (summary.json) is what a result says. Everything here merges exactly: counts and
 * integer microsecond sums add up the same in any order, so deltas split across threads merge
 * to what one thread would have counted.
 */
import type { ErrorKind, RequestRecord } from '../record.js';
import { forEachTokenGap } from './requestMetrics.js';

/** The latency metrics watched live, in milliseconds. */
export const LIVE_LATENCY_KEYS = ['ttftMs', 'itlMs', 'tpotMs', 'e2eMs'] as const;
export type LiveLatencyKey = (typeof LIVE_LATENCY_KEYS)[number];

/** Per-request token counts, as histograms (OpenTelemetry's `gen_ai.client.token.usage`). */
export const LIVE_TOKEN_KEYS = ['inputTokens', 'outputTokens'] as const;
export type LiveTokenKey = (typeof LIVE_TOKEN_KEYS)[number];

export type LiveHistogramKey = LiveLatencyKey | LiveTokenKey;

/**
 * The explicit bucket upper bounds every exporter uses, in the metric's own unit (seconds for
 * latencies, tokens for counts): the ExplicitBucketBoundaries advice of OpenTelemetry's GenAI
 * semantic conventions (open-telemetry/semantic-conventions, docs/gen-ai/gen-ai-metrics.md at
 * 953276ff4d0404cdddb515e7418e6a2cf43c2b0b, the last before they moved to their own repository)
 * for the metric each is exported as: `gen_ai.client.operation.duration` (E2E),
 * `gen_ai.client.operation.time_to_first_chunk` (TTFT) and `.time_per_output_chunk` (ITL) share
 * one advice; TPOT, infergauge's own, takes `gen_ai.server.time_per_output_token`'s, the one
 * per-token advice; `gen_ai.client.token.usage` for tokens. docs/metrics.md, "Live metrics and
 * exporters", lists them.
 */
const CLIENT_OPERATION_S = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
const PER_TOKEN_S = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5];
const TOKENS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
export const EXPORT_BOUNDS: Readonly<Record<LiveHistogramKey, readonly number[]>> = {
  e2eMs: CLIENT_OPERATION_S,
  ttftMs: CLIENT_OPERATION_S,
  itlMs: CLIENT_OPERATION_S,
  tpotMs: PER_TOKEN_S,
  inputTokens: TOKENS,
  outputTokens: TOKENS,
};

/** What an exported value is: a latency is kept in ms and exported in seconds. */
export function exportScale(key: LiveHistogramKey): number {
  return key.endsWith('Ms') ? 1e-3 : 1;
}

/**
 * Fine buckets per doubling: 2^(1/64) apart (1.09 %), so a bucket's geometric middle is within
 * 0.55 % of any value in it. Values are kept in units of a thousandth (µs for ms): from 1 to
 * 2^40 (about 12.7 days in µs) in 40 x 64 buckets; below one thousandth is bucket 0.
 */
const PER_DOUBLING = 64;
const FINE_BUCKETS = 40 * PER_DOUBLING + 1;

function fineIndex(thousandths: number): number {
  if (!(thousandths >= 1)) return 0;
  return Math.min(FINE_BUCKETS - 1, 1 + Math.floor(Math.log2(thousandths) * PER_DOUBLING));
}

/** The value a fine bucket stands for (its geometric middle), in the metric's unit. */
function fineValue(index: number): number {
  if (index === 0) return 0;
  return 2 ** ((index - 1 + 0.5) / PER_DOUBLING) / 1000;
}

/** A histogram as plain data: sparse fine buckets, export bucket counts, count, sum, min, max. */
export interface LiveHistogramState {
  /** Fine bucket indices with their counts, ascending by index. */
  fine: [number, number][];
  /** Counts per export bucket (EXPORT_BOUNDS), the last one above every bound. */
  buckets: number[];
  count: number;
  /** Sum in thousandths of the unit, rounded: integers add up the same in any order. */
  sumThousandths: number;
  min: number;
  max: number;
}

export class LiveHistogram {
  private fine = new Map<number, number>();
  private buckets: number[];
  count = 0;
  private sumThousandths = 0;
  private min = Number.POSITIVE_INFINITY;
  private max = Number.NEGATIVE_INFINITY;

  constructor(private readonly bounds: readonly number[]) {
    this.buckets = new Array<number>(bounds.length + 1).fill(0);
  }

  /** Adds `weight` samples of `value` (in the metric's unit before export scaling). */
  add(value: number, weight = 1, scale = 1): void {
    if (!Number.isFinite(value) || value < 0 || weight <= 0) return;
    const thousandths = Math.round(value * 1000);
    const index = fineIndex(thousandths);
    this.fine.set(index, (this.fine.get(index) ?? 0) + weight);
    const exported = value * scale;
    const { bounds } = this;
    // Bounds are few (13-16): a scan costs less than a search.
    let b = 0;
    while (b < bounds.length && exported > bounds[b]) b++;
    this.buckets[b] += weight;
    this.count += weight;
    this.sumThousandths += thousandths * weight;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
  }

  merge(state: LiveHistogramState): void {
    if (state.count === 0) return;
    for (const [index, n] of state.fine) this.fine.set(index, (this.fine.get(index) ?? 0) + n);
    for (let b = 0; b < this.buckets.length; b++) this.buckets[b] += state.buckets[b] ?? 0;
    this.count += state.count;
    this.sumThousandths += state.sumThousandths;
    this.min = Math.min(this.min, state.min);
    this.max = Math.max(this.max, state.max);
  }

  state(): LiveHistogramState {
    return {
      fine: [...this.fine.entries()].sort((a, b) => a[0] - b[0]),
      buckets: [...this.buckets],
      count: this.count,
      sumThousandths: this.sumThousandths,
      min: this.count > 0 ? this.min : 0,
      max: this.count > 0 ? this.max : 0,
    };
  }

  /** Percentiles by nearest rank, each the middle of its fine bucket kept within [min, max]. */
  stats(): LiveStats | undefined {
    if (this.count === 0) return undefined;
    const sorted = [...this.fine.entries()].sort((a, b) => a[0] - b[0]);
    const at = (q: number) => {
      const rank = Math.max(1, Math.ceil((q / 100) * this.count));
      let seen = 0;
      for (const [index, n] of sorted) {
        seen += n;
        if (seen >= rank) return Math.min(this.max, Math.max(this.min, fineValue(index)));
      }
      return this.max;
    };
    return {
      count: this.count,
      mean: this.sumThousandths / 1000 / this.count,
      p50: at(50),
      p90: at(90),
      p95: at(95),
      p99: at(99),
      max: this.max,
    };
  }
}

/** A live distribution's summary, in the metric's unit (ms for latencies). */
export interface LiveStats {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

/** What one thread measured since its last delta: plain data, to cross between threads. */
export interface LiveDelta {
  completed: number;
  failed: number;
  failedByKind: Partial<Record<ErrorKind, number>>;
  /** Tokens of the completed requests, as the summary's `tokens` counts them. */
  inputTokens: number;
  outputTokens: number;
  histograms: Record<LiveHistogramKey, LiveHistogramState>;
}

function histograms(): Record<LiveHistogramKey, LiveHistogram> {
  return Object.fromEntries(
    [...LIVE_LATENCY_KEYS, ...LIVE_TOKEN_KEYS].map((k) => [k, new LiveHistogram(EXPORT_BOUNDS[k])]),
  ) as Record<LiveHistogramKey, LiveHistogram>;
}

/**
 * One thread's live counts since its last `take()`. Warm-up requests are not counted, as the
 * summary does not count them. Latencies follow docs/metrics.md's per-request formulas (ITL
 * per token, as the summary's ITL).
 */
export class LiveRecorder {
  private totals = new LiveTotals();

  add(record: RequestRecord): void {
    if (record.phase === 'warmup') return;
    this.totals.addRecord(record);
  }

  /** Whether anything was added since the last take. */
  get empty(): boolean {
    return this.totals.completed + this.totals.failed === 0;
  }

  take(): LiveDelta {
    const delta = this.totals.delta();
    this.totals = new LiveTotals();
    return delta;
  }
}

/** Counters and histograms that add records or deltas. */
class LiveTotals {
  completed = 0;
  failed = 0;
  failedByKind: Partial<Record<ErrorKind, number>> = {};
  inputTokens = 0;
  outputTokens = 0;
  readonly histograms = histograms();

  addRecord(r: RequestRecord): void {
    const h = this.histograms;
    if (r.error) {
      this.failed++;
      this.failedByKind[r.error.kind] = (this.failedByKind[r.error.kind] ?? 0) + 1;
      return;
    }
    // Tokens as the summary counts them: of completed requests, input where it is known.
    this.completed++;
    this.inputTokens += r.inputTokens ?? 0;
    this.outputTokens += r.outputTokens;
    h.e2eMs.add(r.endAt - r.sentAt, 1, 1e-3);
    if (r.firstTokenAt !== undefined) h.ttftMs.add(r.firstTokenAt - r.sentAt, 1, 1e-3);
    if (r.firstTokenAt !== undefined && r.lastTokenAt !== undefined && r.outputTokens > 1) {
      h.tpotMs.add((r.lastTokenAt - r.firstTokenAt) / (r.outputTokens - 1), 1, 1e-3);
    }
    forEachTokenGap(r, (gapMs, tokens) => h.itlMs.add(gapMs / tokens, tokens, 1e-3));
    if (r.inputTokens !== undefined) h.inputTokens.add(r.inputTokens);
    h.outputTokens.add(r.outputTokens);
  }

  addDelta(d: LiveDelta): void {
    this.completed += d.completed;
    this.failed += d.failed;
    for (const [kind, n] of Object.entries(d.failedByKind) as [ErrorKind, number][]) {
      this.failedByKind[kind] = (this.failedByKind[kind] ?? 0) + n;
    }
    this.inputTokens += d.inputTokens;
    this.outputTokens += d.outputTokens;
    for (const k of Object.keys(this.histograms) as LiveHistogramKey[]) {
      this.histograms[k].merge(d.histograms[k]);
    }
  }

  delta(): LiveDelta {
    return {
      completed: this.completed,
      failed: this.failed,
      failedByKind: { ...this.failedByKind },
      inputTokens: this.inputTokens,
      outputTokens: this.outputTokens,
      histograms: Object.fromEntries(
        Object.entries(this.histograms).map(([k, h]) => [k, h.state()]),
      ) as Record<LiveHistogramKey, LiveHistogramState>,
    };
  }

  stats(seconds: number, concurrency: number | undefined): LiveWindowStats {
    const h = this.histograms;
    const perS = (n: number) => (seconds > 0 ? n / seconds : 0);
    return {
      seconds,
      completed: this.completed,
      failed: this.failed,
      failedByKind: { ...this.failedByKind },
      requestsPerS: perS(this.completed),
      outputTokensPerS: perS(this.outputTokens),
      inputTokensPerS: perS(this.inputTokens),
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...Object.fromEntries(
        LIVE_LATENCY_KEYS.flatMap((k) => {
          const s = h[k].stats();
          return s ? [[k, s]] : [];
        }),
      ),
    };
  }
}

/** Counts, rates and latencies over a stretch of the point (the whole of it, or the window). */
export interface LiveWindowStats extends Partial<Record<LiveLatencyKey, LiveStats>> {
  /** The stretch's length. */
  seconds: number;
  completed: number;
  failed: number;
  failedByKind: Partial<Record<ErrorKind, number>>;
  /** Completed requests per second over the stretch. */
  requestsPerS: number;
  outputTokensPerS: number;
  inputTokensPerS: number;
  /** Mean requests in flight over the stretch, from the once-a-second counts. */
  concurrency?: number;
}

/** What an output is told about a point every second while it runs. */
export interface LiveSnapshot {
  /** Seconds since the point's schedule started. */
  elapsedS: number;
  sent: number;
  inFlight: number;
  /** Seconds left: from the requests left and the window's rate, or the duration left. */
  etaS?: number;
  cumulative: LiveWindowStats;
  /** From the whole second LIVE_WINDOW_S seconds ago to now (from the start, at first). */
  window: LiveWindowStats;
  /** Cumulative counters and histograms as plain data, for exporters (EXPORT_BOUNDS). */
  totals: LiveDelta;
}

/** The sliding window's length. */
export const LIVE_WINDOW_S = 10;

/** What the point plans: measured requests to finish (warm-up not counted), or a duration. */
export interface LivePlan {
  totalRequests?: number;
  durationS?: number;
}

/**
 * The coordinating thread's view of a point: deltas from every measuring thread, in the second
 * they arrived, and the in-flight count sampled once a second.
 */
export class LiveView {
  private readonly all = new LiveTotals();
  /** Per whole second of arrival: the deltas that arrived in it. */
  private readonly seconds = new Map<number, LiveTotals>();
  /** In-flight samples: [second, count]. */
  private readonly inFlight: [number, number][] = [];
  private inFlightSum = 0;
  private inFlightSamples = 0;

  constructor(private readonly plan: LivePlan = {}) {}

  /** A thread's delta, arrived `atS` seconds into the point. */
  add(delta: LiveDelta, atS: number): void {
    this.all.addDelta(delta);
    const second = Math.max(0, Math.floor(atS));
    let bin = this.seconds.get(second);
    if (!bin) {
      bin = new LiveTotals();
      this.seconds.set(second, bin);
      for (const s of this.seconds.keys()) if (s < second - LIVE_WINDOW_S) this.seconds.delete(s);
    }
    bin.addDelta(delta);
  }

  /**
   * The snapshot at `atS` seconds, with the run's live counts. Each but the `last` (told as the
   * point ends, after its drain) samples the in-flight count for the concurrency.
   */
  snapshot(atS: number, counts: { sent: number; inFlight: number }, last = false): LiveSnapshot {
    const elapsedS = Math.max(0, atS);
    const now = Math.floor(elapsedS);
    if (!last || this.inFlightSamples === 0) {
      this.inFlight.push([now, counts.inFlight]);
      this.inFlightSum += counts.inFlight;
      this.inFlightSamples++;
    }
    // The window runs from the whole second LIVE_WINDOW_S ago to now: its seconds of arrival
    // are whole, the last one in progress.
    const from = Math.max(0, now - LIVE_WINDOW_S);
    while (this.inFlight.length > 0 && this.inFlight[0][0] < from) this.inFlight.shift();
    const window = new LiveTotals();
    for (const [s, bin] of this.seconds) if (s >= from) window.addDelta(bin.delta());
    const windowS = elapsedS - from;
    const windowConcurrency =
      this.inFlight.length > 0
        ? this.inFlight.reduce((n, [, c]) => n + c, 0) / this.inFlight.length
        : undefined;
    const eta = this.eta(elapsedS, window, windowS);
    return {
      elapsedS,
      sent: counts.sent,
      inFlight: counts.inFlight,
      ...(eta !== undefined ? { etaS: eta } : {}),
      cumulative: this.all.stats(elapsedS, this.inFlightSum / this.inFlightSamples),
      window: window.stats(windowS, windowConcurrency),
      totals: this.all.delta(),
    };
  }

  private eta(elapsedS: number, window: LiveTotals, windowS: number): number | undefined {
    const { totalRequests, durationS } = this.plan;
    if (durationS !== undefined) return Math.max(0, durationS - elapsedS);
    if (totalRequests === undefined) return undefined;
    const left = totalRequests - this.all.completed - this.all.failed;
    if (left <= 0) return 0;
    const done = window.completed + window.failed;
    return done > 0 && windowS > 0 ? left / (done / windowS) : undefined;
  }
}
