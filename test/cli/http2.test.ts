/**
 * `--http2` as a user meets it: the CLI against an https server (certificate made by openssl
 * here, trusted through NODE_EXTRA_CA_CERTS) that speaks both HTTP/2 and HTTP/1.1, and one that
 * speaks only HTTP/1.1. The process is what is tested: the flag, the choice said in the
 * terminal, the manifest's record of it, the worker threads' connections, the exit code.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { createServer as createHttps } from 'node:https';
import type { AddressInfo, Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli, tempDir } from '../helpers/cli.js';

const dir = tempDir('ig-cli-h2-');
const keyPath = join(dir, 'h2-key.pem');
const certPath = join(dir, 'h2-cert.pem');

/** The HTTP versions the POSTs came on. */
const versions: string[] = [];

/** What both servers' responses offer (the union's overloads are not callable as one). */
interface Response {
  writeHead(status: number, headers: Record<string, string>): void;
  write(text: string): void;
  end(text: string): void;
}

function answer(
  req: IncomingMessage | Http2ServerRequest,
  response: ServerResponse | Http2ServerResponse,
): void {
  const res = response as unknown as Response;
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }));
    return;
  }
  versions.push(req.httpVersion);
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let i = 0; i < 3; i++) {
      res.write(`data: {"choices":[{"index":0,"text":"t${i}","finish_reason":null}]}\n\n`);
    }
    res.end(
      'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}\n\ndata: [DONE]\n\n',
    );
  });
}

let both: Server;
let h1Only: Server;
const url = (server: Server) => `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

before(async () => {
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
      ...['-keyout', keyPath, '-out', certPath, '-days', '2', '-subj', '/CN=localhost'],
      ...['-addext', 'subjectAltName=IP:127.0.0.1'],
    ],
    { stdio: 'ignore' },
  );
  const tls = { key: readFileSync(keyPath), cert: readFileSync(certPath) };
  both = createSecureServer({ ...tls, allowHTTP1: true }, answer) as unknown as Server;
  h1Only = createHttps(tls, answer);
  for (const server of [both, h1Only]) {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  }
});

after(async () => {
  for (const server of [both, h1Only]) {
    (server as Server & { closeAllConnections?(): void }).closeAllConnections?.();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

/** `run` against `server`, its output and manifest. */
async function run(server: Server, ...flags: string[]) {
  const out = join(dir, `run-${Math.random().toString(36).slice(2)}`);
  versions.length = 0;
  const result = await runCli(
    [
      ...['run', '--url', url(server), '--endpoint', 'completions', '--requests', '6'],
      ...['--concurrency', '3', '--workers', '1', '--no-server-metrics', '--out', out],
      ...flags,
    ],
    { NODE_EXTRA_CA_CERTS: certPath },
  );
  let manifest: { server?: { protocol?: string } } | undefined;
  try {
    manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
  } catch {
    manifest = undefined;
  }
  return { ...result, manifest, versions: [...versions] };
}

describe('run --http2', () => {
  test('auto: HTTP/2 where the server offers h2, said and recorded', async () => {
    const r = await run(both);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.manifest?.server?.protocol, 'h2');
    assert.match(r.stdout + r.stderr, /HTTP\/2: the server offers h2/);
    assert.match(r.stdout, /^HTTP\/2: 1 connection, 6(\.0)? streams each on average/m);
    assert.deepEqual(r.versions, Array(6).fill('2.0'));
  });

  test('each worker thread opens sessions of its own', async () => {
    const r = await run(both, '--workers', '2', '--concurrency', '4', '--requests', '8');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^HTTP\/2: 2 connections, 4(\.0)? streams each on average \(max 4\)/m);
    assert.deepEqual(r.versions, Array(8).fill('2.0'));
  });

  test('off: HTTP/1.1 to the same server', async () => {
    const r = await run(both, '--http2', 'off');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.manifest?.server?.protocol, 'http/1.1');
    assert.deepEqual(r.versions, Array(6).fill('1.1'));
    assert.doesNotMatch(r.stdout, /^HTTP\/2:/m);
  });

  test('on: a server without h2 is an error that names --http2 off', async () => {
    const r = await run(h1Only, '--http2', 'on');
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not offer h2.*--http2 off/);
    assert.deepEqual(r.versions, []);
  });

  test('a value other than auto, on, off is refused as an option', async () => {
    const r = await run(both, '--http2', 'yes');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--http2.*must be auto, on or off/);
  });
});
