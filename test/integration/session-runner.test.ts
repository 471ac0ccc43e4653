import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChatMessage, RequestSpec } from '../../src/backends/types.js';
import type { RequestRecord } from '../../src/record.js';
import {
  type Conversation,
  type ConversationStep,
  SESSION_ID_STRIDE,
  type TurnOutcome,
} from '../../src/workload/conversations.js';
import { runAgainst } from '../helpers/run.js';
import {
  chatEvent,
  DONE,
  type ScriptedRequest,
  startScriptedServer,
  usageEvent,
} from '../helpers/scriptedServer.js';

/**
 * The load generator's session runner (issue 16 part 3): each step's requests go out together,
 * the next is built from the answers and sent after its pause, counted from the step's end; a
 * failed request ends the session; the record that ends a whole session carries `sessionDone`.
 */

const PAUSE_MS = 60;

/** Answers each request with its own number as text, or a tool call when tools are offered. */
function answer(request: ScriptedRequest) {
  const tools = request.body.tools as unknown[] | undefined;
  const events = tools
    ? [
        chatEvent({
          tool_calls: [
            { index: 0, id: `call-${request.id}`, type: 'function', function: { name: 'f' } },
          ],
        }),
        chatEvent({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }),
        chatEvent({ tool_calls: [{ index: 0, function: { arguments: ` ${request.id}}` } }] }),
      ]
    : [chatEvent({ content: 'answer ' }), chatEvent({ content: String(request.id) })];
  return {
    steps: [
      { wait: 5 },
      ...events.map((write) => ({ write })),
      { write: usageEvent(3, events.length) },
      { write: DONE },
    ],
  };
}

const spec = (messages: ChatMessage[], extra: Partial<RequestSpec> = {}): RequestSpec => ({
  prompt: messages.map((m) => m.content ?? '').join('\n'),
  messages,
  requestedInputTokens: 3,
  requestedOutputTokens: 8,
  captureAnswer: true,
  ...extra,
});

/** A chat of `turns` turns whose history holds the answers as the server gave them. */
function chat(turns: number, seen: TurnOutcome[][]): Conversation {
  const history: ChatMessage[] = [];
  let turn = 0;
  return {
    next(previous) {
      if (previous) {
        seen.push([...previous]);
        history.push({ role: 'assistant', content: previous[0].answer?.content ?? '' });
      }
      if (turn === turns) return undefined;
      turn++;
      history.push({ role: 'user', content: `question ${turn}` });
      return { pauseMs: PAUSE_MS, requests: [spec([...history])] } satisfies ConversationStep;
    },
  };
}

function bySession(records: RequestRecord[]): Map<number, RequestRecord[]> {
  const sessions = new Map<number, RequestRecord[]>();
  for (const r of records) {
    const list = sessions.get(r.sessionId as number) ?? [];
    list.push(r);
    sessions.set(r.sessionId as number, list);
  }
  return sessions;
}

