/**
 * What a server says about itself, read from its own answers: the engine and its version (its
 * version endpoint, its model list, the names of its metrics), build and configuration facts
 * (info series such as vLLM's `vllm:cache_config_info`), and the GPUs it runs on (a DCGM
 * exporter's `modelName`, nvidia-smi's `name`). All of it is untrusted text: control characters
 * are stripped and every value and key count is capped, so a hostile server can neither fill a
 * manifest nor write escapes into a terminal that later prints it.
 */
import type { TelemetrySnapshot } from './snapshot.js';

/** The engines told apart; `infergauge-sim` is the built-in simulator. */
export const ENGINE_NAMES = [
  'vllm',
  'sglang',
  'tgi',
  'trtllm',
  'llamacpp',
  'ollama',
  'triton',
  'infergauge-sim',
] as const;
export type EngineName = (typeof ENGINE_NAMES)[number];

/** The GPUs a run ran on, and where that was learned. */
export interface GpuInfo {
  /** As the source names it: DCGM's `modelName`, nvidia-smi's `name`, or the user's text. */
  type: string;
  count: number;
  source: 'dcgm' | 'nvidia-smi' | 'server-metrics' | 'server-info';
}

/** What the manifest's `server` object gains: each field only where something said it. */
export interface ServerEnvironment {
  engine?: EngineName;
  engineVersion?: string;
  /** What the server said about its build and configuration, as text. */
  buildInfo?: Record<string, string>;
  gpu?: GpuInfo;
}

/** Characters of one value kept from a server's text, and keys of one `buildInfo`. */
export const MAX_FACT_CHARS = 200;
export const MAX_FACT_KEYS = 32;

/**
 * A server's value as one line of text: a string, number or boolean, control characters
 * replaced by spaces, trimmed, at most MAX_FACT_CHARS; anything else (an object, null, an
 * empty string) is no value.
 */
export function factText(value: unknown): string | undefined {
  if (typeof value === 'number' && !Number.isFinite(value)) return undefined;
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
    return undefined;
  }
  const text = String(value)
    .replace(/\p{Cc}/gu, ' ')
    .trim();
  if (text.length === 0) return undefined;
  return text.length > MAX_FACT_CHARS ? `${text.slice(0, MAX_FACT_CHARS - 3)}...` : text;
}

/** Keys a server names are shown too: the same rule, shorter. */
const factKey = (key: string) => factText(key)?.slice(0, 64);

/**
 * Keys named like credentials are never kept, whatever a server puts under them: `hf_token`
 * is one, `max_total_tokens` (a count) is not.
 */
const SECRET_KEY = /auth|key|secret|cookie|passw|credential|(^|[_.-])token$/i;

/** `buildInfo` from a server's fields, at most MAX_FACT_KEYS, in the order given. */
export function factsOf(entries: Iterable<[string, unknown]>): Record<string, string> | undefined {
  const facts: Record<string, string> = {};
  let n = 0;
  for (const [rawKey, value] of entries) {
    if (n >= MAX_FACT_KEYS) break;
    const key = factKey(rawKey);
    const text = factText(value);
    if (key === undefined || text === undefined || SECRET_KEY.test(key)) continue;
    if (Object.hasOwn(facts, key)) continue;
    facts[key] = text;
    n++;
  }
  return n > 0 ? facts : undefined;
}

const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);

/** `fields` of `body` that are there, as [key, value] pairs for factsOf. */
function pick(body: Record<string, unknown>, fields: readonly string[]): [string, unknown][] {
  return fields.filter((f) => Object.hasOwn(body, f)).map((f) => [f, body[f]]);
}

/**
 * One endpoint an engine answers about itself, and how its answer is read. Each shape is the
 * engine's own (the sources named), so that one engine's answer is not read as another's.
 */
export interface EngineEndpoint {
  path: string;
  read(body: unknown): ServerEnvironment | undefined;
}

