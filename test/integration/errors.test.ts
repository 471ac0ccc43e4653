import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { runAgainst } from '../helpers/run.js';
import {
  chatEvent,
  DONE,
  type Step,
  startScriptedServer,
  usageEvent,
} from '../helpers/scriptedServer.js';

const say = (content: string) => chatEvent({ content });

/** Request id -> what the server does with it. */
const behaviours: Record<
  number,
  { status?: number; headers?: Record<string, string>; steps: Step[] }
> = {
  0: { steps: [{ write: say('ok') }, { write: usageEvent(1, 1) }, { write: DONE }] },
  1: {
    status: 429,
    headers: { 'content-type': 'application/json' },
    steps: [
      { write: JSON.stringify({ error: { message: 'rate limited, slow down', code: 429 } }) },
    ],
  },
  2: {
    status: 500,
    headers: { 'content-type': 'application/json' },
    steps: [
      { write: JSON.stringify({ error: { message: 'engine died', type: 'InternalServerError' } }) },
    ],
  },
  3: { steps: [{ write: say('a') }, { write: say('b') }, { wait: 20 }, { destroy: true }] },
  4: { steps: [{ write: say('a') }, { wait: 5_000 }] },
  5: { steps: [{ write: say('a') }, { write: 'data: {"choices": [oops\n\n' }, { wait: 5_000 }] },
  6: {
    steps: [
      { write: say('a') },
      { write: `data: ${JSON.stringify({ error: { message: 'boom', code: 500 } })}\n\n` },
      { wait: 5_000 },
    ],
  },
  7: { steps: [{ wait: 5_000 }] },
};

describe('errors become categorised records and the run goes on', () => {
  test('429, 500, reset mid-stream, stall, malformed JSON, in-stream error', async () => {
    const server = await startScriptedServer((r) => behaviours[r.id]);
    try {
      const { records, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat', timeoutMs: 600 },
        load: { mode: 'closed', concurrency: 4 },
        requests: 8,
      });
      const kinds = records.map((r) => r.error?.kind ?? 'ok');
      assert.deepEqual(kinds, [
        'ok',
        'http_4xx',
        'http_5xx',
        'stream_broken',
        'timeout',
        'bad_stream',
        'http_5xx',
        'timeout',
      ]);
      assert.equal(records[1].status, 429);
      assert.match(records[1].error?.message ?? '', /rate limited, slow down/);
      assert.match(records[2].error?.message ?? '', /engine died/);
      assert.match(records[5].error?.message ?? '', /malformed JSON/);
      assert.match(records[6].error?.message ?? '', /boom/);
      assert.equal(records[3].outputTokens, 2, 'tokens before the reset are kept');
      for (const r of records.slice(4, 8)) {
        const e2e = r.endAt - r.sentAt;
        assert.ok(
          r.error?.kind !== 'timeout' || (e2e >= 590 && e2e < 2_000),
          `timeout after ${e2e} ms`,
        );
      }
      assert.equal(summary.requests.completed, 1);
      assert.equal(summary.requests.failed, 7);
      assert.deepEqual(summary.requests.errorsByKind, {
        http_4xx: 1,
        http_5xx: 2,
        stream_broken: 1,
        timeout: 2,
        bad_stream: 1,
      });
      // The first message of each kind, by send time: the server's own reason.
      const first = summary.requests.firstErrorByKind ?? {};
      assert.deepEqual(Object.keys(first), [
        'timeout',
        'http_4xx',
        'http_5xx',
        'stream_broken',
        'bad_stream',
      ]);
      assert.match(first.http_4xx ?? '', /^HTTP 429: rate limited, slow down/);
      assert.match(first.http_5xx ?? '', /engine died/);
      assert.match(first.timeout ?? '', /no complete response within 600 ms/);
      assert.equal(summary.latency.ttftMs.count, 1, 'failures stay out of latency distributions');
      assert.equal(summary.latencyAdjusted.ttftMs.p50, null, 'but the adjusted view counts them');
      assert.ok(summary.warnings.some((w) => w.code === 'requests_failed'));
    } finally {
      await server.close();
    }
  });

  test('a 200 that holds no stream event (a wrong route, a proxy page) is a bad stream', async () => {
    const server = await startScriptedServer(() => ({
      headers: { 'content-type': 'text/html' },
      steps: [{ write: '<html><body>Welcome</body></html>' }],
    }));
    try {
      const { records } = await runAgainst(server.url, { requests: 1 });
      assert.equal(records[0].error?.kind, 'bad_stream');
      assert.match(records[0].error?.message ?? '', /no stream events \(content-type text\/html\)/);
    } finally {
      await server.close();
    }
  });

  test('connection refused', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const { records, summary } = await runAgainst(`http://127.0.0.1:${port}`, { requests: 3 });
    assert.deepEqual(
      records.map((r) => r.error?.kind),
      ['connect', 'connect', 'connect'],
    );
    assert.match(records[0].error?.message ?? '', /ECONNREFUSED/);
    assert.equal(summary.requests.failed, 3);
    assert.deepEqual(summary.requests.errorsByKind, { connect: 3 });
  });

  test('a server that drops the connection before answering', async () => {
    const server = await startScriptedServer(() => ({ steps: [{ destroy: true }] }));
    try {
      const { records } = await runAgainst(server.url, { requests: 2 });
      // Headers were flushed first, so the break comes mid-stream.
      assert.deepEqual(
        records.map((r) => r.error?.kind),
        ['stream_broken', 'stream_broken'],
      );
    } finally {
      await server.close();
    }
  });
});
