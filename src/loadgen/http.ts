import { subscribe } from 'node:diagnostics_channel';
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { errorBodyMessage } from '../backends/decoder.js';
import { headerProblem, secretValues, withApiKey, withoutSecrets } from '../backends/request.js';
import {
  clip,
  type DecodedStream,
  type RecordedRequest,
  type StreamFault,
  streamRecord,
} from '../backends/timeline.js';
import type {
  Answer,
  Backend,
  BackendOptions,
  RequestSpec,
  StreamDecoder,
} from '../backends/types.js';
import { describeError } from '../errors.js';
import {
  PROXY_CREDENTIALS_FIX,
  PROXY_ERROR_CODE,
  PROXY_FIX,
  type ProxySettings,
  proxyFor,
} from '../proxy.js';
import type { RequestError, RequestRecord } from '../record.js';
import { type TlsMaterial, tlsAlertOf, tlsFailure } from '../tls.js';
import { BodyText } from './bodyText.js';
import type { RunClock } from './clock.js';
import type { H1Handler } from './h1.js';
import type { Http2Mode, WireProtocol } from './h2.js';
import { bodyEncoding, Inflater } from './inflate.js';
import { type ConnectionTiming, splitQueueDelay, timingOf } from './phases.js';

/** Where and how requests go. */
export interface TargetConfig extends BackendOptions {
  /** The server's wire protocol. */
  backend: Backend;
  /** Base URL of the server, without the `/v1` route. */
  baseUrl: string;
  /** Extra request headers (the API key goes in `apiKey`, never here, so it can be redacted). */
  headers: Record<string, string>;
  apiKey?: string;
  /** Whole-request limit in ms: headers, prefill and the full stream. */
  timeoutMs: number;
  /** https:// only: a private CA, a client certificate, no verification (src/tls.ts). */
  tls?: TlsMaterial;
  /** `--http2`: absent is auto. */
  http2?: Http2Mode;
  /** The protocol chosen for the run (chooseProtocol), once; absent: chosen when the pool opens. */
  protocol?: WireProtocol;
  /** The proxy to go through (src/proxy.ts); absent: direct. */
  proxy?: ProxySettings;
}

/**
 * Stamps network reads and counts token events, and those that arrived in the same read as
 * their request's previous token event. Everything in one read arrived together, so it takes
 * one timestamp. A pool that counts its socket reads (`H1Pool.reads`) says which read a callback
 * belongs to; for any other (undici's), a client calls back once per HTTP chunk, not per socket
 * read, so a "read" is recognised as one synchronous run of callbacks: the epoch changes
 * whenever the microtask queue drains, which Node does after every I/O callback. The counted
 * way allocates nothing: queueMicrotask allocated some 200 bytes a read, a tenth of the
 * measuring thread's garbage at 25,000 events/s (issue 29).
 */
export class ReadTracker {
  tokenEvents = 0;
  coalescedTokenEvents = 0;
  private epoch = 0;
  private open = false;
  private stampedEpoch = -1;
  private atUs = 0;
  private readonly close = () => {
    this.open = false;
  };

  constructor(private readonly counted?: { readonly reads: number; readonly readAtMs: number }) {}

  /** The current read's arrival time on `clock`: the pool's stamp, else the clock once per read. */
  nowUs(clock: RunClock): number {
    const epoch = this.currentRead();
    if (this.stampedEpoch !== epoch) {
      this.stampedEpoch = epoch;
      this.atUs = this.counted ? clock.usAt(this.counted.readAtMs) : clock.nowUs();
    }
    return this.atUs;
  }

  /** The current read's number. */
  currentRead(): number {
    if (this.counted) return this.counted.reads;
    if (!this.open) {
      this.epoch++;
      this.open = true;
      queueMicrotask(this.close);
    }
    return this.epoch;
  }
}

/**
 * What sends requests: undici's Pool (https), H1Pool (plain HTTP/1.1) or H2Pool (HTTP/2), which
 * all dispatch.
 */
export interface RequestDispatcher {
  dispatch(
    options: Pick<Dispatcher.DispatchOptions, 'path' | 'method' | 'headers'> & {
      body: string;
      headersTimeout?: number;
      bodyTimeout?: number;
      /** H1Pool: not on an idle connection (undici ignores it). */
      freshConnection?: boolean;
    },
    handler: Dispatcher.DispatchHandler,
  ): boolean;
}

