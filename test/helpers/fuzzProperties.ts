/**
 * Issue 15's fuzz properties of every parser that reads server bytes or user files, shared by
 * the seeded tests (test/unit/fuzz/) and the longer run (bench/fuzz.ts). Each property holds
 * for any input: never a throw out of the parser (or only its own clean error), never a hang
 * (bounded work per byte), token counts non-negative safe integers, values that survive JSON.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { TextDecoder } from 'node:util';
import fc from 'fast-check';
import { stringify as toYaml } from 'yaml';
import { createDecoder, type Framing } from '../../src/backends/decoder.js';
import { llamaCppBackend } from '../../src/backends/llamacpp.js';
import { ollamaBackend } from '../../src/backends/ollama.js';
import { openaiBackend } from '../../src/backends/openai.js';
import { sglangBackend } from '../../src/backends/sglang.js';
import { tgiBackend } from '../../src/backends/tgi.js';
import type { DecodedStream } from '../../src/backends/timeline.js';
import { tritonBackend } from '../../src/backends/triton.js';
import type { Backend, BackendOptions, Endpoint } from '../../src/backends/types.js';
import { InfergaugeError } from '../../src/errors.js';
import { loadGpuSpec } from '../../src/memory/gpuSpec.js';
import { PLAN_KEYS, readPlanFile } from '../../src/plan/planFile.js';
import { MAX_PRICE_PER_GPU_HOUR, priceOf, readPriceFile } from '../../src/session/sizePrices.js';
import { resolveEngine } from '../../src/sim/options.js';
import { parsePrometheusText } from '../../src/telemetry/prometheus.js';
import { type DatasetFormat, parseDataset } from '../../src/workload/datasets.js';
import { parseTrace, type TraceFormat } from '../../src/workload/trace.js';

export type FuzzGroup = 'framing' | 'backends' | 'prometheus' | 'inputs';

export interface FuzzProperty {
  group: FuzzGroup;
  name: string;
  /** Runs in the seeded test; the bench multiplies it. */
  numRuns: number;
  /** An open bug this property finds: the test runs it as `todo` until the fix is merged. */
  open?: string;
  /** The open bug hangs the thread (a synchronous endless loop): the test skips it until then. */
  hangs?: boolean;
  /** Each case is slow (seconds at worst): report the first failure without shrinking it. */
  noShrink?: boolean;
  check(params: { seed: number; numRuns: number }): FuzzOutcome;
}

export interface FuzzOutcome {
  failed: boolean;
  /** Cases run (up to the first failure). */
  numRuns: number;
  /** fast-check's report of a failure: seed, path, the shrunk counterexample, the error. */
  report: string;
}

const PROPERTIES: FuzzProperty[] = [];

function define<Ts extends unknown[]>(
  spec: Omit<FuzzProperty, 'check'>,
  property: fc.IProperty<Ts>,
): void {
  PROPERTIES.push({
    ...spec,
    check: (params) => {
      const details = fc.check(property, { ...params, endOnFailure: spec.noShrink === true });
      const report = details.failed ? (fc.defaultReportMessage(details) ?? '') : '';
      return { failed: details.failed, numRuns: details.numRuns, report };
    },
  });
}

export function fuzzProperties(group?: FuzzGroup): FuzzProperty[] {
  return PROPERTIES.filter((p) => group === undefined || p.group === group);
}

/** The seed of the test suite's runs (bench/fuzz.ts draws fresh ones). */
export const FUZZ_SEED = 20261201;

/**
 * Registers a group's seeded tests. A property with `open` runs as `todo` (its failure is shown,
 * not counted) and one that `hangs` is skipped: delete those fields once the fix is merged.
 */
