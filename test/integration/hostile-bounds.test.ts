/**
 * Issue 27: what one request may hold, and what happens after its answer is whole. Each test has
 * a loopback server do the hostile thing byte for byte: stream forever, go on writing after
 * `[DONE]`, never end its body, echo the API key. Before the fixes these killed the process
 * (V8's string or heap limit), held connections until the run ended, or wrote the key to disk.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { openaiBackend } from '../../src/backends/openai.js';
import { benchmark, parseRunPlan } from '../../src/index.js';
import { createRunClock } from '../../src/loadgen/clock.js';
import { H1Pool } from '../../src/loadgen/h1.js';
import {
  executeRequest,
  InFlight,
  type PendingRequest,
  ReadTracker,
  type TargetConfig,
} from '../../src/loadgen/http.js';
import type { RequestRecord } from '../../src/record.js';
import { tempDir } from '../helpers/cli.js';
import { rawServer } from '../helpers/rawServer.js';
import { target } from '../helpers/run.js';
import { chatEvent, DONE, startScriptedServer, usageEvent } from '../helpers/scriptedServer.js';

const HEAD =
  'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n';
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
const say = (content: string) => chatEvent({ content });
/** A whole answer's chunks up to `[DONE]`, without the body's last chunk (END). */
const ANSWER = [say('a'), say('b'), usageEvent(4, 2), DONE].map(chunk).join('');
const END = '0\r\n\r\n';

