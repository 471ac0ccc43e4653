/**
 * Issue 52, the exported metrics' one description and what each exporter makes of it: names by
 * the OpenTelemetry-to-Prometheus rules, labels that survive hostile text, a scrape that a
 * strict reader and the project's own parser accept, and the SDK's metric data of the same
 * series.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DataPointType } from '@opentelemetry/sdk-metrics';
import { UsageError } from '../../../src/errors.js';
import { EXPORT_BOUNDS, LiveRecorder, LiveView } from '../../../src/metrics/live.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import type { PointStarted } from '../../../src/session/events.js';
import {
  EXPORTED,
  loadLabel,
  pointAttributes,
  prometheusName,
  SessionSeries,
} from '../../../src/session/outputs/exportedMetrics.js';
import { metricData, metricsUrl, redactUrl } from '../../../src/session/outputs/otlp.js';
import { parsePrometheusPort, renderPrometheus } from '../../../src/session/outputs/prometheus.js';
import { parsePrometheusText } from '../../../src/telemetry/prometheus.js';
import { strictExpositionCheck } from '../../helpers/exposition.js';
import { phasedRecords } from '../../helpers/phasedRecords.js';

const HOSTILE_MODEL = 'org/"model"\\v1\nx';

function started(id: string, model = HOSTILE_MODEL): PointStarted {
  return {
    session: {
      id: 'sess',
      command: 'sweep',
      kind: 'sweep',
      root: '/tmp/x',
      rootIsPoint: false,
      startedAt: '2026-01-01T00:00:00Z',
      plan: {},
    },
    point: {
      id,
      index: 0,
      kind: 'sweep-point',
      load: { mode: 'closed', concurrency: 8 },
      scenario: 'chat',
    },
    manifest: {
      startedAt: '2026-01-01T00:00:00Z',
      plan: { endpoint: 'chat', backend: 'openai' },
      model,
      server: { url: 'https://user:secret@gpu.example:8443/v1?key=k' },
    },
    nowUs: () => 0,
  };
}

function failed(id: number, kind: 'timeout' | 'http_5xx'): RequestRecord {
  const [r] = phasedRecords(id, { requests: 1 });
  return { ...r, id, error: { kind, message: 'x' } };
}

/** A session of two points, the second with failures, as the exporters hold it. */
function session(): { series: SessionSeries; completed: number[] } {
  const series = new SessionSeries();
  const completed: number[] = [];
  for (const [i, n] of [40, 25].entries()) {
    const id = `sess-${i}`;
    series.pointStarted(started(id));
    const rec = new LiveRecorder();
    for (const r of phasedRecords(i + 1, { requests: n })) rec.add(r);
    if (i === 1)
      for (const kind of ['timeout', 'timeout', 'http_5xx'] as const) rec.add(failed(900, kind));
    const view = new LiveView();
    view.add(rec.take(), 0.5);
    const snap = view.snapshot(1, { sent: n, inFlight: 3 });
    series.snapshot(id, snap.totals, snap.inFlight);
    completed.push(snap.totals.completed);
  }
  series.pointFinished('sess-0', {
    clientHealth: {
      eventLoopDelayMs: { p50: 1, p99: 12.5, max: 20 },
      processCpu: { share: 0.25, usableCores: 4 },
      clientLimited: true,
    },
    validity: { verdict: 'caution', reasons: [] },
  } as unknown as RunSummary);
  return { series, completed };
}

describe('exported metric names', () => {
  test('Prometheus names follow the OpenTelemetry compatibility rules', () => {
    assert.equal(
      prometheusName('gen_ai.client.operation.duration', 's', 'histogram'),
      'gen_ai_client_operation_duration_seconds',
    );
    assert.equal(
      prometheusName('infergauge.client.requests', '{request}', 'counter'),
      'infergauge_client_requests_total',
    );
    assert.equal(
      prometheusName('gen_ai.client.token.usage', '{token}', 'histogram'),
      'gen_ai_client_token_usage',
    );
    assert.equal(prometheusName('a.b_seconds', 's', 'gauge'), 'a_b_seconds');
    assert.equal(prometheusName('x..total', '', 'counter'), 'x_total');
    assert.equal(EXPORTED.cpuUtilization.prometheus, 'infergauge_client_cpu_utilization_ratio');
    assert.equal(EXPORTED.ttftMs.prometheus, 'gen_ai_client_operation_time_to_first_chunk_seconds');
    const names = Object.values(EXPORTED).map((m) => m.prometheus);
    assert.equal(new Set(names).size, names.length, 'one Prometheus name per metric');
  });

  test('the bounds are the conventions advice for the metric each is exported as', () => {
    const client = [
      0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
    ];
    assert.deepEqual(EXPORT_BOUNDS.e2eMs, client);
    assert.deepEqual(EXPORT_BOUNDS.ttftMs, client);
    assert.deepEqual(EXPORT_BOUNDS.itlMs, client);
    assert.equal(EXPORT_BOUNDS.outputTokens.at(-1), 67108864);
  });

  test('loads and points label as documented; the server URL gives only its host and port', () => {
    assert.equal(loadLabel({ mode: 'closed', concurrency: 8 }), 'closed:8');
    assert.equal(loadLabel({ mode: 'open', rate: 2.5, arrival: 'poisson' }), 'open:2.5/s');
    const a = pointAttributes(started('p'));
    assert.deepEqual(a, {
      'infergauge.run.id': 'sess',
      'infergauge.point.id': 'p',
      'infergauge.scenario': 'chat',
      'infergauge.load': 'closed:8',
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': HOSTILE_MODEL,
      'server.address': 'gpu.example',
      'server.port': 8443,
    });
    assert.ok(!JSON.stringify(a).includes('secret'));
  });
});