/** The part of a request the caller knows before sending it. */
export interface PendingRequest extends RecordedRequest {
  spec: RequestSpec;
  /** Set when the request finishes, if `spec.captureAnswer` asked to keep the answer. */
  answer?: Answer;
}

const MAX_ERROR_BODY_BYTES = 64 * 1024;
/**
 * A server that ignored `stream: true` answers with one JSON body, read whole before parsing.
 * The longest real answers (hundreds of thousands of tokens) are a few MiB; past this the body
 * is not an answer, and reading on would only grow the client's memory.
 */
const MAX_JSON_BODY_CHARS = 64 * 2 ** 20;

/**
 * After an answer is whole (`[DONE]`, a final message), the rest of its body (the chunked
 * framing's last bytes, trailers) has this long, and this many bytes, to end; past either the
 * connection is dropped. Nothing after the answer is read into the decoder: a server that went
 * on writing grew the client's memory until the process died, and one whose body never ended
 * held its connection (and the requests waiting for it) until the run ended.
 */
const SETTLED_BODY_MS = 1000;
const SETTLED_BODY_BYTES = 64 * 1024;

/** Secrets a target's server could echo (`secretValues`), worked out once per target. */
const targetSecrets = new WeakMap<TargetConfig, string[]>();

class Cancelled extends Error {
  constructor(readonly kind: 'timeout' | 'cancelled' | 'fault') {
    super(kind);
  }
}

/**
 * Whether a request went out on a connection that had carried an earlier one. undici does not
 * tell a handler its socket, but publishes it on `undici:client:sendHeaders` in the same
 * synchronous step in which it calls the handler's onRequestStart (client-h1.js writeH1), so
 * the attempt starting then is the one whose headers are sent.
 */
const usedSockets = new WeakSet<object>();
let startingAttempt: { reused: boolean; opened: ConnectionTiming | undefined } | undefined;
subscribe('undici:client:sendHeaders', (message) => {
  const { socket } = message as { socket: object };
  if (startingAttempt) {
    const reused = usedSockets.has(socket);
    startingAttempt.reused = reused;
    startingAttempt.opened = reused ? undefined : timingOf(socket);
  }
  startingAttempt = undefined;
  usedSockets.add(socket);
});

export function requestHeaders(target: TargetConfig, id: number): Record<string, string> {
  const headers = {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    'x-request-id': String(id),
    ...target.headers,
  };
  return withApiKey(headers, target.apiKey);
}

/**
 * A run's requests in flight, and the clock of their limits: one timer for them all sweeps the
 * deadlines, where a timer each (and another for a settled answer's body) cost a Timeout, its
 * arguments and boxed times, 250 bytes a request held for its whole life (issue 29). A limit is
 * met at most a sweep late: a tenth of it, and never more than 100 ms.
 */
export class InFlight {
  private readonly exchanges = new Set<Exchange>();
  private timer: NodeJS.Timeout | undefined;
  private sweepMs = MAX_SWEEP_MS;

  constructor(private readonly clock: RunClock) {}

  /** Ctrl-C after the grace period: every request in flight ends as cancelled. */
  cancelAll(): void {
    for (const exchange of this.exchanges) exchange.cancel();
  }

  add(exchange: Exchange, limitMs: number): void {
    this.exchanges.add(exchange);
    const sweepMs = Math.max(1, Math.min(MAX_SWEEP_MS, limitMs / 10));
    if (this.timer && sweepMs < this.sweepMs) this.stop();
    if (!this.timer) {
      this.sweepMs = sweepMs;
      this.timer = setInterval(sweep, sweepMs, this);
    }
  }

  delete(exchange: Exchange): void {
    this.exchanges.delete(exchange);
    if (this.exchanges.size === 0) this.stop();
  }

