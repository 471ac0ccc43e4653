import { EXIT, InfergaugeError } from '../errors.js';
import { mix32 } from './distributions.js';
import { engineBlockTokens } from './hitRate.js';
import type { PromptFactory } from './prompts.js';
import type { TraceEntry } from './trace.js';

/**
 * Prompts from a trace's `hash_ids` (Mooncake) that share exactly what the trace says they share.
 *
 * Each hash id is a block text of `blockTokens` calibrated words (prompts.ts): a word adds exactly
 * one token after a space, next to any other calibrated word, so block texts joined by single
 * spaces keep their boundaries, and block j of a prompt covers the server's tokens
 * [j * B, (j + 1) * B). The block of an id is deterministic in (seed, prompt salt, id): requests
 * whose first n ids agree send the same first n * B tokens. The server's own tokens before the
 * content (BOS, `promptOverheadTokens`) are taken off the first block; the last block is cut to
 * what the request's length leaves (a prefix of that block's text, so two requests ending in the
 * same partial id share the shorter of their two cuts).
 *
 * Peers do it differently: AIPerf (ai-dynamo/aiperf src/aiperf/dataset/generator/prompt.py,
 * `_build_token_sequence`) caches sampled corpus token ids per hash id, puts a BOS/EOS token at
 * each block's start and decodes the whole prompt once, which a re-tokenising server need not
 * split at the same places; SGLang's bench_serving (sgl-project/sglang PR 9839,
 * `get_mooncake_request_over_time`) writes each id as its number and 128 "hi"s and ignores
 * input_length. Ours is built from the run's tokenizer and checked against it (verify()).
 */
export interface BlockPrompts {
  /** The content of `entry`'s prompt: `contentTokens(entry)` tokens under the tokenizer. */
  prompt(entry: TraceEntry): string;
  /** Tokens of content for `entry` (its input length less the server's overhead, at least 1). */
  contentTokens(entry: TraceEntry): number;
  /**
   * Counts a sample of block boundaries with the tokenizer (locally, or with the server's
   * /tokenize), in the first `samples` prompts of several blocks: a refusal (TraceBlocksError,
   * IG_TRACE_BLOCKS, exit 2) naming the first that is off.
   */
  verify(entries: readonly TraceEntry[], samples?: number): Promise<void>;
}

export interface BlockPromptOptions {
  prompts: PromptFactory;
  /** Tokens per hash id (`--trace-block-tokens`). */
  blockTokens: number;
  /** Tokens the server puts before the content (BOS, a chat template's head). */
  overheadTokens?: number;
  /** Block texts kept (least recently used dropped): 1,024 blocks of 512 words are ~3 MB. */
  cacheBlocks?: number;
}

const BLOCKS_CODE = 'IG_TRACE_BLOCKS';
/** verify() counts at most this many blocks of a prompt. */
const MAX_CHECKED_BLOCKS = 8;

/** A refusal: the trace's blocks cannot be made exact here; the message names the fix. */
export class TraceBlocksError extends InfergaugeError {
  constructor(message: string) {
    super(message, BLOCKS_CODE, EXIT.invalidOptions);
  }
}