/**
 * In order of precedence: the answers that name their engine by their shape first, then
 * `GET /version`, whose `{"version"}` vLLM and trtllm-serve both give (the model list's
 * `owned_by`, or the metrics' names, then say which).
 */
export const ENGINE_ENDPOINTS: readonly EngineEndpoint[] = [
  {
    // TGI, router/src/server.rs `get_model_info` (GET /info): Info { model_id, model_sha,
    // model_dtype, model_device_type, ..., version, sha, docker_label }.
    path: '/info',
    read: (body) => {
      if (!isObject(body) || typeof body.model_id !== 'string') return undefined;
      const version = factText(body.version);
      if (version === undefined && body.sha === undefined) return undefined;
      return withFacts(
        { engine: 'tgi', ...(version ? { engineVersion: version } : {}) },
        pick(body, [
          'sha',
          'docker_label',
          'model_sha',
          'model_dtype',
          'model_device_type',
          'max_concurrent_requests',
          'max_input_tokens',
          'max_total_tokens',
          'max_batch_total_tokens',
          'max_batch_size',
        ]),
      );
    },
  },
  ...['/get_server_info', '/server_info'].map(
    (path): EngineEndpoint => ({
      // SGLang, python/sglang/srt/entrypoints/http_server.py `get_server_info`: the server
      // arguments, the scheduler's info and `"version": __version__` (newer: /server_info).
      path,
      read: (body) => {
        if (!isObject(body) || !('model_path' in body || 'tp_size' in body)) return undefined;
        const version = factText(body.version);
        return withFacts(
          { engine: 'sglang', ...(version ? { engineVersion: version } : {}) },
          pick(body, [
            'tp_size',
            'dp_size',
            'pp_size',
            'ep_size',
            'dtype',
            'kv_cache_dtype',
            'quantization',
            'mem_fraction_static',
            'max_running_requests',
            'chunked_prefill_size',
            'schedule_policy',
            'attention_backend',
            'disable_radix_cache',
            'max_total_num_tokens',
          ]),
        );
      },
    }),
  ),
  {
    // llama.cpp, tools/server/server.cpp GET /props: default_generation_settings, total_slots,
    // model_path, chat_template and, since 2025, build_info ("b5120-2a0ab4e").
    path: '/props',
    read: (body) => {
      if (!isObject(body)) return undefined;
      if (!('build_info' in body || 'default_generation_settings' in body)) return undefined;
      const version = factText(body.build_info);
      const settings = isObject(body.default_generation_settings)
        ? body.default_generation_settings
        : {};
      return withFacts({ engine: 'llamacpp', ...(version ? { engineVersion: version } : {}) }, [
        ...pick(body, ['total_slots']),
        ...pick(settings, ['n_ctx']),
      ]);
    },
  },
  {
    // Triton, the KServe v2 server metadata (GET /v2): {"name": "triton", "version", ...}.
    path: '/v2',
    read: (body) => {
      if (!isObject(body) || body.name !== 'triton') return undefined;
      const version = factText(body.version);
      return { engine: 'triton', ...(version ? { engineVersion: version } : {}) };
    },
  },
  {
    // Ollama, server/routes.go GET /api/version: {"version": "0.5.7"}.
    path: '/api/version',
    read: (body) => {
      const version = isObject(body) ? factText(body.version) : undefined;
      return version ? { engine: 'ollama', engineVersion: version } : undefined;
    },
  },
  {
    // vLLM, vllm/entrypoints/openai/api_server.py GET /version: {"version": VLLM_VERSION};
    // trtllm-serve answers the same shape. The built-in simulator adds its name.
    path: '/version',
    read: (body) => {
      const version = isObject(body) ? factText(body.version) : undefined;
      if (version === undefined) return undefined;
      return {
        ...(isObject(body) && body.engine === 'infergauge-sim'
          ? { engine: 'infergauge-sim' as const }
          : {}),
        engineVersion: version,
      };
    },
  },
];

function withFacts(env: ServerEnvironment, entries: [string, unknown][]): ServerEnvironment {
  const facts = factsOf(entries);
  return facts ? { ...env, buildInfo: facts } : env;
}