  /** Ends the sweeps (the run is over; a request left is the pool's to end). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  sweep(): void {
    const nowUs = this.clock.nowUs();
    for (const exchange of this.exchanges) exchange.expire(nowUs);
  }
}

const MAX_SWEEP_MS = 100;

function sweep(inFlight: InFlight): void {
  inFlight.sweep();
}

/** Where a run's requests go, and what they are timed and tracked by. */
export interface RequestRoute {
  pool: RequestDispatcher;
  target: TargetConfig;
  /** The server URL's path prefix (splitServerUrl), before each request's route. */
  prefix: string;
  clock: RunClock;
  reads: ReadTracker;
  /** The requests in flight: each sits here until it has ended. */
  inFlight: InFlight;
}

/**
 * Sends one streaming request and resolves with its raw record. Never rejects: every failure
 * becomes a record with a categorised error.
 */
export function executeRequest(
  route: RequestRoute,
  pending: PendingRequest,
): Promise<RequestRecord> {
  return new Promise((resolve) => startRequest(route, pending, resolve));
}

/**
 * executeRequest with a callback, called once with the record (synchronously where the request
 * cannot be sent): a caller that reuses its callback keeps no promise per request in flight.
 */
export function startRequest(
  route: RequestRoute,
  pending: PendingRequest,
  done: (record: RequestRecord) => void,
): void {
  const { pool, target, prefix, clock, reads, inFlight } = route;
  let path: string;
  let body: string;
  try {
    ({ path, body } = target.backend.request(pending.spec, target));
  } catch (err) {
    // A body that cannot be built (a history past V8's string limit): this request's failure.
    done(unsent(pending, clock, describeError(err)));
    return;
  }
  // undici throws on such headers from inside its pool, where the throw also leaves a
  // connection slot waiting forever for a drain: refuse before anything is dispatched.
  const problem = headerProblem(target.headers, target.apiKey);
  if (problem) done(unsent(pending, clock, problem));
  else new Exchange(pool, target, prefix + path, pending, clock, reads, inFlight, done).send(body);
}

/** The record of a request that could not be sent, and why. */
function unsent(pending: PendingRequest, clock: RunClock, why: string): RequestRecord {
  const atUs = clock.nowUs();
  const error: RequestError = { kind: 'connect', message: `the request cannot be sent: ${why}` };
  return streamRecord(pending, atUs, undefined, atUs, undefined, undefined, error);
}

/**
 * One request in flight: the pool's handler, its state and its timers, in one object whose
 * methods are shared. It lives as long as its request (1.3 s at an engine's pace, longer than
 * two young-generation collections), so whatever it holds is copied by each collection it
 * survives: a closure per callback, a context per closure and a guard per callback, with the body
 * and heads kept, held 11.5 KB per request in flight, 8.3 KB since (issue 29). It keeps neither
 * the request body (rebuilt for the one resend there may be) nor the response head.
 */
class Exchange implements H1Handler {
  /** Until the pool hands the request to a connected socket, "sent" means "dispatched". */
  private sentAtUs: number;
  private headersAtUs: number | undefined;
  private status: number | undefined;
  private controller: Dispatcher.DispatchController | undefined;
  private abortReason: Cancelled | undefined;
  private decoder: StreamDecoder | undefined;
  private jsonBody: string | undefined;
  private errorBody: string | undefined;
  private bodyText: BodyText | undefined;
  private settled = false;
  private lastTokenRead = -1;
  private contentType = '';
  private location: string | undefined;
  private inflater: Inflater | undefined;
  private resent = false;
  /** The current attempt went out on a connection that had carried an earlier request. */
  reused = false;
  /** The current attempt went out as the first request of this connection (its set-up timing). */
  opened: ConnectionTiming | undefined;
  /** When the request was handed to the pool (queueDelay's split, src/loadgen/phases.ts). */
  private readonly dispatchedAtUs: number;
  /** The body ended (or failed): nothing more will arrive for this request. */
  private bodyOver = false;
  private settledBytes = 0;
  /**
   * On the run's clock: until the answer is whole, when the request times out; after, when a
   * body still going on is dropped.
   */
  private deadlineUs: number;

  constructor(
    private readonly pool: RequestDispatcher,
    private readonly target: TargetConfig,
    private readonly path: string,
    private readonly pending: PendingRequest,
    private readonly clock: RunClock,
    private readonly reads: ReadTracker,
    private readonly inFlight: InFlight,
    private readonly resolve: (record: RequestRecord) => void,
  ) {
    // Connection setup and pool waits count as client-side queueDelay, not as TTFT.
    this.sentAtUs = clock.nowUs();
    this.dispatchedAtUs = this.sentAtUs;
    this.deadlineUs = this.sentAtUs + target.timeoutMs * 1000;
    inFlight.add(this, target.timeoutMs);
  }

