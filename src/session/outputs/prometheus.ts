/**
 * `--output prometheus[=PORT]`: the session's live metrics at http://127.0.0.1:PORT/metrics in
 * the Prometheus text exposition format 0.0.4, for as long as the session runs. Every point keeps
 * its own series (its id is a label), so a sweep's counters never go down. Imported only when
 * named: a plain run starts no server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UsageError } from '../../errors.js';
import type { OutputContext } from '../events.js';
import { builtInOutput, type Output } from '../events.js';
import { type Attributes, prometheusLabel, type Sample, SessionSeries } from './exportedMetrics.js';

/** The port OpenTelemetry's Prometheus exporters default to. */
export const PROMETHEUS_DEFAULT_PORT = 9464;

/** How long closing waits for scrapes in progress before it cuts them. */
const CLOSE_WITHIN_MS = 1000;

export function parsePrometheusPort(arg: string | undefined): number {
  if (arg === undefined || arg === '') return PROMETHEUS_DEFAULT_PORT;
  const port = Number(arg);
  if (!/^\d+$/.test(arg) || port > 65535) {
    throw new UsageError([
      `--output prometheus=${arg}: the port must be a whole number from 0 to 65535 (0 picks a free one)`,
    ]);
  }
  return port;
}

/** The text exposition format (0.0.4) of these samples, grouped by metric in their order. */
export function renderPrometheus(samples: readonly Sample[]): string {
  const lines: string[] = [];
  let family: string | undefined;
  for (const s of samples) {
    const m = s.metric;
    if (m.prometheus !== family) {
      family = m.prometheus;
      lines.push(`# HELP ${m.prometheus} ${escapeHelp(m.description)}`);
      lines.push(`# TYPE ${m.prometheus} ${m.kind}`);
    }
    if ('value' in s) {
      lines.push(`${m.prometheus}${labels(s.attributes)} ${number(s.value)}`);
      continue;
    }
    const h = s.histogram;
    let cumulative = 0;
    h.bounds.forEach((bound, i) => {
      cumulative += h.counts[i] ?? 0;
      lines.push(`${m.prometheus}_bucket${labels(s.attributes, number(bound))} ${cumulative}`);
    });
    lines.push(`${m.prometheus}_bucket${labels(s.attributes, '+Inf')} ${h.count}`);
    lines.push(`${m.prometheus}_sum${labels(s.attributes)} ${number(h.sum)}`);
    lines.push(`${m.prometheus}_count${labels(s.attributes)} ${h.count}`);
  }
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

function labels(attributes: Attributes, le?: string): string {
  const parts = Object.entries(attributes).map(
    ([k, v]) => `${prometheusLabel(k)}="${escapeLabel(String(v))}"`,
  );
  if (le !== undefined) parts.push(`le="${le}"`);
  return parts.length > 0 ? `{${parts.join(',')}}` : '';
}

/** Label values are the server's and the user's text: `\`, `"` and line feeds are escaped. */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function number(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

/** Starts the server (an unusable port fails the command before anything runs). */
export async function prometheusOutput(
  arg: string | undefined,
  context: OutputContext,
): Promise<Output> {
  const port = parsePrometheusPort(arg);
  const series = new SessionSeries();
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('infergauge serves its metrics at /metrics\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' });
      res.end();
      return;
    }
    const body = renderPrometheus(series.samples());
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  const actual = await listen(server, port);
  context.notice(`prometheus: metrics at http://127.0.0.1:${actual}/metrics while the run lasts`);
  return builtInOutput({
    name: 'prometheus',
    pointStarted(e) {
      series.pointStarted(e);
    },
    snapshot(e) {
      series.snapshot(e.point.id, e.live.totals, e.live.inFlight);
    },
    pointFinished(e) {
      series.pointFinished(e.point.id, e.summary);
    },
    sessionFinished: () => close(server),
  });
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'EADDRINUSE'
          ? new UsageError([
              `--output prometheus=${port}: port ${port} on 127.0.0.1 is in use; give another (--output prometheus=PORT) or 0 for a free one`,
            ])
          : err,
      );
    };
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Closes within CLOSE_WITHIN_MS: a scraper that holds its connection open cannot hold the run. */
function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), CLOSE_WITHIN_MS);
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    // Kept-alive idle connections would hold close() to the end of their timeout.
    server.closeIdleConnections();
  });
}