export function fuzzSuite(group: FuzzGroup): void {
  describe(`fuzz: ${group}`, () => {
    for (const p of fuzzProperties(group)) {
      const mark = p.hangs
        ? { skip: `hangs until fixed: ${p.open}` }
        : p.open
          ? { todo: p.open }
          : {};
      test(p.name, mark, () => {
        const outcome = p.check({ seed: FUZZ_SEED, numRuns: p.numRuns });
        if (outcome.failed) throw new Error(outcome.report);
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

/** `bytes` cut at arbitrary points (positions taken modulo the length, so any cut list fits). */
const splitAt = (bytes: Uint8Array, cuts: number[]): Uint8Array[] => {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const p of points) {
    pieces.push(bytes.subarray(from, p));
    from = p;
  }
  pieces.push(bytes.subarray(from));
  return pieces;
};

const cutsArb = fc.array(fc.nat(), { maxLength: 12 });

/** A value JSON keeps as it is: no Infinity (null), no NaN, no -0 (0), no undefined. */
const survivesJson = (value: unknown): boolean => {
  try {
    return fc.stringify(JSON.parse(JSON.stringify(value))) === fc.stringify(value);
  } catch {
    return false;
  }
};

const isCount = (n: unknown): boolean => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

/** An Error of the reader's own (plain Error or infergauge's), not a TypeError or RangeError. */
const isCleanError = (err: unknown): boolean =>
  err instanceof InfergaugeError || (err instanceof Error && err.constructor === Error);

const INFINITY = '\u0000inf';
const MINUS_INFINITY = '\u0000-inf';

/** JSON text in which ±Infinity is written `1e999` / `-1e999`, as a server can send it. */
export const hostileJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v) =>
    v === Number.POSITIVE_INFINITY ? INFINITY : v === Number.NEGATIVE_INFINITY ? MINUS_INFINITY : v,
  )
    .replaceAll(JSON.stringify(INFINITY), '1e999')
    .replaceAll(JSON.stringify(MINUS_INFINITY), '-1e999');

// ---------------------------------------------------------------------------------------------
// SSE and NDJSON framing (src/backends/decoder.ts)

const FRAGMENTS = [
  'data: ',
  'data:',
  '\n',
  '\r',
  '\r\n',
  '\n\n',
  '[DONE]',
  '{}',
  '{"a":1}',
  ': comment',
  'event: x',
  'id: 1',
  'retry: 5',
  ' ',
  '{',
  '"',
  'é',
  '😀',
  'null',
  '[]',
];
const streamText = fc
  .array(fc.oneof(fc.constantFrom(...FRAGMENTS), fc.string({ maxLength: 8, unit: 'binary' })), {
    maxLength: 60,
  })
  .map((parts) => parts.join(''));
const streamBytes = fc.oneof(
  streamText.map((text) => new TextEncoder().encode(text)),
  fc.uint8Array({ maxLength: 400 }),
);
const framingArb = fc.constantFrom<Framing>('sse', 'ndjson');

/** Decodes `pieces` as http.ts does (a streaming UTF-8 decoder, one feed per piece). */
function decodePieces(framing: Framing, pieces: Uint8Array[]) {
  const messages: string[] = [];
  const decoder = createDecoder(
    {
      framing,
      parse: (m, t) => {
        messages.push(JSON.stringify(m));
        t.event({ content: 'x' });
      },
    },
    0,
  );
  const utf8 = new TextDecoder();
  pieces.forEach((piece, i) => {
    decoder.feed(utf8.decode(piece, { stream: true }), i + 1);
  });
  decoder.feed(utf8.decode(), pieces.length + 1);
  decoder.end(pieces.length + 2);
  const decoded = decoder.finish();
  return {
    messages,
    fault: decoder.fault?.kind,
    done: decoder.done,
    eventCount: decoder.eventCount,
    decoded,
  };
}

define(
  {
    group: 'framing',
    name: 'SSE and NDJSON framing never throw on any bytes cut anywhere',
    numRuns: 400,
  },
  fc.property(framingArb, streamBytes, cutsArb, (framing, bytes, cuts) => {
    const out = decodePieces(framing, splitAt(bytes, cuts));
    return out.eventCount === out.messages.length && survivesJson(out.decoded);
  }),
);

define(
  {
    group: 'framing',
    name: 'the messages read do not depend on where the network cut the bytes',
    numRuns: 400,
  },
  fc.property(framingArb, streamBytes, cutsArb, (framing, bytes, cuts) => {
    const whole = decodePieces(framing, [bytes]);
    const cut = decodePieces(framing, splitAt(bytes, cuts));
    return (
      fc.stringify([whole.messages, whole.fault, whole.done]) ===
      fc.stringify([cut.messages, cut.fault, cut.done])
    );
  }),
);

/**
 * Work per byte is bounded: a long line (a 20 MB line is a real server's answer) fed in small
 * network reads must cost about its length, not its length times the number of reads. The
 * bound is 1 s per MiB (linear decoding takes ~10 ms per MiB), checked after every read so a
 * quadratic decoder fails in seconds instead of running for minutes.
 */
function longLineProperty(framing: Framing) {
  return fc.property(
    fc.integer({ min: 1 << 19, max: 3 << 19 }),
    fc.integer({ min: 512, max: 4096 }),
    (lineBytes, readBytes) => {
      const decoder = createDecoder({ framing, parse: () => {} }, 0);
      const boundMs = 250 + (1000 * lineBytes) / (1 << 20);
      const read = 'x'.repeat(readBytes);
      const started = performance.now();
      decoder.feed(framing === 'sse' ? 'data: ' : '', 0);
      for (let fed = 0; fed < lineBytes; fed += readBytes) {
        decoder.feed(read, 1);
        const ms = performance.now() - started;
        if (ms > boundMs) {
          throw new Error(
            `${fed} of ${lineBytes} bytes in ${Math.round(ms)} ms (bound ${boundMs})`,
          );
        }
      }
      decoder.feed('\n\n', 2);
      decoder.end(3);
      return decoder.fault?.kind === 'bad_stream';
    },
  );
}

define(
  {
    group: 'framing',
    name: 'SSE: a long line costs linear time in its length',
    numRuns: 3,
    noShrink: true,
  },
  longLineProperty('sse'),
);
define(
  {
    group: 'framing',
    name: 'NDJSON: a long line costs linear time in its length',
    numRuns: 3,
    noShrink: true,
  },
  longLineProperty('ndjson'),
);

// ---------------------------------------------------------------------------------------------
// Each backend's event handling (src/backends/*.ts)

/** Counts a healthy server sends. */
const saneCount = fc.nat({ max: 64 });
/** Wrong types where a number or string belongs. */
const wrongType = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.nat({ max: 9 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.nat({ max: 9 }), { maxKeys: 2 }),
);
/** Numbers a hostile server sends, all within 2^53 (where `x++` still counts). */
const hostileCount = fc.oneof(
  { weight: 3, arbitrary: saneCount },
  fc.integer(),
  fc.double({ min: -(2 ** 53), max: 2 ** 53, noNaN: true }),
  fc.constantFrom(-1, 0.5, 2 ** 53 - 1, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  wrongType,
);
/** Past 2^53 (issue 15 case 2's 9715559134754884 and case 3's 1e17). */
const hugeCount = fc.oneof(
  { weight: 3, arbitrary: hostileCount },
  fc.constantFrom(9715559134754884, 2 ** 53 + 2, 1e17, 1e300, Number.MAX_VALUE),
);

type Arb<T> = fc.Arbitrary<T>;
const text = (typed: boolean): Arb<unknown> =>
  typed
    ? fc.string({ maxLength: 6 })
    : fc.oneof({ weight: 4, arbitrary: fc.string({ maxLength: 6 }) }, wrongType);
const optional = <T extends Record<string, Arb<unknown>>>(model: T) =>
  fc.record(model, { requiredKeys: [] });
const orWrong = (arb: Arb<unknown>, typed: boolean): Arb<unknown> =>
  typed ? arb : fc.oneof({ weight: 4, arbitrary: arb }, wrongType);

/** How to shape one event of a protocol, with numbers from `count`. */
type EventShape = (count: Arb<unknown>, typed: boolean) => Arb<unknown>;

const errorEvent = (count: Arb<unknown>, typed: boolean) =>
  optional({
    error: fc.oneof(text(typed), optional({ message: text(typed), code: count })),
  });

const DECODERS: {
  name: string;
  backend: Backend;
  endpoint: Endpoint;
  framing: Framing;
  event: EventShape;
}[] = [
  {
    name: 'openai chat',
    backend: openaiBackend,
    endpoint: 'chat',
    framing: 'sse',
    event: (count, typed) =>
      optional({
        choices: orWrong(
          fc.array(
            orWrong(
              optional({
                index: count,
                delta: orWrong(
                  optional({
                    role: fc.constant('assistant'),
                    content: text(typed),
                    reasoning_content: text(typed),
                  }),
                  typed,
                ),
                finish_reason: fc.oneof(fc.constant(null), fc.constantFrom('stop', 'length')),
              }),
              typed,
            ),
            { maxLength: 2 },
          ),
          typed,
        ),
        usage: orWrong(
          optional({ prompt_tokens: count, completion_tokens: count, total_tokens: count }),
          typed,
        ),
        timings: optional({
          prompt_n: count,
          prompt_ms: count,
          predicted_n: count,
          predicted_ms: count,
        }),
      }),
  },
  {
    name: 'openai completions',
    backend: openaiBackend,
    endpoint: 'completions',
    framing: 'sse',
    event: (count, typed) =>
      optional({
        choices: orWrong(
          fc.array(
            orWrong(
              optional({
                text: text(typed),
                finish_reason: fc.oneof(fc.constant(null), fc.constantFrom('stop', 'length')),
              }),
              typed,
            ),
            { maxLength: 2 },
          ),
          typed,
        ),
        usage: orWrong(optional({ prompt_tokens: count, completion_tokens: count }), typed),
      }),
  },
  {
    name: 'llamacpp',
    backend: llamaCppBackend,
    endpoint: 'completions',
    framing: 'sse',
    event: (count, typed) =>
      optional({
        content: text(typed),
        tokens: orWrong(fc.array(fc.nat({ max: 99 }), { maxLength: 3 }), typed),
        tokens_predicted: count,
        tokens_evaluated: count,
        stop: orWrong(fc.boolean(), typed),
        stop_type: fc.constantFrom('eos', 'limit', 'word', 'none', 'other'),
        timings: optional({ prompt_n: count, prompt_ms: count, predicted_n: count }),
      }),
  },
  {
    name: 'tgi',
    backend: tgiBackend,
    endpoint: 'completions',
    framing: 'sse',
    event: (count, typed) =>
      optional({
        index: count,
        token: orWrong(optional({ id: count, text: text(typed), special: fc.boolean() }), typed),
        generated_text: fc.oneof(fc.constant(null), text(typed)),
        details: fc.oneof(
          fc.constant(null),
          optional({
            generated_tokens: count,
            input_length: count,
            finish_reason: fc.constantFrom('length', 'eos_token', 'stop_sequence', 'x'),
          }),
        ),
      }),
  },
  {
    name: 'triton',
    backend: tritonBackend,
    endpoint: 'completions',
    framing: 'sse',
    event: (_count, typed) => optional({ text_output: text(typed) }),
  },
  {
    name: 'ollama',
    backend: ollamaBackend,
    endpoint: 'completions',
    framing: 'ndjson',
    event: (count, typed) =>
      optional({
        response: text(typed),
        thinking: text(typed),
        done: orWrong(fc.boolean(), typed),
        done_reason: text(typed),
        eval_count: count,
        prompt_eval_count: count,
        eval_duration: count,
        prompt_eval_duration: count,
        load_duration: count,
      }),
  },
  {
    name: 'ollama chat',
    backend: ollamaBackend,
    endpoint: 'chat',
    framing: 'ndjson',
    event: (count, typed) =>
      optional({
        message: orWrong(optional({ content: text(typed), thinking: text(typed) }), typed),
        done: orWrong(fc.boolean(), typed),
        eval_count: count,
        prompt_eval_count: count,
      }),
  },
  {
    name: 'sglang',
    backend: sglangBackend,
    endpoint: 'completions',
    framing: 'sse',
    event: (count, typed) =>
      optional({
        text: text(typed),
        meta_info: orWrong(
          optional({
            completion_tokens: count,
            prompt_tokens: count,
            finish_reason: fc.oneof(
              fc.constant(null),
              optional({
                type: fc.constantFrom('stop', 'length', 'abort'),
                message: text(typed),
                status_code: count,
              }),
            ),
          }),
          typed,
        ),
      }),
  },
];

/** A whole stream of one protocol: events (an in-stream error now and then), maybe its end. */
function streamOf(index: number, count: Arb<unknown>, typed: boolean) {
  const { event, framing } = DECODERS[index];
  const one = fc.oneof({ weight: 12, arbitrary: event(count, typed) }, errorEvent(count, typed));
  return fc.tuple(fc.array(one, { maxLength: 16 }), fc.boolean()).map(([events, withDone]) => {
    const lines = events.map((e) =>
      framing === 'sse' ? `data: ${hostileJson(e)}\n\n` : `${hostileJson(e)}\n`,
    );
    if (withDone && framing === 'sse') lines.push('data: [DONE]\n\n');
    return lines.join('');
  });
}

function decodeStream(index: number, stream: string, cuts: number[]): DecodedStream {
  const pieces = splitAt(new TextEncoder().encode(stream), cuts);
  const { backend, endpoint } = DECODERS[index];
  const options: BackendOptions = {
    endpoint,
    model: 'm',
    temperature: 0,
    ignoreEos: false,
    continuousUsageStats: false,
  };
  const decoder = backend.decoder(0, options, {
    prompt: 'p',
    requestedInputTokens: 1,
    requestedOutputTokens: 64,
  });
  const utf8 = new TextDecoder();
  pieces.forEach((piece, i) => {
    decoder.feed(utf8.decode(piece, { stream: true }), 1000 * (i + 1));
  });
  decoder.end(1000 * (pieces.length + 1));
  // The getters the engine reads after each piece must not throw either.
  void [decoder.fault, decoder.done, decoder.eventCount];
  return decoder.finish();
}

const decoderIndex = fc.nat({ max: DECODERS.length - 1 });
const backendStream = (count: Arb<unknown>, typed: boolean) =>
  decoderIndex.chain((index) =>
    fc.tuple(fc.constant(index), streamOf(index, count, typed), cutsArb),
  );

/** Token counts are non-negative safe integers; server timings finite and non-negative. */
function countsAreSane(d: DecodedStream): boolean {
  const timing = d.serverTiming ?? {};
  return (
    isCount(d.outputTokens) &&
    d.events.tokens.every(isCount) &&
    (d.inputTokens === undefined || isCount(d.inputTokens)) &&
    (d.tokenCountMismatch === undefined || Number.isSafeInteger(d.tokenCountMismatch)) &&
    Object.values(timing).every((v) => Number.isFinite(v) && v >= 0)
  );
}

/** A property of every backend's decoder over streams with counts from `count`. */
function backendProperty(
  spec: Omit<FuzzProperty, 'check' | 'group'>,
  count: Arb<unknown>,
  typed: boolean,
  holds: (decoded: DecodedStream) => boolean,
): void {
  define(
    { group: 'backends', ...spec },
    fc.property(backendStream(count, typed), ([index, stream, cuts]) =>
      holds(decodeStream(index, stream, cuts)),
    ),
  );
}

backendProperty(
  {
    name: 'well-typed events with sane counts: no throw, sane counts, the stream survives JSON',
    numRuns: 300,
  },
  saneCount,
  true,
  (d) => countsAreSane(d) && survivesJson(d),
);
backendProperty(
  {
    name: 'wrong types, missing fields and hostile numbers (up to 2^53) never throw',
    numRuns: 300,
  },
  hostileCount,
  false,
  () => true,
);
backendProperty(
  {
    name: 'hostile counts (up to 2^53): token counts stay non-negative safe integers',
    numRuns: 300,
  },
  hostileCount,
  true,
  countsAreSane,
);
backendProperty(
  {
    name: 'hostile counts (up to 2^53): the decoded stream survives JSON (no Infinity -> null)',
    numRuns: 300,
  },
  hostileCount,
  true,
  survivesJson,
);
backendProperty(
  {
    name: 'counts past 2^53 end (no endless rescale) with sane token counts',
    numRuns: 200,
  },
  hugeCount,
  true,
  countsAreSane,
);

// ---------------------------------------------------------------------------------------------
// Prometheus text (src/telemetry/prometheus.ts)

const PROMETHEUS_FRAGMENTS = [
  'vllm:num_requests_running',
  '{',
  '}',
  '="',
  '"',
  ',',
  '\\',
  '\\"',
  '\\n',
  ' ',
  '\t',
  '\n',
  '# HELP x y\n',
  '# TYPE x gauge\n',
  '1',
  '-1.5e3',
  '+Inf',
  'NaN',
  '1712345678000',
  'le',
  '__proto__',
];
const prometheusText = fc.oneof(
  fc.string({ maxLength: 300, unit: 'binary' }),
  fc
    .array(fc.oneof(fc.constantFrom(...PROMETHEUS_FRAGMENTS), fc.string({ maxLength: 5 })), {
      maxLength: 80,
    })
    .map((parts) => parts.join('')),
);

define(
  {
    group: 'prometheus',
    name: 'any text parses to well-formed samples without a throw',
    numRuns: 500,
  },
  fc.property(prometheusText, (scrape) =>
    parsePrometheusText(scrape).every(
      (s) =>
        typeof s.name === 'string' &&
        s.name.length > 0 &&
        typeof s.value === 'number' &&
        Object.values(s.labels).every((v) => typeof v === 'string'),
    ),
  ),
);

const metricName = fc.stringMatching(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,20}$/);
const labelName = fc.oneof(
  fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,12}$/),
  fc.constantFrom('__proto__', 'constructor', 'le', 'quantile'),
);
const sampleArb = fc.record({
  name: metricName,
  labels: fc.dictionary(labelName, fc.string({ maxLength: 12, unit: 'binary' }), { maxKeys: 4 }),
  value: fc.oneof(
    fc.double().map((v) => (Object.is(v, -0) ? 0 : v)),
    fc.integer(),
    fc.constantFrom(Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  ),
  timestamp: fc.option(fc.integer({ min: 0, max: 2 ** 41 }), { nil: undefined }),
});

const escapeLabel = (v: string) =>
  v.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
const formatValue = (v: number) =>
  Number.isNaN(v)
    ? 'NaN'
    : v === Number.POSITIVE_INFINITY
      ? '+Inf'
      : v === Number.NEGATIVE_INFINITY
        ? '-Inf'
        : String(v);

define(
  {
    group: 'prometheus',
    name: 'samples written in the exposition format read back equal',
    numRuns: 500,
  },
  fc.property(fc.array(sampleArb, { maxLength: 8 }), (samples) => {
    const scrape = samples
      .map((s) => {
        const labels = Object.entries(s.labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
        const series = labels.length > 0 ? `${s.name}{${labels.join(',')}}` : s.name;
        return `# TYPE ${s.name} gauge\n${series} ${formatValue(s.value)}${s.timestamp === undefined ? '' : ` ${s.timestamp}`}`;
      })
      .join('\n');
    // Entries, not objects: a generated dictionary may have a null prototype.
    const plain = (s: { name: string; labels: Record<string, string>; value: number }) => [
      s.name,
      Object.entries(s.labels),
      s.value,
    ];
    return (
      fc.stringify(parsePrometheusText(scrape).map(plain)) === fc.stringify(samples.map(plain))
    );
  }),
);

// ---------------------------------------------------------------------------------------------
// Plan files, datasets and traces (src/plan/planFile.ts, src/workload/datasets.ts, trace.ts)

/** Numbers a hostile file holds: huge, negative, fractional, past what a double can hold. */
const fileNumber = fc.oneof(
  fc.integer({ min: -5, max: 1000 }),
  fc.double({ noNaN: true }),
  fc.constantFrom(1e300, -1e300, 2 ** 53 + 2, 0.5, -0, Number.POSITIVE_INFINITY),
);
const fileValue = fc.oneof(
  { weight: 3, arbitrary: fileNumber },
  fc.string({ maxLength: 8, unit: 'binary' }),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 2 }),
);
const anyText = fc.string({ maxLength: 400, unit: 'binary' });

/** Runs `read`: it must return or throw its own clean error, never another kind of throw. */
function valueOrCleanError<T>(read: () => T): { value?: T } {
  try {
    return { value: read() };
  } catch (err) {
    if (isCleanError(err)) return {};
    throw err;
  }
}

const planDir = mkdtempSync(join(tmpdir(), 'ig-fuzz-plan-'));
process.on('exit', () => rmSync(planDir, { recursive: true, force: true }));
let planFiles = 0;

const planKey = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...PLAN_KEYS, 'scenarios') },
  fc.string({ maxLength: 8 }),
);
const planText = fc.oneof(
  anyText,
  fc
    .tuple(fc.dictionary(planKey, fileValue, { maxKeys: 8 }), fc.boolean())
    .map(([plan, yaml]) => (yaml ? toYaml(plan) : hostileJson(plan))),
);

