/**
 * `--output otlp[=URL]`: the session's live metrics pushed over OTLP/HTTP (JSON) with the
 * official OpenTelemetry JS SDK and exporter, every EXPORT_INTERVAL_MS and at the end of every
 * point. URL is a base endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT is (metrics go to
 * URL/v1/metrics); without it the exporter reads the OTEL_EXPORTER_OTLP_* variables itself
 * (endpoint, headers, timeout), and headers are never printed.
 *
 * The metrics are already aggregated (the live totals every thread merges): the SDK's
 * instruments would aggregate them again, and its histogram takes single values, not buckets.
 * So one MetricProducer on the reader hands the SDK the series as they are (sums, gauges,
 * explicit-bucket histograms, cumulative), the same series the Prometheus output serves.
 *
 * Imported only when named: a plain run never loads the SDK.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import { type HrTime, ValueType } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AggregationTemporality,
  type CollectionResult,
  DataPointType,
  MeterProvider,
  type MetricData,
  type MetricProducer,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import { UsageError } from '../../errors.js';
import { terminalSafe } from '../../report/format.js';
import { VERSION } from '../../version.js';
import type { OutputContext } from '../events.js';
import { builtInOutput, type Output } from '../events.js';
import {
  type ExportedMetric,
  type PointSeries,
  pointSamples,
  SessionSeries,
} from './exportedMetrics.js';

/** How often metrics are pushed while a point runs (the 5 s). */
export const EXPORT_INTERVAL_MS = 5000;

/**
 * The longest a flush at a point's end, or the shutdown at the session's, is waited on: a
 * collector that never answers must not hold the run. Past it the request is cut.
 */
export const FLUSH_WITHIN_MS = 3000;

/** Where the metrics go: URL's /v1/metrics, or undefined for the exporter's own (environment). */
export function metricsUrl(arg: string | undefined): string | undefined {
  if (arg === undefined || arg === '') return undefined;
  let base: URL;
  try {
    base = new URL(arg);
  } catch {
    throw new UsageError([
      `--output otlp=${redactUrl(arg)}: not a URL; give the collector's OTLP/HTTP base, e.g. --output otlp=http://localhost:4318`,
    ]);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new UsageError([
      `--output otlp: the URL must be http:// or https://, got ${base.protocol}`,
    ]);
  }
  const path = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
  base.pathname = `${path}v1/metrics`;
  return base.href;
}

/** A URL as said on the terminal: no user name, password or query (they may carry secrets). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(the URL given)';
  }
}

function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

/** The SDK's MetricData of every point's series, as of `nowMs`. */
export function metricData(points: readonly PointSeries[], nowMs: number): MetricData[] {
  const byMetric = new Map<ExportedMetric, MetricData>();
  const endTime = hrTime(nowMs);
  for (const p of points) {
    const startTime = hrTime(p.startedAtMs);
    for (const s of pointSamples(p)) {
      const m = s.metric;
      let data = byMetric.get(m);
      if (!data) {
        const descriptor = {
          name: m.name,
          description: m.description,
          unit: m.unit,
          valueType: m.kind === 'histogram' && m.unit === 's' ? ValueType.DOUBLE : ValueType.INT,
        };
        const temporality = AggregationTemporality.CUMULATIVE;
        data =
          m.kind === 'counter'
            ? {
                descriptor,
                aggregationTemporality: temporality,
                dataPointType: DataPointType.SUM,
                isMonotonic: true,
                dataPoints: [],
              }
            : m.kind === 'gauge'
              ? {
                  descriptor: { ...descriptor, valueType: ValueType.DOUBLE },
                  aggregationTemporality: temporality,
                  dataPointType: DataPointType.GAUGE,
                  dataPoints: [],
                }
              : {
                  descriptor,
                  aggregationTemporality: temporality,
                  dataPointType: DataPointType.HISTOGRAM,
                  dataPoints: [],
                };
        byMetric.set(m, data);
      }
      const attributes = s.attributes;
      if ('value' in s) {
        if (
          data.dataPointType === DataPointType.SUM ||
          data.dataPointType === DataPointType.GAUGE
        ) {
          data.dataPoints.push({ startTime, endTime, attributes, value: s.value });
        }
      } else if (data.dataPointType === DataPointType.HISTOGRAM) {
        const h = s.histogram;
        data.dataPoints.push({
          startTime,
          endTime,
          attributes,
          value: {
            buckets: { boundaries: [...h.bounds], counts: [...h.counts] },
            count: h.count,
            sum: h.sum,
          },
        });
      }
    }
  }
  return [...byMetric.values()];
}

