/**
 * What `--output otlp` and `--output prometheus` export: one description of every metric (its
 * OpenTelemetry name, unit, kind, and the Prometheus name derived from them), and the series of
 * one point built from its latest live snapshot. Both exporters read the same series, so a
 * collector and a scrape see the same numbers under names that correspond.
 *
 * Names follow OpenTelemetry's GenAI semantic conventions where one means what is measured
 * (open-telemetry/semantic-conventions, docs/gen-ai/gen-ai-metrics.md at
 * 953276ff4d0404cdddb515e7418e6a2cf43c2b0b); the rest are infergauge's own, under `infergauge.`.
 * The server's own metrics (telemetry) are not re-exported: its engine-specific gauges have no
 * `gen_ai.server.*` counterpart, and Prometheus scrapes the server's /metrics directly.
 */
import type { LoadSpec } from '../../load.js';
import {
  EXPORT_BOUNDS,
  exportScale,
  type LiveDelta,
  type LiveHistogramKey,
} from '../../metrics/live.js';
import type { RunSummary } from '../../metrics/summary.js';
import { VERDICT_RANK } from '../../metrics/validity.js';
import type { PointStarted } from '../events.js';

export type MetricKind = 'counter' | 'gauge' | 'histogram';

export interface ExportedMetric {
  /** The OpenTelemetry name. */
  name: string;
  /** UCUM, as OpenTelemetry says units: `s`, `1`, `{request}`. */
  unit: string;
  kind: MetricKind;
  description: string;
  /** The Prometheus name (prometheusName): underscores, unit word, `_total` on counters. */
  prometheus: string;
}

/**
 * UCUM units to Prometheus unit words, from open-telemetry/opentelemetry-specification,
 * specification/compatibility/prometheus_and_openmetrics.md ("OTLP Metric points to
 * Prometheus", at 1377f53b2bc0683c45169b8f20fd973eb4d59419): only the units exported here. `1`
 * (a ratio) is not in the spec's table: the OpenTelemetry Collector's translator says `ratio`.
 */
const UNIT_WORDS: Record<string, string> = { s: 'seconds', '1': 'ratio' };

/**
 * The Prometheus name of an OpenTelemetry metric, by the rules of the specification above:
 * characters outside `[a-zA-Z0-9_:]` become `_` (runs of `_` become one), units in braces are
 * dropped, a unit word is added unless the name already ends with it, a gauge of unit `1` aside,
 * and a counter ends in `_total`.
 */
export function prometheusName(name: string, unit: string, kind: MetricKind): string {
  let out = sanitise(name);
  const word = UNIT_WORDS[unit.replace(/\{[^}]*\}/g, '')];
  if (word && !out.endsWith(`_${word}`)) out += `_${word}`;
  if (kind === 'counter' && !out.endsWith('_total')) out += '_total';
  return out;
}

/** A Prometheus label name for an attribute key (the same rule as names, no colons). */
export function prometheusLabel(key: string): string {
  return sanitise(key).replace(/:/g, '_');
}

function sanitise(name: string): string {
  const out = name.replace(/[^a-zA-Z0-9_:]/g, '_').replace(/_+/g, '_');
  return /^[0-9]/.test(out) ? `_${out}` : out;
}

function metric(name: string, unit: string, kind: MetricKind, description: string) {
  return { name, unit, kind, description, prometheus: prometheusName(name, unit, kind) };
}