define(
  {
    group: 'inputs',
    name: 'plan files: any text is a plan or a PlanFileError',
    numRuns: 200,
  },
  fc.property(planText, (content) => {
    const path = join(planDir, `plan-${planFiles++}.yaml`);
    writeFileSync(path, content);
    valueOrCleanError(() => readPlanFile(path));
  }),
);

const datasetText = fc.oneof(
  anyText,
  fc
    .array(
      fc.record(
        {
          conversations: fc.oneof(
            fc.array(
              fc.record(
                { from: fc.oneof(fc.constantFrom('human', 'gpt'), fileValue), value: fileValue },
                { requiredKeys: [] },
              ),
              { maxLength: 3 },
            ),
            fileValue,
          ),
        },
        { requiredKeys: [] },
      ),
      { maxLength: 4 },
    )
    .map(hostileJson),
  fc
    .array(
      fc.record(
        {
          prompt: fileValue,
          messages: fc.oneof(
            fc.array(fc.record({ role: fileValue, content: fileValue }, { requiredKeys: [] }), {
              maxLength: 2,
            }),
            fileValue,
          ),
          max_tokens: fileValue,
        },
        { requiredKeys: [] },
      ),
      { maxLength: 4 },
    )
    .map((lines) => lines.map(hostileJson).join('\n')),
);
const datasetFormat = fc.constantFrom<DatasetFormat>('sharegpt', 'jsonl', 'text');

