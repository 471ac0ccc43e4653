/**
 * H1Pool, the plain-HTTP/1.1 client that carries the load: framing (RFC 9112 section 6) byte by
 * byte, connection reuse and its limits, and the error codes a broken peer produces. Each case
 * has a raw TCP server write exactly the bytes under test.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { describe, test } from 'node:test';
import { H1Pool } from '../../../src/loadgen/h1.js';
import { rawServer } from '../../helpers/rawServer.js';

interface Answer {
  status?: number;
  headers?: Record<string, string | string[]>;
  body: string;
  error?: { code: string; message: string };
  reused?: boolean;
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
    const answer: Answer = { body: '' };
    const chunks: Buffer[] = [];
    pool.dispatch(
      { path: '/v1/x', method: 'POST', body, headers: { 'content-type': 'application/json' } },
      {
        onRequestStart(c) {
          answer.reused = (c as unknown as { reused: boolean }).reused;
        },
        onResponseStart(_c, status, headers) {
          answer.status = status;
          answer.headers = headers as Record<string, string | string[]>;
        },
        // The chunk is a view of the pool's read buffer: copy it, as the contract says.
        onResponseData: (_c, chunk) => chunks.push(Buffer.from(chunk)),
        onResponseEnd() {
          answer.body = Buffer.concat(chunks).toString('utf8');
          resolve(answer);
        },
        onResponseError(_c, err) {
          answer.body = Buffer.concat(chunks).toString('utf8');
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
