import type { ServerTiming } from '../record.js';
import { createDecoder, inStreamError, type StreamProtocol } from './decoder.js';
import { openaiChunkScanner } from './openaiScan.js';
import {
  answerCaptureBytes,
  firstListedModel,
  outputTokenLimit,
  withExtraBody,
} from './request.js';
import { type DecodedStream, type StreamFault, Timeline } from './timeline.js';
import type { Backend, BackendOptions, Endpoint, RequestSpec } from './types.js';

export const ENDPOINT_PATHS: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
};

export function buildOpenAIBody(spec: RequestSpec, options: BackendOptions): string {
  return JSON.stringify(openAIBody(spec, options));
}

/** The body of one request as an object (virtual time reads it as the simulator would). */
export function openAIBody(spec: RequestSpec, options: BackendOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { model: options.model };
  if (options.endpoint === 'chat') {
    body.messages = spec.messages ?? [{ role: 'user', content: spec.prompt }];
  } else body.prompt = spec.prompt;
  if (spec.tools && options.endpoint === 'chat') {
    body.tools = spec.tools;
    if (spec.toolChoice !== undefined) body.tool_choice = spec.toolChoice;
  }
  if (options.reasoningEffort !== undefined) body.reasoning_effort = options.reasoningEffort;
  // vLLM and SGLang hand these to the chat template (Qwen3, DeepSeek-R1 distills: thinking on/off).
  if (options.enableThinking !== undefined && options.endpoint === 'chat') {
    body.chat_template_kwargs = { enable_thinking: options.enableThinking };
  }
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
  return withExtraBody(body, options.extraBody);
}

/**
 * One OpenAI streaming chunk: `choices[0].delta` (chat) or `choices[0].text` (completions),
 * `reasoning_content` / `reasoning` kept apart, `usage` from a usage-only chunk, the final choice
 * (llama.cpp) or every chunk (continuous usage stats), and llama.cpp's `timings`.
 *
 * The answer is whole at `[DONE]` (OpenAI's documented end, sent by vLLM, SGLang, llama.cpp
 * server.cpp `if (oaicompat != NONE) ... "data: [DONE]"`, and TGI since 2.1.1), or at a non-null
 * `finish_reason` on a choice: TGI's OpenAI route before huggingface/text-generation-inference#2221
 * (July 2024) and other servers close after it without `[DONE]`. A usage-only chunk
 * (`choices: []`) comes only after the last choice, so it marks the end as well.
 */
function parseChunk(chat: boolean) {
  return (m: Record<string, unknown>, t: Timeline): void => {
    if (m.error !== undefined && m.choices === undefined) {
      t.fault = inStreamError(m.error);
      return;
    }
    let content = '';
    let reasoning = '';
    let toolCall = '';
    const choices = m.choices;
    const first: unknown = Array.isArray(choices) ? choices[0] : undefined;
    if (typeof first === 'object' && first !== null) {
      const choice = first as Record<string, unknown>;
      if (chat) {
        const delta = choice.delta as Record<string, unknown> | undefined;
        if (delta) {
          if (typeof delta.content === 'string') content = delta.content;
          toolCall = toolCallText(delta.tool_calls);
          if (toolCall !== '') t.capture?.addToolCalls(delta.tool_calls);
          if (typeof delta.reasoning_content === 'string') reasoning = delta.reasoning_content;
          else if (typeof delta.reasoning === 'string') reasoning = delta.reasoning;
        }
      } else if (typeof choice.text === 'string') {
        content = choice.text;
      }
      if (typeof choice.finish_reason === 'string') t.finishReason = choice.finish_reason;
      if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '') {
        t.markComplete();
      }
    }
    let completionTokens: number | undefined;
    const usage = m.usage as Record<string, unknown> | null | undefined;
    if (usage && typeof usage === 'object') {
      completionTokens = t.setCompletionTotal(usage.completion_tokens, 'usage.completion_tokens');
      const prompt = t.count(usage.prompt_tokens, 'usage.prompt_tokens', 'input');
      if (prompt !== undefined) t.promptTokens = prompt;
      cachedTokens(usage, t);
      reasoningTokens(usage, t);
      if (Array.isArray(choices) && choices.length === 0) t.markComplete();
    }
    const timing = llamaCppTimings(m.timings, t);
    if (timing) t.serverTiming = timing;
    t.event({
      content,
      reasoning,
      toolCall,
      ...(completionTokens !== undefined ? { completionTokens } : {}),
    });
  };
}

/**
 * The text of streamed tool calls: each call's function name and arguments, for every call in
 * the list (parallel calls arrive with their own `index`). OpenAI, vLLM and SGLang send a list;
 * TGI's OpenAI route sent one object before 3.0; Ollama sends whole calls with `arguments` as an
 * object, counted as its JSON text. Anything else carries no tool call.
 */
export function toolCallText(calls: unknown): string {
  // Called for every event: most carry no tool call, and cost no allocation.
  if (calls === undefined || calls === null) return '';
  const list = Array.isArray(calls) ? calls : [calls];
  let text = '';
  for (const call of list) {
    if (typeof call !== 'object' || call === null) continue;
    const fn = (call as Record<string, unknown>).function;
    if (typeof fn !== 'object' || fn === null) continue;
    const { name, arguments: args } = fn as Record<string, unknown>;
    if (typeof name === 'string') text += name;
    if (typeof args === 'string') text += args;
    else if (typeof args === 'object' && args !== null) text += JSON.stringify(args);
  }
  return text;
}

/**
 * `usage.completion_tokens_details.reasoning_tokens` (OpenAI, and vLLM/SGLang where they send
 * it): the server's own split of the output, the authority over the events' split.
 */
