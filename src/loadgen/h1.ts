import type { IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import { type ProxyRoute, proxyUnreachable } from '../proxy.js';
import { type ConnectionTiming, timeConnection } from './phases.js';

/**
 * A connection pool speaking plain HTTP/1.1 on `node:net` sockets, for the load itself.
 *
 * Why not undici for this: per token event undici copies each socket read into its WASM parser
 * and calls back through several layers per HTTP chunk; at tens of thousands of events a second
 * that was most of the client's CPU (issue 18's profile). Here each socket reads into one shared
 * buffer (`onread`: no Buffer per read, no stream machinery), each read is stamped and copied
 * to one pending buffer, the reads of a wake are parsed there once the poll phase ends
 * (H1Pool.defer), and the body's bytes go to the handler as ranges of that buffer. autocannon
 * carries its own HTTP client for the same reason. undici stays for https:// (loaded only then).
 *
 * It implements the part of undici's `Dispatcher.dispatch` the load generator uses, with the
 * same handler callbacks and the same error codes for the same failures (UND_ERR_SOCKET for a
 * peer that closed mid-answer, UND_ERR_CONNECT_TIMEOUT, the socket's own ECONNRESET or
 * ECONNREFUSED, llhttp's HPE_* names for a malformed answer), so a request's record does not
 * depend on which client carried it. One request per connection at a time (no pipelining).
 *
 * Framing follows RFC 9112 section 6: 1xx answers are skipped, 204 and 304 have no body,
 * Transfer-Encoding wins over Content-Length (chunked when it is the last coding, else the body
 * runs to the close), Content-Length otherwise, else the body runs to the close. A connection
 * is reused only after a complete answer that was not close-delimited, on HTTP/1.1 without
 * `connection: close` (HTTP/1.0: with `connection: keep-alive`).
 */

/** Every read of every socket of this thread lands here, to be copied out (H1Pool.defer). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
/** Reads waiting to be parsed start in this much room; past the most, they are parsed at once. */
const PENDING_START_BYTES = 256 * 1024;
const PENDING_MAX_BYTES = 4 * 1024 * 1024;
/**
 * A response head past this is not an answer (undici's default maxHeaderSize is 16 KiB). Counted
 * on each head's own bytes, its blank line included (a 1xx head and the answer's each on its
 * own), so that how the bytes were split into reads never decides.
 */
const MAX_HEAD_CHARS = 64 * 1024;
/** A chunk-size line (size, extensions) or trailer section past this is not HTTP. */
const MAX_LINE_CHARS = 16 * 1024;
/** undici's keepAliveTimeoutThreshold default: a server's keep-alive hint less this. */
const KEEP_ALIVE_MARGIN_MS = 2000;
/** undici's default connect timeout. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Headers undici refuses from a caller (they are the connection's, not the request's). */
const CONNECTION_HEADERS = new Set(['transfer-encoding', 'keep-alive', 'upgrade', 'expect']);

export interface H1PoolOptions {
  /** Most connections open at once; null: no limit. */
  connections: number | null;
  /** How long an idle connection is kept (a server's `keep-alive: timeout=N` hint shortens it). */
  keepAliveTimeoutMs: number;
  /**
   * A forwarding proxy (src/proxy.ts): connections go to it, and each request line
   * names the whole URL (`POST http://host:port/path`).
   */
  proxy?: ProxyRoute;
}

type Options = Pick<Dispatcher.DispatchOptions, 'path' | 'method' | 'headers'> & {
  body?: string;
  /**
   * Send on a new connection, never an idle one: a request resent because the server closed a
   * kept-alive connection under it would likely meet the same fate on another idle one
   * (llama-server closes every connection after its answer while announcing keep-alive).
   */
  freshConnection?: boolean;
};

/** An error with a stable code, as undici and the socket layer give them. */
export class H1Error extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** undici's DispatchController for one request, plus whether its connection had been used. */
class Controller implements Dispatcher.DispatchController {
  aborted = false;
  paused = false;
  reason: Error | null = null;
  /** The request went out on a connection that had carried an earlier one. */
  reused = false;
  /** The set-up timing of the connection it went out on, when it was that connection's first. */
  opened: ConnectionTiming | undefined;
  /**
   * Some byte of a response to this request arrived (a 1xx included): the server read it, so it
   * is never resent.
   */
  answered = false;
  connection: Connection | undefined;
  /** The pool's queue this request waits in for a connection, if it does, and its place there. */
  waitingIn: Waiting | undefined;
  waitingAt = 0;

  /** The head is ASCII, so head and body go out as one UTF-8 string in one write. */
  readonly asciiHead: boolean;

  constructor(
    /** Dropped once written: a request on the wire keeps neither (its answer takes a while). */
    public head: string,
    public body: string | undefined,
    readonly handler: H1Handler,
    private readonly pool: H1Pool,
  ) {
    this.asciiHead = !/[^\t\x20-\x7e\r\n]/.test(head);
  }

  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    // Still waiting: out of the queue now, rather than lingering (handler and body held) until
    // a connection frees.
    if (this.waitingIn) this.pool.withdraw(this, reason);
    else this.connection?.abort(this, reason);
  }

  pause(): void {
    this.paused = true;
    this.connection?.socket.pause();
  }

  resume(): void {
    this.paused = false;
    this.connection?.socket.resume();
  }
}

