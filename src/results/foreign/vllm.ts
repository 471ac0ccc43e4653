/**
 * vLLM's `vllm bench serve` result JSON (vllm/benchmarks/serve.py; before it,
 * benchmarks/benchmark_serving.py) read as a run. With `--save-detailed` the file holds one
 * entry per request in parallel arrays (`ttfts`, `itls`, `input_lens`, `output_lens`,
 * `errors`, and since 2025 `start_times` and `latencies`), all in seconds: the records are
 * rebuilt from them and summarised as infergauge summarises its own runs. Without it, only the
 * run's statistics (in ms) remain: the summary is theirs, and the run is summary-only.
 */

import { type LoadSpec, MAX_CONCURRENCY } from '../../load.js';
import type { LatencySummary } from '../../metrics/summary.js';
import {
  type ErrorKind,
  MAX_RECORD_TIME_MS,
  MAX_REQUEST_EVENTS,
  type RequestRecord,
} from '../../record.js';
import { factText } from '../../telemetry/environment.js';
import {
  ForeignInputError,
  isObject,
  type Json,
  type StatsMs,
  shown,
  summaryOfRecords,
  summaryOfStats,
} from './build.js';
import type { ForeignRun } from './types.js';

/**
 * A vLLM result by its content: the counts and throughput every release writes, and its
 * latency statistics or per-request arrays (names no other format read here uses).
 */
export function isVllmBench(value: unknown): boolean {
  if (!isObject(value)) return false;
  return (
    typeof value.completed === 'number' &&
    'request_throughput' in value &&
    ('mean_ttft_ms' in value || 'ttfts' in value || 'mean_e2el_ms' in value)
  );
}

/** The arrays `--save-detailed` adds; a file without `ttfts` and `itls` is summary-only. */
const DETAIL_ARRAYS = ['ttfts', 'itls', 'input_lens', 'output_lens'] as const;

const NOTES = {
  percentiles:
    'vLLM computes percentiles with numpy (linear interpolation between closest ranks), as infergauge does; its median is our p50.',
  warmup:
    'vLLM sends one test request before the run (and --num-warmups more in recent releases) and leaves them out of the file; nothing in the file is warm-up.',
  ttft: 'vLLM times TTFT from just before the HTTP request to the first chunk with content, as infergauge times it from sentAt to the first token event.',
  itl: 'vLLM records ITL per streamed chunk; infergauge spreads each chunk gap over the tokens it carried: with one token per chunk they agree, with several vLLM’s ITL is larger.',
  tpot: 'vLLM’s TPOT is (latency - TTFT) / (output tokens - 1), so it includes the time from the last token to the end of the stream; infergauge’s ends at the last token.',
  failures:
    'vLLM leaves failed requests out of every latency statistic and counts them as `failed`, as infergauge does.',
  tokens:
    'vLLM counts output tokens by re-tokenising the generated text (or the server’s usage where it asks for it); the tokens of each chunk are not in the file and are spread evenly over its chunks.',
} as const;

function fail(source: string, what: string): never {
  throw new ForeignInputError(`${source}: not a readable vLLM bench serve result: ${what}`);
}

/** A non-negative finite number, or the damage named. */
function seconds(source: string, field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v * 1000 > MAX_RECORD_TIME_MS) {
    fail(source, `${field} is ${shown(v)}, not a time in seconds`);
  }
  return v;
}

function count(source: string, field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    fail(source, `${field} is ${shown(v)}, not a count`);
  }
  return v;
}

/** Whole microseconds, so that the records are as exact as infergauge's own. */
const us = (s: number) => Math.round(s * 1e6);

/**
 * Send times for a file without them, from its load: an open loop's arrivals at the mean rate,
 * held (as vLLM's semaphore holds them) until one of `max_concurrency` slots frees; a closed
 * loop's requests each sent when a slot frees. The slots' free times are a binary min-heap.
 */
class SlotClock {
  private readonly heap: number[] = [];
  private readonly cap: number;
  private readonly gapUs: number;
  private sent = 0;