function reasoningTokens(usage: Record<string, unknown>, t: Timeline): void {
  const details = usage.completion_tokens_details;
  if (typeof details !== 'object' || details === null) return;
  const field = 'usage.completion_tokens_details.reasoning_tokens';
  const value = t.count((details as Record<string, unknown>).reasoning_tokens, field, 'output');
  if (value !== undefined) t.reasoningTokens = value;
}

/**
 * `usage.prompt_tokens_details.cached_tokens` (OpenAI; vLLM with --enable-prompt-tokens-details):
 * prompt tokens the server did not prefill, which a run's prefix-cache warning reads.
 */
function cachedTokens(usage: Record<string, unknown>, t: Timeline): void {
  const details = usage.prompt_tokens_details;
  if (typeof details !== 'object' || details === null) return;
  const field = 'usage.prompt_tokens_details.cached_tokens';
  const value = t.count((details as Record<string, unknown>).cached_tokens, field, 'input');
  if (value !== undefined) t.cachedPromptTokens = value;
}

/** llama.cpp's per-request `timings` object (native and OpenAI endpoints alike), checked. */
export function llamaCppTimings(value: unknown, t: Timeline): ServerTiming | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  return serverTiming({
    prefillMs: t.count(v.prompt_ms, 'timings.prompt_ms', 'duration'),
    prefillTokens: t.count(v.prompt_n, 'timings.prompt_n', 'input'),
    decodeMs: t.count(v.predicted_ms, 'timings.predicted_ms', 'duration'),
    decodeTokens: t.count(v.predicted_n, 'timings.predicted_n', 'output'),
  });
}

/** The fields that are set, or undefined when none is. */
export function serverTiming(fields: ServerTiming): ServerTiming | undefined {
  const timing: ServerTiming = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) timing[key as keyof ServerTiming] = value;
  }
  return Object.keys(timing).length > 0 ? timing : undefined;
}

/**
 * `max_tokens`, or `max_completion_tokens` (which vLLM and OpenAI read first) from `--extra-body`,
 * times `n` choices when asked for several (usage counts them all).
 */
function openaiOutputLimit(spec: RequestSpec, options: BackendOptions): number | undefined {
  const limit = outputTokenLimit(spec, options.extraBody, ['max_completion_tokens', 'max_tokens']);
  const n = options.extraBody?.n;
  return limit !== undefined && Number.isSafeInteger(n) && (n as number) > 1
    ? limit * (n as number)
    : limit;
}

/**
 * How an OpenAI stream is read: chunks in SSE, the common ones by the field scanner
 * (openaiScan.ts), any other by JSON.parse and parseChunk.
 */
export function openaiStreamProtocol(endpoint: Endpoint): StreamProtocol {
  return endpoint === 'chat' ? chatProtocol : completionProtocol;
}

// One of each for every stream: the scanner's templates hold no stream's values (openaiScan.ts).
const chatProtocol: StreamProtocol = Object.freeze({
  framing: 'sse',
  parse: parseChunk(true),
  scan: openaiChunkScanner(true),
  endMarker: '[DONE] or a finish_reason',
});
const completionProtocol: StreamProtocol = Object.freeze({
  ...chatProtocol,
  parse: parseChunk(false),
  scan: openaiChunkScanner(false),
});

/** vLLM, SGLang, TGI, llama.cpp, Ollama and hosted APIs through `/v1/(chat/)completions`. */
export const openaiBackend: Backend = {
  name: 'openai',
  request: (spec, options) => ({
    path: ENDPOINT_PATHS[options.endpoint],
    body: buildOpenAIBody(spec, options),
  }),
  decoder: (sentAtUs, options, spec) =>
    createDecoder(
      openaiStreamProtocol(options.endpoint),
      sentAtUs,
      openaiOutputLimit(spec, options),
      answerCaptureBytes(spec, options),
    ),
  models: { path: '/v1/models', first: firstListedModel },
  decodeJson: (body, atUs, options, spec): DecodedStream | StreamFault => {
    const parsed = body as Record<string, unknown>;
    const choice = (Array.isArray(parsed.choices) ? parsed.choices[0] : undefined) as
      | Record<string, unknown>
      | undefined;
    if (!choice) {
      return { kind: 'bad_stream', message: 'expected an event stream, got JSON without choices' };
    }
    // The whole answer is one event at the end, counted like any stream's.
    const t = new Timeline(0, openaiOutputLimit(spec, options), answerCaptureBytes(spec, options));
    t.nowUs = atUs;
    const message = choice.message as Record<string, unknown> | null | undefined;
    const content =
      options.endpoint === 'chat' ? String(message?.content ?? '') : String(choice.text ?? '');
    const toolCall = options.endpoint === 'chat' ? toolCallText(message?.tool_calls) : '';
    if (toolCall !== '') t.capture?.addToolCalls(message?.tool_calls);
    const usage = parsed.usage as Record<string, unknown> | undefined;
    const completion = t.count(usage?.completion_tokens, 'usage.completion_tokens', 'output');
    t.event({ content, toolCall, ...(completion !== undefined ? { tokens: completion } : {}) });
    const prompt = t.count(usage?.prompt_tokens, 'usage.prompt_tokens', 'input');
    if (prompt !== undefined) t.promptTokens = prompt;
    if (usage) {
      cachedTokens(usage, t);
      reasoningTokens(usage, t);
    }
    if (typeof choice.finish_reason === 'string') t.finishReason = choice.finish_reason;
    t.markDone();
    return t.fault ?? t.finish();
  },
  supports: {
    endpoints: ['chat', 'completions'],
    ignoreEos: true,
    continuousUsageStats: true,
    modelRequired: false,
  },
};
