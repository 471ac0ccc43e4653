import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { simWord, splitWords } from '../workload/words.js';
import {
  type AnswerOptions,
  type AnswerPlan,
  answerWords,
  CONTENT_ANSWER,
  chatPromptWords,
  DEFAULT_ANSWER_OPTIONS,
  type PlannedCall,
  planAnswer,
  type TokenKind,
  type TokenText,
  tokenText,
  wholeCalls,
} from './answer.js';
import type { ServingEngine } from './engine.js';
import { type FaultPlan, faultFor, type InjectedFault } from './faults.js';

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

export interface SimServerOptions {
  /** Model id served at `/v1/models` and required in requests. */
  model: string;
  engine: ServingEngine;
  /** Truth records kept (oldest dropped first). */
  truthLimit: number;
  host: string;
  port: number;
  /** Seeded fault injection. */
  faults?: FaultPlan;
  /** Reported by `/tokenize` as `max_model_len`. */
  maxModelLen?: number;
  /** Tokens a chat template adds to every chat prompt (0: none, as for completions). */
  chatTemplateTokens?: number;
  /** Reasoning and tool-call answers (defaults: DEFAULT_ANSWER_OPTIONS). */
  answers?: AnswerOptions;
}

export interface RunningSimServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_MAX_TOKENS = 256;

/**
 * An OpenAI-compatible streaming server (`/v1/completions`, `/v1/chat/completions`,
 * `/v1/models`) in front of a simulated engine, with ground truth at `GET /debug/truth`.
 * Its events look like vLLM's: a role-only first chat event, `finish_reason` on the last
 * token event, a usage-only event when `stream_options.include_usage` is set, then `[DONE]`.
 * Chat answers may reason first and may be tool calls (answer.ts has their wire shapes).
 */
