/**
 * The live dashboard's server (issue 52): who may ask it anything (loopback and its Host header,
 * the token elsewhere), what makes a Stop deliberate (a cross-site POST cannot stop a run), its
 * bounds (tabs, history), and what a tab opened late is told first (the whole history).
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, test } from 'node:test';
import { LiveView } from '../../../../src/metrics/live.js';
import type { RunSummary } from '../../../../src/metrics/summary.js';
import {
  builtInOutput,
  type PointInfo,
  SessionEvents,
  type SessionInfo,
} from '../../../../src/session/events.js';
import { Dashboard, MAX_CLIENTS } from '../../../../src/session/outputs/ui.js';
import { UiHistory, type UiRow } from '../../../../src/session/outputs/uiHistory.js';
import { isLoopback, parseUiAddress } from '../../../../src/session/outputs/uiServer.js';

interface Reply {
  status: number;
  body: string;
}

/** One request to the dashboard at `url` (its port), with the Host header and body given. */
function ask(
  url: string,
  path: string,
  o: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: o.method ?? 'GET', headers: o.headers ?? {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

/** Reads an event stream until `enough` says so; returns what came. */
function listen(url: string, path: string, enough: (text: string) => boolean): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
        if (enough(text)) {
          req.destroy();
          resolve(text);
        }
      });
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.end();
  });
}

function dashboard(requestStop?: () => void) {
  const notices: string[] = [];
  const d = new Dashboard({
    notice: (m) => notices.push(m),
    ...(requestStop ? { requestStop } : {}),
  });
  return { d, notices };
}

describe('the dashboard address', () => {
  test('[HOST:]PORT: loopback and a free port unless told; a bad one is a usage error', () => {
    assert.deepEqual(parseUiAddress(undefined, 'ui='), { host: '127.0.0.1', port: 0 });
    assert.deepEqual(parseUiAddress('8080', 'ui='), { host: '127.0.0.1', port: 8080 });
    assert.deepEqual(parseUiAddress('0.0.0.0:0', 'ui='), { host: '0.0.0.0', port: 0 });
    assert.deepEqual(parseUiAddress('[::1]:9', 'ui='), { host: '::1', port: 9 });
    for (const bad of ['70000', 'x', ':80', 'host:', '1.2.3.4:-1']) {
      assert.throws(() => parseUiAddress(bad, 'ui='), /\[HOST:\]PORT/, bad);
    }
    assert.ok(isLoopback('127.0.0.1') && isLoopback('localhost') && isLoopback('::1'));
    assert.ok(!isLoopback('0.0.0.0') && !isLoopback('192.168.1.2'));
  });
});

describe('the dashboard server', () => {
  test('loopback: no token, and a Host header naming another site is refused (DNS rebinding)', async () => {
    const { d, notices } = dashboard();
    const served = await d.start('0');
    try {
      assert.match(notices[0], /live dashboard at http:\/\/127\.0\.0\.1:\d+\/$/);
      assert.equal((await ask(served.url, '/')).status, 200);
      const page = await ask(served.url, '/');
      assert.doesNotMatch(page.body, /(src|href)="https?:/, 'no absolute URL in the page');
      assert.equal(
        (await ask(served.url, '/', { headers: { host: 'evil.example:80' } })).status,
        403,
      );
      assert.equal((await ask(served.url, '/echarts.min.js')).status, 200);
    } finally {
      await d.close();
    }
  });

  test('off loopback: every request needs the printed token, in the URL or the header', async () => {
    const { d, notices } = dashboard(() => {});
    const served = await d.start('0.0.0.0:0');
    try {
      const token = served.token ?? '';
      assert.ok(token.length >= 20, 'a random token');
      assert.ok(notices[0].endsWith(`?token=${token}`), 'the URL told carries it');
      for (const path of ['/', '/app.js', '/events', '/report.html']) {
        assert.equal((await ask(served.url, path)).status, 403, path);
        assert.equal((await ask(served.url, `${path}?token=${token}x`)).status, 403, path);
      }
      assert.equal((await ask(served.url, `/?token=${token}`)).status, 200);
      assert.equal(
        (await ask(served.url, '/app.js', { headers: { 'x-infergauge-token': token } })).status,
        200,
      );
      // The Stop header alone does not pass without the token.
      const stop = { method: 'POST', headers: { 'x-infergauge-stop': '1' } };
      assert.equal((await ask(served.url, '/stop', stop)).status, 403);
    } finally {
      await d.close();
    }
  });

  test('Stop: only a POST with the page header stops, once; what a cross-site page can send does not', async () => {
    let stops = 0;
    const { d } = dashboard(() => stops++);
    const served = await d.start('0');
    try {
      // What a form or fetch from another site can send without a preflight.
      const simple = [
        { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'stop' },
        { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
        { method: 'GET' },
      ];
      for (const o of simple) assert.notEqual((await ask(served.url, '/stop', o)).status, 202);
      assert.equal(stops, 0);
      const deliberate = { method: 'POST', headers: { 'x-infergauge-stop': '1' } };
      assert.equal((await ask(served.url, '/stop', deliberate)).status, 202);
      assert.equal((await ask(served.url, '/stop', deliberate)).status, 202);
      assert.equal(stops, 1, 'asked twice, stopped once');
    } finally {
      await d.close();
    }
  });

  test('a session that cannot be stopped (virtual time) says so', async () => {
    const { d } = dashboard();
    const served = await d.start('0');
    try {
      const r = await ask(served.url, '/stop', {
        method: 'POST',
        headers: { 'x-infergauge-stop': '1' },
      });
      assert.equal(r.status, 409);
    } finally {
      await d.close();
    }
  });

  test(`at most ${MAX_CLIENTS} event streams at once`, async () => {
    const { d } = dashboard();
    const served = await d.start('0');
    const { port } = new URL(served.url);
    const open: ReturnType<typeof request>[] = [];
    try {
      for (let i = 0; i < MAX_CLIENTS; i++) {
        await new Promise<void>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port, path: '/events' }, (res) => {
            assert.equal(res.statusCode, 200);
            res.once('data', () => resolve());
          });
          req.on('error', (err) => (open.includes(req) ? undefined : reject(err)));
          req.end();
          open.push(req);
        });
      }
      assert.equal((await ask(served.url, '/events')).status, 503);
    } finally {
      for (const r of open) r.destroy();
      await d.close();
    }
  });
});

