/**
 * Session workloads (multi-turn chat, agent tasks): a session is a sequence of steps, each one or
 * more requests sent together, the next built from what the last one answered; or, replaying an
 * agentic trace, calls that each go out as soon as the calls it waits for have ended (CallGraph).
 * The load generator runs them (src/loadgen/run.ts), and virtual time too (src/sim/virtual.ts);
 * this module only says what to send.
 */
import type { Answer, ChatMessage, RequestSpec, ToolSchema } from '../backends/types.js';
import type { RequestRecord } from '../record.js';
import type { AgentTask } from './agentTrace.js';
import type { Dataset } from './datasets.js';
import { sampleLength, streamSeed } from './distributions.js';
import type { PromptFactory } from './prompts.js';
import { type AgentShape, maximumLength, type Scenario, type SessionShape } from './scenarios.js';
import type { TraceSession } from './trace.js';
import { countWords, toolsPromptText } from './words.js';

/**
 * Record ids in a session workload: `sessionId x SESSION_ID_STRIDE + index of the request in its
 * session`, unique across workers and shards (which split sessions, not requests).
 */
export const SESSION_ID_STRIDE = 10_000;

/** What one request of the last step produced. */
export interface TurnOutcome {
  record: RequestRecord;
  /** The answer's text and tool calls (present when the request asked to keep them). */
  answer?: Answer;
}

/** One step of a session: requests sent together, after a pause. */
export interface ConversationStep {
  /** Milliseconds to wait after the previous step ended (think time, tool latency). */
  pauseMs: number;
  /** Sent together (agent fan-out); one for a chat turn. */
  requests: RequestSpec[];
}

/** One session as it goes. */
export interface Conversation {
  /**
   * The next step, given what every request of the last step produced (undefined before the
   * first step); undefined when the session is over. Never called after a failed request, nor
   * on a session with `graph`.
   */
  next(previous?: readonly TurnOutcome[]): ConversationStep | undefined;
  /**
   * A session whose calls wait for named calls rather than for the whole last step (an agentic
   * trace): the runners send each call as soon as every call it waits for has ended, plus its
   * delay (CallGraphRun), and never call `next`.
   */
  graph?: CallGraph;
}

/** One call of a CallGraph. */
export interface GraphCall {
  /** Indices (in the graph's `calls`, all lower than its own) of the calls it waits for. */
  after: readonly number[];
  /** Waiting for none: ms after the session's start; else ms after the last of them ends. */
  delayMs: number;
  /** Its record's `turn` (the longest chain of calls ending at it, from 1) and `call` (from 0). */
  turn: number;
  call: number;
}

/** The calls of a session and how each is built. */
export interface CallGraph {
  calls: readonly GraphCall[];
  /**
   * Call `i`'s request, asked once every call it waits for has ended (`outcomes` by call index;
   * theirs are set). Never asked after a failed request.
   */
  request(i: number, outcomes: readonly (TurnOutcome | undefined)[]): RequestSpec;
}

/** A call of a CallGraph that is due: its index and when to send it (run clock, µs). */
export interface DueCall {
  call: number;
  atUs: number;
}

/**
 * Which calls of a graph are due when, for both session runners (live and virtual time): the
 * calls that wait for none at the start, each other call once the last of the calls it waits
 * for has ended, plus its delay. Times in whole µs of the run's clock, as the runners keep them.
 */
export class CallGraphRun {
  private readonly left: number[];
  private readonly latestUs: number[];
  /** The calls waiting for each call. */
  private readonly dependents: number[][];
  /** Per call: the tool waits on the chain of calls that made it due (µs). */
  private readonly chainWaitUs: number[];
  private ended = 0;

  constructor(private readonly graph: CallGraph) {
    this.left = graph.calls.map((c) => c.after.length);
    this.latestUs = graph.calls.map(() => 0);
    this.dependents = graph.calls.map(() => []);
    for (const [k, c] of graph.calls.entries()) for (const i of c.after) this.dependents[i].push(k);
    this.chainWaitUs = graph.calls.map(() => 0);
  }

  /** The calls due from a session started at `startUs`. */
  start(startUs: number): DueCall[] {
    const due: DueCall[] = [];
    for (const [i, c] of this.graph.calls.entries()) {
      if (c.after.length === 0) due.push({ call: i, atUs: startUs + Math.round(c.delayMs * 1000) });
    }
    // A later first call's offset counts as waiting; the task's time starts at its first.
    const firstUs = due.reduce((m, d) => Math.min(m, d.atUs), Number.POSITIVE_INFINITY);
    for (const d of due) this.chainWaitUs[d.call] = d.atUs - firstUs;
    return due;
  }

