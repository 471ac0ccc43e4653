/**
 * `--reset-cache`: the server's prefix cache emptied before every run and sweep point, through
 * the engine's own route, so that a point's hits are its own workload's and not what earlier
 * points (or runs, or clients) left. A server that cannot be reset is an error before anything
 * is sent, never a silent uncontrolled run.
 *
 * The routes, as their sources have them:
 * - vLLM `POST /reset_prefix_cache`, served only with VLLM_SERVER_DEV_MODE=1 (`attach_router`
 *   returns early without it: vllm/entrypoints/serve/cache/api_router.py at vllm-project/vllm
 *   09cb327f; before, the route sat under `if envs.VLLM_SERVER_DEV_MODE:` in
 *   vllm/entrypoints/openai/api_server.py, with a `?device=` parameter). Without dev mode it
 *   is a 404. Its query parameters are now `reset_running_requests` and `reset_external`; we
 *   send neither, so running requests are never preempted for it. The engine refuses while any
 *   KV block is in use (vllm/v1/core/block_pool.py `reset_prefix_cache`: "Failed to reset
 *   prefix cache because some blocks (N) are not freed yet"); releases up to 09cb327f answer
 *   200 either way ("we currently do not check if the prefix cache is successfully reset"),
 *   newer ones 200 with `{"success": bool}` (vllm/frontend/entrypoints/serve/dev/cache/
 *   api_router.py at 055e47c2).
 * - SGLang `GET|POST /flush_cache` (python/sglang/srt/entrypoints/http_server.py at
 *   sgl-project/sglang 9c0549b7): 200 once flushed, 400 when "there are running or waiting
 *   requests" (the scheduler flushes only when fully idle).
 * - The built-in simulator serves both, with the engine's semantics (src/sim/server.ts).
 * Other engines have no such route: TGI, TensorRT-LLM's trtllm-serve and Ollama none;
 * llama-server only erases one slot at a time (`POST /slots/N?action=erase`), not done here.
 */
import { secretValues, splitServerUrl, withApiKey, withoutSecrets } from '../backends/request.js';
import { EXIT, InfergaugeError } from '../errors.js';
import { requestText } from '../httpText.js';
import type { ProxySettings } from '../proxy.js';
import { terminalSafe } from '../report/format.js';
import type { EngineName } from '../telemetry/environment.js';
import type { TlsMaterial } from '../tls.js';

/** The engine's reset route, and how its answer says it was done. */
export interface CacheResetRoute {
  engine: 'vllm' | 'sglang' | 'infergauge-sim';
  method: 'POST';
  path: '/reset_prefix_cache' | '/flush_cache';
}

/** Stable code of every failed reset (exit 2: the server is not set up for --reset-cache). */
export const CACHE_RESET_ERROR = 'IG_CACHE_RESET';

/**
 * A refusal of a busy engine (requests of another client, or aborted ones still draining) is
 * retried this often, this far apart: SGLang's own callers retry its flush the same way.
 */
export const RESET_TRIES = 5;
export const RESET_RETRY_MS = 400;
const RESET_TIMEOUT_MS = 30_000;
/** A reset answer is a line of text or a small JSON object. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * The route for the engine the server said it is (src/session/serverEngine.ts), or why there is
 * none. `--backend sglang` (SGLang's native API) names the engine where the server did not.
 */
export function cacheResetRoute(
  engine: EngineName | undefined,
  backend: string,
): CacheResetRoute | { problem: string } {
  const e = engine ?? (backend === 'sglang' ? 'sglang' : undefined);
  if (e === 'vllm' || e === 'infergauge-sim') {
    return { engine: e, method: 'POST', path: '/reset_prefix_cache' };
  }
  if (e === 'sglang') return { engine: e, method: 'POST', path: '/flush_cache' };
  if (e === undefined) {
    return {
      problem:
        "--reset-cache: the server did not say which engine it is (vLLM's /version, SGLang's /get_server_info), so its reset route is unknown; leave out --reset-cache and restart the server for a cold cache",
    };
  }
  return {
    problem: `--reset-cache: ${e} has no route that empties its prefix cache (vLLM's /reset_prefix_cache and SGLang's /flush_cache are known); restart the server for a cold cache, or leave out --reset-cache`,
  };
}

export interface CacheResetAsk {
  headers: Record<string, string>;
  apiKey?: string | undefined;
  tls?: TlsMaterial | undefined;
  proxy?: ProxySettings | undefined;
  /** Between refusals (tests shorten it). */
  retryMs?: number;
  tries?: number;
}

/**
 * Empties the server's prefix cache through `route`; throws an InfergaugeError (exit 2) with
 * the reason and the fix when the route is missing, forbidden or keeps refusing.
 */
