/**
 * H2Pool and the choice of protocol: a node:http2 server on loopback (TLS with a certificate
 * made by openssl here, and h2c) streams SSE in the OpenAI format; the load generator runs
 * against it as against any server, so the records are the same code path's.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as http2 from 'node:http2';
import { createServer as createH1Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { before, describe, test } from 'node:test';
import { chooseProtocol, H2Pool } from '../../../src/loadgen/h2.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';
import { startProxy } from '../../helpers/proxyServer.js';
import { runAgainst } from '../../helpers/run.js';
import { fixture } from '../../helpers/tlsServer.js';

let key: Buffer;
let cert: Buffer;
const TLS_CLIENT = { rejectUnauthorized: false };
/** The same for a run's target (src/tls.ts TlsMaterial, as --insecure gives it). */
const TLS_TARGET = { insecure: true };

before(() => {
  // The committed test certificate for 127.0.0.1 and localhost (test/fixtures/tls).
  key = readFileSync(fixture('leaf.key'));
  cert = readFileSync(fixture('leaf.pem'));
});

type Fault = 'none' | 'rst' | 'goaway' | 'stall' | 'truncate' | 'refuse';

interface H2Server {
  url: string;
  /** Streams each server-side session carried. */
  streamsBySession: Map<http2.ServerHttp2Session, number>;
  close(): Promise<void>;
}

/**
 * Answers every POST with `tokens` SSE events, `gapMs` apart; `fault(n)` says what the n-th
 * request (from 0) meets instead of a whole answer.
 */
