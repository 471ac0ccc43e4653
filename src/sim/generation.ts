/**
 * One admitted completion request on the simulated server: its ground-truth record, the engine
 * job that times its tokens, and the answer written from them (a stream of events, or one body),
 * with the fault it was drawn (an error instead of an answer, a late start, a stall, a reset or
 * a malformed event mid-stream).
 */
import type { ServerResponse } from 'node:http';
import type { AnswerPlan, TokenKind } from './answer.js';
import type { EngineRequest, ServingEngine } from './engine.js';
import { EventFormat, type Part } from './eventFormat.js';
import type { InjectedFault } from './faults.js';
import { error, json } from './http.js';

/** Server-side ground truth for one request, on the simulator's own clock (ms since it started). */
export interface TruthRecord {
  /** The client's `x-request-id` header, or the simulator's own counter. */
  requestId: string;
  endpoint: 'chat' | 'completions';
  /** Request headers received (before the body is read). */
  arrivedAt: number;
  /** A slot was free and generation began. */
  startedAt?: number;
  /**
   * Each stream event that carried tokens: when it was handed to the socket, how many, and what
   * they were (an answer's reasoning, content or tool-call arguments).
   */
  events: { at: number; tokens: number; kind: TokenKind }[];
  inputTokens: number;
  outputTokens: number;
  /** Output tokens streamed as reasoning. */
  reasoningTokens: number;
  /** Output tokens streamed as tool-call arguments, over `toolCalls` calls. */
  toolCallTokens: number;
  toolCalls: number;
  /** Prompt tokens found in the prefix cache (engines that model one). */
  cachedPromptTokens?: number;
  /** The data-parallel replica (vLLM's engine index) that served it, when the engine says. */
  replica?: number;
  finishedAt?: number;
  /** The client went away before the end. */
  cancelled?: boolean;
  /** A fault the server injected into this request (`--faults`). */
  fault?: InjectedFault;
  /** Answered with an error instead of a generation. */
  rejected?: { status: number; message: string };
}

/** What a generation needs to know about its request and its server. */
export interface GenerationRequest {
  endpoint: 'chat' | 'completions';
  body: Record<string, unknown>;
  plan: AnswerPlan;
  engineRequest: EngineRequest;
  /** The fault drawn for this request, if any. */
  fault: InjectedFault | undefined;
  /** The model id answers name. */
  model: string;
  /** The server's `created` (Unix seconds). */
  created: number;
  /** The simulator's clock (ms since it started). */
  now: () => number;
}

const isMidStream = (fault: InjectedFault | undefined) =>
  fault?.kind === 'reset' || fault?.kind === 'stall' || fault?.kind === 'malformed';

/**
 * The answer to one request, from admission to its last byte. `admit` answers with an error
 * when the engine refuses it or a fault says so; `start` submits it to the engine and writes
 * the tokens as they come: stream events (vLLM's role-only first chat event, `finish_reason` on
 * the last token event, a usage event when asked, then `[DONE]`), or one JSON body at the end.
 */
export class Generation {
  private closed = false;
  private finished = false;
  /** Stall fault: writes wait until this time (ms on the simulator clock), then go together. */
  private stallUntil = 0;
  private held = {
    out: '',
    parts: [] as Part[],
    last: false,
    timer: undefined as NodeJS.Timeout | undefined,
  };
  private roleSent = false;
  private format: EventFormat | undefined;
  private job: { cancel(): void } | undefined;
  private readonly stream: boolean;
  private readonly streamOptions: Record<string, unknown>;
  /** Usage on every event (`stream_options.continuous_usage_stats`). */
  private readonly continuous: boolean;

  constructor(
    private readonly r: GenerationRequest,
    readonly record: TruthRecord,
    private readonly res: ServerResponse,
  ) {
    this.stream = r.body.stream === true;
    this.streamOptions = (r.body.stream_options ?? {}) as Record<string, unknown>;
    this.continuous = this.streamOptions.continuous_usage_stats === true;
  }

