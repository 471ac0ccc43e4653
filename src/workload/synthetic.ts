import type { RequestSpec } from '../backends/types.js';
import { createRng } from '../rng.js';

/**
 * Common English words that are single tokens (with their leading space) in the Llama 3, GPT-4
 * (cl100k/o200k), Mistral and Qwen vocabularies, so a prompt of N words comes close to N tokens
 * on real servers without a tokenizer. The built-in simulator counts exactly one token per word.
 */
export const WORDS: readonly string[] = (
  'the of and to in is was for on with as by at from that this it be are or an not have' +
  ' has had but were which their one all can more other some time when there what so up out' +
  ' about into than them only new would these two may first any like over also after most' +
  ' made many such well people back just year used work way then day good each how even state' +
  ' world life high part small place long great old large right house number under' +
  ' still water light city power game music family school group system program point' +
  ' money market night story study food book north south east west river field table paper' +
  ' green black white red blue open close early late young human public local social simple'
).split(' ');

export interface SyntheticWorkloadOptions {
  inputTokens: number;
  outputTokens: number;
  seed: number;
}

/**
 * Fixed-length synthetic requests: each prompt is `inputTokens` words drawn with the run's seed
 * (request i always gets the same prompt), distinct per request so no two share a long prefix.
 */
export function createSyntheticWorkload(
  options: SyntheticWorkloadOptions,
): (id: number) => RequestSpec {
  return (id) => {
    return {
      // Built on each use, and not kept: a virtual-time run only needs the count, which is
      // exact here, and a request reads it once, to build its body; kept, it would live (and
      // be copied by the young-generation collections) as long as the request.
      get prompt(): string {
        const rng = createRng((options.seed * 1_000_003 + id) >>> 0);
        // Joined once, as prompts.ts does: a string added word by word left two small strings a
        // word for the collector, and flattening that rope into the body cost more than the join.
        const words = new Array<string>(Math.max(1, options.inputTokens));
        for (let i = 0; i < words.length; i++) words[i] = WORDS[rng.int(WORDS.length)];
        return words.join(' ');
      },
      promptWords: options.inputTokens,
      requestedInputTokens: options.inputTokens,
      requestedOutputTokens: options.outputTokens,
    };
  };
}