  /** Call `i` ended at `endUs`: the calls that were waiting for it last, now due. */
  end(i: number, endUs: number): DueCall[] {
    this.ended++;
    const due: DueCall[] = [];
    for (const k of this.dependents[i]) {
      // Ties: the first to end stays the chain's.
      if (endUs > this.latestUs[k] || this.left[k] === this.graph.calls[k].after.length) {
        this.latestUs[k] = endUs;
        this.chainWaitUs[k] = this.chainWaitUs[i];
      }
      if (--this.left[k] === 0) {
        const delayUs = Math.round(this.graph.calls[k].delayMs * 1000);
        this.chainWaitUs[k] += delayUs;
        due.push({ call: k, atUs: this.latestUs[k] + delayUs });
      }
    }
    return due;
  }

  /**
   * The tool waits on the chain of calls that made call `i` due, its own included (ms): on the
   * call that ends a task, the part of the task's time spent waiting for tools, not the server.
   */
  chainWaitMs(i: number): number {
    return this.chainWaitUs[i] / 1000;
  }

  /** Every call has ended. */
  get finished(): boolean {
    return this.ended === this.graph.calls.length;
  }
}

/** Session `sessionId` of a workload, deterministic in the seed and the id. */
export type ConversationWorkload = (sessionId: number) => Conversation;

// ---- builders ----

/** How a session workload is made (createConversationWorkload). */
export interface ConversationWorkloadOptions {
  /**
   * Its `session` (multi-turn chat) or `agent` shape; `input` is each new user message (an
   * agent's task), `output` each answer's max_tokens (an agent step's calls).
   */
  scenario: Scenario;
  /** Texts of exact token counts; made without a shared prefix (the system prompt is shared). */
  prompts: PromptFactory;
  seed: number;
  /** Tokens the server adds to every prompt (BOS, template), added to requestedInputTokens. */
  promptOverheadTokens?: number;
  /** A ShareGPT dataset read with `allTurns`: session s replays conversation s mod n. */
  dataset?: Dataset;
  /**
   * Sessions of a trace (traceSessions): session s replays trace session s, and past the last
   * one sends nothing.
   */
  traceSessions?: readonly TraceSession[];
  /** Trace replay speed: the gaps between a session's turns are divided by it (default 1). */
  speed?: number;
  /**
   * An agentic trace (agentTrace.ts): session s replays task s (past the last one, nothing), each
   * call sent once the calls it waits for have ended plus its recorded wait.
   */
  agentTasks?: readonly AgentTask[];
  /** `--tool-wait-cap-s`: a recorded wait (after `speed`) longer than this is cut to it (ms). */
  toolWaitCapMs?: number;
}

/**
 * Session `sessionId` of a multi-turn or agent workload, pure and deterministic in (seed,
 * sessionId); the texts depend on the answers only where the history is the model's own:
 * - `scenario.agent`: an agent task (agentConversation);
 * - a trace with sessions, a ShareGPT dataset, or else synthetic turns: a chat session whose turn
 *   k sends the system prompt (if any), the history and the k-th user message.
 * Request `index` of a session draws its lengths as request `sessionId x SESSION_ID_STRIDE +
 * index` (its record id) of the 'input' and 'output' streams.
 */
export function createConversationWorkload(o: ConversationWorkloadOptions): ConversationWorkload {
  const texts = textMaker(o);
  const tasks = o.agentTasks;
  if (tasks) return (id) => agentTraceConversation(o, texts, id, tasks[id]);
  if (o.scenario.agent)
    return (id) => agentConversation(o, o.scenario.agent as AgentShape, texts, id);
  const shape = o.scenario.session;
  if (!shape)
    throw new Error(`scenario "${o.scenario.name}" has neither a session nor an agent shape`);
  const script = chatScript(o, shape, texts);
  return (id) => chatConversation(shape, texts, script(id));
}

