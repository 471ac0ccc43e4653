/**
 * Issue 15's transport cases: what a hostile or odd server (or a bad header) does to the load
 * generator's connections. Each test has a loopback server do exactly the hostile thing.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createBrotliCompress, createGzip } from 'node:zlib';
import { Pool } from 'undici';
import { EXIT, InfergaugeError } from '../../src/errors.js';
import { benchmark, parseRunPlan } from '../../src/index.js';
import { createRunClock } from '../../src/loadgen/clock.js';
import { runDeadlineS } from '../../src/loadgen/deadline.js';
import {
  executeRequest,
  InFlight,
  type PendingRequest,
  ReadTracker,
} from '../../src/loadgen/http.js';
import { testOnly } from '../../src/loadgen/workers.js';
import { rawServer } from '../helpers/rawServer.js';
import { runAgainst, target } from '../helpers/run.js';
import {
  chatEvent,
  DONE,
  type Step,
  startScriptedServer,
  usageEvent,
} from '../helpers/scriptedServer.js';

const say = (content: string) => chatEvent({ content });
const ANSWER = [
  { write: say('a') },
  { write: say('b') },
  { write: usageEvent(4, 2) },
  { write: DONE },
];

function pending(id: number): PendingRequest {
  return {
    id,
    phase: 'measure',
    scheduledAtUs: 0,
    spec: { prompt: 'hello', requestedInputTokens: 1, requestedOutputTokens: 2 },
  };
}

/** A complete SSE answer on a raw socket, kept alive (or announcing its close). */
function sseAnswer(close = false): string {
  const body = ANSWER.map((s) => s.write).join('');
  return `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${close ? 'connection: close\r\n' : 'connection: keep-alive\r\n'}\r\n${body}`;
}

describe('case 1: a header that cannot be sent never hangs a run', () => {
  test('runLoadgen refuses a CR/LF API key or header value up front, naming no value', async () => {
    const server = await startScriptedServer(() => ({ steps: ANSWER }));
    try {
      for (const bad of [
        { apiKey: 'sk-secret-abc\r\n' },
        { headers: { 'x-team': 'sk-secret-abc\nx-injected: 1' } },
        { headers: { 'x-team': 'sk-secret-abc\0' } },
      ]) {
        await assert.rejects(
          runAgainst(server.url, { target: { endpoint: 'chat', ...bad }, requests: 4 }),
          (err: Error) => {
            assert.ok(err instanceof InfergaugeError, `${err}`);
            assert.match(err.message, /API key|header x-team/);
            assert.match(err.message, /CR or LF|CR, LF/);
            assert.doesNotMatch(err.message, /sk-secret/);
            return true;
          },
        );
      }
      assert.equal(server.requests.length, 0, 'nothing was sent');
    } finally {
      await server.close();
    }
  });

  test('a request with an unsendable header is an error record at once, and the pool stays usable', async () => {
    const server = await startScriptedServer(() => ({ steps: ANSWER }));
    const pool = new Pool(server.url, { connections: 1, pipelining: 1 });
    try {
      const clock = createRunClock();
      const send = (apiKey: string, id: number) =>
        executeRequest(
          {
            pool,
            target: target(server.url, { endpoint: 'chat', apiKey, timeoutMs: 60_000 }),
            prefix: '',
            clock,
            reads: new ReadTracker(),
            inFlight: new InFlight(clock),
          },
          pending(id),
        );
      const bad = await send('sk-secret\r\n', 0);
      assert.equal(bad.error?.kind, 'connect');
      assert.match(
        bad.error?.message ?? '',
        /cannot be sent: the API key holds a control character/,
      );
      assert.doesNotMatch(JSON.stringify(bad), /sk-secret/);
      // Before the fix, undici's throw marked the pool's only connection as waiting for a
      // drain that never came: this request then waited forever.
      const good = await send('sk-fine', 1);
      assert.equal(good.error, undefined);
      assert.equal(good.outputTokens, 2);
    } finally {
      await pool.destroy();
      await server.close();
    }
  });

  test('timeout and cancel settle a request that is still waiting for a connection', async () => {
    // One connection, held by a request the server never answers: the next ones wait in the
    // pool, with no connection to abort.
    const server = await rawServer(() => {});
    const pool = new Pool(server.url, { connections: 1, pipelining: 1 });
    const clock = createRunClock();
    const holderCancel = new InFlight(clock);
    const send = (id: number, timeoutMs: number, inFlight: InFlight) =>
      executeRequest(
        {
          pool,
          target: target(server.url, { endpoint: 'chat', timeoutMs }),
          prefix: '',
          clock,
          reads: new ReadTracker(),
          inFlight,
        },
        pending(id),
      );
    try {
      const holder = send(0, 60_000, holderCancel);
      while (server.requests() === 0) await new Promise((r) => setTimeout(r, 5));
      const started = Date.now();
      const timedOut = await send(1, 300, new InFlight(clock));
      assert.equal(timedOut.error?.kind, 'timeout');
      assert.ok(Date.now() - started < 20_000, 'the timeout ended it, not the holder');
      const cancellers = new InFlight(clock);
      const cancelled = send(2, 60_000, cancellers);
      cancellers.cancelAll();
      assert.equal((await cancelled).error?.kind, 'cancelled');
      holderCancel.cancelAll();
      assert.equal((await holder).error?.kind, 'cancelled');
      assert.equal(server.requests(), 1, 'the settled requests were never sent');
    } finally {
      await pool.destroy();
      await server.close();
    }
  });
});

