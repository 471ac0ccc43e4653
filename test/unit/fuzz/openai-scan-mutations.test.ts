/**
 * Issue 27: the OpenAI field scanner (src/backends/openaiScan.ts) against the full path
 * (`JSON.parse` + openai.ts `parseChunk`) on mutated chunks. A stream starts from a chunk as
 * vLLM, SGLang or llama.cpp write it (so the scanner takes it as its template) and goes on with
 * chunks alike but for their text and numbers (the template's matches) and mutants of those:
 * fields cut (the text cut at any character, a member or only its value removed), fields written
 * twice with other values (JSON.parse keeps the last), members of any object in another order,
 * other values in their place (nested objects, arrays, wrong types), and the same for nested
 * objects, then now and then a character-level cut, copy or escape.
 *
 * For every message: the scanner either records on the timeline exactly what the full path
 * records, or declines having touched nothing (and the full path reads it); when JSON.parse
 * refuses the message (the decoder's fault), the scanner declined it too. Each message sits
 * inside a longer text, as the SSE framer hands it over, so a read past its end shows.
 *
 * Seeded and quick in the suite; a longer run, with counts:
 *   SCAN_FUZZ_RUNS=1000000 [SCAN_FUZZ_SEED=n] node --import tsx --test test/unit/fuzz/openai-scan-mutations.test.ts
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { MessageParser, MessageScanner } from '../../../src/backends/decoder.js';
import { openaiStreamProtocol } from '../../../src/backends/openai.js';
import { sharedChunkScanner } from '../../../src/backends/openaiScan.js';
import { Timeline } from '../../../src/backends/timeline.js';
import type { Endpoint } from '../../../src/backends/types.js';

type Arb<T> = fc.Arbitrary<T>;

// JSON values with their objects as entry lists (order and keys written twice are ours to
// choose); `raw` is written as it is: a number as a server may write it, or '' for a value cut.
type Json = null | boolean | number | string | Json[] | Obj | { raw: string };
interface Obj {
  entries: [string, Json][];
}

const obj = (entries: [string, Json][]): Obj => ({ entries });
const isObj = (j: Json): j is Obj => j !== null && typeof j === 'object' && 'entries' in j;
const isNumber = (j: Json): boolean =>
  typeof j === 'number' || (j !== null && typeof j === 'object' && 'raw' in j && j.raw !== '');

interface Style {
  space: string;
  /** Every string character past ASCII as a \u escape, and `/` as `\/`. */
  escapeAll: boolean;
}

function write(value: Json, style: Style): string {
  const s = style.space;
  if (value === null || typeof value === 'boolean' || typeof value === 'number') {
    return JSON.stringify(value);
  }
  if (typeof value === 'string') {
    const plain = JSON.stringify(value);
    if (!style.escapeAll) return plain;
    return plain.replace(/[^\x20-\x7e]|\//g, (c) =>
      c === '/' ? '\\/' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
  }
  if (Array.isArray(value)) {
    return `[${s}${value.map((v) => write(v, style)).join(`${s},${s}`)}${s}]`;
  }
  if ('raw' in value) return value.raw;
  const members = value.entries.map(([k, v]) => `${JSON.stringify(k)}${s}:${s}${write(v, style)}`);
  return `{${s}${members.join(`${s},${s}`)}${s}}`;
}

// ---------------------------------------------------------------------------------------------
// Chunks as servers write them

const text: Arb<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(' the', ' a', '\n', ' "q"', 'back\\slash', ' café') },
  fc.constantFrom('', ' 😀', '\ud800', '\udfff x', '/', '\u2028', '\t', '\u0001'),
  fc.string({ unit: 'binary', maxLength: 5 }),
);
/** Numbers where a count or a time goes: mostly plain, now and then one the scanner leaves. */
const number: Arb<Json> = fc.oneof(
  { weight: 24, arbitrary: fc.nat({ max: 300 }) },
  fc.constantFrom<Json>(
    0,
    1_733_100_000,
    2 ** 40,
    2 ** 53,
    123456789012345,
    1234567890123456,
    -1,
    1.5,
    { raw: '1E2' },
    { raw: '-0' },
    { raw: '0.0' },
    { raw: '1e999' },
    { raw: '1e-7' },
  ),
);
/** A field present `weight` times for each time it is absent. */
const maybe = <T>(arb: Arb<T>, weight = 1): Arb<T | undefined> =>
  fc.oneof({ weight: 1, arbitrary: fc.constant(undefined) }, { weight, arbitrary: arb });