  /** The sweep: a limit passed by `nowUs` ends the request, or drops a settled body's rest. */
  expire(nowUs: number): void {
    if (nowUs < this.deadlineUs) return;
    if (this.settled) this.dropConnection();
    else this.abort(new Cancelled('timeout'));
  }

  send(body: string): void {
    try {
      this.pool.dispatch(
        {
          path: this.path,
          method: 'POST',
          body,
          headers: requestHeaders(this.target, this.pending.id),
          headersTimeout: this.target.timeoutMs,
          bodyTimeout: this.target.timeoutMs,
          freshConnection: this.resent,
        },
        this,
      );
    } catch (err) {
      this.finish(transportError(err as Error, false), undefined);
    }
  }

  cancel(): void {
    this.abort(new Cancelled('cancelled'));
  }

  abort(reason: Cancelled): void {
    if (this.abortReason || this.settled) return;
    this.abortReason = reason;
    if (this.controller) this.controller.abort(reason);
    // Not on a connection yet (waiting in the pool, or never to get one): nothing to abort,
    // so the record ends here; onRequestStart aborts the request if it ever starts.
    else this.finish(cancelError(reason.kind, this.target.timeoutMs), undefined);
  }

  // The pool's callbacks. A throw while reading the answer (a bug, a limit of the runtime) is
  // this request's failure: uncaught in a socket callback it would end the process without a
  // summary.

  onRequestStart(c: Dispatcher.DispatchController): void {
    try {
      this.sentAtUs = this.clock.nowUs();
      // The limit runs from sending, as documented; waiting for a connection is not the
      // server's time (the deadline set at dispatch still bounds a connection that never comes).
      this.deadlineUs = this.sentAtUs + this.target.timeoutMs * 1000;
      this.controller = c;
      if (this.abortReason) c.abort(this.abortReason);
      else {
        // H1Pool says whether the connection was reused; undici says it on a channel.
        const { reused, opened } = c as { reused?: boolean; opened?: ConnectionTiming };
        if (reused === undefined) {
          this.opened = undefined;
          startingAttempt = this;
        } else {
          this.reused = reused;
          this.opened = opened;
        }
      }
    } catch (err) {
      this.readFailed(err);
    }
  }

  onResponseStart(
    c: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    try {
      this.startResponse(c, statusCode, headers);
    } catch (err) {
      this.readFailed(err);
    }
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.onResponseBytes(c, chunk, 0, chunk.length);
  }

  /** The body's bytes `buffer[start, end)`; H1Pool hands them so, with no view made. */
  onResponseBytes(
    _c: Dispatcher.DispatchController,
    buffer: Buffer,
    start: number,
    end: number,
  ): void {
    try {
      if (this.settledRead(end - start)) return;
      const atUs = this.reads.nowUs(this.clock);
      // The bytes may be H1Pool's read buffer: zlib, which keeps them, gets a copy.
      if (this.inflater) this.inflater.write(Buffer.from(buffer.subarray(start, end)), atUs);
      else this.takeText((this.bodyText as BodyText).decodeRange(buffer, start, end), atUs);
    } catch (err) {
      this.readFailed(err);
    }
  }

  onResponseEnd(): void {
    try {
      this.bodyOver = true;
      if (this.settled) {
        this.inFlight.delete(this);
        return;
      }
      const atUs = this.reads.nowUs(this.clock);
      if (this.inflater) this.inflater.end(() => this.guarded(() => this.end(atUs)));
      else this.end(atUs);
    } catch (err) {
      this.readFailed(err);
    }
  }

  // undici calls it with no controller when the connection never came (a refused connect, a
  // failed TLS handshake): the request was never started.
  onResponseError(c: Dispatcher.DispatchController | undefined, err: Error): void {
    try {
      this.responseError(c, err);
    } catch (caught) {
      this.readFailed(caught);
    }
  }

  private guarded(f: () => void): void {
    try {
      f();
    } catch (err) {
      this.readFailed(err);
    }
  }

  private readFailed(err: unknown): void {
    this.finish(
      { kind: 'bad_stream', message: `the response could not be read: ${describeError(err)}` },
      undefined,
    );
    this.controller?.abort(new Cancelled('fault'));
  }

