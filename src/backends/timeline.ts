import {
  type CountProblem,
  type CountProblemReason,
  type EventTimeline,
  MAX_REQUEST_EVENTS,
  type RequestError,
  type RequestPhase,
  type RequestRecord,
  type ServerTiming,
  type TokenCountSource,
} from '../record.js';

/** A tool call as the OpenAI chat API carries it (an assistant message's `tool_calls`). */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** What the model answered, kept when a request asks for it (`captureAnswer`). */
export interface Answer {
  /** The visible answer text. */
  content: string;
  /**
   * Tool calls, whole, in their stream index order. A call the server sent without an id has
   * id '': the workload names it (docs/workloads.md, `call_<task>_<request>_<call>_<n>`).
   */
  toolCalls: ToolCall[];
}

/** A stream-level failure a decoder detected: it becomes the record's error as it is. */
export type StreamFault = RequestError;

/** What a finished stream amounts to, ready to go into a record. */
export interface DecodedStream {
  events: EventTimeline;
  /** Offsets in microseconds from `sentAt` (undefined when no such event). */
  firstTokenUs?: number;
  firstContentUs?: number;
  /** First event carrying a tool call (its name or arguments). */
  firstToolCallUs?: number;
  /** First event carrying reasoning text. */
  firstReasoningUs?: number;
  /** Output tokens spent reasoning: the server's count, else the events' (see `finish`). */
  reasoningTokens?: number;
  reasoningTokensSource?: 'server' | 'events';
  lastTokenUs?: number;
  /** Offset of the end-of-stream marker (`[DONE]`, a final message), when one arrived. */
  doneUs?: number;
  outputTokens: number;
  outputTokensSource: TokenCountSource;
  inputTokens?: number;
  cachedInputTokens?: number;
  tokenCountMismatch?: number;
  finishReason?: string;
  serverTiming?: ServerTiming;
  countProblem?: CountProblem;
  /** The answer's text and tool calls, when the request asked to keep them. */
  answer?: Answer;
}

/** One parsed stream event, in the terms every wire format maps to. */
export interface StreamEvent {
  /** Visible output text carried by the event. */
  content?: string;
  /** Reasoning output text (counts as output, but not for TTFC). */
  reasoning?: string;
  /**
   * Tool-call text the event streams (function names and argument pieces, every call of the
   * event): output like any other, kept apart like reasoning and not visible content.
   */
  toolCall?: string;
  /** Exact output tokens this event carries, when the server says (TGI: one token object). */
  tokens?: number;
  /** Cumulative output tokens so far, when the server says (per-event usage, SGLang meta_info). */
  completionTokens?: number;
}

const UNKNOWN = -1;

/**
 * The most tokens any count may hold, 2^24 (16.8 million): more than any model's context window,
 * so no prompt or answer is longer. It bounds input counts, and output counts when the request
 * set no limit of its own.
 */
export const MAX_TOKEN_COUNT = 2 ** 24;

/**
 * Bounds on what one request may hold (docs/metrics.md, "Bounds"): past one, the request ends
 * with a `too_large` error and what came before is kept. A hostile or broken server can stream
 * forever; without them one request grew its timeline to 4 GB, or its captured answer past
 * V8's string limit, in seconds.
 */
export const REQUEST_BOUNDS = {
  /** Captured answer text (content and tool calls), UTF-8 bytes, by default: `--max-answer-mb 16`. */
  answerBytes: 16 * 2 ** 20,
  /**
   * Events per request: eight per token the request allowed, and 1,024 more (role, usage and
   * empty events), at most 2^20. A real engine sends one event per token or fewer (several
   * tokens per event under speculative decoding or a stream interval), so the cap is only ever
   * met by a stream that does not answer the request.
   */
  eventsPerToken: 8,
  extraEvents: 1024,
  maxEvents: MAX_REQUEST_EVENTS,
  /**
   * One event's text (a line, or an event's data lines joined): 32 MiB. A real event is one
   * token, or a final message with the whole answer (TGI's `generated_text`), far below it.
   */
  eventChars: 32 * 2 ** 20,
} as const;