/** Entries in the order given, the undefined ones left out. */
const members = (list: [string, Json | undefined][]): Obj =>
  obj(list.filter((e): e is [string, Json] => e[1] !== undefined));

const delta: Arb<Json> = fc
  .record({
    role: maybe(fc.constantFrom<Json>('assistant', null)),
    content: fc.oneof({ weight: 9, arbitrary: text }, fc.constant(null)),
    reasoning_content: maybe(fc.oneof({ weight: 9, arbitrary: fc.constant(null) }, text)),
    reasoning: maybe(fc.oneof({ weight: 9, arbitrary: fc.constant(null) }, text)),
    tool_calls: maybe(fc.constantFrom<Json>(null, [])),
  })
  .map((d) =>
    members([
      ['role', d.role],
      ['content', d.content],
      ['reasoning_content', d.reasoning_content],
      ['reasoning', d.reasoning],
      ['tool_calls', d.tool_calls],
    ]),
  );
const finish = fc.oneof(
  { weight: 8, arbitrary: fc.constant<Json>(null) },
  fc.constantFrom<Json>('stop', 'length', ''),
);
const choice = (chat: boolean): Arb<Json> =>
  fc
    .record({
      body: chat ? delta : fc.oneof({ weight: 9, arbitrary: text }, fc.constant(null)),
      finish,
      stop: maybe(fc.constantFrom<Json>(null, 128001, 'eos')),
      matched: maybe(fc.constantFrom<Json>(null, 2)),
    })
    .map((c) =>
      members([
        ['index', 0],
        [chat ? 'delta' : 'text', c.body],
        ['logprobs', null],
        ['finish_reason', c.finish],
        ['stop_reason', c.stop],
        ['matched_stop', c.matched],
      ]),
    );
const usage: Arb<Json> = fc
  .record({
    prompt: number,
    completion: number,
    details: maybe(fc.constant<Json>(null), 1),
    promptDetails: maybe(fc.constant<Json>(null), 1),
  })
  .map((u) =>
    members([
      ['prompt_tokens', u.prompt],
      ['total_tokens', 17],
      ['completion_tokens', u.completion],
      ['completion_tokens_details', u.details],
      ['prompt_tokens_details', u.promptDetails],
    ]),
  );
/** A chunk of vLLM's (or SGLang's, llama.cpp's) stream: one choice, or none and the usage. */
const chunk = (chat: boolean): Arb<Json> =>
  fc
    .record({
      created: number,
      choices: fc.oneof(
        { weight: 6, arbitrary: choice(chat).map((c): Json => [c]) },
        fc.constant<Json>([]),
      ),
      usage: maybe(fc.oneof({ weight: 3, arbitrary: usage }, fc.constant(null)), 2),
      fingerprint: maybe(fc.constantFrom<Json>('b5100', null)),
    })
    .map((c) =>
      members([
        ['id', chat ? 'chatcmpl-8f2a' : 'cmpl-1'],
        ['object', chat ? 'chat.completion.chunk' : 'text_completion'],
        ['created', c.created],
        ['model', 'meta-llama/Llama-3.1-8B'],
        ['system_fingerprint', c.fingerprint],
        ['choices', c.choices],
        ['usage', c.usage],
      ]),
    );

/** The chunk with other texts (`content`, `text`) and numbers, in turn: a template's match. */
function alike(json: Json, texts: string[], numbers: Json[]): Json {
  let t = 0;
  let n = 0;
  const walk = (j: Json): Json => {
    if (Array.isArray(j)) return j.map(walk);
    if (isNumber(j)) return numbers[n++ % numbers.length];
    if (!isObj(j)) return j;
    return obj(
      j.entries.map(([k, v]): [string, Json] =>
        (k === 'content' || k === 'text') && typeof v === 'string'
          ? [k, texts[t++ % texts.length]]
          : [k, walk(v)],
      ),
    );
  };
  return walk(json);
}

// ---------------------------------------------------------------------------------------------
// Mutations

