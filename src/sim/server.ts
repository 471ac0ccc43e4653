import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { VERSION } from '../version.js';
import { splitWords } from '../workload/words.js';
import {
  type AnswerOptions,
  answerWords,
  DEFAULT_ANSWER_OPTIONS,
  promptWords,
  readRequest,
} from './answer.js';
import type { ServingEngine } from './engine.js';
import { type FaultPlan, faultFor } from './faults.js';
import { Generation, type TruthRecord } from './generation.js';
import { error, json, readBody } from './http.js';

export type { TruthRecord } from './generation.js';

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

/** What the handlers of one server share: its options, its clock and its ground truth. */
interface SimServerState {
  options: SimServerOptions;
  /** The simulator's clock: ms since it started. */
  now: () => number;
  /**
   * The truth's 0 on the machine-wide monotonic clock, so a client on the same machine can
   * place its own timestamps against the server's (benchmarks of the client's timing error).
   */
  originHrMs: number;
  truth: TruthRecord[];
  /** Numbers the completions (`cmpl-N`) and names requests without an `x-request-id`. */
  counter: number;
  /** Unix seconds, reported as every model's and answer's `created`. */
  created: number;
}

type Handler = (s: SimServerState, req: IncomingMessage, res: ServerResponse) => unknown;

/** The routes besides the completions endpoints, by `METHOD path`. */
const ROUTES = new Map<string, Handler>([
  ['GET /v1/models', listModels],
  ['GET /health', (_s, _req, res) => json(res, 200, {})],
  ['GET /ping', (_s, _req, res) => json(res, 200, {})],
  // vLLM's `GET /version` shape, with the engine named: runs record the simulator's version.
  [
    'GET /version',
    (_s, _req, res) => json(res, 200, { version: VERSION, engine: 'infergauge-sim' }),
  ],
  ['GET /debug/truth', getTruth],
  ['POST /debug/truth/reset', resetTruth],
  ['GET /metrics', getMetrics],
  ['POST /tokenize', tokenize],
  ['POST /reset_prefix_cache', resetPrefixCache],
  ['POST /flush_cache', flushCache],
  ['GET /flush_cache', flushCache],
]);

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
  const state: SimServerState = {
    options,
    now,
    originHrMs: Number(process.hrtime.bigint()) / 1e6 - now(),
    truth: [],
    counter: 0,
    created: Math.floor(Date.now() / 1000),
  };
  const server = createServer({ noDelay: true, keepAliveTimeout: 65_000 }, (req, res) => {
    route(state, req, res).catch((err: Error) => {
      if (!res.headersSent) error(res, 500, err.message, 'InternalServerError');
      else res.destroy(err);
    });
  });
  return listen(server, options.host, options.port);
}

/** Sends a request to its handler: a route, a completions endpoint, or 404. */
async function route(s: SimServerState, req: IncomingMessage, res: ServerResponse) {
  const url = req.url ?? '/';
  // vLLM's reset takes its options as query parameters (`?reset_external=true`).
  const handler = ROUTES.get(`${req.method} ${url.split('?', 1)[0]}`);
  // Without engine metrics there is no /metrics route.
  if (handler && (handler !== getMetrics || s.options.engine.metricsText)) {
    return handler(s, req, res);
  }
  const endpoint =
    url === '/v1/chat/completions' ? 'chat' : url === '/v1/completions' ? 'completions' : null;
  if (req.method !== 'POST' || endpoint === null) {
    return error(res, 404, `no route ${req.method} ${url}`, 'NotFoundError');
  }
  return complete(s, endpoint, req, res);
}

/** `GET /v1/models`: the one model served. */
function listModels(s: SimServerState, _req: IncomingMessage, res: ServerResponse): void {
  json(res, 200, {
    object: 'list',
    data: [
      { id: s.options.model, object: 'model', created: s.created, owned_by: 'infergauge-sim' },
    ],
  });
}

/** `GET /debug/truth`: the engine's facts and each request's ground truth. */
function getTruth(s: SimServerState, _req: IncomingMessage, res: ServerResponse): void {
  json(res, 200, {
    engine: s.options.engine.describe?.(),
    originHrMs: s.originHrMs,
    requests: s.truth,
  });
}

/** `POST /debug/truth/reset`: forgets the ground truth so far. */
function resetTruth(s: SimServerState, _req: IncomingMessage, res: ServerResponse): void {
  s.truth.length = 0;
  json(res, 200, {});
}