  /** Answers with an error instead of a generation, recorded in the truth. */
  reject(status: number, message: string, type: string): void {
    this.record.rejected = { status, message };
    this.record.finishedAt = this.r.now();
    error(this.res, status, message, type);
  }

  /**
   * Admits the request, or answers it with an error and returns false: the engine can never
   * serve it (400), or its fault is an HTTP 429 or 500. Faults other than mid-stream ones are
   * recorded now; mid-stream ones when they happen (a stream that ends first never gets one).
   */
  admit(engine: ServingEngine): boolean {
    const invalid = engine.validate?.(this.r.engineRequest);
    if (invalid !== undefined) {
      this.reject(400, invalid, 'BadRequestError');
      return false;
    }
    const fault = this.r.fault;
    if (fault && !isMidStream(fault)) this.record.fault = fault;
    if (fault?.kind === 'http429') {
      this.reject(429, 'Too many requests (injected fault)', 'RateLimitError');
      return false;
    }
    if (fault?.kind === 'http500') {
      this.reject(500, 'Internal server error (injected fault)', 'InternalServerError');
      return false;
    }
    this.res.on('close', () => {
      this.closed = true;
    });
    return true;
  }

  /** A slow-start fault's wait before the response starts; false when the client left meanwhile. */
  async slowStart(): Promise<boolean> {
    const fault = this.r.fault;
    if (fault?.kind !== 'slow-start') return true;
    await new Promise((resolve) => setTimeout(resolve, fault.ms));
    if (!this.closed) return true;
    this.record.cancelled = true;
    return false;
  }

