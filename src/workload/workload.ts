import type { RequestSpec } from '../backends/types.js';
import type { AgentTask } from './agentTrace.js';
import { createBlockPrompts } from './blockPrompts.js';
import { type ConversationWorkload, createConversationWorkload } from './conversations.js';
import type { Dataset } from './datasets.js';
import { requestRng, sampleLength, streamSeed } from './distributions.js';
import { promptStreamSeed } from './promptSalt.js';
import { createPromptFactory, type PromptFactory } from './prompts.js';
import { isSessionScenario, type Scenario } from './scenarios.js';
import { DISTINCT_PREFIX_TOKENS, SyntheticRequest } from './synthetic.js';
import { type CreateTokenizerOptions, createTokenizer } from './tokenizer.js';
import { TRACE_BLOCK_TOKENS, type TraceEntry, traceSessions } from './trace.js';
import { countWords } from './words.js';

export interface WorkloadOptions {
  scenario: Scenario;
  /** Made with the same seed and salt (`promptStreamSeed(seed, promptSalt)`). */
  prompts: PromptFactory;
  seed: number;
  /** The point's prompt salt (promptSalt.ts): what a text corpus is sliced with, beside the seed. */
  promptSalt: number;
  /**
   * Tokens the server adds to every prompt (BOS, the chat template), measured before the run:
   * taken off the synthesised content so that the server counts what was asked for.
   */
  promptOverheadTokens?: number;
  /** One word is one token (the built-in simulator): lets virtual time skip counting. */
  wordsAreTokens?: boolean;
  /** Trace replay: request `id` asks for entry `id`'s lengths. */
  trace?: readonly TraceEntry[];
  /**
   * Tokens per hash id (TRACE_BLOCK_TOKENS): entries with `hashIds` get block-exact prompts
   * (blockPrompts.ts).
   */
  traceBlockTokens?: number;
  /** Prompts from a dataset (cycled in file order), or a text corpus sliced to the lengths. */
  dataset?: Dataset;
}

/**
 * A workload as plain data: what a worker thread, or a shard on another machine, needs to build
 * the very workload of the run it is part of (request `id` is the same everywhere).
 */
export interface WorkloadSource {
  scenario: Scenario;
  /** The tokenizer spec (`--tokenizer`) and how to reach the server's, for 'server'. */
  tokenizer: string;
  tokenizerOptions: CreateTokenizerOptions;
  seed: number;
  /**
   * Mixed into every prompt text with the seed (promptSalt.ts): a run's or a point's own, or a
   * fixed one where fixed prompts are wanted (0: the unsalted stream).
   */
  promptSalt: number;
  promptOverheadTokens: number;
  trace?: readonly TraceEntry[];
  /** `--trace-speed`, for a session scenario's turns (single requests have it in the load). */
  traceSpeed?: number;
  /** `--trace-block-tokens`: tokens per `hash_ids` block (TRACE_BLOCK_TOKENS). */
  traceBlockTokens?: number;
  /** An agentic trace's tasks: session s replays task s (agentTrace.ts). */
  agentTasks?: readonly AgentTask[];
  /** `--tool-wait-cap-s`, in ms: an agentic trace's recorded waits are cut to it. */
  toolWaitCapMs?: number;
  dataset?: Dataset;
  /** One word is one token (virtual time on the built-in simulator): counting is skipped. */
  wordsAreTokens?: boolean;
}

/** What the load generator runs: single requests by id, or sessions by id. */
export type LoadedWorkload =
  | { nextRequest: (id: number) => RequestSpec }
  | { nextSession: ConversationWorkload };

/** Builds the workload a WorkloadSource describes (loading its tokenizer). */
export async function loadWorkload(source: WorkloadSource): Promise<LoadedWorkload> {
  const tokenizer = await createTokenizer(source.tokenizer, source.tokenizerOptions);
  const { scenario } = source;
  const sessions = isSessionScenario(scenario);
  // A session's shared prefix is its system prompt: user messages carry none.
  const prefix = sessions ? undefined : scenario.sharedPrefixTokens;
  const prompts = await createPromptFactory(tokenizer, {
    seed: promptStreamSeed(source.seed, source.promptSalt),
    ...(prefix ? { sharedPrefixTokens: prefix } : {}),
    ...(prefix && scenario.sharedPrefixes !== undefined
      ? { sharedPrefixes: scenario.sharedPrefixes }
      : {}),
  });
  const common = {
    scenario,
    prompts,
    seed: source.seed,
    promptSalt: source.promptSalt,
    promptOverheadTokens: source.promptOverheadTokens,
    ...(source.dataset ? { dataset: source.dataset } : {}),
  };
  if (sessions) {
    return {
      nextSession: createConversationWorkload({
        ...common,
        ...(source.trace ? { traceSessions: traceSessions(source.trace) } : {}),
        ...(source.traceSpeed !== undefined ? { speed: source.traceSpeed } : {}),
        ...(source.agentTasks ? { agentTasks: source.agentTasks } : {}),
        ...(source.toolWaitCapMs !== undefined ? { toolWaitCapMs: source.toolWaitCapMs } : {}),
      }),
    };
  }
  // A live run checked the trace's block boundaries against the tokenizer once, before any
  // worker (session/target.ts); virtual time counts words, which are its tokens.
  return {
    nextRequest: createWorkload({
      ...common,
      ...(source.trace ? { trace: source.trace } : {}),
      ...(source.traceBlockTokens !== undefined
        ? { traceBlockTokens: source.traceBlockTokens }
        : {}),
      ...(source.wordsAreTokens ? { wordsAreTokens: true } : {}),
    }),
  };
}

