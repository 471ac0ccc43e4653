/**
 * H1Pool, the plain-HTTP/1.1 client that carries the load: framing (RFC 9112 section 6) byte by
 * byte, connection reuse and its limits, and the error codes a broken peer produces. Each case
 * has a raw TCP server write exactly the bytes under test.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import type { Dispatcher } from 'undici';
import { H1Pool } from '../../../src/loadgen/h1.js';
import { rawServer } from '../../helpers/rawServer.js';

interface Answer {
  status?: number;
  headers?: Record<string, string | string[]>;
  body: string;
  error?: { code: string; message: string };
  reused?: boolean;
  /** The controller's `answered` when the request ended or failed. */
  answered?: boolean;
  /** onRequestStart calls (a request is started once, or never). */
  starts: number;
}

/** Writes `bytes` one byte per write, each flushed on its own (a worst-case split). */
async function trickle(socket: Socket, bytes: string): Promise<void> {
  for (const byte of bytes) {
    await new Promise<void>((resolve) => socket.write(byte, 'latin1', () => resolve()));
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Sends one POST and collects its answer (or its error). */
function send(pool: H1Pool, body = '{}'): Promise<Answer> {
  return new Promise((resolve) => {
    const answer: Answer = { body: '', starts: 0 };
    const chunks: Buffer[] = [];
    const answered = (c: Dispatcher.DispatchController) =>
      (c as unknown as { answered: boolean }).answered;
    pool.dispatch(
      { path: '/v1/x', method: 'POST', body, headers: { 'content-type': 'application/json' } },
      {
        onRequestStart(c) {
          answer.starts++;
          answer.reused = (c as unknown as { reused: boolean }).reused;
        },
        onResponseStart(_c, status, headers) {
          answer.status = status;
          answer.headers = headers as Record<string, string | string[]>;
        },
        // The chunk is a view of the pool's read buffer: copy it, as the contract says.
        onResponseData: (_c, chunk) => chunks.push(Buffer.from(chunk)),
        onResponseEnd(c) {
          answer.body = Buffer.concat(chunks).toString('utf8');
          answer.answered = answered(c);
          resolve(answer);
        },
        onResponseError(c, err) {
          answer.body = Buffer.concat(chunks).toString('utf8');
          answer.answered = answered(c);
          answer.error = { code: (err as { code?: string }).code ?? '', message: err.message };
          resolve(answer);
        },
      },
    );
  });
}

function pool(url: string, connections: number | null = 1) {
  return new H1Pool(url, { connections, keepAliveTimeoutMs: 60_000 });
}

const CHUNKED = [
  'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n',
  '8;ext=1\r\ndata: a\n\r\n',
  'E\r\ndata: [DONE]\n\n\r\n',
  '0\r\nx-trailer: 1\r\n\r\n',
].join('');

describe('H1Pool framing', () => {
  test('chunked, with extensions and trailers, read whole or one byte at a time', async () => {
    for (const split of [false, true]) {
      const server = await rawServer((socket) => {
        if (split) void trickle(socket, CHUNKED);
        else socket.write(CHUNKED);
      });
      const p = pool(server.url);
      try {
        const answer = await send(p);
        assert.equal(answer.error, undefined, `split ${split}`);
        assert.equal(answer.status, 200);
        assert.equal(answer.headers?.['content-type'], 'text/event-stream');
        assert.equal(answer.body, 'data: a\ndata: [DONE]\n\n');
        // The connection is kept: a second request goes out on it.
        assert.equal((await send(p)).reused, true);
        assert.equal(server.accepted(), 1);
      } finally {
        await p.destroy();
        await server.close();
      }
    }
  });

  test("a header named constructor or __proto__ is the server's own, never Object's", async () => {
    const server = await rawServer((socket) =>
      socket.write(
        'HTTP/1.1 200 OK\r\ncontent-length: 2\r\nConstructor: x\r\n__proto__: y\r\ntoString: z\r\n\r\nok',
      ),
    );
    const p = pool(server.url);
    try {
      const answer = await send(p);
      assert.equal(answer.body, 'ok');
      assert.equal(answer.headers?.constructor, 'x');
      assert.equal(answer.headers?.tostring, 'z');
      assert.equal(Object.getPrototypeOf(answer.headers), Object.prototype);
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('content-length, a 1xx before the answer, a 204 without a body; repeated headers as a list', async () => {
    const answers = [
      'HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-a: 1\r\nX-A: 2\r\n\r\nhello',
      'HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
      'HTTP/1.1 204 No Content\r\n\r\n',
    ];
    const server = await rawServer((socket, i) => socket.write(answers[i]));
    const p = pool(server.url);
    try {
      const first = await send(p);
      assert.equal(first.body, 'hello');
      assert.deepEqual(first.headers?.['x-a'], ['1', '2']);
      const second = await send(p);
      assert.deepEqual([second.status, second.body], [200, 'ok']);
      const third = await send(p);
      assert.deepEqual([third.status, third.body, third.error], [204, '', undefined]);
      assert.equal(server.accepted(), 1, 'all three on one connection');
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('a close-delimited body ends at the close, and its connection is not reused', async () => {
    const server = await rawServer((socket) => {
      socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: a\n\n');
    });
    const p = pool(server.url);
    try {
      const first = await send(p);
      assert.deepEqual([first.body, first.error], ['data: a\n\n', undefined]);
      const second = await send(p);
      assert.deepEqual([second.reused, second.error], [false, undefined]);
      assert.equal(server.accepted(), 2);
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('connection: close, HTTP/1.0, and both framings at once are never reused', async () => {
    const heads = [
      'HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\na',
      'HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\nb',
      'HTTP/1.1 200 OK\r\ncontent-length: 100\r\ntransfer-encoding: chunked\r\n\r\n1\r\nc\r\n0\r\n\r\n',
    ];
    for (const head of heads) {
      const server = await rawServer((socket) => socket.write(head));
      const p = pool(server.url);
      try {
        const first = await send(p);
        assert.equal(first.error, undefined, head);
        assert.equal(first.body.length, 1, 'transfer-encoding wins over content-length');
        assert.equal((await send(p)).reused, false, head);
        assert.equal(server.accepted(), 2, head);
      } finally {
        await p.destroy();
        await server.close();
      }
    }
  });

  test('malformed answers are parse errors with llhttp codes, never a hang', async () => {
    const cases: [string, string][] = [
      ['HTTX/1.1 200 OK\r\n\r\n', 'HPE_INVALID_CONSTANT'],
      ['HTTP/1.1 200 OK\r\nbad header\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
      ['HTTP/1.1 200 OK\r\ncontent-length: 3, 4\r\n\r\nabc', 'HPE_INVALID_CONTENT_LENGTH'],
      ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n', 'HPE_INVALID_CHUNK_SIZE'],
      ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nab\r\n', 'HPE_STRICT'],
    ];
    for (const [bytes, code] of cases) {
      const server = await rawServer((socket) => socket.write(bytes));
      const p = pool(server.url);
      try {
        const answer = await send(p);
        assert.equal(answer.error?.code, code, bytes);
      } finally {
        await p.destroy();
        await server.close();
      }
    }
  });

  test('a peer that closes or resets mid-answer fails the request; a refused connect says so', async () => {
    const server = await rawServer((socket, i) => {
      const head = 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n';
      if (i === 0) socket.end(head);
      else {
        socket.write(head);
        setTimeout(() => socket.resetAndDestroy(), 20);
      }
    });
    const p = pool(server.url);
    try {
      const closed = await send(p);
      assert.deepEqual([closed.error?.code, closed.body], ['UND_ERR_SOCKET', 'abc']);
      const reset = await send(p);
      assert.match(reset.error?.code ?? '', /^(ECONNRESET|UND_ERR_SOCKET)$/);
    } finally {
      await p.destroy();
      await server.close();
    }
    const refused = pool(server.url);
    try {
      assert.equal((await send(refused)).error?.code, 'ECONNREFUSED');
    } finally {
      await refused.destroy();
    }
  });
});

describe('H1Pool connections', () => {
  test('never more connections than its limit; waiting requests go out in order as they free', async () => {
    const order: number[] = [];
    const server = await rawServer((socket, i) => {
      order.push(i);
      setTimeout(() => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx'), 5);
    });
    const p = pool(server.url, 3);
    try {
      const answers = await Promise.all(Array.from({ length: 12 }, () => send(p)));
      assert.ok(answers.every((a) => a.body === 'x' && a.error === undefined));
      assert.equal(server.accepted(), 3);
      assert.deepEqual(
        order,
        [...order].sort((a, b) => a - b),
      );
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('warm opens the connections before any request, and requests then reuse them', async () => {
    const server = await rawServer((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx'),
    );
    const p = pool(server.url, 8);
    try {
      assert.equal(await p.warm(8), 8);
      const answers = await Promise.all(Array.from({ length: 8 }, () => send(p)));
      assert.ok(answers.every((a) => a.error === undefined));
      assert.equal(server.accepted(), 8, 'no connection opened beyond the warm ones');
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('a request aborted before it is written leaves its connection clean for the next', async () => {
    const server = await rawServer((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx'),
    );
    const p = pool(server.url, 1);
    try {
      const aborted = await new Promise<string>((resolve) =>
        p.dispatch(
          { path: '/', method: 'POST', body: '{}', headers: {} },
          {
            onRequestStart: (c) => c.abort(new Error('stop')),
            onResponseError: (_c, err) => resolve(err.message),
          },
        ),
      );
      assert.equal(aborted, 'stop');
      const next = await send(p);
      assert.deepEqual([next.body, next.error], ['x', undefined]);
      assert.equal(server.accepted(), 1);
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('a request aborted after it was written takes its connection: the next never reads its answer', async () => {
    const server = await rawServer((socket, i) => {
      const body = i === 0 ? 'first' : 'second';
      setTimeout(
        () => socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body}`),
        // In order, as HTTP/1.1 answers on one connection: the first at 100 ms, then the next.
        i === 0 ? 100 : 150,
      );
    });
    const p = pool(server.url, 1);
    try {
      const aborted = await new Promise<string>((resolve) =>
        p.dispatch(
          { path: '/', method: 'POST', body: '{}', headers: {} },
          {
            // Written and flushed, no answer yet: as a request timeout finds it.
            onRequestStart: (c) => setTimeout(() => c.abort(new Error('timeout')), 30),
            onResponseError: (_c, err) => resolve(err.message),
          },
        ),
      );
      assert.equal(aborted, 'timeout');
      const next = await send(p);
      assert.deepEqual([next.body, next.reused], ['second', false]);
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('refuses connection-level headers as undici does, before anything is sent', async () => {
    const p = pool('http://127.0.0.1:9');
    try {
      for (const name of ['transfer-encoding', 'connection', 'content-length', 'expect']) {
        assert.throws(
          () => p.dispatch({ path: '/', method: 'POST', body: '', headers: { [name]: 'x' } }, {}),
          /invalid/,
        );
      }
    } finally {
      await p.destroy();
    }
  });
});

/** The pool's private lists, for the cases that need to act at an exact point in between. */
interface PoolInside {
  free: { socket: Socket }[];
  queue: { length: number; items: (Dispatcher.DispatchController | undefined)[] };
}

/** A head of `size` bytes (its blank line included; callers check): padding, then a 1-byte body. */
function bigHead(size: number): string {
  let head = 'HTTP/1.1 200 OK\r\ncontent-length: 1\r\n';
  for (let i = 0; head.length + 2 < size; i++) {
    const line = `x-pad-${i}: `;
    head += `${line}${'a'.repeat(Math.max(0, Math.min(1000, size - head.length - line.length - 4)))}\r\n`;
  }
  return `${head}\r\nx`;
}

describe('H1Pool against hostile servers', () => {
  test('a request sent as its idle connection times out goes out on a new one, never seeing the close', async () => {
    const server = await rawServer((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx'),
    );
    const p = new H1Pool(server.url, { connections: 1, keepAliveTimeoutMs: 20 });
    const inside = p as unknown as PoolInside;
    try {
      assert.equal((await send(p)).error, undefined);
      // The keep-alive timer destroys the socket with an error: a listener added after the
      // pool's runs in the turn of its 'error', before its 'close'.
      const idle = inside.free[0].socket;
      const raced = await new Promise<Answer>((resolve) =>
        idle.once('error', () => {
          assert.equal(inside.free.length, 0, 'out of the free list at once');
          resolve(send(p));
        }),
      );
      assert.deepEqual(
        [raced.error, raced.body, raced.starts, raced.reused],
        [undefined, 'x', 1, false],
      );
      assert.equal(server.accepted(), 2);
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('a head whose lines end in LF and its blank line in CRLF (or the reverse) ends there: the first event is intact', async () => {
    const event = 'data: a\n\n';
    const body = `${event.length.toString(16)}\r\n${event}\r\n0\r\n\r\n`;
    for (const [eol, blank] of [
      ['\n', '\r\n'],
      ['\r\n', '\n'],
      ['\n', '\n'],
    ]) {
      const head = `HTTP/1.1 200 OK${eol}content-type: text/event-stream${eol}transfer-encoding: chunked${eol}${blank}`;
      for (const split of [false, true]) {
        const server = await rawServer((socket) => {
          if (split) void trickle(socket, head + body);
          else socket.write(head + body);
        });
        const p = pool(server.url);
        const label = JSON.stringify({ eol, blank, split });
        try {
          const answer = await send(p);
          assert.equal(answer.error, undefined, label);
          assert.equal(answer.headers?.['content-type'], 'text/event-stream', label);
          assert.equal(answer.body, event, label);
          assert.equal((await send(p)).reused, true, label);
        } finally {
          await p.destroy();
          await server.close();
        }
      }
    }
  });

  test('10,000 queued requests aborted from onRequestStart as the connection frees: all told, no stack overflow', async () => {
    const { server, firstArrived, held } = await holdingFirst();
    const p = pool(server.url, 1);
    try {
      const first = send(p);
      await firstArrived;
      // As http.ts's timeout leaves them: finished while queued, aborted once they start. The
      // recursive drain this replaced overflowed the stack between 3,000 and 5,000.
      const timeout = new Error('timeout');
      let started = 0;
      let failed = 0;
      const options = { path: '/', method: 'POST', body: '{}', headers: {} };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          started++;
          c.abort(timeout);
        },
        onResponseError(_c, err) {
          if (err === timeout) failed++;
        },
      };
      for (let i = 0; i < 10_000; i++) p.dispatch(options, handler);
      held()?.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx');
      assert.equal((await first).body, 'x');
      assert.deepEqual([started, failed], [10_000, 10_000]);
      const live = await send(p);
      assert.deepEqual([live.body, live.error, live.reused], ['x', undefined, true]);
      assert.deepEqual([server.accepted(), server.requests()], [1, 2]);
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('a 1xx then a close: the request was answered, never to be resent; a close before any byte: not', async () => {
    const server = await rawServer((socket, i) => {
      if (i === 1) socket.end('HTTP/1.1 100 Continue\r\n\r\n');
      else if (i === 3) socket.end();
      else socket.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx');
    });
    const p = pool(server.url);
    try {
      const ok = await send(p);
      assert.deepEqual([ok.body, ok.answered], ['x', true]);
      const continued = await send(p);
      assert.deepEqual(
        [continued.error?.code, continued.reused, continued.answered],
        ['UND_ERR_SOCKET', true, true],
      );
      assert.equal((await send(p)).reused, false, 'a new connection after the close');
      const cut = await send(p);
      assert.deepEqual(
        [cut.error?.code, cut.reused, cut.answered],
        ['UND_ERR_SOCKET', true, false],
      );
    } finally {
      await p.destroy();
      await server.close();
    }
  });

  test('a head over 64 KiB is refused however it is split into reads; one within is accepted', async () => {
    const cases: [string, number, boolean][] = [
      ['60 KB', 60_000, true],
      ['64 KiB', 64 * 1024, true],
      ['64 KiB + 1', 64 * 1024 + 1, false],
      ['80 KB', 80_000, false],
    ];
    for (const [name, size, accepted] of cases) {
      const bytes = bigHead(size);
      assert.equal(bytes.length, size + 1, name);
      for (const split of [false, true]) {
        const server = await rawServer(async (socket) => {
          if (!split) return void socket.write(bytes);
          for (let at = 0; at < bytes.length; at += 1000) {
            await new Promise<void>((resolve) =>
              socket.write(bytes.slice(at, at + 1000), 'latin1', () => resolve()),
            );
            await new Promise((resolve) => setImmediate(resolve));
          }
        });
        const p = pool(server.url);
        const label = `${name}, split ${split}`;
        try {
          const answer = await send(p);
          if (accepted) assert.deepEqual([answer.error, answer.body], [undefined, 'x'], label);
          else assert.equal(answer.error?.code, 'HPE_HEADER_OVERFLOW', label);
        } finally {
          await p.destroy();
          await server.close();
        }
      }
    }
  });

  test('bytes after a complete answer, in its read or a later one, close the connection', async () => {
    for (const later of [false, true]) {
      let closed: () => void = () => {};
      const firstClosed = new Promise<void>((resolve) => {
        closed = resolve;
      });
      const server = await rawServer((socket, i) => {
        const answer = 'HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx';
        if (i > 0) return void socket.write(answer);
        socket.once('close', () => closed());
        if (later) socket.write(answer, () => setTimeout(() => socket.write('junk'), 5));
        else socket.write(`${answer}junk`);
      });
      const p = pool(server.url);
      try {
        assert.deepEqual((await send(p)).body, 'x');
        await firstClosed;
        const next = await send(p);
        assert.deepEqual([next.body, next.error, next.reused], ['x', undefined, false], `${later}`);
      } finally {
        await p.destroy();
        await server.close();
      }
    }
  });

  test('requests aborted while they wait for a connection leave the queue at once, told, never started; the rest keep their order', async () => {
    const { server, firstArrived, held } = await holdingFirst();
    const p = pool(server.url, 1);
    const inside = p as unknown as PoolInside;
    try {
      const first = send(p);
      await firstArrived;
      // Enough to have the queue drop its taken slots along the way, holes among them.
      const count = 3000;
      const started: number[] = [];
      const errors: string[][] = Array.from({ length: count }, () => []);
      let waiting: (Dispatcher.DispatchController | undefined)[] = [];
      for (let i = 0; i < count; i++) {
        p.dispatch(
          { path: '/', method: 'POST', body: '{}', headers: {} },
          {
            onRequestStart(c) {
              started.push(i);
              // Past the queue's first trim of its taken slots: a place still found right.
              if (i === 2000) waiting[2501]?.abort(new Error('withdrawn late'));
              c.abort(new Error('timeout'));
            },
            onResponseError: (_c, err) => errors[i].push(err.message),
          },
        );
      }
      const live = send(p);
      // The handler has no controller before onRequestStart: take them from the pool's queue.
      waiting = inside.queue.items.filter((c) => c !== undefined);
      assert.equal(waiting.length, count + 1);
      for (let i = 0; i < count; i += 3) waiting[i]?.abort(new Error('withdrawn'));
      assert.equal(inside.queue.length, count + 1 - count / 3);
      assert.deepEqual(errors[0], ['withdrawn'], 'told at once');
      held()?.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx');
      assert.equal((await first).body, 'x');
      const answer = await live;
      assert.deepEqual([answer.body, answer.error, answer.reused], ['x', undefined, true]);
      const kept = Array.from({ length: count }, (_, i) => i).filter(
        (i) => i % 3 !== 0 && i !== 2501,
      );
      assert.deepEqual(started, kept, 'the others start once each, in order');
      for (let i = 0; i < count; i++) {
        const error = i % 3 === 0 ? 'withdrawn' : i === 2501 ? 'withdrawn late' : 'timeout';
        assert.deepEqual(errors[i], [error], `request ${i}`);
      }
      assert.deepEqual([inside.queue.length, server.requests()], [0, 2]);
    } finally {
      await p.destroy();
      await server.close();
    }
  });
});

/**
 * A raw TCP server on a thread of its own, so that this one can block (`untilWritten`) until all
 * it wrote is in this thread's sockets: the next poll then finds every read ready at once, as
 * under load. `code` runs there with `serve(onConnection)` to listen, `written()` to say all is
 * written, and `parentPort`.
 */
async function threadServer(code: string) {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { createServer } = require('node:net');
    const { parentPort, workerData } = require('node:worker_threads');
    const written = () => {
      Atomics.store(workerData.flag, 0, 1);
      Atomics.notify(workerData.flag, 0);
    };
    const serve = (onConnection) => {
      const server = createServer(onConnection);
      server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
    };
    ${code}`,
    { eval: true, workerData: { flag } },
  );
  const port = await new Promise<number>((resolve) => worker.once('message', resolve));
  return {
    worker,
    port,
    url: `http://127.0.0.1:${port}`,
    untilWritten: () => Atomics.wait(flag, 0, 0, 10_000),
  };
}

describe('H1Pool reads that arrive in one wake', () => {
  test("they are stamped before any is parsed: a slow handler never delays the other's stamp", async () => {
    const server = await threadServer(
      `const waiting = [];
      serve((socket) => {
        socket.once('data', () => {
          waiting.push(socket);
          if (waiting.length < 2) return;
          let left = 2;
          for (const s of waiting) {
            s.write('HTTP/1.1 200 OK\\r\\ncontent-length: 1\\r\\n\\r\\nx', () => {
              if (--left === 0) written();
            });
          }
        });
      });`,
    );
    const p = pool(server.url, 2);
    try {
      assert.equal(await p.warm(2), 2);
      const seen: { stampMs: number; parsedAtMs: number }[] = [];
      const answers = [0, 1].map(
        () =>
          new Promise<void>((resolve, reject) => {
            p.dispatch(
              { path: '/', method: 'POST', body: '{}', headers: {} },
              {
                onResponseData() {
                  seen.push({ stampMs: p.readAtMs, parsedAtMs: performance.now() });
                  // The first answer parsed holds the thread, as a burst of work would.
                  if (seen.length === 1) while (performance.now() - seen[0].parsedAtMs < 40);
                },
                onResponseEnd: () => resolve(),
                onResponseError: (_c, err) => reject(err),
              },
            );
          }),
      );
      assert.equal(server.untilWritten(), 'ok', 'the server wrote both answers');
      await Promise.all(answers);
      assert.equal(seen.length, 2);
      const [first, second] = seen;
      assert.ok(second.parsedAtMs - first.parsedAtMs >= 40, 'the second was parsed after the hold');
      assert.ok(first.stampMs <= first.parsedAtMs && second.stampMs <= first.parsedAtMs);
      assert.ok(second.stampMs - first.stampMs < 20, `stamps ${first.stampMs}, ${second.stampMs}`);
    } finally {
      await p.destroy();
      await server.worker.terminate();
    }
  });

  test('an answer read before its connection fails is parsed first: the request completes', async () => {
    // The peer's reset, as the pool sees it: its socket fails in the same wake as the read that
    // brought the whole answer, before that read is parsed. A second connection, readable in that
    // wake after the pool's, fails the pool's socket from its 'data' handler.
    const server = await threadServer(
      `let helper;
      serve((socket) => {
        socket.once('data', (data) => {
          if (data.toString() === 'helper') {
            helper = socket;
            parentPort.postMessage('helper');
            return;
          }
          socket.write('HTTP/1.1 200 OK\\r\\ncontent-length: 5\\r\\n\\r\\nhello', () =>
            helper.write('x', written),
          );
        });
      });`,
    );
    const helper = connect({ port: server.port, host: '127.0.0.1' });
    helper.write('helper');
    await new Promise((resolve) => server.worker.once('message', resolve));
    const p = pool(server.url, 1);
    try {
      assert.equal(await p.warm(1), 1);
      let socket: Socket | undefined;
      helper.on('data', () =>
        socket?.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })),
      );
      const answer = new Promise<{ body: string; error?: string }>((resolve) => {
        let body = '';
        p.dispatch(
          { path: '/', method: 'POST', body: '{}', headers: {} },
          {
            onRequestStart(c) {
              socket = (c as unknown as { connection: { socket: Socket } }).connection.socket;
            },
            onResponseData: (_c, chunk) => {
              body += chunk.toString();
            },
            onResponseEnd: () => resolve({ body }),
            onResponseError: (_c, err) => resolve({ body, error: err.message }),
          },
        );
      });
      assert.equal(server.untilWritten(), 'ok', 'the server wrote both');
      assert.deepEqual(await answer, { body: 'hello' });
    } finally {
      helper.destroy();
      await p.destroy();
      await server.worker.terminate();
    }
  });
});

/**
 * A server that holds its first request unanswered (`held()` is its socket once `firstArrived`)
 * and answers every later one with one byte, `x`.
 */
async function holdingFirst() {
  let socket: Socket | undefined;
  let arrived: () => void = () => {};
  const firstArrived = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = await rawServer((s, i) => {
    if (i === 0) {
      socket = s;
      arrived();
    } else s.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx');
  });
  return { server, firstArrived, held: () => socket };
}

describe('H1Pool reads waiting past the cap', () => {
  test('over 4 MiB waiting, the earlier reads are parsed at once, the rest later: each whole, in order', async () => {
    const pool = new H1Pool('http://127.0.0.1:1', { connections: 1, keepAliveTimeoutMs: 1000 });
    // Stand-ins for connections: defer only asks whether one was dropped and hands it its bytes.
    // `during`: the read being deferred when this one was parsed (-1: at the loop's turn).
    const parsed: { id: number; fill: number; length: number; during: number }[] = [];
    let during = 0;
    const reader = (id: number) => ({
      dropped: false,
      read(buffer: Buffer, at: number, end: number) {
        const fill = buffer[at];
        // A read's bytes reach its reader unchanged, however the pending buffer grew or reset.
        assert.ok(
          buffer.subarray(at, end).every((b) => b === fill),
          `read ${id} intact`,
        );
        parsed.push({ id, fill, length: end - at, during });
      },
    });
    const READ = 64 * 1024;
    const reads = 70; // 4.375 MiB: the 65th read passes the 4 MiB cap
    const shared = Buffer.alloc(READ);
    for (let id = 0; id < reads; id++) {
      shared.fill(id % 251); // the socket's read buffer, reused by every read
      during = id;
      pool.defer(reader(id) as never, shared, READ);
    }
    during = -1;
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(
      parsed.map((p) => p.id),
      Array.from({ length: reads }, (_, i) => i),
    );
    assert.ok(parsed.every((p) => p.fill === p.id % 251 && p.length === READ));
    // No more than 4 MiB ever waited, and no less was flushed: the 64 reads that filled it were
    // parsed when the 65th came, and the rest waited for the loop's turn.
    assert.deepEqual(
      parsed.map((p) => p.during),
      Array.from({ length: reads }, (_, i) => (i < 64 ? 64 : -1)),
    );
    assert.equal(pool.reads, reads);
    await pool.destroy();
  });
});