describe('session runner', () => {
  test('many sessions pausing at once put one listener on the stop signal, not one each', async () => {
    // Each session's pause once added its own abort listener to the shared stop signal: 16
    // sessions thinking at once passed Node's limit of 10 and printed MaxListenersExceededWarning.
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    const server = await startScriptedServer(answer);
    const stop = new AbortController();
    try {
      const { records } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        load: { mode: 'closed', concurrency: 16 },
        requests: 16,
        engine: {
          nextRequest: undefined,
          nextSession: () => chat(2, []),
          stopSignal: stop.signal,
          cancelSignal: new AbortController().signal,
        },
      });
      assert.equal(records.length, 32);
      // A warning is emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(
        warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message),
        [],
      );
    } finally {
      process.off('warning', onWarning);
      await server.close();
    }
  });

  test('a stop ends every pausing session at once', async () => {
    const server = await startScriptedServer(answer);
    const stop = new AbortController();
    try {
      const started = performance.now();
      const run = runAgainst(server.url, {
        target: { endpoint: 'chat' },
        load: { mode: 'closed', concurrency: 12 },
        requests: 12,
        engine: {
          nextRequest: undefined,
          // Pauses of a minute: only the stop can end them.
          nextSession: () => {
            let sent = false;
            return {
              next: () => {
                if (sent)
                  return {
                    pauseMs: 60_000,
                    requests: [spec([{ role: 'user', content: 'again' }])],
                  };
                sent = true;
                return { pauseMs: 0, requests: [spec([{ role: 'user', content: 'hello' }])] };
              },
            };
          },
          stopSignal: stop.signal,
        },
        onRecord: (_record, all) => {
          if (all.length === 12) stop.abort();
        },
      });
      const { records } = await run;
      assert.equal(records.length, 12);
      assert.ok(performance.now() - started < 20_000, 'the pauses ended with the stop');
    } finally {
      await server.close();
    }
  });

  test('turns carry the actual answers, ids, turn numbers, pauses and sessionDone', async () => {
    const server = await startScriptedServer(answer);
    try {
      const seen: TurnOutcome[][] = [];
      const { records } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        load: { mode: 'closed', concurrency: 2 },
        requests: 3,
        engine: { nextRequest: undefined, nextSession: () => chat(3, seen) },
      });
      assert.equal(records.length, 9);
      const sessions = bySession(records);
      assert.deepEqual([...sessions.keys()].sort(), [0, 1, 2]);
      for (const [sessionId, turns] of sessions) {
        turns.sort((a, b) => a.id - b.id);
        assert.deepEqual(
          turns.map((r) => r.id),
          [0, 1, 2].map((i) => sessionId * SESSION_ID_STRIDE + i),
        );
        assert.deepEqual(
          turns.map((r) => r.turn),
          [1, 2, 3],
        );
        assert.deepEqual(
          turns.map((r) => r.sessionDone),
          [undefined, undefined, true],
        );
        for (const r of turns) assert.equal(r.error, undefined);
        for (let k = 1; k < turns.length; k++) {
          // Scheduled exactly one pause after the previous turn's end; sent no earlier.
          assert.ok(Math.abs(turns[k].scheduledAt - (turns[k - 1].endAt + PAUSE_MS)) < 0.002);
          assert.ok(turns[k].sentAt >= turns[k].scheduledAt);
        }
      }
      // Turn 3 of each session sent the two earlier answers, as the server wrote them.
      for (const request of server.requests.filter((r) => r.id % SESSION_ID_STRIDE === 2)) {
        const messages = request.body.messages as ChatMessage[];
        const base = request.id - 2;
        assert.deepEqual(
          messages.map((m) => m.content),
          ['question 1', `answer ${base}`, 'question 2', `answer ${base + 1}`, 'question 3'],
        );
      }
      assert.equal(seen.length, 9);
    } finally {
      await server.close();
    }
  });

  test('fan-out steps send in parallel, capture whole tool calls, and number their calls', async () => {
    const server = await startScriptedServer(answer);
    try {
      const calls: string[] = [];
      const agent = (): Conversation => {
        let step = 0;
        return {
          next(previous) {
            for (const o of previous ?? []) {
              for (const c of o.answer?.toolCalls ?? []) calls.push(JSON.stringify(c));
            }
            if (step === 2) return undefined;
            step++;
            const tools = [{ type: 'function' as const, function: { name: 'f', parameters: {} } }];
            const one = spec([{ role: 'user', content: `step ${step}` }], { tools });
            return { pauseMs: 0, requests: [one, one] };
          },
        };
      };
      const { records } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        requests: 1,
        engine: { nextRequest: undefined, nextSession: agent },
      });
      assert.equal(records.length, 4);
      assert.deepEqual(
        records.map((r) => [r.id, r.turn, r.call]),
        [
          [0, 1, 0],
          [1, 1, 1],
          [2, 2, 0],
          [3, 2, 1],
        ],
      );
      // Both calls of a step went out before either answered.
      assert.equal(records[0].scheduledAt, records[1].scheduledAt);
      assert.ok(records[1].sentAt < records[0].endAt);
      assert.equal(records.filter((r) => r.sessionDone).length, 1);
      assert.deepEqual(calls.map((c) => JSON.parse(c)).slice(0, 2), [
        { id: 'call-0', type: 'function', function: { name: 'f', arguments: '{"a": 0}' } },
        { id: 'call-1', type: 'function', function: { name: 'f', arguments: '{"a": 1}' } },
      ]);
    } finally {
      await server.close();
    }
  });

  test('a failed turn ends its session, which is not done; the run goes on', async () => {
    const server = await startScriptedServer((request) =>
      request.id === 1 ? { status: 500, steps: [{ write: '{"error":"boom"}' }] } : answer(request),
    );
    try {
      const seen: TurnOutcome[][] = [];
      const { records } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        requests: 2,
        engine: { nextRequest: undefined, nextSession: () => chat(3, seen) },
      });
      const sessions = bySession(records);
      assert.deepEqual(
        sessions.get(0)?.map((r) => [r.turn, r.error?.kind, r.sessionDone]),
        [
          [1, undefined, undefined],
          [2, 'http_5xx', undefined],
        ],
      );
      assert.equal(sessions.get(1)?.length, 3);
      assert.equal(sessions.get(1)?.[2].sessionDone, true);
    } finally {
      await server.close();
    }
  });

  test('a stop ends sessions before their next turn', async () => {
    const server = await startScriptedServer(answer);
    try {
      const stop = new AbortController();
      const seen: TurnOutcome[][] = [];
      const { records } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        requests: 4,
        engine: {
          nextRequest: undefined,
          nextSession: () => chat(50, seen),
          stopSignal: stop.signal,
        },
        onRecord: (_r, all) => {
          if (all.length === 2) stop.abort();
        },
      });
      // The stop came during the pause after turn 2: nothing more was sent.
      assert.equal(records.length, 2);
      assert.equal(records.filter((r) => r.sessionDone).length, 0);
    } finally {
      await server.close();
    }
  });
});