  private startResponse(
    c: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.headersAtUs = this.reads.nowUs(this.clock);
    this.status = statusCode;
    this.bodyText = new BodyText();
    const encoding = bodyEncoding(headerText(headers['content-encoding']));
    if (typeof encoding === 'object') {
      this.finish(
        {
          kind: 'bad_stream',
          message: `the response is ${encoding.unsupported}-encoded, which infergauge cannot decode (it asks for no encoding)`,
        },
        undefined,
      );
      c.abort(new Cancelled('fault'));
      return;
    }
    if (encoding) {
      this.inflater = new Inflater(
        encoding,
        (chunk, atUs) =>
          this.guarded(() => this.takeText((this.bodyText as BodyText).decode(chunk), atUs)),
        (err) => {
          this.finish(
            {
              kind: 'bad_stream',
              message: `the ${encoding}-encoded body is corrupt: ${err.message}`,
            },
            this.decoder?.finish(),
          );
          c.abort(new Cancelled('fault'));
        },
      );
    }
    if (statusCode < 200 || statusCode >= 300) {
      this.errorBody = '';
      this.location = headerText(headers.location);
      return;
    }
    // A copy: a slice would keep the whole head alive as long as the request.
    const contentType = String(headers['content-type'] ?? '');
    this.contentType = contentType === EVENT_STREAM ? EVENT_STREAM : copyOf(contentType);
    if (this.contentType.includes('application/json')) this.jsonBody = '';
    else this.decoder = this.target.backend.decoder(this.sentAtUs, this.target, this.pending.spec);
  }

  /** Bytes after a whole answer are counted, not read; true when the answer was whole. */
  private settledRead(bytes: number): boolean {
    if (!this.settled) return false;
    this.settledBytes += bytes;
    if (this.settledBytes > SETTLED_BODY_BYTES) this.dropConnection();
    return true;
  }

  /** Drops the connection of a request whose answer is whole but whose body goes on. */
  dropConnection(): void {
    this.inFlight.delete(this);
    if (!this.bodyOver) this.controller?.abort(new Cancelled('fault'));
    this.bodyOver = true;
  }

  private finish(error: RequestError | undefined, decoded: DecodedStream | undefined): void {
    if (this.settled) return;
    this.settled = true;
    this.inflater?.destroy();
    const sentAtUs = this.sentAtUs;
    const endAtUs = decoded?.doneUs !== undefined ? sentAtUs + decoded.doneUs : this.clock.nowUs();
    const record = streamRecord(
      this.pending,
      sentAtUs,
      this.headersAtUs,
      endAtUs,
      this.status,
      decoded,
      error,
    );
    redactRecord(record, this.target);
    if (decoded?.answer) this.pending.answer = decoded.answer;
    if (this.resent) record.resent = true;
    // H2Pool says which session carried the stream (H1Pool and undici: one request a connection).
    const connection = (this.controller as { connectionId?: number } | undefined)?.connectionId;
    if (connection !== undefined) record.connectionId = connection;
    if (this.controller) {
      splitQueueDelay(
        record,
        this.pending.scheduledAtUs,
        this.dispatchedAtUs,
        sentAtUs,
        this.opened,
      );
    } else record.backlogMs = (this.dispatchedAtUs - this.pending.scheduledAtUs) / 1000;
    // The body's rest has SETTLED_BODY_MS to end; with no body left, the request is done.
    if (this.controller && !this.bodyOver) {
      this.deadlineUs = this.clock.nowUs() + SETTLED_BODY_MS * 1000;
    } else this.inFlight.delete(this);
    // What the body's rest may still need is the controller; the decoder's state goes now.
    this.decoder = undefined;
    this.bodyText = undefined;
    this.resolve(record);
  }

