/**
 * The raw per-request record (docs/metrics.md, "The raw record"): the source of truth that flows from the
 * engine to disk (`records.jsonl`) and into every summary, view and report.
 *
 * All times are milliseconds on the run's monotonic clock (0 = run start), rounded to whole
 * microseconds so that a record read back from disk is identical to the one written.
 */

/**
 * Events one record may hold (backends/timeline.ts REQUEST_BOUNDS.maxEvents): the bound a request
 * is cut at when measured, and so what the records readers may expect of a line's length.
 */
export const MAX_REQUEST_EVENTS = 2 ** 20;

/** Stable error kinds; reports and tests rely on these strings. */
export const ERROR_KINDS = [
  'connect',
  /**
   * The TLS handshake failed: an unknown CA, an expired certificate, a name mismatch, a client
   * certificate refused; the message names the reason and the flag that fixes it.
   */
  'tls',
  'timeout',
  'http_4xx',
  'http_5xx',
  /** A 3xx answer (http to https, a moved route): the server is elsewhere, not failing. */
  'redirect',
  'stream_broken',
  /** The stream ended cleanly but without its protocol's end marker: the answer is cut short. */
  'truncated',
  'bad_stream',
  'cancelled',
  /**
   * The answer passed a bound on what one request may hold (events, captured text, one event's
   * size; docs/metrics.md, "Bounds"): the request was ended there, what came before it kept.
   */
  'too_large',
  /**
   * The proxy failed the request (src/proxy.ts): unreachable, refused a CONNECT tunnel,
   * or asked for credentials (407); the message names it and how to bypass it.
   */
  'proxy',
] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

export interface RequestError {
  kind: ErrorKind;
  message: string;
  /** HTTP status, when the server sent one. */
  status?: number;
}

/** Why a number the server sent was not used (docs/metrics.md, "The raw record"). */
export type CountProblemReason =
  /** Not a non-negative safe integer (negative, fractional, past 2^53, Infinity, not a number). */
  | 'not_a_count'
  /** More output tokens than the request allowed, or more than any context window holds. */
  | 'above_limit'
  /** A completion total below the token-carrying events the client saw. */
  | 'below_events'
  /** A server duration that is negative or not finite. */
  | 'not_a_duration';

/** A count the server sent that cannot be true: the record falls back to what was observed. */
export interface CountProblem {
  /** The server's field as on the wire (`usage.completion_tokens`, `tokens_predicted`, ...). */
  field: string;
  /** The number as text (`Infinity`, `-3`, `1e+17` survive JSON); `(string)` etc. for non-numbers. */
  value: string;
  reason: CountProblemReason;
}

/** Where a token count came from (docs/metrics.md, "The raw record"). */
export type TokenCountSource = 'server' | 'tokenizer' | 'events' | 'requested';

/**
 * The per-event timeline, stored column-wise and delta-encoded so a long run stays small in
 * memory and on disk (one small integer per event and column instead of an object per event).
 */
export interface EventTimeline {
  /** Microseconds from the previous event (the first: from `sentAt`). One entry per data event. */
  dtUs: number[];
  /** Output tokens carried by each event (0 for role-only, empty and usage-only events). */
  tokens: number[];
  /** Characters of visible content in each event. */
  contentChars: number[];
  /** Characters of reasoning content in each event; omitted when the stream had none. */
  reasoningChars?: number[];
  /** Characters of tool-call text (names, arguments) in each event; omitted when there was none. */
  toolCallChars?: number[];
}

/** How records are written: plain JSON lines, or the same lines gzip-compressed. */
export const RECORDS_FORMATS = ['jsonl', 'jsonl.gz'] as const;
export type RecordsFormat = (typeof RECORDS_FORMATS)[number];

export type RequestPhase = 'warmup' | 'measure';

/** What the server itself reported about a request's timing (llama.cpp `timings`, Ollama). */
export interface ServerTiming {
  /** Prompt processing time on the server. */
  prefillMs?: number;
  /** Prompt tokens it processed (after any prefix-cache hit). */
  prefillTokens?: number;
  /** Generation time on the server. */
  decodeMs?: number;
  /** Output tokens generated in `decodeMs`. */
  decodeTokens?: number;
  /** Time spent loading the model for this request (Ollama). */
  loadMs?: number;
}