/**
 * The model list's `owned_by` (GET /v1/models), which most engines fill with their own name:
 * vLLM "vllm", SGLang "sglang", trtllm-serve "tensorrt_llm", llama.cpp "llamacpp", the
 * simulator "infergauge-sim".
 */
export function engineFromModels(models: unknown): EngineName | undefined {
  const data = isObject(models) ? models.data : undefined;
  const owner = Array.isArray(data) && isObject(data[0]) ? data[0].owned_by : undefined;
  if (typeof owner !== 'string') return undefined;
  const owners: Record<string, EngineName> = {
    vllm: 'vllm',
    sglang: 'sglang',
    tensorrt_llm: 'trtllm',
    'tensorrt-llm': 'trtllm',
    trtllm: 'trtllm',
    llamacpp: 'llamacpp',
    'infergauge-sim': 'infergauge-sim',
  };
  return Object.hasOwn(owners, owner) ? owners[owner] : undefined;
}

/**
 * What the answers of ENGINE_ENDPOINTS say, first shape first: `answers` holds each path's
 * parsed JSON body (paths that did not answer 200 with JSON are absent), `models` the model
 * list discovery read. Nothing said is an empty object.
 */
export function engineFromAnswers(
  answers: ReadonlyMap<string, unknown>,
  models?: unknown,
): ServerEnvironment {
  for (const endpoint of ENGINE_ENDPOINTS) {
    if (!answers.has(endpoint.path)) continue;
    const env = endpoint.read(answers.get(endpoint.path));
    if (!env) continue;
    const engine = env.engine ?? engineFromModels(models);
    return { ...env, ...(engine ? { engine } : {}) };
  }
  const engine = engineFromModels(models);
  return engine ? { engine } : {};
}

/** Metric-name prefixes of each engine's own series (src/telemetry/common.ts reads them). */
const METRIC_PREFIXES: readonly [string, EngineName][] = [
  ['vllm:', 'vllm'],
  ['sglang:', 'sglang'],
  ['tgi_', 'tgi'],
  ['llamacpp:', 'llamacpp'],
  ['trtllm_', 'trtllm'],
  ['nv_trt_llm_', 'trtllm'],
];

/** Info series (value 1, facts in labels) whose labels are build or configuration facts. */
const INFO_SERIES = /(^|[:_])(build_info|cache_config_info|version_info)$/;