enum State {
  Idle,
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  UntilClose,
  /** The answer is complete: the handler was told; what follows is not ours. */
  Done,
}

/**
 * undici's handler, and optionally `onResponseBytes`: the body's bytes as a range of the read
 * buffer, so a handler that reads them at once needs no view (a Buffer object per event).
 */
export interface H1Handler extends Dispatcher.DispatchHandler {
  onResponseBytes?(
    controller: Dispatcher.DispatchController,
    buffer: Buffer,
    start: number,
    end: number,
  ): void;
}

/** Hands `buffer[start, end)` of the body on: as a range when the handler takes one, else as a view. */
function bodyBytes(request: Controller, buffer: Buffer, start: number, end: number): void {
  const handler = request.handler;
  if (handler.onResponseBytes) handler.onResponseBytes(request, buffer, start, end);
  else handler.onResponseData?.(request, buffer.subarray(start, end));
}

function idleTimedOut(connection: Connection): void {
  connection.idleTimedOut();
}

class Connection {
  readonly socket: Socket;
  readonly timing: ConnectionTiming;
  private state = State.Idle;
  request: Controller | undefined;
  /** Requests this connection has carried (a connection with one or more is "reused"). */
  served = 0;
  connected = false;
  /** The head so far (Latin-1: one char per byte), or the chunk-size line, or the trailers. */
  private text = '';
  /** The head's last two chars so far: where a blank line split across reads may begin. */
  private tail = '';
  private remaining = 0;
  private keepAlive = false;
  /** The current request's bytes went to the socket (an abort before then leaves it clean). */
  private written = false;
  private idleTimeoutMs: number;
  /**
   * The keep-alive close: one timer, re-armed for each idle spell, that does nothing if it fires
   * while the connection is busy. The socket's own timeout made a Timeout and a bound function
   * at every request's end, and held them through the next request (issue 29).
   */
  private idleTimer: NodeJS.Timeout | undefined;
  private idleTimerMs = 0;

  constructor(
    private readonly pool: H1Pool,
    port: number,
    host: string,
  ) {
    this.idleTimeoutMs = pool.options.keepAliveTimeoutMs;
    this.socket = connect({
      port,
      host,
      noDelay: true,
      keepAlive: true,
      keepAliveInitialDelay: 60_000,
      onread: {
        buffer: READ_BUFFER,
        callback: (bytes: number, buffer: Uint8Array) => {
          this.pool.defer(this, buffer as Buffer, bytes);
          return true;
        },
      },
    });
    this.timing = timeConnection(this.socket);
    this.socket.setTimeout(CONNECT_TIMEOUT_MS);
    this.socket.on('timeout', () => {
      this.drop(
        new H1Error('UND_ERR_CONNECT_TIMEOUT', `connect timeout (${CONNECT_TIMEOUT_MS} ms)`),
      );
    });
    this.socket.on('connect', () => {
      this.connected = true;
      this.socket.setTimeout(0);
      this.pool.connected(this);
    });
    this.socket.on('end', () => this.ended());
    this.socket.on('error', (err) => {
      this.pool.flushReads();
      this.fail(err);
    });
    this.socket.on('close', () => {
      this.pool.flushReads();
      clearTimeout(this.idleTimer);
      this.fail(new H1Error('UND_ERR_SOCKET', 'other side closed'));
      this.pool.closed(this);
    });
  }

  /**
   * This client gave the connection up (an abort, a parse error, an idle close): reads still
   * waiting for it are not parsed, as the socket would have delivered none after. A connection
   * the peer closed or reset is not dropped: what it sent before is parsed first.
   */
  dropped = false;

