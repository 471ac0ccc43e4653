import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { buildConnector } from 'undici';
import {
  ConnectionTiming,
  connectionPhases,
  splitQueueDelay,
  timedConnector,
} from '../../../src/loadgen/phases.js';
import { undiciPool } from '../../../src/loadgen/run.js';
import { type RequestRecord, recordProblem } from '../../../src/record.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import { runAgainst } from '../../helpers/run.js';
import { fixture } from '../../helpers/tlsServer.js';

let sim: RunningSimulator;
before(async () => {
  sim = await startSimulator({ port: 0, host: '127.0.0.1', engine: 'scripted' });
});
after(async () => {
  await sim.stop();
});

const toUs = (ms: number) => Math.round(ms * 1000);

/** queueDelay = backlog + pool wait + the set-up waited for, to the microsecond. */
function assertIdentity(r: RequestRecord): void {
  assert.equal(recordProblem(JSON.parse(JSON.stringify(r))), undefined);
  assert.notEqual(r.backlogMs, undefined, `request ${r.id} has no backlogMs`);
  const parts =
    toUs(r.backlogMs ?? 0) + toUs(r.poolWaitMs ?? 0) + toUs(r.connection?.waitedMs ?? 0);
  assert.equal(parts, toUs(r.sentAt - r.scheduledAt), `request ${r.id}`);
}

describe('connection phases on the plain HTTP/1.1 pool', () => {
  test('a warmed closed loop opens nothing in the measured window; warm-up connections are said', async () => {
    const run = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 4 },
      requests: 12,
    });
    for (const r of run.records) {
      assertIdentity(r);
      assert.equal(r.connection, undefined, `request ${r.id} opened a connection`);
    }
    const c = run.summary.connections;
    assert.ok(c);
    assert.equal(c.requests, 12);
    assert.equal(c.newConnections, 0);
    const pre = run.summary.clientHealth?.preopened;
    assert.equal(pre?.connections, 4);
    assert.equal(pre?.failed, 0);
    assert.ok((pre?.setupMsMax ?? 0) > 0);
  });

  test('an uncapped open loop opens its connections inside requests, each timed', async () => {
    // An open loop without a cap warms nothing: a burst of 6 at once opens 6 connections.
    const run = await runAgainst(sim.url.replace('127.0.0.1', 'localhost'), {
      load: { mode: 'open', rate: 10_000, arrival: 'constant' },
      requests: 6,
    });
    let opened = 0;
    for (const r of run.records) {
      assertIdentity(r);
      if (!r.connection) continue;
      opened++;
      const { setupMs, waitedMs, dnsMs, tcpMs, tlsMs } = r.connection;
      assert.ok(setupMs > 0 && waitedMs <= setupMs && waitedMs >= 0);
      // localhost is a name: it was looked up.
      assert.notEqual(dnsMs, undefined);
      assert.equal(tlsMs, undefined);
      assert.ok(Math.abs((dnsMs ?? 0) + tcpMs - setupMs) < 0.0015);
    }
    assert.ok(opened >= 1, 'no request opened a connection');
    const c = run.summary.connections;
    assert.equal(c?.newConnections, opened);
    assert.equal(c?.dnsMs?.count, opened);
    assert.equal(run.summary.clientHealth?.preopened, undefined);
  });

  test('more requests in flight than connections: the later ones wait in the pool', async () => {
    // Sessions leave the pool unbounded; a closed loop of 4 on a pool of 1 is made by hand.
    const { H1Pool } = await import('../../../src/loadgen/h1.js');
    const pool = new H1Pool(new URL(sim.url).origin, {
      connections: 1,
      keepAliveTimeoutMs: 60_000,
    });
    const run = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 4 },
      requests: 8,
      outputTokens: 16,
      engine: { connections: pool },
    });
    for (const r of run.records) assertIdentity(r);
    const waited = run.records.filter((r) => (r.poolWaitMs ?? 0) > 1);
    assert.ok(waited.length >= 3, `${waited.length} requests waited for the one connection`);
    assert.equal(run.summary.connections?.newConnections, 1);
    assert.ok((run.summary.connections?.poolWaitMs.p99 ?? 0) > 1);
    // Each waited for up to three others' whole answers: far past a tenth of its TTFT.
    assert.match(run.summary.clientHealth?.causes?.join('\n') ?? '', /pool wait p50/);
  });
});

/** The committed test certificate for 127.0.0.1 (test/fixtures/tls); the client does not verify. */
function selfSigned(): { key: string; cert: string } {
  return {
    key: readFileSync(fixture('leaf.key'), 'utf8'),
    cert: readFileSync(fixture('leaf.pem'), 'utf8'),
  };
}

/** An https server streaming a short OpenAI completion, counting the connections it accepted. */
async function sseOverTls(): Promise<{ url: string; connections: () => number; server: Server }> {
  let connections = 0;
  const server = createHttpsServer(selfSigned(), (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (text: string) =>
        `data: ${JSON.stringify({ choices: [{ index: 0, text, finish_reason: null }] })}\n\n`;
      res.write(chunk('a'));
      setTimeout(() => res.end(`${chunk('b')}data: [DONE]\n\n`), 5);
    });
  });
  server.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `https://127.0.0.1:${port}`, connections: () => connections, server };
}

