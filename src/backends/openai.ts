import { createParser, type EventSourceParser } from 'eventsource-parser';
import type { ErrorKind, EventTimeline, TokenCountSource } from '../record.js';

/** Which OpenAI-compatible route to call. */
export type Endpoint = 'chat' | 'completions';

export const ENDPOINT_PATHS: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
};

/** One request the workload wants sent. */
export interface RequestSpec {
  prompt: string;
  requestedInputTokens: number;
  requestedOutputTokens: number;
}

export interface OpenAIRequestOptions {
  endpoint: Endpoint;
  model: string;
  temperature: number;
  /** Ask vLLM/SGLang to generate exactly `max_tokens` (they accept `ignore_eos`). */
  ignoreEos: boolean;
  /** Ask for usage on every event (vLLM `continuous_usage_stats`) to count tokens per event. */
  continuousUsageStats: boolean;
  /** Merged last into the body, so it can override anything above. */
  extraBody?: Record<string, unknown>;
}

export function buildRequestBody(spec: RequestSpec, options: OpenAIRequestOptions): string {
  const body: Record<string, unknown> = { model: options.model };
  if (options.endpoint === 'chat') body.messages = [{ role: 'user', content: spec.prompt }];
  else body.prompt = spec.prompt;
  body.max_tokens = spec.requestedOutputTokens;
  body.temperature = options.temperature;
  body.stream = true;
  body.stream_options = options.continuousUsageStats
    ? { include_usage: true, continuous_usage_stats: true }
    : { include_usage: true };
  if (options.ignoreEos) body.ignore_eos = true;
  return JSON.stringify(options.extraBody ? { ...body, ...options.extraBody } : body);
}

/** A stream-level failure the decoder detected. */
export interface StreamFault {
  kind: ErrorKind;
  message: string;
  status?: number;
}

/** What a finished stream amounts to, ready to go into a record. */
export interface DecodedStream {
  events: EventTimeline;
  /** Offsets in microseconds from `sentAt` (undefined when no such event). */
  firstTokenUs?: number;
  firstContentUs?: number;
  lastTokenUs?: number;
  /** Offset of the `[DONE]` sentinel, when one arrived. */
  doneUs?: number;
  outputTokens: number;
  outputTokensSource: TokenCountSource;
  inputTokens?: number;
  tokenCountMismatch?: number;
  finishReason?: string;
}

const NO_USAGE = -1;

/**
 * Turns an OpenAI-compatible SSE stream into the per-event token timeline (METRICS.md section 1).
 * Feed it decoded text with the time it arrived; every event completed by that piece shares the
 * timestamp. Role-only, empty, keep-alive and usage-only events are kept as events
 * with zero tokens and never count as tokens.
 */
export class OpenAIStreamDecoder {
  private readonly chat: boolean;
  private readonly parser: EventSourceParser;
  private readonly sentAtUs: number;
  private previousUs: number;
  private readUs = 0;
  private readTokenEvents = 0;
  private readonly dtUs: number[] = [];
  private readonly tokens: number[] = [];
  private readonly contentChars: number[] = [];
  private readonly reasoningChars: number[] = [];
  private hasReasoning = false;
  /** Cumulative `usage.completion_tokens` carried by each event, or NO_USAGE. */
  private readonly eventUsage: number[] = [];
  private finalCompletionTokens: number | undefined;
  private promptTokens: number | undefined;
  private finishReason: string | undefined;
  private doneUs: number | undefined;
  /** Set when the stream proved malformed or carried an error; the caller stops reading. */
  fault: StreamFault | undefined;

  constructor(endpoint: Endpoint, sentAtUs: number) {
    this.chat = endpoint === 'chat';
    this.sentAtUs = sentAtUs;
    this.previousUs = sentAtUs;
    this.parser = createParser({ onEvent: (event) => this.onEvent(event.data) });
  }

  get done(): boolean {
    return this.doneUs !== undefined;
  }

  /**
   * Parses one piece of the body (an HTTP chunk) that arrived at `atUs`. Returns how many
   * token-carrying events it completed; they all share that timestamp.
   */
  feed(text: string, atUs: number): number {
    this.readUs = atUs;
    this.readTokenEvents = 0;
    this.parser.feed(text);
    return this.readTokenEvents;
  }

  /** Flushes a final event that lacked its trailing blank line (some servers end that way). */
  end(atUs: number): void {
    this.readUs = atUs;
    this.parser.reset({ consume: true });
  }