  /** Submits the request to the engine; its tokens are written as they come. */
  start(engine: ServingEngine, id: string): void {
    const { r, record } = this;
    this.format = new EventFormat(r.endpoint, r.model, id, r.created, r.plan);
    if (this.stream) {
      this.res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
      });
      this.res.flushHeaders();
    }
    const job = engine.submit(r.engineRequest, {
      onStart: (info) => {
        record.startedAt = r.now();
        if (info) record.cachedPromptTokens = info.cachedPromptTokens;
      },
      onTokens: (tokens, last) => this.onTokens(tokens, last),
    });
    this.job = job;
    // An engine of replicas says which one took the request (PhysicalEngine does).
    if ('replica' in job && typeof job.replica === 'number') record.replica = job.replica;
    this.res.on('close', () => {
      if (this.finished) return;
      record.cancelled = true;
      job.cancel();
    });
  }

  /** vLLM adds `completion_tokens_details.reasoning_tokens` when it parses reasoning. */
  private usage() {
    const { record } = this;
    const input = this.r.engineRequest.inputTokens;
    return {
      prompt_tokens: input,
      completion_tokens: record.outputTokens,
      total_tokens: input + record.outputTokens,
      ...(this.r.plan.reasoning
        ? { completion_tokens_details: { reasoning_tokens: record.reasoningTokens } }
        : {}),
    };
  }

  private onTokens(tokens: number, last: boolean): void {
    if (this.closed || this.finished) return;
    const format = this.format as EventFormat;
    if (!this.stream) {
      for (const part of format.parts(tokens)) this.count(part);
      if (last) this.finishJson();
      return;
    }
    this.streamTokens(format, tokens, last);
  }

  /** One emission of the engine as stream events, with the mid-stream fault when it is due. */
  private streamTokens(format: EventFormat, tokens: number, last: boolean): void {
    const { plan, fault } = this.r;
    const usage = () => (this.continuous ? this.usage() : undefined);
    let out = '';
    // vLLM's role-only first chat event carries no token (completion_tokens 0).
    if (!this.roleSent && this.r.endpoint === 'chat') {
      this.roleSent = true;
      out += format.event({ role: 'assistant', content: '' }, null, usage());
    }
    // One event per kind (and per tool call) of the tokens this emission carries.
    const parts = format.parts(tokens);
    parts.forEach((part, i) => {
      this.count(part);
      const finish = last && i === parts.length - 1 ? plan.finishReason : null;
      out += format.event(part.delta, finish, usage());
    });
    let stallNext = false;
    if (fault && isMidStream(fault) && this.record.outputTokens >= fault.afterTokens && !last) {
      if (fault.kind === 'reset') {
        this.reset(out, parts, fault);
        return;
      }
      if (fault.kind === 'malformed') {
        this.malformed(out, parts, fault, format);
        return;
      }
      stallNext = fault.kind === 'stall' && this.stallUntil === 0;
    }
    if (last) {
      if (this.streamOptions.include_usage === true) out += format.usageEvent(this.usage());
      out += 'data: [DONE]\n\n';
    }
    this.write(out, parts, last);
    // The stall begins after this event: `afterTokens` tokens have gone out, as documented.
    if (stallNext && fault) {
      this.record.fault = fault;
      this.stallUntil = this.r.now() + fault.ms;
    }
  }

  /** Reset fault: the server breaks the stream (the client did not go away: no `cancelled`). */
  private reset(out: string, parts: Part[], fault: InjectedFault): void {
    this.record.fault = fault;
    this.sent(parts);
    this.job?.cancel();
    this.finish();
    // Destroy only once the bytes are out: the socket is corked until the next tick, and
    // destroying it now would drop the last event the truth says was sent.
    this.res.write(out, () => this.res.destroy());
  }

  /** Malformed fault: an event cut off mid-JSON, then the end of the stream. */
  private malformed(out: string, parts: Part[], fault: InjectedFault, format: EventFormat): void {
    this.record.fault = fault;
    this.sent(parts);
    this.res.write(`${out}data: {"id":"${format.id}","choices":[{"delta":\n\n`);
    this.job?.cancel();
    this.finish();
    this.res.end();
  }

  private count(part: Part): void {
    const { record } = this;
    record.outputTokens += part.tokens;
    if (part.kind === 'reasoning') record.reasoningTokens += part.tokens;
    if (part.kind === 'toolCall') record.toolCallTokens += part.tokens;
  }

  private finish(): void {
    this.finished = true;
    this.record.finishedAt = this.r.now();
  }

  /** Truth events for the parts of one write: one per kind, as the bytes leave together. */
  private sent(parts: Part[]): void {
    const at = this.r.now();
    let prev: TruthRecord['events'][number] | undefined;
    for (const { tokens, kind } of parts) {
      if (prev?.kind === kind) prev.tokens += tokens;
      else {
        prev = { at, tokens, kind };
        this.record.events.push(prev);
      }
    }
  }

  private emit(out: string, parts: Part[], last: boolean): void {
    this.sent(parts);
    this.res.write(out);
    if (last) {
      this.finish();
      this.res.end();
    }
  }

  /** Writes now, or, while stalled, holds the bytes to send them at once when the stall ends. */
  private write(out: string, parts: Part[], last: boolean): void {
    const held = this.held;
    if (this.r.now() >= this.stallUntil && held.timer === undefined) {
      this.emit(out, parts, last);
      return;
    }
    // Stalled: hold the bytes and send them at once when the stall ends, like a network stall.
    held.out += out;
    held.parts.push(...parts);
    held.last ||= last;
    held.timer ??= setTimeout(() => this.release(), Math.max(0, this.stallUntil - this.r.now()));
  }

  private release(): void {
    if (this.closed) return;
    const { out, parts, last } = this.held;
    Object.assign(this.held, { out: '', parts: [], last: false, timer: undefined });
    this.emit(out, parts, last);
  }

  /** The whole answer in one body, at the end (after a stall fault's wait). */
  private finishJson(): void {
    const fault = this.r.fault;
    const format = this.format as EventFormat;
    const send = () => {
      if (this.closed) return;
      this.finish();
      if (fault) this.record.fault = fault;
      // The whole answer in one body: one event per kind, all at once.
      this.sent(format.totals());
      if (fault?.kind === 'reset') return this.res.destroy();
      if (fault?.kind === 'malformed') {
        this.res.writeHead(200, { 'content-type': 'application/json' });
        return this.res.end('{"id":"broken","choices":[');
      }
      json(this.res, 200, format.whole(this.usage()));
    };
    if (fault?.kind === 'stall') setTimeout(send, fault.ms);
    else send();
  }
}
