// Wire format: llama.cpp tools/server README + server-task.cpp (partial/final JSON), late 2025.
import { createDecoder, inStreamError } from './decoder.js';
import { llamaCppTimings } from './openai.js';
import { firstListedModel, outputTokenLimit, withExtraBody } from './request.js';
import type { Timeline } from './timeline.js';
import type { Backend, BackendOptions, RequestSpec } from './types.js';

export function buildLlamaCppBody(spec: RequestSpec, options: BackendOptions): string {
  const body: Record<string, unknown> = {
    // Ignored by a single-model server; a router-mode llama-server picks the model by it.
    model: options.model,
    prompt: spec.prompt,
    n_predict: spec.requestedOutputTokens,
    temperature: options.temperature,
    stream: true,
  };
  // `cache_prompt` is left to the server (on by default since 2024), as on its OpenAI route,
  // so the native and OpenAI routes of one server are measured alike.
  if (options.ignoreEos) body.ignore_eos = true;
  return JSON.stringify(withExtraBody(body, options.extraBody));
}

/** `stop_type` (or the older `stopped_*` flags) in OpenAI's words, so records compare. */
export function llamaCppFinishReason(m: Record<string, unknown>): string | undefined {
  const type = m.stop_type;
  if (type === 'eos' || type === 'word') return 'stop';
  if (type === 'limit') return 'length';
  if (typeof type === 'string' && type !== 'none') return type;
  if (m.stopped_eos === true || m.stopped_word === true) return 'stop';
  if (m.stopped_limit === true) return 'length';
  return undefined;
}

/**
 * One `/completion` message: `content` is the new text, `tokens` its token ids (one per message
 * in stream mode, absent before late 2024), `tokens_predicted` the running count. The final
 * message (`stop: true`) repeats no text and carries the totals and `timings`; nothing follows
 * it: server.cpp writes `data: [DONE]` only `if (oaicompat != OAICOMPAT_TYPE_NONE)`, so
 * `stop: true` is this route's only end marker.
 *
 * A message carries as many tokens as `tokens_predicted` rose since the last one, text or not: a
 * message with no text but a higher count holds tokens that printed nothing (half a character,
 * or text held back as the start of a stop string). The running count is also the output of a
 * stream cut before `stop: true`.
 */
function parseMessage() {
  let lastPredicted = 0;
  return (m: Record<string, unknown>, t: Timeline): void => {
    if (m.error !== undefined) {
      t.fault = inStreamError(m.error);
      return;
    }
    const content = typeof m.content === 'string' ? m.content : '';
    // An id list with no text is a token that printed nothing yet; text with an empty list (a
    // final message that repeats text) is left to the one-per-event count.
    const ids =
      Array.isArray(m.tokens) && (m.tokens.length > 0 || content === '') ? m.tokens : null;
    const predicted = t.setCompletionTotal(m.tokens_predicted, 'tokens_predicted');
    const rise =
      predicted !== undefined && predicted > lastPredicted ? predicted - lastPredicted : 0;
    if (predicted !== undefined) lastPredicted = predicted;
    // The rise is the tokens since the last message; the id list holds only the newest.
    const exact = rise > (ids?.length ?? 0) ? rise : ids?.length;
    t.event({
      content,
      ...(exact !== undefined ? { tokens: exact } : {}),
      ...(predicted !== undefined ? { completionTokens: predicted } : {}),
    });
    if (m.stop !== true) return;
    const prompt = t.count(m.tokens_evaluated, 'tokens_evaluated', 'input');
    if (prompt !== undefined) t.promptTokens = prompt;
    const finish = llamaCppFinishReason(m);
    if (finish !== undefined) t.finishReason = finish;
    const timing = llamaCppTimings(m.timings, t);
    if (timing) t.serverTiming = timing;
    t.markDone();
  };
}

/** llama.cpp's own `POST /completion` (raw prompt, no chat template). */
export const llamaCppBackend: Backend = {
  name: 'llamacpp',
  request: (spec, options) => ({ path: '/completion', body: buildLlamaCppBody(spec, options) }),
  decoder: (sentAtUs, options, spec) =>
    createDecoder(
      { framing: 'sse', parse: parseMessage(), endMarker: 'stop: true' },
      sentAtUs,
      // `n_predict` wins over `max_tokens` in the server's params_from_json; -1 is no limit.
      outputTokenLimit(spec, options.extraBody, ['n_predict']),
    ),
  // `/v1/models` lists the alias (or file) the server loaded, on every build since early 2024.
  models: { path: '/v1/models', first: firstListedModel },
  supports: {
    endpoints: ['completions'],
    ignoreEos: true,
    continuousUsageStats: false,
    modelRequired: false,
  },
};
