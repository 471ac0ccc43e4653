import { createRng } from '../rng.js';
import { mix32 } from './distributions.js';
import { WORDS } from './synthetic.js';
import { type Tokenizer, TokenizerError } from './tokenizer.js';

/**
 * Prompts of an exact token count under a chosen tokenizer.
 *
 * Method: calibrate once, then build prompts from pieces whose count is known.
 *  1. Candidate words: the curated `WORDS` plus more common English words (only `WORDS` for the
 *     words tokenizer, whose lists must stay single tokens on real servers too).
 *  2. An anchor: the first candidate that is one token on its own.
 *  3. Continuation words: those that add exactly one token after the anchor and a space
 *     (`"the" + " word"`), which handles both byte-level BPE (` word` is one token) and
 *     SentencePiece (`▁word`) conventions. First words: continuation words that are also one
 *     token at the very start of a text.
 *  4. Additivity over every ordered pair: one text holding each (a, b) pair of continuation words
 *     once (a de Bruijn sequence of order 2) must count exactly one token per word. Where it
 *     does not, bisection finds the pairs that merge and their second word is dropped.
 * A prompt of n tokens is then a first word and n - 1 continuation words drawn with a seeded
 * generator (or the shared prefix of N tokens and n - N continuation words): exact by
 * construction, as pre-tokenizers split at each ` word` and merges never span a pair. Local
 * tokenizers also self-check sample prompts at creation; if one were ever off, every prompt is
 * then counted and repaired (appending or removing words until exact).
 */
export interface PromptFactory {
  readonly tokenizer: Tokenizer;
  /**
   * A prompt of exactly `tokens` tokens under the tokenizer (content only), deterministic in (seed, id),
   * starting with the shared prefix when one is configured (then tokens >= sharedPrefixTokens).
   */
  make(id: number, tokens: number): string;
  /** For tokenizers without countSync: checks `samples` prompts against the tokenizer; resolves to the worst absolute error seen (0 = exact). */
  verify(samples: number, tokens: number): Promise<number>;
  /**
   * `tokens` calibrated words drawn from the stream `key` names (beside the factory's seed): a
   * first word then continuation words when `leading`, continuation words only otherwise. Each
   * adds exactly one token after a space, next to any other calibrated word, so such texts
   * joined by single spaces keep their token boundaries (blockPrompts.ts). No shared prefix.
   * The text of n tokens is the first n words of the text of more for the same key and `leading`.
   */
  words(key: number, tokens: number, leading: boolean): string;
  /**
   * False when the creation-time self-check found a prompt off: word counts do not add up
   * under this tokenizer, so texts joined from words cannot be trusted to keep boundaries.
   */
  readonly additive: boolean;
}

export interface PromptFactoryOptions {
  seed: number;
  /** Tokens at the start of every prompt that are the same text for all (exercises prefix caching). */
  sharedPrefixTokens?: number;
  /**
   * Distinct shared prefixes (default 1): prompt `id` starts with prefix `id mod n`, each its
   * own text of `sharedPrefixTokens` (`--prefix-hit-rate`, workload/hitRate.ts).
   */
  sharedPrefixes?: number;
  /**
   * Count every prompt with the tokenizer's countSync and repair any difference. Off by default
   * (the calibration makes prompts exact by construction; the Llama-3 tokenizer counts 1,024
   * tokens in ~1.5 ms, so checking every prompt costs more than building it); turned on by
   * itself when the creation-time self-check finds a prompt off.
   */
  checkEach?: boolean;
}

/** Common English words beyond `WORDS`; each is kept only where the tokenizer makes it one token. */
const MORE_WORDS = (
  'man woman men women child children home car road street door room window wall floor garden' +
  ' tree trees flower grass sea ocean lake island mountain hill forest sky sun moon star stars' +
  ' rain snow wind fire earth stone sand gold silver iron glass wood metal plant animal bird fish' +
  ' horse dog cat farm village town country nation government law court police army war peace' +
  ' history art science nature health body heart head hand hands face eye eyes voice word words' +
  ' letter name idea reason question answer problem fact truth example case order level member' +
  ' service information process result change value line area form end side kind team party' +
  ' issue company business office job price cost interest report section page class course' +
  ' student teacher college university church hospital center summer winter spring morning' +
  ' evening today week friend friends father mother brother sister son daughter wife husband' +
  ' king queen president leader minister doctor captain officer worker artist writer author' +
  ' player dream plan rule sign film movie song picture image color sound make take give find' +
  ' tell ask feel try leave call keep let begin seem help show hear play run move live believe' +
  ' bring happen write provide sit stand lose pay meet include continue set learn lead' +
  ' understand watch follow stop create speak read allow add spend grow offer remember love' +
  ' consider appear buy wait serve die send expect build stay fall cut reach remain suggest' +
  ' raise pass sell require decide return explain hope develop carry break receive agree support' +
  ' hit produce eat cover catch draw choose cause big little own different important few bad' +
  ' same able free full special easy clear recent certain personal hard major strong possible' +
  ' whole real best better true national current'
).split(' ');

