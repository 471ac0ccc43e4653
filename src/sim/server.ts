import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { ServingEngine } from './engine.js';

/** Server-side ground truth for one request, on the simulator's own clock (ms since it started). */
export interface TruthRecord {
  /** The client's `x-request-id` header, or the simulator's own counter. */
  requestId: string;
  endpoint: 'chat' | 'completions';
  /** Request headers received (before the body is read). */
  arrivedAt: number;
  /** A slot was free and generation began. */
  startedAt?: number;
  /** Each stream write that carried tokens: when it was handed to the socket and how many. */
  events: { at: number; tokens: number }[];
  inputTokens: number;
  outputTokens: number;
  finishedAt?: number;
  /** The client went away before the end. */
  cancelled?: boolean;
}

export interface SimServerOptions {
  /** Model id served at `/v1/models` and required in requests. */
  model: string;
  engine: ServingEngine;
  /** Truth records kept (oldest dropped first). */
  truthLimit: number;
  host: string;
  port: number;
}

export interface RunningSimServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The simulator counts one token per whitespace-separated word (its documented tokenizer). */
export function countWords(text: string): number {
  let count = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const space = c === 32 || c === 10 || c === 9 || c === 13;
    if (!space && !inWord) count++;
    inWord = !space;
  }
  return count;
}

const MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_MAX_TOKENS = 256;

/**
 * An OpenAI-compatible streaming server (`/v1/completions`, `/v1/chat/completions`,
 * `/v1/models`) in front of a simulated engine, with ground truth at `GET /debug/truth`.
 * Its events look like vLLM's: a role-only first chat event, `finish_reason` on the last
 * token event, a usage-only event when `stream_options.include_usage` is set, then `[DONE]`.
 */
