import { readFile, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { splitServerUrl } from '../backends/request.js';
import { EXIT, type ExitCode, InfergaugeError } from '../errors.js';
import { requestText } from '../httpText.js';
import { countWords } from './words.js';

/**
 * Counts tokens the way the target model does, so synthesised prompts can hit a requested
 * length exactly: a local Hugging Face `tokenizer.json`, an OpenAI encoding, the server's own
 * tokenize endpoint, or whitespace-separated words (exact only against the built-in simulator).
 */
export interface Tokenizer {
  /** e.g. 'words', 'o200k_base', 'cl100k_base', 'hf:/path/tokenizer.json', 'server:http://host:port (vllm)' */
  readonly name: string;
  /** false only for the words fallback used against a real server (then counts are approximate). */
  readonly exact: boolean;
  /** Tokens in `text`, without special tokens (no BOS/EOS). */
  count(text: string): Promise<number>;
  /** Synchronous count, for local tokenizers (undefined for the server tokenizer). */
  countSync?(text: string): number;
}

/** A tokenizer that cannot be loaded or reached; the message names the file or the URL. */
/**
 * A tokenizer that cannot be had. A `--tokenizer` the user got wrong (no such file, not a
 * tokenizer.json, a server without a tokenize route) is bad usage, exit 2; a server's tokenize
 * route failing at run time is a failure, exit 1.
 */
export class TokenizerError extends InfergaugeError {
  constructor(message: string, exitCode: ExitCode = EXIT.failure) {
    super(message, 'IG_TOKENIZER', exitCode);
  }
}

const badSpec = (message: string) => new TokenizerError(message, EXIT.invalidOptions);

export interface ServerTokenizerTarget {
  /** The server URL as the user gave it (a trailing `/v1` is fine). */
  url: string;
  model: string;
  /** The `--backend` name: 'openai' (vLLM-like), 'sglang', 'llamacpp', 'tgi'. */
  backend: string;
  /** Request headers (the API key). */
  headers: Record<string, string>;
}

export interface CreateTokenizerOptions {
  /** Where and how to reach the server's tokenize endpoint; needed for 'server'. */
  server?: ServerTokenizerTarget;
  /** True when the target is infergauge's own simulator (then 'words' is exact). */
  builtInSimulator?: boolean;
}

/** The tokenizer specs that are not paths. */
export const TOKENIZER_NAMES = ['words', 'o200k_base', 'cl100k_base', 'server'] as const;

const LOCAL_HINT =
  'pass --tokenizer with a local tokenizer.json (or a directory holding one), o200k_base or cl100k_base';

/**
 * spec: 'words' | 'o200k_base' | 'cl100k_base' | 'server' | a path to tokenizer.json or a
 * directory holding one (an `hf:` prefix is accepted, so a tokenizer's name is a valid spec).
 */
export async function createTokenizer(
  spec: string,
  options: CreateTokenizerOptions = {},
): Promise<Tokenizer> {
  switch (spec) {
    case 'words':
      return wordsTokenizer(options.builtInSimulator === true);
    case 'o200k_base':
    case 'cl100k_base':
      return openAiTokenizer(spec);
    case 'server': {
      if (!options.server) {
        throw badSpec('--tokenizer server needs a server to ask (its URL, model and backend)');
      }
      return serverTokenizer(options.server);
    }
    default:
      if (spec.trim() === '') throw badSpec(`empty tokenizer spec; ${LOCAL_HINT}`);
      return huggingFaceTokenizer(spec.startsWith('hf:') ? spec.slice(3) : spec);
  }
}

/** One token per whitespace-separated word: what the built-in simulator counts. */
function wordsTokenizer(exact: boolean): Tokenizer {
  return {
    name: 'words',
    exact,
    countSync: countWords,
    count: async (text) => countWords(text),
  };
}

/** Counting options: special-token text (`<|endoftext|>`) is ordinary text, as servers treat user prompts. */
const AS_TEXT = { disallowedSpecial: new Set<string>() };

async function openAiTokenizer(name: 'o200k_base' | 'cl100k_base'): Promise<Tokenizer> {
  const encoding =
    name === 'o200k_base'
      ? await import('gpt-tokenizer/encoding/o200k_base')
      : await import('gpt-tokenizer/encoding/cl100k_base');
  const countSync = (text: string) => encoding.countTokens(text, AS_TEXT);
  return { name, exact: true, countSync, count: async (text) => countSync(text) };
}

/** A local Hugging Face tokenizer.json (or a directory holding one), through @huggingface/tokenizers. */
async function huggingFaceTokenizer(path: string): Promise<Tokenizer> {
  let file = resolve(path);
  const info = await stat(file).catch(() => undefined);
  if (info === undefined) {
    throw badSpec(`tokenizer ${path}: no such file or directory; ${LOCAL_HINT}`);
  }
  if (info.isDirectory()) {
    file = join(file, 'tokenizer.json');
    if (!(await stat(file).catch(() => undefined))?.isFile()) {
      throw badSpec(`tokenizer ${path}: the directory holds no tokenizer.json`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw badSpec(`tokenizer ${file}: not readable JSON (${(err as Error).message})`);
  }
  const model = isObject(json) ? json.model : undefined;
  if (!isObject(json) || !isObject(model) || typeof model.type !== 'string') {
    throw badSpec(
      `tokenizer ${file}: not a Hugging Face tokenizer.json (it has no "model" with a "type")`,
    );
  }
  // tokenizer_config.json sits next to tokenizer.json in a model repository; it is optional.
  let config: unknown = {};
  try {
    config = JSON.parse(await readFile(join(dirname(file), 'tokenizer_config.json'), 'utf8'));
  } catch {
    config = {};
  }
  const { Tokenizer: HfTokenizer } = await import('@huggingface/tokenizers');
  let tokenizer: InstanceType<typeof HfTokenizer>;
  const options = { add_special_tokens: false };
  try {
    tokenizer = new HfTokenizer(json, isObject(config) ? config : {});
    tokenizer.encode('hello world', options);
  } catch (err) {
    throw badSpec(`tokenizer ${file}: cannot be loaded (${(err as Error).message})`);
  }
  const countSync = (text: string) => tokenizer.encode(text, options).ids.length;
  return { name: `hf:${file}`, exact: true, countSync, count: async (text) => countSync(text) };
}

/** How one server family spells its tokenize endpoint. */
interface TokenizeFlavor {
  label: string;
  path: string;
  body(text: string, model: string): Record<string, unknown>;
  /** Tokens in the response, or undefined when it is not the expected shape. */
  parse(body: unknown): number | undefined;
}

/** vLLM (and the simulator) and SGLang: `{count, tokens, max_model_len}`. */
const OPENAI_LIKE: Omit<TokenizeFlavor, 'label'> = {
  path: '/tokenize',
  body: (prompt, model) => ({ model, prompt, add_special_tokens: false }),
  parse: (body) => {
    if (!isObject(body)) return undefined;
    if (typeof body.count === 'number') return body.count;
    return Array.isArray(body.tokens) ? body.tokens.length : undefined;
  },
};

const FLAVORS: Record<string, TokenizeFlavor> = {
  openai: { label: 'vllm', ...OPENAI_LIKE },
  // SGLang serves the same request and response at /tokenize and /v1/tokenize.
  sglang: { label: 'sglang', ...OPENAI_LIKE },
  llamacpp: {
    label: 'llama.cpp',
    path: '/tokenize',
    body: (content) => ({ content, add_special: false }),
    parse: (body) =>
      isObject(body) && Array.isArray(body.tokens) ? body.tokens.length : undefined,
  },
  tgi: {
    label: 'tgi',
    path: '/tokenize',
    // add_special_tokens is honoured by TGI 2.x; older routers ignore it and add BOS, which
    // the overhead probe below discounts.
    body: (inputs) => ({ inputs, add_special_tokens: false }),
    parse: (body) => (Array.isArray(body) ? body.length : undefined),
  },
};

interface TgiToken {
  id?: unknown;
  start?: unknown;
  stop?: unknown;
  special?: unknown;
}

/** The server's own tokenize endpoint: exact for whatever model it serves. */
async function serverTokenizer(target: ServerTokenizerTarget): Promise<Tokenizer> {
  const flavor = FLAVORS[target.backend];
  const { origin, prefix } = splitServerUrl(target.url);
  const base = `${origin}${prefix}`;
  if (flavor === undefined) {
    throw badSpec(
      `the ${target.backend} server at ${base} has no tokenize endpoint infergauge can use; ${LOCAL_HINT}`,
    );
  }
  const url = `${base}${flavor.path}`;
  const headers = { ...target.headers, 'content-type': 'application/json' };
  const post = async (text: string): Promise<unknown> => {
    let status: number;
    let raw: string;
    try {
      const res = await requestText(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(flavor.body(text, target.model)),
        timeoutMs: 120_000,
      });
      status = res.statusCode;
      raw = res.body;
    } catch (err) {
      throw new TokenizerError(`POST ${url} failed: ${(err as Error).message}`);
    }
    if (status !== 200) {
      const hint =
        status === 404 || status === 405
          ? `; if the server has no tokenize endpoint, ${LOCAL_HINT}`
          : '';
      throw new TokenizerError(`POST ${url} answered ${status}: ${snippet(raw)}${hint}`);
    }
    try {
      return JSON.parse(raw);
    } catch {
      throw new TokenizerError(
        `POST ${url} answered 200 with a body that is not JSON: ${snippet(raw)}`,
      );
    }
  };
  const parse = (body: unknown): number => {
    const n = flavor.parse(body);
    if (n === undefined) {
      throw new TokenizerError(
        `POST ${url} answered 200 but not as ${flavor.label}'s tokenize does: ${snippet(JSON.stringify(body))}`,
      );
    }
    return n;
  };
  let count = async (text: string) => parse(await post(text));
  if (target.backend === 'tgi') {
    // TGI lists every token with its character offsets; tokens the post-processor adds (BOS)
    // span no characters. Learn which ids those are on a probe, then leave them out.
    const probe = await post('hello');
    parse(probe);
    const overhead = new Set<unknown>();
    for (const t of probe as TgiToken[]) {
      if (t.special === true || (t.start === t.stop && typeof t.start === 'number'))
        overhead.add(t.id);
    }
    count = async (text) => {
      const body = await post(text);
      parse(body);
      let n = 0;
      for (const t of body as TgiToken[]) {
        const added = t.special === true || (overhead.has(t.id) && t.start === t.stop);
        if (!added) n++;
      }
      return n;
    };
  } else {
    // Fail now, with the URL, rather than in the middle of a run.
    await count('hello');
  }
  return { name: `server:${base} (${flavor.label})`, exact: true, count };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function snippet(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > 200 ? `${oneLine.slice(0, 200)}...` : oneLine || '(empty body)';
}
