import type { IncomingHttpHeaders } from 'node:http';
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect as connectH2,
  constants,
  type IncomingHttpHeaders as H2Headers,
  type SecureClientSessionOptions,
} from 'node:http2';
import { connect as connectTcp, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { type ConnectionOptions, connect as connectTls } from 'node:tls';
import { threadId } from 'node:worker_threads';
import type { Dispatcher } from 'undici';
import { InfergaugeError } from '../errors.js';
import { closingTunnel, openTunnel, type ProxyRoute } from '../proxy.js';
import type { H1Handler } from './h1.js';
import { type ConnectionTiming, timeConnection, timeTunnel } from './phases.js';

/**
 * A pool of HTTP/2 sessions (node:http2) for the load, with the part of undici's dispatch the
 * load generator uses, as H1Pool has for HTTP/1.1: the same handler callbacks, and errors with
 * stable codes, so that a request's record does not depend on the protocol that carried it.
 *
 * Streams share sessions: each session carries up to the server's SETTINGS_MAX_CONCURRENT_STREAMS
 * at once, and a new session opens only when every open one is full. Streams past the server's
 * limit are never handed to nghttp2, which would queue them inside the session where the wait
 * would read as TTFT: they wait here, as a request waits for a free HTTP/1.1 connection
 * (queueDelay).
 */

/** Streams a session carries at once when the server's SETTINGS do not say (Go and curl's). */
const DEFAULT_MAX_STREAMS = 100;
/** undici's default connect timeout, as H1Pool. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Headers of HTTP/1.1's connection, which HTTP/2 forbids (RFC 9113 section 8.2.2). */
const CONNECTION_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'expect',
]);

export interface H2PoolOptions {
  /** Most sessions open at once; null: no limit (the load bounds the streams). */
  connections: number | null;
  /**
   * TLS options for https:// (CA, client certificate, servername): the caller's, merged over
   * the ALPN offer of `h2`.
   */
  tls?: ConnectionOptions;
  /**
   * An https:// server's sessions go through this proxy's CONNECT tunnel, TLS (and its ALPN
   * offer of h2) running end to end inside it. h2c cannot pass a forwarding proxy.
   */
  proxy?: ProxyRoute;
}

/** An error with a stable code, as undici and the socket layer give them. */
export class H2Error extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Connection numbers unique in the process: a worker thread's start at its thread id's block. */
let nextConnection = threadId * 2 ** 20;

/** One request: undici's DispatchController, plus which session carried it. */
class Controller implements Dispatcher.DispatchController {
  aborted = false;
  paused = false;
  reason: Error | null = null;
  /** The stream went out on a session that had carried an earlier stream. */
  reused = false;
  /** Some byte of a response arrived: the server read the request, so it is never resent. */
  answered = false;
  /** The session that carried it (RequestRecord.connectionId). */
  connectionId: number | undefined;
  /** Its session's set-up timing, when it was the session's first stream (phases.ts). */
  opened: ConnectionTiming | undefined;
  stream: ClientHttp2Stream | undefined;
  /** The handler was told the request's end (or failure): nothing more reaches it. */
  over = false;
  waiting = false;

  constructor(
    readonly headers: Record<string, string>,
    public body: string | undefined,
    readonly handler: H1Handler,
    private readonly pool: H2Pool,
  ) {}

  abort(reason: Error): void {
    if (this.aborted || this.over) return;
    this.aborted = true;
    this.reason = reason;
    if (this.waiting) this.pool.withdraw(this);
    this.stream?.close(constants.NGHTTP2_CANCEL);
    this.fail(reason);
  }

  fail(err: Error): void {
    if (this.over) return;
    this.over = true;
    this.handler.onResponseError?.(this, err);
  }

  pause(): void {
    this.paused = true;
    this.stream?.pause();
  }

  resume(): void {
    this.paused = false;
    this.stream?.resume();
  }
}