describe('case 7: a redirect is a redirect, not a server error', () => {
  test('3xx answers are kind redirect, naming the Location (absolute, clean, clipped)', async () => {
    const locations: Record<number, Record<string, string>> = {
      0: { location: 'https://example.test/v1/chat/completions' },
      1: { location: '/elsewhere/v1/chat/completions' },
      2: { location: `https://user:pw@example.test/${'x'.repeat(500)}` },
      3: {},
    };
    const server = await startScriptedServer((r) => ({
      status: r.id === 1 ? 308 : 301,
      headers: { 'content-type': 'text/html', ...locations[r.id] },
      steps: [{ write: '<a href="...">Moved</a>' }],
    }));
    try {
      const { records, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        requests: 4,
      });
      assert.deepEqual(
        records.map((r) => [r.error?.kind, r.error?.status]),
        [
          ['redirect', 301],
          ['redirect', 308],
          ['redirect', 301],
          ['redirect', 301],
        ],
      );
      const messages = records.map((r) => r.error?.message ?? '');
      assert.equal(
        messages[0],
        'HTTP 301 redirect to https://example.test/v1/chat/completions: infergauge does not follow redirects; use that URL',
      );
      assert.match(
        messages[1],
        new RegExp(`redirect to ${server.url}/elsewhere/v1/chat/completions:`),
      );
      assert.doesNotMatch(messages[2], /user|pw@/, 'credentials are not repeated');
      assert.ok(messages[2].length < 320, 'clipped');
      assert.match(messages[3], /no Location header/);
      assert.deepEqual(summary.requests.errorsByKind, { redirect: 4 });
    } finally {
      await server.close();
    }
  });
});