/**
 * The set-up of a connection opened for a request that waited for it (docs/metrics.md,
 * "Connection phases"): durations in ms, whole microseconds.
 */
export interface ConnectionPhases {
  /** From the socket's creation to ready to send: dnsMs + tcpMs + tlsMs. */
  setupMs: number;
  /** The share of `setupMs` this request waited for (less when it came after the open began). */
  waitedMs: number;
  /** Name resolution; absent when the host is an address. */
  dnsMs?: number;
  /** TCP connect (after the lookup). */
  tcpMs: number;
  /** TLS handshake; absent on plain TCP. */
  tlsMs?: number;
}

export interface RequestRecord {
  /**
   * Index of the request in issue order (0-based); sent to the server as `x-request-id`. In a
   * session workload: `sessionId x SESSION_ID_STRIDE` plus the request's index in its session.
   */
  id: number;
  /** The session (multi-turn conversation, agent task) this request is a turn of. */
  sessionId?: number;
  /** The turn (an agent's step) within its session, from 1. */
  turn?: number;
  /** The request's index among its step's parallel requests (agent fan-out), from 0. */
  call?: number;
  /** Set on the record that ended a session that ran to its end (its last step's last to finish). */
  sessionDone?: true;
  /**
   * With `sessionDone`, in an agentic trace's task: the tool waits (ms, as sent) on the chain of
   * calls that ended it, each call's wait after the dependency that ended last.
   */
  taskToolWaitMs?: number;
  /** Warm-up requests are recorded but never counted (docs/metrics.md, "Run-level throughput"). */
  phase: RequestPhase;
  /** When the workload wanted this request sent (open loop: its arrival; closed loop: slot free). */
  scheduledAt: number;
  /** Just before the request was handed to the connection pool. */
  sentAt: number;
  /** Response status line and headers received. */
  headersAt?: number;
  /** First event carrying at least one output token (content or reasoning). */
  firstTokenAt?: number;
  /** First event carrying visible (non-reasoning) content. */
  firstContentAt?: number;
  /** First event carrying a tool call (a function name or argument text). */
  firstToolCallAt?: number;
  /** First event carrying reasoning text. */
  firstReasoningAt?: number;
  /**
   * Output tokens spent reasoning (part of `outputTokens`): the server's count
   * (`usage.completion_tokens_details.reasoning_tokens`), else those of reasoning-only events.
   */
  reasoningTokens?: number;
  reasoningTokensSource?: 'server' | 'events';
  /** Last event carrying at least one output token. */
  lastTokenAt?: number;
  /** Stream finished (`[DONE]`, clean close) or the request failed. */
  endAt: number;
  /** HTTP status, when one arrived. */
  status?: number;
  requestedInputTokens: number;
  requestedOutputTokens: number;
  inputTokens?: number;
  inputTokensSource?: TokenCountSource;
  /**
   * Prompt tokens the server served from its prefix cache, as its usage said
   * (`usage.prompt_tokens_details.cached_tokens`: OpenAI, vLLM with prompt-token details on).
   */
  cachedInputTokens?: number;
  outputTokens: number;
  outputTokensSource: TokenCountSource;
  /**
   * Server total minus the sum of per-event token deltas, when the deltas came from the server
   * or a tokenizer and disagreed (the deltas were rescaled to the server's total).
   */
  tokenCountMismatch?: number;
  /** `finish_reason` of the last choice, when the server sent one. */
  finishReason?: string;
  /** The first implausible count the server sent; the record's counts ignore it. */
  countProblem?: CountProblem;
  /** The server's own account of this request's timing, when it gives one. */
  serverTiming?: ServerTiming;
  /**
   * Sent twice: the first attempt met a kept-alive connection the server had just closed, before
   * any response. `sentAt` is the second attempt; the first counts as client-side queueDelay.
   */
  resent?: true;
  /**
   * HTTP/2 only: the connection (session) that carried this request, a number unique in the
   * run's process; requests with the same number shared one connection as streams.
   */
  connectionId?: number;
  /**
   * The parts of queueDelay (docs/metrics.md, "Connection phases"), in ms: `backlogMs` until
   * the request was handed to the connection pool (open-loop backlog, a cap's queue, timer
   * lateness), `poolWaitMs` waiting there for a free connection, and `connection.waitedMs` the
   * set-up of a connection opened for it: they add up to `sentAt - scheduledAt` to the µs.
   * Absent in records older than them, and `poolWaitMs` on requests never sent.
   */
  backlogMs?: number;
  poolWaitMs?: number;
  /** Present when the request went out as the first request of a connection it waited for. */
  connection?: ConnectionPhases;
  events: EventTimeline;
  error?: RequestError;
}