export function startSimServer(options: SimServerOptions): Promise<RunningSimServer> {
  const origin = performance.now();
  const now = () => performance.now() - origin;
  const truth: TruthRecord[] = [];
  let counter = 0;
  const created = Math.floor(Date.now() / 1000);

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    if (req.method === 'GET' && url === '/v1/models') {
      return json(res, 200, {
        object: 'list',
        data: [{ id: options.model, object: 'model', created, owned_by: 'infergauge-sim' }],
      });
    }
    if (req.method === 'GET' && (url === '/health' || url === '/ping')) return json(res, 200, {});
    if (req.method === 'GET' && url === '/debug/truth') return json(res, 200, { requests: truth });
    if (req.method === 'POST' && url === '/debug/truth/reset') {
      truth.length = 0;
      return json(res, 200, {});
    }
    const endpoint =
      url === '/v1/chat/completions' ? 'chat' : url === '/v1/completions' ? 'completions' : null;
    if (req.method !== 'POST' || endpoint === null) {
      return error(res, 404, `no route ${req.method} ${url}`, 'NotFoundError');
    }
    const arrivedAt = now();
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    } catch (err) {
      return error(res, 400, `invalid JSON body: ${(err as Error).message}`, 'BadRequestError');
    }
    if (body.model !== options.model) {
      return error(
        res,
        404,
        `The model \`${String(body.model)}\` does not exist.`,
        'NotFoundError',
      );
    }
    const inputTokens = countInput(endpoint, body);
    if (inputTokens === undefined) {
      const field = endpoint === 'chat' ? 'messages' : 'prompt';
      return error(res, 400, `\`${field}\` is missing or not text`, 'BadRequestError');
    }
    const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? DEFAULT_MAX_TOKENS;
    if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 0) {
      return error(res, 400, '`max_tokens` must be a non-negative integer', 'BadRequestError');
    }
    const requestId = String(req.headers['x-request-id'] ?? `sim-${counter}`);
    const record: TruthRecord = {
      requestId,
      endpoint,
      arrivedAt,
      events: [],
      inputTokens,
      outputTokens: 0,
    };
    truth.push(record);
    if (truth.length > options.truthLimit) truth.splice(0, truth.length - options.truthLimit);
    const stream = body.stream === true;
    const streamOptions = (body.stream_options ?? {}) as Record<string, unknown>;
    const format = new EventFormat(endpoint, options.model, `cmpl-${counter++}`, created);
    const usage = () => ({
      prompt_tokens: inputTokens,
      completion_tokens: record.outputTokens,
      total_tokens: inputTokens + record.outputTokens,
    });
    let finished = false;
    if (stream) {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
      });
      res.flushHeaders();
    }
    const job = options.engine.submit(
      { inputTokens, maxOutputTokens: maxTokens },
      {
        onStart: () => {
          record.startedAt = now();
        },
        onTokens: (tokens, last) => {
          if (!stream) {
            record.outputTokens += tokens;
            if (last) finishJson();
            return;
          }
          const continuous = streamOptions.continuous_usage_stats === true;
          let out = '';
          // vLLM's role-only first chat event carries no token (completion_tokens 0).
          if (record.events.length === 0 && endpoint === 'chat') {
            out += format.event(
              { role: 'assistant', content: '' },
              null,
              continuous ? usage() : undefined,
            );
          }
          record.outputTokens += tokens;
          if (tokens > 0) {
            out += format.event(
              format.text(tokens),
              last ? 'length' : null,
              continuous ? usage() : undefined,
            );
          }
          if (last) {
            if (streamOptions.include_usage === true) out += format.usageEvent(usage());
            out += 'data: [DONE]\n\n';
          }
          record.events.push({ at: now(), tokens });
          res.write(out);
          if (last) {
            finished = true;
            record.finishedAt = now();
            res.end();
          }
        },
      },
    );
    const finishJson = () => {
      finished = true;
      record.finishedAt = now();
      record.events.push({ at: now(), tokens: record.outputTokens });
      json(res, 200, format.whole(record.outputTokens, usage()));
    };
    res.on('close', () => {
      if (finished) return;
      record.cancelled = true;
      job.cancel();
    });
  };

  const server: Server = createServer({ noDelay: true, keepAliveTimeout: 65_000 }, (req, res) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) error(res, 500, err.message, 'InternalServerError');
      else res.destroy(err);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    // A deep accept queue: a client opening 1,000+ connections at once must not wait in SYN
    // retries (Node's default backlog is 511), which would read as seconds of TTFT.
    server.listen({ port: options.port, host: options.host, backlog: 4096 }, () => {
      const { port } = server.address() as AddressInfo;
      const host = options.host.includes(':') ? `[${options.host}]` : options.host;
      resolve({
        url: `http://${host}:${port}`,
        port,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/** Builds the JSON of stream events in the OpenAI/vLLM shape. */
class EventFormat {
  private readonly head: string;
  private words = 0;

  constructor(
    private readonly endpoint: 'chat' | 'completions',
    model: string,
    id: string,
    created: number,
  ) {
    const object = endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    this.head = `{"id":"${id}","object":"${object}","created":${created},"model":${JSON.stringify(model)},"choices":`;
  }

  /** Generated text for `tokens` tokens: one word per token, as the simulator counts. */
  text(tokens: number): string {
    let text = '';
    for (let i = 0; i < tokens; i++) text += ` w${this.words++ % 1000}`;
    return text;
  }

  event(
    delta: string | { role: string; content: string },
    finishReason: string | null,
    usage?: object,
  ): string {
    const finish = finishReason === null ? 'null' : `"${finishReason}"`;
    const choice =
      this.endpoint === 'chat'
        ? `{"index":0,"delta":${JSON.stringify(typeof delta === 'string' ? { content: delta } : delta)},"logprobs":null,"finish_reason":${finish}}`
        : `{"index":0,"text":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish}}`;
    const tail = usage ? `,"usage":${JSON.stringify(usage)}}` : '}';
    return `data: ${this.head}[${choice}]${tail}\n\n`;
  }

  usageEvent(usage: object): string {
    return `data: ${this.head}[],"usage":${JSON.stringify(usage)}}\n\n`;
  }

  whole(tokens: number, usage: object): object {
    const text = this.text(tokens);
    const choice =
      this.endpoint === 'chat'
        ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }
        : { index: 0, text, finish_reason: 'length' };
    return {
      ...JSON.parse(`${this.head}[]}`),
      object: this.endpoint === 'chat' ? 'chat.completion' : 'text_completion',
      choices: [choice],
      usage,
    };
  }
}

function countInput(
  endpoint: 'chat' | 'completions',
  body: Record<string, unknown>,
): number | undefined {
  if (endpoint === 'completions') {
    return typeof body.prompt === 'string' ? countWords(body.prompt) : undefined;
  }
  if (!Array.isArray(body.messages)) return undefined;
  let total = 0;
  for (const message of body.messages as { content?: unknown }[]) {
    const content = message?.content;
    if (typeof content === 'string') total += countWords(content);
    else if (Array.isArray(content)) {
      for (const part of content as { text?: unknown }[]) {
        if (typeof part?.text === 'string') total += countWords(part.text);
      }
    } else return undefined;
  }
  return total;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error(`body over ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function error(res: ServerResponse, status: number, message: string, type: string): void {
  json(res, status, { error: { message, type, code: status } });
}
