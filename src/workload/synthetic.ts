import type { RequestSpec } from '../backends/types.js';
import { createRng } from '../rng.js';
import { mix32 } from './distributions.js';

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

/**
 * Prompts of words drawn at random from a list of over 100 share their first 16 with chance
 * 100^-16 a pair: none do in any run (RequestSpec.distinctPrefixTokens).
 */
export const DISTINCT_PREFIX_TOKENS = 16;

export interface SyntheticWorkloadOptions {
  inputTokens: number;
  outputTokens: number;
  seed: number;
  /** Mixed into the words with the seed (promptSalt.ts); 0 or absent: the unsalted stream. */
  promptSalt?: number;
}

/**
 * Fixed-length synthetic requests: each prompt is `inputTokens` words drawn with the run's seed
 * and prompt salt (request i gets the same prompt for the same pair), distinct per request so
 * no two share a long prefix.
 * A virtual-time run only needs the count, which is exact here.
 */
export function createSyntheticWorkload(
  options: SyntheticWorkloadOptions,
): (id: number) => RequestSpec {
  // Salted once here, not per request: the seed of request i's words stays one multiply-add.
  const seed = saltedSeed(options.seed, options.promptSalt ?? 0);
  const prompts = {
    make(id: number, words: number): string {
      const rng = createRng((seed * 1_000_003 + id) >>> 0);
      // Joined once, as prompts.ts does: a string added word by word left two small strings a
      // word for the collector, and flattening that rope into the body cost more than the join.
      const drawn = new Array<string>(Math.max(1, words));
      for (let i = 0; i < drawn.length; i++) drawn[i] = WORDS[rng.int(WORDS.length)];
      return drawn.join(' ');
    },
  };
  const { inputTokens, outputTokens } = options;
  return (id) =>
    new SyntheticRequest(
      prompts,
      id,
      inputTokens,
      inputTokens,
      outputTokens,
      inputTokens,
      DISTINCT_PREFIX_TOKENS,
    );
}

/** `seed` as it was for salt 0 (the words of unsalted runs), else mixed with the salt. */
function saltedSeed(seed: number, salt: number): number {
  return salt === 0 ? seed : mix32((seed ^ mix32((salt ^ 0x9e3779b9) >>> 0)) >>> 0);
}

/**
 * A synthetic request, whose prompt is built each time it is read (the body, and the one resend
 * there may be), not kept. A request in flight holds its spec for its whole life (1.3 s at an
 * engine's pace, surviving young-generation collections that copy it), and a kept prompt with
 * the closure and getter that built it was a fifth of what a request held: 1.1 KB at 128 tokens
 * (issue 29). The prompt is an own property, as a plain spec's is (`{ ...spec }` copies it),
 * through one shared getter, so every request still shares one hidden class.
 */
export class SyntheticRequest implements RequestSpec {
  declare readonly prompt: string;

  constructor(
    /** Builds prompt `id` of `tokens` tokens, the same each time (prompts.ts PromptFactory). */
    private readonly prompts: { make(id: number, tokens: number): string },
    private readonly id: number,
    private readonly contentTokens: number,
    readonly requestedInputTokens: number,
    readonly requestedOutputTokens: number,
    /** Words in the prompt, where one word is one token (the built-in simulator). */
    readonly promptWords: number | undefined,
    /** RequestSpec's: set where no prefix is shared. */
    readonly distinctPrefixTokens: number | undefined,
  ) {
    Object.defineProperty(this, 'prompt', PROMPT);
  }

  makePrompt(): string {
    return this.prompts.make(this.id, this.contentTokens);
  }
}

const PROMPT: PropertyDescriptor = {
  get(this: SyntheticRequest): string {
    return this.makePrompt();
  },
  enumerable: true,
};
