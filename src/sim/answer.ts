import { simWord, splitWords, toolsPromptText } from '../workload/words.js';

/**
 * What the simulated model answers a chat request with: reasoning first, then content or tool
 * calls, one word per token (the simulator's tokenizer). Pure: the server asks it for the
 * prompt's words and for each token's text, and writes the wire shapes itself.
 *
 * Wire shapes follow vLLM's OpenAI server (vllm/entrypoints/openai/chat_completion/serving.py,
 * and DeltaMessage / DeltaToolCall in vllm/entrypoints/openai/engine/protocol.py): reasoning in
 * `delta.reasoning` with its deprecated copy `delta.reasoning_content`; a tool call's first
 * delta carries `index`, `id`, `type: 'function'` and `function.name`, later ones
 * `function.arguments` pieces; finish_reason `tool_calls` for 'auto' and 'required', `stop` for
 * a named tool_choice.
 */

/** The simulator's answer knobs (sim flags). Knobs, not a model of any engine. */
export interface AnswerOptions {
  /** 'request': reason when the request asks (enable_thinking, reasoning_effort); 'always'. */
  reasoning: 'request' | 'always';
  /** Share of an answer's tokens that stream as reasoning (floored), when it reasons. */
  reasoningShare: number;
  /** Share of tool_choice 'auto' requests answered with tool calls (a seeded draw per request). */
  toolCallShare: number;
  /** Calls per tool-call answer when the request allows parallel calls (never more than tokens). */
  parallelToolCalls: number;
  seed: number;
}

export const DEFAULT_ANSWER_OPTIONS: AnswerOptions = {
  reasoning: 'request',
  reasoningShare: 0.5,
  toolCallShare: 1,
  parallelToolCalls: 1,
  seed: 1,
};

export type TokenKind = 'content' | 'reasoning' | 'toolCall';

export interface PlannedCall {
  index: number;
  id: string;
  name: string;
  /** Output tokens of its arguments. */
  tokens: number;
  /** Index of its first token in the answer. */
  first: number;
}

export interface AnswerPlan {
  /** The request asked for (or the simulator forces) reasoning: usage reports its tokens. */
  reasoning: boolean;
  reasoningTokens: number;
  calls: PlannedCall[];
  /** tool_choice named or 'required': a non-streamed answer's content is '' (else null). */
  forced: boolean;
  finishReason: 'length' | 'tool_calls' | 'stop';
}

/** One token's text on the wire and its word in the next turn's prompt (prefix caching). */
export interface TokenText {
  kind: TokenKind;
  text: string;
  word: string;
  /** Tool call index, for tool-call tokens. */
  call?: PlannedCall;
}

/** A plain content answer (completions, and chat without reasoning or tools). */
export const CONTENT_ANSWER: AnswerPlan = {
  reasoning: false,
  reasoningTokens: 0,
  calls: [],
  forced: false,
  finishReason: 'length',
};

/**
 * Plans a chat answer of `tokens` tokens, or says why the request is invalid (HTTP 400).
 * Every call gets at least one token, so an answer has at most `tokens` calls.
 */