/** The keys the scanner and parseChunk know, and some they do not. */
const KEYS = [
  'choices',
  'usage',
  'delta',
  'text',
  'content',
  'reasoning_content',
  'reasoning',
  'tool_calls',
  'finish_reason',
  'completion_tokens',
  'prompt_tokens',
  'completion_tokens_details',
  'reasoning_tokens',
  'error',
  'timings',
  'index',
  'id',
  'created',
  '__proto__',
  'x',
];
/** A value put in place of another, or beside it under the same key. */
const value: Arb<Json> = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { weight: 4, arbitrary: text },
    { weight: 4, arbitrary: number },
    fc.constantFrom<Json>(null, true, false, 'stop', [], obj([])),
    fc.constant<Json>([
      obj([
        ['index', 0],
        ['function', obj([['name', 'f']])],
      ]),
    ]),
    fc
      .array(fc.tuple(fc.constantFrom(...KEYS), tie('value')), { maxLength: 3 })
      .map((e): Json => obj(e)),
    fc.array(tie('value'), { maxLength: 2 }).map((a): Json => a),
  ),
})).value;

type TreeMutation =
  | { op: 'drop' | 'cutValue'; node: number; member: number }
  | { op: 'twice'; node: number; member: number; at: number; value: Json }
  | { op: 'same twice'; node: number; member: number; at: number }
  | { op: 'replace'; node: number; member: number; value: Json }
  | { op: 'add'; node: number; at: number; key: string; value: Json }
  | { op: 'reorder'; node: number; order: number[] };

const treeMutation: Arb<TreeMutation> = fc.oneof(
  fc.record({
    op: fc.constantFrom('drop' as const, 'cutValue' as const),
    node: fc.nat(),
    member: fc.nat(),
  }),
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('twice' as const),
      node: fc.nat(),
      member: fc.nat(),
      at: fc.nat(),
      value,
    }),
  },
  fc.record({
    op: fc.constant('same twice' as const),
    node: fc.nat(),
    member: fc.nat(),
    at: fc.nat(),
  }),
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('replace' as const),
      node: fc.nat(),
      member: fc.nat(),
      value,
    }),
  },
  fc.record({
    op: fc.constant('add' as const),
    node: fc.nat(),
    at: fc.nat(),
    key: fc.constantFrom(...KEYS),
    value,
  }),
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('reorder' as const),
      node: fc.nat(),
      order: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }),
    }),
  },
);

/** Every object of a tree (not copies: mutateTree copies the tree first), parents first. */
function objects(json: Json, out: Obj[] = []): Obj[] {
  if (Array.isArray(json)) for (const j of json) objects(j, out);
  else if (isObj(json)) {
    out.push(json);
    for (const [, v] of json.entries) objects(v, out);
  }
  return out;
}

const copy = (json: Json): Json => structuredClone(json);

/** The tree with one object changed (the choice, the delta, usage, a nested value, the top). */
function mutateTree(json: Json, m: TreeMutation): Json {
  const tree = copy(json);
  const all = objects(tree);
  if (all.length === 0) return tree;
  const { entries } = all[m.node % all.length];
  const i = entries.length > 0 && 'member' in m ? m.member % entries.length : -1;
  switch (m.op) {
    case 'drop':
      if (i >= 0) entries.splice(i, 1);
      break;
    case 'cutValue':
      // `"key":,` or `"key":}`: not JSON.
      if (i >= 0) entries[i] = [entries[i][0], { raw: '' }];
      break;
    case 'twice':
      if (i >= 0) entries.splice(m.at % (entries.length + 1), 0, [entries[i][0], m.value]);
      break;
    case 'same twice':
      if (i >= 0)
        entries.splice(m.at % (entries.length + 1), 0, [entries[i][0], copy(entries[i][1])]);
      break;
    case 'replace':
      if (i >= 0) entries[i] = [entries[i][0], m.value];
      break;
    case 'add':
      entries.splice(m.at % (entries.length + 1), 0, [m.key, m.value]);
      break;
    case 'reorder': {
      const keys = entries.map((_, k) => m.order[k % m.order.length] * 64 + k);
      const sorted = entries.map((e, k) => [keys[k], e] as const).sort((a, b) => a[0] - b[0]);
      entries.splice(0, entries.length, ...sorted.map(([, e]) => e));
      break;
    }
  }
  return tree;
}

type TextMutation =
  | { op: 'cut'; at: number; tail: string }
  | { op: 'delete' | 'copy'; at: number; length: number }
  | { op: 'escape' | 'insert'; at: number; char: string };