/** The error of a request that passed one of REQUEST_BOUNDS. */
export function tooLarge(what: string): StreamFault {
  return { kind: 'too_large', message: `the answer passed ${what}; the request was ended there` };
}

/** What a count is checked against (docs/metrics.md, "The raw record"). */
export type CountKind = 'output' | 'input' | 'duration';

/**
 * Accumulates the per-event token timeline of one response (docs/metrics.md, "The raw record") and settles
 * token counts at the end. Every backend's parser feeds it; the accounting is the same for all.
 */
export class Timeline {
  private readonly sentAtUs: number;
  private previousUs: number;
  /** Time of the network data being parsed; set by the decoder before each piece. */
  nowUs = 0;
  // One entry per event. Most streams carry only content and no exact counts: the other
  // columns are made at the first event that needs them, backfilled for the events before.
  private readonly dtUs: EventColumn;
  private readonly contentChars: EventColumn;
  private exactTokens: EventColumn | undefined;
  private cumulative: EventColumn | undefined;
  private reasoningChars: EventColumn | undefined;
  private toolCallChars: EventColumn | undefined;
  /** Columns start with room for this many events (the request's own limit, when small). */
  private readonly expectedEvents: number;
  /** Token-carrying events since the counter was last read (for coalescing statistics). */
  tokenEventsSinceRead = 0;
  totalCompletionTokens: number | undefined;
  promptTokens: number | undefined;
  /** Prompt tokens served from the server's cache (`usage.prompt_tokens_details.cached_tokens`). */
  cachedPromptTokens: number | undefined;
  /** The server's count of reasoning tokens (`usage.completion_tokens_details.reasoning_tokens`). */
  reasoningTokens: number | undefined;
  finishReason: string | undefined;
  serverTiming: ServerTiming | undefined;
  doneUs: number | undefined;
  fault: StreamFault | undefined;
  /** The first implausible number the server sent (see `count`). */
  countProblem: CountProblem | undefined;
  /** The answer is whole (a finish reason arrived), though more events may follow. */
  private completed = false;
  private readonly maxOutputTokens: number;
  /** The wire field `totalCompletionTokens` came from, for a problem found at the end. */
  private totalField = '';
  /** Events past this end the request (REQUEST_BOUNDS). */
  private readonly maxEvents: number;
  private readonly maxAnswerBytes: number;

  /** The answer's text and tool calls, kept only when the request asked (sessions). */
  readonly capture: AnswerCapture | undefined;

  /**
   * `maxOutputTokens`: the request's own output limit, when it set one; `captureAnswerBytes`:
   * keep the answer (a session's next turn carries it), up to this many UTF-8 bytes.
   */
  constructor(sentAtUs: number, maxOutputTokens?: number, captureAnswerBytes?: number) {
    this.sentAtUs = sentAtUs;
    this.previousUs = sentAtUs;
    this.maxOutputTokens = Math.min(maxOutputTokens ?? MAX_TOKEN_COUNT, MAX_TOKEN_COUNT);
    const { eventsPerToken, extraEvents, maxEvents } = REQUEST_BOUNDS;
    this.maxEvents = Math.min(maxEvents, extraEvents + eventsPerToken * this.maxOutputTokens);
    this.maxAnswerBytes = captureAnswerBytes ?? 0;
    this.expectedEvents = Math.min(this.maxEvents, (maxOutputTokens ?? 0) + 4, MAX_PRESIZED_EVENTS);
    this.dtUs = new EventColumn(Float64Array, this.expectedEvents);
    this.contentChars = new EventColumn(Int32Array, this.expectedEvents);
    this.capture = captureAnswerBytes !== undefined ? new AnswerCapture() : undefined;
  }

