import type { BackendOptions } from '../backends/types.js';
import { didYouMean } from '../nearest.js';
import {
  formatLengthDistribution,
  type LengthDistribution,
  parseLengthDistribution,
} from './distributions.js';

/**
 * A workload shape: how long prompts and outputs are. The chapter's three at least (short in /
 * short out for chat, short in / long out for creative writing, long in / short out for
 * summarisation), plus RAG's very long prompts; any can be overridden or written from scratch.
 */
export interface Scenario {
  name: string;
  /** Prompt tokens per request (under the run's tokenizer). */
  input: LengthDistribution;
  /** max_tokens per request. */
  output: LengthDistribution;
  /** Tokens every prompt starts with (exercises prefix caching). */
  sharedPrefixTokens?: number;
  /** Distinct shared prefixes, prompt `id` starting with prefix `id mod n` (default 1). */
  sharedPrefixes?: number;
  /** What the scenario stands for, for plans and reports. */
  description?: string;
  /** A preset's few words in `--scenario`'s help ("256/256", "5-turn sessions"). */
  brief?: string;
  /**
   * A trace sets every request's lengths and waits (an agentic trace, agentTrace.ts): `input`,
   * `output` and `session` only make it a session workload, and are not said or written out.
   */
  shapedByTrace?: true;
  /**
   * Multi-turn sessions: each session is several turns, turn k sending the whole history. The
   * scenario's `input` is then each new user message, `output` each answer's max_tokens.
   */
  session?: SessionShape;
  /** Agent tasks: model calls that answer with tool calls, tool results, a final answer. */
  agent?: AgentShape;
  /** Ask reasoning models to think (sent with every request). */
  reasoning?: ReasoningShape;
}

/** How a multi-turn session goes (docs/metrics.md, "Sessions"). */
export interface SessionShape {
  /** Turns per session (each session draws its own). */
  turns: LengthDistribution;
  /** Milliseconds the user thinks between an answer's end and the next turn. */
  thinkTimeMs: LengthDistribution;
  /**
   * What stands for the model's earlier answers in the history: what it actually answered
   * ('actual'), or the dataset's reference answers ('reference'; synthetic sessions: a text of
   * the answer's requested length).
   */
  history: 'actual' | 'reference';
  /** Tokens of a system prompt that every session shares (0: none). */
  systemPromptTokens: number;
}

/** How an agent task goes (docs/metrics.md, "Agent tasks"). */
export interface AgentShape {
  /** Tool-calling steps before the final answer (each task draws its own). */
  steps: LengthDistribution;
  /** Parallel model calls per step (each gets its own tool result). */
  fanOut: number;
  /** Tokens of the shared system prompt (the agent's instructions), before the tool schemas. */
  systemPromptTokens: number;
  /** Functions offered to the model, each with a JSON schema. */
  tools: number;
  /** Milliseconds a tool takes to answer, from the model call's end to the next step. */
  toolLatencyMs: LengthDistribution;
  /** Tokens of each tool result, injected as the next message. */
  toolOutputTokens: LengthDistribution;
  /** max_tokens of the final answer (the steps' calls use the scenario's `output`). */
  answerTokens: LengthDistribution;
}

/** Reasoning options sent with every request (BackendOptions carries them to the wire). */
export interface ReasoningShape {
  /** `reasoning_effort`. */
  effort?: 'low' | 'medium' | 'high';
  /** `chat_template_kwargs.enable_thinking`. */
  enableThinking?: boolean;
}