  /** Gives the connection up (dropped) and closes its socket. */
  drop(err?: Error): void {
    this.dropped = true;
    this.socket.destroy(err);
  }

  /** The socket can carry a request (not closed, nor closing: a write would only fail). */
  get usable(): boolean {
    return !this.socket.destroyed && this.socket.writable;
  }

  /**
   * Sends `request` on this (connected, free) connection. Returns false, the request untouched
   * (no onRequestStart), when the socket is closed or closing: the request was never sent, so
   * it goes to another connection without an error. Else the connection took it: it is on the
   * wire (`this.request`), or its handler aborted it from onRequestStart and was told, and the
   * connection is still free; the caller then gives it the next request.
   */
  send(request: Controller): boolean {
    if (!this.usable) return false;
    this.request = request;
    request.connection = this;
    request.reused = this.served > 0;
    request.opened = this.served === 0 ? this.timing : undefined;
    this.served++;
    this.state = State.Head;
    this.text = '';
    this.tail = '';
    this.written = false;
    request.handler.onRequestStart?.(request, {});
    if (request.aborted) {
      // Aborted from onRequestStart, before anything was written: the connection is clean.
      // The caller, not this, hands it the next request: thousands of timed-out requests
      // queued behind a busy connection are then a loop, not a recursion that overflows.
      this.served--;
      this.state = State.Idle;
      this.fail(request.reason as Error);
      return true;
    }
    if (request.body === undefined) this.socket.write(request.head, 'latin1');
    else if (request.asciiHead) this.socket.write(request.head + request.body);
    else {
      // A header value past ASCII goes out as its Latin-1 bytes, the body as UTF-8.
      this.socket.cork();
      this.socket.write(request.head, 'latin1');
      this.socket.write(request.body);
      this.socket.uncork();
    }
    request.head = '';
    request.body = undefined;
    this.written = true;
    return true;
  }

  /** A caller's abort: a request on the wire takes its connection with it. */
  abort(request: Controller, reason: Error): void {
    // Before its write (from onRequestStart), send() puts the clean connection back itself.
    if (this.request !== request || !this.written) return;
    this.fail(reason);
    this.drop();
  }

  /** Marks the connection idle; it closes if still idle after the keep-alive time. */
  idle(): void {
    this.state = State.Idle;
    if (this.idleTimer && this.idleTimerMs === this.idleTimeoutMs) this.idleTimer.refresh();
    else {
      clearTimeout(this.idleTimer);
      this.idleTimerMs = this.idleTimeoutMs;
      this.idleTimer = setTimeout(idleTimedOut, this.idleTimeoutMs, this);
      this.idleTimer.unref();
    }
  }

  /**
   * Idle past the keep-alive time: the socket goes. It leaves the free list now, not at its
   * 'close' a turn later: a request sent on it in between would fail as if the server had
   * closed it, and be resent as such.
   */
  idleTimedOut(): void {
    if (this.state !== State.Idle || this.request || !this.usable) return;
    this.pool.closing(this);
    this.drop(new H1Error('UND_ERR_SOCKET', 'idle keep-alive timeout'));
  }