/** `GET /metrics`: the engine's Prometheus text (vLLM's metric names). */
function getMetrics(s: SimServerState, _req: IncomingMessage, res: ServerResponse): void {
  const text = s.options.engine.metricsText?.() ?? '';
  res.writeHead(200, {
    'content-type': 'text/plain; version=0.0.4; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * vLLM's `POST /reset_prefix_cache`, as its newest releases answer it: 200 with
 * `{"success": bool}`, false while blocks are in use (vllm/frontend/entrypoints/serve/dev/cache/
 * api_router.py at vllm-project/vllm 055e47c2). Older releases answered 200 with no body either
 * way (vllm/entrypoints/serve/cache/api_router.py at 09cb327f). vLLM serves it only with
 * VLLM_SERVER_DEV_MODE=1; the simulator always does. Its query parameters
 * (`reset_running_requests`, `reset_external`) change nothing here: nothing is preempted for it.
 */
function resetPrefixCache(s: SimServerState, _req: IncomingMessage, res: ServerResponse): void {
  const reset = s.options.engine.resetPrefixCache?.() ?? { ok: true };
  json(res, 200, { success: reset.ok });
}

/**
 * SGLang's `/flush_cache` (GET or POST; python/sglang/srt/entrypoints/http_server.py at
 * sgl-project/sglang 9c0549b7): 200 "Cache flushed." once done, 400 while requests are waiting
 * or running, as text.
 */
function flushCache(s: SimServerState, _req: IncomingMessage, res: ServerResponse): void {
  const reset = s.options.engine.resetPrefixCache?.() ?? { ok: true };
  const text = reset.ok ? 'Cache flushed.\n' : `Flush cache failed. ${reset.reason}\n`;
  res.writeHead(reset.ok ? 200 : 400, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** vLLM's `POST /tokenize`: `{prompt}` or `{messages}` to `{count, max_model_len, tokens}`. */
async function tokenize(s: SimServerState, req: IncomingMessage, res: ServerResponse) {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(await readBody(req)) as Record<string, unknown>;
  } catch (err) {
    return error(res, 400, `invalid JSON body: ${(err as Error).message}`, 'BadRequestError');
  }
  const words = promptWords(Array.isArray(body.messages) ? 'chat' : 'completions', body);
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
    max_model_len: s.options.maxModelLen ?? null,
    tokens,
  });
}

/**
 * `POST /v1/completions` and `/v1/chat/completions`: reads and checks the request (400/404 as
 * vLLM answers them), records its truth, then admits it and answers from the engine's tokens.
 */
async function complete(
  s: SimServerState,
  endpoint: 'chat' | 'completions',
  req: IncomingMessage,
  res: ServerResponse,
) {
  const { options } = s;
  const arrivedAt = s.now();
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(await readBody(req)) as Record<string, unknown>;
  } catch (err) {
    return error(res, 400, `invalid JSON body: ${(err as Error).message}`, 'BadRequestError');
  }
  if (body.model !== options.model) {
    return error(res, 404, `The model \`${String(body.model)}\` does not exist.`, 'NotFoundError');
  }
  const requestId = String(req.headers['x-request-id'] ?? `sim-${s.counter}`);
  const read = readRequest(endpoint, body, requestId, options.answers ?? DEFAULT_ANSWER_OPTIONS);
  if (typeof read === 'string') return error(res, 400, read, 'BadRequestError');
  const { maxTokens, plan } = read;
  const promptWords = read.promptTexts.flatMap(splitWords);
  // A chat template wraps the messages in tokens of its own; the engine processes them too.
  const inputTokens =
    promptWords.length + (endpoint === 'chat' ? (options.chatTemplateTokens ?? 0) : 0);
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
  s.truth.push(record);
  if (s.truth.length > options.truthLimit) s.truth.splice(0, s.truth.length - options.truthLimit);
  const generation = new Generation(
    {
      endpoint,
      body,
      plan,
      // The answer's words go to the engine too: its prefix cache keeps generated tokens'
      // blocks, which the next turn of a conversation (its history holds this answer) hits.
      engineRequest: {
        inputTokens,
        maxOutputTokens: maxTokens,
        chat: endpoint === 'chat',
        promptWords,
        outputWords: () => answerWords(plan, maxTokens),
      },
      fault: options.faults ? faultFor(options.faults, requestId) : undefined,
      model: options.model,
      created: s.created,
      now: s.now,
    },
    record,
    res,
  );
  if (!generation.admit(options.engine)) return;
  if (!(await generation.slowStart())) return;
  generation.start(options.engine, `cmpl-${s.counter++}`);
}

/** Listens with a deep accept queue; resolves with the URL once it does. */
function listen(server: Server, host: string, port: number): Promise<RunningSimServer> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    // A deep accept queue: a client opening 1,000+ connections at once must not wait in SYN
    // retries (Node's default backlog is 511), which would read as seconds of TTFT.
    server.listen({ port, host, backlog: 4096 }, () => {
      const address = server.address() as AddressInfo;
      const shown = host.includes(':') ? `[${host}]` : host;
      resolve({
        url: `http://${shown}:${address.port}`,
        port: address.port,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/** A stable token id for a word (the simulator's vocabulary is open: ids are word hashes). */
function tokenId(word: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), 0x01000193);
  return (h >>> 0) % 128_000;
}
