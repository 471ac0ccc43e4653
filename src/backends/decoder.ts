import { SseFramer, type SseSink } from './sse.js';
import {
  clip,
  type DecodedStream,
  REQUEST_BOUNDS,
  type StreamFault,
  Timeline,
  tooLarge,
} from './timeline.js';
import type { StreamDecoder } from './types.js';

/** How a server frames its stream: Server-Sent Events or newline-delimited JSON. */
export type Framing = 'sse' | 'ndjson';

/** Maps one parsed JSON message of a backend's stream onto the timeline. */
export type MessageParser = (message: Record<string, unknown>, timeline: Timeline) => void;

/** How one backend's stream is read, and what ends its answer. */
export interface StreamProtocol {
  framing: Framing;
  parse: MessageParser;
  /**
   * The protocol's end of an answer, in words for the error message (`[DONE]`, `stop: true`):
   * a stream that closes before it is `truncated`. The parser calls `markDone` or
   * `markComplete` when it arrives. Undefined: the protocol has none, and a clean close ends
   * the answer (Triton).
   */
  endMarker?: string;
  /**
   * A cheaper reader of the protocol's common messages, tried before `JSON.parse` and `parse`:
   * it reads the message's JSON text `text[start, end)` and returns true when it recorded
   * exactly what `parse` would have; anything it does not handle it leaves untouched and
   * returns false, and the full path reads it.
   */
  scan?: MessageScanner;
}

/** See StreamProtocol.scan. */
export type MessageScanner = (
  text: string,
  start: number,
  end: number,
  timeline: Timeline,
) => boolean;

/**
 * A decoder for JSON messages in SSE or NDJSON framing. `[DONE]` ends an SSE stream; anything
 * else must be a JSON object, or the stream is a `bad_stream`. Every event completed by one
 * piece of network data shares that piece's arrival time. At the body's end it judges the
 * answer: bytes after the last complete event that do not parse (a cut mid-event), or a stream
 * without the protocol's end marker, make it `truncated`, with the tokens seen so far kept.
 * `maxOutputTokens` is the request's output limit, when it set one (see Timeline.count);
 * `captureAnswerBytes` keeps the answer's text and tool calls (sessions), up to that many
 * UTF-8 bytes. A line longer than REQUEST_BOUNDS.eventChars is a `too_large` fault.
 */
export function createDecoder(
  protocol: StreamProtocol,
  sentAtUs: number,
  maxOutputTokens?: number,
  captureAnswerBytes?: number,
): StreamDecoder {
  return new MessageDecoder(protocol, sentAtUs, maxOutputTokens, captureAnswerBytes);
}

/**
 * See createDecoder. One object with shared methods, not a closure per operation: a decoder
 * lives as long as its request, and what it holds is copied by every young-generation
 * collection it survives (issue 29).
 */
class MessageDecoder implements StreamDecoder, SseSink {
  private readonly timeline: Timeline;
  private readonly framer: SseFramer | undefined;
  /** Set while the body's end flushes an unterminated last message. */
  private atEnd = false;
  /**
   * NDJSON: the pieces of a line still unfinished (none holds a newline): only new text is
   * searched, so a 20 MB line arriving in small reads costs its length, not length times reads.
   * Made when a line is left over (an SSE stream never makes it).
   */
  private pending: string[] | undefined;
  private pendingChars = 0;

  constructor(
    private readonly protocol: StreamProtocol,
    sentAtUs: number,
    maxOutputTokens?: number,
    captureAnswerBytes?: number,
  ) {
    this.timeline = new Timeline(sentAtUs, maxOutputTokens, captureAnswerBytes);
    if (protocol.framing === 'sse') {
      this.framer = new SseFramer(this);
    }
  }

  get fault(): StreamFault | undefined {
    return this.timeline.fault;
  }

  get done(): boolean {
    return this.timeline.doneUs !== undefined;
  }

  get eventCount(): number {
    return this.timeline.eventCount;
  }