/** Labels of a series key `name{a="1",b="2"}` (values JSON-quoted, as seriesKey writes them). */
function labelsOf(key: string): [string, string][] {
  const brace = key.indexOf('{');
  if (brace < 0) return [];
  const out: [string, string][] = [];
  const re = /([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*")/g;
  for (const m of key.slice(brace + 1, -1).matchAll(re)) {
    try {
      out.push([m[1], JSON.parse(m[2]) as string]);
    } catch {
      // A label that does not read back is left out.
    }
  }
  return out;
}

const nameOf = (key: string) => {
  const brace = key.indexOf('{');
  return brace < 0 ? key : key.slice(0, brace);
};

/**
 * What one telemetry snapshot says about the server: from its own metrics, the engine (by its
 * metric names), info series' labels as build facts, and GPUs where a series names them; from a
 * DCGM exporter or nvidia-smi, the GPUs (type by name, count by distinct `gpu` index).
 */
export function environmentFromSnapshot(snapshot: TelemetrySnapshot): ServerEnvironment {
  const values = snapshot.values;
  if (!values) return {};
  const keys = Object.keys(values);
  const env: ServerEnvironment = {};
  if (snapshot.source === 'dcgm' || snapshot.source === 'prometheus') {
    const gpu = gpusNamed(keys, 'modelName');
    if (gpu) env.gpu = { ...gpu, source: snapshot.source === 'dcgm' ? 'dcgm' : 'server-metrics' };
  }
  if (snapshot.source === 'nvidia-smi') {
    const gpu = gpusNamed(keys, 'name');
    if (gpu) env.gpu = { ...gpu, source: 'nvidia-smi' };
  }
  if (snapshot.source !== 'prometheus') return env;
  for (const key of keys) {
    const engine = METRIC_PREFIXES.find(([prefix]) => key.startsWith(prefix))?.[1];
    if (engine) {
      env.engine = engine;
      break;
    }
  }
  const info = keys.filter((k) => INFO_SERIES.test(nameOf(k)));
  const facts = factsOf(
    info.flatMap((k) =>
      labelsOf(k)
        .filter(([label]) => !['engine', 'model_name', 'instance', 'job'].includes(label))
        .map(([label, value]): [string, string] => [label, value]),
    ),
  );
  if (facts) env.buildInfo = facts;
  return env;
}

/** GPUs by the label that names their type: each distinct `gpu` index counted once. */
function gpusNamed(keys: string[], typeLabel: string): Omit<GpuInfo, 'source'> | undefined {
  const byIndex = new Map<string, string>();
  for (const key of keys) {
    const labels = new Map(labelsOf(key));
    const type = factText(labels.get(typeLabel));
    if (type === undefined) continue;
    byIndex.set(labels.get('gpu') ?? labels.get('UUID') ?? String(byIndex.size), type);
  }
  if (byIndex.size === 0) return undefined;
  const types = [...new Set(byIndex.values())];
  return { type: factText(types.join(' + ')) as string, count: byIndex.size };
}

/** The most GPUs `--server-info gpu=` may name: a rack, not a typo's digit string. */
const MAX_GPU_COUNT = 4096;

/**
 * `--server-info gpu=H100x8` (also `8xH100`, `H100*8`, or `H100` for one) as a GPU type and
 * count. The count is split at the last lowercase `x`, `×` or `*` only where the type before it
 * holds a digit, so that names such as `RTX4090` or `gtx980` stay whole.
 */
export function parseGpuText(text: string): Omit<GpuInfo, 'source'> | undefined {
  const value = text.trim();
  if (value.length === 0) return undefined;
  const count = (n: string) => {
    const c = Number(n);
    return Number.isSafeInteger(c) && c >= 1 && c <= MAX_GPU_COUNT ? c : undefined;
  };
  const leading = /^(\d+)\s*[x×*]\s*(\S.*)$/.exec(value);
  if (leading && count(leading[1]) !== undefined && /\D/.test(leading[2])) {
    return { type: leading[2].trim(), count: count(leading[1]) as number };
  }
  const trailing = /^(.*\d.*?)\s*[x×*]\s*(\d+)$/.exec(value);
  if (trailing && count(trailing[2]) !== undefined && trailing[1].trim().length > 0) {
    return { type: trailing[1].trim(), count: count(trailing[2]) as number };
  }
  return { type: value, count: 1 };
}

/**
 * The environment as a point's telemetry adds to it, snapshot by snapshot: what the server
 * answered when asked keeps its engine and version; the metrics fill in an engine it did not
 * name, and their build facts join its own; GPUs from DCGM or nvidia-smi win over the server's
 * own metrics (the exporter reads the hardware).
 */
export function mergeEnvironment(
  into: ServerEnvironment,
  more: ServerEnvironment,
): ServerEnvironment {
  const out: ServerEnvironment = { ...into };
  if (out.engine === undefined && more.engine !== undefined) out.engine = more.engine;
  if (out.engineVersion === undefined && more.engineVersion !== undefined) {
    out.engineVersion = more.engineVersion;
  }
  if (more.buildInfo) {
    out.buildInfo = factsOf([
      ...Object.entries(out.buildInfo ?? {}),
      ...Object.entries(more.buildInfo),
    ]);
  }
  const rank = (g: GpuInfo | undefined) =>
    g === undefined
      ? -1
      : ['server-info', 'server-metrics', 'nvidia-smi', 'dcgm'].indexOf(g.source);
  if (more.gpu && rank(more.gpu) >= rank(out.gpu)) out.gpu = more.gpu;
  return out;
}