class Session {
  readonly id = nextConnection++;
  /** The HTTP/2 session, once its socket is open (through a proxy, after the tunnel). */
  session: ClientHttp2Session | undefined;
  /** Its socket's set-up (phases.ts); absent where the socket could not be timed. */
  timing: ConnectionTiming | undefined;
  /** Streams open now. */
  active = 0;
  /** Streams carried so far. */
  streams = 0;
  /** SETTINGS came: streams may go out. */
  ready = false;
  /** GOAWAY, an error or a close: no new stream. */
  closing = false;
  /** Closed, or failed before its session existed. */
  closed = false;
  error: Error | undefined;
  /** The error code of the server's GOAWAY, if one came. */
  goaway: number | undefined;
  /** Told once, when it becomes ready or closes (H2Pool.ready). */
  readonly settled: Array<() => void> = [];

  get capacity(): number {
    return this.session?.remoteSettings.maxConcurrentStreams ?? DEFAULT_MAX_STREAMS;
  }

  get hasRoom(): boolean {
    return (
      this.ready &&
      !this.closing &&
      this.session !== undefined &&
      !this.session.destroyed &&
      this.active < this.capacity
    );
  }

  settle(): void {
    for (const told of this.settled.splice(0)) told();
  }
}

/** See the file's head comment. */
export class H2Pool {
  private readonly sessions = new Set<Session>();
  private readonly queue: Controller[] = [];
  private opening = 0;
  private destroyed = false;
  /** Streams each closed session carried, for streamsPerConnection. */
  private readonly carried: number[] = [];
  /** The set-up timings of the sessions `warm` opened, before the run's clock started. */
  readonly preopened: ConnectionTiming[] = [];

  constructor(
    private readonly origin: string,
    readonly options: H2PoolOptions,
  ) {
    const { protocol } = new URL(origin);
    if (protocol !== 'http:' && protocol !== 'https:') {
      throw new Error(`H2Pool speaks http: and https:, not ${protocol}`);
    }
  }

  dispatch(
    options: Pick<Dispatcher.DispatchOptions, 'path' | 'method' | 'headers'> & {
      body?: string;
      freshConnection?: boolean;
    },
    handler: H1Handler,
  ): boolean {
    if (this.destroyed) throw new H2Error('UND_ERR_DESTROYED', 'The client is destroyed');
    const headers: Record<string, string> = {
      [constants.HTTP2_HEADER_METHOD]: options.method,
      [constants.HTTP2_HEADER_PATH]: options.path,
    };
    const given = (options.headers ?? {}) as Record<string, string>;
    for (const name in given) {
      const key = name.toLowerCase();
      // As H1Pool and undici refuse them: the connection's, not the request's.
      if (CONNECTION_HEADERS.has(key) && key !== 'host') {
        throw new H2Error('UND_ERR_INVALID_ARG', `invalid ${key} header`);
      }
      if (key === 'host') headers[constants.HTTP2_HEADER_AUTHORITY] = given[name] as string;
      else headers[key] = given[name] as string;
    }
    // `freshConnection` (a resend) needs nothing here: a session the server closed has no room,
    // and a refused stream may go again on any session with room.
    this.place(new Controller(headers, options.body, handler, this));
    return true;
  }

  /**
   * Opens sessions for `count` streams before the run's clock starts (one first, to learn the
   * server's stream limit), and resolves once each has its SETTINGS or failed. Returns the
   * sessions ready.
   */
  async warm(count: number): Promise<number> {
    if (count <= 0) return 0;
    const first = await this.ready(this.open(true));
    if (first.error) return 0;
    const needed = Math.ceil(count / first.capacity);
    const limit = Math.min(needed, this.options.connections ?? needed);
    const more: Promise<Session>[] = [];
    while (this.sessions.size < limit) more.push(this.ready(this.open(true)));
    await Promise.all(more);
    return [...this.sessions].filter((s) => s.ready && !s.closing).length;
  }

  /** How many streams each session carried: the closed ones and those open now. */
  streamsPerConnection(): number[] {
    return [...this.carried, ...[...this.sessions].map((s) => s.streams)].filter((n) => n > 0);
  }

