/**
 * Sessions and agent tasks from their request records (docs/metrics.md, "Sessions" and "Agent
 * tasks"): per turn index, the TTFT and E2E distributions (turn k > 1 faster than turn 1 is the
 * prefix cache at work); per session, how it ended and how long it took. Built one record at a
 * time like the run summary, and merged across worker threads exactly: the per-session facts
 * are kept as one small entry per session until the summary is built, so a session whose
 * records reached two builders still counts once.
 */
import type { RequestRecord } from '../record.js';
import { type Distribution, SampleSet, type SampleSetState } from './distribution.js';
import { requestMetrics } from './requestMetrics.js';

/** One turn index (an agent's step) over every session. */
export interface TurnSummary {
  /** From 1. */
  turn: number;
  /** Counted requests of this turn (fan-out calls each count), failures included. */
  requests: number;
  failed: number;
  /** Over the turn's completed requests. */
  ttftMs: Distribution;
  e2eMs: Distribution;
}

/** Sessions that called tools or fanned out (docs/metrics.md, "Agent tasks"). */
export interface AgentTaskSummary {
  /** Agent tasks started, and those that ran to their end. */
  tasks: number;
  completed: number;
  /** `sessionMs` of the completed tasks: model calls, tool latencies and think times. */
  taskMs: Distribution;
  /** Steps (turns) of each completed task. */
  stepsPerTask: Distribution;
  /** Requests sent together in each step of the completed tasks. */
  fanOutPerStep: Distribution;
  /**
   * Agentic traces: of each completed task's time, the recorded tool waits on the chain of calls
   * that ended it (`taskToolWaitMs`); the rest is the server's and the client's.
   */
  toolWaitMs?: Distribution;
}

/** `summary.sessions`: present only when the records carry a `sessionId`. */
export interface SessionSummary {
  started: number;
  /** Ran to their end (`sessionDone`). */
  completed: number;
  /** Stopped at a failed request (any error but `cancelled`). */
  failed: number;
  /** Neither: the run ended (or was stopped) while they were going. */
  cut: number;
  /** Counted requests of each session, over every session started. */
  requestsPerSession: Distribution;
  /** Turns whose requests all succeeded, over every session started. */
  turnsCompleted: Distribution;
  /** First `sentAt` to last `endAt` of each completed session, think times included. */
  sessionMs: Distribution;
  /** Time-weighted mean of sessions open (first send to last byte) over the run's duration. */
  meanOpenSessions: number;
  /** By turn index, ascending. */
  turns: TurnSummary[];
  /** Present when some session was an agent task. */
  agent?: AgentTaskSummary;
}

/** What the builder keeps of one session. */
interface SessionEntry {
  firstSentAt: number;
  lastEndAt: number;
  requests: number;
  done: boolean;
  failed: boolean;
  /** A request answered with a tool call, or a step sent several requests. */
  agent: boolean;
  /** Per turn: [requests, requests that did not succeed (cancelled ones too)]. */
  steps: [turn: number, requests: number, unsuccessful: number][];
  /** The ending record's `taskToolWaitMs` (agentic traces). */
  toolWaitMs?: number;
}

interface TurnState {
  requests: number;
  failed: number;
  ttftMs: SampleSetState;
  e2eMs: SampleSetState;
}

/** A SessionsBuilder as plain data: a worker's part of a run, to merge. */
export interface SessionState {
  sessions: [sessionId: number, entry: SessionEntry][];
  turns: [turn: number, turn: TurnState][];
}

interface TurnSets {
  requests: number;
  failed: number;
  ttftMs: SampleSet;
  e2eMs: SampleSet;
}

export class SessionsBuilder {
  private readonly sessions = new Map<number, SessionEntry>();
  private readonly turns = new Map<number, TurnSets>();

  /** A counted (measure-phase) record that carries a `sessionId`. */
  add(record: RequestRecord & { sessionId: number }): void {
    const turn = record.turn ?? 1;
    const unsuccessful = record.error ? 1 : 0;
    this.mergeEntry(record.sessionId, {
      firstSentAt: record.sentAt,
      lastEndAt: record.endAt,
      requests: 1,
      done: record.sessionDone === true && !record.error,
      failed: record.error !== undefined && record.error.kind !== 'cancelled',
      agent: record.firstToolCallAt !== undefined || record.call !== undefined,
      steps: [[turn, 1, unsuccessful]],
      ...(record.taskToolWaitMs !== undefined ? { toolWaitMs: record.taskToolWaitMs } : {}),
    });
    const sets = this.turnSets(turn);
    sets.requests++;
    if (record.error) {
      sets.failed++;
      return;
    }
    const metrics = requestMetrics(record);
    if (metrics.ttftMs !== undefined) sets.ttftMs.add(metrics.ttftMs);
    sets.e2eMs.add(metrics.e2eMs);
  }