describe('--output prometheus text', () => {
  test('a strict reader and the project parser read the same counts, hostile labels intact', () => {
    const { series, completed } = session();
    const text = renderPrometheus(series.samples());
    const types = strictExpositionCheck(text);
    assert.equal(types.get('infergauge_client_requests_total'), 'counter');
    assert.equal(types.get('gen_ai_client_operation_duration_seconds'), 'histogram');
    const samples = parsePrometheusText(text);
    const of = (name: string, point: string, more: Record<string, string> = {}) =>
      samples.filter(
        (s) =>
          s.name === name &&
          s.labels.infergauge_point_id === point &&
          Object.entries(more).every(([k, v]) => s.labels[k] === v),
      );
    for (const [i, n] of completed.entries()) {
      const point = `sess-${i}`;
      const done = of('infergauge_client_requests_total', point, { outcome: 'completed' });
      assert.equal(done.length, 1);
      assert.equal(done[0].value, n);
      assert.equal(done[0].labels.gen_ai_request_model, HOSTILE_MODEL, 'label value round trip');
      assert.equal(of('gen_ai_client_operation_duration_seconds_count', point)[0].value, n);
      const sum = of('gen_ai_client_operation_duration_seconds_sum', point)[0].value;
      // phasedRecords: every E2E is 120 ms.
      assert.ok(Math.abs(sum - 0.12 * n) < 1e-6 * n, `E2E sum ${sum}`);
      // 120 ms: nothing at or below 0.08 s, all at or below 0.16 s.
      assert.equal(
        of('gen_ai_client_operation_duration_seconds_bucket', point, { le: '0.08' })[0].value,
        0,
      );
      assert.equal(
        of('gen_ai_client_operation_duration_seconds_bucket', point, { le: '0.16' })[0].value,
        n,
      );
      const output = of('gen_ai_client_token_usage_sum', point, { gen_ai_token_type: 'output' });
      assert.equal(output[0].value, 8 * n);
    }
    const failures = of('infergauge_client_requests_total', 'sess-1', { outcome: 'failed' });
    assert.deepEqual(Object.fromEntries(failures.map((s) => [s.labels.error_type, s.value])), {
      timeout: 2,
      http_5xx: 1,
    });
    // The first point finished: its client health and validity; the second is still running.
    assert.equal(of('infergauge_client_event_loop_delay_p99_seconds', 'sess-0')[0].value, 0.0125);
    assert.equal(of('infergauge_client_cpu_utilization_ratio', 'sess-0')[0].value, 0.25);
    assert.equal(of('infergauge_client_limited', 'sess-0')[0].value, 1);
    assert.equal(of('infergauge_run_validity', 'sess-0')[0].value, 1);
    assert.equal(of('infergauge_run_validity', 'sess-1').length, 0);
    assert.equal(of('infergauge_client_requests_in_flight', 'sess-0')[0].value, 0);
    assert.equal(of('infergauge_client_requests_in_flight', 'sess-1')[0].value, 3);
  });

  test('a session with no point yet serves an empty page; ports parse or say why', () => {
    assert.equal(renderPrometheus(new SessionSeries().samples()), '');
    assert.equal(parsePrometheusPort(undefined), 9464);
    assert.equal(parsePrometheusPort('0'), 0);
    for (const bad of ['-1', '65536', 'x', '1.5']) {
      assert.throws(() => parsePrometheusPort(bad), UsageError);
    }
  });
});

describe('--output otlp data', () => {
  test('URL is a base endpoint: metrics go to URL/v1/metrics; secrets stay out of what is said', () => {
    assert.equal(metricsUrl('http://c:4318'), 'http://c:4318/v1/metrics');
    assert.equal(metricsUrl('http://c:4318/'), 'http://c:4318/v1/metrics');
    assert.equal(metricsUrl('https://c/otlp'), 'https://c/otlp/v1/metrics');
    assert.equal(metricsUrl(undefined), undefined);
    assert.throws(() => metricsUrl('not a url'), UsageError);
    assert.throws(() => metricsUrl('ftp://c'), UsageError);
    assert.equal(redactUrl('https://u:pw@c:1/x?token=t'), 'https://c:1/x');
  });

  test('the SDK gets sums, gauges and explicit-bucket histograms of the same series', () => {
    const { series, completed } = session();
    const data = metricData(series.all(), Date.now());
    const byName = new Map(data.map((d) => [d.descriptor.name, d]));
    const requests = byName.get('infergauge.client.requests');
    assert.ok(requests && requests.dataPointType === DataPointType.SUM && requests.isMonotonic);
    const done = requests.dataPoints.filter((p) => p.attributes.outcome === 'completed');
    assert.deepEqual(
      done.map((p) => p.value),
      completed,
    );
    const e2e = byName.get('gen_ai.client.operation.duration');
    assert.ok(e2e && e2e.dataPointType === DataPointType.HISTOGRAM);
    assert.equal(e2e.descriptor.unit, 's');
    assert.deepEqual(
      e2e.dataPoints.map((p) => p.value.count),
      completed,
    );
    assert.equal(e2e.dataPoints[0].value.buckets.counts.length, EXPORT_BOUNDS.e2eMs.length + 1);
    const tokens = byName.get('gen_ai.client.token.usage');
    assert.ok(tokens && tokens.dataPointType === DataPointType.HISTOGRAM);
    assert.equal(tokens.dataPoints.length, 4, 'input and output, per point');
    assert.equal(byName.get('infergauge.run.validity')?.dataPointType, DataPointType.GAUGE);
  });
});
