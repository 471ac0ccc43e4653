// Wire format: SGLang srt/entrypoints/http_server.py generate_request + meta_info, SGLang 0.4-0.5.
import { createDecoder, inStreamError } from './decoder.js';
import { firstListedModel, outputTokenLimit, withExtraBody } from './request.js';
import type { Timeline } from './timeline.js';
import { createTextDeltas } from './triton.js';
import type { Backend, BackendOptions, RequestSpec } from './types.js';

export function buildSglangBody(spec: RequestSpec, options: BackendOptions): string {
  const samplingParams: Record<string, unknown> = {
    max_new_tokens: spec.requestedOutputTokens,
    temperature: options.temperature,
  };
  if (options.ignoreEos) samplingParams.ignore_eos = true;
  const body: Record<string, unknown> = {
    text: spec.prompt,
    sampling_params: samplingParams,
    stream: true,
  };
  return JSON.stringify(withExtraBody(body, options.extraBody, 'sampling_params'));
}

/**
 * One `/generate` message. `text` is everything generated so far unless the server runs with
 * `--incremental-streaming-output`, which the client cannot see, so the delta is worked out
 * (createTextDeltas). `meta_info.completion_tokens` is the running token count either way.
 * `finish_reason` stays null until the last message: `{type: "stop" | "length"}`, or
 * `{type: "abort", message, status_code}` for a request the server gave up. `[DONE]` follows.
 */
function parseMessage(delta: (text: string) => string) {
  return (m: Record<string, unknown>, t: Timeline): void => {
    if (m.error !== undefined) {
      t.fault = inStreamError(m.error);
      return;
    }
    const meta = (m.meta_info ?? {}) as Record<string, unknown>;
    const finish = meta.finish_reason as Record<string, unknown> | null | undefined;
    if (finish && finish.type === 'abort') {
      t.fault = inStreamError({ message: finish.message ?? 'aborted', code: finish.status_code });
      return;
    }
    const completion = t.setCompletionTotal(meta.completion_tokens, 'meta_info.completion_tokens');
    t.event({
      content: typeof m.text === 'string' ? delta(m.text) : '',
      ...(completion !== undefined ? { completionTokens: completion } : {}),
    });
    const prompt = t.count(meta.prompt_tokens, 'meta_info.prompt_tokens', 'input');
    if (prompt !== undefined) t.promptTokens = prompt;
    if (finish && typeof finish.type === 'string') {
      t.finishReason = finish.type;
      t.markComplete();
    }
  };
}

/** SGLang's own `POST /generate` (raw prompt, no chat template). */
export const sglangBackend: Backend = {
  name: 'sglang',
  request: (spec, options) => ({ path: '/generate', body: buildSglangBody(spec, options) }),
  // http_server.py generate_request writes `data: [DONE]` after the last message (whose
  // meta_info.finish_reason is set), even after an error; either marks the end.
  decoder: (sentAtUs, options, spec) =>
    createDecoder(
      {
        framing: 'sse',
        parse: parseMessage(createTextDeltas()),
        endMarker: '[DONE] or meta_info.finish_reason',
      },
      sentAtUs,
      outputTokenLimit(spec, options.extraBody, ['max_new_tokens'], 'sampling_params'),
    ),
  // The OpenAI-style list names the served model on every version; `/get_model_info` gives a path.
  models: { path: '/v1/models', first: firstListedModel },
  supports: {
    endpoints: ['completions'],
    ignoreEos: true,
    continuousUsageStats: false,
    modelRequired: false,
  },
};
