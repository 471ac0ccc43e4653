import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createH2cServer, type Http2ServerResponse } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net';
import { chatEvent, DONE, listenOnLoopback, textEvent, usageEvent } from './scriptedServer.js';
import { fixture } from './tlsServer.js';
import {
  llamaFinal,
  llamaPartial,
  ollamaDone,
  ollamaGenerate,
  SSE_DONE,
  sglangMessage,
  tgiToken,
  tritonText,
} from './wireFixtures.js';

/** The wire protocols the hostile server speaks, one per backend route. */
export const PROTOCOLS = [
  'openai-chat',
  'openai-completions',
  'llamacpp',
  'tgi',
  'triton',
  'ollama',
  'sglang',
] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/**
 * What the server does to a faulted request, one mode per fault:
 * - `refused`: nothing listens on the port (it was opened, then closed), so every request is
 *   refused; there is no healthy request.
 * - `http429`: 429 with `Retry-After: 1` and an OpenAI-style JSON error body.
 * - `http5xx`: 503 with a JSON error body.
 * - `http3xx`: 301 to an `https://` `Location` (an http-to-https redirect), empty body.
 * - `resetBeforeFirstByte`: the request is read, then the socket is reset (RST): no status line.
 * - `resetAfterFirstByte`: status, headers and the first event, then the socket is reset.
 * - `stall`: the request is read and never answered (the client's timeout must end it).
 * - `malformedEvent`: the first event, then one that is not JSON, then the rest of the answer.
 * - `oversizeLine`: the first event, then a 20 MB line that is not JSON, then the rest.
 * - `wrongContentType`: 200 with a `text/html` sign-in page (a proxy or a wrong route).
 * - `truncated`: the answer's events without the protocol's end marker, then a clean end of the
 *   body. Triton's stream has no end marker, so there the last event is also cut mid-JSON.
 * - `serverKilled`: from the first faulted request on, the server dies: that request gets its
 *   headers and first event, then the listener closes and every socket is destroyed, so every
 *   later request is refused. Only exact with one request in flight at a time.
 * - `endlessEvents`: the first token event, again and again, never an end (issue 27).
 * - `afterEnd`: the whole answer, then bytes with no line end, forever (issue 27).
 * - `bodyNeverEnds`: the whole answer, then nothing, and the body never ends (issue 27).
 */
export const FAULTS = [
  'refused',
  'http429',
  'http5xx',
  'http3xx',
  'resetBeforeFirstByte',
  'resetAfterFirstByte',
  'stall',
  'malformedEvent',
  'oversizeLine',
  'wrongContentType',
  'truncated',
  'serverKilled',
  'endlessEvents',
  'afterEnd',
  'bodyNeverEnds',
] as const;
export type Fault = (typeof FAULTS)[number];

export const OVERSIZE_LINE_BYTES = 20 * 1024 * 1024;
export const REDIRECT_LOCATION = 'https://127.0.0.1:8443/v1/';

/** How one protocol answers: content events, then the writes that mark the end. */
interface Answer {
  contentType: string;
  path: (model: string) => string;
  /** Events carrying the answer's tokens, none of which ends the stream. */
  events: (tokens: number) => string[];
  /** The protocol's end marker(s); empty where the stream simply ends (Triton). */
  end: (tokens: number) => string[];
  /** A line the decoder cannot read as an event, in this framing. */
  malformed: string;
  /** A line of `bytes` that is not JSON, in this framing. */
  oversize: (bytes: number) => string;
}

const word = (i: number) => `w${i} `;
const sseJson = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
const sse: Pick<Answer, 'contentType' | 'malformed' | 'oversize'> = {
  contentType: 'text/event-stream',
  malformed: 'data: {"oops": [\n\n',
  oversize: (bytes) => `data: ${'x'.repeat(bytes)}\n\n`,
};