export function startSimServer(options: SimServerOptions): Promise<RunningSimServer> {
  const origin = performance.now();
  const now = () => performance.now() - origin;
  // The truth's 0 on the machine-wide monotonic clock, so a client on the same machine can
  // place its own timestamps against the server's (benchmarks of the client's timing error).
  const originHrMs = Number(process.hrtime.bigint()) / 1e6 - now();
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
    if (req.method === 'GET' && url === '/debug/truth') {
      return json(res, 200, { engine: options.engine.describe?.(), originHrMs, requests: truth });
    }
    if (req.method === 'POST' && url === '/debug/truth/reset') {
      truth.length = 0;
      return json(res, 200, {});
    }
    if (req.method === 'GET' && url === '/metrics' && options.engine.metricsText) {
      const text = options.engine.metricsText();
      res.writeHead(200, {
        'content-type': 'text/plain; version=0.0.4; charset=utf-8',
        'content-length': Buffer.byteLength(text),
      });
      return res.end(text);
    }
    if (req.method === 'POST' && url === '/tokenize') return tokenize(req, res);
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
    const promptWords = promptWordsOf(endpoint, body);
    if (typeof promptWords === 'string') return error(res, 400, promptWords, 'BadRequestError');
    // A chat template wraps the messages in tokens of its own; the engine processes them too.
    const inputTokens =
      promptWords.length + (endpoint === 'chat' ? (options.chatTemplateTokens ?? 0) : 0);
    const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? DEFAULT_MAX_TOKENS;
    if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 0) {
      return error(res, 400, '`max_tokens` must be a non-negative integer', 'BadRequestError');
    }
    const requestId = String(req.headers['x-request-id'] ?? `sim-${counter}`);
    const plan =
      endpoint === 'chat'
        ? planAnswer(body, maxTokens, requestId, options.answers ?? DEFAULT_ANSWER_OPTIONS)
        : CONTENT_ANSWER;
    if (typeof plan === 'string') return error(res, 400, plan, 'BadRequestError');
    const record: TruthRecord = {
      requestId,
      endpoint,
      arrivedAt,
      events: [],
      inputTokens,
      outputTokens: 0,
      reasoningTokens: 0,
      toolCallTokens: 0,
      toolCalls: plan.calls.length,
    };
    truth.push(record);
    if (truth.length > options.truthLimit) truth.splice(0, truth.length - options.truthLimit);
    const reject = (status: number, message: string, type: string) => {
      record.rejected = { status, message };
      record.finishedAt = now();
      error(res, status, message, type);
    };
    // The answer's words go to the engine too: its prefix cache keeps generated tokens' blocks,
    // which the next turn of a conversation (its history holds this answer) hits.
    const engineRequest = {
      inputTokens,
      maxOutputTokens: maxTokens,
      promptWords,
      outputWords: () => answerWords(plan, maxTokens),
    };
    const invalid = options.engine.validate?.(engineRequest);
    if (invalid !== undefined) return reject(400, invalid, 'BadRequestError');
    const fault = options.faults ? faultFor(options.faults, requestId) : undefined;
    // Mid-stream faults are recorded when they happen: a stream that ends first never gets one.
    const midStream =
      fault?.kind === 'reset' || fault?.kind === 'stall' || fault?.kind === 'malformed';
    if (fault && !midStream) record.fault = fault;
    if (fault?.kind === 'http429') {
      return reject(429, 'Too many requests (injected fault)', 'RateLimitError');
    }
    if (fault?.kind === 'http500') {
      return reject(500, 'Internal server error (injected fault)', 'InternalServerError');
    }
    let closed = false;
    res.on('close', () => {
      closed = true;
    });
    if (fault?.kind === 'slow-start') {
      await new Promise((resolve) => setTimeout(resolve, fault.ms));
      if (closed) {
        record.cancelled = true;
        return;
      }
    }
    const stream = body.stream === true;
    const streamOptions = (body.stream_options ?? {}) as Record<string, unknown>;
    const continuous = streamOptions.continuous_usage_stats === true;
    const format = new EventFormat(endpoint, options.model, `cmpl-${counter++}`, created, plan);
    // vLLM adds `completion_tokens_details.reasoning_tokens` when it parses reasoning.
    const usage = () => ({
      prompt_tokens: inputTokens,
      completion_tokens: record.outputTokens,
      total_tokens: inputTokens + record.outputTokens,
      ...(plan.reasoning
        ? { completion_tokens_details: { reasoning_tokens: record.reasoningTokens } }
        : {}),
    });
    let finished = false;
    /** Stall fault: writes wait until this time (ms on the simulator clock), then go together. */
    let stallUntil = 0;
    const held = {
      out: '',
      parts: [] as Part[],
      last: false,
      timer: undefined as NodeJS.Timeout | undefined,
    };
    let roleSent = false;
    if (stream) {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
      });
      res.flushHeaders();
    }
    const finish = () => {
      finished = true;
      record.finishedAt = now();
    };
    /** Truth events for the parts of one write: one per kind, as the bytes leave together. */
    const sent = (parts: Part[]) => {
      const at = now();
      let prev: TruthRecord['events'][number] | undefined;
      for (const { tokens, kind } of parts) {
        if (prev?.kind === kind) prev.tokens += tokens;
        else {
          prev = { at, tokens, kind };
          record.events.push(prev);
        }
      }
    };
    const emit = (out: string, parts: Part[], last: boolean) => {
      sent(parts);
      res.write(out);
      if (last) {
        finish();
        res.end();
      }
    };
    const release = () => {
      if (closed) return;
      const { out, parts, last } = held;
      Object.assign(held, { out: '', parts: [], last: false, timer: undefined });
      emit(out, parts, last);
    };
    const write = (out: string, parts: Part[], last: boolean) => {
      if (now() >= stallUntil && held.timer === undefined) return emit(out, parts, last);
      // Stalled: hold the bytes and send them at once when the stall ends, like a network stall.
      held.out += out;
      held.parts.push(...parts);
      held.last ||= last;
      held.timer ??= setTimeout(release, Math.max(0, stallUntil - now()));
    };
    const job = options.engine.submit(engineRequest, {
      onStart: (info) => {
        record.startedAt = now();
        if (info) record.cachedPromptTokens = info.cachedPromptTokens;
      },
      onTokens: (tokens, last) => {
        if (closed || finished) return;
        if (!stream) {
          for (const part of format.parts(tokens)) count(part);
          if (last) finishJson();
          return;
        }
        let out = '';
        // vLLM's role-only first chat event carries no token (completion_tokens 0).
        if (!roleSent && endpoint === 'chat') {
          roleSent = true;
          out += format.event(
            { role: 'assistant', content: '' },
            null,
            continuous ? usage() : undefined,
          );
        }
        // One event per kind (and per tool call) of the tokens this emission carries.
        const parts = format.parts(tokens);
        parts.forEach((part, i) => {
          count(part);
          const finish = last && i === parts.length - 1 ? plan.finishReason : null;
          out += format.event(part.delta, finish, continuous ? usage() : undefined);
        });
        let stallNext = false;
        if (fault && midStream && record.outputTokens >= fault.afterTokens && !last) {
          if (fault.kind === 'reset') {
            record.fault = fault;
            sent(parts);
            job.cancel();
            // The server broke the stream, the client did not go away (no `cancelled`).
            finish();
            // Destroy only once the bytes are out: the socket is corked until the next tick,
            // and destroying it now would drop the last event the truth says was sent.
            res.write(out, () => res.destroy());
            return;
          }
          if (fault.kind === 'malformed') {
            record.fault = fault;
            sent(parts);
            res.write(`${out}data: {"id":"${format.id}","choices":[{"delta":\n\n`);
            job.cancel();
            finish();
            res.end();
            return;
          }
          stallNext = fault.kind === 'stall' && stallUntil === 0;
        }
        if (last) {
          if (streamOptions.include_usage === true) out += format.usageEvent(usage());
          out += 'data: [DONE]\n\n';
        }
        write(out, parts, last);
        // The stall begins after this event: `afterTokens` tokens have gone out, as documented.
        if (stallNext && fault) {
          record.fault = fault;
          stallUntil = now() + fault.ms;
        }
      },
    });
    // An engine of replicas says which one took the request (PhysicalEngine does).
    if ('replica' in job && typeof job.replica === 'number') record.replica = job.replica;
    const count = (part: Part) => {
      record.outputTokens += part.tokens;
      if (part.kind === 'reasoning') record.reasoningTokens += part.tokens;
      if (part.kind === 'toolCall') record.toolCallTokens += part.tokens;
    };
    const finishJson = () => {
      const send = () => {
        if (closed) return;
        finish();
        if (fault) record.fault = fault;
        // The whole answer in one body: one event per kind, all at once.
        sent(format.totals());
        if (fault?.kind === 'reset') return res.destroy();
        if (fault?.kind === 'malformed') {
          res.writeHead(200, { 'content-type': 'application/json' });
          return res.end('{"id":"broken","choices":[');
        }
        json(res, 200, format.whole(usage()));
      };
      if (fault?.kind === 'stall') setTimeout(send, fault.ms);
      else send();
    };
    res.on('close', () => {
      if (finished) return;
      record.cancelled = true;
      job.cancel();
    });
  };

  /** vLLM's `POST /tokenize`: `{prompt}` or `{messages}` to `{count, max_model_len, tokens}`. */
  const tokenize = async (req: IncomingMessage, res: ServerResponse) => {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    } catch (err) {
      return error(res, 400, `invalid JSON body: ${(err as Error).message}`, 'BadRequestError');
    }
    const words = promptWordsOf(Array.isArray(body.messages) ? 'chat' : 'completions', body);
    if (typeof words === 'string') {
      return error(
        res,
        400,
        `\`prompt\` or \`messages\` is missing or not text: ${words}`,
        'BadRequestError',
      );
    }
    const tokens = words.map(tokenId);
    return json(res, 200, {
      count: tokens.length,
      max_model_len: options.maxModelLen ?? null,
      tokens,
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

/** A run of an emission's tokens of one kind (and one tool call), sent as one event. */
interface Part {
  kind: TokenKind;
  tokens: number;
  /** The chat delta (or the completion text) that carries them. */
  delta: Record<string, unknown> | string;
}

/** Consecutive tokens of one kind and call; `opens` when it holds the call's first token. */
type Run = TokenText & { tokens: number; opens: boolean };

/** Builds the JSON of stream events in the OpenAI/vLLM shape, keeping the answer's place. */
class EventFormat {
  private readonly head: string;
  /** Tokens written so far. */
  private at = 0;

  constructor(
    private readonly endpoint: 'chat' | 'completions',
    model: string,
    readonly id: string,
    created: number,
    private readonly plan: AnswerPlan,
  ) {
    const object = endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    this.head = `{"id":"${id}","object":"${object}","created":${created},"model":${JSON.stringify(model)},"choices":`;
  }

  /** The next `tokens` tokens, split where their kind or tool call changes. */
  parts(tokens: number): Part[] {
    // A plain answer (most of every benchmark): one content part, built without per-token objects.
    if (this.plan.reasoningTokens === 0 && this.plan.calls.length === 0) {
      let text = '';
      for (let i = 0; i < tokens; i++) text += simWord(this.at++);
      return [
        { kind: 'content', tokens, delta: this.endpoint === 'chat' ? { content: text } : text },
      ];
    }
    const runs: Run[] = [];
    for (let i = 0; i < tokens; i++) {
      const t = tokenText(this.plan, this.at++);
      const prev = runs[runs.length - 1];
      if (prev && prev.kind === t.kind && prev.call === t.call) {
        prev.tokens++;
        prev.text += t.text;
      } else {
        runs.push({ ...t, tokens: 1, opens: t.call?.first === this.at - 1 });
      }
    }
    return runs.map((run) => ({ kind: run.kind, tokens: run.tokens, delta: this.delta(run) }));
  }

  private delta(run: Run): Part['delta'] {
    if (this.endpoint === 'completions') return run.text;
    if (run.kind === 'content') return { content: run.text };
    if (run.kind === 'reasoning') return { reasoning: run.text, reasoning_content: run.text };
    const call = run.call as PlannedCall;
    // The first delta of a call names it (vLLM's DeltaToolCall); later ones add arguments.
    const head = run.opens ? { id: call.id, type: 'function' } : {};
    const fn = run.opens ? { name: call.name, arguments: run.text } : { arguments: run.text };
    return { tool_calls: [{ index: call.index, ...head, function: fn }] };
  }

  /** Every token of a non-streamed answer, as one part per kind (for the truth). */
  totals(): Part[] {
    const counts = new Map<TokenKind, number>();
    for (let t = 0; t < this.at; t++) {
      const kind = tokenText(this.plan, t).kind;
      counts.set(kind, (counts.get(kind) ?? 0) + 1);
    }
    return [...counts].map(([kind, tokens]) => ({ kind, tokens, delta: '' }));
  }

  event(delta: Part['delta'], finishReason: string | null, usage?: object): string {
    const finish = finishReason === null ? 'null' : `"${finishReason}"`;
    const choice =
      this.endpoint === 'chat'
        ? `{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish}}`
        : `{"index":0,"text":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish}}`;
    const tail = usage ? `,"usage":${JSON.stringify(usage)}}` : '}';
    return `data: ${this.head}[${choice}]${tail}\n\n`;
  }

  usageEvent(usage: object): string {
    return `data: ${this.head}[],"usage":${JSON.stringify(usage)}}\n\n`;
  }

  /** The non-streamed body of the answer so far (every token was counted by `parts`). */
  whole(usage: object): object {
    const plan = this.plan;
    let content = '';
    let reasoning = '';
    for (let t = 0; t < this.at; t++) {
      const { kind, text } = tokenText(plan, t);
      if (kind === 'content') content += text;
      if (kind === 'reasoning') reasoning += text;
    }
    const calls = plan.calls.length > 0;
    // vLLM's full generator: content '' for named/required tool calls, null for auto ones.
    const message = {
      role: 'assistant',
      content: calls ? (plan.forced ? '' : null) : content,
      ...(plan.reasoning ? { reasoning, reasoning_content: reasoning } : {}),
      ...(calls ? { tool_calls: wholeCalls(plan) } : {}),
    };
    const choice =
      this.endpoint === 'chat'
        ? { index: 0, message, finish_reason: plan.finishReason }
        : { index: 0, text: content, finish_reason: 'length' };
    return {
      ...JSON.parse(`${this.head}[]}`),
      object: this.endpoint === 'chat' ? 'chat.completion' : 'text_completion',
      choices: [choice],
      usage,
    };
  }
}

/** The prompt's words (chat: as a template renders the messages and tools), or why not. */
function promptWordsOf(
  endpoint: 'chat' | 'completions',
  body: Record<string, unknown>,
): string[] | string {
  if (endpoint === 'chat') return chatPromptWords(body);
  return typeof body.prompt === 'string'
    ? splitWords(body.prompt)
    : '`prompt` is missing or not text';
}

/** A stable token id for a word (the simulator's vocabulary is open: ids are word hashes). */
function tokenId(word: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), 0x01000193);
  return (h >>> 0) % 128_000;
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
