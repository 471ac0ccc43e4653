import { createParser } from 'eventsource-parser';
import { clip, type DecodedStream, type StreamFault, Timeline } from './timeline.js';
import type { StreamDecoder } from './types.js';

/** How a server frames its stream: Server-Sent Events or newline-delimited JSON. */
export type Framing = 'sse' | 'ndjson';

/** Maps one parsed JSON message of a backend's stream onto the timeline. */
export type MessageParser = (message: Record<string, unknown>, timeline: Timeline) => void;

/**
 * A decoder for JSON messages in SSE or NDJSON framing. `[DONE]` ends an SSE stream; anything
 * else must be a JSON object, or the stream is a `bad_stream`. Every event completed by one
 * piece of network data shares that piece's arrival time.
 */
export function createDecoder(
  framing: Framing,
  sentAtUs: number,
  parse: MessageParser,
): StreamDecoder {
  const timeline = new Timeline(sentAtUs);
  const onMessage = (data: string) => {
    if (timeline.fault || timeline.doneUs !== undefined) return;
    if (framing === 'sse' && data === '[DONE]') {
      timeline.markDone();
      return;
    }
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      timeline.fault = { kind: 'bad_stream', message: `malformed JSON in event: ${clip(data)}` };
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
    const parser = createParser({ onEvent: (event) => onMessage(event.data) });
    feedText = (text) => parser.feed(text);
    flush = () => parser.reset({ consume: true });
  } else {
    let pending = '';
    const line = (raw: string) => {
      const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (text.trim().length > 0) onMessage(text);
    };
    feedText = (text) => {
      pending += text;
      let newline = pending.indexOf('\n');
      while (newline >= 0) {
        line(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
        newline = pending.indexOf('\n');
      }
    };
    flush = () => {
      line(pending);
      pending = '';
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
      flush();
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