export function planAnswer(
  body: Record<string, unknown>,
  tokens: number,
  requestId: string,
  options: AnswerOptions,
): AnswerPlan | string {
  const kwargs = body.chat_template_kwargs as Record<string, unknown> | undefined;
  const thinking = kwargs?.enable_thinking;
  // `enable_thinking: false` turns thinking off even when the simulator reasons always.
  const reasoning =
    thinking !== false &&
    (thinking === true ||
      typeof body.reasoning_effort === 'string' ||
      options.reasoning === 'always');
  const reasoningTokens = reasoning ? Math.floor(tokens * options.reasoningShare) : 0;
  const names = toolNames(body.tools);
  if (typeof names === 'string') return names;
  const choice = body.tool_choice ?? 'auto';
  let named: string | undefined;
  if (typeof choice === 'object' && choice !== null) {
    const name = (choice as { function?: { name?: unknown } }).function?.name;
    if (typeof name !== 'string') return '`tool_choice.function.name` must be a string';
    if (!names.includes(name)) return `Tool '${name}' has not been passed in \`tools\`.`;
    named = name;
  } else if (!['auto', 'required', 'none'].includes(choice as string)) {
    return "`tool_choice` must be 'auto', 'required', 'none' or a named function";
  }
  if (choice === 'required' && names.length === 0) {
    return "`tool_choice` 'required' needs `tools`";
  }
  const rest = tokens - reasoningTokens;
  const wantsCalls =
    names.length > 0 &&
    (named !== undefined ||
      choice === 'required' ||
      (choice === 'auto' && draw(options.seed, requestId) < options.toolCallShare));
  const base = { reasoning, reasoningTokens, forced: named !== undefined || choice === 'required' };
  if (!wantsCalls || rest === 0) return { ...base, calls: [], finishReason: 'length' };
  const parallel = named === undefined && body.parallel_tool_calls !== false;
  const count = Math.min(parallel ? options.parallelToolCalls : 1, rest);
  const calls: PlannedCall[] = [];
  let first = reasoningTokens;
  for (let index = 0; index < count; index++) {
    // The rest split as evenly as it goes, the first calls one token longer.
    const callTokens = Math.floor(rest / count) + (index < rest % count ? 1 : 0);
    calls.push({
      index,
      id: `chatcmpl-tool-${requestId}-${index}`,
      name: named ?? names[index % names.length],
      tokens: callTokens,
      first,
    });
    first += callTokens;
  }
  return { ...base, calls, finishReason: named !== undefined ? 'stop' : 'tool_calls' };
}

/**
 * Token `t` of the answer. A call of k tokens streams the arguments `{"query": "w.. w.."}`: its
 * first token `{"query":` (with the name in the same delta), then one word each, the last
 * closing the JSON (`{}` when k is 1). Concatenated they are valid JSON. The word is what the
 * next turn's prompt holds at that place (`promptTexts` renders a call as name+arguments).
 */
export function tokenText(plan: AnswerPlan, t: number): TokenText {
  const w = simWord(t);
  if (t < plan.reasoningTokens) return { kind: 'reasoning', text: w, word: w.slice(1) };
  const call = plan.calls.find((c) => t >= c.first && t < c.first + c.tokens);
  if (!call) return { kind: 'content', text: w, word: w.slice(1) };
  const j = t - call.first;
  const close = j === call.tokens - 1 ? '"}' : '';
  const text =
    call.tokens === 1
      ? '{}'
      : j === 0
        ? '{"query":'
        : `${j === 1 ? ' "' : ' '}${w.slice(1)}${close}`;
  return { kind: 'toolCall', text, word: j === 0 ? `${call.name}${text}` : text.trim(), call };
}

/** The words of every token of an answer (the generated tokens the prefix cache keys). */
export function answerWords(plan: AnswerPlan, tokens: number): string[] {
  return Array.from({ length: tokens }, (_, t) => tokenText(plan, t).word);
}

/** Whole tool calls of a finished answer (non-streamed `message.tool_calls`). */
export function wholeCalls(plan: AnswerPlan): object[] {
  return plan.calls.map((call) => {
    let args = '';
    for (let t = call.first; t < call.first + call.tokens; t++) args += tokenText(plan, t).text;
    return { id: call.id, type: 'function', function: { name: call.name, arguments: args } };
  });
}

/** What the simulator answers a request without `max_tokens` with (vLLM's OpenAI server default). */
export const DEFAULT_MAX_TOKENS = 256;

/** A completions or chat request as the simulator reads it, before any engine sees it. */
export interface ReadRequest {
  /** The texts its prompt's words come from, in order (promptTexts). */
  promptTexts: string[];
  maxTokens: number;
  plan: AnswerPlan;
}

/**
 * Reads a request body as the HTTP simulator does (server.ts) and virtual time does for the
 * same body (wire.ts): its prompt's texts, its output limit and its answer plan; or the message
 * of the HTTP 400 it gets. `requestId` seeds the tool-call draw.
 */
