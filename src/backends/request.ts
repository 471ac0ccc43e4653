import { REQUEST_BOUNDS } from './timeline.js';
import type { BackendOptions, RequestSpec } from './types.js';

/**
 * UTF-8 bytes of its answer a request keeps (`captureAnswer`: a session's `--history actual`, an
 * agent's tool calls), or undefined when it keeps none.
 */
export function answerCaptureBytes(
  spec: RequestSpec,
  options: Pick<BackendOptions, 'maxAnswerBytes'>,
): number | undefined {
  if (spec.captureAnswer !== true) return undefined;
  return options.maxAnswerBytes ?? REQUEST_BOUNDS.answerBytes;
}

/**
 * `--extra-body` merged last into a request body. Where a server nests its sampling settings
 * (`parameters` for TGI, `options` for Ollama, `sampling_params` for SGLang), the extra object
 * under that key adds to ours instead of replacing it, so `{"options":{"num_ctx":8192}}` keeps
 * `num_predict`.
 */
export function withExtraBody(
  body: Record<string, unknown>,
  extra: Record<string, unknown> | undefined,
  nestedKey?: string,
): Record<string, unknown> {
  if (!extra) return body;
  const merged = { ...body, ...extra };
  const nested = nestedKey === undefined ? undefined : extra[nestedKey];
  if (
    nestedKey !== undefined &&
    typeof nested === 'object' &&
    nested !== null &&
    !Array.isArray(nested)
  ) {
    merged[nestedKey] = { ...(body[nestedKey] as object), ...nested };
  }
  return merged;
}

/**
 * Splits a user's server URL into its origin and a path prefix; a trailing `/v1` is dropped, so
 * `http://host:8000` and `http://host:8000/v1` name the same server.
 */
export function splitServerUrl(serverUrl: string): { origin: string; prefix: string } {
  const url = new URL(serverUrl);
  return { origin: url.origin, prefix: url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '') };
}

/** Request headers with the API key as a bearer token, when there is one. */
export function withApiKey(
  headers: Record<string, string>,
  apiKey: string | undefined,
): Record<string, string> {
  return apiKey ? { ...headers, authorization: `Bearer ${apiKey}` } : headers;
}

/** An HTTP field name (RFC 9110 token). */
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * Characters an HTTP field value may not hold (RFC 9110 5.5: CR, LF, NUL and the other controls
 * but tab; and, as undici refuses them, anything past Latin-1).
 */
const NOT_FIELD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/**
 * Why these request headers cannot be sent, or undefined when they can. Names no value: the API
 * key and other header values may be secrets.
 */
export function headerProblem(
  headers: Record<string, string>,
  apiKey: string | undefined,
): string | undefined {
  if (apiKey !== undefined && NOT_FIELD_VALUE.test(apiKey)) {
    return 'the API key holds a control character (CR or LF: a line end read from a file?) or a character past Latin-1; remove it';
  }
  for (const [name, value] of Object.entries(headers)) {
    if (!FIELD_NAME.test(name))
      return `the header name ${JSON.stringify(name)} is not an HTTP token`;
    if (NOT_FIELD_VALUE.test(value)) {
      return `the value of header ${name} holds a control character (CR, LF, NUL) or a character past Latin-1; remove it`;
    }
  }
  return undefined;
}

/**
 * Names of headers and request-body fields whose values are credentials: authorization,
 * proxy-authorization, api-key, x-api-key, cookie, and any name that reads like one.
 */
export const SECRET_NAME = /auth|key|token|secret|cookie|password|passwd|credential|session/i;
/** Shorter values are not redacted: a 3-character value would mask ordinary words. */
const MIN_SECRET_CHARS = 8;
/** What a secret in server text becomes. */
export const REDACTED = '<redacted>';

/**
 * The secrets a server might echo back: the API key, and the values of credential headers
 * given with `--header` (a `Bearer ` or `Basic ` scheme dropped, so the token alone matches
 * too), each at least 8 characters, longest first.
 */
export function secretValues(
  headers: Record<string, string>,
  apiKey: string | undefined,
): string[] {
  const secrets = new Set<string>();
  const add = (value: string | undefined) => {
    const v = value?.trim();
    if (v !== undefined && v.length >= MIN_SECRET_CHARS) secrets.add(v);
  };
  add(apiKey);
  for (const [name, value] of Object.entries(headers)) {
    if (!SECRET_NAME.test(name)) continue;
    add(value);
    add(/^\s*(?:bearer|basic|token)\s+(.*)$/i.exec(value)?.[1]);
  }
  return [...secrets].sort((a, b) => b.length - a.length);
}

/**
 * `text` (from a server) with every secret replaced by REDACTED, and with a clipped tail that is
 * the start of a secret (an error message cut at 300 characters inside an echoed key) masked
 * too, from 4 characters on.
 */
export function withoutSecrets(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0) return text;
  let out = text;
  for (const secret of secrets) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  const body = out.endsWith('...') ? out.slice(0, -3) : out;
  for (const secret of secrets) {
    for (let n = Math.min(secret.length - 1, body.length); n >= 4; n--) {
      if (body.endsWith(secret.slice(0, n))) {
        return body.slice(0, body.length - n) + REDACTED + out.slice(body.length);
      }
    }
  }
  return out;
}

/** The first `data[].id` of an OpenAI-style model list (`GET /v1/models`). */
export function firstListedModel(body: unknown): string | undefined {
  const data = (body as { data?: { id?: unknown }[] } | undefined)?.data;
  const id = Array.isArray(data) ? data[0]?.id : undefined;
  return typeof id === 'string' ? id : undefined;
}

/**
 * The most output tokens a request allows: `requestedOutputTokens`, unless `--extra-body` sets
 * one of `keys` (the first present wins, as the server reads them) under `nestedKey` where the
 * server nests its sampling settings. An override that is not a count (`-1` for "no limit",
 * `null`) leaves the limit unknown.
 */
export function outputTokenLimit(
  spec: RequestSpec,
  extra: Record<string, unknown> | undefined,
  keys: readonly string[],
  nestedKey?: string,
): number | undefined {
  const source = nestedKey === undefined ? extra : extra?.[nestedKey];
  if (nestedKey !== undefined && extra !== undefined && nestedKey in extra) {
    // A non-object there replaces the whole nested settings, our limit with them.
    if (typeof source !== 'object' || source === null || Array.isArray(source)) return undefined;
  }
  if (typeof source === 'object' && source !== null) {
    for (const key of keys) {
      if (!(key in source)) continue;
      const value = (source as Record<string, unknown>)[key];
      return Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : undefined;
    }
  }
  return spec.requestedOutputTokens;
}