/** Makes the exporter and reader; a bad URL fails the command before anything runs. */
export async function otlpOutput(arg: string | undefined, context: OutputContext): Promise<Output> {
  const url = metricsUrl(arg);
  const series = new SessionSeries();
  // The sockets the exporter opens: destroyed at the end, so a request a collector never
  // answers cannot keep the process alive past the bounded shutdown.
  const agents: http.Agent[] = [];
  const timeoutSet =
    process.env.OTEL_EXPORTER_OTLP_METRICS_TIMEOUT !== undefined ||
    process.env.OTEL_EXPORTER_OTLP_TIMEOUT !== undefined;
  const inner = new OTLPMetricExporter({
    ...(url !== undefined ? { url } : {}),
    // Unless the environment says otherwise, an export may take until the next one is due
    // (the exporter's own default, 10 s, would outlive a run's end by that much).
    ...(timeoutSet ? {} : { timeoutMillis: EXPORT_INTERVAL_MS }),
    httpAgentOptions: (protocol: string) => {
      const agent =
        protocol === 'https:'
          ? new https.Agent({ keepAlive: true })
          : new http.Agent({ keepAlive: true });
      agents.push(agent);
      return agent;
    },
  });
  const where = url !== undefined ? redactUrl(url) : 'the collector OTEL_EXPORTER_OTLP_* names';
  let failures = 0;
  // Set at the session's end: nothing more is sent or said.
  let closed = false;
  const exporter: PushMetricExporter = {
    export(metrics, done) {
      if (closed) {
        done({ code: ExportResultCode.FAILED, error: new Error('the otlp output is closed') });
        return;
      }
      inner.export(metrics, (result) => {
        if (!closed && result.code !== ExportResultCode.SUCCESS && failures++ === 0) {
          // Once: a collector that is down would otherwise say so every 5 s.
          context.notice(
            `otlp: pushing metrics to ${where} failed (${oneLine(result.error?.message ?? 'no reason given')}); the run goes on, later failures are not told`,
          );
        }
        done(result);
      });
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
    selectAggregationTemporality: (t) => inner.selectAggregationTemporality(t),
  };
  const producer: MetricProducer = {
    collect(): Promise<CollectionResult> {
      return Promise.resolve({
        resourceMetrics: {
          resource,
          scopeMetrics: [
            {
              scope: { name: 'infergauge', version: VERSION },
              metrics: metricData(series.all(), Date.now()),
            },
          ],
        },
        errors: [],
      });
    },
  };
  const resource = resourceFromAttributes({
    'service.name': 'infergauge',
    'service.version': VERSION,
  });
  const reader = new PeriodicExportingMetricReader({
    exporter,
    exportIntervalMillis: EXPORT_INTERVAL_MS,
    exportTimeoutMillis: EXPORT_INTERVAL_MS,
    metricProducers: [producer],
  });
  const provider = new MeterProvider({ resource, readers: [reader] });
  context.notice(`otlp: pushing metrics every ${EXPORT_INTERVAL_MS / 1000} s to ${where}`);

  // Once a collector has not answered within the bound, later flushes are not waited on: it
  // would cost every point of a sweep the bound again. The periodic push goes on regardless.
  let unanswered = false;
  const bounded = async (what: string, work: Promise<void>): Promise<void> => {
    if (unanswered) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), FLUSH_WITHIN_MS);
    });
    const done = work.then(
      () => 'done' as const,
      () => 'done' as const,
    );
    const outcome = await Promise.race([done, late]);
    clearTimeout(timer);
    if (outcome === 'late') {
      unanswered = true;
      context.notice(
        `otlp: ${where} did not take the ${what} within ${FLUSH_WITHIN_MS / 1000} s; the run does not wait for it`,
      );
    }
  };
  return builtInOutput({
    name: 'otlp',
    pointStarted(e) {
      series.pointStarted(e);
    },
    snapshot(e) {
      series.snapshot(e.point.id, e.live.totals, e.live.inFlight);
    },
    async pointFinished(e) {
      series.pointFinished(e.point.id, e.summary);
      await bounded(`metrics of point ${e.point.id}`, reader.forceFlush());
    },
    async sessionFinished() {
      // A collector that did not answer gets no last push: it would only wait out the bound.
      if (unanswered) closed = true;
      await bounded('last metrics', provider.shutdown());
      closed = true;
      // Cuts a request still waiting for an answer, so that it cannot keep the process alive.
      for (const agent of agents) agent.destroy();
    },
  });
}

/** An error's text on one line, safe on a terminal (it may quote the collector's answer). */
function oneLine(text: string): string {
  return terminalSafe(text).replace(/\s+/g, ' ').slice(0, 200);
}