export async function resetServerCache(
  url: string,
  route: CacheResetRoute,
  ask: CacheResetAsk,
): Promise<void> {
  const { origin, prefix } = splitServerUrl(url);
  const target = `${origin}${prefix}${route.path}`;
  const secrets = secretValues(ask.headers, ask.apiKey);
  const tries = ask.tries ?? RESET_TRIES;
  let refusal = '';
  for (let attempt = 1; attempt <= tries; attempt++) {
    let answer: { statusCode: number; body: string };
    try {
      answer = await requestText(target, {
        method: route.method,
        headers: withApiKey(ask.headers, ask.apiKey),
        body: '',
        timeoutMs: RESET_TIMEOUT_MS,
        maxBytes: MAX_ANSWER_BYTES,
        ...(ask.tls ? { tls: ask.tls } : {}),
        ...(ask.proxy ? { proxy: ask.proxy } : {}),
      });
    } catch (err) {
      throw failed(`${route.method} ${route.path} failed: ${(err as Error).message}`);
    }
    const said = shown(withoutSecrets(answer.body, secrets));
    const outcome = readAnswer(route, answer.statusCode, said);
    if (outcome === 'done') return;
    if (outcome !== 'refused') throw failed(outcome);
    refusal = said;
    if (attempt < tries) await sleep(ask.retryMs ?? RESET_RETRY_MS);
  }
  throw failed(
    `the server refused to empty its prefix cache ${tries} times${refusal ? ` (${refusal})` : ''}: ${
      route.engine === 'sglang'
        ? 'SGLang flushes only with no request running or waiting'
        : 'vLLM resets only with no KV block in use'
    }; stop other clients of this server, or leave out --reset-cache`,
  );
}

/** `done`, `refused` (worth another try), or why it can never work as asked. */
function readAnswer(route: CacheResetRoute, status: number, said: string): string {
  const call = `${route.method} ${route.path}`;
  if (status === 404 || status === 405) {
    return route.engine === 'vllm'
      ? `the server answered ${status} to ${call}: vLLM serves it only in development mode; start vLLM with VLLM_SERVER_DEV_MODE=1, or leave out --reset-cache`
      : `the server answered ${status} to ${call}: it has no such route; leave out --reset-cache and restart the server for a cold cache`;
  }
  if (status === 401 || status === 403) {
    return `the server answered ${status} to ${call}: the API key (--api-key-env) is missing or not allowed to reset the cache`;
  }
  if (route.engine === 'sglang') {
    if (status === 200) return 'done';
    if (status === 400) return 'refused';
    return `the server answered ${status} to ${call}${said ? `: ${said}` : ''}`;
  }
  if (status !== 200) return `the server answered ${status} to ${call}${said ? `: ${said}` : ''}`;
  // Older vLLM answers 200 with nothing, whatever happened: taken as done (nothing else says).
  if (said === '') return 'done';
  try {
    const body = JSON.parse(said) as { success?: unknown };
    if (body.success === false) return 'refused';
  } catch {
    // Not JSON: an older release's empty or plain answer.
  }
  return 'done';
}

function failed(reason: string): InfergaugeError {
  return new InfergaugeError(`--reset-cache: ${reason}`, CACHE_RESET_ERROR, EXIT.invalidOptions);
}

/** Server text on one line, without control characters, cut to a readable length. */
function shown(text: string): string {
  const line = terminalSafe(text).replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 200)}...` : line;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** What resetting a run's server needs: its URL, the engine it said it is, the plan's access. */
export interface CacheResetTarget {
  url: string;
  environment: { engine?: EngineName };
  plan: {
    backend: string;
    headers: Record<string, string>;
    tls?: { material?: TlsMaterial } | undefined;
  };
  apiKey: string | undefined;
  config: { proxy?: ProxySettings | undefined };
}

/**
 * Empties the target server's prefix cache (`--reset-cache`): once as the target opens (so a
 * server that cannot be reset is refused before anything is measured) and before every point.
 */
export async function resetTargetCache(
  target: CacheResetTarget,
  o: Pick<CacheResetAsk, 'retryMs' | 'tries'> = {},
): Promise<void> {
  const route = cacheResetRoute(target.environment.engine, target.plan.backend);
  if ('problem' in route)
    throw new InfergaugeError(route.problem, CACHE_RESET_ERROR, EXIT.invalidOptions);
  await resetServerCache(target.url, route, {
    headers: target.plan.headers,
    apiKey: target.apiKey,
    tls: target.plan.tls?.material,
    proxy: target.config.proxy,
    ...o,
  });
}