  /** Closes every session; requests still waiting or in flight fail. */
  async destroy(): Promise<void> {
    this.destroyed = true;
    const error = new H2Error('UND_ERR_DESTROYED', 'The client is destroyed');
    for (const request of this.queue.splice(0)) {
      request.waiting = false;
      request.fail(error);
    }
    const closing = [...this.sessions].map(
      (s) =>
        new Promise<void>((resolve) => {
          if (s.closed) resolve();
          else s.settled.push(() => s.closed && resolve());
          // A session still opening closes when its socket comes (attach).
          s.session?.destroy();
        }),
    );
    await Promise.all(closing);
  }

  /** A request waiting for a stream slot was aborted: out of the queue. */
  withdraw(request: Controller): void {
    const i = this.queue.indexOf(request);
    if (i >= 0) this.queue.splice(i, 1);
    request.waiting = false;
  }

  private place(request: Controller): void {
    for (const s of this.sessions) {
      if (s.hasRoom) {
        this.start(s, request);
        return;
      }
    }
    request.waiting = true;
    this.queue.push(request);
    this.grow();
  }

  /** Opens a session when the waiting requests outnumber the room the opening ones will have. */
  private grow(): void {
    if (this.destroyed || this.queue.length === 0) return;
    const limit = this.options.connections ?? Number.POSITIVE_INFINITY;
    if (this.sessions.size >= limit) return;
    if (this.queue.length > this.opening * DEFAULT_MAX_STREAMS) this.open();
  }

  /** Sends waiting requests on sessions with room. */
  private drain(): void {
    for (const s of this.sessions) {
      while (s.hasRoom && this.queue.length > 0) {
        const request = this.queue.shift() as Controller;
        request.waiting = false;
        this.start(s, request);
      }
    }
    this.grow();
  }

  private ready(s: Session): Promise<Session> {
    return new Promise((resolve) => {
      if (s.ready || s.closed) resolve(s);
      else s.settled.push(() => resolve(s));
    });
  }

  /**
   * Opens a session: its socket (direct, or a CONNECT tunnel and TLS inside it), timed from its
   * creation for the connection phases, then HTTP/2 over it. `preopened`: before the clock.
   */
  private open(preopened = false): Session {
    const s = new Session();
    this.sessions.add(s);
    this.opening++;
    const connectTimer = setTimeout(() => {
      if (!s.ready) {
        const err = new H2Error(
          'UND_ERR_CONNECT_TIMEOUT',
          `Connect Timeout Error (${CONNECT_TIMEOUT_MS} ms)`,
        );
        if (s.session) s.session.destroy(err);
        else this.closed(s, err);
      }
    }, CONNECT_TIMEOUT_MS);
    const attach = (socket: Socket, timing: ConnectionTiming) => {
      timing.preopened = preopened;
      if (preopened) this.preopened.push(timing);
      s.timing = timing;
      if (s.closed || this.destroyed) {
        socket.destroy();
        return;
      }
      this.attach(s, socket, connectTimer);
    };
    const proxy = this.options.proxy;
    if (proxy && this.origin.startsWith('https:')) {
      const timing = timeTunnel();
      const url = new URL(this.origin);
      openTunnel(proxy, bare(url.hostname), Number(url.port || 443), CONNECT_TIMEOUT_MS).then(
        (tunnel) => {
          timing.connectMs = performance.now();
          const socket = closingTunnel(
            connectTls({ ...this.tlsOptions(url), socket: tunnel }),
            tunnel,
          );
          socket.once('secureConnect', () => {
            timing.secureMs = performance.now();
          });
          attach(socket, timing);
        },
        (err: Error) => {
          clearTimeout(connectTimer);
          this.closed(s, err);
        },
      );
    } else {
      const url = new URL(this.origin);
      const socket = this.origin.startsWith('https:')
        ? connectTls(this.tlsOptions(url))
        : connectTcp({ host: bare(url.hostname), port: Number(url.port || 80) });
      attach(socket, timeConnection(socket));
    }
    return s;
  }

  /** The TLS options of a session to `url`: ALPN's h2, SNI by name, then the caller's. */
  private tlsOptions(url: URL): ConnectionOptions {
    return {
      host: bare(url.hostname),
      port: Number(url.port || 443),
      ALPNProtocols: ['h2'],
      ...(isIp(url.hostname) ? {} : { servername: url.hostname }),
      ...this.options.tls,
    };
  }