export const SCENARIO_PRESETS: readonly Scenario[] = [
  {
    name: 'chat',
    brief: '256/256',
    input: { kind: 'fixed', value: 256 },
    output: { kind: 'fixed', value: 256 },
    description: 'short in, short out: a chat turn',
  },
  {
    name: 'creative',
    brief: '128/1024',
    input: { kind: 'fixed', value: 128 },
    output: { kind: 'fixed', value: 1024 },
    description: 'short in, long out: creative writing, decode-bound',
  },
  {
    name: 'summarize',
    brief: '4096/256',
    input: { kind: 'fixed', value: 4096 },
    output: { kind: 'fixed', value: 256 },
    description: 'long in, short out: document summarisation, prefill-bound',
  },
  {
    name: 'rag',
    brief: '8192/256',
    input: { kind: 'fixed', value: 8192 },
    output: { kind: 'fixed', value: 256 },
    description: 'very long in, short out: retrieval-augmented answers',
  },
  {
    // Lengths like the ShareGPT sample that vLLM's benchmark_serving (and `vllm bench serve
    // --dataset-name sharegpt`) draws from ShareGPT_V3_unfiltered_cleaned_split.json: the
    // first human turn is the prompt, the first GPT answer's token count the output; pairs
    // with either under 4 tokens, a prompt over 1,024 or a total over 2,048 are dropped.
    // Means: a public run of that sampler (1,000 prompts, seed 0, Qwen2.5 tokenizer) printed
    // 217,393 input and 197,767 output tokens, 217.4 and 197.8 per request; Kwon et al. 2023
    // (vLLM paper, Fig. 11) report ShareGPT means of 161 in / 338 out before that filter.
    // The spread is not published for the filtered sample: a log-normal with sd = mean
    // (median = mean / sqrt 2, a long right tail) is assumed. The unbounded means 235 and 210
    // truncate (re-draw) to [4, 1,024] with means 217.4 and 197.8; 1,024 out keeps every
    // total within the sampler's 2,048. Input and output are drawn independently (the data
    // set pairs them). docs/workloads.md, "ShareGPT-like lengths".
    name: 'sharegpt',
    brief: 'ShareGPT-like, ~217/198',
    input: { kind: 'lognormal', mean: 235, sd: 235, min: 4, max: 1024 },
    output: { kind: 'lognormal', mean: 210, sd: 210, min: 4, max: 1024 },
    description:
      "ShareGPT-like chat lengths as vLLM's benchmark samples them: about 217 in / 198 out on average, 4 to 1,024 each",
  },
  {
    name: 'multi-turn',
    brief: '5-turn sessions',
    input: { kind: 'fixed', value: 128 },
    output: { kind: 'fixed', value: 256 },
    session: {
      turns: { kind: 'fixed', value: 5 },
      thinkTimeMs: { kind: 'fixed', value: 1000 },
      history: 'actual',
      systemPromptTokens: 512,
    },
    description:
      'chat sessions of 5 turns, each re-sending the history (128-token user turns, 256-token answers, a shared 512-token system prompt, 1 s think time): prefix caching decides TTFT',
  },
  {
    name: 'agent',
    brief: 'tool-calling tasks',
    input: { kind: 'fixed', value: 256 },
    output: { kind: 'fixed', value: 64 },
    agent: {
      steps: { kind: 'fixed', value: 4 },
      fanOut: 2,
      systemPromptTokens: 2048,
      tools: 8,
      toolLatencyMs: { kind: 'fixed', value: 200 },
      toolOutputTokens: { kind: 'fixed', value: 512 },
      answerTokens: { kind: 'fixed', value: 256 },
    },
    description:
      'agent tasks: a 2,048-token system prompt and 8 tool schemas, 4 steps of 2 parallel tool calls (64 tokens each), 200 ms tools returning 512 tokens, a 256-token final answer',
  },
  {
    name: 'reasoning',
    brief: '256/4096, thinking on',
    input: { kind: 'fixed', value: 256 },
    output: { kind: 'fixed', value: 4096 },
    reasoning: { enableThinking: true },
    description:
      'short prompt, long thinking: 256 in, up to 4,096 out (the thinking budget) with thinking on',
  },
];

/** The presets for a `--scenario` help text: "chat (256/256), creative (128/1024), ...". */
export function scenarioPresetsHelp(): string {
  return SCENARIO_PRESETS.map((s) => `${s.name} (${s.brief})`).join(', ');
}