/** Counts, texts and the system prompt shared by every builder of one workload. */
interface TextMaker {
  count(text: string): number;
  /**
   * count for a server's text (an answer, its tool calls): its length is the server's to choose
   * (up to 16 MB), so its counting is capped (Tokenizer.countCapped).
   */
  countAnswer(text: string): number;
  /** A text of `tokens` tokens, distinct per (session, request index, slot). */
  make(sessionId: number, index: number, slot: TextSlot, tokens: number): string;
  system(tokens: number): string;
  seeds: Record<
    'input' | 'output' | 'turns' | 'think' | 'steps' | 'latency' | 'toolOutput' | 'answer',
    number
  >;
  overhead: number;
}

/**
 * What a text stands for: its slot keeps texts of one request apart. Tool results use slots 2 up,
 * one per tool call of the answer; a seventh call's result repeats the first's text, which is
 * harmless (it follows another tool call, so no prefix is shared by it).
 */
type TextSlot = 'user' | 'answer' | number;
const TEXT_SLOTS = 8;
/** The system prompt's text id, apart from every session's (which are >= 0). */
const SYSTEM_TEXT_ID = -2;

function textMaker(o: ConversationWorkloadOptions): TextMaker {
  const tokenizer = o.prompts.tokenizer;
  const count = (text: string) => tokenizer.countSync?.(text) ?? countWords(text);
  const countAnswer = (text: string) => tokenizer.countCapped?.(text) ?? count(text);
  return {
    count,
    countAnswer,
    make(sessionId, index, slot, tokens) {
      const s = slot === 'user' ? 0 : slot === 'answer' ? 1 : 2 + (slot % (TEXT_SLOTS - 2));
      // Distinct ids give distinct texts up to 2^32 / (STRIDE x 8) ~ 53,000 sessions.
      return o.prompts.make((sessionId * SESSION_ID_STRIDE + index) * TEXT_SLOTS + s, tokens);
    },
    system: (tokens) => (tokens > 0 ? o.prompts.make(SYSTEM_TEXT_ID, tokens) : ''),
    seeds: {
      input: streamSeed(o.seed, 'input'),
      output: streamSeed(o.seed, 'output'),
      turns: streamSeed(o.seed, 'session-turns'),
      think: streamSeed(o.seed, 'session-think'),
      steps: streamSeed(o.seed, 'agent-steps'),
      latency: streamSeed(o.seed, 'agent-tool-latency'),
      toolOutput: streamSeed(o.seed, 'agent-tool-output'),
      answer: streamSeed(o.seed, 'agent-answer'),
    },
    overhead: o.promptOverheadTokens ?? 0,
  };
}

/** Messages sent so far, with their token counts. */
class History {
  readonly messages: ChatMessage[] = [];
  tokens = 0;
  /** Each message's text (content, tool calls), for `prompt`. */
  private readonly texts: string[] = [];

  constructor(private readonly maker: TextMaker) {}

  /** Adds `message`; `fromServer` when it is a server's answer (counted with countAnswer). */
  add(message: ChatMessage, fromServer = false): void {
    // A call counts as the model generated it, its name then its arguments (the simulator's
    // count too); the template's markup around it is the server's own overhead.
    const calls = (message.tool_calls ?? []).map(
      (c) => `${c.function.name}${c.function.arguments}`,
    );
    const parts = [...(message.content ? [message.content] : []), ...calls];
    const count = fromServer ? this.maker.countAnswer : this.maker.count;
    for (const part of parts) this.tokens += count(part);
    this.messages.push(message);
    this.texts.push(parts.join('\n'));
  }

  /** A request sending the history as it is now. */
  request(
    outputTokens: number,
    extra: Pick<RequestSpec, 'tools' | 'toolChoice' | 'captureAnswer'>,
    toolsTokens = 0,
  ): RequestSpec {
    return {
      prompt: this.texts.join('\n'),
      messages: [...this.messages],
      ...extra,
      requestedInputTokens: this.tokens + toolsTokens + this.maker.overhead,
      requestedOutputTokens: outputTokens,
    };
  }
}

/** The assistant message that stands for `answer` (tool calls keep or get an id). */
function assistantMessage(answer: Answer, idFor: (call: number) => string): ChatMessage {
  const message: ChatMessage = { role: 'assistant', content: answer.content };
  if (answer.toolCalls.length > 0) {
    message.content = answer.content === '' ? null : answer.content;
    message.tool_calls = answer.toolCalls.map((c, i) => ({ ...c, id: c.id || idFor(i) }));
  }
  return message;
}

// ---- chat sessions ----

