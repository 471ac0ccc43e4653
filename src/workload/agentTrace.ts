/**
 * Agentic traces: model calls that wait for named earlier calls (fan-out, fan-in), a recorded
 * tool wait after them, and sub-agents (docs/workloads.md, "Agentic traces"). Three formats map
 * into one model, AgentTrace: infergauge's own JSON lines, the Weka agentic-coding trace that
 * AIPerf replays (and GuideLLM accepts), and GuideLLM's conversation graphs. This module only
 * reads and checks them; conversations.ts builds each call's prompt and the session runners send
 * a call as soon as every call it waits for has ended.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { jsonSyntaxProblem } from '../jsonText.js';
import { MinHeap } from '../minHeap.js';
import type { Scenario } from './scenarios.js';
import { readTextFile } from './textFile.js';
import { describe, isLength, LENGTH_RULE, MAX_TIME_MS, Problems } from './trace.js';

/** One model call of an agentic trace. */
export interface AgentCall {
  /** The call's id as the file names it. */
  id: string;
  /** Where the file defines it (line, or request number for a Weka trace). */
  line: number;
  /** The sub-agent making the call; absent for the session's main agent. */
  agent?: string;
  /** Indices (in its task's `calls`, all lower) of the calls it waits for. */
  after: number[];
  /** A call that waits for none: when it starts, ms after its task's start. */
  startMs: number;
  /** A call that waits for some: the recorded tool (or think) time after the last of them ends. */
  waitMs: number;
  /** The whole prompt, history included, as traces count it (exclusive with newTokens). */
  inputTokens?: number;
  /** Only the text the call adds to the history it continues. */
  newTokens?: number;
  outputTokens: number;
  /** Longest chain of calls ending at this one, from 1: its step in the task. */
  step: number;
}

/** One session of an agentic trace: its main agent's calls and its sub-agents'. */
export interface AgentTask {
  sessionId: string;
  /** When its first call starts, ms from the trace's first. */
  startMs: number;
  /** In an order where every call comes after the calls it waits for (file order otherwise). */
  calls: AgentCall[];
}

export type AgentTraceFormat = 'infergauge' | 'weka' | 'guidellm';

export interface AgentTrace {
  format: AgentTraceFormat;
  /** By start time (ties: file order). */
  tasks: AgentTask[];
}

/**
 * Which agentic format `text` is in, from its content; undefined for any other trace (the
 * single-request formats readTrace reads):
 * - `infergauge`: JSON lines whose first has `session` and `call`;
 * - `guidellm`: JSON lines whose first has `conversation_turns`;
 * - `weka`: one JSON object (or one per line) with `requests` and `block_size`.
 */
export function agentTraceFormat(text: string): AgentTraceFormat | undefined {
  const firstLine = text.split('\n').find((l) => l.trim() !== '') ?? '';
  const first = parseObject(firstLine);
  if (first) {
    if ('conversation_turns' in first) return 'guidellm';
    if ('session' in first && 'call' in first) return 'infergauge';
    if (Array.isArray(first.requests) && 'block_size' in first) return 'weka';
    return undefined;
  }
  // A Weka trace is usually one pretty-printed object.
  if (!firstLine.trim().startsWith('{')) return undefined;
  const whole = parseObject(text);
  return whole && Array.isArray(whole.requests) && 'block_size' in whole ? 'weka' : undefined;
}

/** Whether a trace file's text is an agentic trace (agentTraceFormat). */
export function isAgentTrace(text: string): boolean {
  return agentTraceFormat(text) !== undefined;
}

/**
 * The agentic trace at `path`, or undefined when the file is another kind of trace (for
 * readTrace). Only its head is read to tell, unless it opens like a pretty-printed Weka object,
 * so a long single-request trace is not read twice.
 */
