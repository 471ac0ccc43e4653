/**
 * `--output ui[=[HOST:]PORT]`: the live dashboard. A page on a local HTTP server, fed over
 * server-sent events every snapshot (once a second while a point runs), with a Stop button that
 * stops the session as the first Ctrl-C does. When the session ends the page loads report.html
 * in its place; the server waits for connected tabs to fetch it (at most REPORT_GRACE_MS), then
 * closes, so the process ends by itself.
 *
 * Bounded: at most MAX_CLIENTS event streams, and a client that does not read (its unsent
 * buffer past MAX_CLIENT_BUFFER_BYTES) is dropped; the history is bounded (uiHistory.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { resultPath } from '../../results/layout.js';
import { builtInOutput, type Output, type OutputContext } from '../events.js';
import {
  finishedOf,
  loadLabel,
  rowOf,
  snapshotOf,
  telemetryRowOf,
  type UiEvent,
  UiHistory,
  type UiPoint,
} from './uiHistory.js';
import { dashboardPage, echartsScript, pageScript } from './uiPage.js';
import {
  isDeliberatePost,
  PAGE_POLICY,
  parseUiAddress,
  send,
  startUiServer,
  type UiServer,
} from './uiServer.js';

export const MAX_CLIENTS = 16;
export const MAX_CLIENT_BUFFER_BYTES = 4 * 1024 * 1024;
/** How long a connected tab gets to fetch the report once the session ended. */
export const REPORT_GRACE_MS = 2000;
const HEARTBEAT_MS = 15_000;

interface Client {
  res: ServerResponse;
}

/** The output, its server listening and its URL told. */
export async function uiOutput(arg: string | undefined, context: OutputContext): Promise<Output> {
  const dashboard = new Dashboard(context);
  await dashboard.start(arg);
  return dashboard.output();
}

export class Dashboard {
  readonly history = new UiHistory();
  private clients = new Set<Client>();
  private server: UiServer | undefined;
  private startedMs = performance.now();
  private reportPath: string | undefined;
  private reportFetches = 0;
  private onReportFetch: (() => void) | undefined;
  private stopRequested = false;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(private readonly context: OutputContext) {}

  async start(arg: string | undefined): Promise<UiServer> {
    const address = parseUiAddress(arg, `--output ui=${arg}`);
    this.server = await startUiServer(address, (req, res, url) => this.handle(req, res, url));
    // Between points (a warm-up, a long drain) nothing is told: a comment keeps the streams
    // from looking idle to anything between, and finds the tabs that left.
    this.heartbeat = setInterval(() => {
      for (const c of this.clients) c.res.write(': ping\n\n');
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
    this.context.notice(`live dashboard at ${this.server.url}`);
    return this.server;
  }

  output(): Output {
    const points = new Map<string, UiPoint>();
    const totals = new Map<string, number | undefined>();
    const t = () => (performance.now() - this.startedMs) / 1000;
    return builtInOutput({
      name: 'ui',
      sessionStarted: (s) => {
        this.startedMs = performance.now();
        this.history.session = {
          id: s.id,
          command: s.command,
          kind: s.kind,
          stoppable: this.context.requestStop !== undefined,
        };
        this.broadcast({ event: 'session', data: this.history.session });
      },
      pointStarted: (e) => {
        const point: UiPoint = {
          index: e.point.index,
          id: e.point.id,
          scenario: e.point.scenario,
          load: loadLabel(e.point.load),
          kind: e.point.kind,
        };
        points.set(e.point.id, point);
        totals.set(e.point.id, e.totalRequests);
        this.history.addPoint(point);
        this.broadcast({ event: 'point', data: point });
      },
      snapshot: (e) => {
        const row = rowOf(t(), e.point.index, e.live);
        const snap = snapshotOf(e.point.index, e.live, totals.get(e.point.id), e.final === true);
        this.history.addRow(row);
        this.history.latest = snap;
        this.broadcast({ event: 'row', data: row });
        this.broadcast({ event: 'snapshot', data: snap });
      },
      telemetry: (e) => {
        const row = telemetryRowOf(t(), e.snapshot);
        if (!row) return;
        this.history.addTelemetry(row);
        this.broadcast({ event: 'telemetry', data: row });
      },
      pointFinished: (e) => {
        const point = points.get(e.point.id);
        if (!point) return;
        const finished = finishedOf(point, e.summary);
        this.history.addFinished(finished);
        this.broadcast({ event: 'finished', data: finished });
      },
      sessionFinished: async (e) => {
        // The HTML output ran before this one: its report is there unless --no-html or an error.
        const report = resultPath(e.session.root, 'report');
        const hasReport = !e.error && existsSync(report);
        if (hasReport) this.reportPath = report;
        this.history.end = {
          code: e.code,
          report: hasReport,
          ...(e.error ? { error: e.error.message } : {}),
        };
        const waiting = this.clients.size;
        this.broadcast({ event: 'end', data: this.history.end });
        // Only a connected tab is waited for, and only while it fetches the report.
        const deadline = performance.now() + REPORT_GRACE_MS;
        if (hasReport && waiting > 0) await this.reportFetched(waiting, REPORT_GRACE_MS);
        await this.close(Math.max(0, deadline - performance.now()));
      },
    });
  }

  /** Until `fetches` reports were sent, or `ms` passed (the timer holds the process meanwhile). */
  private reportFetched(fetches: number, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.onReportFetch = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.onReportFetch = () => {
        if (this.reportFetches >= fetches) done();
      };
    });
  }