  state(): SessionState {
    return {
      sessions: [...this.sessions].map(([id, e]) => [id, { ...e, steps: [...e.steps] }]),
      turns: [...this.turns].map(([turn, t]) => [
        turn,
        {
          requests: t.requests,
          failed: t.failed,
          ttftMs: t.ttftMs.state(),
          e2eMs: t.e2eMs.state(),
        },
      ]),
    };
  }

  merge(other: SessionState): void {
    for (const [id, entry] of other.sessions) this.mergeEntry(id, entry);
    for (const [turn, t] of other.turns) {
      const sets = this.turnSets(turn);
      sets.requests += t.requests;
      sets.failed += t.failed;
      sets.ttftMs.merge(t.ttftMs);
      sets.e2eMs.merge(t.e2eMs);
    }
  }

  /** `durationMs`: the run's measured duration, for the mean of sessions open. */
  build(durationMs: number): SessionSummary {
    const requestsPerSession = new SampleSet();
    const turnsCompleted = new SampleSet();
    const sessionMs = new SampleSet();
    const taskMs = new SampleSet();
    const stepsPerTask = new SampleSet();
    const fanOutPerStep = new SampleSet();
    const toolWaitMs = new SampleSet();
    let completed = 0;
    let failed = 0;
    let tasks = 0;
    let tasksCompleted = 0;
    // Whole microseconds, summed in session order: the same sum whatever the merge order.
    let openUs = 0;
    for (const id of [...this.sessions.keys()].sort((a, b) => a - b)) {
      const e = this.sessions.get(id) as SessionEntry;
      const spanMs = e.lastEndAt - e.firstSentAt;
      openUs += Math.round(spanMs * 1000);
      requestsPerSession.add(e.requests);
      turnsCompleted.add(e.steps.filter(([, , bad]) => bad === 0).length);
      if (e.agent) tasks++;
      if (e.failed) failed++;
      else if (e.done) {
        completed++;
        sessionMs.add(spanMs);
        if (e.agent) {
          tasksCompleted++;
          taskMs.add(spanMs);
          stepsPerTask.add(e.steps.length);
          for (const [, requests] of e.steps) fanOutPerStep.add(requests);
          if (e.toolWaitMs !== undefined) toolWaitMs.add(e.toolWaitMs);
        }
      }
    }
    const summary: SessionSummary = {
      started: this.sessions.size,
      completed,
      failed,
      cut: this.sessions.size - completed - failed,
      requestsPerSession: requestsPerSession.describe(),
      turnsCompleted: turnsCompleted.describe(),
      sessionMs: sessionMs.describe(),
      meanOpenSessions: durationMs > 0 ? openUs / 1000 / durationMs : 0,
      turns: [...this.turns.keys()]
        .sort((a, b) => a - b)
        .map((turn) => {
          const t = this.turns.get(turn) as TurnSets;
          return {
            turn,
            requests: t.requests,
            failed: t.failed,
            ttftMs: t.ttftMs.describe(),
            e2eMs: t.e2eMs.describe(),
          };
        }),
    };
    if (tasks > 0) {
      summary.agent = {
        tasks,
        completed: tasksCompleted,
        taskMs: taskMs.describe(),
        stepsPerTask: stepsPerTask.describe(),
        fanOutPerStep: fanOutPerStep.describe(),
        ...(toolWaitMs.count > 0 ? { toolWaitMs: toolWaitMs.describe() } : {}),
      };
    }
    return summary;
  }

  /** Adds what is known of a session (one record's part, or another builder's entry). */
  private mergeEntry(id: number, part: SessionEntry): void {
    const e = this.sessions.get(id);
    if (!e) {
      this.sessions.set(id, { ...part, steps: part.steps.map((s) => [...s]) });
      return;
    }
    e.firstSentAt = Math.min(e.firstSentAt, part.firstSentAt);
    e.lastEndAt = Math.max(e.lastEndAt, part.lastEndAt);
    e.requests += part.requests;
    e.done ||= part.done;
    e.failed ||= part.failed;
    e.agent ||= part.agent;
    if (part.toolWaitMs !== undefined) e.toolWaitMs = part.toolWaitMs;
    for (const [turn, requests, bad] of part.steps) {
      const step = e.steps.find((s) => s[0] === turn);
      if (step) {
        step[1] += requests;
        step[2] += bad;
      } else e.steps.push([turn, requests, bad]);
    }
  }

  private turnSets(turn: number): TurnSets {
    let sets = this.turns.get(turn);
    if (!sets) {
      sets = { requests: 0, failed: 0, ttftMs: new SampleSet(), e2eMs: new SampleSet() };
      this.turns.set(turn, sets);
    }
    return sets;
  }
}
