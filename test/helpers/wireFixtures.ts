import type { Step } from './scriptedServer.js';

/** Interleaves writes with a fixed gap, as a server decoding one token per step would. */
export function paced(writes: string[], gapMs: number): Step[] {
  const steps: Step[] = [];
  writes.forEach((write, i) => {
    if (i > 0) steps.push({ wait: gapMs });
    steps.push({ write });
  });
  return steps;
}

const sse = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
const line = (value: unknown) => `${JSON.stringify(value)}\n`;

// llama.cpp `POST /completion` (server-task.cpp to_json_non_oaicompat, partial and final).

export function llamaPartial(content: string, ids: number[], predicted: number, evaluated = 16) {
  return sse({
    index: 0,
    content,
    tokens: ids,
    stop: false,
    id_slot: 0,
    tokens_predicted: predicted,
    tokens_evaluated: evaluated,
  });
}

/** A prompt-processing progress message (`return_progress`): no text, no token. */
export function llamaProgress(processed: number, total = 16) {
  return sse({
    index: 0,
    content: '',
    tokens: [],
    stop: false,
    id_slot: 0,
    tokens_predicted: 0,
    tokens_evaluated: total,
    prompt_progress: { total, cache: 0, processed, time_ms: 3 },
  });
}

export function llamaFinal(options: {
  predicted: number;
  evaluated: number;
  stopType: 'eos' | 'limit' | 'word';
  promptMs: number;
  predictedMs: number;
}) {
  return sse({
    index: 0,
    content: '',
    tokens: [],
    id_slot: 0,
    stop: true,
    model: 'qwen2.5-0.5b-instruct-q8_0.gguf',
    tokens_predicted: options.predicted,
    tokens_evaluated: options.evaluated,
    generation_settings: { n_predict: 8, temperature: 0, stream: true },
    prompt: '<s> hello',
    has_new_line: false,
    truncated: false,
    stop_type: options.stopType,
    stopping_word: '',
    tokens_cached: options.evaluated + options.predicted - 1,
    timings: {
      cache_n: 0,
      prompt_n: options.evaluated,
      prompt_ms: options.promptMs,
      prompt_per_token_ms: options.promptMs / options.evaluated,
      prompt_per_second: (options.evaluated / options.promptMs) * 1000,
      predicted_n: options.predicted,
      predicted_ms: options.predictedMs,
      predicted_per_token_ms: options.predictedMs / options.predicted,
      predicted_per_second: (options.predicted / options.predictedMs) * 1000,
    },
  });
}

/** llama.cpp's error inside a stream: `{"error": {code, message, type}}` (no `[DONE]`). */
export function llamaError(code: number, message: string, type: string) {
  return sse({ error: { code, message, type } });
}

// TGI `POST /generate_stream` (router/src/lib.rs StreamResponse).

export function tgiToken(
  index: number,
  token: { id: number; text: string; special?: boolean },
  final?: {
    generatedText: string;
    finishReason: string;
    generatedTokens: number;
    inputLength: number;
  },
) {
  return sse({
    index,
    token: { id: token.id, text: token.text, logprob: -0.25, special: token.special ?? false },
    generated_text: final ? final.generatedText : null,
    details: final
      ? {
          finish_reason: final.finishReason,
          generated_tokens: final.generatedTokens,
          seed: null,
          input_length: final.inputLength,
        }
      : null,
  });
}

export function tgiError(error: string, errorType: string) {
  return sse({ error, error_type: errorType });
}

// Triton generate extension with the TensorRT-LLM ensemble's outputs.

export function tritonText(text: string) {
  return sse({
    batch_index: 0,
    context_logits: 0.0,
    cum_log_probs: 0.0,
    generation_logits: 0.0,
    model_name: 'ensemble',
    model_version: '1',
    output_log_probs: [0.0],
    sequence_end: false,
    sequence_id: 0,
    sequence_start: false,
    text_output: text,
  });
}

export function tritonError(error: string) {
  return sse({ error });
}

// Ollama `/api/generate` and `/api/chat` (NDJSON, durations in nanoseconds).

const CREATED_AT = '2025-06-01T12:00:00.000000Z';

export function ollamaGenerate(response: string, extra: Record<string, unknown> = {}) {
  return line({ model: 'llama3.2', created_at: CREATED_AT, response, done: false, ...extra });
}

export function ollamaChat(message: { content: string; thinking?: string }) {
  return line({
    model: 'qwen3',
    created_at: CREATED_AT,
    message: { role: 'assistant', ...message },
    done: false,
  });
}

export interface OllamaTotals {
  doneReason: 'stop' | 'length';
  promptEvalCount: number;
  evalCount: number;
  /** Durations in nanoseconds, as Ollama sends them. */
  totalNs: number;
  loadNs: number;
  promptEvalNs: number;
  evalNs: number;
}

export function ollamaDone(route: 'generate' | 'chat', totals: OllamaTotals) {
  return line({
    model: route === 'chat' ? 'qwen3' : 'llama3.2',
    created_at: CREATED_AT,
    ...(route === 'chat' ? { message: { role: 'assistant', content: '' } } : { response: '' }),
    done: true,
    done_reason: totals.doneReason,
    ...(route === 'generate' ? { context: [1, 2, 3] } : {}),
    total_duration: totals.totalNs,
    load_duration: totals.loadNs,
    prompt_eval_count: totals.promptEvalCount,
    prompt_eval_duration: totals.promptEvalNs,
    eval_count: totals.evalCount,
    eval_duration: totals.evalNs,
  });
}

export function ollamaError(error: string) {
  return line({ error });
}

// SGLang `POST /generate` (http_server.py generate_request; meta_info per message).

export function sglangMessage(
  text: string,
  completionTokens: number,
  finishReason: Record<string, unknown> | null = null,
  promptTokens = 16,
) {
  return sse({
    text,
    meta_info: {
      id: 'a3f1c0de9b8e4f0f',
      finish_reason: finishReason,
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      cached_tokens: 0,
    },
    index: 0,
  });
}

export const SSE_DONE = 'data: [DONE]\n\n';