/** Every exported metric, in the order a scrape lists them. */
export const EXPORTED = {
  requests: metric(
    'infergauge.client.requests',
    '{request}',
    'counter',
    'Measured requests that finished, by outcome (completed, failed) and error.type on failures',
  ),
  inFlight: metric(
    'infergauge.client.requests.in_flight',
    '{request}',
    'gauge',
    'Requests in flight at the latest live snapshot',
  ),
  e2eMs: metric(
    'gen_ai.client.operation.duration',
    's',
    'histogram',
    'E2E: request sent to last byte of the response, completed requests',
  ),
  ttftMs: metric(
    'gen_ai.client.operation.time_to_first_chunk',
    's',
    'histogram',
    'TTFT: request sent to the first chunk carrying an output token, completed requests',
  ),
  itlMs: metric(
    'gen_ai.client.operation.time_per_output_chunk',
    's',
    'histogram',
    'ITL: gap between token-carrying chunks after the first, counted once per token it carried',
  ),
  tpotMs: metric(
    'infergauge.client.time_per_output_token',
    's',
    'histogram',
    'TPOT: (last token - first token) / (output tokens - 1) per completed request',
  ),
  tokens: metric(
    'gen_ai.client.token.usage',
    '{token}',
    'histogram',
    'Input and output tokens per completed request, by gen_ai.token.type',
  ),
  eventLoopDelayP99: metric(
    'infergauge.client.event_loop.delay.p99',
    's',
    'gauge',
    "The load generator's event-loop delay p99 over the point (client health), at its end",
  ),
  cpuUtilization: metric(
    'infergauge.client.cpu.utilization',
    '1',
    'gauge',
    "The load generator process's CPU as a share of the cores it may use, at the point's end",
  ),
  clientLimited: metric(
    'infergauge.client.limited',
    '',
    'gauge',
    '1 when client health found the load generator limiting the run, else 0, at its end',
  ),
  validity: metric(
    'infergauge.run.validity',
    '',
    'gauge',
    "The point's validity verdict at its end: 2 valid, 1 caution, 0 invalid",
  ),
} satisfies Record<string, ExportedMetric>;

/** The latency and token histograms, by the live key each is read from. */
export const HISTOGRAM_OF: Readonly<Record<LiveHistogramKey, ExportedMetric>> = {
  e2eMs: EXPORTED.e2eMs,
  ttftMs: EXPORTED.ttftMs,
  itlMs: EXPORTED.itlMs,
  tpotMs: EXPORTED.tpotMs,
  inputTokens: EXPORTED.tokens,
  outputTokens: EXPORTED.tokens,
};

/** A point's load as a label: `closed:8`, `open:20/s` (`open:trace` for a replay). */
export function loadLabel(load: LoadSpec): string {
  if (load.mode === 'closed') return `closed:${load.concurrency}`;
  if (load.arrival === 'trace') return 'open:trace';
  return `open:${Number(load.rate.toPrecision(6))}/s`;
}

export type Attributes = Record<string, string | number>;

/**
 * What labels every series of a point: the session and point ids, scenario and load, and the
 * GenAI conventions' attributes (operation, provider, requested model, server address and port).
 * The server's URL is cut to its host and port: its path, query and credentials stay out.
 */
export function pointAttributes(e: PointStarted): Attributes {
  const plan = (e.manifest.plan ?? {}) as { endpoint?: unknown; backend?: unknown };
  const attributes: Attributes = {
    'infergauge.run.id': e.session.id,
    'infergauge.point.id': e.point.id,
    'infergauge.scenario': e.point.scenario,
    'infergauge.load': loadLabel(e.point.load),
    'gen_ai.operation.name': plan.endpoint === 'completions' ? 'text_completion' : 'chat',
    // The wire format's flavour, as the conventions use it: every backend but `openai` names
    // a server of its own.
    'gen_ai.provider.name': typeof plan.backend === 'string' ? plan.backend : 'openai',
  };
  if (typeof e.manifest.model === 'string') attributes['gen_ai.request.model'] = e.manifest.model;
  const url = (e.manifest.server as { url?: unknown } | undefined)?.url;
  if (typeof url === 'string') {
    try {
      const u = new URL(url);
      attributes['server.address'] = u.hostname.replace(/^\[|\]$/g, '');
      attributes['server.port'] = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
    } catch {}
  }
  return attributes;
}

/** A point's exported state: its labels, its latest live totals, what its end said. */
export interface PointSeries {
  attributes: Attributes;
  /** Wall-clock ms when the point started (a cumulative series' start time). */
  startedAtMs: number;
  totals?: LiveDelta;
  inFlight?: number;
  end?: PointEnd;
}

/** What a point's summary adds at its end (client health and validity gauges). */
export interface PointEnd {
  eventLoopDelayP99S?: number;
  cpuUtilization?: number;
  clientLimited?: boolean;
  validity?: number;
}

