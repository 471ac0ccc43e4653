import { SseFramer } from './sse.js';
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
 * `captureAnswerChars` keeps the answer's text and tool calls (sessions), up to that many
 * characters. A line longer than REQUEST_BOUNDS.eventChars is a `too_large` fault.
 */
export function createDecoder(
  protocol: StreamProtocol,
  sentAtUs: number,
  maxOutputTokens?: number,
  captureAnswerChars?: number,
): StreamDecoder {
  const { framing, parse, endMarker, scan } = protocol;
  const timeline = new Timeline(sentAtUs, maxOutputTokens, captureAnswerChars);
  const eventTooLarge = () => {
    timeline.fault ??= tooLarge(`${REQUEST_BOUNDS.eventChars / 2 ** 20} MiB in one event`);
  };
  /** Set while the body's end flushes an unterminated last message. */
  let atEnd = false;
  /** One message, `text[start, end)` (a range, so the common message is never copied). */
  const onMessage = (text: string, start: number, end: number) => {
    if (timeline.fault || timeline.doneUs !== undefined) return;
    if (framing === 'sse' && end - start === 6 && text.startsWith('[DONE]', start)) {
      timeline.markDone();
      return;
    }
    if (scan?.(text, start, end, timeline)) return;
    const data = start === 0 && end === text.length ? text : text.slice(start, end);
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      // An unterminated last message that does not parse was cut off, unless nothing came
      // before it (then the body was never a stream: a proxy page, a wrong route).
      timeline.fault =
        atEnd && timeline.eventCount > 0
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
    parse(message as Record<string, unknown>, timeline);
  };
  let feedText: (text: string) => void;
  let flush: () => void;
  if (framing === 'sse') {
    const framer = new SseFramer(onMessage);
    feedText = (text) => {
      framer.feed(text);
      if (framer.overflowed) eventTooLarge();
    };
    // The SSE standard drops an event its blank line never ended; ending it here instead lets
    // a last event whose data arrived whole count, and one cut short be seen as a cut.
    flush = () => framer.feed('\n\n');
  } else {
    // The pieces of a line still unfinished (none holds a newline): only new text is searched,
    // so a 20 MB line arriving in small reads costs its length, not its length times the reads.
    let pending: string[] = [];
    let pendingChars = 0;
    const line = (raw: string) => {
      const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (text.trim().length > 0) onMessage(text, 0, text.length);
    };
    feedText = (text) => {
      let start = 0;
      for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', start)) {
        const piece = text.slice(start, newline);
        if (pending.length > 0) {
          pending.push(piece);
          line(pending.join(''));
          pending = [];
          pendingChars = 0;
        } else line(piece);
        start = newline + 1;
      }
      if (start < text.length && !timeline.fault) {
        pending.push(text.slice(start));
        pendingChars += text.length - start;
        if (pendingChars > REQUEST_BOUNDS.eventChars) {
          pending = [];
          eventTooLarge();
        }
      }
    };
    flush = () => {
      line(pending.join(''));
      pending = [];
    };
  }
  return {
    feed(text, atUs) {
      timeline.nowUs = atUs;
      timeline.tokenEventsSinceRead = 0;
      feedText(text);
      return timeline.tokenEventsSinceRead;
    },
    end(atUs) {
      timeline.nowUs = atUs;
      atEnd = true;
      flush();
      // No events at all is the caller's to judge (an empty 200 is a wrong route, not a cut).
      if (timeline.fault || timeline.complete || endMarker === undefined) return;
      if (timeline.eventCount === 0) return;
      timeline.fault = {
        kind: 'truncated',
        message: `the stream ended without its end marker (${endMarker}) after ${timeline.eventCount} events`,
      };
    },
    finish: (): DecodedStream => timeline.finish(),
    get fault(): StreamFault | undefined {
      return timeline.fault;
    },
    get done() {
      return timeline.doneUs !== undefined;
    },
    get eventCount() {
      return timeline.eventCount;
    },
  };
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