  /**
   * Checks one number the server sent: a count must be a non-negative safe integer, an output
   * count at most the request's limit, and any count at most MAX_TOKEN_COUNT; a duration must
   * be finite and non-negative. Absent (undefined or null) is no problem; anything else that
   * fails is kept as the record's `countProblem` and not used.
   */
  count(value: unknown, field: string, kind: CountKind): number | undefined {
    if (value === undefined || value === null) return undefined;
    const reason = countProblemReason(value, kind, this.maxOutputTokens);
    if (reason === undefined) return value as number;
    this.problem(field, value, reason);
    return undefined;
  }

  /** Sets the server's completion total from `field`, when it is a plausible count (returned). */
  setCompletionTotal(value: unknown, field: string): number | undefined {
    const total = this.count(value, field, 'output');
    if (total === undefined) return undefined;
    this.totalCompletionTokens = total;
    this.totalField = field;
    return total;
  }

  private problem(field: string, value: unknown, reason: CountProblemReason): void {
    const text = typeof value === 'number' ? String(value) : `(${typeof value})`;
    this.countProblem ??= { field, value: text, reason };
  }

  /** The answer's final event arrived (a finish reason); a clean close after it is no cut. */
  markComplete(): void {
    this.completed = true;
  }

  /** The answer is whole: its end marker, or a finish reason, arrived. */
  get complete(): boolean {
    return this.completed || this.doneUs !== undefined;
  }

  get eventCount(): number {
    return this.dtUs.length;
  }

  /** Records one event at the current time (keeping its content when the answer is captured). */
  event(e: StreamEvent): void {
    const content = e.content ?? '';
    if (this.capture && content.length > 0) this.capture.addContent(content);
    this.record(
      content.length,
      e.reasoning?.length ?? 0,
      e.toolCall?.length ?? 0,
      e.tokens,
      e.completionTokens,
    );
  }

  /**
   * Records one event at the current time from the lengths of the texts it carries (see
   * StreamEvent; undefined counts: the server did not say). The content is the caller's to
   * capture.
   */
  record(
    contentChars: number,
    reasoningChars: number,
    toolCallChars: number,
    tokens?: number,
    completionTokens?: number,
  ): void {
    const index = this.dtUs.length;
    if (index >= this.maxEvents) {
      this.fault ??= tooLarge(`${this.maxEvents} events (eight per token it asked for)`);
      return;
    }
    if (this.capture && this.capture.bytes > this.maxAnswerBytes) {
      const mib = Math.round((this.maxAnswerBytes / 2 ** 20) * 100) / 100;
      this.fault ??= tooLarge(`${mib} MiB of captured text (--max-answer-mb)`);
      return;
    }
    this.dtUs.push(this.nowUs - this.previousUs);
    this.previousUs = this.nowUs;
    this.contentChars.push(contentChars);
    if (reasoningChars > 0 || this.reasoningChars) {
      this.reasoningChars ??= this.column(index, 0);
      this.reasoningChars.push(reasoningChars);
    }
    if (toolCallChars > 0 || this.toolCallChars) {
      this.toolCallChars ??= this.column(index, 0);
      this.toolCallChars.push(toolCallChars);
    }
    if (tokens !== undefined || this.exactTokens) {
      this.exactTokens ??= this.column(index, UNKNOWN);
      this.exactTokens.push(tokens ?? UNKNOWN);
    }
    if (completionTokens !== undefined || this.cumulative) {
      this.cumulative ??= this.column(index, UNKNOWN);
      this.cumulative.push(completionTokens ?? UNKNOWN);
    }
    if (contentChars > 0 || reasoningChars > 0 || toolCallChars > 0 || (tokens ?? 0) > 0) {
      this.tokenEventsSinceRead++;
    }
  }

  /** A new count column holding `value` for the `length` events before it. */
  private column(length: number, value: number): EventColumn {
    const column = new EventColumn(Int32Array, Math.max(length + 1, this.expectedEvents));
    for (let i = 0; i < length; i++) column.push(value);
    return column;
  }

