import { readFile, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { splitServerUrl } from '../backends/request.js';
import { EXIT, type ExitCode, InfergaugeError } from '../errors.js';
import { requestText } from '../httpText.js';
import { jsonSyntaxProblem } from '../jsonText.js';
import type { ProxySettings } from '../proxy.js';
import type { TlsMaterial } from '../tls.js';
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
  /**
   * Synchronous count, for local tokenizers (undefined for the server tokenizer): always the
   * whole text's count. A long text is counted in pieces cut only where the tokenizer's count
   * does not change (CutRule), so prose and code cost their length; a long run with nowhere to
   * cut is counted whole (exact, and as slow as the tokenizer is on it).
   */
  countSync?(text: string): number;
  /**
   * A count whose work is bounded, for text whose length nobody controls (a server's answer): a
   * run of over MAX_RUN characters (HF_MAX_RUN for a tokenizer.json) with nowhere to cut (random
   * letters, one repeated character, a DNA sequence) is cut anyway, each such cut off by a token
   * or so; past EXACT_BYTES of UTF-8 an evenly spread SAMPLE_BYTES of the rest is counted and
   * scaled up to its length (within a fraction of a percent on prose).
   */
  countCapped?(text: string): number;
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
  /** https:// only: the run's TLS options (src/tls.ts). */
  tls?: TlsMaterial;
  /** The run's proxy settings (src/proxy.ts). */
  proxy?: ProxySettings;
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
  const whole = (text: string) => encoding.countTokens(text, AS_TEXT);
  return localTokenizer(name, whole, { rule: 'keep' });
}

/**
 * A tokenizer counted here: countSync in pieces at exact cuts only (whole where no rule is
 * exact: `exact` false), countCapped with forced cuts and sampling; count() is countSync.
 */
function localTokenizer(
  name: string,
  whole: (text: string) => number,
  cuts: Pick<PieceOptions, 'rule' | 'addedTokens' | 'apart' | 'maxRun' | 'wholeUpTo'>,
  exact = true,
): Tokenizer {
  const exactCuts = { ...cuts, maxRun: Number.POSITIVE_INFINITY };
  const countSync = exact ? (text: string) => countInPieces(text, whole, exactCuts) : whole;
  const capped = { ...cuts, exactBytes: EXACT_BYTES, sampleBytes: SAMPLE_BYTES };
  return {
    name,
    exact: true,
    countSync,
    countCapped: (text) => countInPieces(text, whole, capped),
    count: async (text) => countSync(text),
  };
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
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw badSpec(`tokenizer ${file}: cannot read it (${(err as Error).message})`);
  }
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw badSpec(`tokenizer ${file}: ${jsonSyntaxProblem(err, text)}`);
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
  const whole = (text: string) => tokenizer.encode(text, options).ids.length;
  const addedTokens = addedTokenTexts(json);
  const apart = apartInVocabulary(model);
  const rule = cutRuleOf(whole, { addedTokens, apart });
  // A tokenizer that neither rule cuts exactly (none known) is counted whole, but for a
  // server's answer past 64 KiB.
  const cuts = rule
    ? { rule, addedTokens, apart, maxRun: HF_MAX_RUN }
    : { rule: 'keep' as const, addedTokens, maxRun: HF_MAX_RUN, wholeUpTo: 65_536 };
  return localTokenizer(`hf:${file}`, whole, cuts, rule !== undefined);
}

/** The texts of a tokenizer.json's added tokens, which its encode() matches before anything else. */
function addedTokenTexts(json: Record<string, unknown>): string[] {
  const added = Array.isArray(json.added_tokens) ? json.added_tokens : [];
  return added
    .map((t) => (isObject(t) && typeof t.content === 'string' ? t.content : ''))
    .filter((t) => t !== '');
}

/**
 * For a SentencePiece-style vocabulary (with "▁" a token of its own): whether the characters
 * `left` and `right` (UTF-16 code units) never stand side by side in a token, nor "▁" and
 * `right`. A BPE or Unigram model then never joins them, so a text can be cut between them, and
 * the "▁" put before the second piece stays a token of its own (PieceOptions.apart).
 */
