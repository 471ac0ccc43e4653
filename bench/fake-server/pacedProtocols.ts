/**
 * The paced server of bench/h2.ts, run as its own process: the same OpenAI completions stream on
 * plain HTTP/1.1, HTTP/1.1 over TLS and HTTP/2 over TLS, so that the client's cost per event is
 * compared on one server. Each stream's first event comes `--ttft-ms` after its request, then
 * one every `--itl-ms` (0: all at once), each event its own write; one timer paces every stream.
 * Prints `{"h1":PORT,"tls":PORT,"h2":PORT}` once listening.
 *
 *   node --import tsx bench/fake-server/pacedProtocols.ts --key K --cert C
 *     [--ttft-ms 50] [--itl-ms 10] [--tokens 64]
 */
import { readFileSync } from 'node:fs';
import { createServer as createHttp, type ServerResponse } from 'node:http';
import { createSecureServer, type ServerHttp2Stream } from 'node:http2';
import { createServer as createHttps } from 'node:https';
import type { AddressInfo, Server } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    key: { type: 'string' },
    cert: { type: 'string' },
    'ttft-ms': { type: 'string', default: '50' },
    'itl-ms': { type: 'string', default: '10' },
    tokens: { type: 'string', default: '64' },
  },
});
const ttftMs = Number(values['ttft-ms']);
const itlMs = Number(values['itl-ms']);
const tokens = Number(values.tokens);
const key = readFileSync(values.key as string);
const cert = readFileSync(values.cert as string);

const EVENT = 'data: {"choices":[{"index":0,"text":" tok","finish_reason":null}]}\n\n';
const LAST =
  'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}\n\ndata: [DONE]\n\n';

/** A stream being answered: how to write to it and how many events it has left. */
interface Answer {
  write(text: string): void;
  end(text: string): void;
  left: number;
  dueMs: number;
}

const answers = new Set<Answer>();

function tick(): void {
  const now = performance.now();
  for (const a of answers) {
    if (a.dueMs > now) continue;
    if (itlMs === 0) {
      while (a.left > 0) {
        a.write(EVENT);
        a.left--;
      }
    } else if (a.left > 0) {
      a.write(EVENT);
      a.left--;
    }
    if (a.left === 0) {
      a.end(LAST);
      answers.delete(a);
    }
  }
}
setInterval(tick, Math.max(1, itlMs));

function begin(answer: Omit<Answer, 'left' | 'dueMs'>): void {
  answers.add({ ...answer, left: tokens, dueMs: performance.now() + ttftMs });
}

function h1Handler(
  req: { on(e: string, f: () => void): void; resume(): void },
  res: ServerResponse,
) {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    begin({ write: (t) => res.write(t), end: (t) => res.end(t) });
  });
}

const h1 = createHttp({ keepAliveTimeout: 60_000 }, h1Handler);
const tls = createHttps({ key, cert, keepAliveTimeout: 60_000 }, h1Handler);
const h2 = createSecureServer({ key, cert, settings: { maxConcurrentStreams: 1000 } });
h2.on('stream', (stream: ServerHttp2Stream) => {
  stream.on('error', () => {});
  stream.resume();
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
    begin({ write: (t) => stream.write(t), end: (t) => stream.end(t) });
  });
});

const listen = (server: Server) =>
  new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
const ports = { h1: await listen(h1), tls: await listen(tls), h2: await listen(h2) };
process.stdout.write(`${JSON.stringify(ports)}\n`);