const textMutation: Arb<TextMutation> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('cut' as const),
      at: fc.nat(),
      tail: fc.constantFrom('', '', '}', ']}', '}]}', '"}]}', ',', ' ', 'null}'),
    }),
  },
  fc.record({
    op: fc.constantFrom('delete' as const, 'copy' as const),
    at: fc.nat(),
    length: fc.nat({ max: 40 }),
  }),
  fc.record({
    op: fc.constantFrom('escape' as const, 'insert' as const),
    at: fc.nat(),
    char: fc.constantFrom(' ', '\n', ',', '"', '\\', '0', '-', '.', 'e', '{', '}', '[', ']', ':'),
  }),
);

/** The message's text with one character-level change. */
function mutateText(json: string, m: TextMutation): string {
  const at = m.at % (json.length + 1);
  switch (m.op) {
    case 'cut':
      return json.slice(0, at) + m.tail;
    case 'delete':
      return json.slice(0, at) + json.slice(at + m.length);
    case 'copy':
      return (
        json.slice(0, at + m.length) + json.slice(at, at + m.length) + json.slice(at + m.length)
      );
    case 'insert':
      return json.slice(0, at) + m.char + json.slice(at);
    case 'escape': {
      // The character there as a \u escape (in a key, it sends the chunk to the full path).
      const c = json.charCodeAt(at);
      if (Number.isNaN(c)) return json;
      return `${json.slice(0, at)}\\u${c.toString(16).padStart(4, '0')}${json.slice(at + 1)}`;
    }
  }
}

/** How one message of the stream is made from the stream's chunk. */
interface MessageRecipe {
  texts: string[];
  numbers: Json[];
  tree: TreeMutation[];
  text: TextMutation[];
  /** Undefined: the stream's first chunk's, so that alike chunks match its template. */
  style: Style | undefined;
  /**
   * What the SSE framer's text holds around the message (a read past its end shows); `after`
   * LONG_READ: the stream's first chunk, many times, as a read of many chunks holds it.
   */
  before: string;
  after: string;
}

const LONG_READ = '(a long read)';

/**
 * More chunks after the message than the scanner searches through (its SEARCH_BOUND), each the
 * `chunk` its template may come from: it compares the message's text in place, not by a search.
 */
const longRead = (chunk: string): string =>
  `\n\ndata: ${chunk}`.repeat(Math.ceil(5000 / (chunk.length + 8)));

const style: Arb<Style> = fc.record({
  space: fc.oneof({ weight: 6, arbitrary: fc.constant('') }, fc.constantFrom(' ', '\t', '\n ')),
  escapeAll: fc.boolean(),
});
const recipe: Arb<MessageRecipe> = fc.record({
  texts: fc.array(text, { minLength: 1, maxLength: 2 }),
  numbers: fc.array(number, { minLength: 1, maxLength: 3 }),
  tree: fc.oneof(
    { weight: 2, arbitrary: fc.constant<TreeMutation[]>([]) },
    { weight: 5, arbitrary: fc.array(treeMutation, { minLength: 1, maxLength: 3 }) },
  ),
  text: fc.oneof(
    { weight: 4, arbitrary: fc.constant<TextMutation[]>([]) },
    fc.array(textMutation, { minLength: 1, maxLength: 2 }),
  ),
  style: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, style),
  before: fc.constantFrom('', 'data: ', '{"x":'),
  after: fc.constantFrom(
    '',
    '',
    '\n\ndata: {"a":1}\n\n',
    '0',
    '}',
    '"}]}',
    ' ',
    'e5',
    ',"b":1}',
    LONG_READ,
  ),
});

interface Message {
  whole: string;
  start: number;
  end: number;
  mutated: boolean;
}

function message(base: Json, baseStyle: Style, r: MessageRecipe): Message {
  let json = write(
    r.tree.reduce(mutateTree, alike(base, r.texts, r.numbers)),
    r.style ?? baseStyle,
  );
  json = r.text.reduce(mutateText, json);
  const after = r.after === LONG_READ ? longRead(write(base, baseStyle)) : r.after;
  return {
    whole: r.before + json + after,
    start: r.before.length,
    end: r.before.length + json.length,
    mutated: r.tree.length + r.text.length > 0,
  };
}

const streamCase = fc.constantFrom<Endpoint>('chat', 'completions').chain((endpoint) =>
  fc.record({
    endpoint: fc.constant(endpoint),
    base: chunk(endpoint === 'chat'),
    baseStyle: style,
    messages: fc.array(recipe, { minLength: 1, maxLength: 6 }),
    limit: fc.constantFrom(undefined, 2, 1000),
    capture: fc.constantFrom(undefined, 4, 1 << 20),
  }),
);