  /** Parses `buffer[at, bytes)`, one socket read. */
  read(buffer: Buffer, at: number, bytes: number): void {
    while (at < bytes) {
      const request = this.request;
      if (!request || this.state === State.Idle || this.state === State.Done) {
        // Bytes nobody asked for (after a complete answer, or on an idle connection): the
        // server and this client no longer agree where answers start.
        this.drop();
        return;
      }
      switch (this.state) {
        case State.Head: {
          // The server read the request: an answer has begun, even a 1xx one.
          request.answered = true;
          const piece = buffer.toString('latin1', at, bytes);
          // Only the new bytes are searched, after the two before them that may begin the
          // blank line: a head dribbled a byte per read costs linear time, not quadratic.
          const tail = this.tail;
          const end = headEnd(tail === '' ? piece : tail + piece);
          if (end < 0) {
            this.text += piece;
            if (this.text.length > MAX_HEAD_CHARS) {
              this.protocolError('HPE_HEADER_OVERFLOW', 'Header overflow');
              return;
            }
            this.tail = piece.length >= 2 ? piece.slice(-2) : (tail + piece).slice(-2);
            return;
          }
          // The head's own bytes, its blank line included, whatever the reads.
          const used = end - tail.length;
          if (this.text.length + used > MAX_HEAD_CHARS) {
            this.protocolError('HPE_HEADER_OVERFLOW', 'Header overflow');
            return;
          }
          const head = this.text + piece.slice(0, used);
          this.text = '';
          this.tail = '';
          at += used;
          if (!this.startResponse(request, head)) return;
          break;
        }
        case State.Length:
          at = this.counted(request, buffer, at, bytes);
          if (this.remaining === 0) this.complete(request);
          break;
        case State.UntilClose: {
          bodyBytes(request, buffer, at, bytes);
          at = bytes;
          break;
        }
        case State.ChunkData: {
          at = this.counted(request, buffer, at, bytes);
          if (this.remaining === 0) {
            this.state = State.ChunkEnd;
            this.text = '';
          }
          break;
        }
        case State.ChunkEnd:
        case State.ChunkSize: {
          if (this.text === '') {
            // The common case, read straight from the bytes: CRLF after a chunk, a size line
            // of hex digits and CRLF. Anything else (extensions, a line split across reads, an
            // error) is read as a line.
            const next = this.state === State.ChunkEnd ? chunkEnd(buffer, at, bytes) : -1;
            if (next >= 0) {
              this.state = State.ChunkSize;
              at = next;
              break;
            }
            if (this.state === State.ChunkSize && this.chunkSize(buffer, at, bytes)) {
              at = this.sizeLineEnd;
              break;
            }
          }
          at = this.readLine(request, buffer, at, bytes);
          if (at < 0) return;
          break;
        }
        case State.Trailers:
          at = this.readLine(request, buffer, at, bytes);
          if (at < 0) return;
          break;
      }
    }
    // Released only once the whole read is parsed: bytes after a complete answer are not the
    // next request's answer.
    if (this.state === State.Done) {
      if (this.keepAlive && !this.socket.destroyed) this.pool.released(this);
      else this.drop();
    }
  }

  /**
   * Collects a line-framed part (chunk size, chunk end, trailer) up to its line end (CRLF; a
   * bare LF is accepted, as llhttp does for chunk lines) and acts on it. Returns where reading
   * goes on, or -1 when the connection is gone.
   */
  private readLine(request: Controller, buffer: Buffer, at: number, bytes: number): number {
    const newline = buffer.indexOf(10, at);
    const stop = newline < 0 || newline >= bytes ? bytes : newline + 1;
    this.text += buffer.toString('latin1', at, stop);
    if (!this.text.endsWith('\n')) {
      if (this.text.length <= MAX_LINE_CHARS) return stop;
      this.protocolError('HPE_CHUNK_EXTENSIONS_OVERFLOW', 'Chunk line overflow');
      return -1;
    }
    const line = this.text.endsWith('\r\n') ? this.text.slice(0, -2) : this.text.slice(0, -1);
    this.text = '';
    return this.line(request, line) ? stop : -1;
  }

  /** Hands on up to `remaining` body bytes (a length or a chunk); returns where reading goes on. */
  private counted(request: Controller, buffer: Buffer, at: number, bytes: number): number {
    const n = Math.min(this.remaining, bytes - at);
    this.remaining -= n;
    bodyBytes(request, buffer, at, at + n);
    return at + n;
  }

  /** Where chunkSize's line ended. */
  private sizeLineEnd = 0;

  /** A plain `HEX\r\n` size line at `at`, whole in this read: sets the state and true. */
  private chunkSize(buffer: Buffer, at: number, bytes: number): boolean {
    let size = 0;
    let i = at;
    for (; i < bytes && i - at <= 12; i++) {
      const c = buffer[i];
      const digit =
        c >= 48 && c <= 57
          ? c - 48
          : c >= 97 && c <= 102
            ? c - 87
            : c >= 65 && c <= 70
              ? c - 55
              : -1;
      if (digit < 0) break;
      size = size * 16 + digit;
    }
    if (i === at || i - at > 12 || i + 1 >= bytes || buffer[i] !== 13 || buffer[i + 1] !== 10) {
      return false;
    }
    this.remaining = size;
    this.state = size === 0 ? State.Trailers : State.ChunkData;
    this.sizeLineEnd = i + 2;
    return true;
  }