define(
  {
    group: 'inputs',
    name: 'datasets: any text is a dataset or a clean error',
    numRuns: 300,
  },
  fc.property(datasetText, datasetFormat, (content, format) => {
    valueOrCleanError(() => parseDataset(content, format));
  }),
);

define(
  {
    group: 'inputs',
    name: 'datasets: entries have a prompt or messages, and max_tokens is a safe whole number',
    numRuns: 300,
  },
  fc.property(
    fc.array(fc.record({ prompt: fc.constant('p'), max_tokens: fileNumber }), { minLength: 1 }),
    (lines) => {
      const { value } = valueOrCleanError(() =>
        parseDataset(lines.map(hostileJson).join('\n'), 'jsonl'),
      );
      if (!value || value.format === 'text') return true;
      return value.entries.every(
        (e) =>
          (typeof e.prompt === 'string' || Array.isArray(e.messages)) &&
          (e.outputTokens === undefined || (isCount(e.outputTokens) && e.outputTokens >= 1)),
      );
    },
  ),
);

const traceTime = fc.oneof(fileNumber, fileValue);
const traceText = fc.oneof(
  anyText,
  fc
    .array(
      fc.record(
        {
          timestamp: traceTime,
          input_length: traceTime,
          output_length: traceTime,
          at_ms: traceTime,
          timestamp_s: traceTime,
          input_tokens: traceTime,
          output_tokens: traceTime,
        },
        { requiredKeys: [] },
      ),
      { maxLength: 5 },
    )
    .map((lines) => lines.map(hostileJson).join('\n')),
  fc
    .array(
      fc.tuple(
        fc.oneof(
          fc
            .date({ noInvalidDate: true })
            .map((d) => d.toISOString().replace('T', ' ').replace('Z', '')),
          fc.string({ maxLength: 6 }),
        ),
        fc.oneof(fc.nat().map(String), fc.constantFrom('9'.repeat(400), '-1', '1.5', '')),
        fc.oneof(fc.nat().map(String), fc.constantFrom('9'.repeat(400), 'x')),
      ),
      { maxLength: 5 },
    )
    .map((rows) =>
      ['TIMESTAMP,ContextTokens,GeneratedTokens', ...rows.map((r) => r.join(','))].join('\n'),
    ),
);
const traceFormat = fc.constantFrom<TraceFormat | undefined>(
  'mooncake',
  'azure',
  'burstgpt',
  'jsonl',
  undefined,
);
const parseAnyTrace = (content: string, format: TraceFormat | undefined) =>
  parseTrace(content, format ? { format } : {});

