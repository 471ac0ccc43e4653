// Wire format: Ollama docs/api.md + server/routes.go streamResponse (NDJSON), Ollama 0.5+ (2025).
import type { ServerTiming } from '../record.js';
import { createDecoder, inStreamError } from './decoder.js';
import { serverTiming, toolCallText } from './openai.js';
import { outputTokenLimit, withExtraBody } from './request.js';
import type { Timeline } from './timeline.js';
import type { Backend, BackendOptions, Endpoint, RequestSpec } from './types.js';

const PATHS: Record<Endpoint, string> = { chat: '/api/chat', completions: '/api/generate' };

export function buildOllamaBody(spec: RequestSpec, options: BackendOptions): string {
  const body: Record<string, unknown> = { model: options.model };
  if (options.endpoint === 'chat') body.messages = [{ role: 'user', content: spec.prompt }];
  else body.prompt = spec.prompt;
  body.stream = true;
  body.options = { num_predict: spec.requestedOutputTokens, temperature: options.temperature };
  return JSON.stringify(withExtraBody(body, options.extraBody, 'options'));
}

const NS_PER_MS = 1e6;

/** The final line's counters and nanosecond durations, as the server's own timing, checked. */
export function ollamaTiming(m: Record<string, unknown>, t: Timeline): ServerTiming | undefined {
  const ms = (field: string) => {
    const ns = t.count(m[field], field, 'duration');
    return ns === undefined ? undefined : ns / NS_PER_MS;
  };
  return serverTiming({
    prefillMs: ms('prompt_eval_duration'),
    prefillTokens: t.count(m.prompt_eval_count, 'prompt_eval_count', 'input'),
    decodeMs: ms('eval_duration'),
    decodeTokens: t.count(m.eval_count, 'eval_count', 'output'),
    loadMs: ms('load_duration'),
  });
}

/**
 * One NDJSON line: `response` (generate) or `message.content` (chat) is the new text, `thinking`
 * / `message.thinking` the reasoning of thinking models. The `done: true` line carries the
 * counts and durations and ends the answer.
 */
function parseLine(chat: boolean) {
  return (m: Record<string, unknown>, t: Timeline): void => {
    if (m.error !== undefined) {
      t.fault = inStreamError(m.error);
      return;
    }
    const source = chat ? (m.message as Record<string, unknown> | undefined) : m;
    const text = chat ? source?.content : source?.response;
    const thinking = source?.thinking;
    t.event({
      content: typeof text === 'string' ? text : '',
      reasoning: typeof thinking === 'string' ? thinking : '',
      // /api/chat answers a tool call with whole calls in `message.tool_calls`.
      toolCall: chat ? toolCallText(source?.tool_calls) : '',
    });
    if (m.done !== true) return;
    const timing = ollamaTiming(m, t);
    if (timing?.decodeTokens !== undefined) {
      t.setCompletionTotal(timing.decodeTokens, 'eval_count');
    }
    if (timing?.prefillTokens !== undefined) t.promptTokens = timing.prefillTokens;
    if (typeof m.done_reason === 'string') t.finishReason = m.done_reason;
    if (timing) t.serverTiming = timing;
    t.markDone();
  };
}

/** Ollama's own `/api/chat` and `/api/generate`, newline-delimited JSON. */
export const ollamaBackend: Backend = {
  name: 'ollama',
  request: (spec, options) => ({
    path: PATHS[options.endpoint],
    body: buildOllamaBody(spec, options),
  }),
  // server/routes.go streams each response with `done: false` until the last, `done: true`
  // (docs/api.md "Response: A stream of JSON objects ... The final response in the stream").
  decoder: (sentAtUs, options, spec) =>
    createDecoder(
      { framing: 'ndjson', parse: parseLine(options.endpoint === 'chat'), endMarker: 'done: true' },
      sentAtUs,
      // `num_predict` -1 (no limit) and -2 (fill the context) leave the limit unknown.
      outputTokenLimit(spec, options.extraBody, ['num_predict'], 'options'),
    ),
  models: {
    // Every pulled model, not only loaded ones: the first may take a load (see loadMs).
    path: '/api/tags',
    first: (body) => {
      const models = (body as { models?: { name?: unknown }[] } | undefined)?.models;
      const name = Array.isArray(models) ? models[0]?.name : undefined;
      return typeof name === 'string' ? name : undefined;
    },
  },
  supports: {
    endpoints: ['chat', 'completions'],
    // Ollama has no option to ignore the end-of-sequence token.
    ignoreEos: false,
    continuousUsageStats: false,
    modelRequired: false,
  },
};