export function findScenario(name: string): Scenario | undefined {
  return SCENARIO_PRESETS.find((s) => s.name === name.toLowerCase());
}

/** "chat,creative" -> presets; throws an Error naming the unknown names and the presets. */
export function parseScenarioList(text: string): Scenario[] {
  const names = text
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !findScenario(n));
  if (unknown.length > 0 || names.length === 0) {
    const presets = SCENARIO_PRESETS.map((s) => s.name);
    throw new Error(
      `unknown scenario ${unknown.map((n) => `"${n}"${didYouMean(n.toLowerCase(), presets)}`).join(', ') || '(none given)'}; presets: ${SCENARIO_PRESETS.map((s) => s.name).join(', ')} (custom scenarios go in a --plan file)`,
    );
  }
  return names.map((n) => ({ ...(findScenario(n) as Scenario) }));
}

/** The scenario with `--input-tokens` / `--output-tokens` texts applied over it. */
export function withLengths(
  scenario: Scenario,
  input: string | undefined,
  output: string | undefined,
): Scenario {
  return {
    ...scenario,
    ...(input !== undefined ? { input: parseLengthDistribution(input) } : {}),
    ...(output !== undefined ? { output: parseLengthDistribution(output) } : {}),
  };
}

export function describeScenario(s: Scenario): string {
  if (s.shapedByTrace) return `${s.name}: ${s.description ?? "the trace's lengths and waits"}`;
  const f = formatLengthDistribution;
  const several = (s.sharedPrefixes ?? 1) > 1 ? ` (${s.sharedPrefixes} prefixes)` : '';
  const prefix = s.sharedPrefixTokens ? `, shared prefix ${s.sharedPrefixTokens}${several}` : '';
  const session = s.session
    ? `; sessions of ${f(s.session.turns)} turns, think ${f(s.session.thinkTimeMs)} ms, ${s.session.history} history, system prompt ${s.session.systemPromptTokens}`
    : '';
  const a = s.agent;
  const agent = a
    ? `; agent tasks of ${f(a.steps)} steps x ${a.fanOut} calls, ${a.tools} tools, system prompt ${a.systemPromptTokens}, tools take ${f(a.toolLatencyMs)} ms and return ${f(a.toolOutputTokens)}, answer ${f(a.answerTokens)}`
    : '';
  const r = s.reasoning;
  const reasoning = r
    ? `; reasoning ${[r.effort !== undefined ? `effort ${r.effort}` : '', r.enableThinking !== undefined ? `thinking ${r.enableThinking ? 'on' : 'off'}` : ''].filter(Boolean).join(', ')}`
    : '';
  return `${s.name}: ${f(s.input)} in / ${f(s.output)} out tokens${prefix}${session}${agent}${reasoning}`;
}

/** Request options with the scenario's reasoning options (sent with every request). */
export function withReasoning<T extends BackendOptions>(config: T, scenario: Scenario): T {
  const r = scenario.reasoning;
  if (!r) return config;
  return {
    ...config,
    ...(r.effort !== undefined ? { reasoningEffort: r.effort } : {}),
    ...(r.enableThinking !== undefined ? { enableThinking: r.enableThinking } : {}),
  };
}

/** Whether a scenario runs sessions (multi-turn or agent) rather than single requests. */
export function isSessionScenario(s: Scenario): boolean {
  return s.session !== undefined || s.agent !== undefined;
}

/** The longest length a distribution can draw (Infinity when unbounded). */
export function maximumLength(d: LengthDistribution): number {
  switch (d.kind) {
    case 'fixed':
      return d.value;
    case 'uniform':
      return d.max;
    case 'normal':
    case 'lognormal':
      return d.max ?? Number.POSITIVE_INFINITY;
    case 'empirical':
      return Math.max(...d.values);
    default:
      return Number.POSITIVE_INFINITY;
  }
}
