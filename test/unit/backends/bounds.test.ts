/**
 * Issue 27's bounds and redaction, at the unit level: the SSE framer's event bound, the answer
 * capture's bound and tool-call ids, the event cap, and secrets taken out of server text.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createDecoder } from '../../../src/backends/decoder.js';
import { openaiStreamProtocol } from '../../../src/backends/openai.js';
import { secretValues, withoutSecrets } from '../../../src/backends/request.js';
import { SseFramer } from '../../../src/backends/sse.js';
import { AnswerCapture, Timeline, utf8Bytes } from '../../../src/backends/timeline.js';

describe('SseFramer: one event past its bound stops the framer', () => {
  const frame = (max: number, pieces: string[]) => {
    const events: string[] = [];
    const framer = new SseFramer(
      { onSseData: (text, start, end) => events.push(text.slice(start, end)) },
      max,
    );
    for (const piece of pieces) framer.feed(piece);
    return { events, overflowed: framer.overflowed };
  };

  test('a line that never ends, in many reads', () => {
    const { events, overflowed } = frame(100, ['data: a\n\n', 'data: ', ...Array(30).fill('xxxx')]);
    assert.deepEqual(events, ['a']);
    assert.equal(overflowed, true);
  });

  test('many data lines that never meet a blank line', () => {
    const { events, overflowed } = frame(100, Array(60).fill('data: abc\n'));
    assert.deepEqual(events, []);
    assert.equal(overflowed, true);
  });

  test('events up to the bound pass, whatever came before them (no stale data length)', () => {
    const long = `data: ${'y'.repeat(90)}\n\n`;
    const { events, overflowed } = frame(100, [long, long, 'data: z\n', '\n']);
    assert.equal(events.length, 3);
    assert.equal(overflowed, false);
  });
});

describe('Timeline: the event cap and the captured answer', () => {
  test('events past 1,024 + 8 per allowed token are a too_large fault, the first ones kept', () => {
    const t = new Timeline(0, 4);
    for (let i = 0; i < 2000; i++) t.event({ content: 'a' });
    assert.equal(t.eventCount, 1024 + 32);
    assert.equal(t.fault?.kind, 'too_large');
    assert.equal(t.finish().outputTokens, 1056);
  });

  test('no limit given: at most 2^20 events', () => {
    const t = new Timeline(0);
    for (let i = 0; i < 2 ** 20; i++) t.record(0, 0, 0);
    assert.equal(t.fault?.kind, undefined);
    t.record(0, 0, 0);
    assert.equal(t.fault?.kind, 'too_large');
  });

  test('captured text past its bound is a too_large fault (content and tool calls count)', () => {
    const decoder = createDecoder(openaiStreamProtocol('chat'), 0, 10_000, 50);
    const piece = (delta: unknown) => `data: ${JSON.stringify({ choices: [{ delta }] })}\n\n`;
    decoder.feed(piece({ content: 'x'.repeat(30) }), 1);
    decoder.feed(
      piece({ tool_calls: [{ index: 0, function: { name: 'f', arguments: 'y'.repeat(10) } }] }),
      2,
    );
    assert.equal(decoder.fault?.kind, undefined);
    decoder.feed(piece({ tool_calls: [{ index: 0, function: { arguments: 'z'.repeat(10) } }] }), 3);
    assert.equal(decoder.fault?.kind, 'too_large');
    assert.equal(decoder.eventCount, 2);
  });

  test('without capture nothing is kept and no text bound applies', () => {
    const t = new Timeline(0, 100);
    t.event({ content: 'x'.repeat(1000) });
    assert.equal(t.capture, undefined);
    assert.equal(t.fault, undefined);
  });
});

describe('AnswerCapture', () => {
  test("calls without an id keep '' (the workload names them); pieces join by index", () => {
    const c = new AnswerCapture();
    c.addToolCalls([{ index: 1, function: { name: 'b', arguments: '{' } }]);
    c.addToolCalls([{ index: 0, id: 'x', function: { name: 'a', arguments: '{}' } }]);
    c.addToolCalls([{ index: 1, function: { arguments: '}' } }]);
    c.addToolCalls({ function: { name: 'c', arguments: { q: 1 } } });
    const { toolCalls } = c.answer();
    assert.deepEqual(
      toolCalls.map((t) => [t.id, t.function.name, t.function.arguments]),
      [
        ['x', 'a', '{}'],
        ['', 'c', '{"q":1}'],
        ['', 'b', '{}'],
      ],
    );
    assert.equal(c.bytes, 'a{}b{}c{"q":1}'.length);
  });

  test('100,000 calls with their own indices take linear time', () => {
    const c = new AnswerCapture();
    const started = performance.now();
    for (let i = 0; i < 100_000; i++) {
      c.addToolCalls([{ index: i, function: { name: 'f', arguments: '{}' } }]);
    }
    assert.equal(c.answer().toolCalls.length, 100_000);
    // Quadratic (a list searched per piece) took about 10 s here.
    assert.ok(performance.now() - started < 5000);
  });
});

describe('secrets a server echoes', () => {
  const secrets = secretValues(
    {
      'X-Api-Key': 'abcdefgh12345',
      Authorization: 'Bearer tok-0123456789',
      'x-tenant': 'tenant-visible-1',
      Cookie: 'short',
    },
    'sk-the-api-key-0001',
  );

  test('the key and credential header values of 8 characters or more, Bearer token alone too', () => {
    assert.deepEqual(
      [...secrets].sort(),
      ['Bearer tok-0123456789', 'abcdefgh12345', 'sk-the-api-key-0001', 'tok-0123456789'].sort(),
    );
  });

  test('every occurrence is replaced; a clipped tail that starts a secret is masked', () => {
    assert.equal(
      withoutSecrets('bad key sk-the-api-key-0001, again sk-the-api-key-0001', secrets),
      'bad key <redacted>, again <redacted>',
    );
    assert.equal(withoutSecrets('denied: Bearer tok-0123456789', secrets), 'denied: <redacted>');
    assert.equal(
      withoutSecrets(`${'e'.repeat(20)}sk-the-a...`, secrets),
      `${'e'.repeat(20)}<redacted>...`,
    );
    assert.equal(withoutSecrets('tenant-visible-1 is fine', secrets), 'tenant-visible-1 is fine');
    assert.equal(withoutSecrets('anything', []), 'anything');
  });
});

describe('utf8Bytes: the answer bound counts what Buffer.byteLength counts', () => {
  test('ASCII, Latin, CJK, emoji, lone surrogates and random strings', () => {
    const fixed = ['', 'a', 'é', '字', '😀', 'a字😀é', '\ud800', '\udc00x', '\ud800\ud800\udc00'];
    let seed = 7;
    const next = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    const random = Array.from({ length: 500 }, () =>
      String.fromCharCode(...Array.from({ length: next() % 40 }, () => next() % 0x10000)),
    );
    for (const text of [...fixed, ...random]) {
      assert.equal(utf8Bytes(text), Buffer.byteLength(text), JSON.stringify(text));
    }
  });

  test('a capture counts content and tool calls in bytes', () => {
    const c = new AnswerCapture();
    c.addContent('字😀');
    c.addToolCalls([{ index: 0, function: { name: 'é', arguments: '{}' } }]);
    assert.equal(c.bytes, 3 + 4 + 2 + 2);
    assert.equal(c.content, '字😀');
  });
});