/**
 * Request `id` of a workload, deterministic in seed, prompt salt and id whatever the order:
 * - synthetic: lengths drawn from the scenario, a prompt of exactly that many tokens under the
 *   run's tokenizer, less the server's own overhead; built on first use (virtual time counts);
 * - trace replay: the same, with entry `id`'s lengths; an entry with hash ids gets a block-exact
 *   prompt (blockPrompts.ts), so requests sharing ids share exactly those blocks' tokens;
 * - a prompt dataset: entry `id mod n` as it is (its length counted with the tokenizer when it
 *   counts locally, else in words), its reference output length or the scenario's;
 * - a text corpus: a seeded slice of the scenario's length, trimmed to the exact count.
 */
export function createWorkload(o: WorkloadOptions): (id: number) => RequestSpec {
  const seeds = {
    input: streamSeed(o.seed, 'input'),
    output: streamSeed(o.seed, 'output'),
    prompts: promptStreamSeed(o.seed, o.promptSalt),
  };
  const prefix = o.scenario.sharedPrefixTokens ?? 0;
  const overhead = o.promptOverheadTokens ?? 0;
  const count = (text: string) => o.prompts.tokenizer.countSync?.(text) ?? countWords(text);
  const outputFor = (id: number) => sampleLength(o.scenario.output, seeds.output, id, 1);
  const inputFor = (id: number) =>
    sampleLength(o.scenario.input, seeds.input, id, Math.max(1, prefix));
  const dataset = o.dataset;

  if (dataset && dataset.format !== 'text') {
    const entries = dataset.entries;
    return (id) => {
      const entry = entries[id % entries.length];
      const prompt = entry.prompt ?? (entry.messages ?? []).map((m) => m.content).join('\n');
      const output =
        entry.outputTokens ??
        (entry.outputText !== undefined ? Math.max(1, count(entry.outputText)) : outputFor(id));
      return {
        prompt,
        ...(entry.messages ? { messages: entry.messages } : {}),
        requestedInputTokens: count(prompt) + overhead,
        requestedOutputTokens: output,
      };
    };
  }
  if (dataset?.format === 'text') {
    const words = dataset.text.split(/\s+/).filter((w) => w.length > 0);
    return (id) => {
      const requestedInputTokens = inputFor(id);
      const target = Math.max(1, requestedInputTokens - overhead);
      return {
        prompt: corpusSlice(words, target, requestRng(seeds.prompts, id).next(), count),
        requestedInputTokens,
        requestedOutputTokens: outputFor(id),
      };
    };
  }
  const blocks = o.trace?.some((e) => e.hashIds !== undefined)
    ? createBlockPrompts({
        prompts: o.prompts,
        blockTokens: o.traceBlockTokens ?? TRACE_BLOCK_TOKENS,
        overheadTokens: overhead,
      })
    : undefined;
  const trace = o.trace;
  if (blocks && trace) {
    // Built when read (SyntheticRequest), as every prompt is: a 20,000-request trace of ~10k
    // tokens keeps only the block texts most recently used.
    const byEntry = { make: (id: number) => blocks.prompt(trace[id]) };
    return (id) => {
      const traced = trace[id];
      if (!traced?.hashIds || traced.hashIds.length === 0) return plain(id);
      const content = blocks.contentTokens(traced);
      return new SyntheticRequest(
        byEntry,
        id,
        content,
        Math.max(1, traced.inputTokens),
        Math.max(1, traced.outputTokens),
        o.wordsAreTokens ? content : undefined,
        undefined,
      );
    };
  }
  return plain;

  function plain(id: number): RequestSpec {
    const traced = o.trace?.[id];
    const requestedInputTokens = traced ? Math.max(1, traced.inputTokens) : inputFor(id);
    const requestedOutputTokens = traced ? Math.max(1, traced.outputTokens) : outputFor(id);
    const content = Math.max(prefix, 1, requestedInputTokens - overhead);
    return new SyntheticRequest(
      o.prompts,
      id,
      content,
      requestedInputTokens,
      requestedOutputTokens,
      o.wordsAreTokens ? content : undefined,
      prefix === 0 ? DISTINCT_PREFIX_TOKENS : undefined,
    );
  }
}

/**
 * `tokens` tokens of running text from a corpus, starting at a seeded word (wrapping around):
 * grown or cut a word at a time until the tokenizer counts exactly `tokens`, or as close as
 * whole words allow.
 */
function corpusSlice(
  words: readonly string[],
  tokens: number,
  at: number,
  count: (text: string) => number,
): string {
  const start = Math.floor(at * words.length);
  const take = (n: number) => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(words[(start + i) % words.length]);
    return out.join(' ');
  };
  let n = tokens;
  let text = take(n);
  for (let step = 0; step < 32; step++) {
    const got = count(text);
    if (got === tokens) break;
    // Scale by the observed tokens per word, then settle by single words.
    const next = Math.max(
      1,
      got > tokens
        ? n - Math.max(1, Math.floor(((got - tokens) * n) / got))
        : n + Math.max(1, Math.floor(((tokens - got) * n) / Math.max(1, got))),
    );
    if (next === n) break;
    n = next;
    text = take(n);
  }
  return text;
}