  private takeText(text: string, atUs: number): void {
    const decoder = this.decoder;
    if (decoder) {
      const tokenEvents = decoder.feed(text, atUs);
      if (tokenEvents > 0) {
        const reads = this.reads;
        const read = reads.currentRead();
        reads.tokenEvents += tokenEvents;
        reads.coalescedTokenEvents += tokenEvents - 1 + (read === this.lastTokenRead ? 1 : 0);
        this.lastTokenRead = read;
      }
      if (decoder.fault) this.abort(new Cancelled('fault'));
      // Everything needed has arrived; the response's own end is then ignored, and the
      // connection stays open for the next request.
      else if (decoder.done) this.finish(undefined, decoder.finish());
    } else if (this.errorBody !== undefined) {
      if (this.errorBody.length < MAX_ERROR_BODY_BYTES) this.errorBody += text;
    } else if (this.jsonBody !== undefined) {
      if (this.jsonBody.length + text.length <= MAX_JSON_BODY_CHARS) this.jsonBody += text;
      else {
        this.finish(
          {
            kind: 'bad_stream',
            message: `expected an event stream, got a JSON body of more than ${MAX_JSON_BODY_CHARS / 2 ** 20} MiB`,
          },
          undefined,
        );
        this.controller?.abort(new Cancelled('fault'));
      }
    }
  }

  /** The body is complete; `atUs` is when its last byte arrived. */
  private end(atUs: number): void {
    if (this.settled) return;
    const decoder = this.decoder;
    if (this.errorBody !== undefined) {
      this.finish(
        httpError(this.status as number, this.errorBody, this.location, this.path, this.target),
        undefined,
      );
    } else if (decoder) {
      decoder.end(atUs);
      const decoded = decoder.finish();
      if (decoder.fault) this.finish(decoder.fault, decoded);
      else if (decoder.eventCount === 0) {
        // A 200 with no event at all is a wrong route or a proxy page, not an empty answer.
        this.finish(
          {
            kind: 'bad_stream',
            message: `the response held no stream events (content-type ${this.contentType || 'none'})`,
          },
          decoded,
        );
      } else this.finish(undefined, decoded);
    } else if (this.jsonBody !== undefined) {
      const decoded = decodeJsonResponse(
        this.target,
        this.pending.spec,
        this.jsonBody,
        atUs - this.sentAtUs,
      );
      if ('kind' in decoded) this.finish(decoded, undefined);
      else this.finish(undefined, decoded);
    } else {
      this.finish(undefined, undefined);
    }
  }

