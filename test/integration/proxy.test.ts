/**
 * Proxies end to end on loopback: plain http through a forwarding proxy (H1Pool, model
 * discovery), https through a CONNECT tunnel (undici), NO_PROXY / --no-proxy / --proxy, and
 * every way a proxy fails, each a categorised error naming the proxy, never its credentials.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli, tempDir } from '../helpers/cli.js';
import { closedPort, startProxy } from '../helpers/proxyServer.js';
import { runAgainst } from '../helpers/run.js';
import {
  chatEvent,
  DONE,
  listenOnLoopback,
  type ScriptedReply,
  type ScriptedServer,
  startScriptedServer,
  textEvent,
  usageEvent,
} from '../helpers/scriptedServer.js';
import { fixture } from '../helpers/tlsServer.js';

const SECRET = 'hunter2-proxy-secret';
const CREDENTIALS = `me:${SECRET}`;
const BASIC = Buffer.from(CREDENTIALS).toString('base64');

/** An OpenAI-compatible answer to each route: the model list, a streamed answer. */
function openai(path: string): ScriptedReply {
  if (path.endsWith('/models')) {
    return {
      headers: { 'content-type': 'application/json' },
      steps: [{ write: JSON.stringify({ object: 'list', data: [{ id: 'm' }] }) }],
    };
  }
  if (path.endsWith('/metrics')) return { status: 404, steps: [] };
  const event = path.endsWith('/chat/completions') ? chatEvent({ content: 'hi' }) : textEvent('hi');
  return { steps: [{ write: event }, { write: usageEvent(4, 1) }, { write: DONE }] };
}

let server: ScriptedServer;
before(async () => {
  server = await startScriptedServer((r) => openai(r.path));
});
after(() => server.close());

describe('the load through a proxy (library)', () => {
  test('plain http goes through a forwarding proxy, with its credentials to it alone', async () => {
    const proxy = await startProxy({ auth: CREDENTIALS });
    const before = server.requests.length;
    try {
      const { records } = await runAgainst(server.url, {
        target: { proxy: { http: `http://${CREDENTIALS}@${proxy.hostPort}` } },
        load: { mode: 'closed', concurrency: 2 },
        requests: 4,
      });
      assert.deepEqual(
        records.map((r) => r.error?.kind ?? 'ok'),
        ['ok', 'ok', 'ok', 'ok'],
      );
      assert.equal(proxy.counts.forwarded, 4);
      assert.equal(server.requests.length - before, 4);
      assert.deepEqual(new Set(proxy.counts.authorizations), new Set([`Basic ${BASIC}`]));
      // The request line named the whole URL, as a forwarding proxy needs.
      assert.ok(proxy.counts.targets.every((t) => t.startsWith(`${server.url}/v1/`)));
    } finally {
      await proxy.close();
    }
  });

  test('NO_PROXY naming the target: direct', async () => {
    const proxy = await startProxy();
    try {
      const { records } = await runAgainst(server.url, {
        target: { proxy: { http: proxy.url, noProxy: 'example.com, 127.0.0.1' } },
        requests: 2,
      });
      assert.ok(records.every((r) => r.error === undefined));
      assert.equal(proxy.counts.forwarded + proxy.counts.tunnels, 0);
    } finally {
      await proxy.close();
    }
  });

  test('407, 502 and an unreachable proxy: errors naming the proxy and the fix, never the credentials', async () => {
    const wantsOthers = await startProxy({ auth: 'me:other' });
    const refusing = await startProxy({ refuse: 502 });
    const nowhere = `127.0.0.1:${await closedPort()}`;
    try {
      const run = async (proxyUrl: string) => {
        const { records } = await runAgainst(server.url, {
          target: { proxy: { http: proxyUrl } },
          requests: 2,
        });
        assert.doesNotMatch(JSON.stringify(records), new RegExp(`${SECRET}|${BASIC}`));
        return records.map((r) => r.error);
      };
      for (const error of await run(`http://${CREDENTIALS}@${wantsOthers.hostPort}`)) {
        assert.equal(error?.kind, 'proxy');
        assert.equal(error?.status, 407);
        assert.match(error?.message ?? '', new RegExp(`proxy ${wantsOthers.hostPort}.*--no-proxy`));
      }
      for (const error of await run(refusing.url)) {
        // A forwarding proxy answers in the server's place: the status stays the server's kind.
        assert.equal(error?.kind, 'http_5xx');
        assert.match(error?.message ?? '', new RegExp(`through the proxy ${refusing.hostPort}`));
      }
      for (const error of await run(`http://${CREDENTIALS}@${nowhere}`)) {
        assert.equal(error?.kind, 'proxy');
        assert.match(error?.message ?? '', new RegExp(`the proxy ${nowhere} cannot be reached`));
      }
    } finally {
      await wantsOthers.close();
      await refusing.close();
    }
  });

  test('https goes through a CONNECT tunnel, TLS inside it; a refused CONNECT is a proxy error', async () => {
    const tls = await startHttpsServer();
    const proxy = await startProxy();
    const refusing = await startProxy({ refuse: 403 });
    try {
      // The certificate is not trusted in this process: the handshake that fails is the
      // server's, made through the tunnel (the proxy saw the tunnel, not the request).
      const { records } = await runAgainst(tls.url, {
        target: { proxy: { https: proxy.url } },
        requests: 1,
      });
      assert.equal(records[0]?.error?.kind, 'tls');
      assert.match(records[0]?.error?.message ?? '', /self-signed|SELF_SIGNED/i);
      assert.ok(proxy.counts.tunnels >= 1);
      assert.equal(proxy.counts.targets[0], tls.url.slice('https://'.length));
      // The run's TLS options reach the handshake inside the tunnel: its CA trusted, it passes.
      const trusted = await runAgainst(tls.url, {
        target: { proxy: { https: proxy.url }, tls: { ca: readFileSync(tls.certFile, 'utf8') } },
        requests: 1,
      });
      assert.equal(trusted.records[0]?.error, undefined, trusted.records[0]?.error?.message);
      // Its connection opened before the clock, through the tunnel, and was timed there.
      const pre = trusted.summary.clientHealth?.preopened;
      assert.equal(pre?.connections, 1);
      assert.equal(pre?.failed, 0);
      assert.ok((pre?.setupMsMax ?? 0) > 0, JSON.stringify(pre));
      const refused = await runAgainst(tls.url, {
        target: { proxy: { https: refusing.url } },
        requests: 1,
      });
      assert.equal(refused.records[0]?.error?.kind, 'proxy');
      assert.match(
        refused.records[0]?.error?.message ?? '',
        new RegExp(`the proxy ${refusing.hostPort} refused the tunnel to .*HTTP 403`),
      );
    } finally {
      await proxy.close();
      await refusing.close();
      await tls.close();
    }
  });
});

