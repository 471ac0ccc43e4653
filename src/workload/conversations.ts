/**
 * Session workloads (multi-turn chat, agent tasks): a session is a sequence of steps, each one or
 * more requests sent together, the next built from what the last one answered. The load
 * generator runs them (src/loadgen/run.ts); this module only says what to send.
 */
import type { Answer, RequestSpec } from '../backends/types.js';
import type { RequestRecord } from '../record.js';

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
   * first step); undefined when the session is over. Never called after a failed request.
   */
  next(previous?: readonly TurnOutcome[]): ConversationStep | undefined;
}

/** Session `sessionId` of a workload, deterministic in the seed and the id. */
export type ConversationWorkload = (sessionId: number) => Conversation;