/**
 * The connections a pool opened before the run's clock started (a closed loop's concurrency, an
 * open loop's cap): their set-up belongs to no request (docs/metrics.md, "Connection phases").
 */
export interface PreopenedConnections {
  connections: number;
  /** Those that never connected (their requests then open their own). */
  failed: number;
  /** Over those that connected: socket created to ready to send. */
  setupMsMean: number;
  setupMsMax: number;
}

/** What the engine measured about itself during a run (client health, docs/metrics.md, "Client health"). */
export interface ClientHealthMeasurements {
  /** Event-loop delay from `perf_hooks.monitorEventLoopDelay`, in ms. */
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /** CPU of the whole process (every thread), seconds. */
  cpuUserS: number;
  cpuSystemS: number;
  /** CPU of the thread that ran the engine, seconds (Linux only): a worker's own load. */
  threadCpuS?: number;
  /** Share of the time the engine's event loop was busy (perf_hooks eventLoopUtilization). */
  eventLoopUtilisation?: number;
  /** Wall time the engine ran, seconds. */
  wallS: number;
  /**
   * Cores the process may run on (`os.availableParallelism()`: the affinity mask `taskset` sets,
   * else the machine's); absent in results older than it.
   */
  usableCores?: number;
  /** Open loop: how late the scheduler noticed each arrival (timer lateness), in ms. */
  sendSlipMs: number[];
  /** Token-carrying stream events received. */
  tokenEvents: number;
  /**
   * Token events that arrived in the same network read as the previous token event of their
   * request: their gap reads as ~0 however the server spaced them.
   */
  coalescedTokenEvents: number;
  /**
   * The event-loop delay samples as (delay in ms, samples) pairs, one per percentile step of the
   * monitor's histogram, longest last: how long and how often the thread could not stamp a read
   * (docs/metrics.md, "Client health"). Absent in results older than it.
   */
  loopStallsMs?: [number, number][];
  /** Connections opened before the clock started; absent when none were (or in older results). */
  preopened?: PreopenedConnections;
  /** Garbage-collection pauses of this thread during the run (perf_hooks 'gc' entries). */
  gcPauses?: { count: number; totalMs: number; maxMs: number; over1Ms: number };
}

const PHASES: readonly unknown[] = ['warmup', 'measure'] satisfies RequestPhase[];

/**
 * The largest time a record may hold, in ms on the run's clock: ten years. A record past it
 * (`endAt: 1e300`) is damage, not a request: it would stretch every chart's time axis to
 * nothing.
 */
export const MAX_RECORD_TIME_MS = 10 * 365.25 * 24 * 3600 * 1000;

const REQUIRED_TIMES = ['scheduledAt', 'sentAt', 'endAt'] as const;
const OPTIONAL_TIMES = [
  'headersAt',
  'firstTokenAt',
  'firstContentAt',
  'firstToolCallAt',
  'firstReasoningAt',
  'lastTokenAt',
] as const;
/** Every time field of a record (merge shifts them all). */
export const RECORD_TIME_FIELDS = [...REQUIRED_TIMES, ...OPTIONAL_TIMES] as const;
const COUNTS = ['requestedInputTokens', 'requestedOutputTokens', 'outputTokens'] as const;
const isTime = (v: unknown) =>
  typeof v === 'number' && v >= -MAX_RECORD_TIME_MS && v <= MAX_RECORD_TIME_MS;