describe('connection phases on undici (https)', () => {
  const trusting = () => timedConnector(buildConnector({ rejectUnauthorized: false }));

  test('a warmed pool opens its connections before the clock: no TLS inside any request', async () => {
    const tls = await sseOverTls();
    try {
      const origin = tls.url;
      const pool = await undiciPool(origin, trusting(), { connections: 3, timeoutMs: 10_000 }, 3);
      const run = await runAgainst(tls.url, {
        load: { mode: 'closed', concurrency: 3 },
        requests: 9,
        engine: { connections: pool },
      });
      assert.equal(run.summary.requests.completed, 9, JSON.stringify(run.records[0].error));
      for (const r of run.records) {
        assertIdentity(r);
        assert.equal(r.connection, undefined, `request ${r.id} opened a connection`);
      }
      assert.equal(tls.connections(), 3, 'the warm-up opened the pool, the run no more');
      const pre = run.summary.clientHealth?.preopened;
      assert.equal(pre?.connections, 3);
      assert.ok((pre?.setupMsMax ?? 0) > 0);
    } finally {
      tls.server.closeAllConnections();
      tls.server.close();
    }
  });

  test('a cold pool: the requests that opened a connection carry TCP and TLS times', async () => {
    const tls = await sseOverTls();
    try {
      const pool = await undiciPool(tls.url, trusting(), { connections: 2, timeoutMs: 10_000 }, 0);
      const run = await runAgainst(tls.url, {
        load: { mode: 'closed', concurrency: 2 },
        requests: 6,
        engine: { connections: pool },
      });
      assert.equal(run.summary.requests.completed, 6);
      const opened = run.records.filter((r) => r.connection);
      assert.equal(opened.length, tls.connections());
      for (const r of run.records) assertIdentity(r);
      for (const r of opened) {
        const c = r.connection;
        assert.ok(c && (c.tlsMs ?? 0) > 0 && c.tcpMs >= 0, JSON.stringify(c));
        assert.ok(Math.abs(c.tcpMs + (c.tlsMs ?? 0) - c.setupMs) < 0.0015);
      }
      assert.equal(run.summary.connections?.tlsMs?.count, opened.length);
      assert.equal(run.summary.clientHealth?.preopened, undefined);
    } finally {
      tls.server.closeAllConnections();
      tls.server.close();
    }
  });
});

describe('connectionPhases', () => {
  const timing = (lookup: number | undefined, connect: number | undefined, secure?: number) => {
    const t = new ConnectionTiming();
    Object.assign(t, { startMs: 100 });
    t.lookupMs = lookup === undefined ? undefined : 100 + lookup;
    t.connectMs = connect === undefined ? undefined : 100 + connect;
    t.secureMs = secure === undefined ? undefined : 100 + secure;
    return t;
  };

  test('parts add up to the set-up; the share waited is at most the wait', () => {
    const p = connectionPhases(timing(0.4, 1.2, 5.0004), 3000);
    assert.deepEqual(p, { setupMs: 5, waitedMs: 3, dnsMs: 0.4, tcpMs: 0.8, tlsMs: 3.8 });
  });

  test('an address has no lookup; a socket that never connected has no phases', () => {
    assert.deepEqual(connectionPhases(timing(undefined, 2), 10_000), {
      setupMs: 2,
      waitedMs: 2,
      tcpMs: 2,
    });
    assert.equal(connectionPhases(timing(1, undefined), 10_000), undefined);
  });

  test('a pre-opened connection is no request set-up', () => {
    const t = timing(undefined, 2);
    t.preopened = true;
    const r = { scheduledAt: 0, sentAt: 3 } as RequestRecord;
    splitQueueDelay(r, 0, 1000, 3000, t);
    assert.deepEqual([r.backlogMs, r.poolWaitMs, r.connection], [1, 2, undefined]);
  });

  test('recordProblem refuses a damaged split', () => {
    const base = {
      id: 0,
      phase: 'measure',
      scheduledAt: 0,
      sentAt: 1,
      endAt: 2,
      requestedInputTokens: 1,
      requestedOutputTokens: 1,
      outputTokens: 0,
      events: { dtUs: [], tokens: [], contentChars: [] },
    };
    assert.equal(recordProblem({ ...base, backlogMs: 1, poolWaitMs: 0 }), undefined);
    assert.match(recordProblem({ ...base, poolWaitMs: 'x' }) ?? '', /poolWaitMs/);
    assert.match(recordProblem({ ...base, connection: 3 }) ?? '', /connection/);
    assert.match(
      recordProblem({ ...base, connection: { setupMs: 1, waitedMs: 1, tcpMs: -1 } }) ?? '',
      /connection\.tcpMs/,
    );
  });
});