  private responseError(c: Dispatcher.DispatchController | undefined, err: Error): void {
    this.bodyOver = true;
    if (this.settled) {
      this.inFlight.delete(this);
      return;
    }
    const decoder = this.decoder;
    const decoded = decoder?.finish();
    if (decoder?.fault) {
      this.finish(decoder.fault, decoded);
      return;
    }
    const reason = this.abortReason?.kind ?? (err instanceof Cancelled ? err.kind : undefined);
    if (reason === 'timeout' || reason === 'cancelled') {
      this.finish(cancelError(reason, this.target.timeoutMs), decoded);
      return;
    }
    // A kept-alive connection the server closed just as this request went out on it
    // (llama-server closes after every stream while advertising keep-alive): nothing was
    // answered, so send once more, as curl and browsers do. The lost time is queueDelay.
    // Only a reused connection: with one request per connection at a time it was idle, and
    // the close was the server's idle close; a reset on a fresh connection is the server's
    // answer to this request, a failure to report. Nor after any byte of an answer (H1Pool
    // says so of a 1xx): the server read the request, and a POST must not run twice.
    // undici calls back without a controller when the connection never came (its connector failed).
    const answered = (c as { answered?: boolean } | undefined)?.answered === true;
    if (
      !this.resent &&
      this.headersAtUs === undefined &&
      !answered &&
      this.reused &&
      isClosedSocket(err)
    ) {
      this.resent = true;
      this.controller = undefined;
      this.reused = false;
      // The body was not kept (see the class comment): built again, as it was the first time.
      this.send(this.target.backend.request(this.pending.spec, this.target).body);
      return;
    }
    this.finish(transportError(err, this.headersAtUs !== undefined), decoded);
  }
}

const EVENT_STREAM = 'text/event-stream';

/** A flat copy of a short string, so that it keeps no larger string alive (V8 slices do). */
function copyOf(text: string): string {
  return text.length < 13 ? text : Buffer.from(text, 'latin1').toString('latin1');
}

/**
 * Takes the secrets a server echoed (the API key, credential headers) out of the record's
 * server text: its error message and finish reason (docs/cli.md, "Secrets").
 */
function redactRecord(record: RequestRecord, target: TargetConfig): void {
  let secrets = targetSecrets.get(target);
  if (secrets === undefined) {
    secrets = secretValues(target.headers, target.apiKey);
    targetSecrets.set(target, secrets);
  }
  if (secrets.length === 0) return;
  if (record.error) record.error.message = withoutSecrets(record.error.message, secrets);
  if (record.finishReason !== undefined) {
    record.finishReason = withoutSecrets(record.finishReason, secrets);
  }
}

function cancelError(kind: Cancelled['kind'], timeoutMs: number): RequestError {
  return kind === 'timeout'
    ? { kind: 'timeout', message: `no complete response within ${timeoutMs} ms` }
    : { kind: 'cancelled', message: 'cancelled by the client' };
}

function httpError(
  status: number,
  body: string,
  location: string | undefined,
  path: string,
  target: TargetConfig,
): RequestError {
  if (status === 407) {
    // Only a proxy asks for proxy credentials (a forwarding proxy answers in the server's place).
    const route = proxyFor(target.baseUrl, target.proxy);
    return {
      kind: 'proxy',
      status,
      message: `HTTP 407 from the proxy${route ? ` ${route.shown}` : ''}: ${PROXY_CREDENTIALS_FIX}, or ${PROXY_FIX}`,
    };
  }
  if (status >= 300 && status < 400) {
    return {
      kind: 'redirect',
      status,
      message: `HTTP ${status} redirect to ${redirectTarget(location, path, target.baseUrl)}: infergauge does not follow redirects; use that URL`,
    };
  }
  // A forwarding proxy (http://; https:// is tunnelled) answers 502-504 in the server's place
  // when it cannot reach it; nothing in the answer says reliably which of the two sent it.
  const route =
    status >= 502 && status <= 504 && target.baseUrl.startsWith('http:')
      ? proxyFor(target.baseUrl, target.proxy)
      : undefined;
  return {
    kind: status >= 400 && status < 500 ? 'http_4xx' : 'http_5xx',
    status,
    message: `HTTP ${status}: ${errorBodyMessage(body)}${
      route
        ? ` (through the proxy ${route.shown}, which may have sent it; --no-proxy or NO_PROXY bypasses it)`
        : ''
    }`,
  };
}

/** One header's value as text (undici gives repeated headers as an array). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * A redirect's `Location`, made absolute against the request's URL and safe to print: the URL
 * parser drops or escapes control characters, credentials are removed, and it is clipped.
 */
function redirectTarget(location: string | undefined, path: string, baseUrl: string): string {
  if (location === undefined) return 'nowhere (no Location header)';
  try {
    const url = new URL(location, new URL(path, baseUrl));
    url.username = '';
    url.password = '';
    return clip(url.href, 200);
  } catch {
    return 'an unusable Location header';
  }
}

/** The peer closed or reset the socket (as opposed to refusing, timing out or a bad answer). */
function isClosedSocket(err: Error): boolean {
  const code = (err as { code?: string }).code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Categorises a transport failure into a stable error kind. */
function transportError(err: Error, afterHeaders: boolean): RequestError {
  const code = (err as { code?: string }).code ?? '';
  if (code === PROXY_ERROR_CODE) return { kind: 'proxy', message: err.message };
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return { kind: 'timeout', message: `${code}: ${err.message}` };
  }
  if (!afterHeaders && CONNECT_CODES.has(code)) {
    return { kind: 'connect', message: `${code}: ${err.message}` };
  }
  // A certificate or handshake failure, with the flag that fixes it (only https gets here).
  const tls = afterHeaders ? undefined : tlsFailure(tlsAlertOf(err) ?? err);
  if (tls) return { kind: 'tls', message: tls.message };
  const where = afterHeaders ? 'mid-stream' : 'before the response';
  return {
    kind: 'stream_broken',
    message: `connection failed ${where}: ${code ? `${code}: ` : ''}${err.message}`,
  };
}

/** A server that ignored `stream: true` and answered with one JSON body. */
function decodeJsonResponse(
  target: TargetConfig,
  spec: RequestSpec,
  body: string,
  atUs: number,
): DecodedStream | StreamFault {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { kind: 'bad_stream', message: 'expected an event stream, got unparsable JSON' };
  }
  if (!target.backend.decodeJson) {
    return { kind: 'bad_stream', message: 'expected an event stream, got one JSON body' };
  }
  return target.backend.decodeJson(parsed, atUs, target, spec);
}