  /** The end-of-stream marker arrived now. */
  markDone(): void {
    this.doneUs ??= this.nowUs - this.sentAtUs;
  }

  /** Settles token counts once the stream has ended. */
  finish(): DecodedStream {
    const n = this.dtUs.length;
    const dtUs = this.dtUs.toArray();
    const contentChars = this.contentChars.toArray();
    const reasoningChars = this.reasoningChars?.toArray();
    const toolCallChars = this.toolCallChars?.toArray();
    const exactTokens = this.exactTokens?.values;
    const cumulative = this.cumulative?.values;
    // 1 for an event that carries text, else 0: the count when the server gives none.
    const base = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      const text =
        contentChars[i] > 0 ||
        (reasoningChars !== undefined && reasoningChars[i] > 0) ||
        (toolCallChars !== undefined && toolCallChars[i] > 0);
      base[i] = text ? 1 : 0;
    }
    const tokens = new Array<number>(n);
    let source: TokenCountSource = 'events';
    let tokenEvents = 0;
    let everyExact = exactTokens !== undefined;
    let everyCumulative = cumulative !== undefined;
    for (let i = 0; i < n; i++) {
      const isTokenEvent = base[i] > 0 || (exactTokens !== undefined && exactTokens[i] > 0);
      if (!isTokenEvent) continue;
      tokenEvents++;
      if (exactTokens === undefined || exactTokens[i] === UNKNOWN) everyExact = false;
      if (cumulative === undefined || cumulative[i] === UNKNOWN) everyCumulative = false;
    }
    if (tokenEvents > 0 && everyExact && exactTokens !== undefined) {
      source = 'server';
      for (let i = 0; i < n; i++) tokens[i] = Math.max(0, exactTokens[i]);
    } else if (tokenEvents > 0 && everyCumulative && cumulative !== undefined) {
      // Deltas run between token events only: some servers already count the first token in
      // the usage of a role-only event, which must not leave the first content event with 0.
      source = 'server';
      let previous = 0;
      for (let i = 0; i < n; i++) {
        tokens[i] = 0;
        if (base[i] === 0 && (exactTokens === undefined || exactTokens[i] <= 0)) continue;
        tokens[i] = Math.max(0, cumulative[i] - previous);
        previous = cumulative[i];
      }
    } else {
      for (let i = 0; i < n; i++) tokens[i] = base[i];
    }
    let sum = 0;
    for (let i = 0; i < n; i++) sum += tokens[i];
    const decoded: DecodedStream = {
      events: {
        dtUs,
        tokens,
        contentChars,
        ...(reasoningChars ? { reasoningChars } : {}),
        ...(toolCallChars ? { toolCallChars } : {}),
      },
      outputTokens: sum,
      outputTokensSource: source,
    };
    const total = this.totalCompletionTokens;
    if (total !== undefined && total < tokenEvents) {
      // Fewer tokens than token events: the events seen are the better count.
      this.problem(this.totalField, total, 'below_events');
    } else if (total !== undefined) {
      if (total !== sum && tokenEvents > 0) {
        if (source !== 'events') decoded.tokenCountMismatch = total - sum;
        rescale(tokens, total);
      }
      decoded.outputTokens = total;
      decoded.outputTokensSource = 'server';
    }
    if (this.countProblem !== undefined) decoded.countProblem = this.countProblem;
    if (this.promptTokens !== undefined) decoded.inputTokens = this.promptTokens;
    if (this.cachedPromptTokens !== undefined) decoded.cachedInputTokens = this.cachedPromptTokens;
    if (this.finishReason !== undefined) decoded.finishReason = this.finishReason;
    if (this.serverTiming !== undefined) decoded.serverTiming = this.serverTiming;
    if (this.doneUs !== undefined) decoded.doneUs = this.doneUs;
    // Without the server's count, reasoning tokens are those of events that carried reasoning
    // text only (an event mixing it with answer text counts as answer).
    let reasoningByEvents = 0;
    let atUs = 0;
    for (let i = 0; i < n; i++) {
      atUs += dtUs[i];
      if (tokens[i] > 0) {
        const toolCall = toolCallChars !== undefined && toolCallChars[i] > 0;
        if (reasoningChars !== undefined && reasoningChars[i] > 0) {
          decoded.firstReasoningUs ??= atUs;
          if (contentChars[i] === 0 && !toolCall) reasoningByEvents += tokens[i];
        }
        if (decoded.firstTokenUs === undefined) decoded.firstTokenUs = atUs;
        decoded.lastTokenUs = atUs;
        if (decoded.firstContentUs === undefined && contentChars[i] > 0) {
          decoded.firstContentUs = atUs;
        }
        if (decoded.firstToolCallUs === undefined && toolCall) {
          decoded.firstToolCallUs = atUs;
        }
      }
    }
    if (this.reasoningTokens !== undefined && this.reasoningTokens <= decoded.outputTokens) {
      decoded.reasoningTokens = this.reasoningTokens;
      decoded.reasoningTokensSource = 'server';
    } else if (reasoningChars !== undefined) {
      decoded.reasoningTokens = reasoningByEvents;
      decoded.reasoningTokensSource = 'events';
    }
    if (this.capture) decoded.answer = this.capture.answer();
    return decoded;
  }
}

