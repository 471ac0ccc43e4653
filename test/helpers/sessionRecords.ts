/**
 * Hand-made records of a session workload whose numbers are worked out by hand in
 * test/unit/metrics/sessions.test.ts (times in ms on the run clock):
 *
 * - sessions 1 and 2: five chat turns each, 1,000 ms think time, ran to their end;
 *   session 1: turn 1 sent at 0, TTFT 100, E2E 500; turns 2-5 TTFT 40, E2E 400 (ends at 6,100);
 *   session 2: 100 ms later, turn 1 TTFT 200, E2E 600; turns 2-5 TTFT 40, E2E 400 (ends at 6,300).
 * - session 3: turn 1 at 200 (TTFT 100, E2E 500), turn 2 at 1,700 (TTFT 40, E2E 400), turn 3
 *   sent at 3,100 fails with a 500 at 3,150: failed.
 * - session 4: turn 1 at 300 (TTFT 100, E2E 500), turn 2 sent at 1,800 cancelled by the run at
 *   2,000: cut.
 * - session 5, an agent task: step 1 at 0 answers with a tool call (TTFT 50, ends at 300); a
 *   200 ms tool latency; step 2 fans out two calls at 500 (TTFT 30 each, end at 800 and 900); a
 *   100 ms tool latency; step 3, the final answer, at 1,000 (TTFT 80, ends at 1,400).
 */
import type { RequestRecord } from '../../src/record.js';
import { SESSION_ID_STRIDE } from '../../src/workload/conversations.js';

interface Turn {
  sessionId: number;
  index: number;
  turn: number;
  call?: number;
  scheduledAt?: number;
  sentAt: number;
  ttft?: number;
  e2e: number;
  done?: boolean;
  toolCall?: boolean;
  error?: RequestRecord['error'];
  reasoningTokens?: number;
}

export function sessionRecord(t: Turn): RequestRecord {
  const endAt = t.sentAt + t.e2e;
  const record: RequestRecord = {
    id: t.sessionId * SESSION_ID_STRIDE + t.index,
    sessionId: t.sessionId,
    turn: t.turn,
    phase: 'measure',
    scheduledAt: t.scheduledAt ?? t.sentAt,
    sentAt: t.sentAt,
    endAt,
    requestedInputTokens: 100,
    requestedOutputTokens: 10,
    outputTokens: 0,
    outputTokensSource: 'server',
    events: { dtUs: [], tokens: [], contentChars: [] },
  };
  if (t.call !== undefined) record.call = t.call;
  if (t.done) record.sessionDone = true;
  if (t.error) {
    record.error = t.error;
    return record;
  }
  const firstAt = t.sentAt + (t.ttft ?? 0);
  // Two token events: the first at TTFT, the last 5 ms before the end.
  record.firstTokenAt = firstAt;
  record.lastTokenAt = endAt - 5;
  record.outputTokens = 10;
  if (t.toolCall) record.firstToolCallAt = firstAt;
  else record.firstContentAt = firstAt;
  record.events = {
    dtUs: [Math.round((t.ttft ?? 0) * 1000), Math.round((endAt - 5 - firstAt) * 1000), 5000],
    tokens: [1, 9, 0],
    contentChars: t.toolCall ? [0, 0, 0] : [4, 40, 0],
    ...(t.toolCall ? { toolCallChars: [4, 40, 0] } : {}),
  };
  return record;
}

const chat = (sessionId: number, start: number, firstTtft: number, firstE2e: number) => {
  const records: RequestRecord[] = [];
  let at = start;
  for (let turn = 1; turn <= 5; turn++) {
    const e2e = turn === 1 ? firstE2e : 400;
    records.push(
      sessionRecord({
        sessionId,
        index: turn - 1,
        turn,
        sentAt: at,
        ttft: turn === 1 ? firstTtft : 40,
        e2e,
        done: turn === 5,
      }),
    );
    at += e2e + 1000;
  }
  return records;
};

export function sessionRecords(): RequestRecord[] {
  return [
    ...chat(1, 0, 100, 500),
    ...chat(2, 100, 200, 600),
    sessionRecord({ sessionId: 3, index: 0, turn: 1, sentAt: 200, ttft: 100, e2e: 500 }),
    sessionRecord({ sessionId: 3, index: 1, turn: 2, sentAt: 1700, ttft: 40, e2e: 400 }),
    sessionRecord({
      sessionId: 3,
      index: 2,
      turn: 3,
      sentAt: 3100,
      e2e: 50,
      error: { kind: 'http_5xx', message: 'overloaded', status: 500 },
    }),
    sessionRecord({ sessionId: 4, index: 0, turn: 1, sentAt: 300, ttft: 100, e2e: 500 }),
    sessionRecord({
      sessionId: 4,
      index: 1,
      turn: 2,
      sentAt: 1800,
      e2e: 200,
      error: { kind: 'cancelled', message: 'cancelled by the client' },
    }),
    sessionRecord({
      sessionId: 5,
      index: 0,
      turn: 1,
      sentAt: 0,
      ttft: 50,
      e2e: 300,
      toolCall: true,
    }),
    sessionRecord({
      sessionId: 5,
      index: 1,
      turn: 2,
      call: 0,
      sentAt: 500,
      ttft: 30,
      e2e: 300,
      toolCall: true,
    }),
    sessionRecord({
      sessionId: 5,
      index: 2,
      turn: 2,
      call: 1,
      sentAt: 500,
      ttft: 30,
      e2e: 400,
      toolCall: true,
    }),
    sessionRecord({
      sessionId: 5,
      index: 3,
      turn: 3,
      sentAt: 1000,
      ttft: 80,
      e2e: 400,
      done: true,
    }),
  ];
}