  /** One chunk-size line, chunk end or trailer line; false when the connection is gone. */
  private line(request: Controller, line: string): boolean {
    if (this.state === State.ChunkEnd) {
      if (line !== '') return this.protocolError('HPE_STRICT', 'Expected CRLF after chunk');
      this.state = State.ChunkSize;
      return true;
    }
    if (this.state === State.Trailers) {
      if (line === '') this.complete(request);
      return true;
    }
    const match = /^([0-9A-Fa-f]{1,12})[\t ]*(?:;.*)?$/.exec(line);
    if (!match)
      return this.protocolError('HPE_INVALID_CHUNK_SIZE', 'Invalid character in chunk size');
    this.remaining = Number.parseInt(match[1], 16);
    this.state = this.remaining === 0 ? State.Trailers : State.ChunkData;
    return true;
  }

  /** Parses a complete response head; false when the connection is gone. */
  private startResponse(request: Controller, head: string): boolean {
    const lines = head.split(/\r?\n/);
    const status = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0]);
    if (!status) return this.protocolError('HPE_INVALID_CONSTANT', 'Expected HTTP/');
    const http10 = status[1] === '0';
    const code = Number(status[2]);
    const headers: IncomingHttpHeaders = {};
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      if (line === '') continue;
      const colon = line.indexOf(':');
      const name = colon > 0 ? line.slice(0, colon) : '';
      if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
        return this.protocolError('HPE_INVALID_HEADER_TOKEN', 'Invalid header token');
      }
      const key = name.toLowerCase();
      const value = line.slice(colon + 1).trim();
      // Own keys only: a server's `Constructor:` header is its own, not Object's function (a
      // null-prototype object, as node:http's, costs twice as much per response).
      const previous = Object.hasOwn(headers, key) ? headers[key] : undefined;
      if (previous === undefined) headers[key] = value;
      else if (Array.isArray(previous)) previous.push(value);
      else headers[key] = [previous, value];
    }
    if (code >= 100 && code < 200) {
      // 1xx (100 Continue, 103 Early Hints): informational; the answer follows. 101 would
      // switch protocols, which nothing here asked for.
      if (code === 101) return this.protocolError('HPE_INVALID_CONSTANT', 'Unexpected upgrade');
      return true;
    }
    const connection = headerList(headers.connection);
    const close = connection.includes('close');
    this.keepAlive = http10 ? !close && connection.includes('keep-alive') : !close;
    const hint = /timeout=(\d+)/i.exec(String(headers['keep-alive'] ?? ''));
    if (hint) {
      // undici's rule (client-h1.js): the server's idle limit less a margin for a close in
      // flight; nothing left, no reuse.
      const serverMs = Number(hint[1]) * 1000 - KEEP_ALIVE_MARGIN_MS;
      this.idleTimeoutMs = Math.min(this.pool.options.keepAliveTimeoutMs, serverMs);
      if (this.idleTimeoutMs <= 0) this.keepAlive = false;
    }
    const codings = headerList(headers['transfer-encoding']);
    const length = headers['content-length'];
    if (code === 204 || code === 304) {
      this.state = State.Length;
      this.remaining = 0;
    } else if (codings.length > 0) {
      if (codings[codings.length - 1] === 'chunked') this.state = State.ChunkSize;
      else {
        this.state = State.UntilClose;
        this.keepAlive = false;
      }
      // Both framings at once is a smuggling pattern: never reuse such a connection.
      if (length !== undefined) this.keepAlive = false;
    } else if (length !== undefined) {
      const values = (Array.isArray(length) ? length : [length]).flatMap((v) => v.split(','));
      const first = values[0].trim();
      if (!/^\d{1,15}$/.test(first) || values.some((v) => v.trim() !== first)) {
        return this.protocolError('HPE_INVALID_CONTENT_LENGTH', 'Invalid content-length');
      }
      this.state = State.Length;
      this.remaining = Number(first);
    } else {
      this.state = State.UntilClose;
      this.keepAlive = false;
    }
    request.handler.onResponseStart?.(request, code, headers, status[3] ?? '');
    // The handler may have aborted the request (an encoding it cannot read).
    if (this.request !== request) return false;
    if (this.state === State.Length && this.remaining === 0) this.complete(request);
    return true;
  }

  private complete(request: Controller): void {
    this.state = State.Done;
    this.detach(request);
    request.handler.onResponseEnd?.(request, {});
  }

  private detach(request: Controller): void {
    this.request = undefined;
    request.connection = undefined;
  }

  /** The server ended its side: the end of a close-delimited body, else a cut. */
  private ended(): void {
    // What came before the end is parsed first; the end is a read of its own (ReadTracker).
    this.pool.flushReads();
    const request = this.request;
    this.pool.stampRead();
    if (request && this.state === State.UntilClose) this.complete(request);
    this.keepAlive = false;
    this.drop();
  }

  private protocolError(code: string, message: string): false {
    this.drop(new H1Error(code, `Parse Error: ${message}`));
    return false;
  }

  /** The connection failed or closed: its request, if any, fails with `err`. */
  private fail(err: Error): void {
    const request = this.request;
    if (!request) return;
    this.detach(request);
    request.handler.onResponseError?.(request, err);
  }
}