/**
 * The answer as it streams in, for a session's next turn: the content, and each tool call put
 * together from its pieces as the OpenAI streaming API sends them (the first piece of call
 * `index` brings its `id` and `function.name`, later ones `function.arguments` text).
 */
export class AnswerCapture {
  content = '';
  /** Calls by stream index; those without one are calls of their own, in arrival order. */
  private readonly calls: { index?: number; id: string; name: string; args: string }[] = [];
  private readonly byIndex = new Map<number, { id: string; name: string; args: string }>();
  /**
   * UTF-8 bytes captured so far (content and tool calls), for the bound on an answer: MiB of
   * text as docs/metrics.md says, not UTF-16 code units (a CJK character is 3 bytes, 1 unit).
   */
  bytes = 0;

  /** One event's content. */
  addContent(text: string): void {
    this.content += text;
    this.bytes += utf8Bytes(text);
  }
  /**
   * One event's `tool_calls` (a list; TGI's older single object; Ollama's whole calls with
   * `arguments` as an object). A piece without a numeric `index` is a call of its own.
   */
  addToolCalls(value: unknown): void {
    if (value === undefined || value === null) return;
    for (const piece of Array.isArray(value) ? value : [value]) {
      if (typeof piece !== 'object' || piece === null) continue;
      const p = piece as Record<string, unknown>;
      const index = typeof p.index === 'number' ? p.index : undefined;
      let call = index === undefined ? undefined : this.byIndex.get(index);
      if (!call) {
        call = { ...(index !== undefined ? { index } : {}), id: '', name: '', args: '' };
        this.calls.push(call);
        if (index !== undefined) this.byIndex.set(index, call);
      }
      if (typeof p.id === 'string' && p.id !== '') call.id = p.id;
      const fn = p.function as Record<string, unknown> | undefined;
      if (typeof fn !== 'object' || fn === null) continue;
      if (typeof fn.name === 'string') {
        call.name += fn.name;
        this.bytes += utf8Bytes(fn.name);
      }
      const args =
        typeof fn.arguments === 'string'
          ? fn.arguments
          : typeof fn.arguments === 'object' && fn.arguments !== null
            ? JSON.stringify(fn.arguments)
            : '';
      call.args += args;
      this.bytes += utf8Bytes(args);
    }
  }

  answer(): Answer {
    const ordered = [...this.calls].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
    return {
      content: this.content,
      toolCalls: ordered.map((c) => ({
        id: c.id,
        type: 'function' as const,
        function: { name: c.name, arguments: c.args },
      })),
    };
  }
}