define(
  { group: 'inputs', name: 'traces: any text is a trace or a clean error', numRuns: 300 },
  fc.property(traceText, traceFormat, (content, format) => {
    valueOrCleanError(() => parseAnyTrace(content, format));
  }),
);

define(
  {
    group: 'inputs',
    name: 'traces: times are finite, sorted from 0, and lengths are safe whole numbers',
    numRuns: 300,
  },
  fc.property(
    fc.array(
      fc.record({ timestamp_s: fileNumber, input_tokens: fileNumber, output_tokens: fileNumber }),
      { minLength: 1, maxLength: 4 },
    ),
    (lines) => {
      const { value } = valueOrCleanError(() =>
        parseAnyTrace(lines.map(hostileJson).join('\n'), 'jsonl'),
      );
      if (!value) return true;
      return value.entries.every(
        (e, i, all) =>
          Number.isFinite(e.atMs) &&
          e.atMs >= 0 &&
          (i === 0 || e.atMs >= all[i - 1].atMs) &&
          isCount(e.inputTokens) &&
          isCount(e.outputTokens),
      );
    },
  ),
);

// ---------------------------------------------------------------------------------------------
// Price tables and GPU spec files (src/session/sizePrices.ts, src/memory/gpuSpec.ts): a valid
// load or a clean error naming the file and a field, never a TypeError, NaN or an inherited key.