/** Writes `next()` to the socket until it closes, as fast as the client reads. */
function writeForever(socket: Socket, next: () => string): void {
  const pump = () => {
    while (!socket.destroyed && socket.writable) {
      if (!socket.write(next())) {
        socket.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

function pending(id: number, capture = false, outputTokens = 8): PendingRequest {
  return {
    id,
    phase: 'measure',
    scheduledAtUs: 0,
    spec: {
      prompt: 'hello',
      requestedInputTokens: 1,
      requestedOutputTokens: outputTokens,
      ...(capture ? { captureAnswer: true } : {}),
    },
  };
}

/** Sends requests on one H1Pool (plain http: the run's own client) to `url`. */
function client(url: string, overrides: Partial<TargetConfig> = {}, connections = 1) {
  const pool = new H1Pool(url, { connections, keepAliveTimeoutMs: 4000 });
  const config = target(url, { endpoint: 'chat', timeoutMs: 30_000, ...overrides });
  const clock = createRunClock();
  return {
    pool,
    send: (p: PendingRequest): Promise<RequestRecord> =>
      executeRequest(
        {
          pool,
          target: config,
          prefix: '',
          clock,
          reads: new ReadTracker(),
          inFlight: new InFlight(clock),
        },
        p,
      ),
  };
}

describe('bounds on what one request holds (too_large, the run goes on)', () => {
  test('case 1: an answer that never ends, captured for the next turn, stops at --max-answer-mb', async () => {
    const server = await rawServer((socket, index) => {
      socket.write(HEAD);
      if (index === 0) writeForever(socket, () => chunk(say('x'.repeat(1000))));
      else socket.write(ANSWER + END);
    });
    const { pool, send } = client(server.url, { maxAnswerBytes: 200_000 });
    try {
      const record = await send(pending(0, true, 100_000));
      assert.equal(record.error?.kind, 'too_large', JSON.stringify(record.error));
      assert.match(record.error?.message ?? '', /0\.19 MiB of captured text \(--max-answer-mb\)/);
      // The events up to the bound are kept, each 1,000 characters.
      assert.ok(
        record.events.contentChars.length >= 200,
        String(record.events.contentChars.length),
      );
      assert.ok(record.events.contentChars.every((n) => n === 1000));
      // The run goes on: the next request is answered on a new connection.
      const next = await send(pending(1, true));
      assert.equal(next.error, undefined);
      assert.equal(next.outputTokens, 2);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });

  test('case 1 in UTF-8: CJK and emoji text stops at --max-answer-mb of bytes, not UTF-16 units', async () => {
    // 1,000 UTF-16 units a piece either way: 3,000 bytes of CJK, 2,000 of emoji (two units each).
    for (const [piece, bytes] of [
      ['字'.repeat(1000), 3000],
      ['😀'.repeat(500), 2000],
    ] as const) {
      const server = await rawServer((socket) => {
        socket.write(HEAD);
        writeForever(socket, () => chunk(say(piece)));
      });
      const { pool, send } = client(server.url, { maxAnswerBytes: 300_000 });
      try {
        const record = await send(pending(0, true, 100_000));
        assert.equal(record.error?.kind, 'too_large', JSON.stringify(record.error));
        // Kept: the pieces within 300,000 bytes (100 or 150; counting units it was 300).
        const kept = record.events.contentChars.length;
        assert.equal(kept, Math.floor(300_000 / bytes), `${kept} pieces of ${bytes} bytes`);
      } finally {
        await pool.destroy();
        await server.close();
      }
    }
  });

  test("case 1: an agent's endless tool-call arguments stop at the same bound", async () => {
    const piece = (args: string) =>
      chunk(chatEvent({ tool_calls: [{ index: 0, function: { arguments: args } }] }));
    const server = await rawServer((socket) => {
      socket.write(HEAD);
      socket.write(
        chunk(chatEvent({ tool_calls: [{ index: 0, id: 'c1', function: { name: 'f' } }] })),
      );
      writeForever(socket, () => piece('{"q":"'.padEnd(500, 'y')));
    });
    const { pool, send } = client(server.url, { maxAnswerBytes: 100_000 });
    try {
      const record = await send(pending(0, true, 100_000));
      assert.equal(record.error?.kind, 'too_large', JSON.stringify(record.error));
      assert.ok((record.events.toolCallChars?.length ?? 0) >= 200);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });

  test('case 2: endless tiny events end at eight per allowed token (and 1,024), the events kept', async () => {
    const server = await rawServer((socket) => {
      socket.write(HEAD);
      writeForever(socket, () => chunk(say('t')));
    });
    const { pool, send } = client(server.url);
    try {
      const record = await send(pending(0, false, 8));
      assert.equal(record.error?.kind, 'too_large', JSON.stringify(record.error));
      assert.match(record.error?.message ?? '', /1088 events/);
      assert.equal(record.events.dtUs.length, 1024 + 8 * 8);
      assert.equal(record.outputTokens, 1088);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });

  test('case 2: one event that never ends its line stops at 32 MiB', async () => {
    const server = await rawServer((socket) => {
      socket.write(HEAD);
      socket.write(chunk(say('a')));
      socket.write(chunk('data: {"choices":[{"delta":{"content":"'));
      const piece = chunk('z'.repeat(60_000));
      writeForever(socket, () => piece);
    });
    const { pool, send } = client(server.url);
    try {
      const record = await send(pending(0));
      assert.equal(record.error?.kind, 'too_large', JSON.stringify(record.error));
      assert.match(record.error?.message ?? '', /32 MiB in one event/);
      assert.equal(record.events.dtUs.length, 1);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });
});

describe('after the answer is whole, nothing more is read and the connection is let go', () => {
  test('case 3: bytes after [DONE] with no line end are not read; the connection is dropped', async () => {
    let closedAt = 0;
    const server = await rawServer((socket, index) => {
      socket.write(HEAD + ANSWER);
      if (index === 0) {
        socket.on('close', () => {
          closedAt = Date.now();
        });
        writeForever(socket, () => chunk('y'.repeat(8192)));
      } else socket.write(END);
    });
    const { pool, send } = client(server.url);
    try {
      const record = await send(pending(0));
      assert.equal(record.error, undefined, JSON.stringify(record.error));
      assert.equal(record.outputTokens, 2);
      // 64 KiB after the answer drop the connection at once.
      const next = await send(pending(1));
      assert.equal(next.error, undefined);
      assert.ok(closedAt > 0, 'the endless connection was closed');
      assert.equal(server.accepted(), 2);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });

  test('case 6: a body that never ends after [DONE] (or trailers that drip) frees its connection within 1 s', async () => {
    const server = await rawServer((socket, index) => {
      socket.write(HEAD + ANSWER);
      if (index % 2 === 1) {
        // The last chunk, then a trailer one byte at a time, never its blank line.
        socket.write('0\r\nx-trailer: ');
        const drip = setInterval(
          () => (socket.destroyed ? clearInterval(drip) : socket.write('a')),
          50,
        );
      }
      // index % 2 === 0: nothing more, ever.
    });
    const { pool, send } = client(server.url, { timeoutMs: 30_000 });
    try {
      const started = Date.now();
      const records: RequestRecord[] = [];
      // One connection, one request at a time: before the fix, the second waited in the pool
      // until its own timeout.
      for (let id = 0; id < 4; id++) records.push(await send(pending(id)));
      for (const r of records) assert.equal(r.error, undefined, JSON.stringify(r.error));
      assert.ok(Date.now() - started < 20_000, `${Date.now() - started} ms`);
      assert.equal(server.requests(), 4);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });

  test('case 6: a clean end after [DONE] keeps the connection for the next request', async () => {
    const server = await rawServer((socket) => {
      socket.write(HEAD + ANSWER);
      setTimeout(() => socket.write(END), 20);
    });
    const { pool, send } = client(server.url);
    try {
      for (let id = 0; id < 3; id++) assert.equal((await send(pending(id))).error, undefined);
      assert.equal(server.accepted(), 1);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });
});

describe('case 11: a server that echoes the API key or a credential header', () => {
  test('no secret reaches records.jsonl, summary.json, the report or the terminal', async () => {
    const KEY = 'sk-live-0123456789abcdef';
    const TOKEN = 'team-token-9876543210';
    const server = await startScriptedServer((r) => {
      if (r.path.startsWith('/v1/models')) {
        return {
          headers: { 'content-type': 'application/json' },
          steps: [{ write: JSON.stringify({ data: [{ id: 'm' }] }) }],
        };
      }
      const finish = (reason: string) =>
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: reason }] })}\n\n`;
      switch (r.id % 4) {
        case 0:
          return {
            status: 401,
            headers: { 'content-type': 'application/json' },
            steps: [
              { write: JSON.stringify({ error: { message: `bad key ${KEY} for ${TOKEN}` } }) },
            ],
          };
        case 1:
          return {
            steps: [{ write: say('a') }, { write: finish(`stop ${KEY}`) }, { write: DONE }],
          };
        case 2:
          // Clipped at 300 characters in the middle of the key.
          return {
            status: 500,
            headers: { 'content-type': 'text/plain' },
            steps: [{ write: `${'e'.repeat(290)}${KEY}` }],
          };
        default:
          return { steps: [{ write: `data: {"broken": "${TOKEN}\n\n` }] };
      }
    });
    const dir = tempDir('ig-secrets-');
    try {
      const plan = parseRunPlan(
        {
          url: server.url,
          concurrency: '2',
          requests: '8',
          inputTokens: '4',
          outputTokens: '2',
          apiKeyEnv: 'IG_TEST_SECRET_KEY',
          header: [`X-Team-Token: ${TOKEN}`],
          serverMetrics: false,
          out: join(dir, 'run'),
        },
        { IG_TEST_SECRET_KEY: KEY },
      );
      const notices: string[] = [];
      process.env.IG_TEST_SECRET_KEY = KEY;
      await benchmark(plan, { onNotice: (m) => notices.push(m) });
      const files = readdirSync(join(dir, 'run'));
      assert.ok(files.includes('records.jsonl'), files.join(', '));
      const records = readFileSync(join(dir, 'run', 'records.jsonl'), 'utf8');
      assert.match(records, /<redacted>/);
      for (const file of files) {
        const text = readFileSync(join(dir, 'run', file), 'utf8');
        for (const secret of [KEY, TOKEN, KEY.slice(0, 8)]) {
          assert.ok(!text.includes(secret), `${file} holds ${secret}`);
        }
      }
      assert.ok(!notices.join('\n').includes(KEY.slice(0, 8)));
    } finally {
      delete process.env.IG_TEST_SECRET_KEY;
      await server.close();
    }
  });
});

test('the full path checks the same bounds: a JSON answer past the capture bound', () => {
  const t = openaiBackend.decodeJson?.(
    { choices: [{ message: { content: 'w'.repeat(5000) } }] },
    10,
    { ...target('http://x', { endpoint: 'chat' }), maxAnswerBytes: 1000 },
    { ...pending(0, true).spec },
  );
  assert.equal((t as { kind?: string }).kind, 'too_large');
});

test('case 12: a 100 Continue then a close on a reused connection is not resent (the POST ran)', async () => {
  const server = await rawServer((socket, index) => {
    if (index === 0) socket.write(HEAD + ANSWER + END);
    else {
      socket.write('HTTP/1.1 100 Continue\r\n\r\n');
      setTimeout(() => socket.destroy(), 20);
    }
  });
  const { pool, send } = client(server.url);
  try {
    assert.equal((await send(pending(0))).error, undefined);
    const second = await send(pending(1));
    assert.equal(second.error?.kind, 'stream_broken', JSON.stringify(second.error));
    assert.equal(second.resent, undefined);
    assert.equal(server.requests(), 2, 'the server got each request once');
  } finally {
    await pool.destroy();
    await server.close();
  }
});