const info: SessionInfo = {
  id: 'sess',
  command: 'sweep',
  kind: 'sweep',
  root: '/nowhere',
  rootIsPoint: false,
  startedAt: '2026-01-01T00:00:00.000Z',
  plan: {},
};

const summary = (): RunSummary =>
  ({
    requests: { completed: 7, failed: 1 },
    throughput: { requestsPerS: 3.5, outputTokensPerS: 400 },
    latency: {
      ttftMs: { p50: 12.5, p99: 30 },
      itlMs: { p50: 2, p99: 4 },
      e2eMs: { p50: 100 },
    },
    interrupted: false,
    warnings: [],
  }) as unknown as RunSummary;

describe('a tab opened late', () => {
  test('hears the whole history first: the session, its points, every row from the start, the finished points', async () => {
    const { d } = dashboard(() => {});
    const served = await d.start('0');
    const notices: string[] = [];
    const failing = builtInOutput({
      name: 'broken',
      snapshot() {
        throw new Error('broken on purpose');
      },
    });
    const events = new SessionEvents(info, [failing, d.output()], (m) => notices.push(m), false);
    try {
      events.sessionStarted();
      const point: PointInfo = events.nextPoint({
        load: { mode: 'closed', concurrency: 4 },
        scenario: '<b>chat</b>',
      });
      events.pointStarted({ point, manifest: {} as never, nowUs: () => 0, totalRequests: 10 });
      const view = new LiveView({ totalRequests: 10 });
      const counts = { sent: 4, inFlight: 4, completed: 0, failed: 0 } as never;
      for (let s = 1; s <= 5; s++) {
        events.snapshot({
          point,
          counts,
          atS: s,
          live: view.snapshot(s, { sent: 4, inFlight: 4 }),
        });
      }
      await events.pointFinished({ point, summary: summary(), saveServerMetrics: false });
      // An output that fails is dropped with one notice; the dashboard goes on.
      assert.equal(notices.length, 1);
      assert.match(notices[0], /output broken failed on snapshot/);
      assert.equal(d.history.rows.length, 5);

      const text = await listen(served.url, '/events', (t) => t.includes('event: snapshot'));
      const names = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
      assert.deepEqual(names, ['reset', 'session', 'point', 'history', 'finished', 'snapshot']);
      const history = JSON.parse(/event: history\ndata: (.*)\n/.exec(text)?.[1] ?? '{}') as {
        rows: UiRow[];
      };
      assert.equal(history.rows.length, 5, 'every snapshot from the start');
      assert.equal(history.rows[0].point, 0);
      // Server text travels as JSON, for the page to set as text.
      assert.match(text, /"scenario":"<b>chat<\/b>"/);
      assert.match(text, /"ttftP50Ms":12.5/);
    } finally {
      await d.close();
    }
  });

  test('the history stays bounded: past its rows it keeps every other one, the first and the last', () => {
    const h = new UiHistory(100);
    for (let i = 0; i < 1000; i++) {
      h.addRow({
        t: i,
        point: 0,
        completed: i,
        failed: 0,
        inFlight: 1,
        requestsPerS: 1,
        outputTokensPerS: 1,
      });
    }
    assert.ok(h.rows.length <= 100 && h.rows.length >= 50, `${h.rows.length} rows`);
    assert.equal(h.rows[0].t, 0);
    assert.equal(h.rows[h.rows.length - 1].t, 999);
    assert.ok(h.thinned > 0);
    const ts = h.rows.map((r) => r.t);
    assert.deepEqual(
      ts,
      [...ts].sort((a, b) => a - b),
      'in order',
    );
  });
});
