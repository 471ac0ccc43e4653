// Wire format: TGI router/src/lib.rs StreamResponse/StreamDetails + server.rs, TGI 2.x-3.x.
import { createDecoder, inStreamError } from './decoder.js';
import { outputTokenLimit, withExtraBody } from './request.js';
import type { Timeline } from './timeline.js';
import type { Backend, BackendOptions, RequestSpec } from './types.js';

export function buildTgiBody(spec: RequestSpec, options: BackendOptions): string {
  // TGI rejects temperature 0 ("must be strictly positive"); greedy is do_sample false.
  const greedy = options.temperature <= 0;
  const parameters: Record<string, unknown> = {
    max_new_tokens: spec.requestedOutputTokens,
    do_sample: !greedy,
    // Without details the final event has no token counts or finish reason.
    details: true,
  };
  if (!greedy) parameters.temperature = options.temperature;
  const body: Record<string, unknown> = { inputs: spec.prompt, parameters };
  return JSON.stringify(withExtraBody(body, options.extraBody, 'parameters'));
}

/** TGI's finish reasons in OpenAI's words, so records compare across backends. */
const FINISH_REASONS = new Map([
  ['eos_token', 'stop'],
  ['stop_sequence', 'stop'],
  ['length', 'length'],
]);

/**
 * The status TGI answers each client-side `error_type` with outside a stream. A failed
 * generation (424 there) is left out: mid-stream it is the server's fault.
 */
const ERROR_STATUS = new Map([
  ['validation', 422],
  ['overloaded', 429],
  ['template_error', 422],
  ['tool_error', 422],
  ['missing_template_variable', 422],
]);

/**
 * One `/generate_stream` event: exactly one token (special ones too, which count as output but
 * not as visible text). The last event also carries `generated_text` and `details` (totals,
 * finish reason, and the prompt length in recent releases); the stream then ends without `[DONE]`.
 */
function parseEvent(m: Record<string, unknown>, t: Timeline): void {
  const token = m.token as { text?: unknown; special?: unknown } | undefined;
  if (m.error !== undefined && token === undefined) {
    const status = ERROR_STATUS.get(String(m.error_type));
    t.fault = inStreamError({
      message: m.error,
      ...(status !== undefined ? { code: status } : {}),
    });
    return;
  }
  if (token && typeof token === 'object') {
    const visible = token.special !== true && typeof token.text === 'string';
    t.event({ content: visible ? (token.text as string) : '', tokens: 1 });
  } else {
    t.event({});
  }
  const details = m.details as Record<string, unknown> | null | undefined;
  if (details && typeof details === 'object') {
    t.setCompletionTotal(details.generated_tokens, 'details.generated_tokens');
    const prompt = t.count(details.input_length, 'details.input_length', 'input');
    if (prompt !== undefined) t.promptTokens = prompt;
    if (typeof details.finish_reason === 'string') {
      t.finishReason = FINISH_REASONS.get(details.finish_reason) ?? details.finish_reason;
    }
  }
  if (typeof m.generated_text === 'string' || details) t.markDone();
}

/** Hugging Face Text Generation Inference's own `POST /generate_stream` (raw prompt). */
export const tgiBackend: Backend = {
  name: 'tgi',
  request: (spec, options) => ({ path: '/generate_stream', body: buildTgiBody(spec, options) }),
  // server.rs generate_stream: only the last StreamResponse has `generated_text` (and, with
  // details, `details`) set; the stream then closes, with no `[DONE]` on this route.
  decoder: (sentAtUs, options, spec) =>
    createDecoder(
      { framing: 'sse', parse: parseEvent, endMarker: 'an event with generated_text' },
      sentAtUs,
      outputTokenLimit(spec, options.extraBody, ['max_new_tokens'], 'parameters'),
    ),
  models: {
    path: '/info',
    first: (body) => {
      const id = (body as { model_id?: unknown } | undefined)?.model_id;
      return typeof id === 'string' ? id : undefined;
    },
  },
  supports: {
    endpoints: ['completions'],
    // TGI has no way to ignore the end-of-sequence token.
    ignoreEos: false,
    continuousUsageStats: false,
    modelRequired: false,
  },
};