describe('infergauge run through a proxy', () => {
  test('HTTP_PROXY from the environment: discovery and load through it, said once, credentials nowhere', async () => {
    const proxy = await startProxy({ auth: CREDENTIALS });
    const out = join(tempDir('ig-proxy-'), 'run');
    const seen = server.requests.length;
    try {
      const r = await runCli(
        ['run', '--url', server.url, '--requests', '3', '--concurrency', '1', '--out', out],
        { HTTP_PROXY: `http://${CREDENTIALS}@${proxy.hostPort}`, NO_PROXY: 'example.com' },
      );
      assert.equal(r.code, 0, r.stderr);
      // Everything the server saw came through the proxy: discovery, /metrics, the load.
      assert.equal(proxy.counts.forwarded, server.requests.length - seen);
      assert.ok(proxy.counts.forwarded >= 4);
      assert.equal(r.stderr.split(`via proxy ${proxy.hostPort}`).length - 1, 1, r.stderr);
      const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
      assert.equal(manifest.server.proxy, proxy.hostPort);
      assertNoSecret([r.stdout, r.stderr, ...filesUnder(out)]);
    } finally {
      await proxy.close();
    }
  });

  test('NO_PROXY, --no-proxy and --proxy decide over the environment', async () => {
    const proxy = await startProxy();
    const dead = `http://${CREDENTIALS}@127.0.0.1:${await closedPort()}`;
    const base = [
      'run',
      '--url',
      server.url,
      '--model',
      'm',
      '--requests',
      '1',
      '--no-server-metrics',
    ];
    try {
      const bypassed = await runCli([...base, '--out', join(tempDir('ig-proxy-'), 'a')], {
        HTTP_PROXY: dead,
        no_proxy: '127.0.0.1',
      });
      assert.equal(bypassed.code, 0, bypassed.stderr);
      const noProxy = await runCli(
        [...base, '--no-proxy', '--out', join(tempDir('ig-proxy-'), 'b')],
        { HTTP_PROXY: dead },
      );
      assert.equal(noProxy.code, 0, noProxy.stderr);
      const flag = await runCli(
        [...base, '--proxy', proxy.url, '--out', join(tempDir('ig-proxy-'), 'c')],
        { HTTP_PROXY: dead },
      );
      assert.equal(flag.code, 0, flag.stderr);
      assert.ok(proxy.counts.forwarded >= 2);
      assertNoSecret([bypassed.stderr, noProxy.stderr, flag.stderr]);
    } finally {
      await proxy.close();
    }
  });

  test('a proxy in the way: exit 1, naming the proxy and the fix rather than --model', async () => {
    const dead = `127.0.0.1:${await closedPort()}`;
    const discovery = await runCli(
      ['run', '--url', server.url, '--requests', '1', '--no-server-metrics'],
      { HTTP_PROXY: `http://${CREDENTIALS}@${dead}` },
    );
    assert.equal(discovery.code, 1, discovery.stderr);
    assert.match(discovery.stderr, new RegExp(`the proxy ${dead} cannot be reached`));
    assert.match(discovery.stderr, /--no-proxy or NO_PROXY/);
    assert.doesNotMatch(discovery.stderr, /pass --model/);
    const out = join(tempDir('ig-proxy-'), 'run');
    const load = await runCli(
      [
        'run',
        '--url',
        server.url,
        '--model',
        'm',
        '--requests',
        '2',
        '--no-server-metrics',
        '--out',
        out,
      ],
      { HTTP_PROXY: `http://${CREDENTIALS}@${dead}` },
    );
    assert.equal(load.code, 1, load.stderr);
    assert.match(load.stderr, new RegExp(`proxy.*the proxy ${dead} cannot be reached`));
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    assert.deepEqual(summary.requests.errorsByKind, { proxy: 2 });
    assertNoSecret([
      discovery.stdout,
      discovery.stderr,
      load.stdout,
      load.stderr,
      ...filesUnder(out),
    ]);
  });

  test('https through CONNECT with the server trusted: the whole run inside the tunnel', async () => {
    const tls = await startHttpsServer();
    const proxy = await startProxy({ auth: CREDENTIALS });
    const out = join(tempDir('ig-proxy-'), 'run');
    try {
      const started = performance.now();
      const r = await runCli(
        ['run', '--url', tls.url, '--requests', '3', '--concurrency', '2', '--out', out],
        {
          HTTPS_PROXY: `http://${CREDENTIALS}@${proxy.hostPort}`,
          NODE_EXTRA_CA_CERTS: tls.certFile,
        },
      );
      assert.equal(r.code, 0, r.stderr);
      // The process ends with its run: its tunnels closed (left open, the text requests'
      // tunnels held it for the server's two-minute idle timeout; a run takes ~1 s).
      assert.ok(performance.now() - started < 60_000, 'the run ended long after its work');
      assert.ok(proxy.counts.tunnels >= 2, JSON.stringify(proxy.counts));
      assert.equal(proxy.counts.forwarded, 0);
      assert.ok(tls.requests() >= 4);
      assert.match(r.stderr, new RegExp(`via proxy ${proxy.hostPort} \\(HTTPS_PROXY`));
      assertNoSecret([r.stdout, r.stderr, ...filesUnder(out)]);
    } finally {
      await proxy.close();
      await tls.close();
    }
  });
});