export function apartInVocabulary(
  model: Record<string, unknown>,
): ((left: number, right: number) => boolean) | undefined {
  const vocab = model.vocab;
  const tokens = Array.isArray(vocab)
    ? vocab.map((entry) => (Array.isArray(entry) && typeof entry[0] === 'string' ? entry[0] : ''))
    : isObject(vocab)
      ? Object.keys(vocab)
      : [];
  if (!tokens.includes(METASPACE_CHAR)) return undefined;
  const pairs = new Set<number>();
  for (const token of tokens) {
    for (let i = 1; i < token.length; i++) {
      pairs.add(token.charCodeAt(i - 1) * 0x10000 + token.charCodeAt(i));
    }
  }
  const afterMetaspace = new Uint8Array(0x10000);
  for (let c = 0; c < 0x10000; c++) {
    afterMetaspace[c] = pairs.has(METASPACE * 0x10000 + c) ? 1 : 0;
  }
  return (left, right) =>
    afterMetaspace[right] === 0 &&
    !pairs.has((left === SPACE ? METASPACE : left) * 0x10000 + right);
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
  const flavor = Object.hasOwn(FLAVORS, target.backend) ? FLAVORS[target.backend] : undefined;
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
        ...(target.tls ? { tls: target.tls } : {}),
        ...(target.proxy ? { proxy: target.proxy } : {}),
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

// ---- counting long texts in pieces ----

/**
 * Where a text can be cut so that its pieces' counts add up to its own:
 * - 'keep': before whitespace that follows a non-space character, and before a newline or
 *   punctuation (not `'`) that follows a letter or digit. GPT-style pre-tokenizers (o200k_base,
 *   cl100k_base, and the Split regexes of Llama 3, Qwen, DeepSeek tokenizer.json files) always
 *   start a new pre-token there (a word takes at most one space or punctuation mark before it,
 *   punctuation takes the newlines after it), and no pre-token depends on what follows it;
 * - 'drop': at a single space between two non-spaces, the space left out of the next piece.
 *   SentencePiece-style tokenizers (Llama 2, Mistral: spaces become "▁", and "▁" is put before
 *   each text) then see the same "▁word" the whole text has, and they merge nothing across a
 *   "▁" that follows another character. With `apart`, also between two characters that no token
 *   holds side by side (most CJK characters, much punctuation), the next piece counted one token
 *   less (the "▁" put before it, which no token joins to its first character).
 */
export type CutRule = 'keep' | 'drop';

/** How countInPieces cuts and counts. */
export interface PieceOptions {
  rule: CutRule;
  /** Texts never cut inside or right next to (a tokenizer.json's added tokens). */
  addedTokens?: readonly string[];
  /** 'drop' only: whether a text may be cut between these characters (apartInVocabulary). */
  apart?: (left: number, right: number) => boolean;
  /** Pieces are cut at the last place at most this many characters from their start. */
  target?: number;
  /** The longest stretch without a place to cut; a longer one is cut anyway (MAX_RUN). */
  maxRun?: number;
  /** Texts up to this long are counted whole (default: `target`). */
  wholeUpTo?: number;
  /** UTF-8 bytes counted exactly before sampling (default: all of it). */
  exactBytes?: number;
  /** UTF-8 bytes of the rest counted, spread evenly, and scaled up to its length. */
  sampleBytes?: number;
}

/**
 * Longest run of characters with nowhere to cut that is counted as one, for gpt-tokenizer, whose
 * BPE is quadratic in a pre-token's length (80,000 letters take 3 s, 400,000 about 100 s): a
 * pre-token can only be this long once cut, so counting is linear. A cut in the middle of a run
 * makes its count off by about a token (a BPE merge across it is lost). Real text is cut there
 * only for a word, number or CJK passage this long without punctuation (a DNA sequence).
 */
export const MAX_RUN = 256;
/**
 * The same for @huggingface/tokenizers, whose BPE (a heap) costs about as much a character on a
 * long run as on a short one: runs are cut only to bound a piece's work and memory, and seldom
 * in real text (the 'drop' rule has no place to cut minified JSON, for one).
 */
export const HF_MAX_RUN = 4096;
/** Pieces for the 'keep' rule (few calls) and the 'drop' rule (its BPE sees a piece as one word). */
const TARGET: Record<CutRule, number> = { keep: 4096, drop: 32 };
/** The first bytes of a server's text that countCapped counts exactly: 64K tokens of prose. */
export const EXACT_BYTES = 256 * 1024;
/** What countCapped counts of the rest, spread evenly over it, in pieces of about SAMPLE_PIECE. */
export const SAMPLE_BYTES = 64 * 1024;
const SAMPLE_PIECE = 512;

/**
 * Tokens in `text` by `countWhole`, counted in pieces cut by `o.rule`: the whole text's count
 * wherever the rule finds a place to cut at least every `maxRun` characters, in time linear in
 * its length. With `exactBytes`, the text past that many bytes is sampled (`sampleBytes` of it,
 * in pieces spread evenly over it) and scaled up to its length.
 */
export function countInPieces(
  text: string,
  countWhole: (piece: string) => number,
  o: PieceOptions,
): number {
  const n = text.length;
  let target = o.target ?? TARGET[o.rule];
  if (n <= (o.wholeUpTo ?? target)) return countWhole(text);
  const maxRun = o.maxRun ?? MAX_RUN;
  const maxPiece = 4 * Math.max(target, maxRun);
  const drop = o.rule === 'drop';
  const apart = drop ? o.apart : undefined;
  const kinds = charKinds();
  const touchesAdded = addedTokenGuard(text, o.addedTokens ?? []);
  const exactBytes = o.exactBytes ?? Number.POSITIVE_INFINITY;

  let total = 0;
  let bytes = 0;
  /** Past exactBytes: where the rest starts, the next piece to count, and what was counted. */
  let sample:
    | { from: number; next: number; stride: number; chars: number; tokens: number }
    | undefined;
  /**
   * Counts text[from, to); `less` tokens are not the text's (a "▁" put before it); the piece
   * stands for text[span, to) (from `span`, a space left out and counted as its "▁").
   */
  const piece = (span: number, from: number, to: number, less: number) => {
    if (to <= from) return;
    if (sample === undefined) {
      const s = text.slice(from, to);
      total += countWhole(s) - less;
      if (exactBytes === Number.POSITIVE_INFINITY) return;
      bytes += Buffer.byteLength(s);
      if (bytes >= exactBytes && to < n) {
        const restBytes = ((n - to) * bytes) / to;
        const stride = Math.max(1, restBytes / (o.sampleBytes ?? SAMPLE_BYTES));
        sample = { from: to, next: to, stride, chars: 0, tokens: 0 };
        // Many small pieces make a closer sample than a few large ones.
        target = Math.min(target, SAMPLE_PIECE);
      }
    } else if (span >= sample.next) {
      sample.tokens += countWhole(text.slice(from, to)) - less;
      sample.chars += to - span;
      sample.next = span + (to - span) * sample.stride;
    }
  };

  let start = 0; // the current piece's first character
  let span = 0; // where the text the current piece stands for starts (a dropped space)
  let less = 0; // tokens the current piece counts that are not the text's
  let boundary = 0; // the last place the text may be or was cut
  let cut = -1; // the last place after `start` it may be cut
  let cutApart = false; // whether `cut` is between two characters (else at a dropped space)
  for (let i = 1; i < n; i++) {
    const c = text.charCodeAt(i);
    let safe: boolean;
    let between = false;
    if (drop) {
      const before = text.charCodeAt(i - 1);
      if (c === SPACE) {
        safe = i + 1 < n && !isSpace(before) && !isSpace(text.charCodeAt(i + 1));
      } else {
        safe = between = apart !== undefined && !isLowSurrogate(c) && apart(before, c);
      }
    } else {
      const kind = kinds[c];
      const before = kinds[text.charCodeAt(i - 1)];
      safe =
        kind === BLANK
          ? before !== BLANK && before !== NEWLINE
          : (kind === NEWLINE || kind === PUNCT) && before === ALNUM;
    }
    if (safe) {
      boundary = i;
      cut = i;
      cutApart = between;
    } else if (i - boundary >= maxRun || i - start >= maxPiece) {
      // Nowhere to cut for too long: cut here, but not inside a surrogate pair.
      let at = i;
      if (isLowSurrogate(c) && isHighSurrogate(text.charCodeAt(i - 1))) {
        at = i - 1 > start ? i - 1 : i + 1;
      }
      piece(span, start, at, less);
      start = at;
      span = at;
      less = 0;
      boundary = at;
      cut = -1;
      i = at;
      continue;
    }
    if (i - start >= target && cut > start) {
      if (touchesAdded(cut)) {
        cut = -1;
      } else {
        piece(span, start, cut, less);
        span = cut;
        start = drop && !cutApart ? cut + 1 : cut;
        less = cutApart ? 1 : 0;
        cut = -1;
      }
    }
  }
  piece(span, start, n, less);
  if (sample !== undefined && sample.chars > 0) {
    total += Math.round((sample.tokens * (n - sample.from)) / sample.chars);
  }
  return total;
}

/**
 * Whether a cut before `at` (in 'drop', the space at `at`) touches one of `added`: an added token
 * is matched before anything else, and some take the whitespace around them.
 */
function addedTokenGuard(text: string, added: readonly string[]): (at: number) => boolean {
  if (added.length === 0) return () => false;
  let longest = 0;
  const firsts = new Set<number>();
  for (const token of added) {
    longest = Math.max(longest, token.length);
    firsts.add(token.charCodeAt(0));
  }
  return (at) => {
    const from = Math.max(0, at - longest);
    const to = Math.min(text.length, at + 2 + longest);
    let candidate = false;
    for (let i = from; i < to && !candidate; i++) candidate = firsts.has(text.charCodeAt(i));
    if (!candidate) return false;
    const window = text.slice(from, to);
    for (const token of added) {
      // An occurrence at [j, j + length) touches the cut when j <= at + 1 and j + length >= at.
      for (let j = window.indexOf(token); j !== -1; j = window.indexOf(token, j + 1)) {
        if (from + j > at + 1) break;
        if (from + j + token.length >= at) return true;
      }
    }
    return false;
  };
}

const SPACE = 0x20;
/** "▁", which SentencePiece writes for a space. */
const METASPACE = 0x2581;
const METASPACE_CHAR = '\u2581';
/** A space, or a "▁" (which merges as a space does). */
const isSpace = (c: number) => c === SPACE || c === METASPACE;
/** Character kinds for the 'keep' rule, by UTF-16 code unit, as JavaScript regexes see them. */
const BLANK = 1; // \s but \r and \n
const NEWLINE = 2; // \r, \n
const ALNUM = 3; // \p{L}, \p{N}
const PUNCT = 4; // the rest, but \p{M}, ' and surrogates (they never start a cut)
const OTHER = 5;
let kindTable: Uint8Array | undefined;

function charKinds(): Uint8Array {
  if (kindTable) return kindTable;
  const table = new Uint8Array(0x10000);
  const blank = /\s/u;
  const alnum = /[\p{L}\p{N}]/u;
  const mark = /\p{M}/u;
  for (let c = 0; c < 0x10000; c++) {
    const ch = String.fromCharCode(c);
    if (c >= 0xd800 && c <= 0xdfff) table[c] = OTHER;
    else if (c === 0x0a || c === 0x0d) table[c] = NEWLINE;
    else if (blank.test(ch)) table[c] = BLANK;
    else if (alnum.test(ch)) table[c] = ALNUM;
    else if (c === 0x27 || mark.test(ch)) table[c] = OTHER;
    else table[c] = PUNCT;
  }
  kindTable = table;
  return table;
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/**
 * A text with every kind of place the rules cut (spaces, tabs, indentation, blank lines, CRLF,
 * code, JSON, a URL, CJK and Devanagari with their punctuation, accents, emoji), to find which
 * rule a tokenizer.json adds up under.
 */
const CUT_PROBE = [
  "It's the quick brown fox -- it didn't jump over 12,345.67 lazy dogs (twice)!",
  'Two  spaces,   three, and\ttabs\t\tand trailing   ',
  '  indented line\n    more indent\n\n\nthree newlines\r\nCRLF line\r\n\r\n',
  'def f(x):\n    return {"key": [1, 2, 3], \'k\': x.y_z}  # comment\n',
  '{"a":1,"b":[true,null],"c":"d e"}',
  'See https://example.com/path/to?q=1&r=two#frag.',
  '中文文本，没有空格。日本語のテキスト！한국어 텍스트',
  'हिन्दी पाठ। Ünïcödé naïve café ß Ω 😀👍🏽 end.',
].join('\n');

/** The rule under which `countWhole` adds up, cut everywhere the rule cuts; undefined if neither. */
function cutRuleOf(
  countWhole: (text: string) => number,
  cuts: Pick<PieceOptions, 'addedTokens' | 'apart'>,
): CutRule | undefined {
  const expected = countWhole(CUT_PROBE);
  const rules: CutRule[] = ['keep', 'drop'];
  return rules.find(
    (rule) =>
      countInPieces(CUT_PROBE, countWhole, { ...cuts, rule, target: 1, wholeUpTo: 0 }) === expected,
  );
}