/** Keys a hostile table holds: GPU ids, Object.prototype's names, anything. */
const tableKey = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom('h100', 'l40s', 'a100-80') },
  fc.constantFrom('constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'),
  fc.string({ maxLength: 8 }),
);
/** Numbers YAML and JSON can hold, NaN and the infinities (YAML's .nan, .inf) included. */
const tableNumber = fc.oneof(fileNumber, fc.constantFrom(Number.NaN, Number.NEGATIVE_INFINITY));
const tableValue = fc.oneof({ weight: 3, arbitrary: tableNumber }, fileValue);
/** An object written as YAML (whose .inf and .nan YAML reads back) or as JSON. */
const asFileText = (value: unknown, yaml: boolean) => (yaml ? toYaml(value) : hostileJson(value));

const tableDir = mkdtempSync(join(tmpdir(), 'ig-fuzz-tables-'));
process.on('exit', () => rmSync(tableDir, { recursive: true, force: true }));
let tableFiles = 0;
const tableFile = (content: string) => {
  const path = join(tableDir, `table-${tableFiles++}.yaml`);
  writeFileSync(path, content);
  return path;
};

define(
  {
    group: 'inputs',
    name: 'price files: a table of finite prices in range read by own keys, or a clean error naming the file',
    numRuns: 300,
  },
  fc.property(
    fc.oneof(
      anyText,
      fc
        .tuple(
          fc.dictionary(tableKey, tableValue, { maxKeys: 6, noNullPrototype: true }),
          fc.boolean(),
        )
        .map(([table, yaml]) => asFileText(table, yaml)),
    ),
    (content) => {
      const path = tableFile(content);
      let prices: Readonly<Record<string, number>>;
      try {
        prices = readPriceFile(path);
      } catch (err) {
        if (!isCleanError(err)) throw err;
        return (err as Error).message.includes(path);
      }
      return (
        Object.keys(prices).every((gpu) => {
          const price = priceOf(prices, gpu);
          return (
            typeof price === 'number' &&
            Number.isFinite(price) &&
            price > 0 &&
            price <= MAX_PRICE_PER_GPU_HOUR
          );
        }) &&
        // No key but its own: Object.prototype's names price nothing.
        ['constructor', 'toString', 'valueOf'].every(
          (gpu) => Object.hasOwn(prices, gpu) || priceOf(prices, gpu) === undefined,
        )
      );
    },
  ),
);