/** What one chat session sends, turn by turn (k from 0). */
interface ChatScript {
  sessionId: number;
  turns: number;
  /** The k-th user message, given the tokens of what precedes it (trace turns fill the growth). */
  user(k: number, historyTokens: number): string;
  maxTokens(k: number): number;
  /** The pause before turn k > 0, given the last turn's outcome. */
  pauseMs(k: number, previous: readonly TurnOutcome[] | undefined): number;
  /** The reference answer to turn k (history 'reference'), given its max_tokens. */
  reference(k: number, maxTokens: number): string | undefined;
}

function chatScript(
  o: ConversationWorkloadOptions,
  shape: SessionShape,
  t: TextMaker,
): (sessionId: number) => ChatScript {
  const recordId = (s: number, k: number) => s * SESSION_ID_STRIDE + k;
  const think = (s: number, k: number) =>
    sampleLength(shape.thinkTimeMs, t.seeds.think, recordId(s, k), 0);
  const drawnOutput = (s: number, k: number) =>
    sampleLength(o.scenario.output, t.seeds.output, recordId(s, k), 1);
  const synthetic = (s: number, k: number, tokens: number) => t.make(s, k, 'answer', tokens);

  if (o.traceSessions) {
    const sessions = o.traceSessions;
    const speed = o.speed ?? 1;
    return (s) => {
      const turns = sessions[s]?.turns ?? [];
      return {
        sessionId: s,
        turns: turns.length,
        // The trace's input is the whole prompt: the new message is its growth over the history.
        user: (k, historyTokens) =>
          t.make(s, k, 'user', Math.max(1, turns[k].inputTokens - t.overhead - historyTokens)),
        maxTokens: (k) => Math.max(1, turns[k].outputTokens),
        pauseMs: (k, previous) => {
          const gapMs = (turns[k].atMs - turns[k - 1].atMs) / speed;
          return Math.max(0, gapMs - observedLatencyMs(previous));
        },
        reference: (k, tokens) => synthetic(s, k, tokens),
      };
    };
  }
  const dataset = o.dataset;
  if (dataset && dataset.format === 'sharegpt') {
    const conversations = dataset.entries.map(
      (e) =>
        e.turns ?? [
          { user: e.prompt ?? '', ...(e.outputText !== undefined ? { answer: e.outputText } : {}) },
        ],
    );
    return (s) => {
      const turns = conversations[s % conversations.length];
      return {
        sessionId: s,
        turns: turns.length,
        user: (k) => turns[k].user,
        // The reference answer's length, as vLLM's benchmark sets the first turn's.
        maxTokens: (k) => {
          const answer = turns[k].answer;
          return answer !== undefined ? Math.max(1, t.count(answer)) : drawnOutput(s, k);
        },
        pauseMs: (k) => think(s, k),
        reference: (k) => turns[k].answer,
      };
    };
  }
  if (dataset) {
    throw new Error(
      `a ${dataset.format} dataset has no conversations: sessions replay a ShareGPT dataset`,
    );
  }
  return (s) => ({
    sessionId: s,
    turns: sampleLength(shape.turns, t.seeds.turns, s, 1),
    user: (k) =>
      t.make(s, k, 'user', sampleLength(o.scenario.input, t.seeds.input, recordId(s, k), 1)),
    maxTokens: (k) => drawnOutput(s, k),
    pauseMs: (k) => think(s, k),
    reference: (k, tokens) => synthetic(s, k, tokens),
  });
}

/** How long the last step took, from when it was due to its end (ms; 0 before the first). */
function observedLatencyMs(previous: readonly TurnOutcome[] | undefined): number {
  let latest = 0;
  for (const { record } of previous ?? [])
    latest = Math.max(latest, record.endAt - record.scheduledAt);
  return latest;
}

