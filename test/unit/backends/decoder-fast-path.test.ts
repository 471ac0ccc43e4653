import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createParser } from 'eventsource-parser';
import fc from 'fast-check';
import { createDecoder } from '../../../src/backends/decoder.js';
import { openaiStreamProtocol } from '../../../src/backends/openai.js';
import { openaiChunkScanner } from '../../../src/backends/openaiScan.js';
import { SseFramer } from '../../../src/backends/sse.js';
import { Timeline } from '../../../src/backends/timeline.js';
import type { Endpoint } from '../../../src/backends/types.js';

// JSON values with their objects as entry lists, so that key order and keys written twice are
// the generator's to choose; `raw` is a number written as it is (1E2, -0, 0.50).
type Json =
  | null
  | boolean
  | number
  | string
  | Json[]
  | { entries: [string, Json][] }
  | { raw: string };

/**
 * Writes JSON the way servers may: `space` wherever JSON allows it, every string character past
 * ASCII as a \\u escape (`escapeAll`), or tabs and \\u0001 raw inside strings, which JSON.parse
 * refuses (`rawControl`).
 */
function write(
  value: Json,
  style: { space: string; escapeAll: boolean; rawControl?: boolean },
): string {
  const s = style.space;
  if (value === null || typeof value === 'boolean' || typeof value === 'number') {
    return JSON.stringify(value);
  }
  if (typeof value === 'string') {
    const plain = JSON.stringify(value);
    if (style.rawControl)
      return plain.replace(/\\t|\\u0001/g, (c) => (c === '\\t' ? '\t' : '\u0001'));
    if (!style.escapeAll) return plain;
    // \u escapes for everything past ASCII (é as \u00e9, an emoji as its surrogate pair), \/.
    return plain.replace(/[^\x20-\x7e]|\//g, (c) =>
      c === '/' ? '\\/' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
  }
  if (Array.isArray(value))
    return `[${s}${value.map((v) => write(v, style)).join(`${s},${s}`)}${s}]`;
  if ('raw' in value) return value.raw;
  const members = value.entries.map(([k, v]) => `${JSON.stringify(k)}${s}:${s}${write(v, style)}`);
  return `{${s}${members.join(`${s},${s}`)}${s}}`;
}

const obj = (entries: [string, Json][]): Json => ({ entries });

/** A field present 4 times in 5. */
const often = (arb: fc.Arbitrary<Json>) => fc.option(arb, { nil: undefined, freq: 5 });
/** A field present 1 time in 25 (each one sends the chunk to the full path). */
const rarely = (arb: fc.Arbitrary<Json>) =>
  fc.oneof({ weight: 24, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });

/** Entries in any order, each present or not; 1 object in 20 has a key written twice. */
function entries(fields: Record<string, fc.Arbitrary<Json | undefined>>): fc.Arbitrary<Json> {
  const keys = Object.keys(fields);
  return fc
    .tuple(
      fc.tuple(...keys.map((k) => fields[k])),
      fc.oneof({ weight: 19, arbitrary: fc.constant(-1) }, fc.nat()),
    )
    .chain(([values, twice]) => {
      const list: [string, Json][] = [];
      keys.forEach((k, i) => {
        const v = values[i];
        if (v !== undefined) list.push([k, v]);
      });
      if (twice >= 0 && list.length > 0) list.push([list[twice % list.length][0], null]);
      return fc.shuffledSubarray(list, { minLength: list.length, maxLength: list.length });
    })
    .map(obj);
}

const text = fc.oneof(
  fc.constantFrom(
    ' the',
    '\n',
    '\n\n',
    ' "quoted"',
    'back\\slash',
    ' café',
    ' 😀',
    '\u2028',
    '/',
    '',
  ),
  fc.constantFrom('\ud800', '\udfff x', '\t', '\u0001'),
  fc.string({ unit: 'binary', maxLength: 6 }),
);
// Values the scanner leaves to the full path come 1 time in 10 or so, so most chunks are its own.
const count: fc.Arbitrary<Json> = fc.oneof(
  { weight: 60, arbitrary: fc.nat({ max: 300 }) },
  fc.constantFrom<Json>(null, 0, 2 ** 40, 2 ** 53, -1, 1.5, '12', { raw: '1E2' }, { raw: '-0' }),
);
const stringish: fc.Arbitrary<Json> = fc.oneof(
  { weight: 30, arbitrary: text },
  fc.constant(null),
  fc.constant(5),
);
const toolCalls: fc.Arbitrary<Json> = fc.oneof(
  { weight: 15, arbitrary: fc.constantFrom<Json>(null, []) },
  fc.constant<Json>([
    obj([
      ['index', 0],
      ['id', 'call_1'],
      ['type', 'function'],
      [
        'function',
        obj([
          ['name', 'get_weather'],
          ['arguments', '{"city":'],
        ]),
      ],
    ]),
  ]),
);
const delta = entries({
  role: often(fc.constantFrom<Json>('assistant', null)),
  content: often(stringish),
  reasoning_content: often(stringish),
  reasoning: often(stringish),
  tool_calls: often(toolCalls),
});
/** A choice of the endpoint's (chat: `delta`, completions: `text`; now and then the other's). */
const choice = (endpoint: Endpoint) =>
  entries({
    index: often(fc.constantFrom<Json>(0, 1)),
    delta: (endpoint === 'chat' ? often : rarely)(
      fc.oneof({ weight: 9, arbitrary: delta }, fc.constant(null)),
    ),
    text: (endpoint === 'chat' ? rarely : often)(stringish),
    logprobs: often(fc.constant(null)),
    finish_reason: often(
      fc.constantFrom<Json>(null, null, null, null, null, 'length', 'stop', '', 3),
    ),
    stop_reason: often(fc.constantFrom<Json>(null, 128001, 'eos')),
    matched_stop: often(fc.constantFrom<Json>(null, 2)),
  });
const usage = entries({
  prompt_tokens: often(count),
  completion_tokens: often(count),
  total_tokens: often(count),
  completion_tokens_details: rarely(fc.constant(obj([['reasoning_tokens', 3]]))),
  prompt_tokens_details: often(
    fc.constantFrom<Json>(
      null,
      null,
      null,
      obj([['cached_tokens', 5]]),
      obj([['cached_tokens', -1]]),
    ),
  ),
});
const chunk = (endpoint: Endpoint) =>
  entries({
    id: often(fc.constantFrom<Json>('chatcmpl-8f2a', 'cmpl-1')),
    object: often(fc.constantFrom<Json>('chat.completion.chunk', 'text_completion')),
    created: often(fc.constantFrom<Json>(1_733_100_000, { raw: '1.7331E9' }, { raw: '-0' })),
    model: often(fc.constantFrom<Json>('meta-llama/Llama-3.1-8B', 'qwen')),
    choices: often(
      fc.oneof(
        { weight: 12, arbitrary: choice(endpoint).map((c): Json => [c]) },
        fc.constant<Json>([]),
        fc.tuple(choice(endpoint), choice(endpoint)).map((c): Json => c),
        fc.constant(null),
      ),
    ),
    usage: often(fc.oneof(usage, fc.constant(null))),
    system_fingerprint: often(fc.constantFrom<Json>('b5100', null)),
    error: rarely(
      fc.constantFrom<Json>(
        'boom',
        obj([
          ['message', 'boom'],
          ['code', 500],
        ]),
      ),
    ),
    timings: rarely(
      fc.constant(
        obj([
          ['prompt_n', 4],
          ['predicted_ms', 9.5],
        ]),
      ),
    ),
    extra: rarely(fc.constantFrom<Json>(true, false, obj([['a', 1]]), [1, 2])),
  });

/** One event's data: a chunk written in some style, now and then broken or not JSON at all. */
const eventData = (endpoint: Endpoint) =>
  fc.oneof(
    {
      weight: 12,
      arbitrary: fc
        .tuple(chunk(endpoint), fc.constantFrom('', ' ', '\t', '  '), fc.boolean(), fc.nat(9))
        .map(([c, space, escapeAll, raw]) => write(c, { space, escapeAll, rawControl: raw === 0 })),
    },
    fc.constantFrom('[DONE]', '[1]', '"text"', 'not json', ''),
    fc
      .tuple(chunk(endpoint), fc.nat(), fc.constantFrom('', ' x', '}', ','))
      .map(([c, cut, tail]) => {
        const json = write(c, { space: '', escapeAll: false });
        return json.slice(0, cut % (json.length + 1)) + tail;
      }),
  );

/** A chunk's texts (`content`, `text`) replaced by `value`, and its numbers by `number`. */
function withValues(json: Json, value: string, number: Json): Json {
  if (json === null || typeof json !== 'object') return json;
  if (Array.isArray(json)) return json.map((j) => withValues(j, value, number));
  if ('raw' in json) return json;
  return obj(
    json.entries.map(([k, v]): [string, Json] => {
      if ((k === 'content' || k === 'text') && typeof v === 'string') return [k, value];
      if (typeof v === 'number' || (v !== null && typeof v === 'object' && 'raw' in v)) {
        return [k, number];
      }
      return [k, withValues(v, value, number)];
    }),
  );
}

/**
 * Chunks alike but for their text and numbers, as a server writes one answer's tokens (now and
 * then a count the scanner leaves, or text after the chunk).
 */
const alike = (endpoint: Endpoint) =>
  fc
    .tuple(
      chunk(endpoint),
      fc.array(fc.tuple(text, fc.oneof({ weight: 4, arbitrary: fc.constant(7) }, count)), {
        minLength: 2,
        maxLength: 6,
      }),
      fc.boolean(),
      fc.constantFrom('', '', '', ' x', ' '),
    )
    .map(([c, values, escapeAll, after]) =>
      values.map(([t, n], i) => {
        const json = write(withValues(c, t, n), { space: '', escapeAll });
        return i === values.length - 1 ? json + after : json;
      }),
    );

/** `text` in reads, cut at the `cuts` (modulo its length). */
function cutInto(text: string, cuts: number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const reads: string[] = [];
  let from = 0;
  for (const cut of at) {
    reads.push(text.slice(from, cut));
    from = cut;
  }
  reads.push(text.slice(from));
  return reads;
}

/** An SSE body of those events, cut into reads at arbitrary points, maybe cut short. */
const stream = (endpoint: Endpoint) =>
  fc
    .tuple(
      fc
        .array(
          fc.oneof(
            eventData(endpoint).map((d) => [d]),
            alike(endpoint),
          ),
          { maxLength: 5 },
        )
        .map((runs) => runs.flat()),
      fc.array(fc.nat(), { maxLength: 10 }),
      fc.boolean(),
    )
    .map(([events, cuts, cutShort]) => {
      let body = events.map((d) => `data: ${d}\n\n`).join('');
      if (cutShort && body.length > 0)
        body = body.slice(0, body.length - 1 - ((cuts[0] ?? 0) % body.length));
      return cutInto(body, cuts);
    });

/** How many events the scanner read itself, and how many it left to the full path. */
const scanned = { fast: 0, full: 0 };

/** Everything a decoder tells its caller about a stream, read by one path. */
function decodeAll(
  endpoint: Endpoint,
  reads: string[],
  fast: boolean,
  limit: number | undefined,
  capture: boolean,
) {
  // A copy: the protocol is one object every stream shares.
  const protocol = { ...openaiStreamProtocol(endpoint) };
  const scan = protocol.scan;
  if (!fast || !scan) delete protocol.scan;
  else {
    protocol.scan = (text, start, end, t) => {
      const taken = scan(text, start, end, t);
      scanned[taken ? 'fast' : 'full']++;
      return taken;
    };
  }
  const decoder = createDecoder(protocol, 100, limit, capture ? 2 ** 24 : undefined);
  const fed = reads.map((read, i) => decoder.feed(read, 1000 + i * 7));
  decoder.end(5000);
  return {
    fed,
    fault: decoder.fault,
    done: decoder.done,
    eventCount: decoder.eventCount,
    decoded: decoder.finish(),
  };
}

describe('OpenAI field scanner', () => {
  it('decodes every generated chunk stream exactly as JSON.parse and parseChunk do', () => {
    fc.assert(
      fc.property(
        fc
          .constantFrom<Endpoint>('chat', 'completions')
          .chain((endpoint) => fc.tuple(fc.constant(endpoint), stream(endpoint))),
        fc.constantFrom(undefined, 2, 1000),
        fc.boolean(),
        ([endpoint, reads], limit, capture) => {
          assert.deepEqual(
            decodeAll(endpoint, reads, true, limit, capture),
            decodeAll(endpoint, reads, false, limit, capture),
          );
        },
      ),
      { numRuns: 3000 },
    );
    // The property holds the scanner to the full path only where it reads events itself.
    assert.ok(scanned.fast > 1000, `${scanned.fast} read, ${scanned.full} left`);
  });

  it('reads the common chunks of vLLM, SGLang and llama.cpp itself, and leaves the unusual ones', () => {
    const t = new Timeline(0);
    const common = [
      '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}',
      '{"id":"c","choices":[{"index":0,"delta":{"content":"\\n\\"x\\" caf\\u00e9 \\ud83d\\ude00"},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2}}',
      '{"id":"a3f1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":" w","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}',
      '{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" w"}}],"created":1,"id":"chatcmpl-Zq","model":"gpt-3.5-turbo","system_fingerprint":"b5100","object":"chat.completion.chunk"}',
      '{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":128,"total_tokens":140}}',
      ' { "choices" : [ { "delta" : { "reasoning" : "hmm" } } ] } ',
    ];
    const scanChatChunk = openaiChunkScanner(true);
    for (const data of common) assert.equal(scanChatChunk(data, 0, data.length, t), true, data);
    const completion =
      '{"choices":[{"index":0,"text":" w","logprobs":null,"finish_reason":null,"stop_reason":null}]}';
    assert.equal(openaiChunkScanner(false)(completion, 0, completion.length, t), true);
    const events = t.eventCount;
    const unusual = [
      '{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}',
      '{"error":{"message":"boom","code":500}}',
      '{"choices":[{"delta":{}}],"timings":{"prompt_n":4}}',
      '{"choices":[{"delta":{"content":"a","content":"b"}}]}',
      '{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}',
      '{"choices":[],"usage":{"completion_tokens":1.5}}',
      '{"choices":[{"delta":{"content":"a"}}]} x',
      '{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":8}}}',
      '{"choices":[{"delta":{"c\\u006fntent":"a"}}]}',
    ];
    for (const data of unusual) assert.equal(scanChatChunk(data, 0, data.length, t), false, data);
    // What it left, it left untouched.
    assert.equal(t.eventCount, events);
  });

  it("keeps usage's cached prompt tokens, which the prefix-cache warning reads", () => {
    const body = [
      '{"choices":[{"index":0,"delta":{"content":" w"},"finish_reason":null}]}',
      '{"choices":[{"index":0,"delta":{"content":" x"},"finish_reason":"length"}]}',
      '{"choices":[],"usage":{"prompt_tokens":128,"completion_tokens":2,"total_tokens":130,"prompt_tokens_details":{"cached_tokens":96}}}',
    ]
      .map((d) => `data: ${d}\n\n`)
      .join('');
    for (const fast of [true, false]) {
      const { decoded } = decodeAll('chat', [body, 'data: [DONE]\n\n'], fast, undefined, false);
      assert.equal(decoded.inputTokens, 128);
      assert.equal(decoded.cachedInputTokens, 96);
    }
    // Null details (vLLM without --enable-prompt-tokens-details) say nothing.
    const none = body.replace('{"cached_tokens":96}', 'null');
    assert.equal(
      decodeAll('chat', [none], true, undefined, false).decoded.cachedInputTokens,
      undefined,
    );
  });
});

/** Every event's data as eventsource-parser reads the body, with the decoder's end flush. */
function referenceData(reads: string[]): string[] {
  const out: string[] = [];
  const parser = createParser({ onEvent: (event) => out.push(event.data) });
  for (const read of reads) parser.feed(read);
  parser.feed('\n\n');
  return out;
}

function framedData(reads: string[]): string[] {
  const out: string[] = [];
  const framer = new SseFramer({
    onSseData: (text, start, end) => out.push(text.slice(start, end)),
  });
  for (const read of reads) framer.feed(read);
  framer.feed('\n\n');
  return out;
}

describe('SSE framing', () => {
  const line = fc.oneof(
    fc.constantFrom(
      'data: {"a":1}',
      'data:{"a":1}',
      'data',
      'data:',
      'data: ',
      'data:  two spaces',
    ),
    fc.constantFrom(': a comment', 'event: message', 'id: 7', 'retry: 100', 'retry: x', 'foo: bar'),
    fc.constantFrom('datax: no', 'data : spaced', 'DATA: upper', ''),
    fc.string({ unit: 'binary', maxLength: 5 }).map((s) => `data: ${s.replace(/[\r\n]/g, '')}`),
  );
  const body = fc
    .array(fc.tuple(line, fc.constantFrom('\n', '\r\n', '\r')), { maxLength: 12 })
    .map((lines) => lines.map(([l, end]) => l + end).join(''));

  it('gives every event the data eventsource-parser gives, however the body is cut into reads', () => {
    fc.assert(
      fc.property(body, fc.array(fc.nat(), { maxLength: 8 }), (text, cuts) => {
        const reads = cutInto(text, cuts);
        assert.deepEqual(framedData(reads), referenceData(reads));
      }),
      { numRuns: 3000 },
    );
  });

  it('drops a byte order mark at the stream start only', () => {
    assert.deepEqual(framedData(['\ufeffdata: 1\n\n', '\ufeffdata: 2\n\n']), ['1']);
    assert.deepEqual(framedData(['', '\ufeffdata: 1\r\n\r\n']), ['1']);
  });

  it('ends a line at a CR that closes a read, without waiting for the next read', () => {
    const out: string[] = [];
    const framer = new SseFramer({
      onSseData: (text, start, end) => out.push(text.slice(start, end)),
    });
    framer.feed('data: 1\r\r');
    assert.deepEqual(out, ['1']);
    framer.feed('\ndata: 2\r\n\r\n');
    assert.deepEqual(out, ['1', '2']);
  });
});
