/**
 * Sessions, agent tasks and reasoning in words and one table, shared by the terminal, Markdown
 * and HTML outputs (each prints them only when the run has them: a plain run's output does not
 * change).
 */
import type { Distribution } from '../metrics/distribution.js';
import { fmtNumber, fmtUpTo } from '../metrics/format.js';
import type { TurnSummary } from '../metrics/sessions.js';
import type { RunSummary } from '../metrics/summary.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import type { Column } from './table.js';

const ms = (v: number) => fmtNumber(v, 1);
/** A percentile, `~` where too few samples resolve it; `-` for an empty distribution. */
const at = (d: Distribution, q: 'p50' | 'p99') =>
  d.count === 0 ? '-' : `${d.lowConfidence?.includes(q) ? '~' : ''}${ms(d[q])}`;

/** The per-turn table: the prefix-cache effect shows as turn k > 1 faster than turn 1. */
export const TURN_COLUMNS: Column<TurnSummary>[] = [
  { label: 'turn', align: 'right', value: (t) => String(t.turn) },
  { label: 'requests', align: 'right', value: (t) => fmtNumber(t.requests) },
  { label: 'failed', align: 'right', value: (t) => fmtNumber(t.failed) },
  { label: 'TTFT p50 (ms)', align: 'right', value: (t) => at(t.ttftMs, 'p50') },
  { label: 'TTFT p99 (ms)', align: 'right', value: (t) => at(t.ttftMs, 'p99') },
  { label: 'E2E p50 (ms)', align: 'right', value: (t) => at(t.e2eMs, 'p50') },
];

/**
 * "Sessions: 5 started, 3 completed, 1 failed, 1 cut; session p50 6,100.0 ms, p99 6,198.0 ms;
 * 2.8 sessions open on average (1.2 requests in flight)".
 */
function describeSessions(summary: RunSummary): string | undefined {
  const s = summary.sessions;
  if (!s) return undefined;
  const duration =
    s.sessionMs.count > 0
      ? `; session p50 ${at(s.sessionMs, 'p50')} ms, p99 ${at(s.sessionMs, 'p99')} ms`
      : '';
  return `Sessions: ${fmtNumber(s.started)} started, ${fmtNumber(s.completed)} completed, ${fmtNumber(s.failed)} failed, ${fmtNumber(s.cut)} cut${duration}; ${fmtUpTo(s.requestsPerSession.mean, 1)} requests per session; ${fmtNumber(s.meanOpenSessions, 1)} sessions open on average (${fmtNumber(summary.load.meanConcurrency, 1)} requests in flight)`;
}

/** "Agent tasks: 1 of 1 completed, task p50 1,400.0 ms, p99 1,400.0 ms, 3 steps, fan-out per step mean 1.33, max 2". */
function describeAgentTasks(summary: RunSummary): string | undefined {
  const a = summary.sessions?.agent;
  if (!a) return undefined;
  const done =
    a.completed > 0
      ? `, task p50 ${at(a.taskMs, 'p50')} ms, p99 ${at(a.taskMs, 'p99')} ms${toolWaits(a.toolWaitMs)}, ${fmtUpTo(a.stepsPerTask.mean, 1)} steps per task, fan-out per step mean ${fmtUpTo(a.fanOutPerStep.mean)}, max ${fmtNumber(a.fanOutPerStep.max)}`
      : '';
  return `Agent tasks: ${fmtNumber(a.completed)} of ${fmtNumber(a.tasks)} completed${done}`;
}

/** " (tool waits on its critical path p50 120.0 ms)": an agentic trace's share of task time. */
function toolWaits(d: Distribution | undefined): string {
  return d && d.count > 0 ? ` (tool waits on its critical path p50 ${at(d, 'p50')} ms)` : '';
}

/** "2 requests reasoned; 40 reasoning / 60 answer tokens (40.0% reasoning); thinking p50 ...". */
export function describeReasoning(summary: RunSummary): string | undefined {
  const r = summary.reasoning;
  if (!r) return undefined;
  const output = r.reasoningTokens + r.answerTokens;
  const share =
    output > 0 ? ` (${fmtNumber((r.reasoningTokens / output) * 100, 1)}% reasoning)` : '';
  const inferred =
    r.inferredRequests > 0 ? `, ${fmtNumber(r.inferredRequests)} counted from the events` : '';
  const thinking = summary.latency.thinkingMs;
  const time =
    thinking?.count > 0
      ? `; thinking p50 ${at(thinking, 'p50')} ms, p99 ${at(thinking, 'p99')} ms`
      : '';
  return `${fmtNumber(r.requests)} requests reasoned; ${fmtNumber(r.reasoningTokens)} reasoning / ${fmtNumber(r.answerTokens)} answer tokens${share}${inferred}${time}`;
}

/**
 * The session line, the agent-task line and the server's prefix-cache hit rate, which stand
 * above the per-turn table; undefined for a run without sessions.
 */
export function sessionFacts(
  summary: RunSummary,
  server: ServerMetricsSummary | undefined,
): string[] | undefined {
  const sessions = describeSessions(summary);
  if (!sessions) return undefined;
  return [sessions, describeAgentTasks(summary), describePrefixCache(server)].filter(
    (line): line is string => line !== undefined,
  );
}

/** "Server prefix-cache hit rate 62.5% (vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total)". */
function describePrefixCache(server: ServerMetricsSummary | undefined): string | undefined {
  const p = server?.prefixCache;
  if (!p) return undefined;
  return `Server prefix-cache hit rate ${fmtNumber(p.hitRate * 100, 1)}% (${p.from})`;
}