function chatConversation(shape: SessionShape, t: TextMaker, script: ChatScript): Conversation {
  const history = new History(t);
  const system = t.system(shape.systemPromptTokens);
  if (system !== '') history.add({ role: 'system', content: system });
  const actual = shape.history === 'actual';
  // A session's requests number below SESSION_ID_STRIDE, or record ids would collide.
  const turns = Math.min(script.turns, SESSION_ID_STRIDE);
  let k = 0;
  let lastMaxTokens = 0;
  return {
    next(previous) {
      if (k >= turns) return undefined;
      if (k > 0) {
        const answer = actual ? previous?.[0]?.answer : undefined;
        const text = actual ? undefined : script.reference(k - 1, lastMaxTokens);
        if (answer) {
          const id = (i: number) => toolCallId(script.sessionId, k - 1, 0, i);
          history.add(assistantMessage(answer, id), true);
        } else if (text !== undefined) history.add({ role: 'assistant', content: text });
      }
      history.add({ role: 'user', content: script.user(k, history.tokens) });
      lastMaxTokens = script.maxTokens(k);
      const request = history.request(lastMaxTokens, actual ? { captureAnswer: true } : {});
      const pauseMs = k === 0 ? 0 : script.pauseMs(k, previous);
      k++;
      return { pauseMs, requests: [request] };
    },
  };
}

/** The id of a tool call the server sent without one: unique in the run, the same every time. */
function toolCallId(sessionId: number, index: number, call: number, toolCall: number): string {
  return `call_${sessionId}_${index}_${call}_${toolCall}`;
}

// ---- agentic traces ----

/** A call's prompt as sent: its messages, their texts (for `prompt`) and their tokens. */
interface Prompt {
  messages: ChatMessage[];
  texts: string[];
  tokens: number;
}

/**
 * Session `sessionId` replaying an agentic trace's task (docs/workloads.md, "Agentic traces"):
 * a call's prompt continues the history of the call it waits for in its own agent (the one with
 * the longest prompt; none for a sub-agent's first call, which starts fresh) with that call's
 * answer, then the answers of the other calls it waits for (a fan-in's tool results, a
 * sub-agent's report), then its new text: the trace's `new_tokens`, or what its whole-prompt
 * input grew by over all that (at least one token), so calls after the same call share its
 * prefix as an agent's do. Answers are reference texts of the call's output length (no answer
 * is read back), so a live run and virtual time send the same prompts. Past the trace's last
 * task the session sends nothing.
 */
function agentTraceConversation(
  o: ConversationWorkloadOptions,
  t: TextMaker,
  sessionId: number,
  task: AgentTask | undefined,
): Conversation {
  const speed = o.speed ?? 1;
  const capMs = o.toolWaitCapMs ?? Number.POSITIVE_INFINITY;
  // A session's requests number below SESSION_ID_STRIDE, or record ids would collide; calls
  // come after those they wait for, so cutting the tail keeps every wait resolvable (the plan
  // warns of it: runPlan.ts agentTasksCut).
  const traced = (task?.calls ?? []).slice(0, SESSION_ID_STRIDE);
  const perTurn = new Map<number, number>();
  const calls: GraphCall[] = traced.map((c) => {
    const call = perTurn.get(c.step) ?? 0;
    perTurn.set(c.step, call + 1);
    const delayMs = c.after.length === 0 ? c.startMs / speed : Math.min(c.waitMs / speed, capMs);
    return { after: c.after, delayMs, turn: c.step, call };
  });
  const prompts: (Prompt | undefined)[] = [];
  // A prompt is kept until every call that may continue it has been built.
  const usesLeft = traced.map(() => 0);
  for (const c of traced) for (const j of c.after) usesLeft[j]++;
  // Like prompts, an answer is dropped once every call after it is built: a task of 10,000 calls
  // would otherwise hold them all until it ends.
  const answers: (string | undefined)[] = [];
  const answerTokens: number[] = [];
  const answerOf = (i: number): string => {
    const text = answers[i] ?? t.make(sessionId, i, 'answer', Math.max(1, traced[i].outputTokens));
    answers[i] = text;
    answerTokens[i] ??= t.count(text);
    return text;
  };
  const graph: CallGraph = {
    calls,
    request(i) {
      const c = traced[i];
      // The context it continues: the same agent's call with the longest prompt.
      let context: number | undefined;
      let contextTokens = -1;
      for (const j of c.after) {
        const tokens = (prompts[j] as Prompt).tokens;
        if (traced[j].agent === c.agent && tokens > contextTokens) {
          context = j;
          contextTokens = tokens;
        }
      }
      const messages: ChatMessage[] = [];
      const texts: string[] = [];
      let tokens = 0;
      if (context !== undefined) {
        const base = prompts[context] as Prompt;
        const answer = answerOf(context);
        messages.push(...base.messages, { role: 'assistant', content: answer });
        texts.push(...base.texts, answer);
        tokens = base.tokens + answerTokens[context];
      }
      for (const j of c.after) {
        if (j === context) continue;
        const answer = answerOf(j);
        messages.push({ role: 'user', content: answer });
        texts.push(answer);
        tokens += answerTokens[j];
      }
      const newTokens = Math.max(1, c.newTokens ?? (c.inputTokens ?? 0) - t.overhead - tokens);
      const text = t.make(sessionId, i, 'user', newTokens);
      messages.push({ role: 'user', content: text });
      texts.push(text);
      tokens += t.count(text);
      for (const j of c.after) {
        if (--usesLeft[j] > 0) continue;
        prompts[j] = undefined;
        answers[j] = undefined;
      }
      if (usesLeft[i] > 0) prompts[i] = { messages, texts, tokens };
      return {
        prompt: texts.join('\n'),
        messages: [...messages],
        requestedInputTokens: tokens + t.overhead,
        requestedOutputTokens: Math.max(1, c.outputTokens),
      };
    },
  };
  return { next: () => undefined, graph };
}

