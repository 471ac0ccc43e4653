/**
 * The engine and version of the server under test, asked once per session after the model is
 * known: each engine's own endpoint (src/telemetry/environment.ts ENGINE_ENDPOINTS) at once,
 * through the connection settings discovery used, each within a short timeout. It never fails
 * a run: a server that answers none of them records no engine, and says nothing.
 */
import { secretValues, splitServerUrl, withApiKey, withoutSecrets } from '../backends/request.js';
import { requestText } from '../httpText.js';
import type { ProxySettings } from '../proxy.js';
import {
  ENGINE_ENDPOINTS,
  engineFromAnswers,
  parseGpuText,
  type ServerEnvironment,
} from '../telemetry/environment.js';
import type { TlsMaterial } from '../tls.js';

/** Long enough for a server on another continent; short enough not to hold up the run. */
export const ENGINE_ASK_TIMEOUT_MS = 2_000;
/** The largest answer read: SGLang's server info is the longest, tens of kilobytes. */
const MAX_ANSWER_BYTES = 1024 * 1024;

export interface EngineAsk {
  /** The request headers discovery sent, the API key among them. */
  headers: Record<string, string>;
  apiKey?: string | undefined;
  tls?: TlsMaterial | undefined;
  proxy?: ProxySettings | undefined;
  /** What discovery read from the model list: its `owned_by` names most engines. */
  models?: unknown;
  timeoutMs?: number;
}

/** What the server at `url` says it is; an empty object when it says nothing. */
export async function askServerEngine(url: string, ask: EngineAsk): Promise<ServerEnvironment> {
  const { origin, prefix } = splitServerUrl(url);
  const headers = withApiKey(ask.headers, ask.apiKey);
  const answers = new Map<string, unknown>();
  await Promise.all(
    ENGINE_ENDPOINTS.map(async ({ path }) => {
      try {
        const response = await requestText(`${origin}${prefix}${path}`, {
          headers,
          timeoutMs: ask.timeoutMs ?? ENGINE_ASK_TIMEOUT_MS,
          maxBytes: MAX_ANSWER_BYTES,
          ...(ask.tls ? { tls: ask.tls } : {}),
          ...(ask.proxy ? { proxy: ask.proxy } : {}),
        });
        if (response.statusCode === 200) answers.set(path, JSON.parse(response.body) as unknown);
      } catch {
        // Not this engine's endpoint, too slow, too large or not JSON: it said nothing.
      }
    }),
  );
  return scrubbed(engineFromAnswers(answers, ask.models), secretValues(ask.headers, ask.apiKey));
}

/** A server that echoes the key back in its version text gets it masked, as error text is. */
function scrubbed(env: ServerEnvironment, secrets: string[]): ServerEnvironment {
  if (secrets.length === 0) return env;
  const out: ServerEnvironment = { ...env };
  if (out.engineVersion !== undefined) {
    out.engineVersion = withoutSecrets(out.engineVersion, secrets);
  }
  if (out.buildInfo) {
    out.buildInfo = Object.fromEntries(
      Object.entries(out.buildInfo).map(([k, v]) => [k, withoutSecrets(v, secrets)]),
    );
  }
  return out;
}

/**
 * The manifest's `server` fields about the environment: what the server said, the user's
 * `--server-info` as `info`, and `gpu=` among it as the GPUs where nothing measured them (the
 * point's telemetry may replace it with what DCGM or nvidia-smi saw: resultsOutput).
 */
export function environmentFields(
  env: ServerEnvironment,
  serverInfo: Record<string, string> | undefined,
): ServerEnvironment & { info?: Record<string, string> } {
  const stated = serverInfo?.gpu !== undefined ? parseGpuText(serverInfo.gpu) : undefined;
  const gpu = env.gpu ?? (stated ? { ...stated, source: 'server-info' as const } : undefined);
  return {
    ...env,
    ...(gpu ? { gpu } : {}),
    ...(serverInfo ? { info: serverInfo } : {}),
  };
}