/** The index after a CRLF at `at` (whole in this read), or -1. */
function chunkEnd(buffer: Buffer, at: number, bytes: number): number {
  return at + 1 < bytes && buffer[at] === 13 && buffer[at + 1] === 10 ? at + 2 : -1;
}

/**
 * The end of a response head in `text` (after its blank line), or -1. RFC 9112 section 2.2 lets
 * a bare LF end a line, so the head ends at the first empty line however its line ends are
 * spelt: LF, an optional CR, LF (CRLF CRLF, LF LF, LF CRLF, CRLF LF).
 */
function headEnd(text: string): number {
  for (let lf = text.indexOf('\n'); lf >= 0; lf = text.indexOf('\n', lf + 1)) {
    const next = text.charCodeAt(lf + 1);
    if (next === 10) return lf + 2;
    if (next === 13 && text.charCodeAt(lf + 2) === 10) return lf + 3;
  }
  return -1;
}

/** A comma-separated header's tokens, lower-cased. */
function headerList(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const text = Array.isArray(value) ? value.join(',') : value;
  return text
    .toLowerCase()
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
}

/**
 * Requests waiting for a connection, first in first out. Not an array's shift(): past some
 * 16,000 elements V8 moves every element on each shift (a backing store in large-object space is
 * not trimmed in place), so draining 64,000 requests queued behind a stalled server took half a
 * second of the event loop. A withdrawn request leaves a hole, skipped when reached: withdrawing
 * is O(1) too.
 */
class Waiting {
  /** Requests waiting, holes not counted. */
  length = 0;
  private items: (Controller | undefined)[] = [];
  /** The index in `items` of the next to take. */
  private head = 0;
  /** Slots dropped off the front of `items` so far: a request's place less this is its index. */
  private dropped = 0;

  push(request: Controller): void {
    request.waitingIn = this;
    request.waitingAt = this.dropped + this.items.length;
    this.items.push(request);
    this.length++;
  }

  shift(): Controller | undefined {
    while (this.head < this.items.length) {
      const request = this.items[this.head];
      this.items[this.head++] = undefined;
      if (request) {
        request.waitingIn = undefined;
        this.length--;
        this.trim();
        return request;
      }
    }
    this.trim();
    return undefined;
  }

  remove(request: Controller): void {
    this.items[request.waitingAt - this.dropped] = undefined;
    request.waitingIn = undefined;
    this.length--;
    this.trim();
  }

  /** Drops the taken slots once they are half the array: each slot is copied about once. */
  private trim(): void {
    if (this.length === 0) {
      this.dropped += this.items.length;
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.dropped += this.head;
      this.head = 0;
    }
  }
}

/** See the file's head comment. */
export class H1Pool {
  private readonly hostname: string;
  private readonly port: number;
  private readonly hostHeader: string;
  /** What goes before a request's path on its request line: the origin through a proxy. */
  private readonly targetPrefix: string;
  /** Header lines every request carries: Proxy-Authorization through a proxy that wants it. */
  private readonly extraHeaders: string;
  private readonly all = new Set<Connection>();
  private readonly free: Connection[] = [];
  private readonly queue = new Waiting();
  /** Requests waiting for a new connection (Options.freshConnection). */
  private readonly freshQueue = new Waiting();
  private destroyed = false;
  private connecting = 0;
  /** Socket reads so far, over all connections: each read's callbacks see one number (ReadTracker). */
  reads = 0;
  /** When the read being parsed arrived (`performance.now()`, ms): its stamp (ReadTracker). */
  readAtMs = 0;
  /**
   * Reads wait for the end of the poll phase to be parsed: every socket ready in one wake is read
   * and stamped first, then parsed in order, so a read's stamp never waits for the parsing of
   * the reads before it (issue 51: at 256 streams that wait was most of the late stamps). Their
   * bytes are copied here, as the next read reuses READ_BUFFER.
   */
  private pending = Buffer.allocUnsafe(PENDING_START_BYTES);
  private pendingBytes = 0;
  private readonly pendingReads: Connection[] = [];
  /** Per pending read: its end in `pending`, then its arrival (ms). */
  private readonly pendingMarks: number[] = [];
  private flushing = false;
  private readonly flushSoon = () => this.flushReads();
  /** The set-up timings of the connections `warm` opened, before the run's clock started. */
  readonly preopened: ConnectionTiming[] = [];