export function createBlockPrompts(o: BlockPromptOptions): BlockPrompts {
  const { prompts, blockTokens } = o;
  const overhead = o.overheadTokens ?? 0;
  const tokenizer = prompts.tokenizer.name;
  if (!Number.isInteger(blockTokens) || blockTokens < 1) {
    throw new RangeError(`blockTokens must be a whole number >= 1, not ${blockTokens}`);
  }
  if (!prompts.additive) {
    throw new TraceBlocksError(
      `--trace with hash_ids: under --tokenizer ${tokenizer} calibrated words do not add up to exact counts, so block texts would not keep their ${blockTokens}-token boundaries; give the model's own tokenizer (--tokenizer path/to/tokenizer.json or --tokenizer server)`,
    );
  }
  if (overhead >= blockTokens) {
    throw new TraceBlocksError(
      `--trace with hash_ids: the server adds ${overhead} tokens to every prompt, a whole block of ${blockTokens} (--trace-block-tokens) or more: the first block cannot hold them; use a larger --trace-block-tokens or the completions endpoint`,
    );
  }
  const cap = Math.max(1, o.cacheBlocks ?? 1024);
  /** By id and place: the longest start of the block's text built so far, and its words. */
  const cache = new Map<string, { text: string; words: number }>();

  /**
   * The first `words` words of block `id`'s text (B - overhead words when it opens the prompt,
   * else B). Only what a prompt uses is built: a block's text of n words is the start of its
   * text of more (PromptFactory.words), so a block no request sends whole, as a trace whose
   * prompts are all shorter than one block has, is never built whole.
   */
  const blockText = (id: number, leading: boolean, words: number): string => {
    const key = leading ? `f${id}` : `c${id}`;
    let hit = cache.get(key);
    if (hit !== undefined) cache.delete(key);
    if (hit === undefined || hit.words < words) {
      hit = { text: prompts.words(idKey(id), words, leading), words };
    }
    // Least recently used first: the block goes (back) to the end.
    cache.set(key, hit);
    if (cache.size > cap) cache.delete(cache.keys().next().value as string);
    return hit.words === words ? hit.text : firstWords(hit.text, words);
  };

  const contentTokens = (entry: TraceEntry) => Math.max(1, entry.inputTokens - overhead);

  const prompt = (entry: TraceEntry): string => {
    const ids = entry.hashIds ?? [];
    let left = contentTokens(entry);
    const parts: string[] = [];
    for (let j = 0; j < ids.length && left > 0; j++) {
      const whole = j === 0 ? blockTokens - overhead : blockTokens;
      // Every block but the last is whole (the trace's count check); the last is cut.
      const words = Math.min(left, whole);
      parts.push(blockText(ids[j], j === 0, words));
      left -= words;
    }
    return parts.join(' ');
  };

  const verify = async (entries: readonly TraceEntry[], samples = 3): Promise<void> => {
    const tk = prompts.tokenizer;
    const count = tk.countSync
      ? async (text: string) => (tk.countSync as (t: string) => number)(text)
      : (text: string) => tk.count(text);
    // The first prompts of 2 to 8 blocks (else of more), checked at their first, second and last
    // boundary (the eighth for longer ones): cut and joined blocks both, at a few ms of counting
    // a prompt where the longest of a trace (100k tokens and more) cost a second each.
    const multi = entries
      .map((e, id) => ({ e, id }))
      .filter(({ e }) => (e.hashIds?.length ?? 0) >= 2);
    const short = multi.filter(({ e }) => (e.hashIds?.length ?? 0) <= MAX_CHECKED_BLOCKS);
    const picked = (short.length > 0 ? short : multi).slice(0, samples);
    for (const { e, id } of picked) {
      const k = e.hashIds?.length ?? 0;
      const text = prompt(e);
      const ends = [...new Set([1, 2, Math.min(k, MAX_CHECKED_BLOCKS)])];
      for (const blocks of ends) {
        const want = blocks === k ? contentTokens(e) : blocks * blockTokens - overhead;
        const cut = blocks === k ? text : firstWords(text, want);
        const got = await count(cut);
        if (got !== want) {
          throw new TraceBlocksError(
            `--trace with hash_ids: under --tokenizer ${tokenizer} the first ${blocks} blocks of request ${id} count ${got} tokens, not ${want}: block texts do not keep their ${blockTokens}-token boundaries; give the model's own tokenizer (--tokenizer path/to/tokenizer.json or --tokenizer server)`,
          );
        }
      }
    }
  };

  return { prompt, contentTokens, verify };
}

/** The first `n` words of `text` (words joined by single spaces). */
function firstWords(text: string, n: number): string {
  let at = -1;
  for (let i = 0; i < n; i++) {
    at = text.indexOf(' ', at + 1);
    if (at < 0) return text;
  }
  return text.slice(0, at);
}

/** A 32-bit stream key for a hash id (whole numbers up to 2^53). */
function idKey(id: number): number {
  const high = Math.floor(id / 2 ** 32);
  return mix32((id >>> 0) ^ mix32((high ^ 0x85ebca6b) >>> 0));
}

/**
 * Engine block size the implied hit rate is told for: vLLM's 16 tokens (the simulator's too;
 * hitRate.ts keeps each engine's); the rate moves by well under a point between 16 and 512.
 */
export const IMPLIED_ENGINE_BLOCK_TOKENS = engineBlockTokens('vllm');

/**
 * The prefix-cache hit rate (hit tokens / prompt tokens) an engine with an unbounded cache and
 * blocks of `engineBlockTokens` would see replaying `entries` in order, each request's prefill
 * done before the next arrives (requests in flight together that share a prefix not yet cached
 * both miss on vLLM, so a replay at speed lands at or below this).
 *
 * A request's tokens match an earlier prompt's for as long as its ids agree: whole blocks, and a
 * block that either side has only partly (the last one) matches for the shorter of the two cuts,
 * as blockPrompts builds it, and the match stops there. Of the matched tokens the engine serves
 * whole engine blocks only, and never the last prompt token (vLLM's get_computed_blocks caps the
 * hit at prompt length - 1 to sample from it): hit = floor(min(matched, n - 1) / E) * E. In the
 * published Mooncake traces no partial block's id recurs as a whole block, so partial blocks only
 * match identical endings. Entries without hash ids hit nothing.
 */
export function traceImpliedHitRate(
  entries: readonly TraceEntry[],
  options: { blockTokens: number; engineBlockTokens: number },
): number {
  const B = options.blockTokens;
  const E = options.engineBlockTokens;
  /** Tokens of each block id sent so far (the longest cut). */
  const sent = new Map<number, number>();
  let hits = 0;
  let total = 0;
  for (const e of entries) {
    const n = Math.max(1, e.inputTokens);
    total += n;
    const ids = e.hashIds;
    if (!ids) continue;
    let matched = 0;
    for (let j = 0; j < ids.length; j++) {
      const own = Math.min(B, n - j * B);
      const before = sent.get(ids[j]);
      if (before === undefined) break;
      matched += Math.min(before, own);
      if (before < own) break;
    }
    hits += Math.floor(Math.min(matched, n - 1) / E) * E;
    for (let j = 0; j < ids.length; j++) {
      const own = Math.min(B, n - j * B);
      if (own > (sent.get(ids[j]) ?? 0)) sent.set(ids[j], own);
    }
  }
  return total > 0 ? hits / total : 0;
}
