import type { ServerTiming } from '../record.js';
import { createDecoder, inStreamError } from './decoder.js';
import { firstListedModel, withExtraBody } from './request.js';
import { type DecodedStream, type StreamFault, Timeline } from './timeline.js';
import type { Backend, BackendOptions, Endpoint, RequestSpec } from './types.js';

export const ENDPOINT_PATHS: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
};

export function buildOpenAIBody(spec: RequestSpec, options: BackendOptions): string {
  const body: Record<string, unknown> = { model: options.model };
  if (options.endpoint === 'chat') {
    body.messages = spec.messages ?? [{ role: 'user', content: spec.prompt }];
  } else body.prompt = spec.prompt;
  body.max_tokens = spec.requestedOutputTokens;
  body.temperature = options.temperature;
  body.stream = true;
  body.stream_options = options.continuousUsageStats
    ? { include_usage: true, continuous_usage_stats: true }
    : { include_usage: true };
  // vLLM, SGLang and llama.cpp accept it; OpenAI itself rejects unknown fields.
  // vLLM and SGLang: no end-of-sequence, and no stop before the requested length either.
  if (options.ignoreEos) {
    body.ignore_eos = true;
    body.min_tokens = spec.requestedOutputTokens;
  }
  return JSON.stringify(withExtraBody(body, options.extraBody));
}

/**
 * One OpenAI streaming chunk: `choices[0].delta` (chat) or `choices[0].text` (completions),
 * `reasoning_content` / `reasoning` kept apart, `usage` from a usage-only chunk, the final choice
 * (llama.cpp) or every chunk (continuous usage stats), and llama.cpp's `timings`.
 */
function parseChunk(chat: boolean) {
  return (m: Record<string, unknown>, t: Timeline): void => {
    if (m.error !== undefined && m.choices === undefined) {
      t.fault = inStreamError(m.error);
      return;
    }
    let content = '';
    let reasoning = '';
    const choices = m.choices;
    if (Array.isArray(choices) && choices.length > 0) {
      const choice = choices[0] as Record<string, unknown>;
      if (chat) {
        const delta = choice.delta as Record<string, unknown> | undefined;
        if (delta) {
          if (typeof delta.content === 'string') content = delta.content;
          if (typeof delta.reasoning_content === 'string') reasoning = delta.reasoning_content;
          else if (typeof delta.reasoning === 'string') reasoning = delta.reasoning;
        }
      } else if (typeof choice.text === 'string') {
        content = choice.text;
      }
      if (typeof choice.finish_reason === 'string') t.finishReason = choice.finish_reason;
    }
    let completionTokens: number | undefined;
    const usage = m.usage as Record<string, unknown> | null | undefined;
    if (usage && typeof usage === 'object') {
      if (typeof usage.completion_tokens === 'number') {
        completionTokens = usage.completion_tokens;
        t.totalCompletionTokens = usage.completion_tokens;
      }
      if (typeof usage.prompt_tokens === 'number') t.promptTokens = usage.prompt_tokens;
    }
    const timing = llamaCppTimings(m.timings);
    if (timing) t.serverTiming = timing;
    t.event({
      content,
      reasoning,
      ...(completionTokens !== undefined ? { completionTokens } : {}),
    });
  };
}

/** llama.cpp's per-request `timings` object (native and OpenAI endpoints alike). */
export function llamaCppTimings(value: unknown): ServerTiming | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const t = value as Record<string, unknown>;
  const timing: ServerTiming = {};
  if (typeof t.prompt_ms === 'number') timing.prefillMs = t.prompt_ms;
  if (typeof t.prompt_n === 'number') timing.prefillTokens = t.prompt_n;
  if (typeof t.predicted_ms === 'number') timing.decodeMs = t.predicted_ms;
  if (typeof t.predicted_n === 'number') timing.decodeTokens = t.predicted_n;
  return Object.keys(timing).length > 0 ? timing : undefined;
}

/** vLLM, SGLang, TGI, llama.cpp, Ollama and hosted APIs through `/v1/(chat/)completions`. */
export const openaiBackend: Backend = {
  name: 'openai',
  request: (spec, options) => ({
    path: ENDPOINT_PATHS[options.endpoint],
    body: buildOpenAIBody(spec, options),
  }),
  decoder: (sentAtUs, options) =>
    createDecoder('sse', sentAtUs, parseChunk(options.endpoint === 'chat')),
  models: { path: '/v1/models', first: firstListedModel },
  decodeJson: (body, atUs, options): DecodedStream | StreamFault => {
    const parsed = body as Record<string, unknown>;
    const choice = (Array.isArray(parsed.choices) ? parsed.choices[0] : undefined) as
      | Record<string, unknown>
      | undefined;
    if (!choice) {
      return { kind: 'bad_stream', message: 'expected an event stream, got JSON without choices' };
    }
    // The whole answer is one event at the end, counted like any stream's.
    const t = new Timeline(0);
    t.nowUs = atUs;
    const content =
      options.endpoint === 'chat'
        ? String((choice.message as Record<string, unknown> | undefined)?.content ?? '')
        : String(choice.text ?? '');
    const usage = parsed.usage as Record<string, unknown> | undefined;
    const completion = usage?.completion_tokens;
    t.event({ content, ...(typeof completion === 'number' ? { tokens: completion } : {}) });
    if (typeof usage?.prompt_tokens === 'number') t.promptTokens = usage.prompt_tokens;
    if (typeof choice.finish_reason === 'string') t.finishReason = choice.finish_reason;
    t.markDone();
    return t.finish();
  },
  supports: {
    endpoints: ['chat', 'completions'],
    ignoreEos: true,
    continuousUsageStats: true,
    modelRequired: false,
  },
};