const VALID_GPU_SPEC = {
  name: 'Custom 64',
  memoryGB: 64,
  bandwidthTBps: 2.5,
  peakTflops: { bf16: 500, int8: 1000 },
  interconnect: { kind: 'nvlink', name: 'NVLink X', busGBps: 300, latencyUs: 0.5 },
};
type SpecPath = readonly string[];
const SPEC_PATHS: SpecPath[] = [
  ['id'],
  ['name'],
  ['family'],
  ['memoryGB'],
  ['memoryGiB'],
  ['bandwidthTBps'],
  ['peakTflops'],
  ['peakTflops', 'bf16'],
  ['peakTflops', 'fp8'],
  ['peakTflops', 'fp4'],
  ['interconnect'],
  ['interconnect', 'kind'],
  ['interconnect', 'busGBps'],
  ['interconnect', 'latencyUs'],
  ['interconnect', 'peerAccess'],
  ['constructor'],
  ['__proto__'],
  ['interconnect', 'toString'],
];
/** One change to a spec: a field set to any value, or removed. */
const specMutation = fc.tuple(
  fc.constantFrom(...SPEC_PATHS),
  fc.option(
    fc.oneof(
      // Datasheet figures off by an exponent or a unit: what a spec's bounds are for.
      { weight: 2, arbitrary: fc.constantFrom(1e300, 1e-300, 1e20, 1e-20, 0, -1, Number.NaN) },
      tableValue,
    ),
    { nil: undefined },
  ),
);