  constructor(load: LoadSpec) {
    this.cap = load.mode === 'closed' ? load.concurrency : (load.maxConcurrency ?? Infinity);
    this.gapUs = load.mode === 'open' ? 1e6 / load.rate : 0;
  }

  /** When request `i` (in file order) is sent, in µs. */
  send(i: number): number {
    const arrival = Math.round(i * this.gapUs);
    this.sent = this.heap.length < this.cap ? arrival : Math.max(arrival, this.pop());
    return this.sent;
  }

  /** The request just sent ends at `endUs`: its slot frees then. */
  end(endUs: number): void {
    if (this.cap === Infinity) return;
    const h = this.heap;
    h.push(endUs);
    for (let i = h.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if ((h[parent] as number) <= (h[i] as number)) break;
      [h[parent], h[i]] = [h[i] as number, h[parent] as number];
      i = parent;
    }
  }

  private pop(): number {
    const h = this.heap;
    const top = h[0] as number;
    const last = h.pop() as number;
    if (h.length > 0) {
      h[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && (h[l] as number) < (h[m] as number)) m = l;
        if (r < h.length && (h[r] as number) < (h[m] as number)) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i] as number, h[m] as number];
        i = m;
      }
    }
    return top;
  }
}

/** vLLM's load as infergauge's: an unbounded rate is a burst held to max_concurrency. */
function loadOf(file: Json, requests: number): LoadSpec {
  const cap =
    typeof file.max_concurrency === 'number' && file.max_concurrency > 0
      ? Math.min(MAX_CONCURRENCY, Math.floor(file.max_concurrency))
      : undefined;
  const rate = file.request_rate;
  if (typeof rate === 'number' && Number.isFinite(rate) && rate > 0) {
    const burstiness = typeof file.burstiness === 'number' ? file.burstiness : 1;
    return {
      mode: 'open',
      rate,
      ...(burstiness === 1 ? { arrival: 'poisson' } : { arrival: 'gamma', burstiness }),
      ...(cap !== undefined ? { maxConcurrency: cap } : {}),
    };
  }
  return { mode: 'closed', concurrency: cap ?? Math.max(1, Math.min(MAX_CONCURRENCY, requests)) };
}

/**
 * vLLM keeps the error as text: aiohttp's reason phrase (`Bad Request`), an exception's
 * message or its traceback. Its kind is read from the text; what is not recognised is a
 * broken stream (the request started and did not end well).
 */
export function vllmErrorKind(message: string): ErrorKind {
  const m = message.toLowerCase();
  if (/timeout|timed out/.test(m)) return 'timeout';
  if (/cannot connect|connection refused|connect call failed|clientconnectorerror/.test(m)) {
    return 'connect';
  }
  if (/\b5\d\d\b|internal server error|bad gateway|service unavailable|gateway timeout/.test(m)) {
    return 'http_5xx';
  }
  if (
    /\b4\d\d\b|bad request|unauthorized|forbidden|not found|too many requests|unprocessable/.test(m)
  ) {
    return 'http_4xx';
  }
  if (/ssl|certificate/.test(m)) return 'tls';
  return 'stream_broken';
}

/** The run's date as ISO time: vLLM writes `%Y%m%d-%H%M%S` in the machine's local time. */
function dateOf(v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})$/.exec(v);
  return m ? `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}` : undefined;
}

function statsOf(file: Json, name: string): StatsMs | undefined {
  const get = (key: string) => {
    const v = file[key];
    return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
  };
  const stats: StatsMs = {};
  const set = (k: keyof StatsMs, v: number | undefined) => {
    if (v !== undefined) stats[k] = v;
  };
  set('mean', get(`mean_${name}_ms`));
  set('stddev', get(`std_${name}_ms`));
  set('p50', get(`median_${name}_ms`) ?? get(`p50_${name}_ms`));
  set('p90', get(`p90_${name}_ms`));
  set('p95', get(`p95_${name}_ms`));
  set('p99', get(`p99_${name}_ms`));
  set('p99_9', get(`p99.9_${name}_ms`));
  return Object.keys(stats).length > 0 ? stats : undefined;
}