/** A non-negative span a run can hold (a phase, a wait). */
const isDuration = (v: unknown) => typeof v === 'number' && v >= 0 && v <= MAX_RECORD_TIME_MS;
const isCount = (v: unknown) => typeof v === 'number' && v >= 0 && v <= Number.MAX_SAFE_INTEGER;

/**
 * Why a parsed JSON line is not a request record the readers can use, or undefined when it is:
 * the fields every metric reads (times within MAX_RECORD_TIME_MS, counts non-negative, an
 * error with its kind and message, the event columns equally long, of numbers within bounds). A records file is user input (a file they give, a run cut short, a
 * byte flipped on disk): a line that parses but is something else (`{"hello":1}`, `42`, a
 * record whose columns disagree, `endAt: 1e300`) is skipped and said, as a torn line is,
 * instead of ending the report on a TypeError or an empty chart.
 */
export function recordProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return `a JSON ${Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value}, not a record object`;
  }
  const r = value as Record<string, unknown>;
  if (!Number.isFinite(r.id)) return 'its id is not a number';
  for (const key of REQUIRED_TIMES) {
    if (!Number.isFinite(r[key])) return `its ${key} is not a number`;
    if (!isTime(r[key])) return `its ${key} is not a time a run can have`;
  }
  for (const key of OPTIONAL_TIMES) {
    if (r[key] !== undefined && !isTime(r[key])) return `its ${key} is not a time a run can have`;
  }
  for (const key of COUNTS) {
    if (!Number.isFinite(r[key])) return `its ${key} is not a number`;
    if (!isCount(r[key])) return `its ${key} is not a count (negative or past 2^53)`;
  }
  if (!PHASES.includes(r.phase)) return 'its phase is neither warmup nor measure';
  for (const key of ['backlogMs', 'poolWaitMs'] as const) {
    // A part of queueDelay, which a timer that fires early makes slightly negative.
    if (r[key] !== undefined && !isTime(r[key])) return `its ${key} is not a duration`;
  }
  if (r.taskToolWaitMs !== undefined && !isDuration(r.taskToolWaitMs)) {
    return 'its taskToolWaitMs is not a duration';
  }
  if (r.connection !== undefined) {
    const c = r.connection as Record<string, unknown> | null;
    if (typeof c !== 'object' || c === null || Array.isArray(c)) {
      return 'its connection is not an object';
    }
    for (const key of ['setupMs', 'waitedMs', 'tcpMs', 'dnsMs', 'tlsMs']) {
      const optional = key === 'dnsMs' || key === 'tlsMs';
      if ((!optional || c[key] !== undefined) && !isDuration(c[key])) {
        return `its connection.${key} is not a duration`;
      }
    }
  }
  if (r.error !== undefined) {
    const e = r.error as Record<string, unknown> | null;
    if (typeof e !== 'object' || e === null || typeof e.kind !== 'string') {
      return 'its error has no kind';
    }
    if (typeof e.message !== 'string') return 'its error has no message';
  }
  const events = r.events as Record<string, unknown> | undefined;
  if (typeof events !== 'object' || events === null) return 'it has no events';
  const length = (events.dtUs as unknown[] | undefined)?.length;
  for (const column of ['dtUs', 'tokens', 'contentChars', 'reasoningChars', 'toolCallChars']) {
    const values = events[column];
    if (values === undefined && (column === 'reasoningChars' || column === 'toolCallChars')) {
      continue;
    }
    if (!Array.isArray(values) || values.length !== length) {
      return `its events.${column} is not a column as long as events.dtUs`;
    }
    for (const v of values) {
      if (typeof v !== 'number') return `its events.${column} holds a non-number`;
      // A gap in microseconds, a count of tokens or characters: never past ten years' worth.
      if (!(Math.abs(v) <= MAX_RECORD_TIME_MS * 1000)) {
        return `its events.${column} holds an impossible value`;
      }
    }
  }
  return undefined;
}