export function readAgentTraceIfAny(path: string): AgentTrace | undefined {
  let head: string;
  try {
    const fd = openSync(path, 'r');
    try {
      const buffer = Buffer.alloc(64 * 1024);
      head = buffer.toString('utf8', 0, readSync(fd, buffer, 0, buffer.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    // readTrace says what is wrong with a file that cannot be read.
    return undefined;
  }
  const firstLine = head.split('\n').find((l) => l.trim() !== '') ?? '';
  const whole = firstLine.trim() === '{' || !head.includes('\n');
  const text = whole ? readTextFile(path, 'trace') : head.slice(0, head.lastIndexOf('\n'));
  const format = agentTraceFormat(text);
  return format ? readAgentTrace(path, format) : undefined;
}

/**
 * The scenario an agentic trace runs as: a session workload whose sessions are the trace's
 * tasks (its shape's lengths are the trace's own, not these).
 */
export const AGENT_TRACE_SCENARIO: Scenario = {
  name: 'agent-trace',
  description: "an agentic trace's tasks, each call sent once the calls it waits for have ended",
  shapedByTrace: true,
  input: { kind: 'fixed', value: 1 },
  output: { kind: 'fixed', value: 1 },
  session: {
    turns: { kind: 'fixed', value: 1 },
    thinkTimeMs: { kind: 'fixed', value: 0 },
    history: 'reference',
    systemPromptTokens: 0,
  },
};

/** Reads an agentic trace file (readTextFile's rules; parseAgentTrace's checks). */
export function readAgentTrace(path: string, format?: AgentTraceFormat): AgentTrace {
  return parseAgentTrace(readTextFile(path, 'trace'), {
    source: path,
    ...(format ? { format } : {}),
  });
}

/**
 * An agentic trace from its text. Every problem is an error with its line and what is wrong
 * (up to 10 listed): a field of the wrong kind, a duplicate call id in a session, a wait for a
 * call the session does not have, for itself, for a call that started later, or in a cycle.
 */
export function parseAgentTrace(
  text: string,
  options: { format?: AgentTraceFormat; source?: string } = {},
): AgentTrace {
  const source = options.source ?? 'trace';
  const format = options.format ?? agentTraceFormat(text);
  if (!format) {
    throw new Error(
      `${source}: not an agentic trace (JSON lines with "session" and "call", a Weka trace, or GuideLLM "conversation_turns")`,
    );
  }
  // A Weka trace is one object: its requests are counted, nested ones included.
  const problems = new Problems(source, format === 'weka' ? 'request' : 'line');
  const raw =
    format === 'infergauge'
      ? readInfergauge(text, problems)
      : format === 'guidellm'
        ? readGuidellm(text, problems)
        : readWeka(text, problems);
  problems.throwIfAny();
  const tasks = raw.map((r) => resolveTask(r, problems));
  problems.throwIfAny();
  if (tasks.length === 0) throw new Error(`${source}: the trace has no calls`);
  // A loop, not Math.min(...): a spread of 100,000s of tasks overflows the stack.
  const first = tasks.reduce((m, t) => Math.min(m, t.startMs), Number.POSITIVE_INFINITY);
  for (const t of tasks) t.startMs -= first;
  // Stable: tasks starting together keep the file's order.
  tasks.sort((a, b) => a.startMs - b.startMs);
  return { format, tasks: tasks as AgentTask[] };
}

// ---- the common model before its references are resolved ----

interface RawCall {
  id: string;
  line: number;
  agent?: string;
  after: string[];
  /** Recorded start, ms on the trace's clock (required of calls that wait for none). */
  atMs?: number;
  waitMs: number;
  inputTokens?: number;
  newTokens?: number;
  outputTokens: number;
}

interface RawTask {
  sessionId: string;
  calls: RawCall[];
}

/** Resolves ids to indices, orders the calls, and checks references and cycles. */
function resolveTask(task: RawTask, problems: Problems): AgentTask {
  const byId = new Map<string, number>();
  for (const [i, call] of task.calls.entries()) {
    const seen = byId.get(call.id);
    if (seen !== undefined) {
      problems.add(
        call.line,
        `session ${JSON.stringify(task.sessionId)} already has call ${JSON.stringify(call.id)} (line ${task.calls[seen].line})`,
      );
    } else byId.set(call.id, i);
  }
  const deps: number[][] = task.calls.map((call) => {
    // A Set: a fan-in may wait for 10,000s of calls, which includes() would scan for each.
    const out = new Set<number>();
    for (const id of call.after) {
      const j = byId.get(id);
      if (j === undefined) {
        problems.add(
          call.line,
          `waits for call ${JSON.stringify(id)}, which session ${JSON.stringify(task.sessionId)} does not have`,
        );
      } else if (id === call.id) {
        problems.add(call.line, `waits for itself (call ${JSON.stringify(id)})`);
      } else {
        const dep = task.calls[j];
        if (call.atMs !== undefined && dep.atMs !== undefined && dep.atMs > call.atMs) {
          problems.add(
            call.line,
            `waits for call ${JSON.stringify(id)} (line ${dep.line}), which started later (${dep.atMs} ms > ${call.atMs} ms)`,
          );
        }
        out.add(j);
      }
    }
    return [...out];
  });
  for (const call of task.calls) {
    if (call.after.length === 0 && call.atMs === undefined) {
      problems.add(call.line, 'waits for no call, so it needs its start time (at_ms)');
    }
  }
  // Kahn's order, lowest file index first, so a file already in order keeps it; the ready calls
  // in a heap, as a session may hold 10,000s of calls that wait for none.
  const indegree = deps.map((d) => d.length);
  const dependents: number[][] = task.calls.map(() => []);
  for (const [i, d] of deps.entries()) for (const j of d) dependents[j].push(i);
  const ready = new MinHeap<number>((i) => i);
  for (const [i, n] of indegree.entries()) if (n === 0) ready.push(i);
  const order: number[] = [];
  while (ready.size > 0) {
    const i = ready.pop() as number;
    order.push(i);
    for (const k of dependents[i]) if (--indegree[k] === 0) ready.push(k);
  }
  if (order.length < task.calls.length) {
    const stuck = task.calls.filter((_, i) => indegree[i] > 0);
    problems.add(
      stuck[0].line,
      `session ${JSON.stringify(task.sessionId)} has a cycle of waits among calls ${stuck
        .slice(0, 6)
        .map((c) => `${JSON.stringify(c.id)} (line ${c.line})`)
        .join(', ')}${stuck.length > 6 ? ', ...' : ''}`,
    );
    return { sessionId: task.sessionId, startMs: 0, calls: [] };
  }
  const position = new Map(order.map((i, at) => [i, at]));
  let startMs = Number.POSITIVE_INFINITY;
  for (const c of task.calls) {
    if (c.after.length === 0 && c.atMs !== undefined) startMs = Math.min(startMs, c.atMs);
  }
  if (startMs === Number.POSITIVE_INFINITY) startMs = 0;
  const calls: AgentCall[] = [];
  for (const i of order) {
    const c = task.calls[i];
    const after = deps[i].map((j) => position.get(j) as number).sort((a, b) => a - b);
    let step = 1;
    for (const j of after) step = Math.max(step, calls[j].step + 1);
    const call: AgentCall = {
      id: c.id,
      line: c.line,
      ...(c.agent !== undefined ? { agent: c.agent } : {}),
      after,
      startMs: after.length === 0 ? (c.atMs ?? startMs) - startMs : 0,
      waitMs: after.length === 0 ? 0 : c.waitMs,
      ...(c.inputTokens !== undefined ? { inputTokens: c.inputTokens } : {}),
      ...(c.newTokens !== undefined ? { newTokens: c.newTokens } : {}),
      outputTokens: c.outputTokens,
      step,
    };
    calls.push(call);
  }
  return { sessionId: task.sessionId, startMs, calls };
}

// ---- infergauge's own format ----

const INFERGAUGE_KEYS = new Set([
  'session',
  'call',
  'after',
  'at_ms',
  'wait_ms',
  'input_tokens',
  'new_tokens',
  'output_tokens',
  'agent',
]);

/**
 * One JSON object per line, one model call each:
 * `{"session", "call", "after"?: [ids], "at_ms"?, "wait_ms"?, "input_tokens" | "new_tokens",
 * "output_tokens", "agent"?}`. Unknown keys are refused, so a typo does not pass as a default.
 */
function readInfergauge(text: string, problems: Problems): RawTask[] {
  const tasks = new Map<string, RawTask>();
  for (const [i, lineText] of text.split('\n').entries()) {
    if (lineText.trim() === '') continue;
    const line = i + 1;
    const o = objectAt(lineText, line, problems);
    if (!o) continue;
    const before = problems.count;
    for (const key of Object.keys(o)) {
      if (!INFERGAUGE_KEYS.has(key)) problems.add(line, `unknown field ${JSON.stringify(key)}`);
    }
    const session = idOf(o.session, 'session', line, problems);
    const id = idOf(o.call, 'call', line, problems);
    const after = idList(o.after, 'after', line, problems);
    const atMs = o.at_ms === undefined ? undefined : msOf(o.at_ms, 'at_ms', line, problems);
    const waitMs = o.wait_ms === undefined ? 0 : msOf(o.wait_ms, 'wait_ms', line, problems);
    if (after.length === 0 && o.wait_ms !== undefined) {
      problems.add(line, 'wait_ms applies to a call that waits for others: give at_ms instead');
    }
    const lengths = promptLengths(o, 'input_tokens', 'new_tokens', line, problems);
    const outputTokens = length(o.output_tokens, 'output_tokens', line, problems);
    const agent = o.agent === undefined ? undefined : idOf(o.agent, 'agent', line, problems);
    if (problems.count > before || session === undefined || id === undefined) continue;
    let task = tasks.get(session);
    if (!task) {
      task = { sessionId: session, calls: [] };
      tasks.set(session, task);
    }
    task.calls.push({
      id,
      line,
      ...(agent !== undefined ? { agent } : {}),
      after,
      ...(atMs !== undefined ? { atMs } : {}),
      waitMs: waitMs ?? 0,
      ...lengths,
      outputTokens: outputTokens ?? 0,
    });
  }
  return [...tasks.values()];
}

// ---- Weka agentic-coding traces (AIPerf `weka_trace`, GuideLLM `weka`) ----

/**
 * A Weka trace (callanjfox/kv-cache-tester; read by ai-dynamo/aiperf
 * src/aiperf/dataset/loader/weka_trace.py): `{id, block_size, requests: [...]}`, a request being
 * `{t, type: "n" | "s", in, out, think_time?, api_time?, hash_ids?}` (seconds; `in` the whole
 * prompt) or a sub-agent `{t, type: "subagent", agent_id, requests: [...]}`. As AIPerf replays
 * it: the main agent's calls run in order, each after the last; a sub-agent's first call waits
 * for the main agent's call before it, and the main agent's next call waits for the sub-agent's
 * last (a sub-agent with no later main call runs on in the background). A call's wait is its
 * recorded `think_time`, else the gap between the latest end (`t + api_time`) of the calls it
 * waits for and its start. One object per file, or one per line. `hash_ids` are read past: the calls' prompts
 * share what their history shares.
 */
function readWeka(text: string, problems: Problems): RawTask[] {
  const objects: { o: Record<string, unknown>; line: number }[] = [];
  const whole = parseObject(text);
  if (whole) objects.push({ o: whole, line: 1 });
  else {
    for (const [i, lineText] of text.split('\n').entries()) {
      if (lineText.trim() === '') continue;
      const o = objectAt(lineText, i + 1, problems);
      if (o) objects.push({ o, line: i + 1 });
    }
  }
  const tasks: RawTask[] = [];
  for (const [n, { o, line }] of objects.entries()) {
    const sessionId = o.id === undefined ? `trace ${n + 1}` : idOf(o.id, 'id', line, problems);
    if (!Array.isArray(o.requests)) {
      problems.add(line, 'a Weka trace needs a requests list');
      continue;
    }
    if (sessionId === undefined) continue;
    const calls: RawCall[] = [];
    let number = 0;
    /** Adds request `r` of `agent` after `after`, returning its call (undefined: bad). */
    const add = (
      r: Record<string, unknown>,
      agent: string | undefined,
      after: RawCall | undefined,
      joins: RawCall[],
    ): RawCall | undefined => {
      const at = ++number;
      const before = problems.count;
      const tS = secondsOf(r.t, 't', at, problems);
      const thinkS =
        r.think_time == null ? undefined : secondsOf(r.think_time, 'think_time', at, problems);
      const inputTokens = length(r.in, 'in', at, problems);
      const outputTokens = length(r.out, 'out', at, problems);
      if (problems.count > before || tS === undefined) return undefined;
      // Without think_time, the wait runs from the latest recorded end of the calls it waits
      // for (a sub-agent it joins may end well after the main call before it), as the replay
      // sends it after the last of them ends.
      let lastEndS: number | undefined;
      for (const dep of [...(after ? [after] : []), ...joins] as (RawCall & { endS?: number })[]) {
        if (dep.endS !== undefined) lastEndS = Math.max(lastEndS ?? dep.endS, dep.endS);
      }
      const gapS = lastEndS !== undefined ? Math.max(0, tS - lastEndS) : 0;
      const apiS = typeof r.api_time === 'number' && r.api_time >= 0 ? r.api_time : undefined;
      const call: RawCall & { endS?: number } = {
        id: `${agent ?? 'main'}:${at}`,
        line: at,
        ...(agent !== undefined ? { agent } : {}),
        after: [...(after ? [after.id] : []), ...joins.map((j) => j.id)],
        // Only a first call's time is used: nested requests may count from their spawn.
        ...(after === undefined && joins.length === 0 ? { atMs: tS * 1000 } : {}),
        waitMs: (thinkS ?? gapS) * 1000,
        inputTokens: inputTokens as number,
        outputTokens: outputTokens as number,
        ...(apiS !== undefined ? { endS: tS + apiS } : {}),
      };
      calls.push(call);
      return call;
    };
    let last: RawCall | undefined;
    let pendingJoins: RawCall[] = [];
    for (const entry of o.requests as unknown[]) {
      if (typeof entry !== 'object' || entry === null) {
        problems.add(++number, 'a request must be an object');
        continue;
      }
      const r = entry as Record<string, unknown>;
      if (r.type === 'subagent') {
        const agent =
          r.agent_id === undefined ? `subagent ${number + 1}` : String(r.agent_id).slice(0, 200);
        if (!Array.isArray(r.requests)) {
          problems.add(++number, `sub-agent ${JSON.stringify(agent)} needs a requests list`);
          continue;
        }
        let inner: RawCall | undefined;
        let first = true;
        for (const x of r.requests as unknown[]) {
          if (typeof x !== 'object' || x === null) {
            problems.add(++number, 'a request must be an object');
            continue;
          }
          if ((x as Record<string, unknown>).type === 'subagent') {
            // AIPerf's loader reads none either: a sub-agent's requests are model calls.
            problems.add(
              ++number,
              `sub-agent ${JSON.stringify(agent)} holds a sub-agent: not read`,
            );
            continue;
          }
          const call = add(x as Record<string, unknown>, agent, first ? last : inner, []);
          if (call) inner = call;
          first = false;
        }
        if (inner) pendingJoins.push(inner);
        continue;
      }
      if (r.type !== 'n' && r.type !== 's') {
        problems.add(++number, `type must be "n", "s" or "subagent", got ${describe(r.type)}`);
        continue;
      }
      const call = add(r, undefined, last, pendingJoins);
      if (call) last = call;
      pendingJoins = [];
    }
    tasks.push({ sessionId, calls });
  }
  return tasks;
}

// ---- GuideLLM conversation graphs ----

/**
 * GuideLLM's conversation graphs (vllm-project/guidellm
 * src/guidellm/data/schemas/conversation_graph_data.py): one JSON line per conversation,
 * `{"conversation_turns": {graph_id?, turns: [{node_id, agent_id?, parents?: [{parent_node_id,
 * history_context?}], columns: {prompt_tokens_count_column: [n], output_tokens_count_column:
 * [n]}, settings?: {relative_timestamp?, requeue_delay?}}]}}` (the graph may be a JSON string).
 * A turn's prompt count is its own new message (GuideLLM sends the history before it); its
 * `requeue_delay` (s) is the wait after its parents, `relative_timestamp` (s) a root's start.
 */
function readGuidellm(text: string, problems: Problems): RawTask[] {
  const tasks: RawTask[] = [];
  for (const [i, lineText] of text.split('\n').entries()) {
    if (lineText.trim() === '') continue;
    const line = i + 1;
    const o = objectAt(lineText, line, problems);
    if (!o) continue;
    let graph: unknown = o.conversation_turns;
    if (typeof graph === 'string') {
      try {
        graph = JSON.parse(graph);
      } catch (err) {
        problems.add(line, `conversation_turns: ${jsonSyntaxProblem(err, graph as string)}`);
        continue;
      }
    }
    const g = graph as Record<string, unknown> | null;
    if (typeof g !== 'object' || g === null || !Array.isArray(g.turns)) {
      problems.add(line, 'conversation_turns must be an object with a turns list');
      continue;
    }
    const sessionId =
      g.graph_id == null ? `line ${line}` : idOf(g.graph_id, 'graph_id', line, problems);
    if (sessionId === undefined) continue;
    const calls: RawCall[] = [];
    for (const [k, t] of (g.turns as unknown[]).entries()) {
      const where = `turn ${k + 1}`;
      if (typeof t !== 'object' || t === null) {
        problems.add(line, `${where} must be an object`);
        continue;
      }
      const turn = t as Record<string, unknown>;
      const before = problems.count;
      const id = idOf(turn.node_id, `${where} node_id`, line, problems);
      const parents = Array.isArray(turn.parents) ? turn.parents : [];
      const after: string[] = [];
      for (const p of parents) {
        const ref = (p as Record<string, unknown> | null)?.parent_node_id;
        const parent = idOf(ref, `${where} parent_node_id`, line, problems);
        if (parent !== undefined) after.push(parent);
      }
      const columns = (turn.columns ?? {}) as Record<string, unknown>;
      const first = (key: string) => (Array.isArray(columns[key]) ? columns[key][0] : undefined);
      const newTokens = length(
        first('prompt_tokens_count_column'),
        `${where} prompt tokens`,
        line,
        problems,
      );
      const outputTokens = length(
        first('output_tokens_count_column'),
        `${where} output tokens`,
        line,
        problems,
      );
      const settings = (turn.settings ?? {}) as Record<string, unknown>;
      const atS =
        settings.relative_timestamp == null
          ? undefined
          : secondsOf(settings.relative_timestamp, `${where} relative_timestamp`, line, problems);
      const delayS =
        settings.requeue_delay == null
          ? 0
          : secondsOf(settings.requeue_delay, `${where} requeue_delay`, line, problems);
      const agentId = turn.agent_id == null ? 'default' : String(turn.agent_id).slice(0, 200);
      if (problems.count > before || id === undefined) continue;
      calls.push({
        id,
        line,
        ...(agentId !== 'default' ? { agent: agentId } : {}),
        after,
        // GuideLLM starts a graph's roots at the run's start unless they carry a time.
        ...(after.length === 0 ? { atMs: (atS ?? 0) * 1000 } : {}),
        waitMs: after.length > 0 ? (delayS ?? 0) * 1000 : 0,
        newTokens: newTokens as number,
        outputTokens: outputTokens as number,
      });
    }
    tasks.push({ sessionId, calls });
  }
  return tasks;
}

// ---- fields ----

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function objectAt(
  text: string,
  line: number,
  problems: Problems,
): Record<string, unknown> | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    problems.add(line, jsonSyntaxProblem(err, text));
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    problems.add(line, 'must be a JSON object');
    return undefined;
  }
  return v as Record<string, unknown>;
}

/** A session or call id: a non-empty string (up to 200 characters) or a whole number. */
function idOf(v: unknown, key: string, line: number, problems: Problems): string | undefined {
  if (typeof v === 'string' && v.length > 0 && v.length <= 200) return v;
  if (Number.isSafeInteger(v)) return String(v);
  problems.add(
    line,
    `${key} must be a non-empty string (up to 200 characters) or a whole number, got ${describe(v)}`,
  );
  return undefined;
}

function idList(v: unknown, key: string, line: number, problems: Problems): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) {
    problems.add(line, `${key} must be a list of call ids, got ${describe(v)}`);
    return [];
  }
  const out: string[] = [];
  for (const x of v) {
    const id = idOf(x, `each of ${key}`, line, problems);
    if (id !== undefined) out.push(id);
  }
  return out;
}