export const ANSWERS: Record<Protocol, Answer> = {
  'openai-chat': {
    ...sse,
    path: () => '/v1/chat/completions',
    events: (n) => [
      chatEvent({ role: 'assistant', content: '' }),
      ...Array.from({ length: n }, (_, i) => chatEvent({ content: word(i) })),
    ],
    end: (n) => [
      sseJson({
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta: {}, finish_reason: 'length' }],
      }),
      usageEvent(16, n),
      DONE,
    ],
  },
  'openai-completions': {
    ...sse,
    path: () => '/v1/completions',
    events: (n) => Array.from({ length: n }, (_, i) => textEvent(word(i))),
    end: (n) => [
      sseJson({
        object: 'text_completion',
        choices: [{ index: 0, text: '', finish_reason: 'length' }],
      }),
      usageEvent(16, n),
      DONE,
    ],
  },
  llamacpp: {
    ...sse,
    path: () => '/completion',
    events: (n) => Array.from({ length: n }, (_, i) => llamaPartial(word(i), [100 + i], i + 1)),
    end: (n) => [
      llamaFinal({ predicted: n, evaluated: 16, stopType: 'limit', promptMs: 2, predictedMs: 5 }),
    ],
  },
  tgi: {
    ...sse,
    path: () => '/generate_stream',
    // The last token event carries `generated_text` and `details`: it is the end marker.
    events: (n) => Array.from({ length: n - 1 }, (_, i) => tgiToken(i, { id: i, text: word(i) })),
    end: (n) => [
      tgiToken(
        n - 1,
        { id: n - 1, text: word(n - 1) },
        { generatedText: 'text', finishReason: 'length', generatedTokens: n, inputLength: 16 },
      ),
    ],
  },
  triton: {
    ...sse,
    path: (model) => `/v2/models/${encodeURIComponent(model)}/generate_stream`,
    events: (n) => Array.from({ length: n }, (_, i) => tritonText(word(i))),
    end: () => [],
  },
  ollama: {
    contentType: 'application/x-ndjson',
    path: () => '/api/generate',
    events: (n) => Array.from({ length: n }, (_, i) => ollamaGenerate(word(i))),
    end: (n) => [
      ollamaDone('generate', {
        doneReason: 'length',
        promptEvalCount: 16,
        evalCount: n,
        totalNs: 9e6,
        loadNs: 1e6,
        promptEvalNs: 2e6,
        evalNs: 5e6,
      }),
    ],
    malformed: '{"oops": [\n',
    oversize: (bytes) => `${'x'.repeat(bytes)}\n`,
  },
  sglang: {
    ...sse,
    path: () => '/generate',
    // Cumulative text (SGLang's default) and a running token count.
    events: (n) =>
      Array.from({ length: n }, (_, i) =>
        sglangMessage(Array.from({ length: i + 1 }, (_, j) => word(j)).join(''), i + 1),
      ),
    end: (n) => [
      sglangMessage(Array.from({ length: n }, (_, j) => word(j)).join(''), n, { type: 'length' }),
      SSE_DONE,
    ],
  },
};

const HTML_PAGE =
  '<!doctype html>\n<html><head><title>Sign in</title></head>\n<body><h1>Please sign in</h1></body></html>\n';

export interface HostileOptions {
  protocol: Protocol;
  fault: Fault;
  /** Which requests (by the client's `x-request-id`) get the fault; a resent one gets it again. */
  faulted: (id: number) => boolean;
  /** Output tokens in each answer (default 3). */
  tokens?: number;
  /** The model the client names (Triton's path carries it). */
  model?: string;
  /**
   * Serve https with the test CA's certificate for 127.0.0.1 (test/fixtures/tls): the same
   * faults under TLS, a reset being the TCP connection's.
   */
  tls?: boolean;
  /**
   * Speak HTTP/2 without TLS (h2c): a reset is then the stream's (RST_STREAM), as an HTTP/2
   * server resets one request without the others on its connection.
   */
  http2?: boolean;
}

export interface HostileServer {
  url: string;
  /** `x-request-id` of every request that arrived, in arrival order (resends included). */
  seen: number[];
  close(): Promise<void>;
}

/**
 * A loopback server on port 0 that answers in `protocol`'s wire format and does `fault` to the
 * requests `faulted` picks by `x-request-id`, so the faulted count is exact whatever the
 * client's concurrency or resends. A path that is not the protocol's route gets a 404.
 */
