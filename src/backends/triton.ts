// Wire format: Triton docs/protocol/extension_generate.md, tensorrtllm_backend ensemble/BLS, 2025.
import { createDecoder, inStreamError } from './decoder.js';
import { outputTokenLimit, withExtraBody } from './request.js';
import type { Timeline } from './timeline.js';
import type { Backend, BackendOptions, RequestSpec } from './types.js';

export function buildTritonBody(spec: RequestSpec, options: BackendOptions): string {
  // Extra top-level fields become model inputs, and Triton rejects inputs the model does not
  // declare: only the TensorRT-LLM ensemble's own names are sent, each only when needed.
  const body: Record<string, unknown> = {
    text_input: spec.prompt,
    max_tokens: spec.requestedOutputTokens,
    stream: true,
  };
  // Greedy is TensorRT-LLM's default; it samples only with top_k / top_p set (--extra-body).
  if (options.temperature > 0) body.temperature = options.temperature;
  // No end-of-sequence before the requested length: what ignore_eos means elsewhere.
  if (options.ignoreEos) body.min_length = spec.requestedOutputTokens;
  return JSON.stringify(withExtraBody(body, options.extraBody));
}

type TextMode = 'unknown' | 'delta' | 'cumulative';

/**
 * Turns each message's text into the text it adds. Servers differ: the TensorRT-LLM ensemble
 * sends only the new tokens' text, its BLS model with `accumulate_tokens` (and SGLang by
 * default) repeat everything so far. A message that extends the previous one marks the stream
 * cumulative; one that does not marks it delta for good. Identical messages before that
 * decision pass as new text, since repeated tokens are likelier than a stalled cumulative one.
 */
export function createTextDeltas(): (text: string) => string {
  let mode: TextMode = 'unknown';
  let previous = '';
  return (text) => {
    if (mode === 'delta') return text;
    if (mode === 'cumulative') {
      if (!text.startsWith(previous)) {
        mode = 'delta';
        return text;
      }
      const added = text.slice(previous.length);
      previous = text;
      return added;
    }
    if (previous === '' || text === previous) {
      if (previous === '') previous = text;
      return text;
    }
    if (text.length > previous.length && text.startsWith(previous)) {
      mode = 'cumulative';
      const added = text.slice(previous.length);
      previous = text;
      return added;
    }
    mode = 'delta';
    return text;
  };
}

/**
 * One `generate_stream` message: `text_output` (delta or cumulative, see createTextDeltas), no
 * token counts and no end marker (the response simply ends), or `{"error": "..."}`.
 */
function parseMessage(delta: (text: string) => string) {
  return (m: Record<string, unknown>, t: Timeline): void => {
    if (m.error !== undefined) {
      t.fault = inStreamError(m.error);
      return;
    }
    const text = typeof m.text_output === 'string' ? m.text_output : '';
    t.event({ content: delta(text) });
  };
}

/** Triton Inference Server's generate extension, for a TensorRT-LLM ensemble or BLS model. */
export const tritonBackend: Backend = {
  name: 'triton',
  request: (spec, options) => ({
    path: `/v2/models/${encodeURIComponent(options.model)}/generate_stream`,
    body: buildTritonBody(spec, options),
  }),
  // No end marker: http_server.cc ends the chunked response when the model's response carries
  // TRITONSERVER_RESPONSE_COMPLETE_FINAL and writes nothing more, so a clean close is the end
  // (a cut mid-event is still `truncated`). No counts arrive; the output limit (`max_tokens`)
  // bounds the events of one answer (REQUEST_BOUNDS).
  decoder: (sentAtUs, options, spec) =>
    createDecoder(
      { framing: 'sse', parse: parseMessage(createTextDeltas()) },
      sentAtUs,
      outputTokenLimit(spec, options.extraBody, ['max_tokens']),
    ),
  supports: {
    endpoints: ['completions'],
    ignoreEos: true,
    continuousUsageStats: false,
    modelRequired: true,
  },
};