/** Reads one parsed vLLM result; `source` names the file in messages and in the run. */
export function readVllmBench(file: Json, source: string): ForeignRun {
  const notes: string[] = [NOTES.percentiles, NOTES.warmup, NOTES.ttft];
  const model = factText(file.model_id) ?? factText(file.model);
  const completed = count(source, 'completed', file.completed);
  const failedField = file.failed === undefined ? undefined : count(source, 'failed', file.failed);
  const formatVersion =
    'failed' in file
      ? 'start_times' in file || 'latencies' in file
        ? 'serve.py (2025+)'
        : 'serve.py'
      : 'benchmark_serving.py (before 0.9)';
  const base = {
    format: 'vllm-bench' as const,
    formatVersion,
    source,
    ...(model !== undefined ? { model } : {}),
    ...(dateOf(file.date) ? { startedAt: dateOf(file.date) } : {}),
  };
  const detailed = file.ttfts !== undefined || file.itls !== undefined;
  if (!detailed) {
    const requests = completed + (failedField ?? 0);
    const load = loadOf(file, requests);
    const latency: Partial<Record<keyof LatencySummary, StatsMs>> = {};
    for (const [name, key] of [
      ['ttft', 'ttftMs'],
      ['tpot', 'tpotMs'],
      ['itl', 'itlMs'],
      ['e2el', 'e2eMs'],
    ] as const) {
      const stats = statsOf(file, name);
      if (stats) latency[key] = stats;
    }
    const summary = summaryOfStats({
      load,
      completed,
      failed: failedField ?? 0,
      durationS: seconds(source, 'duration', file.duration),
      inputTokens: count(source, 'total_input_tokens', file.total_input_tokens ?? 0),
      outputTokens: count(source, 'total_output_tokens', file.total_output_tokens ?? 0),
      latency,
    });
    notes.push(
      NOTES.itl,
      NOTES.tpot,
      NOTES.failures,
      'The file has no per-request arrays (vLLM saves them only with --save-detailed): its own statistics are read, summary-only; min, max and the percentiles it did not save are unknown.',
    );
    return { ...base, summary, perRequest: false, load, notes };
  }
  // Every detail array is one entry per request: a file whose arrays disagree is damaged.
  if (!Array.isArray(file.ttfts)) fail(source, 'ttfts is not an array');
  const n = file.ttfts.length;
  for (const key of [...DETAIL_ARRAYS, 'errors', 'start_times', 'latencies'] as const) {
    const v = file[key];
    if (v === undefined && key !== 'itls' && key !== 'ttfts') continue;
    if (!Array.isArray(v)) fail(source, `${key} is not an array`);
    if (v.length !== n) fail(source, `${key} has ${v.length} entries and ttfts ${n}`);
  }
  const ttfts = file.ttfts as unknown[];
  const itls = file.itls as unknown[];
  const inputLens = file.input_lens as unknown[] | undefined;
  const outputLens = file.output_lens as unknown[] | undefined;
  const errors = file.errors as unknown[] | undefined;
  const starts = file.start_times as unknown[] | undefined;
  const latencies = file.latencies as unknown[] | undefined;
  const load = loadOf(file, n);
  if (!starts) {
    notes.push(
      load.mode === 'closed'
        ? `The file has no start_times (vLLM saves them since 2025): the requests are replayed in file order on ${load.concurrency} slots (vLLM's max_concurrency), each sent when one frees, so the time axis and throughput are a reconstruction, not the run's clock.`
        : 'The file has no start_times (vLLM saves them since 2025): the requests are sent at the mean rate, evenly spaced (the Poisson or gamma arrival times are not in the file), so the time axis and throughput are a reconstruction, not the run’s clock.',
    );
  }
  if (!latencies) {
    notes.push(
      'The file has no per-request latencies: each request ends at its last chunk, so E2E leaves out the time from the last chunk to the end of the stream.',
    );
  }
  let origin = Number.POSITIVE_INFINITY;
  if (starts) {
    for (const [i, s] of starts.entries()) {
      origin = Math.min(origin, seconds(source, `start_times[${i}]`, s));
    }
  }
  const records: RequestRecord[] = [];
  const slots = new SlotClock(load);
  for (let i = 0; i < n; i++) {
    const sentUs = starts ? us((starts[i] as number) - origin) : slots.send(i);
    const inputTokens = inputLens ? count(source, `input_lens[${i}]`, inputLens[i]) : 0;
    const outputTokens = outputLens ? count(source, `output_lens[${i}]`, outputLens[i]) : 0;
    const errorText = errors?.[i];
    const ttftS = seconds(source, `ttfts[${i}]`, ttfts[i]);
    const gaps = itls[i];
    if (!Array.isArray(gaps)) fail(source, `itls[${i}] is not a list`);
    if (gaps.length >= MAX_REQUEST_EVENTS) {
      fail(
        source,
        `itls[${i}] has ${gaps.length} gaps, past the ${MAX_REQUEST_EVENTS} events a request may hold`,
      );
    }
    const latencyS =
      latencies === undefined ? undefined : seconds(source, `latencies[${i}]`, latencies[i]);
    // A failure is a non-empty error; before vLLM kept the error text, a request with no first
    // chunk and no output.
    const failed =
      (typeof errorText === 'string' && errorText.length > 0) ||
      (errors === undefined && ttftS === 0 && outputTokens === 0 && gaps.length === 0);
    const base: RequestRecord = {
      id: i,
      phase: 'measure',
      scheduledAt: sentUs / 1000,
      sentAt: sentUs / 1000,
      endAt: sentUs / 1000,
      requestedInputTokens: inputTokens,
      requestedOutputTokens: outputTokens,
      ...(inputLens ? { inputTokens, inputTokensSource: 'tokenizer' as const } : {}),
      outputTokens: 0,
      outputTokensSource: 'tokenizer',
      events: { dtUs: [], tokens: [], contentChars: [] },
    };
    if (failed) {
      const message =
        factText(
          typeof errorText === 'string' ? errorText.split('\n').filter(Boolean).pop() : '',
        ) ?? 'failed (vLLM kept no error text)';
      const endUs = sentUs + us(latencyS ?? 0);
      records.push({
        ...base,
        endAt: endUs / 1000,
        error: { kind: vllmErrorKind(typeof errorText === 'string' ? errorText : ''), message },
      });
      slots.end(endUs);
      continue;
    }
    const dtUs = [us(ttftS)];
    for (const [j, g] of gaps.entries()) dtUs.push(us(seconds(source, `itls[${i}][${j}]`, g)));
    // The chunks' tokens are not in the file: the request's count spread evenly over its chunks,
    // the remainder on the first ones (one token a chunk, the usual stream, comes out exact).
    const chunks = dtUs.length;
    const tokens = dtUs.map(
      (_, j) => Math.floor(outputTokens / chunks) + (j < outputTokens % chunks ? 1 : 0),
    );
    const text = file.generated_texts as unknown[] | undefined;
    const chars = typeof text?.[i] === 'string' ? (text[i] as string).length : 0;
    const contentChars = dtUs.map(
      (_, j) => Math.floor(chars / chunks) + (j < chars % chunks ? 1 : 0),
    );
    const firstUs = sentUs + dtUs[0];
    let lastUs = sentUs;
    for (const d of dtUs) lastUs += d;
    const endUs = latencyS === undefined ? lastUs : Math.max(lastUs, sentUs + us(latencyS));
    records.push({
      ...base,
      firstTokenAt: firstUs / 1000,
      firstContentAt: firstUs / 1000,
      lastTokenAt: lastUs / 1000,
      endAt: endUs / 1000,
      outputTokens,
      events: { dtUs, tokens, contentChars },
    });
    slots.end(endUs);
  }
  notes.push(NOTES.itl, NOTES.tpot, NOTES.failures, NOTES.tokens);
  return {
    ...base,
    records,
    summary: summaryOfRecords(records, load),
    perRequest: true,
    load,
    notes,
  };
}