// ---------------------------------------------------------------------------------------------
// The property

/** The full path, as the decoder takes it: JSON.parse, an object, parseChunk; false: a fault. */
function fullPath(parse: MessageParser, data: string, t: Timeline): boolean {
  let m: unknown;
  // Most of a refused message's cost is its error's stack, which nothing here reads.
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    m = JSON.parse(data);
  } catch {
    return false;
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return false;
  parse(m as Record<string, unknown>, t);
  return true;
}

const counts = {
  streams: 0,
  messages: 0,
  mutated: 0,
  taken: 0,
  mutatedTaken: 0,
  /** Mutants tried against a template (an earlier chunk of the stream), and those it read. */
  mutatedTried: 0,
  mutatedMatched: 0,
  /** All chunks the template's match read. */
  matched: 0,
  declined: 0,
  faults: 0,
};

/** One message through both paths, the timelines compared. */
function check(
  scan: MessageScanner,
  parse: MessageParser,
  m: Message,
  fast: Timeline,
  full: Timeline,
) {
  counts.messages++;
  if (m.mutated) counts.mutated++;
  const data = m.whole.slice(m.start, m.end);
  const [tried, matched] = [matchCalls, matches];
  const taken = scan(m.whole, m.start, m.end, fast);
  if (matches > matched) counts.matched++;
  if (m.mutated && matchCalls > tried) counts.mutatedTried++;
  if (m.mutated && matches > matched) counts.mutatedMatched++;
  // The two timelines held the same before this message (all their fields, private ones too).
  if (!taken) {
    counts.declined++;
    assert.deepStrictEqual(fast, full, `declined, but changed the timeline: ${data}`);
  }
  const parsed = fullPath(parse, data, full);
  if (!parsed) {
    counts.faults++;
    assert.equal(taken, false, `taken, but the full path faults: ${data}`);
    return;
  }
  if (taken) {
    counts.taken++;
    if (m.mutated) counts.mutatedTaken++;
  } else fullPath(parse, data, fast);
  assert.deepStrictEqual(fast, full, `${taken ? 'taken' : 'declined'}: ${data}`);
}

/** The messages of one stream through both paths, each checked. */
function checkStream(
  endpoint: Endpoint,
  messages: Message[],
  limit: number | undefined,
  capture: number | undefined,
): void {
  counts.streams++;
  const protocol = openaiStreamProtocol(endpoint);
  const scan = protocol.scan;
  assert.ok(scan);
  const fast = new Timeline(100, limit, capture);
  const full = new Timeline(100, limit, capture);
  messages.forEach((m, i) => {
    fast.nowUs = full.nowUs = 1000 + 7 * i;
    check(scan, protocol.parse, m, fast, full);
  });
}

const whole = (json: string, mutated: boolean): Message => ({
  whole: json,
  start: 0,
  end: json.length,
  mutated,
});

/** Calls of the shared scanner's `match` (a stream's template met a chunk), and its reads. */
let matchCalls = 0;
let matches = 0;

/** Runs `body` with the shared scanner's `match` counted. */
function countingMatches(body: () => void): void {
  const cpu = process.cpuUsage();
  const { match } = sharedChunkScanner;
  sharedChunkScanner.match = function (...args) {
    const ok = match.apply(this, args);
    matchCalls++;
    if (ok) matches++;
    return ok;
  };
  try {
    body();
  } finally {
    Reflect.deleteProperty(sharedChunkScanner, 'match');
  }
  if (LONG) console.log(`${process.cpuUsage(cpu).user / 1000} ms of CPU`);
}

const LONG = process.env.SCAN_FUZZ_RUNS !== undefined;
const RUNS = Number(process.env.SCAN_FUZZ_RUNS ?? 600);
const SEED = Number(process.env.SCAN_FUZZ_SEED ?? 20270127);

/** Chunks as vLLM, SGLang and llama.cpp send them (issue 27's and the suite's fixtures). */
const REAL: [Endpoint, string][] = [
  [
    'chat',
    '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733100000,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2}}',
  ],
  [
    'chat',
    '{"id":"a3f1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":" w","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}',
  ],
  [
    'chat',
    '{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" w"}}],"created":1,"id":"chatcmpl-Zq","model":"gpt-3.5-turbo","system_fingerprint":"b5100","object":"chat.completion.chunk"}',
  ],
  [
    'chat',
    '{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":128,"total_tokens":140,"completion_tokens_details":null}}',
  ],
  [
    'completions',
    '{"id":"cmpl-1","object":"text_completion","created":5,"choices":[{"index":0,"text":" w","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":1}}',
  ],
];