function msOf(v: unknown, key: string, line: number, problems: Problems): number | undefined {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MAX_TIME_MS) {
    problems.add(
      line,
      `${key} must be a number of ms from 0 (within 285 years), got ${describe(v)}`,
    );
    return undefined;
  }
  return v;
}

function secondsOf(v: unknown, key: string, line: number, problems: Problems): number | undefined {
  const ms = typeof v === 'number' ? v * 1000 : Number.NaN;
  return msOf(ms, key, line, problems) === undefined ? undefined : (v as number);
}

function length(v: unknown, key: string, line: number, problems: Problems): number | undefined {
  if (isLength(v)) return v;
  problems.add(line, `${key} must be ${LENGTH_RULE}, got ${describe(v)}`);
  return undefined;
}

/** Exactly one of the whole prompt's length and the new text's. */
function promptLengths(
  o: Record<string, unknown>,
  whole: string,
  added: string,
  line: number,
  problems: Problems,
): { inputTokens?: number; newTokens?: number } {
  if ((o[whole] === undefined) === (o[added] === undefined)) {
    problems.add(
      line,
      `give exactly one of ${whole} (the whole prompt) and ${added} (the text it adds)`,
    );
    return {};
  }
  if (o[whole] !== undefined) {
    const n = length(o[whole], whole, line, problems);
    return n === undefined ? {} : { inputTokens: n };
  }
  const n = length(o[added], added, line, problems);
  return n === undefined ? {} : { newTokens: n };
}