/** The spec with each mutation applied (a copy; `__proto__` set as an own key, as YAML reads it). */
function mutateSpec(mutations: [SpecPath, unknown][]): unknown {
  const spec = structuredClone(VALID_GPU_SPEC) as Record<string, unknown>;
  for (const [path, value] of mutations) {
    let at: Record<string, unknown> = spec;
    for (const key of path.slice(0, -1)) {
      const next = at[key];
      if (typeof next !== 'object' || next === null || Array.isArray(next)) break;
      at = next as Record<string, unknown>;
    }
    const last = path[path.length - 1];
    if (value === undefined) delete at[last];
    else
      Object.defineProperty(at, last, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return spec;
}

const finitePositive = (n: unknown) => typeof n === 'number' && Number.isFinite(n) && n > 0;

define(
  {
    group: 'inputs',
    name: 'GPU spec files: a mutated spec is a GPU of finite, positive figures, or a clean error naming a field',
    numRuns: 300,
  },
  fc.property(
    fc.array(specMutation, { minLength: 1, maxLength: 4 }),
    fc.boolean(),
    (mutations, yaml) => {
      const path = tableFile(asFileText(mutateSpec(mutations), yaml));
      let spec: ReturnType<typeof loadGpuSpec>;
      try {
        spec = loadGpuSpec(path);
      } catch (err) {
        if (!isCleanError(err)) throw err;
        const message = (err as Error).message;
        // The file, then a field (`peakTflops.bf16: ...`, `unknown field "x"`) or the top level.
        return (
          message.startsWith(`${path}: `) &&
          /: ([A-Za-z][\w.]*|\(top level\)): |unknown field "/.test(message)
        );
      }
      const figures = [
        spec.memoryBytes,
        spec.bandwidthBytesPerS,
        spec.interconnect.busBytesPerS,
        spec.interconnect.latencyS,
        ...Object.values(spec.peakFlops),
      ];
      if (!figures.every(finitePositive)) return false;
      // The simulator takes it as a GPU: an engine or problems, never a throw or a NaN.
      const resolved = resolveEngine({ model: 'llama-3-8b', gpuSpec: path });
      return resolved.engine !== undefined || resolved.problems.length > 0;
    },
  ),
);