  private onEvent(data: string): void {
    if (this.fault || this.doneUs !== undefined) return;
    if (data === '[DONE]') {
      this.doneUs = this.readUs - this.sentAtUs;
      return;
    }
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      this.fault = { kind: 'bad_stream', message: `malformed JSON in event: ${clip(data)}` };
      return;
    }
    if (typeof message !== 'object' || message === null) {
      this.fault = { kind: 'bad_stream', message: `event is not a JSON object: ${clip(data)}` };
      return;
    }
    const m = message as Record<string, unknown>;
    if (m.error !== undefined && m.choices === undefined) {
      this.fault = inStreamError(m.error);
      return;
    }
    let content = '';
    let reasoning = '';
    const choices = m.choices;
    if (Array.isArray(choices) && choices.length > 0) {
      const choice = choices[0] as Record<string, unknown>;
      if (this.chat) {
        const delta = choice.delta as Record<string, unknown> | undefined;
        if (delta) {
          if (typeof delta.content === 'string') content = delta.content;
          if (typeof delta.reasoning_content === 'string') reasoning = delta.reasoning_content;
          else if (typeof delta.reasoning === 'string') reasoning = delta.reasoning;
        }
      } else if (typeof choice.text === 'string') {
        content = choice.text;
      }
      if (typeof choice.finish_reason === 'string') this.finishReason = choice.finish_reason;
    }
    let usageTokens = NO_USAGE;
    const usage = m.usage as Record<string, unknown> | null | undefined;
    if (usage && typeof usage === 'object') {
      if (typeof usage.completion_tokens === 'number') {
        usageTokens = usage.completion_tokens;
        this.finalCompletionTokens = usage.completion_tokens;
      }
      if (typeof usage.prompt_tokens === 'number') this.promptTokens = usage.prompt_tokens;
    }
    const atUs = this.readUs;
    this.dtUs.push(atUs - this.previousUs);
    this.previousUs = atUs;
    const carriesText = content.length > 0 || reasoning.length > 0;
    this.tokens.push(carriesText ? 1 : 0);
    this.contentChars.push(content.length);
    this.reasoningChars.push(reasoning.length);
    if (reasoning.length > 0) this.hasReasoning = true;
    this.eventUsage.push(usageTokens);
    if (carriesText) this.readTokenEvents++;
  }

  /** Settles token counts once the stream has ended (METRICS.md section 1). */
  finish(): DecodedStream {
    const { tokens, eventUsage } = this;
    let source: TokenCountSource = 'events';
    let tokenEvents = 0;
    let everyTokenEventHasUsage = true;
    for (let i = 0; i < tokens.length; i++) {
      if (tokens[i] === 0) continue;
      tokenEvents++;
      if (eventUsage[i] === NO_USAGE) everyTokenEventHasUsage = false;
    }
    // Usage on every token event (continuous usage stats): the deltas are the server's own.
    if (tokenEvents > 0 && everyTokenEventHasUsage) {
      source = 'server';
      // Deltas run between token events only: some servers already count the first token in
      // the usage of a role-only event, which must not leave the first content event with 0.
      let previous = 0;
      for (let i = 0; i < tokens.length; i++) {
        if (tokens[i] === 0) continue;
        tokens[i] = Math.max(0, eventUsage[i] - previous);
        previous = eventUsage[i];
      }
    }
    let sum = 0;
    for (let i = 0; i < tokens.length; i++) sum += tokens[i];
    const decoded: DecodedStream = {
      events: {
        dtUs: this.dtUs,
        tokens,
        contentChars: this.contentChars,
        ...(this.hasReasoning ? { reasoningChars: this.reasoningChars } : {}),
      },
      outputTokens: sum,
      outputTokensSource: source,
    };
    if (this.finalCompletionTokens !== undefined) {
      const total = this.finalCompletionTokens;
      if (total !== sum && total >= tokenEvents && tokenEvents > 0) {
        if (source !== 'events') decoded.tokenCountMismatch = total - sum;
        rescale(tokens, total);
      }
      decoded.outputTokens = total;
      decoded.outputTokensSource = 'server';
    }
    if (this.promptTokens !== undefined) decoded.inputTokens = this.promptTokens;
    if (this.finishReason !== undefined) decoded.finishReason = this.finishReason;
    if (this.doneUs !== undefined) decoded.doneUs = this.doneUs;
    let atUs = 0;
    for (let i = 0; i < tokens.length; i++) {
      atUs += this.dtUs[i];
      if (tokens[i] > 0) {
        if (decoded.firstTokenUs === undefined) decoded.firstTokenUs = atUs;
        decoded.lastTokenUs = atUs;
      }
      if (decoded.firstContentUs === undefined && this.contentChars[i] > 0 && tokens[i] > 0) {
        decoded.firstContentUs = atUs;
      }
    }
    return decoded;
  }
}

/**
 * Rescales per-event token counts in place so they sum to `total` (at least the number of
 * token-carrying events): each gets its proportional share rounded down, at least one, and the
 * tokens left over go to the largest remainders (ties: earlier events first).
 */
export function rescale(tokens: number[], total: number): void {
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
  // Too few: top up the largest remainders. Too many (from the at-least-one floor): take back
  // from the smallest remainders that can spare a token.
  for (let j = 0; assigned < total; j = (j + 1) % remainders.length, assigned++) {
    tokens[remainders[j].index]++;
  }
  for (let j = remainders.length - 1; assigned > total; j = j > 0 ? j - 1 : remainders.length - 1) {
    const i = remainders[j].index;
    if (tokens[i] > 1) {
      tokens[i]--;
      assigned--;
    }
  }
}

/** Reads an error body (OpenAI `{error: {message}}`, FastAPI `{detail}`, or text). */
export function errorBodyMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as Record<string, unknown>;
    const error = parsed.error;
    if (typeof error === 'string') return clip(error);
    if (error && typeof error === 'object') {
      const message = (error as Record<string, unknown>).message;
      if (typeof message === 'string') return clip(message);
    }
    if (typeof parsed.message === 'string') return clip(parsed.message);
    if (typeof parsed.detail === 'string') return clip(parsed.detail);
  } catch {
    // not JSON: fall through to the raw text
  }
  return clip(body.trim()) || '(empty body)';
}

function inStreamError(error: unknown): StreamFault {
  const e = (typeof error === 'object' && error !== null ? error : { message: String(error) }) as {
    message?: unknown;
    code?: unknown;
  };
  const status = typeof e.code === 'number' ? e.code : undefined;
  const message = `error event in stream: ${clip(String(e.message ?? JSON.stringify(error)))}`;
  const kind: ErrorKind =
    status !== undefined && status >= 400 && status < 500 ? 'http_4xx' : 'http_5xx';
  return status === undefined ? { kind, message } : { kind, message, status };
}

function clip(text: string, max = 300): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