export function readRequest(
  endpoint: 'chat' | 'completions',
  body: Record<string, unknown>,
  requestId: string,
  answers: AnswerOptions,
): ReadRequest | string {
  const texts = promptTexts(endpoint, body);
  if (typeof texts === 'string') return texts;
  const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? DEFAULT_MAX_TOKENS;
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 0) {
    return '`max_tokens` must be a non-negative integer';
  }
  const plan =
    endpoint === 'chat' ? planAnswer(body, maxTokens, requestId, answers) : CONTENT_ANSWER;
  if (typeof plan === 'string') return plan;
  return { promptTexts: texts, maxTokens, plan };
}

/** A prompt's words (chat: as a template renders the messages and tools), or why not. */
export function promptWords(
  endpoint: 'chat' | 'completions',
  body: Record<string, unknown>,
): string[] | string {
  const texts = promptTexts(endpoint, body);
  return typeof texts === 'string' ? texts : texts.flatMap(splitWords);
}

/**
 * The texts a prompt's words come from, in order, before they are split (no word spans two):
 * a completion's prompt; a chat request as a template renders it, the tool schemas first (each
 * as indented JSON, so a session's shared schema is a cacheable prefix), then each message's
 * content, an assistant's tool calls as name+arguments (the words its answer streamed), a tool
 * message as its content. Virtual time hashes them as it reads (WordHasher).
 */
function promptTexts(
  endpoint: 'chat' | 'completions',
  body: Record<string, unknown>,
): string[] | string {
  if (endpoint === 'chat') return chatPromptTexts(body);
  return typeof body.prompt === 'string' ? [body.prompt] : '`prompt` is missing or not text';
}

/** promptTexts of a chat request. */
function chatPromptTexts(body: Record<string, unknown>): string[] | string {
  if (!Array.isArray(body.messages)) return '`messages` is missing or not a list';
  const texts: string[] = [];
  if (Array.isArray(body.tools)) texts.push(toolsPromptText(body.tools));
  for (const message of body.messages as Record<string, unknown>[]) {
    const content = message?.content;
    if (typeof content === 'string') texts.push(content);
    else if (Array.isArray(content)) {
      for (const part of content as { text?: unknown }[]) {
        if (typeof part?.text === 'string') texts.push(part.text);
      }
    } else if (!(content == null && message?.role === 'assistant')) {
      return '`messages[].content` must be text (null only on an assistant message)';
    }
    if (message?.tool_calls === undefined) continue;
    if (!Array.isArray(message.tool_calls)) return '`messages[].tool_calls` must be a list';
    for (const call of message.tool_calls as { function?: Record<string, unknown> }[]) {
      const fn = call?.function;
      if (typeof fn?.name !== 'string' || typeof fn.arguments !== 'string') {
        return '`messages[].tool_calls[].function` needs a string `name` and `arguments`';
      }
      texts.push(`${fn.name}${fn.arguments}`);
    }
  }
  return texts;
}

/** The names of `tools`, or why they are invalid. */
function toolNames(tools: unknown): string[] | string {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) return '`tools` must be a list';
  const names: string[] = [];
  for (const tool of tools as { function?: { name?: unknown } }[]) {
    const name = tool?.function?.name;
    if (typeof name !== 'string' || name === '') {
      return '`tools[].function.name` must be a non-empty string';
    }
    names.push(name);
  }
  return names;
}

/** A uniform draw in [0, 1) from the seed and the request id (murmur3's finaliser). */
function draw(seed: number, requestId: string): number {
  let h = Math.imul(seed ^ 0x7f4a7c15, 0x9e3779b1) >>> 0;
  for (let i = 0; i < requestId.length; i++) {
    h = Math.imul(h ^ requestId.charCodeAt(i), 0x01000193) >>> 0;
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return ((h ^ (h >>> 16)) >>> 0) / 2 ** 32;
}