describe('case 11: a reset before any answer is resent only on a reused, idle connection', () => {
  test('resets on fresh connections are failures, exactly as many as the server made', async () => {
    // Every answer closes its connection, so each request has a fresh one; every other request
    // is reset as soon as it has been read.
    const server = await rawServer((socket, index) => {
      if (index % 2 === 1) socket.resetAndDestroy();
      else socket.end(sseAnswer(true));
    });
    try {
      const { records, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        load: { mode: 'closed', concurrency: 2 },
        requests: 20,
      });
      assert.equal(server.requests(), 20, 'nothing was sent twice');
      assert.equal(records.length, 20);
      assert.equal(summary.requests.failed, 10);
      assert.equal(summary.requests.completed, 10);
      assert.equal(summary.streaming.resentRequests, 0);
      assert.ok(records.every((r) => !r.resent));
      assert.ok(summary.warnings.every((w) => w.code !== 'resent_requests'));
    } finally {
      await server.close();
    }
  });

  test('a kept-alive connection closed under the next request (llama-server): resent, counted, no failure', async () => {
    // Each connection answers its first request with keep-alive, then is closed as the next
    // request arrives on it: what a client meets when the server closes an idle connection
    // just as a request goes out.
    const served = new WeakSet<Socket>();
    const server = await rawServer((socket) => {
      if (served.has(socket)) socket.destroy();
      else {
        served.add(socket);
        socket.write(sseAnswer());
      }
    });
    try {
      const { records, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        load: { mode: 'closed', concurrency: 1 },
        requests: 6,
      });
      assert.equal(summary.requests.failed, 0, JSON.stringify(summary.requests.errorsByKind));
      assert.deepEqual(
        records.map((r) => r.resent ?? false),
        [false, true, true, true, true, true],
      );
      assert.equal(summary.streaming.resentRequests, 5);
      const warning = summary.warnings.find((w) => w.code === 'resent_requests');
      assert.match(
        warning?.message ?? '',
        /^5 of 6 requests were sent again after the server closed/,
      );
      assert.equal(server.requests(), 11);
    } finally {
      await server.close();
    }
  });
});

/** `pieces` compressed as one body, cut after each piece with a sync flush (as a server streams). */
async function compressed(encoding: 'gzip' | 'br', pieces: string[]): Promise<Buffer[]> {
  const z = encoding === 'br' ? createBrotliCompress() : createGzip();
  const out: Buffer[] = [];
  z.on('data', (b: Buffer) => out.push(b));
  const cut: Buffer[] = [];
  for (const piece of pieces) {
    z.write(piece);
    await new Promise<void>((resolve) => z.flush(() => resolve()));
    cut.push(Buffer.concat(out.splice(0)));
  }
  await new Promise<void>((resolve) => z.end(resolve));
  cut.push(Buffer.concat(out.splice(0)));
  return cut;
}

describe('a compressed stream (the gzip note)', () => {
  test('gzip and br streams are decoded as they arrive, with each event at its arrival time', async () => {
    const pieces = [say('a'), say('b'), say('c'), usageEvent(4, 3), DONE];
    const bodies = { gzip: await compressed('gzip', pieces), br: await compressed('br', pieces) };
    const server = await startScriptedServer((r) => {
      const encoding = r.id === 0 ? 'gzip' : 'br';
      const steps: Step[] = bodies[encoding].flatMap((b) => [{ wait: 80 }, { write: b }]);
      return { headers: { 'content-encoding': encoding }, steps };
    });
    try {
      const { records, summary } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        requests: 2,
      });
      assert.equal(summary.requests.failed, 0, JSON.stringify(records.map((r) => r.error)));
      for (const r of records) {
        assert.equal(r.outputTokens, 3);
        assert.equal(r.outputTokensSource, 'server');
        // Each token event came 80 ms after the last: decoding keeps the network's timing.
        const gapsMs = r.events.dtUs.slice(1, 3).map((us) => us / 1000);
        assert.ok(
          gapsMs.every((ms) => ms >= 60),
          `event gaps ${gapsMs.join(', ')} ms, sent 80 ms apart`,
        );
      }
    } finally {
      await server.close();
    }
  });

  test('an encoding it cannot decode, or a corrupt body, is a bad stream that says so', async () => {
    const gzip = await compressed('gzip', [say('a'), DONE]);
    const server = await startScriptedServer((r) =>
      r.id === 0
        ? { headers: { 'content-encoding': 'zstd' }, steps: [{ write: 'x' }, { wait: 5_000 }] }
        : {
            headers: { 'content-encoding': 'gzip' },
            steps: [
              { write: gzip[0].subarray(0, 12) },
              { write: 'not gzip at all' },
              { wait: 5_000 },
            ],
          },
    );
    try {
      const { records } = await runAgainst(server.url, {
        target: { endpoint: 'chat' },
        requests: 2,
      });
      assert.equal(records[0].error?.kind, 'bad_stream');
      assert.match(records[0].error?.message ?? '', /zstd-encoded, which infergauge cannot decode/);
      assert.equal(records[1].error?.kind, 'bad_stream');
      assert.match(records[1].error?.message ?? '', /gzip-encoded body is corrupt/);
    } finally {
      await server.close();
    }
  });
});