/** Neither the proxy password nor its Basic form in any of `texts`. */
function assertNoSecret(texts: string[]): void {
  for (const text of texts) {
    assert.ok(!text.includes(SECRET) && !text.includes(BASIC), 'a proxy credential was output');
  }
}

/** The text of every file under `dir` (none when it was not made). */
function filesUnder(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [readFileSync(path, 'latin1')];
  });
}

/** An https OpenAI-compatible server on loopback, its self-signed certificate made by openssl. */
async function startHttpsServer(): Promise<{
  url: string;
  certFile: string;
  requests: () => number;
  close: () => Promise<void>;
}> {
  // The committed self-signed test certificate for 127.0.0.1 (test/fixtures/tls).
  const keyFile = fixture('self.key');
  const certFile = fixture('self.pem');
  let requests = 0;
  const server = createHttpsServer(
    { key: readFileSync(keyFile), cert: readFileSync(certFile) },
    (req, res) => {
      requests++;
      req.resume();
      req.on('end', () => {
        const reply = openai(req.url ?? '/');
        res.writeHead(reply.status ?? 200, {
          'content-type': 'text/event-stream',
          ...reply.headers,
        });
        for (const step of reply.steps) if ('write' in step) res.write(step.write);
        res.end();
      });
    },
  );
  const listening = await listenOnLoopback(server);
  return {
    url: listening.url.replace('http:', 'https:'),
    certFile,
    requests: () => requests,
    close: listening.close,
  };
}