// ---- agent tasks ----

/** Verbs and objects of the offered functions' names: `search_documents`, `read_calendar`, ... */
const TOOL_VERBS = ['search', 'read', 'create', 'update', 'list', 'run', 'send', 'fetch'];
const TOOL_OBJECTS = [
  'documents',
  'calendar',
  'tickets',
  'code',
  'orders',
  'emails',
  'files',
  'metrics',
];

/**
 * `n` function schemas, the same for every task and run: distinct names, a description, and JSON
 * Schema parameters (a required string, an optional integer and an optional enum).
 */
export function agentTools(n: number): ToolSchema[] {
  return Array.from({ length: n }, (_, i) => {
    const verb = TOOL_VERBS[i % TOOL_VERBS.length];
    const object = TOOL_OBJECTS[Math.floor(i / TOOL_VERBS.length) % TOOL_OBJECTS.length];
    const round = Math.floor(i / (TOOL_VERBS.length * TOOL_OBJECTS.length));
    const name = `${verb}_${object}${round > 0 ? `_${round + 1}` : ''}`;
    return {
      type: 'function' as const,
      function: {
        name,
        description: `${verb[0].toUpperCase()}${verb.slice(1)} ${object} matching a query and return what was found.`,
        parameters: {
          type: 'object',
          properties: {
            query: { type: 'string', description: `What to ${verb} in ${object}.` },
            limit: {
              type: 'integer',
              minimum: 1,
              maximum: 100,
              description: 'Most results to return.',
            },
            scope: { type: 'string', enum: ['recent', 'all'], description: 'Where to look.' },
          },
          required: ['query'],
        },
      },
    };
  });
}

/**
 * An agent task: the shared system prompt, the tools, a user task of `input` tokens; then
 * `steps` steps of `fanOut` parallel calls (tool_choice 'auto', max_tokens from `output`) on the
 * same history; after each, per call, the assistant message (its tool calls, or its text) and a
 * result of `toolOutputTokens` per tool call (a `tool` message with the call's id; after a text
 * answer, a user message); the next step waits for the slowest tool (tools run in parallel); the
 * last request (tool_choice 'none', max_tokens `answerTokens`) is the final answer.
 */