/**
 * Continuation words kept: every ordered pair is checked, and a tokenizer without a
 * pre-tokenizer (SentencePiece BPE: Llama 2, Mistral) counts ~10 us a word in JS, so 256 words
 * (65,536 pairs) cost ~0.7 s there once; with a server each check is a request.
 */
const MAX_LOCAL_WORDS = 256;
const MAX_SERVER_WORDS = 128;
/** Words per count when checking pair additivity: one request each against a server. */
const SERVER_WINDOW = 2048;
const LOCAL_WINDOW = 1024;
/** Requests in flight at once during calibration and verify(). */
const CONCURRENCY = 4;

/** One calibration per tokenizer, shared by its factories (seeds, prefixes). */
const CALIBRATIONS = new WeakMap<Tokenizer, Promise<Vocabulary>>();

interface Vocabulary {
  /** Words that are one token at the start of a text. */
  first: string[];
  /** Words that add exactly one token after a space, with no pair merging. */
  cont: string[];
}

export async function createPromptFactory(
  tokenizer: Tokenizer,
  options: PromptFactoryOptions,
): Promise<PromptFactory> {
  const prefixTokens = options.sharedPrefixTokens ?? 0;
  if (!Number.isInteger(prefixTokens) || prefixTokens < 0) {
    throw new RangeError(`sharedPrefixTokens must be a whole number >= 0, not ${prefixTokens}`);
  }
  let calibration = CALIBRATIONS.get(tokenizer);
  if (calibration === undefined) {
    calibration = calibrate(tokenizer);
    CALIBRATIONS.set(tokenizer, calibration);
    // A failed calibration (a server that went away) is tried again next time.
    calibration.catch(() => CALIBRATIONS.delete(tokenizer));
  }
  const { first, cont } = await calibration;
  const seed = options.seed >>> 0;
  const countSync = tokenizer.countSync?.bind(tokenizer);
  let checkEach = options.checkEach === true && countSync !== undefined;
  let selfCheckFailed = false;

  // Words after the first, appended to `text`. Joined once: a string added word by word left
  // two small strings a word (some 8 KB a 128-token prompt) for the measuring thread's collector.
  const extend = (text: string, words: number, rng: ReturnType<typeof createRng>): string => {
    if (words <= 0) return text;
    const parts = new Array<string>(words + 1);
    parts[0] = text;
    for (let i = 1; i <= words; i++) parts[i] = cont[rng.int(cont.length)];
    return parts.join(' ');
  };
  const fresh = (tokens: number, rng: ReturnType<typeof createRng>): string =>
    tokens <= 0 ? '' : extend(first[rng.int(first.length)], tokens - 1, rng);

  const prefixCount = options.sharedPrefixes ?? 1;
  if (!Number.isInteger(prefixCount) || prefixCount < 1) {
    throw new RangeError(`sharedPrefixes must be a whole number >= 1, not ${prefixCount}`);
  }
  // Prefix 0 is the one shared prefix of runs made before there were several.
  const prefixes = Array.from({ length: prefixTokens > 0 ? prefixCount : 1 }, (_, k) => {
    if (prefixTokens === 0) return '';
    const mix = Math.imul(k, 0x9e3779b1);
    const text = fresh(prefixTokens, createRng((seed ^ 0x5bd1e995 ^ mix) >>> 0));
    if (!countSync || countSync(text) === prefixTokens) return text;
    return repair(text, prefixTokens, '', createRng((seed ^ 0x27d4eb2f ^ mix) >>> 0));
  });
  const prefixOf = (id: number): string =>
    prefixes[((id % prefixes.length) + prefixes.length) % prefixes.length];

  function repair(
    text: string,
    target: number,
    keep: string,
    rng: ReturnType<typeof createRng>,
  ): string {
    const count = countSync as (text: string) => number;
    let out = text;
    for (let attempt = 0; attempt < 64; attempt++) {
      const n = count(out);
      if (n === target) return out;
      if (n < target) {
        out = out === '' ? fresh(target - n, rng) : extend(out, target - n, rng);
        continue;
      }
      // Too many: drop whole words from the end, never into the shared prefix.
      let drop = n - target;
      while (drop-- > 0 && out.length > keep.length) {
        const cut = out.lastIndexOf(' ');
        out = cut < keep.length ? keep : out.slice(0, cut);
      }
    }
    throw new TokenizerError(
      `${tokenizer.name}: cannot make a prompt of exactly ${target} tokens from whole words`,
    );
  }

  const make = (id: number, tokens: number): string => {
    if (!Number.isInteger(tokens) || tokens < 0) {
      throw new RangeError(`a prompt needs a whole number of tokens >= 0, not ${tokens}`);
    }
    if (tokens < prefixTokens) {
      throw new RangeError(
        `a prompt of ${tokens} tokens cannot hold the ${prefixTokens}-token shared prefix`,
      );
    }
    const rng = createRng((seed * 1_000_003 + id) >>> 0);
    const prefix = prefixOf(id);
    const text = prefixTokens > 0 ? extend(prefix, tokens - prefixTokens, rng) : fresh(tokens, rng);
    if (!checkEach) return text;
    return repair(text, tokens, prefix, rng);
  };

  const verify = async (samples: number, tokens: number): Promise<number> => {
    let worst = 0;
    const ids = Array.from({ length: Math.max(0, samples) }, (_, i) => i);
    await forEachLimited(ids, CONCURRENCY, async (id) => {
      const n = countSync ? countSync(make(id, tokens)) : await tokenizer.count(make(id, tokens));
      worst = Math.max(worst, Math.abs(n - tokens));
    });
    return worst;
  };

  // Self-check where counting is local and cheap: a few prompts across lengths, prefix included.
  if (countSync && !checkEach) {
    const lengths = new Set([1, 2, 17, 256, 1024].map((n) => Math.max(n, prefixTokens)));
    for (const [i, n] of [...lengths].entries()) {
      if (countSync(make(0x7fff_fff0 + i, n)) !== n) {
        checkEach = true;
        selfCheckFailed = true;
        break;
      }
    }
  }

  const words = (key: number, tokens: number, leading: boolean): string => {
    if (!Number.isInteger(tokens) || tokens < 0) {
      throw new RangeError(`a text needs a whole number of tokens >= 0, not ${tokens}`);
    }
    const rng = createRng(mix32((seed ^ mix32((key ^ 0x6a09e667) >>> 0)) >>> 0));
    if (leading) return fresh(tokens, rng);
    if (tokens === 0) return '';
    return extend(cont[rng.int(cont.length)], tokens - 1, rng);
  };

  return { tokenizer, make, verify, words, additive: !selfCheckFailed };
}