  /** Speaks HTTP/2 on `socket` for `s`. */
  private attach(s: Session, socket: Socket, connectTimer: NodeJS.Timeout): void {
    const session = connectH2(this.origin, {
      // Hundreds of streams' buffers in one session: node's 10 MiB default refuses new
      // streams (ENHANCE_YOUR_CALM) past it.
      maxSessionMemory: 64,
      createConnection: () => socket,
    } as SecureClientSessionOptions);
    s.session = session;
    session.once('remoteSettings', () => {
      clearTimeout(connectTimer);
      this.opening--;
      s.ready = true;
      s.settle();
      this.drain();
    });
    session.on('goaway', (code: number) => {
      s.goaway ??= code;
      s.closing = true;
    });
    session.on('error', (err: Error) => {
      s.error ??= err;
      s.closing = true;
    });
    session.once('close', () => {
      clearTimeout(connectTimer);
      this.closed(s, undefined);
    });
  }

  /** `s` closed, or failed before it had a session (`err`): its requests move on or fail. */
  private closed(s: Session, err: Error | undefined): void {
    if (s.closed) return;
    s.closed = true;
    s.closing = true;
    if (err) s.error ??= err;
    if (!s.ready) this.opening--;
    this.sessions.delete(s);
    if (s.streams > 0) this.carried.push(s.streams);
    if (!s.ready) this.failWaiting(s);
    s.settle();
    this.drain();
  }

  /** A session that never became ready: the requests it was opened for fail as its connect did. */
  private failWaiting(s: Session): void {
    if (this.destroyed) return;
    // Another session may yet take them.
    if (this.opening > 0 || [...this.sessions].some((o) => o.hasRoom)) return;
    const reason =
      s.error ?? new H2Error('UND_ERR_SOCKET', 'connection closed before it was established');
    for (const request of this.queue.splice(0)) {
      request.waiting = false;
      request.fail(reason);
    }
  }

  private start(s: Session, request: Controller): void {
    request.reused = s.streams > 0;
    request.opened = request.reused ? undefined : s.timing;
    request.connectionId = s.id;
    request.handler.onRequestStart?.(request, {});
    // Aborted from onRequestStart: nothing went out.
    if (request.over) return;
    let stream: ClientHttp2Stream;
    try {
      stream = (s.session as ClientHttp2Session).request(request.headers, {
        endStream: request.body === undefined,
      });
    } catch (err) {
      request.fail(err as Error);
      return;
    }
    s.active++;
    s.streams++;
    request.stream = stream;
    if (request.body !== undefined) stream.end(request.body);
    request.body = undefined;
    let streamError: Error | undefined;
    let ended = false;
    stream.on('response', (headers: H2Headers) => {
      request.answered = true;
      if (request.over) return;
      const status = Number(headers[constants.HTTP2_HEADER_STATUS]);
      // 1xx heads are not the answer (node:http2 tells those on 'headers').
      request.handler.onResponseStart?.(request, status, plainHeaders(headers), '');
    });
    stream.on('data', (chunk: Buffer) => {
      request.answered = true;
      if (request.over) return;
      const handler = request.handler;
      if (handler.onResponseBytes) handler.onResponseBytes(request, chunk, 0, chunk.length);
      else handler.onResponseData?.(request, chunk);
    });
    stream.on('end', () => {
      ended = true;
    });
    stream.on('error', (err: Error) => {
      streamError ??= err;
    });
    stream.on('close', () => {
      s.active--;
      if (!request.over) {
        if (ended && stream.rstCode === constants.NGHTTP2_NO_ERROR) {
          request.over = true;
          request.handler.onResponseEnd?.(request, {});
        } else request.fail(streamFailure(stream, streamError, s));
      }
      this.drain();
    });
  }
}

/**
 * Why a stream ended before its answer did, with a code the record's categories know. Only a
 * stream the server refused unprocessed gets the code of a closed kept-alive connection, the one
 * the client resends (http.ts): streams run side by side, so a reset or a lost connection may
 * come after the server read the request, and a POST is never sent twice.
 */