/**
 * Rescales per-event token counts in place so they sum to `total` (at least the number of
 * token-carrying events): each gets its proportional share rounded down, at least one; the
 * tokens left over go to the largest remainders (ties: earlier events first), and tokens over
 * (from the at-least-one floor) come back from the smallest remainders that can spare them.
 * Work is O(n log n) in the events whatever the total: leftovers are handed out in blocks, never
 * one at a time (past 2^53 adding one changes nothing, and a loop counting to `total` would not end).
 */
export function rescale(tokens: number[], total: number): void {
  if (!Number.isFinite(total) || total < 0) return;
  let sum = 0;
  for (const t of tokens) sum += t;
  if (sum === 0) return;
  const remainders: { index: number; remainder: number }[] = [];
  let assigned = 0;
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i] === 0) continue;
    const exact = (total * tokens[i]) / sum;
    tokens[i] = Math.max(1, Math.floor(exact));
    assigned += tokens[i];
    remainders.push({ index: i, remainder: exact - tokens[i] });
  }
  remainders.sort((a, b) => b.remainder - a.remainder || a.index - b.index);
  const n = remainders.length;
  if (assigned < total) {
    const missing = total - assigned;
    const each = Math.floor(missing / n);
    const extra = missing - each * n;
    for (let j = 0; j < n; j++) tokens[remainders[j].index] += each + (j < extra ? 1 : 0);
    return;
  }
  // Over: one back from each event that can spare one, smallest remainders first, then as many
  // as each can spare; two passes at most.
  let over = assigned - total;
  for (let j = n - 1; j >= 0 && over > 0; j--) {
    const i = remainders[j].index;
    if (tokens[i] > 1) {
      tokens[i]--;
      over--;
    }
  }
  for (let j = n - 1; j >= 0 && over > 0; j--) {
    const i = remainders[j].index;
    const taken = Math.min(tokens[i] - 1, over);
    tokens[i] -= taken;
    over -= taken;
  }
}

/**
 * Past this many events a column does not start at the request's own limit but grows: a request
 * may allow 100,000 tokens and stop at 200.
 */
const MAX_PRESIZED_EVENTS = 4096;

/**
 * One number per event in a typed array, grown by doubling. A typed array's store lies outside
 * V8's heap (past 64 bytes), so the timelines of hundreds of streams in flight are not copied at
 * every young-generation collection, as JS arrays of numbers were: at 256 streams those
 * collections held the measuring thread for 5-15 ms (bench:peer, issue 29). Sized at the
 * request's own token limit, a column of an ordinary answer never grows.
 */
class EventColumn {
  values: Float64Array | Int32Array;
  length = 0;

  constructor(
    private readonly kind: Float64ArrayConstructor | Int32ArrayConstructor,
    capacity: number,
  ) {
    this.values = new kind(Math.max(16, capacity));
  }