/** Finds the words that build exact prompts under this tokenizer (see the method above). */
async function calibrate(tokenizer: Tokenizer): Promise<Vocabulary> {
  const local = tokenizer.countSync?.bind(tokenizer);
  const count = local
    ? async (text: string) => local(text)
    : (text: string) => tokenizer.count(text);
  const pool = tokenizer.name === 'words' ? WORDS : [...WORDS, ...MORE_WORDS];
  const candidates = [...new Set(pool)].filter((w) => /^[a-z]+$/.test(w));

  let anchor: string | undefined;
  for (const w of candidates.slice(0, 64)) {
    if ((await count(w)) === 1) {
      anchor = w;
      break;
    }
  }
  if (anchor === undefined) {
    throw new TokenizerError(
      `${tokenizer.name}: no common English word is a single token, so prompts of exact length cannot be built`,
    );
  }
  const head = anchor;
  /** The anchor then `words` count one token each. */
  const additive = async (words: string[]) =>
    (await count(`${head} ${words.join(' ')}`)) === 1 + words.length;

  let cont: string[];
  if (local) {
    cont = candidates.filter((w) => local(`${head} ${w}`) === 2).slice(0, MAX_LOCAL_WORDS);
  } else {
    const groups: string[][] = [];
    for (let i = 0; i < candidates.length; i += 16) groups.push(candidates.slice(i, i + 16));
    const kept: string[][] = [];
    await forEachLimited(groups.entries(), CONCURRENCY, async ([i, group]) => {
      kept[i] = await keepAdditive(group, additive);
    });
    cont = kept.flat().slice(0, MAX_SERVER_WORDS);
  }

  // Every ordered pair once; drop the second word of any pair that does not add up.
  for (let round = 0; ; round++) {
    if (cont.length < 8) {
      throw new TokenizerError(
        `${tokenizer.name}: only ${cont.length} common English words stay single tokens side by side; prompts of exact length cannot be built`,
      );
    }
    const order = deBruijnPairs(cont.length).map((i) => cont[i]);
    const size = local ? LOCAL_WINDOW : SERVER_WINDOW;
    const windows: string[][] = [];
    for (let i = 0; i + 1 < order.length; i += size - 1) windows.push(order.slice(i, i + size));
    const bad = new Set<string>();
    await forEachLimited(windows, local ? 1 : CONCURRENCY, (w) => findBad(w, additive, bad));
    if (bad.size === 0) break;
    if (round === 3) {
      throw new TokenizerError(
        `${tokenizer.name}: word counts do not add up even after dropping ${bad.size} merging words`,
      );
    }
    cont = cont.filter((w) => !bad.has(w));
  }

  let first: string[];
  if (local) {
    first = cont.filter((w) => local(w) === 1);
  } else {
    const probe = cont.slice(0, 32);
    const ok: boolean[] = [];
    await forEachLimited(probe.entries(), CONCURRENCY, async ([i, w]) => {
      ok[i] = (await count(w)) === 1;
    });
    first = probe.filter((_, i) => ok[i]);
  }
  if (first.length === 0) first = cont.includes(head) ? [head] : [];
  if (first.length === 0) {
    throw new TokenizerError(`${tokenizer.name}: no calibrated word is one token at the start`);
  }
  return { first, cont };
}