/** A parsed chunk as entry lists (JSON.parse keeps the order of keys that are not indices). */
function entriesOf(value: unknown): Json {
  if (Array.isArray(value)) return value.map(entriesOf);
  if (value !== null && typeof value === 'object') {
    return obj(Object.entries(value).map(([k, v]): [string, Json] => [k, entriesOf(v)]));
  }
  return value as Json;
}

/** Every cut, deletion, member dropped or cut, member written twice, and object reordered. */
function* everyMutant(json: Json): Generator<string> {
  const plain: Style = { space: '', escapeAll: false };
  const text = write(json, plain);
  for (let at = 0; at <= text.length; at++) {
    yield text.slice(0, at);
    // Each character deleted: every fourth in the suite (for its time), all in a long run.
    if (LONG || at % 4 === 0) yield text.slice(0, at) + text.slice(at + 1);
  }
  const nodes = objects(json).length;
  const values: Json[] = [null, 'x', 7, 1.5, obj([]), [], obj([['content', 'y']])];
  for (let node = 0; node < nodes; node++) {
    const size = objects(json)[node].entries.length;
    const tree = (m: TreeMutation) => write(mutateTree(json, m), plain);
    for (let member = 0; member < size; member++) {
      yield tree({ op: 'drop', node, member });
      yield tree({ op: 'cutValue', node, member });
      for (const at of [member, member + 1]) {
        yield tree({ op: 'same twice', node, member, at });
        for (const value of values) yield tree({ op: 'twice', node, member, at, value });
      }
      // Each member moved to each place.
      for (let to = 0; to < size; to++) {
        const order = Array.from({ length: size }, (_, k) => (k === member ? to : k) * 2 + 1);
        order[member] = to * 2 + (to > member ? 2 : 0);
        yield tree({ op: 'reorder', node, order });
      }
    }
    yield tree({
      op: 'reorder',
      node,
      order: Array.from({ length: Math.max(size, 1) }, (_, k) => size - k),
    });
  }
}

describe('fuzz: OpenAI field scanner on mutated chunks (issue 27)', () => {
  it('every cut, deletion, field twice and reordering of real chunks: as the full path', () => {
    const before = { ...counts };
    countingMatches(() => {
      for (const [endpoint, chunk] of REAL) {
        const json = entriesOf(JSON.parse(chunk));
        // The same chunk again, its values changed: the template's match reads it.
        const next = write(alike(json, ['z'], [9]), { space: '', escapeAll: false });
        const tail = longRead(chunk);
        let n = 0;
        for (const mutant of everyMutant(json)) {
          // The mutant against the chunk's template, then as a template for the next; every
          // other one in a long read.
          const inRead = n++ % 2 === 1;
          const m = inRead
            ? { whole: mutant + tail, start: 0, end: mutant.length, mutated: true }
            : whole(mutant, true);
          checkStream(endpoint, [whole(chunk, false), m, whole(next, false)], 1000, 1 << 20);
        }
      }
    });
    const mutants = counts.mutated - before.mutated;
    const taken = counts.mutatedTaken - before.mutatedTaken;
    if (LONG) console.log(JSON.stringify({ every: mutants, taken }));
    assert.ok(mutants > 2000 && taken > 500, `${mutants} mutants, ${taken} taken`);
  });

  it('records what JSON.parse and parseChunk record, or declines untouched, or both fault', () => {
    countingMatches(() => {
      fc.assert(
        fc.property(streamCase, (c) => {
          const first = write(c.base, c.baseStyle);
          const messages = [
            whole(first, false),
            ...c.messages.map((r) => message(c.base, c.baseStyle, r)),
          ];
          checkStream(c.endpoint, messages, c.limit, c.capture);
        }),
        { seed: SEED, numRuns: RUNS },
      );
    });
    if (LONG) console.log(JSON.stringify({ seed: SEED, ...counts }));
    // The scanner must read mutants itself, not only decline them, for the property to bite;
    // the template's match must meet mutants, and read the chunks that only change its values.
    assert.ok(counts.mutatedTaken > RUNS / 10, JSON.stringify(counts));
    assert.ok(counts.mutatedTried > RUNS, JSON.stringify(counts));
    assert.ok(counts.matched > RUNS / 10, JSON.stringify(counts));
  });
});