function streamFailure(stream: ClientHttp2Stream, err: Error | undefined, s: Session): Error {
  const code = stream.rstCode;
  // RFC 9113 section 8.7: a refused stream was not processed and may be sent again.
  if (code === constants.NGHTTP2_REFUSED_STREAM) {
    return new H2Error(
      'UND_ERR_SOCKET',
      'the server refused the stream unprocessed (REFUSED_STREAM)',
    );
  }
  const cause = err ?? s.error;
  const causeCode = (cause as { code?: string } | undefined)?.code;
  if (cause && causeCode && RESET_CODES.has(causeCode)) {
    return new H2Error(STREAM_ERROR, `the connection was reset (${causeCode}: ${cause.message})`);
  }
  // The socket's and TLS's own codes (ECONNREFUSED, a certificate's) say the most.
  if (cause && causeCode && !causeCode.startsWith('ERR_HTTP2')) return cause;
  if (s.goaway !== undefined) {
    return new H2Error(
      STREAM_ERROR,
      `the server closed the connection (GOAWAY ${H2_ERROR_NAMES[s.goaway] ?? s.goaway}) mid-stream`,
    );
  }
  if (code !== undefined && code !== constants.NGHTTP2_NO_ERROR) {
    return new H2Error(
      STREAM_ERROR,
      `the server reset the stream (RST_STREAM ${H2_ERROR_NAMES[code] ?? code})`,
    );
  }
  return new H2Error(
    STREAM_ERROR,
    `the stream closed before its end${cause ? `: ${cause.message}` : ''}`,
  );
}

/** A stream that failed after it went out (stream_broken in the record). */
const STREAM_ERROR = 'ERR_HTTP2_STREAM_ERROR';
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE']);

const H2_ERROR_NAMES: Record<number, string> = {
  0: 'NO_ERROR',
  1: 'PROTOCOL_ERROR',
  2: 'INTERNAL_ERROR',
  3: 'FLOW_CONTROL_ERROR',
  4: 'SETTINGS_TIMEOUT',
  5: 'STREAM_CLOSED',
  6: 'FRAME_SIZE_ERROR',
  7: 'REFUSED_STREAM',
  8: 'CANCEL',
  9: 'COMPRESSION_ERROR',
  10: 'CONNECT_ERROR',
  11: 'ENHANCE_YOUR_CALM',
  12: 'INADEQUATE_SECURITY',
  13: 'HTTP_1_1_REQUIRED',
};

/** The response's headers without HTTP/2's pseudo-headers, as an HTTP/1.1 client gives them. */
function plainHeaders(headers: H2Headers): IncomingHttpHeaders {
  const plain: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (name.charCodeAt(0) !== 58 /* ':' */) plain[name] = headers[name] as string;
  }
  return plain;
}

function isIp(hostname: string): boolean {
  return /^[\d.]+$/.test(hostname) || hostname.startsWith('[');
}