describe('every run ends: a hard deadline for the whole run', () => {
  test("the deadline: requests at the load's limit, each taking the whole timeout, plus grace", () => {
    const base = { warmupRequests: 2, timeoutS: 10, graceS: 5, seed: 1 };
    const closed = { mode: 'closed', concurrency: 4 } as const;
    // ceil(2/4) + ceil(9/4) rounds of 10 s, one more timeout, the grace.
    assert.equal(runDeadlineS({ ...base, load: closed, requests: 9 }), 10 + 30 + 10 + 5);
    assert.equal(runDeadlineS({ ...base, load: closed, durationS: 60 }), 10 + 60 + 10 + 5);
    const open = { mode: 'open', rate: 2, arrival: 'constant' } as const;
    // 12 arrivals 0.5 s apart: the last at 5.5 s.
    assert.equal(runDeadlineS({ ...base, load: open, requests: 10 }), 5.5 + 10 + 5);
    assert.equal(
      runDeadlineS({ ...base, load: { ...open, maxConcurrency: 5 }, requests: 10 }),
      5.5 + 3 * 10 + 10 + 5,
    );
    // A duration window opens at the first measured arrival (1 s) and takes 3 s: 1.0 .. 3.5.
    assert.equal(runDeadlineS({ ...base, load: open, durationS: 3 }), 3.5 + 10 + 5);
  });

  test('a worker stuck in a CPU loop is terminated at the deadline; the summary is written and says so', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ig-deadline-'));
    testOnly.spinWorker = 1;
    try {
      const plan = parseRunPlan({
        concurrency: '2',
        workers: '2',
        requests: '4',
        inputTokens: '16',
        outputTokens: '4',
        timeout: '1',
        grace: '1',
        out: join(dir, 'run'),
      });
      const notices: string[] = [];
      const started = Date.now();
      const result = await benchmark(plan, { onNotice: (m) => notices.push(m) });
      // Deadline 1 + 1 + 1 s, then 5 s for the workers to answer; a hang would be forever.
      assert.ok(Date.now() - started < 60_000);
      assert.equal(result.code, EXIT.interrupted);
      assert.ok(
        notices.some((n) => /passed its hard deadline \(4 s/.test(n)),
        notices.join('\n'),
      );
      assert.ok(existsSync(join(dir, 'run', 'summary.json')));
      const saved = JSON.parse(readFileSync(join(dir, 'run', 'summary.json'), 'utf8'));
      const codes = saved.warnings.map((w: { code: string }) => w.code);
      assert.ok(codes.includes('deadline_passed'), codes.join(', '));
      const terminated = saved.warnings.find(
        (w: { code: string }) => w.code === 'worker_terminated',
      );
      assert.match(
        terminated?.message ?? '',
        /^worker 2 of 2 was stuck [\d.]+ s after the cancel and was terminated/,
      );
      assert.equal(saved.interrupted, true);
      // Worker 1's two requests finished; worker 2's first never reached the coordinator.
      assert.equal(saved.requests.completed, 2);
    } finally {
      delete testOnly.spinWorker;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