function agentConversation(
  o: ConversationWorkloadOptions,
  agent: AgentShape,
  t: TextMaker,
  sessionId: number,
): Conversation {
  const tools = agentTools(agent.tools);
  const toolsTokens = tools.length > 0 ? t.count(toolsPromptText(tools)) : 0;
  // tool_choice only goes with tools (servers refuse it alone).
  const offer = (toolChoice: 'auto' | 'none') => (tools.length > 0 ? { tools, toolChoice } : {});
  const fanOut = Math.max(1, agent.fanOut);
  // A session's requests number below SESSION_ID_STRIDE, or record ids would collide.
  const steps = Math.min(
    sampleLength(agent.steps, t.seeds.steps, sessionId, 0),
    Math.floor((SESSION_ID_STRIDE - 1) / fanOut),
  );
  const recordId = (index: number) => sessionId * SESSION_ID_STRIDE + index;
  /** Tool result `i` of request `index`: its own draws of length and latency. */
  const resultId = (index: number, i: number) => recordId(index) * 1024 + Math.min(i, 1023);

  const history = new History(t);
  const system = t.system(agent.systemPromptTokens);
  if (system !== '') history.add({ role: 'system', content: system });
  const taskTokens = sampleLength(o.scenario.input, t.seeds.input, recordId(0), 1);
  history.add({ role: 'user', content: t.make(sessionId, 0, 'user', taskTokens) });

  let step = 0;
  /** Adds what the last step's calls answered and their tool results; returns the pause. */
  const absorb = (previous: readonly TurnOutcome[] | undefined): number => {
    let pauseMs = 0;
    for (let c = 0; c < fanOut; c++) {
      const index = (step - 1) * fanOut + c;
      const answer = previous?.[c]?.answer ?? { content: '', toolCalls: [] };
      const message = assistantMessage(answer, (i) => toolCallId(sessionId, index, c, i));
      history.add(message, true);
      const results = Math.max(1, message.tool_calls?.length ?? 0);
      for (let i = 0; i < results; i++) {
        const tokens = sampleLength(
          agent.toolOutputTokens,
          t.seeds.toolOutput,
          resultId(index, i),
          1,
        );
        const content = t.make(sessionId, index, 2 + i, tokens);
        const call = message.tool_calls?.[i];
        history.add(
          call ? { role: 'tool', tool_call_id: call.id, content } : { role: 'user', content },
        );
        pauseMs = Math.max(
          pauseMs,
          sampleLength(agent.toolLatencyMs, t.seeds.latency, resultId(index, i), 0),
        );
      }
    }
    return pauseMs;
  };

  return {
    next(previous) {
      if (step > steps) return undefined;
      const pauseMs = step === 0 ? 0 : absorb(previous);
      step++;
      if (step <= steps) {
        const requests = Array.from({ length: fanOut }, (_, c) =>
          history.request(
            sampleLength(o.scenario.output, t.seeds.output, recordId((step - 1) * fanOut + c), 1),
            { ...offer('auto'), captureAnswer: true },
            toolsTokens,
          ),
        );
        return { pauseMs, requests };
      }
      const answerTokens = sampleLength(
        agent.answerTokens,
        t.seeds.answer,
        recordId(steps * fanOut),
        1,
      );
      const final = history.request(
        answerTokens,
        { ...offer('none'), captureAnswer: true },
        toolsTokens,
      );
      return { pauseMs, requests: [final] };
    },
  };
}

/**
 * The most steps a session can take and the longest pause between two, for the run's hard
 * deadline: from the scenario's shape, or the longest conversation of a dataset, or the longest
 * session and widest gap of a trace; Infinity when a distribution is unbounded.
 */
export function sessionBounds(
  s: Scenario,
  source: Pick<
    ConversationWorkloadOptions,
    'dataset' | 'traceSessions' | 'speed' | 'agentTasks' | 'toolWaitCapMs'
  > = {},
): { steps: number; pauseMs: number } {
  if (source.agentTasks) {
    // A chain of `steps` calls, each after the longest wait (or the latest start).
    const speed = source.speed ?? 1;
    const cap = source.toolWaitCapMs ?? Number.POSITIVE_INFINITY;
    let steps = 1;
    let pauseMs = 0;
    for (const task of source.agentTasks) {
      for (const c of task.calls) {
        steps = Math.max(steps, c.step);
        const ms = c.after.length === 0 ? c.startMs / speed : Math.min(c.waitMs / speed, cap);
        pauseMs = Math.max(pauseMs, ms);
      }
    }
    return { steps, pauseMs };
  }
  if (s.agent) {
    return {
      steps: maximumLength(s.agent.steps) + 1,
      pauseMs: maximumLength(s.agent.toolLatencyMs),
    };
  }
  if (!s.session) return { steps: 1, pauseMs: 0 };
  if (source.traceSessions) {
    let steps = 1;
    let gapMs = 0;
    for (const { turns } of source.traceSessions) {
      steps = Math.max(steps, turns.length);
      for (let k = 1; k < turns.length; k++)
        gapMs = Math.max(gapMs, turns[k].atMs - turns[k - 1].atMs);
    }
    return { steps, pauseMs: gapMs / (source.speed ?? 1) };
  }
  const pauseMs = maximumLength(s.session.thinkTimeMs);
  const entries = source.dataset?.format === 'sharegpt' ? source.dataset.entries : [];
  if (entries.length > 0) {
    return { steps: Math.max(...entries.map((e) => e.turns?.length ?? 1)), pauseMs };
  }
  return { steps: maximumLength(s.session.turns), pauseMs };
}
