import type { EventTimeline, RequestError, ServerTiming, TokenCountSource } from '../record.js';

/** A stream-level failure a decoder detected: it becomes the record's error as it is. */
export type StreamFault = RequestError;

/** What a finished stream amounts to, ready to go into a record. */
export interface DecodedStream {
  events: EventTimeline;
  /** Offsets in microseconds from `sentAt` (undefined when no such event). */
  firstTokenUs?: number;
  firstContentUs?: number;
  lastTokenUs?: number;
  /** Offset of the end-of-stream marker (`[DONE]`, a final message), when one arrived. */
  doneUs?: number;
  outputTokens: number;
  outputTokensSource: TokenCountSource;
  inputTokens?: number;
  tokenCountMismatch?: number;
  finishReason?: string;
  serverTiming?: ServerTiming;
}

/** One parsed stream event, in the terms every wire format maps to. */
export interface StreamEvent {
  /** Visible output text carried by the event. */
  content?: string;
  /** Reasoning output text (counts as output, but not for TTFC). */
  reasoning?: string;
  /** Exact output tokens this event carries, when the server says (TGI: one token object). */
  tokens?: number;
  /** Cumulative output tokens so far, when the server says (per-event usage, SGLang meta_info). */
  completionTokens?: number;
}

const UNKNOWN = -1;

/**
 * Accumulates the per-event token timeline of one response (docs/metrics.md, "The raw record") and settles
 * token counts at the end. Every backend's parser feeds it; the accounting is the same for all.
 */
export class Timeline {
  private readonly sentAtUs: number;
  private previousUs: number;
  /** Time of the network data being parsed; set by the decoder before each piece. */
  nowUs = 0;
  private readonly dtUs: number[] = [];
  private readonly baseTokens: number[] = [];
  private readonly exactTokens: number[] = [];
  private readonly cumulative: number[] = [];
  private readonly contentChars: number[] = [];
  private readonly reasoningChars: number[] = [];
  private hasReasoning = false;
  /** Token-carrying events since the counter was last read (for coalescing statistics). */
  tokenEventsSinceRead = 0;
  totalCompletionTokens: number | undefined;
  promptTokens: number | undefined;
  finishReason: string | undefined;
  serverTiming: ServerTiming | undefined;
  doneUs: number | undefined;
  fault: StreamFault | undefined;

  constructor(sentAtUs: number) {
    this.sentAtUs = sentAtUs;
    this.previousUs = sentAtUs;
  }

  get eventCount(): number {
    return this.dtUs.length;
  }

  /** Records one event at the current time. */
  event(e: StreamEvent): void {
    const content = e.content ?? '';
    const reasoning = e.reasoning ?? '';
    this.dtUs.push(this.nowUs - this.previousUs);
    this.previousUs = this.nowUs;
    const carriesText = content.length > 0 || reasoning.length > 0;
    const exact = e.tokens ?? UNKNOWN;
    this.baseTokens.push(carriesText ? 1 : 0);
    this.exactTokens.push(exact);
    this.cumulative.push(e.completionTokens ?? UNKNOWN);
    this.contentChars.push(content.length);
    this.reasoningChars.push(reasoning.length);
    if (reasoning.length > 0) this.hasReasoning = true;
    if (carriesText || exact > 0) this.tokenEventsSinceRead++;
  }

  /** The end-of-stream marker arrived now. */
  markDone(): void {
    this.doneUs ??= this.nowUs - this.sentAtUs;
  }

  /** Settles token counts once the stream has ended. */
  finish(): DecodedStream {
    const n = this.dtUs.length;
    const tokens = new Array<number>(n);
    let source: TokenCountSource = 'events';
    let tokenEvents = 0;
    let everyExact = true;
    let everyCumulative = true;
    for (let i = 0; i < n; i++) {
      const isTokenEvent = this.baseTokens[i] > 0 || this.exactTokens[i] > 0;
      if (!isTokenEvent) continue;
      tokenEvents++;
      if (this.exactTokens[i] === UNKNOWN) everyExact = false;
      if (this.cumulative[i] === UNKNOWN) everyCumulative = false;
    }
    if (tokenEvents > 0 && everyExact) {
      source = 'server';
      for (let i = 0; i < n; i++) tokens[i] = Math.max(0, this.exactTokens[i]);
    } else if (tokenEvents > 0 && everyCumulative) {
      // Deltas run between token events only: some servers already count the first token in
      // the usage of a role-only event, which must not leave the first content event with 0.
      source = 'server';
      let previous = 0;
      for (let i = 0; i < n; i++) {
        tokens[i] = 0;
        if (this.baseTokens[i] === 0 && this.exactTokens[i] <= 0) continue;
        tokens[i] = Math.max(0, this.cumulative[i] - previous);
        previous = this.cumulative[i];
      }
    } else {
      for (let i = 0; i < n; i++) tokens[i] = this.baseTokens[i];
    }
    let sum = 0;
    for (let i = 0; i < n; i++) sum += tokens[i];
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
    const total = this.totalCompletionTokens;
    if (total !== undefined) {
      if (total !== sum && total >= tokenEvents && tokenEvents > 0) {
        if (source !== 'events') decoded.tokenCountMismatch = total - sum;
        rescale(tokens, total);
      }
      decoded.outputTokens = total;
      decoded.outputTokensSource = 'server';
    }
    if (this.promptTokens !== undefined) decoded.inputTokens = this.promptTokens;
    if (this.finishReason !== undefined) decoded.finishReason = this.finishReason;
    if (this.serverTiming !== undefined) decoded.serverTiming = this.serverTiming;
    if (this.doneUs !== undefined) decoded.doneUs = this.doneUs;
    let atUs = 0;
    for (let i = 0; i < n; i++) {
      atUs += this.dtUs[i];
      if (tokens[i] > 0) {
        if (decoded.firstTokenUs === undefined) decoded.firstTokenUs = atUs;
        decoded.lastTokenUs = atUs;
        if (decoded.firstContentUs === undefined && this.contentChars[i] > 0) {
          decoded.firstContentUs = atUs;
        }
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

/** Shortens server text for error messages. */
export function clip(text: string, max = 300): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