  constructor(
    origin: string,
    readonly options: H1PoolOptions,
  ) {
    const url = new URL(origin);
    if (url.protocol !== 'http:') throw new Error(`H1Pool speaks http:, not ${url.protocol}`);
    const proxy = options.proxy;
    this.hostname = proxy ? proxy.host : url.hostname.replace(/^\[(.*)\]$/, '$1');
    this.port = proxy ? proxy.port : Number(url.port || 80);
    this.hostHeader = url.host;
    this.targetPrefix = proxy ? url.origin : '';
    this.extraHeaders = proxy?.authorization
      ? `proxy-authorization: ${proxy.authorization}\r\n`
      : '';
  }

  /** undici's dispatch: `handler` hears of the request from onRequestStart on. */
  dispatch(options: Options, handler: H1Handler): boolean {
    if (this.destroyed) throw new H1Error('UND_ERR_DESTROYED', 'The client is destroyed');
    // Refuse what undici refuses, before anything is queued.
    const { head, body } = this.requestHead(options);
    const request = new Controller(head, body, handler, this);
    if (options.freshConnection) {
      this.freshQueue.push(request);
      this.grow();
      return true;
    }
    // One the server is closing (its 'close' yet to come) refuses, and is dropped from the list.
    for (let connection = this.free.pop(); connection; connection = this.free.pop()) {
      if (!connection.send(request)) continue;
      if (!connection.request) this.released(connection);
      return true;
    }
    this.queue.push(request);
    this.grow();
    return true;
  }

  /**
   * Opens connections until `count` are open (or the limit), and resolves once each has
   * connected or failed: a run opens its pool before its clock starts, so that its first wave
   * of requests does not measure the client's own connection storm. Returns the connections open.
   */
  async warm(count: number): Promise<number> {
    const limit = Math.min(count, this.options.connections ?? count);
    const opening: Promise<void>[] = [];
    while (this.all.size < limit) {
      const connection = this.open();
      connection.timing.preopened = true;
      this.preopened.push(connection.timing);
      opening.push(
        new Promise<void>((resolve) => {
          connection.socket.once('connect', () => resolve());
          connection.socket.once('close', () => resolve());
        }),
      );
    }
    await Promise.all(opening);
    return this.free.length;
  }

  /** Counts the read about to be parsed and stamps it: arrived at `atMs`, by default now. */
  stampRead(atMs = performance.now()): void {
    this.reads++;
    this.readAtMs = atMs;
  }

  /** Holds a socket read until the poll phase ends (pending above). */
  defer(connection: Connection, buffer: Buffer, bytes: number): void {
    const atMs = performance.now();
    // Past the cap, what waits is parsed now; this read (64 KiB at most) then waits alone.
    if (this.pendingBytes + bytes > PENDING_MAX_BYTES) this.flushReads();
    if (this.pendingBytes + bytes > this.pending.length) {
      const grown = Buffer.allocUnsafe(
        Math.min(PENDING_MAX_BYTES, 2 ** Math.ceil(Math.log2(this.pendingBytes + bytes))),
      );
      this.pending.copy(grown, 0, 0, this.pendingBytes);
      this.pending = grown;
    }
    buffer.copy(this.pending, this.pendingBytes, 0, bytes);
    this.pendingBytes += bytes;
    if (this.pendingReads.length === 0 && !this.flushing) setImmediate(this.flushSoon);
    this.pendingReads.push(connection);
    this.pendingMarks.push(this.pendingBytes, atMs);
  }

  /** Parses the reads waiting, in the order they came. */
  flushReads(): void {
    if (this.flushing) return;
    this.flushing = true;
    try {
      const reads = this.pendingReads;
      const marks = this.pendingMarks;
      let start = 0;
      for (let i = 0; i < reads.length; i++) {
        const end = marks[2 * i];
        this.stampRead(marks[2 * i + 1]);
        const connection = reads[i];
        if (!connection.dropped) connection.read(this.pending, start, end);
        start = end;
      }
    } finally {
      this.pendingReads.length = 0;
      this.pendingMarks.length = 0;
      this.pendingBytes = 0;
      this.flushing = false;
    }
  }