  feed(text: string, atUs: number): number {
    const timeline = this.timeline;
    timeline.nowUs = atUs;
    timeline.tokenEventsSinceRead = 0;
    const framer = this.framer;
    if (framer) {
      framer.feed(text);
      if (framer.overflowed) this.eventTooLarge();
    } else this.feedLines(text);
    return timeline.tokenEventsSinceRead;
  }

  end(atUs: number): void {
    const timeline = this.timeline;
    timeline.nowUs = atUs;
    this.atEnd = true;
    // The SSE standard drops an event its blank line never ended; ending it here instead lets
    // a last event whose data arrived whole count, and one cut short be seen as a cut.
    if (this.framer) this.framer.feed('\n\n');
    else if (this.pending !== undefined) {
      this.line(this.pending.join(''));
      this.pending = undefined;
    }
    const endMarker = this.protocol.endMarker;
    // No events at all is the caller's to judge (an empty 200 is a wrong route, not a cut).
    if (timeline.fault || timeline.complete || endMarker === undefined) return;
    if (timeline.eventCount === 0) return;
    timeline.fault = {
      kind: 'truncated',
      message: `the stream ended without its end marker (${endMarker}) after ${timeline.eventCount} events`,
    };
  }

  finish(): DecodedStream {
    return this.timeline.finish();
  }

  private eventTooLarge(): void {
    this.timeline.fault ??= tooLarge(`${REQUEST_BOUNDS.eventChars / 2 ** 20} MiB in one event`);
  }

  onSseData(text: string, start: number, end: number): void {
    this.message(text, start, end);
  }

  /** One message, `text[start, end)` (a range, so the common message is never copied). */
  private message(text: string, start: number, end: number): void {
    const timeline = this.timeline;
    if (timeline.fault || timeline.doneUs !== undefined) return;
    const protocol = this.protocol;
    if (protocol.framing === 'sse' && end - start === 6 && text.startsWith('[DONE]', start)) {
      timeline.markDone();
      return;
    }
    if (protocol.scan?.(text, start, end, timeline)) return;
    const data = start === 0 && end === text.length ? text : text.slice(start, end);
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      // An unterminated last message that does not parse was cut off, unless nothing came
      // before it (then the body was never a stream: a proxy page, a wrong route).
      timeline.fault =
        this.atEnd && timeline.eventCount > 0
          ? {
              kind: 'truncated',
              message: `the stream was cut mid-event (${data.length} characters of an unfinished event after ${timeline.eventCount} events)`,
            }
          : { kind: 'bad_stream', message: `malformed JSON in event: ${clip(data)}` };
      return;
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      timeline.fault = { kind: 'bad_stream', message: `event is not a JSON object: ${clip(data)}` };
      return;
    }
    protocol.parse(message as Record<string, unknown>, timeline);
  }

  private line(raw: string): void {
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (text.trim().length > 0) this.message(text, 0, text.length);
  }

  private feedLines(text: string): void {
    let start = 0;
    for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', start)) {
      const piece = text.slice(start, newline);
      if (this.pending !== undefined) {
        this.pending.push(piece);
        this.line(this.pending.join(''));
        this.pending = undefined;
        this.pendingChars = 0;
      } else this.line(piece);
      start = newline + 1;
    }
    if (start < text.length && !this.timeline.fault) {
      this.pending ??= [];
      this.pending.push(text.slice(start));
      this.pendingChars += text.length - start;
      if (this.pendingChars > REQUEST_BOUNDS.eventChars) {
        this.pending = undefined;
        this.eventTooLarge();
      }
    }
  }
}

/** Reads an error body (OpenAI `{error: {message}}`, TGI/Ollama `{error}`, FastAPI `{detail}`). */
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

/** An error object a server put inside its stream, as a fault of the right kind. */
export function inStreamError(error: unknown): StreamFault {
  const e = (typeof error === 'object' && error !== null ? error : { message: String(error) }) as {
    message?: unknown;
    code?: unknown;
  };
  const status = typeof e.code === 'number' ? e.code : undefined;
  const message = `error event in stream: ${clip(String(e.message ?? JSON.stringify(error)))}`;
  const kind = status !== undefined && status >= 400 && status < 500 ? 'http_4xx' : 'http_5xx';
  return status === undefined ? { kind, message } : { kind, message, status };
}