export function pointEnd(summary: RunSummary): PointEnd {
  const health = summary.clientHealth;
  const end: PointEnd = {};
  const p99 = health?.eventLoopDelayMs.p99;
  if (p99 !== undefined && Number.isFinite(p99)) end.eventLoopDelayP99S = p99 / 1000;
  const cpu = health?.processCpu?.share;
  if (cpu !== undefined && Number.isFinite(cpu)) end.cpuUtilization = cpu;
  if (health && !health.unmeasured) end.clientLimited = health.clientLimited;
  if (summary.validity) end.validity = VERDICT_RANK[summary.validity.verdict];
  return end;
}

/** A histogram as exporters take it: counts per bucket (not cumulative), sum in the unit. */
export interface HistogramValue {
  bounds: readonly number[];
  counts: readonly number[];
  count: number;
  sum: number;
}

export type Sample =
  | { metric: ExportedMetric; attributes: Attributes; value: number }
  | { metric: ExportedMetric; attributes: Attributes; histogram: HistogramValue };

/**
 * The samples of one point, grouped by nothing: each carries its metric. Counters and
 * histograms are cumulative over the point (each point its own series, so they only grow).
 */
export function pointSamples(p: PointSeries): Sample[] {
  const out: Sample[] = [];
  const a = p.attributes;
  const t = p.totals;
  if (t) {
    out.push({
      metric: EXPORTED.requests,
      attributes: { ...a, outcome: 'completed' },
      value: t.completed,
    });
    for (const [kind, n] of Object.entries(t.failedByKind)) {
      if (!n) continue;
      const attributes = { ...a, outcome: 'failed', 'error.type': kind };
      out.push({ metric: EXPORTED.requests, attributes, value: n });
    }
  }
  if (p.inFlight !== undefined) {
    out.push({ metric: EXPORTED.inFlight, attributes: a, value: p.inFlight });
  }
  if (t) {
    for (const key of Object.keys(HISTOGRAM_OF) as LiveHistogramKey[]) {
      const h = t.histograms[key];
      const attributes =
        key === 'inputTokens' || key === 'outputTokens'
          ? { ...a, 'gen_ai.token.type': key === 'inputTokens' ? 'input' : 'output' }
          : a;
      const histogram: HistogramValue = {
        bounds: EXPORT_BOUNDS[key],
        counts: h.buckets,
        count: h.count,
        sum: (h.sumThousandths / 1000) * exportScale(key),
      };
      out.push({ metric: HISTOGRAM_OF[key], attributes, histogram });
    }
  }
  const end = p.end;
  if (end) {
    const gauge = (metric: ExportedMetric, value: number | undefined) => {
      if (value !== undefined) out.push({ metric, attributes: a, value });
    };
    gauge(EXPORTED.eventLoopDelayP99, end.eventLoopDelayP99S);
    gauge(EXPORTED.cpuUtilization, end.cpuUtilization);
    gauge(
      EXPORTED.clientLimited,
      end.clientLimited === undefined ? undefined : Number(end.clientLimited),
    );
    gauge(EXPORTED.validity, end.validity);
  }
  return out;
}

/** Tracks each point of a session: what both exporters read. */
export class SessionSeries {
  private readonly points = new Map<string, PointSeries>();

  pointStarted(e: PointStarted): void {
    this.points.set(e.point.id, { attributes: pointAttributes(e), startedAtMs: Date.now() });
  }

  snapshot(pointId: string, totals: LiveDelta, inFlight: number): void {
    const p = this.points.get(pointId);
    if (!p) return;
    p.totals = totals;
    p.inFlight = inFlight;
  }

  pointFinished(pointId: string, summary: RunSummary): void {
    const p = this.points.get(pointId);
    if (!p) return;
    p.end = pointEnd(summary);
    // Nothing is in flight once a point is done.
    if (p.inFlight !== undefined) p.inFlight = 0;
  }

  all(): readonly PointSeries[] {
    return [...this.points.values()];
  }

  /** Every sample of every point, in EXPORTED's order, points in the order they started. */
  samples(): Sample[] {
    const order = new Map(Object.values(EXPORTED).map((m, i) => [m.name, i]));
    const all = this.all().flatMap(pointSamples);
    // Stable: within a metric, points and series keep their order.
    return all.sort((x, y) => (order.get(x.metric.name) ?? 0) - (order.get(y.metric.name) ?? 0));
  }
}