async function h2Server(o: {
  secure: boolean;
  tokens?: number;
  gapMs?: number;
  maxStreams?: number;
  fault?: (n: number) => Fault;
}): Promise<H2Server> {
  const settings = o.maxStreams !== undefined ? { maxConcurrentStreams: o.maxStreams } : {};
  const server = o.secure
    ? http2.createSecureServer({ key, cert, settings })
    : http2.createServer({ settings });
  const streamsBySession = new Map<http2.ServerHttp2Session, number>();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  let n = 0;
  server.on('stream', (stream) => {
    const session = stream.session as http2.ServerHttp2Session;
    streamsBySession.set(session, (streamsBySession.get(session) ?? 0) + 1);
    const fault = o.fault?.(n++) ?? 'none';
    stream.on('error', () => {});
    if (fault === 'refuse') {
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    stream.resume();
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      const tokens = o.tokens ?? 4;
      let i = 0;
      const next = () => {
        if (stream.closed || stream.destroyed) return;
        if (i === 2 && fault !== 'none') {
          // destroy, not close: close ends the stream (END_STREAM) before its RST_STREAM.
          if (fault === 'rst') stream.destroy(new Error('reset'));
          else if (fault === 'goaway') session.goaway(http2.constants.NGHTTP2_INTERNAL_ERROR);
          else if (fault === 'truncate') stream.end();
          // stall: nothing more, ever.
          return;
        }
        if (i === tokens) {
          stream.end('data: [DONE]\n\n');
          return;
        }
        stream.write(`data: {"choices":[{"index":0,"text":"t${i}","finish_reason":null}]}\n\n`);
        i++;
        setTimeout(next, o.gapMs ?? 1);
      };
      next();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${o.secure ? 'https' : 'http'}://127.0.0.1:${port}`,
    streamsBySession,
    close: async () => {
      for (const s of sessions) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('chooseProtocol', () => {
  test('auto picks h2 where the TLS handshake offers it, http/1.1 where not', async () => {
    const h2 = await h2Server({ secure: true });
    const h1 = createH1Server({ key, cert }, (_req, res) => res.end());
    await new Promise<void>((resolve) => h1.listen(0, '127.0.0.1', resolve));
    const h1Url = `https://127.0.0.1:${(h1.address() as AddressInfo).port}`;
    try {
      assert.equal(await chooseProtocol(h2.url, 'auto', TLS_CLIENT), 'h2');
      assert.equal(await chooseProtocol(h1Url, 'auto', TLS_CLIENT), 'http/1.1');
      assert.equal(await chooseProtocol(h2.url, 'off', TLS_CLIENT), 'http/1.1');
      await assert.rejects(chooseProtocol(h1Url, 'on', TLS_CLIENT), (err: Error) => {
        assert.equal((err as { code?: string }).code, 'IG_HTTP2_UNAVAILABLE');
        assert.match(err.message, /--http2 off/);
        return true;
      });
    } finally {
      await h2.close();
      await new Promise<void>((resolve) => h1.close(() => resolve()));
    }
  });

  test('plain http: auto is HTTP/1.1; on is h2c where the server speaks it, else an error', async () => {
    const h2c = await h2Server({ secure: false });
    const h1 = (await import('node:http')).createServer((_req, res) => res.end());
    await new Promise<void>((resolve) => h1.listen(0, '127.0.0.1', resolve));
    const h1Url = `http://127.0.0.1:${(h1.address() as AddressInfo).port}`;
    try {
      assert.equal(await chooseProtocol(h2c.url, 'auto'), 'http/1.1');
      assert.equal(await chooseProtocol(h2c.url, 'on'), 'h2');
      await assert.rejects(chooseProtocol(h1Url, 'on'), /--http2 off/);
    } finally {
      await h2c.close();
      h1.closeAllConnections();
      await new Promise<void>((resolve) => h1.close(() => resolve()));
    }
  });
});

describe('H2Pool under load', () => {
  test('streams share one session up to the server limit, then a second opens', async () => {
    const server = await h2Server({ secure: true, tokens: 6, gapMs: 2, maxStreams: 8 });
    try {
      const run = await runAgainst(server.url, {
        target: { tls: TLS_TARGET },
        load: { mode: 'closed', concurrency: 12 },
        requests: 48,
        outputTokens: 6,
      });
      assert.equal(run.records.length, 48);
      assert.deepEqual(
        run.records.filter((r) => r.error).map((r) => r.error),
        [],
      );
      assert.ok(run.records.every((r) => r.outputTokens === 6));
      // 12 in flight, 8 streams a session: two sessions (warmed before the clock), no more.
      const counts = [...server.streamsBySession.values()];
      assert.equal(counts.length, 2);
      assert.equal(
        counts.reduce((a, b) => a + b, 0),
        48,
      );
      assert.ok(Math.max(...counts) > 12, `streams per session ${counts}`);
      // The records say the same: which connection carried each, and the summary counts them.
      assert.ok(run.records.every((r) => r.connectionId !== undefined));
      assert.deepEqual(run.summary.streamsPerConnection, {
        connections: 2,
        mean: 24,
        max: Math.max(...counts),
      });
      assert.match(
        renderTerminalSummary(run.summary, { color: false }),
        /^HTTP\/2: 2 connections, 24(\.0)? streams each on average \(max \d+\)$/m,
      );
    } finally {
      await server.close();
    }
  });

  test('h2c with --http2 on carries the load over plain http', async () => {
    const server = await h2Server({ secure: false, tokens: 3 });
    try {
      const run = await runAgainst(server.url, {
        target: { http2: 'on' },
        load: { mode: 'closed', concurrency: 4 },
        requests: 8,
        outputTokens: 3,
      });
      assert.ok(run.records.every((r) => !r.error && r.outputTokens === 3));
      assert.equal(server.streamsBySession.size, 1);
      assert.equal(run.summary.streamsPerConnection?.max, 8);
    } finally {
      await server.close();
    }
  });

  for (const [fault, kind, message] of [
    ['rst', 'stream_broken', /RST_STREAM INTERNAL_ERROR/],
    ['goaway', 'stream_broken', /GOAWAY|session/],
    ['truncate', 'truncated', /end marker/],
    ['stall', 'timeout', /within 300 ms/],
  ] as const) {
    test(`${fault} mid-stream: ${kind}, and the run goes on`, async () => {
      const server = await h2Server({
        secure: true,
        tokens: 4,
        fault: (n) => (n === 1 ? fault : 'none'),
      });
      try {
        const run = await runAgainst(server.url, {
          target: { tls: TLS_TARGET, timeoutMs: 300 },
          load: { mode: 'closed', concurrency: 1 },
          requests: 4,
          outputTokens: 4,
        });
        const failed = run.records.filter((r) => r.error);
        assert.equal(failed.length, 1, JSON.stringify(failed.map((r) => r.error)));
        assert.equal(failed[0]?.error?.kind, kind, failed[0]?.error?.message);
        assert.match(failed[0]?.error?.message ?? '', message);
        assert.equal(failed[0]?.id, 1);
        assert.ok(run.records.filter((r) => !r.error).every((r) => r.outputTokens === 4));
      } finally {
        await server.close();
      }
    });
  }

  test('a stream refused unprocessed on a reused session is sent once more', async () => {
    const server = await h2Server({ secure: true, fault: (n) => (n === 1 ? 'refuse' : 'none') });
    try {
      const run = await runAgainst(server.url, {
        target: { tls: TLS_TARGET },
        load: { mode: 'closed', concurrency: 1 },
        requests: 3,
      });
      assert.deepEqual(
        run.records.map((r) => [r.error?.kind, r.resent]),
        [
          [undefined, undefined],
          [undefined, true],
          [undefined, undefined],
        ],
      );
      assert.equal(run.summary.streaming.resentRequests, 1);
    } finally {
      await server.close();
    }
  });

  test('cancellation (the second Ctrl-C) ends the streams in flight as cancelled', async () => {
    const server = await h2Server({ secure: true, fault: () => 'stall' });
    try {
      const run = await runAgainst(server.url, {
        target: { tls: TLS_TARGET },
        load: { mode: 'closed', concurrency: 3 },
        requests: 3,
        engine: { cancelSignal: AbortSignal.timeout(100) },
      });
      assert.deepEqual(
        run.records.map((r) => r.error?.kind),
        ['cancelled', 'cancelled', 'cancelled'],
      );
    } finally {
      await server.close();
    }
  });

  test('a server that is not there: every request fails as connect', async () => {
    const server = await h2Server({ secure: false });
    const url = server.url;
    await server.close();
    const run = await runAgainst(url, {
      target: { protocol: 'h2' },
      load: { mode: 'closed', concurrency: 2 },
      requests: 3,
    });
    assert.deepEqual(
      run.records.map((r) => r.error?.kind),
      ['connect', 'connect', 'connect'],
    );
  });

  test('warm opens the sessions the streams need before any request', async () => {
    const server = await h2Server({ secure: true, maxStreams: 4 });
    const pool = new H2Pool(server.url, { connections: null, tls: TLS_CLIENT });
    try {
      assert.equal(await pool.warm(10), 3);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });
});

describe('H2Pool connection phases and proxies', () => {
  test('a cold pool: the first stream of each session carries its TCP and TLS times', async () => {
    const server = await h2Server({ secure: true, tokens: 3, maxStreams: 2 });
    const pool = new H2Pool(server.url, { connections: null, tls: TLS_CLIENT });
    try {
      const run = await runAgainst(server.url, {
        target: { tls: TLS_TARGET },
        load: { mode: 'closed', concurrency: 4 },
        requests: 12,
        outputTokens: 3,
        engine: { connections: pool },
      });
      assert.equal(run.summary.requests.completed, 12);
      const opened = run.records.filter((r) => r.connection);
      const sessions = new Set(run.records.map((r) => r.connectionId));
      // One record per session carries its set-up, with the parts adding up.
      assert.equal(opened.length, sessions.size);
      assert.equal(new Set(opened.map((r) => r.connectionId)).size, sessions.size);
      for (const r of opened) {
        const c = r.connection;
        assert.ok(c && (c.tlsMs ?? 0) > 0 && c.tcpMs >= 0, JSON.stringify(c));
        assert.ok(Math.abs(c.tcpMs + (c.tlsMs ?? 0) - c.setupMs) < 0.0015);
      }
      for (const r of run.records) {
        assert.equal(
          Math.round(
            ((r.backlogMs ?? 0) + (r.poolWaitMs ?? 0) + (r.connection?.waitedMs ?? 0)) * 1000,
          ),
          Math.round(((r.sentAt ?? 0) - r.scheduledAt) * 1000),
        );
      }
      assert.equal(run.summary.connections?.tlsMs?.count, opened.length);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });

  test('a warmed pool: sessions opened before the clock, their set-up in no request', async () => {
    const server = await h2Server({ secure: true, tokens: 3, maxStreams: 2 });
    try {
      const run = await runAgainst(server.url, {
        target: { tls: TLS_TARGET },
        load: { mode: 'closed', concurrency: 4 },
        requests: 8,
        outputTokens: 3,
      });
      assert.equal(run.summary.requests.completed, 8);
      assert.ok(run.records.every((r) => r.connection === undefined));
      const pre = run.summary.clientHealth?.preopened;
      assert.equal(pre?.connections, 2);
      assert.ok((pre?.setupMsMax ?? 0) > 0);
    } finally {
      await server.close();
    }
  });

  test('https through a CONNECT proxy speaks HTTP/2 inside the tunnel, phases timed', async () => {
    const server = await h2Server({ secure: true, tokens: 3, maxStreams: 4 });
    const proxy = await startProxy();
    try {
      const target = { proxy: { https: proxy.url } };
      assert.equal(
        await chooseProtocol(server.url, 'auto', TLS_CLIENT, {
          host: '127.0.0.1',
          port: Number(proxy.hostPort.split(':')[1]),
          shown: proxy.hostPort,
        }),
        'h2',
      );
      const pool = new H2Pool(server.url, {
        connections: null,
        tls: TLS_CLIENT,
        proxy: {
          host: '127.0.0.1',
          port: Number(proxy.hostPort.split(':')[1]),
          shown: proxy.hostPort,
        },
      });
      const run = await runAgainst(server.url, {
        target: { ...target, tls: TLS_TARGET },
        load: { mode: 'closed', concurrency: 6 },
        requests: 12,
        outputTokens: 3,
        engine: { connections: pool },
      });
      await pool.destroy();
      assert.deepEqual(
        run.records.filter((r) => r.error).map((r) => r.error),
        [],
      );
      // Two sessions of four streams, each in its own tunnel: the proxy saw two tunnels
      // (and the ALPN question's), the server every stream.
      const counts = [...server.streamsBySession.values()];
      assert.equal(
        counts.reduce((a, b) => a + b, 0),
        12,
      );
      assert.equal(proxy.counts.tunnels, 1 + counts.length);
      const opened = run.records.filter((r) => r.connection);
      assert.equal(opened.length, counts.length);
      for (const r of opened) {
        assert.equal(r.connection?.dnsMs, undefined, 'the proxy resolves the name');
        assert.ok((r.connection?.tlsMs ?? 0) > 0 && (r.connection?.tcpMs ?? 0) > 0);
      }
      // A run's own pool: the protocol asked through the tunnel, sessions warmed through it.
      const tunnelsBefore = proxy.counts.tunnels;
      const own = await runAgainst(server.url, {
        target: { ...target, tls: TLS_TARGET },
        load: { mode: 'closed', concurrency: 6 },
        requests: 6,
        outputTokens: 3,
      });
      assert.equal(own.summary.requests.completed, 6);
      assert.equal(own.summary.streamsPerConnection?.connections, 2);
      assert.equal(own.summary.clientHealth?.preopened?.connections, 2);
      assert.equal(proxy.counts.tunnels - tunnelsBefore, 3);
    } finally {
      await proxy.close();
      await server.close();
    }
  });

  test('h2c cannot pass a forwarding proxy: --http2 on says so and names the ways out', async () => {
    const proxy = await startProxy();
    try {
      await assert.rejects(
        chooseProtocol('http://127.0.0.1:9', 'on', undefined, {
          host: '127.0.0.1',
          port: 1,
          shown: proxy.hostPort,
        }),
        (err: Error & { code?: string }) =>
          err.code === 'IG_HTTP2_UNAVAILABLE' &&
          /--no-proxy/.test(err.message) &&
          err.message.includes(proxy.hostPort),
      );
      assert.equal(proxy.counts.forwarded + proxy.counts.tunnels, 0);
    } finally {
      await proxy.close();
    }
  });
});