export async function startHostileServer(options: HostileOptions): Promise<HostileServer> {
  if (options.fault === 'refused') return closedPort(options.tls);
  const answer = ANSWERS[options.protocol];
  const tokens = options.tokens ?? 3;
  const route = answer.path(options.model ?? 'sim-llama-3-8b');
  const seen: number[] = [];
  let killed = false;
  const kill = () => {
    killed = true;
    loopback.kill();
  };
  // A TLS socket has no TCP handle to reset: its connection's own socket, by the client's port.
  const tcp = new Map<number | undefined, Socket>();
  const reset = (socket: Socket) => (tcp.get(socket.remotePort) ?? socket).resetAndDestroy();

  const respond = (id: number, req: IncomingMessage, res: ServerResponse) => {
    if (req.url !== route) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: `no route ${req.url}` }));
      return;
    }
    const events = answer.events(tokens);
    const whole = [...events, ...answer.end(tokens)];
    if (!options.faulted(id)) return stream(res, answer.contentType, whole);
    switch (options.fault) {
      case 'http429':
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' });
        return res.end(JSON.stringify({ error: { message: 'rate limited', code: 429 } }));
      case 'http5xx':
        res.writeHead(503, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: 'engine overloaded', code: 503 } }));
      case 'http3xx':
        res.writeHead(301, { location: REDIRECT_LOCATION, 'content-length': '0' });
        return res.end();
      case 'resetBeforeFirstByte':
        resetStream(req, res);
        return;
      case 'resetAfterFirstByte':
        res.writeHead(200, { 'content-type': answer.contentType });
        res.write(events[0]);
        // Let the client read the first event before the reset throws its buffers away.
        setTimeout(() => resetStream(req, res), 30);
        return;
      case 'stall':
        return;
      case 'malformedEvent':
        return stream(res, answer.contentType, [events[0], answer.malformed, ...whole.slice(1)]);
      case 'oversizeLine':
        return stream(res, answer.contentType, [
          events[0],
          answer.oversize(OVERSIZE_LINE_BYTES),
          ...whole.slice(1),
        ]);
      case 'wrongContentType':
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        return res.end(HTML_PAGE);
      case 'truncated': {
        const cut = options.protocol === 'triton' ? [whole[0].slice(0, 20)] : [];
        return stream(res, answer.contentType, [...events, ...cut]);
      }
      case 'serverKilled':
        res.writeHead(200, { 'content-type': answer.contentType });
        res.write(events[0], () => kill());
        return;
      case 'endlessEvents':
        res.writeHead(200, { 'content-type': answer.contentType });
        return writeForever(res, events[0]);
      case 'afterEnd':
        res.writeHead(200, { 'content-type': answer.contentType });
        for (const w of whole) res.write(w);
        return writeForever(res, 'y'.repeat(4096));
      case 'bodyNeverEnds':
        res.writeHead(200, { 'content-type': answer.contentType });
        for (const w of whole) res.write(w);
        return;
    }
  };

  /** HTTP/1.1: the connection's TCP reset; HTTP/2: the stream's RST_STREAM (INTERNAL_ERROR). */
  const resetStream = (req: IncomingMessage, res: ServerResponse) => {
    if (options.http2) (res as unknown as Http2ServerResponse).stream.destroy(new Error('reset'));
    else reset(req.socket);
  };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    res.on('error', () => {});
    req.resume();
    req.on('end', () => {
      const id = Number(req.headers['x-request-id']);
      seen.push(id);
      if (killed) req.socket.destroy();
      else respond(id, req, res);
    });
  };
  // The compatibility API gives HTTP/2 streams the request and response of HTTP/1.1.
  const server = options.http2
    ? // Room for the 20 MB line a client stops reading: node's 10 MiB default would refuse
      // the connection's next streams (ENHANCE_YOUR_CALM) while it holds it.
      (createH2cServer({ maxSessionMemory: 256 }, handler as never) as unknown as ReturnType<
        typeof createServer
      >)
    : options.tls
      ? createHttpsServer(
          {
            noDelay: true,
            cert: readFileSync(fixture('leaf.pem')),
            key: readFileSync(fixture('leaf.key')),
          },
          handler,
        )
      : createServer({ noDelay: true }, handler);
  if (options.tls) {
    server.on('connection', (socket: Socket) => {
      const port = socket.remotePort;
      tcp.set(port, socket);
      socket.on('close', () => tcp.delete(port));
    });
    server.on('tlsClientError', () => {});
  }
  const loopback = await listenOnLoopback(server);
  const url = options.tls ? loopback.url.replace(/^http:/, 'https:') : loopback.url;
  return { url, seen, close: loopback.close };
}

/** Writes `text` again and again, as fast as the client reads, until the connection closes. */
function writeForever(res: ServerResponse, text: string): void {
  const pump = () => {
    while (!res.destroyed && !res.writableEnded) {
      if (!res.write(text)) {
        res.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

function stream(res: ServerResponse, contentType: string, writes: string[]): void {
  res.writeHead(200, { 'content-type': contentType });
  for (const w of writes) res.write(w);
  res.end();
}

/** A port that was just listened on and closed: connecting to it is refused. */
async function closedPort(tls = false): Promise<HostileServer> {
  const probe = createNetServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return { url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`, seen: [], close: async () => {} };
}