  /** Ends every stream (what it holds flushed, within `flushMs`) and closes the server. */
  async close(flushMs = 0): Promise<void> {
    clearInterval(this.heartbeat);
    const flushed = [...this.clients].map(
      (c) =>
        new Promise<void>((resolve) => {
          c.res.once('close', resolve);
          c.res.once('finish', resolve);
          c.res.end();
        }),
    );
    this.clients.clear();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(flushed),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, flushMs);
      }),
    ]);
    clearTimeout(timer);
    await this.server?.close();
  }

  private handle(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const token = this.server?.token;
    if (url.pathname !== '/stop' && req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'text/plain; charset=utf-8', 'method not allowed');
      return;
    }
    switch (url.pathname) {
      case '/':
      case '/index.html':
        send(res, 200, 'text/html; charset=utf-8', dashboardPage(token), {
          'content-security-policy': PAGE_POLICY,
        });
        return;
      case '/app.js':
        send(res, 200, 'text/javascript; charset=utf-8', pageScript());
        return;
      case '/echarts.min.js':
        send(res, 200, 'text/javascript; charset=utf-8', echartsScript());
        return;
      case '/events':
        this.subscribe(req, res);
        return;
      case '/stop':
        this.stop(req, res);
        return;
      case '/report.html':
        this.report(res);
        return;
      default:
        send(res, 404, 'text/plain; charset=utf-8', 'not found');
    }
  }

  private subscribe(req: IncomingMessage, res: ServerResponse): void {
    if (this.clients.size >= MAX_CLIENTS) {
      send(res, 503, 'text/plain; charset=utf-8', `at most ${MAX_CLIENTS} tabs at once`);
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      connection: 'keep-alive',
    });
    const client: Client = { res };
    this.clients.add(client);
    req.on('close', () => this.clients.delete(client));
    res.write(': infergauge\n\n');
    for (const e of this.history.replay()) this.write(client, e);
  }

  private stop(req: IncomingMessage, res: ServerResponse): void {
    // A cross-site page can POST a form or text/plain without asking first, never with a header
    // of its own: the header (and, off loopback, the token) is what makes the Stop deliberate.
    if (!isDeliberatePost(req)) {
      send(res, 403, 'text/plain; charset=utf-8', 'refused: Stop is a POST from the page itself');
      return;
    }
    if (!this.context.requestStop) {
      send(res, 409, 'text/plain; charset=utf-8', 'this session cannot be stopped from here');
      return;
    }
    if (!this.stopRequested) {
      this.stopRequested = true;
      this.context.notice('stop requested from the dashboard');
      this.context.requestStop();
    }
    send(res, 202, 'text/plain; charset=utf-8', 'stopping');
  }

  private report(res: ServerResponse): void {
    if (!this.reportPath) {
      send(res, 404, 'text/plain; charset=utf-8', 'no report (yet)');
      return;
    }
    res.on('finish', () => {
      this.reportFetches++;
      this.onReportFetch?.();
    });
    // The session's own file, written by the HTML output just before the end was told.
    send(res, 200, 'text/html; charset=utf-8', readFileSync(this.reportPath));
  }

  private broadcast(e: UiEvent): void {
    for (const c of this.clients) this.write(c, e);
  }

  private write(client: Client, e: UiEvent): void {
    const { res } = client;
    if (res.writableLength > MAX_CLIENT_BUFFER_BYTES) {
      // A tab that does not read would hold the run's history many times over: it is let go.
      this.clients.delete(client);
      res.destroy();
      return;
    }
    res.write(`event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
  }
}