  /** Closes every connection; requests still waiting or in flight fail. */
  async destroy(): Promise<void> {
    this.destroyed = true;
    const error = new H1Error('UND_ERR_DESTROYED', 'The client is destroyed');
    for (const queue of [this.freshQueue, this.queue]) {
      for (let request = queue.shift(); request; request = queue.shift()) {
        request.handler.onResponseError?.(request, error);
      }
    }
    const closing = [...this.all].map(
      (c) => new Promise<void>((resolve) => c.socket.once('close', () => resolve())),
    );
    for (const connection of this.all) connection.drop();
    await Promise.all(closing);
  }

  /** The request's head (and body) as written on the wire; throws what undici would. */
  requestHead(options: Options): { head: string; body: string | undefined } {
    const body = options.body;
    let head = `${options.method} ${this.targetPrefix}${options.path} HTTP/1.1\r\n${this.extraHeaders}`;
    let host = false;
    const headers = (options.headers ?? {}) as Record<string, string>;
    for (const name in headers) {
      const key = name.toLowerCase();
      if (CONNECTION_HEADERS.has(key) || key === 'connection' || key === 'content-length') {
        throw new H1Error('UND_ERR_INVALID_ARG', `invalid ${key} header`);
      }
      if (key === 'host') host = true;
      head += `${name}: ${headers[name]}\r\n`;
    }
    if (!host) head += `host: ${this.hostHeader}\r\n`;
    if (body !== undefined) head += `content-length: ${Buffer.byteLength(body)}\r\n`;
    return { head: `${head}connection: keep-alive\r\n\r\n`, body };
  }

  /**
   * A connection is free: it takes the next waiting request, or waits. A loop, not a recursion:
   * requests that timed out while queued are aborted by their handlers in onRequestStart, each
   * leaving the connection free for the next, and thousands of them would overflow the stack.
   */
  released(connection: Connection): void {
    while (connection.usable) {
      const next = this.queue.shift();
      if (!next) {
        connection.idle();
        this.free.push(connection);
        return;
      }
      connection.send(next);
      if (connection.request) return;
    }
  }

  connected(connection: Connection): void {
    this.connecting--;
    while (connection.usable) {
      const fresh = this.freshQueue.shift();
      if (!fresh) {
        this.released(connection);
        return;
      }
      connection.send(fresh);
      if (connection.request) return;
    }
  }

  /** An idle connection the client itself closes: out of the free list before its 'close'. */
  closing(connection: Connection): void {
    const i = this.free.indexOf(connection);
    if (i >= 0) this.free.splice(i, 1);
  }

  /** A request aborted while it waited for a connection: it leaves the queue, failed. */
  withdraw(request: Controller, reason: Error): void {
    request.waitingIn?.remove(request);
    request.handler.onResponseError?.(request, reason);
  }

  closed(connection: Connection): void {
    if (!connection.connected) this.connecting--;
    this.all.delete(connection);
    const i = this.free.indexOf(connection);
    if (i >= 0) this.free.splice(i, 1);
    if (!connection.connected && connection.served === 0) {
      // It never connected: the request that waited for it fails as the connect did.
      this.failWaiting(connection);
    }
    this.grow();
  }

  private failWaiting(connection: Connection): void {
    const request = this.freshQueue.shift() ?? this.queue.shift();
    if (!request) return;
    const errored = (connection.socket as Socket & { errored?: Error | null }).errored;
    const proxy = this.options.proxy;
    // Through a proxy, the connection that never came is the proxy's failure, not the server's.
    const reason = errored
      ? proxy
        ? proxyUnreachable(proxy, errored)
        : errored
      : new H1Error('UND_ERR_SOCKET', 'connection closed before it was established');
    // As with undici, a request whose connection never came was never started.
    request.handler.onResponseError?.(request, reason);
  }

  /** Opens connections for waiting requests, up to the limit. */
  private grow(): void {
    if (this.destroyed) return;
    const limit = this.options.connections ?? Number.POSITIVE_INFINITY;
    // At the limit, an idle connection makes room for a request that needs a new one.
    if (this.freshQueue.length > this.connecting && this.all.size >= limit) {
      this.free.shift()?.drop();
    }
    const waiting = () => this.queue.length + this.freshQueue.length;
    while (waiting() > this.connecting && this.all.size < limit) this.open();
  }

  private open(): Connection {
    const connection = new Connection(this, this.port, this.hostname);
    this.all.add(connection);
    this.connecting++;
    return connection;
  }
}