  push(value: number): void {
    if (this.length === this.values.length) {
      const grown = new this.kind(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = value;
  }

  /** The values as a plain array (what a record holds). */
  toArray(): number[] {
    // A loop, not Array.from: the iterator allocated for every value.
    const array = new Array<number>(this.length);
    for (let i = 0; i < this.length; i++) array[i] = this.values[i];
    return array;
  }
}

/** Why `value` is not a plausible count of `kind`, or undefined when it is one. */
function countProblemReason(
  value: unknown,
  kind: CountKind,
  maxOutputTokens: number,
): CountProblemReason | undefined {
  if (kind === 'duration') {
    return typeof value === 'number' && Number.isFinite(value) && value >= 0
      ? undefined
      : 'not_a_duration';
  }
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) return 'not_a_count';
  return value > (kind === 'output' ? maxOutputTokens : MAX_TOKEN_COUNT)
    ? 'above_limit'
    : undefined;
}

/** Shortens server text for error messages. */
export function clip(text: string, max = 300): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

/** What a record says of its request before it is sent (its ids, schedule and asked lengths). */
export interface RecordedRequest {
  id: number;
  phase: RequestPhase;
  scheduledAtUs: number;
  spec: { requestedInputTokens: number; requestedOutputTokens: number };
  /** The session and turn it belongs to (session workloads), copied to its record. */
  session?: { sessionId: number; turn: number; call?: number };
}

/**
 * The record of one request from its decoded stream (or its error): the one shape the HTTP
 * client and virtual time (src/sim/virtual.ts) both write. Times in µs of the run's clock.
 */
export function streamRecord(
  request: RecordedRequest,
  sentAtUs: number,
  headersAtUs: number | undefined,
  endAtUs: number,
  status: number | undefined,
  decoded: DecodedStream | undefined,
  error: RequestError | undefined,
): RequestRecord {
  const ms = (us: number) => us / 1000;
  const record: RequestRecord = {
    id: request.id,
    ...request.session,
    phase: request.phase,
    scheduledAt: ms(request.scheduledAtUs),
    sentAt: ms(sentAtUs),
    endAt: ms(endAtUs),
    requestedInputTokens: request.spec.requestedInputTokens,
    requestedOutputTokens: request.spec.requestedOutputTokens,
    outputTokens: decoded?.outputTokens ?? 0,
    outputTokensSource: decoded?.outputTokensSource ?? 'events',
    events: decoded?.events ?? { dtUs: [], tokens: [], contentChars: [] },
  };
  if (headersAtUs !== undefined) record.headersAt = ms(headersAtUs);
  if (status !== undefined) record.status = status;
  if (decoded) {
    if (decoded.firstTokenUs !== undefined)
      record.firstTokenAt = ms(sentAtUs + decoded.firstTokenUs);
    if (decoded.firstContentUs !== undefined) {
      record.firstContentAt = ms(sentAtUs + decoded.firstContentUs);
    }
    if (decoded.firstToolCallUs !== undefined) {
      record.firstToolCallAt = ms(sentAtUs + decoded.firstToolCallUs);
    }
    if (decoded.firstReasoningUs !== undefined) {
      record.firstReasoningAt = ms(sentAtUs + decoded.firstReasoningUs);
    }
    if (decoded.reasoningTokens !== undefined) {
      record.reasoningTokens = decoded.reasoningTokens;
      record.reasoningTokensSource = decoded.reasoningTokensSource ?? 'events';
    }
    if (decoded.lastTokenUs !== undefined) record.lastTokenAt = ms(sentAtUs + decoded.lastTokenUs);
    if (decoded.tokenCountMismatch !== undefined) {
      record.tokenCountMismatch = decoded.tokenCountMismatch;
    }
    if (decoded.finishReason !== undefined) record.finishReason = decoded.finishReason;
    if (decoded.countProblem !== undefined) record.countProblem = decoded.countProblem;
    if (decoded.serverTiming !== undefined) record.serverTiming = decoded.serverTiming;
    if (decoded.cachedInputTokens !== undefined) {
      record.cachedInputTokens = decoded.cachedInputTokens;
    }
  }
  if (decoded?.inputTokens !== undefined) {
    record.inputTokens = decoded.inputTokens;
    record.inputTokensSource = 'server';
  } else if (!error) {
    record.inputTokens = request.spec.requestedInputTokens;
    record.inputTokensSource = 'requested';
  }
  if (error) record.error = error;
  return record;
}

/**
 * The UTF-8 length of a string, as Buffer.byteLength gives it, counted in JavaScript: an answer
 * arrives a token at a time, and for pieces of a few characters a loop is cheaper than a call
 * into the runtime. A lone surrogate counts 3 bytes, as its replacement character encodes.
 */
export function utf8Bytes(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else {
      // 3 bytes for 1 unit; a surrogate pair is 4 bytes for its 2 units (its low half skipped).
      bytes += 2;
      const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
      if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) i++;
    }
  }
  return bytes;
}