/** The words of `group` that add up, testing the whole group first and halving on failure. */
async function keepAdditive(
  group: string[],
  additive: (words: string[]) => Promise<boolean>,
): Promise<string[]> {
  if (group.length === 0) return [];
  if (await additive(group)) return group;
  if (group.length === 1) return [];
  const mid = group.length >> 1;
  return [
    ...(await keepAdditive(group.slice(0, mid), additive)),
    ...(await keepAdditive(group.slice(mid), additive)),
  ];
}

/**
 * Adds to `bad` the words that make `window` not add up: halves overlap by one word so every
 * adjacent pair stays inside one half; a failing pair marks its second word.
 */
async function findBad(
  window: string[],
  additive: (words: string[]) => Promise<boolean>,
  bad: Set<string>,
): Promise<void> {
  if (await additive(window)) return;
  if (window.length <= 2) {
    bad.add(window[window.length - 1]);
    return;
  }
  const mid = window.length >> 1;
  const before = bad.size;
  await findBad(window.slice(0, mid + 1), additive, bad);
  await findBad(window.slice(mid), additive, bad);
  // Both halves add up but the whole does not: a longer-range effect; drop the middle word.
  if (bad.size === before) bad.add(window[mid]);
}

/**
 * Indices 0..k-1 in an order where every ordered pair (a, b), a = b included, is adjacent
 * exactly once: a de Bruijn sequence of order 2 (k² + 1 entries, the cyclic sequence opened up).
 */
export function deBruijnPairs(k: number): number[] {
  const seq: number[] = [];
  const a = [0, 0, 0];
  const db = (t: number, p: number): void => {
    if (t > 2) {
      if (2 % p === 0) for (let j = 1; j <= p; j++) seq.push(a[j]);
      return;
    }
    a[t] = a[t - p];
    db(t + 1, p);
    for (let j = a[t - p] + 1; j < k; j++) {
      a[t] = j;
      db(t + 1, t);
    }
  };
  db(1, 1);
  seq.push(seq[0]);
  return seq;
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
async function forEachLimited<T>(
  items: Iterable<T>,
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  const iterator = items[Symbol.iterator]();
  const worker = async () => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) await fn(next.value);
  };
  await Promise.all(Array.from({ length: Math.max(1, limit) }, worker));
}