/** A URL's hostname as sockets take it: an IPv6 address without its brackets. */
function bare(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * What an https:// endpoint offers, asked once before a run: a TLS connection offering `h2` and
 * `http/1.1` by ALPN, closed as soon as the handshake says which the server picked. A server
 * without ALPN speaks HTTP/1.1. A failed handshake rejects with the socket's error.
 */
export function offeredProtocol(
  origin: string,
  tls?: ConnectionOptions,
  proxy?: ProxyRoute,
): Promise<'h2' | 'http/1.1'> {
  const url = new URL(origin);
  const options: ConnectionOptions = {
    host: bare(url.hostname),
    port: Number(url.port || 443),
    ALPNProtocols: ['h2', 'http/1.1'],
    ...(isIp(url.hostname) ? {} : { servername: url.hostname }),
    ...tls,
  };
  // Through a proxy, the handshake runs inside its tunnel, as the run's connections will.
  const socket = proxy
    ? openTunnel(proxy, bare(url.hostname), Number(url.port || 443), CONNECT_TIMEOUT_MS).then(
        (tunnel) => closingTunnel(connectTls({ ...options, socket: tunnel }), tunnel),
      )
    : Promise.resolve(connectTls(options));
  return socket.then(
    (socket) =>
      new Promise((resolve, reject) => {
        socket.setTimeout(CONNECT_TIMEOUT_MS, () =>
          socket.destroy(
            new H2Error(
              'UND_ERR_CONNECT_TIMEOUT',
              `Connect Timeout Error (${CONNECT_TIMEOUT_MS} ms)`,
            ),
          ),
        );
        socket.once('secureConnect', () => {
          const chosen = socket.alpnProtocol;
          socket.destroy();
          resolve(chosen === 'h2' ? 'h2' : 'http/1.1');
        });
        socket.once('error', reject);
      }),
  );
}

/** `--http2`: auto (what the endpoint offers), on, off. */
export type Http2Mode = 'auto' | 'on' | 'off';
/** The protocol a run's requests go on. */
export type WireProtocol = 'h2' | 'http/1.1';

/**
 * The protocol of a run, decided once before it: `off` is HTTP/1.1; `auto` is HTTP/2 where an
 * https:// endpoint offers `h2` by ALPN, else HTTP/1.1 (a plain http:// endpoint offers nothing:
 * h2c only by prior knowledge, with `on`); `on` is HTTP/2 or an error naming `--http2 off`.
 * A TLS failure while asking is left to the run, which reports it as every request's.
 */
export async function chooseProtocol(
  origin: string,
  mode: Http2Mode,
  tls?: ConnectionOptions,
  proxy?: ProxyRoute,
): Promise<WireProtocol> {
  if (mode === 'off') return 'http/1.1';
  const secure = origin.startsWith('https:');
  if (!secure) {
    if (mode === 'auto') return 'http/1.1';
    // A forwarding proxy speaks HTTP/1.1 requests; h2c has no way through it.
    if (proxy) {
      throw new InfergaugeError(
        `--http2 on: ${origin} is reached through the proxy ${proxy.shown}, which forwards HTTP/1.1 only (h2c cannot pass it); use --http2 auto or off, --no-proxy, or an https:// URL (HTTP/2 through the proxy's tunnel)`,
        'IG_HTTP2_UNAVAILABLE',
      );
    }
    if (await speaksH2c(origin)) return 'h2';
    throw notH2(origin, 'does not answer HTTP/2 with prior knowledge (h2c)');
  }
  let offered: WireProtocol;
  try {
    offered = await offeredProtocol(origin, tls, proxy);
  } catch {
    return mode === 'on' ? 'h2' : 'http/1.1';
  }
  if (offered === 'h2' || mode === 'auto') return offered;
  throw notH2(origin, 'does not offer h2 in its TLS handshake (ALPN)');
}

/** What the terminal says of the protocol chosen, and why. */
export function protocolNotice(mode: Http2Mode, protocol: WireProtocol): string {
  const name = protocol === 'h2' ? 'HTTP/2' : 'HTTP/1.1';
  if (mode !== 'auto') return `${name} (--http2 ${mode})`;
  return protocol === 'h2'
    ? `${name}: the server offers h2 (--http2 auto; --http2 off for HTTP/1.1)`
    : `${name}: the server offers no h2 (--http2 auto)`;
}

function notH2(origin: string, why: string): InfergaugeError {
  return new InfergaugeError(
    `--http2 on: ${origin} ${why}; use --http2 off (or auto) for HTTP/1.1`,
    'IG_HTTP2_UNAVAILABLE',
  );
}

/**
 * Whether a plain http:// server answers an HTTP/2 connection preface with its SETTINGS (an
 * HTTP/1.1 server answers it with a 400, or closes).
 */
function speaksH2c(origin: string): Promise<boolean> {
  return new Promise((resolve) => {
    const session = connectH2(origin);
    const done = (speaks: boolean) => {
      clearTimeout(timer);
      session.destroy();
      resolve(speaks);
    };
    const timer = setTimeout(() => done(false), CONNECT_TIMEOUT_MS);
    session.once('remoteSettings', () => done(true));
    // Refused, unreachable: not an answer about HTTP/2; the run reports it as its requests'.
    session.once('error', (err: Error & { code?: string }) =>
      done(err.code !== undefined && !err.code.startsWith('ERR_HTTP2')),
    );
    session.once('close', () => done(false));
  });
}
