import { endianness } from 'node:os';
import { parseFlagNumber } from '../flagNumber.js';
import type { LoadSpec } from '../load.js';
import { type Better, catalogMetric, type MetricUnit } from '../metrics/catalog.js';
import { POOL_WAIT_LIMIT } from '../metrics/clientHealth.js';
import { percentileOfSorted } from '../metrics/distribution.js';
import { fmtNumber, fmtUpTo } from '../metrics/format.js';
import { forEachTokenGap, requestMetrics } from '../metrics/requestMetrics.js';
import type { Verdict as ValidityVerdict } from '../metrics/validity.js';
import type { RequestRecord } from '../record.js';
import { createRng } from '../rng.js';
import { streamSeed } from '../workload/distributions.js';
import { type CacheState, cacheStateText } from './prefixCache.js';
import { parseThresholds, type Threshold, thresholdProblems } from './thresholds.js';

/**
 * Runs compared side by side: every metric's change from a baseline A to a candidate B, with a
 * bootstrap confidence interval and a verdict (better, worse, no significant change). Pure
 * functions over raw records.
 *
 * The bootstrap resamples requests, never tokens, and resamples them in blocks of requests
 * consecutive in send time (a moving-window view of the run cut into pieces): requests in
 * flight together share the server's steps, so their latencies move together, and an
 * interval that treated them as independent would be too narrow (a closed loop's first wave,
 * all waiting for one prefill, can be a whole p99). See blockLength for the block size.
 * - Percentiles (TTFT, TPOT, E2E, output speed per request; ITL per token, each request's
 *   token gaps together) of a resample are numpy's linear interpolation over the resampled
 *   values, found by walking the sorted values near the original percentile with each block's
 *   multiplicity: O(blocks + walk) per resample, after one sort of a window of values.
 * - Run-level output and request throughput and the failure rate come from the resampled
 *   blocks' sums (see runStat for how throughput is resampled in closed and open loops).
 * A resample costs O(blocks), at most MAX_BLOCKS, whatever the run's length.
 */

export type { Better, MetricUnit };
export type Verdict = 'better' | 'worse' | 'no_change' | 'n/a';

export const VERDICT_TEXT: Record<Verdict, string> = {
  better: 'better',
  worse: 'worse',
  no_change: 'no significant change',
  'n/a': 'n/a',
};

/** Per-request metrics collected from records. */
export type RequestMetricKey = 'ttftMs' | 'tpotMs' | 'e2eMs' | 'outputSpeedTokS';

/**
 * Connection phases per request (docs/metrics.md, "Connection phases"): pool wait of every
 * request the pool sent, TLS handshake of those that opened a TLS connection.
 */
export type PhaseMetricKey = 'poolWaitMs' | 'tlsMs';

export type RunStat = 'outputThroughput' | 'requestThroughput' | 'failureRate' | 'newConnections';

export type MetricSource =
  | { kind: 'request'; key: RequestMetricKey; q: number }
  | { kind: 'phase'; key: PhaseMetricKey; q: number }
  | { kind: 'itl'; q: number }
  | { kind: 'run'; stat: RunStat };

export interface MetricDefinition {
  /** Stable id, e.g. `ttft.p50`, `outputThroughput`. */
  id: string;
  label: string;
  unit: MetricUnit;
  better: Better;
  source: MetricSource;
  /**
   * The smallest change that counts: relative to the baseline (0.01 = 1 %), and at least `floor`
   * in the metric's unit where one is given (a time that is often near 0, as pool wait, whose
   * doubling from microseconds is no change); or absolute in the metric's unit for a rate that
   * is often 0 (the failure rate).
   */
  practical: { relative: number; floor?: number } | { absolute: number };
}

/** The smallest relative change that counts, by default. */
export const DEFAULT_MIN_EFFECT = 0.01;

/** Failure rate: a change under 0.1 percentage points never counts. */
const FAILURE_RATE_MIN_CHANGE = 0.001;
/** New connections per request: likewise a rate that is often 0. */
const NEW_CONNECTIONS_MIN_CHANGE = 0.001;
/**
 * Connection phases' times: a change under the pool wait that client health begins to judge
 * (1 ms) never counts, however large relative to a baseline of microseconds.
 */
export const PHASE_MIN_CHANGE_MS = POOL_WAIT_LIMIT.minMs;

export function compareMetrics(minEffect = DEFAULT_MIN_EFFECT): MetricDefinition[] {
  const rel = { relative: minEffect };
  /** A percentile of a catalogue distribution: per request, or per token for ITL. */
  const percentile = (id: string, q: number, note = ''): MetricDefinition => {
    const m = catalogMetric(id);
    const source: MetricSource =
      m.kind === 'distribution' && m.requestKey
        ? { kind: 'request', key: m.requestKey as RequestMetricKey, q }
        : { kind: 'itl', q };
    return {
      id: `${id}.p${q}`,
      label: `${m.label} p${q}${note}`,
      unit: m.unit,
      better: m.better,
      source,
      practical: rel,
    };
  };
  const run = (
    id: 'outputThroughput' | 'requestThroughput' | 'failureRate',
    practical: MetricDefinition['practical'] = rel,
  ): MetricDefinition => {
    const m = catalogMetric(id);
    return {
      id,
      label: m.label,
      unit: m.unit,
      better: m.better,
      source: { kind: 'run', stat: id },
      practical,
    };
  };
  return [
    percentile('ttft', 50),
    percentile('ttft', 99),
    percentile('tpot', 50),
    percentile('tpot', 99),
    percentile('itl', 50),
    percentile('itl', 99),
    percentile('e2e', 50),
    percentile('e2e', 99),
    percentile('outputSpeed', 50),
    // The slow tail of a speed is its low end: p1 is what the slowest 1 % of requests read at.
    percentile('outputSpeed', 1, ' (slowest)'),
    run('outputThroughput'),
    run('requestThroughput'),
    run('failureRate', { absolute: FAILURE_RATE_MIN_CHANGE }),
  ];
}

/**
 * The connection phases' rows, lower better (docs/metrics.md, "Connection phases"): pool wait at
 * p50 and p99, the share of requests that opened a connection (a share, not a count, so that
 * runs of other lengths compare) and the TLS handshake's p50 over those that opened one.
 */
export function connectionMetrics(minEffect = DEFAULT_MIN_EFFECT): MetricDefinition[] {
  const practical = { relative: minEffect, floor: PHASE_MIN_CHANGE_MS };
  const phase = (key: PhaseMetricKey, id: string, label: string, q: number) => ({
    id: `${id}.p${q}`,
    label: `${label} p${q}`,
    unit: 'ms' as const,
    better: 'lower' as const,
    source: { kind: 'phase' as const, key, q },
    practical,
  });
  return [
    phase('poolWaitMs', 'poolWait', 'pool wait', 50),
    phase('poolWaitMs', 'poolWait', 'pool wait', 99),
    {
      id: 'newConnections',
      label: 'new connections per request',
      unit: 'fraction',
      better: 'lower',
      source: { kind: 'run', stat: 'newConnections' },
      practical: { absolute: NEW_CONNECTIONS_MIN_CHANGE },
    },
    phase('tlsMs', 'tls', 'TLS handshake', 50),
  ];
}

/**
 * The metrics two runs are compared on: every one of compareMetrics, and the connection phases'
 * where either run has them (records older than the phases have none: a run compared with such
 * a run shows them n/a; two such runs, not at all). TLS only where a connection shook hands.
 */
export function metricsFor(
  a: RunSample,
  b: RunSample,
  minEffect = DEFAULT_MIN_EFFECT,
): MetricDefinition[] {
  const phased = a.phasedRequests + b.phasedRequests > 0;
  const tls = hasValue(a.phases.tlsMs) || hasValue(b.phases.tlsMs);
  const phases = connectionMetrics(minEffect).filter((m) =>
    m.source.kind === 'phase' && m.source.key === 'tlsMs' ? tls : phased,
  );
  return [...compareMetrics(minEffect), ...phases];
}

function hasValue(values: Float64Array): boolean {
  for (let i = 0; i < values.length; i++) if (!Number.isNaN(values[i])) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Samples: what a comparison needs from a run's records, in typed arrays.
// ---------------------------------------------------------------------------------------------

class GrowableF64 {
  data = new Float64Array(256);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = v;
  }
  view(): Float64Array {
    return this.data.subarray(0, this.length);
  }
}

class GrowableU32 {
  data = new Uint32Array(256);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const grown = new Uint32Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = v;
  }
  view(): Uint32Array {
    return this.data.subarray(0, this.length);
  }
}

/** Entries per chunk of a ChunkedColumn (512 KiB of doubles). */
const CHUNK = 1 << 16;

/**
 * A growing column of numbers in fixed chunks: no spare capacity beyond one chunk and no copy
 * while it grows (a doubling array holds up to twice its length, and three times while it
 * grows); `done` joins the chunks into one array of exactly its length and lets them go.
 */
export class ChunkedColumn<T extends Float64Array | Uint8Array> {
  private chunks: T[] = [];
  private chunk: T;
  private at = 0;
  length = 0;

  constructor(private readonly make: (length: number) => T) {
    this.chunk = make(CHUNK);
  }

  static doubles(): ChunkedColumn<Float64Array> {
    return new ChunkedColumn((n) => new Float64Array(n));
  }

  static bytes(): ChunkedColumn<Uint8Array> {
    return new ChunkedColumn((n) => new Uint8Array(n));
  }

  push(v: number): void {
    if (this.at === CHUNK) {
      this.chunks.push(this.chunk);
      this.chunk = this.make(CHUNK);
      this.at = 0;
    }
    this.chunk[this.at++] = v;
    this.length++;
  }

  /** The values in one array of exactly their length; the column is empty after. */
  done(): T {
    const out = this.make(this.length);
    let offset = 0;
    for (const chunk of this.chunks) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    out.set(this.chunk.subarray(0, this.at), offset);
    this.chunks = [];
    this.chunk = this.make(CHUNK);
    this.at = 0;
    this.length = 0;
    return out;
  }
}

/** Token events kept for the per-token ITL of a comparison, at most (16 bytes each). */
export const MAX_ITL_EVENTS = 2_000_000;

/**
 * Per-token ITL of a run's requests, stored per token event (value in ms per token, and the
 * tokens it stands for) in bounded memory: past `budget` events, only every `every`-th request
 * keeps its events (`every` doubles each time the budget fills, the others' events are dropped),
 * so a run of any length costs at most `budget` events plus 4 bytes per request. Every request
 * keeps its slot: events of request i are [start[i], start[i + 1]).
 */
export class ItlEvents {
  readonly values = new GrowableF64();
  readonly tokens = new GrowableF64();
  private readonly starts = new GrowableU32();
  /** Requests whose events are kept: those whose index is a multiple of `every`. */
  every = 1;
  private keeping = false;

  constructor(readonly budget = MAX_ITL_EVENTS) {}

  get requests(): number {
    return this.starts.length;
  }

  /** Opens the next request's slot; true when its events are to be kept (`add` them). */
  begin(): boolean {
    this.keeping = this.starts.length % this.every === 0;
    this.starts.push(this.values.length);
    return this.keeping;
  }

  add(valueMs: number, tokens: number): void {
    if (!this.keeping) return;
    this.values.push(valueMs);
    this.tokens.push(tokens);
  }

  /** Closes the request's slot: thins the kept requests while the events exceed the budget. */
  end(): void {
    while (this.values.length > this.budget && this.every < this.starts.length) this.thin();
  }

  private thin(): void {
    this.every *= 2;
    const starts = this.starts.data;
    const n = this.starts.length;
    const values = this.values.data;
    const tokens = this.tokens.data;
    let w = 0;
    for (let i = 0; i < n; i++) {
      const from = starts[i];
      const to = i + 1 < n ? starts[i + 1] : this.values.length;
      starts[i] = w;
      if (i % this.every !== 0) continue;
      for (let e = from; e < to; e++, w++) {
        values[w] = values[e];
        tokens[w] = tokens[e];
      }
    }
    this.values.length = w;
    this.tokens.length = w;
  }

  /** Slot boundaries: `requests + 1` entries. */
  start(): Uint32Array {
    const out = new Uint32Array(this.starts.length + 1);
    out.set(this.starts.view());
    out[this.starts.length] = this.values.length;
    return out;
  }
}

/** Mean and variance of a stream (Welford). */
export interface Moments {
  n: number;
  mean: number;
  /** Population variance. */
  variance: number;
  min: number;
  max: number;
}

class MomentsBuilder {
  n = 0;
  mean = 0;
  m2 = 0;
  min = Number.POSITIVE_INFINITY;
  max = Number.NEGATIVE_INFINITY;
  add(x: number): void {
    this.n++;
    const d = x - this.mean;
    this.mean += d / this.n;
    this.m2 += d * (x - this.mean);
    if (x < this.min) this.min = x;
    if (x > this.max) this.max = x;
  }
  build(): Moments {
    return {
      n: this.n,
      mean: this.n > 0 ? this.mean : Number.NaN,
      variance: this.n > 0 ? this.m2 / this.n : Number.NaN,
      min: this.min,
      max: this.max,
    };
  }
}

/** A run's requests, reduced to what the comparison resamples. Counted requests only. */
export interface RunSample {
  /** Measured requests (warm-up excluded), failures included. */
  counted: number;
  completed: number;
  failed: number;
  /** Sum over segments (pooled repeats) of first sentAt to last endAt. */
  durationMs: number;
  /** Sum of (endAt - sentAt) over counted requests. */
  busyMs: number;
  /**
   * Per counted request, in the order read: each per-request metric, NaN where the request has
   * none (failed requests; TPOT and output speed of one-token answers).
   */
  request: Record<RequestMetricKey, Float64Array>;
  /** Per counted request: output tokens (0 when failed), busy ms, 1 when it failed. */
  outputTokens: Float64Array;
  busy: Float64Array;
  failedFlag: Uint8Array;
  /**
   * Per counted request, the connection phases (NaN where the request has none: records older
   * than the phases, a request never sent, TLS of one that opened no TLS connection)...
   */
  phases: Record<PhaseMetricKey, Float64Array>;
  /** ...and 0: the record has no phases, 1: it has, 2: it has and opened a connection. */
  connectionFlag: Uint8Array;
  /** Counted requests whose records carry the phases. */
  phasedRequests: number;
  /** Counted requests in the order they were sent (pooled runs one after another). */
  sendOrder: Uint32Array;
  /** Per-token ITL, stored per token event: value (ms per token) and tokens it stands for. */
  itlValue: Float64Array;
  /** Tokens of each event: Float64, as a count read from an old record may exceed 2^32. */
  itlTokens: Float64Array;
  /** Events of counted request i are [itlStart[i], itlStart[i + 1]). */
  itlStart: Uint32Array;
  /**
   * 1 when every request's token events are kept; k when only every k-th request's are (a run
   * with more than MAX_ITL_EVENTS token events: ITL is then taken over those requests).
   */
  itlEvery: number;
  requestedInput: Moments;
  requestedOutput: Moments;
  /** Runs pooled into this sample (repeats of a sweep level); 1 for a plain run. */
  segments: number;
}

/**
 * Collects a RunSample record by record (bounded per request: a few numbers plus one entry per
 * token event). Call `segment()` between pooled runs (repeats of a sweep level).
 */
export class RunSampleBuilder {
  private readonly request: Record<RequestMetricKey, ChunkedColumn<Float64Array>> = {
    ttftMs: ChunkedColumn.doubles(),
    tpotMs: ChunkedColumn.doubles(),
    e2eMs: ChunkedColumn.doubles(),
    outputSpeedTokS: ChunkedColumn.doubles(),
  };
  private readonly outputTokens = ChunkedColumn.doubles();
  private readonly busy = ChunkedColumn.doubles();
  private readonly sendKey = ChunkedColumn.doubles();
  private readonly failedFlag = ChunkedColumn.bytes();
  private readonly phases: Record<PhaseMetricKey, ChunkedColumn<Float64Array>> = {
    poolWaitMs: ChunkedColumn.doubles(),
    tlsMs: ChunkedColumn.doubles(),
  };
  private readonly connectionFlag = ChunkedColumn.bytes();
  private phasedRequests = 0;
  private readonly itl: ItlEvents;
  private readonly requestedInput = new MomentsBuilder();
  private readonly requestedOutput = new MomentsBuilder();
  private completed = 0;
  private failed = 0;
  private busyMs = 0;
  private closedDurationMs = 0;
  private windowStart = Number.POSITIVE_INFINITY;
  private windowEnd = Number.NEGATIVE_INFINITY;
  private segments = 1;
  /** Send times of later segments sort after earlier ones. */
  private sendOffset = 0;
  private lastSend = 0;

  /** `maxItlEvents`: token events kept for ITL (see ItlEvents). */
  constructor(maxItlEvents = MAX_ITL_EVENTS) {
    this.itl = new ItlEvents(maxItlEvents);
  }

  add(record: RequestRecord): void {
    if (record.phase === 'warmup') return;
    this.windowStart = Math.min(this.windowStart, record.sentAt);
    this.windowEnd = Math.max(this.windowEnd, record.endAt);
    const busy = record.endAt - record.sentAt;
    this.busyMs += busy;
    this.busy.push(busy);
    const key = this.sendOffset + Math.max(0, record.sentAt);
    this.sendKey.push(key);
    this.lastSend = Math.max(this.lastSend, key);
    const keepItl = this.itl.begin();
    this.requestedInput.add(record.requestedInputTokens);
    this.requestedOutput.add(record.requestedOutputTokens);
    // As summary.connections counts them: every counted request with the split, failures too.
    const phased = record.backlogMs !== undefined;
    if (phased) this.phasedRequests++;
    const poolWait = phased ? record.poolWaitMs : undefined;
    const tls = phased ? record.connection?.tlsMs : undefined;
    this.phases.poolWaitMs.push(poolWait ?? Number.NaN);
    this.phases.tlsMs.push(tls ?? Number.NaN);
    this.connectionFlag.push(phased ? (record.connection ? 2 : 1) : 0);
    if (record.error) {
      this.failed++;
      this.failedFlag.push(1);
      this.outputTokens.push(0);
      for (const key of REQUEST_KEYS) this.request[key].push(Number.NaN);
      this.itl.end();
      return;
    }
    this.completed++;
    this.failedFlag.push(0);
    this.outputTokens.push(record.outputTokens);
    const m = requestMetrics(record);
    for (const key of REQUEST_KEYS) this.request[key].push(m[key] ?? Number.NaN);
    if (keepItl) {
      const itl = this.itl;
      forEachTokenGap(record, (gapMs, tokens) => itl.add(gapMs / tokens, tokens));
    }
    this.itl.end();
  }

  /** Starts another run pooled into the same sample (its window adds to the duration). */
  segment(): void {
    if (Number.isFinite(this.windowStart)) {
      this.closedDurationMs += this.windowEnd - this.windowStart;
      this.segments++;
    }
    this.windowStart = Number.POSITIVE_INFINITY;
    this.windowEnd = Number.NEGATIVE_INFINITY;
    this.sendOffset = this.lastSend + 1;
  }

  /** The sample; the builder is spent after (its columns move into the sample). */
  build(): RunSample {
    const open = Number.isFinite(this.windowStart) ? this.windowEnd - this.windowStart : 0;
    return {
      counted: this.completed + this.failed,
      completed: this.completed,
      failed: this.failed,
      durationMs: this.closedDurationMs + open,
      busyMs: this.busyMs,
      request: {
        ttftMs: this.request.ttftMs.done(),
        tpotMs: this.request.tpotMs.done(),
        e2eMs: this.request.e2eMs.done(),
        outputSpeedTokS: this.request.outputSpeedTokS.done(),
      },
      outputTokens: this.outputTokens.done(),
      busy: this.busy.done(),
      failedFlag: this.failedFlag.done(),
      phases: { poolWaitMs: this.phases.poolWaitMs.done(), tlsMs: this.phases.tlsMs.done() },
      connectionFlag: this.connectionFlag.done(),
      phasedRequests: this.phasedRequests,
      sendOrder: sortedOrder(this.sendKey.done()),
      itlValue: this.itl.values.view(),
      itlTokens: this.itl.tokens.view(),
      itlStart: this.itl.start(),
      itlEvery: this.itl.every,
      requestedInput: this.requestedInput.build(),
      requestedOutput: this.requestedOutput.build(),
      segments: this.segments,
    };
  }
}

const REQUEST_KEYS: readonly RequestMetricKey[] = ['ttftMs', 'tpotMs', 'e2eMs', 'outputSpeedTokS'];

export function sampleRecords(records: Iterable<RequestRecord>): RunSample {
  const builder = new RunSampleBuilder();
  for (const r of records) builder.add(r);
  return builder.build();
}

// ---------------------------------------------------------------------------------------------
// Blocks of requests: the resampling unit.
// ---------------------------------------------------------------------------------------------

/** At most this many blocks (the cost of a resample is proportional to it). */
export const MAX_BLOCKS = 4096;
/** At least this many blocks where the run has that many requests. */
export const MIN_BLOCKS = 20;

/**
 * Requests per block: as many as were in flight together (the measured concurrency: requests
 * batched together share their steps, so their latencies move together) and at least the cube
 * root of the requests (the usual block length for a variance), within MIN_BLOCKS..MAX_BLOCKS
 * blocks.
 */
export function blockLength(requests: number, concurrency: number): number {
  if (requests <= 1) return 1;
  let b = Math.max(1, Math.ceil(concurrency), Math.ceil(Math.cbrt(requests)));
  b = Math.min(b, Math.max(1, Math.floor(requests / MIN_BLOCKS)));
  if (Math.ceil(requests / b) > MAX_BLOCKS) b = Math.ceil(requests / MAX_BLOCKS);
  return b;
}

interface Blocks {
  k: number;
  length: number;
  /** Block of each counted request. */
  of: Uint32Array;
  output: Float64Array;
  busy: Float64Array;
  completed: Float64Array;
  failed: Float64Array;
  counted: Float64Array;
  /** Requests with the connection phases, and those of them that opened a connection. */
  phased: Float64Array;
  opened: Float64Array;
}

function makeBlocks(sample: RunSample): Blocks {
  const n = sample.counted;
  const length = blockLength(n, measuredConcurrency(sample));
  const k = Math.max(1, Math.ceil(n / length));
  const of = new Uint32Array(n);
  for (let i = 0; i < n; i++) of[sample.sendOrder[i]] = Math.floor(i / length);
  const b: Blocks = {
    k,
    length,
    of,
    output: new Float64Array(k),
    busy: new Float64Array(k),
    completed: new Float64Array(k),
    failed: new Float64Array(k),
    counted: new Float64Array(k),
    phased: new Float64Array(k),
    opened: new Float64Array(k),
  };
  for (let i = 0; i < n; i++) {
    const j = of[i];
    b.output[j] += sample.outputTokens[i];
    b.busy[j] += sample.busy[i];
    b.counted[j] += 1;
    if (sample.failedFlag[i]) b.failed[j] += 1;
    else b.completed[j] += 1;
    const flag = sample.connectionFlag[i];
    if (flag > 0) b.phased[j] += 1;
    if (flag === 2) b.opened[j] += 1;
  }
  return b;
}

/**
 * The values one percentile metric is taken over, each with a weight (1 per request; tokens
 * for a per-token ITL event) and the block of its request.
 */
interface EventSet {
  values: Float64Array;
  /** Undefined: every weight is 1. */
  weights: Float64Array | undefined;
  block: Uint32Array;
  blockWeight: Float64Array;
  total: number;
  maxWeight: number;
}

function requestEvents(values: Float64Array, blocks: Blocks): EventSet {
  let count = 0;
  for (let i = 0; i < values.length; i++) if (!Number.isNaN(values[i])) count++;
  const v = new Float64Array(count);
  const block = new Uint32Array(count);
  const blockWeight = new Float64Array(blocks.k);
  for (let i = 0, e = 0; i < values.length; i++) {
    if (Number.isNaN(values[i])) continue;
    v[e] = values[i];
    block[e] = blocks.of[i];
    blockWeight[blocks.of[i]]++;
    e++;
  }
  return { values: v, weights: undefined, block, blockWeight, total: count, maxWeight: 1 };
}

function itlEvents(sample: RunSample, blocks: Blocks): EventSet {
  const { itlStart, itlTokens } = sample;
  const block = new Uint32Array(sample.itlValue.length);
  const blockWeight = new Float64Array(blocks.k);
  let total = 0;
  let maxWeight = 1;
  for (let i = 0; i < sample.counted; i++) {
    const j = blocks.of[i];
    for (let e = itlStart[i]; e < itlStart[i + 1]; e++) {
      block[e] = j;
      blockWeight[j] += itlTokens[e];
      total += itlTokens[e];
      if (itlTokens[e] > maxWeight) maxWeight = itlTokens[e];
    }
  }
  return { values: sample.itlValue, weights: itlTokens, block, blockWeight, total, maxWeight };
}

class WindowEscape extends Error {}

/**
 * The values near one percentile, sorted, with equal values of one block merged: enough to
 * find that percentile in any resample whose walk stays inside the window.
 */
interface Window {
  q: number;
  /** The percentile of the original values (numpy's linear interpolation, weights expanded). */
  value: number;
  values: Float64Array;
  blocks: Uint32Array;
  weights: Float64Array;
  /** Entry holding the original percentile's lower rank. */
  p0: number;
  /** Weight of each block in entries before p0 (below the window included). */
  beforeP0: Float64Array;
}

const LITTLE_ENDIAN = endianness() === 'LE';

/** Sorts `values` and returns the permutation: one native sort of packed keys where it can. */
function sortedOrder(values: Float64Array): Uint32Array {
  const n = values.length;
  const order = new Uint32Array(n);
  let nonNegative = LITTLE_ENDIAN;
  for (let i = 0; i < n && nonNegative; i++) if (!(values[i] >= 0)) nonNegative = false;
  if (!nonNegative || n > 2 ** 31) {
    for (let i = 0; i < n; i++) order[i] = i;
    return order.sort((a, b) => values[a] - values[b] || a - b);
  }
  // For doubles >= 0 the bit pattern orders like the value: replace the lowest `bits` bits of
  // the mantissa with the index, sort natively, read the index back. Values closer than
  // 2^(bits - 52) relative (2^-32 for a million) may swap, as ties would; no others.
  const bits = Math.max(1, Math.ceil(Math.log2(n + 1)));
  const mask = bits >= 32 ? 0xffffffff : (1 << bits) - 1;
  const keys = new Float64Array(n);
  const words = new Uint32Array(keys.buffer);
  for (let i = 0; i < n; i++) {
    keys[i] = values[i];
    words[2 * i] = ((words[2 * i] & ~mask) | i) >>> 0;
  }
  keys.sort();
  for (let i = 0; i < n; i++) order[i] = (words[2 * i] & mask) >>> 0;
  return order;
}

function buildWindow(set: EventSet, k: number, q: number, widen: number): Window | undefined {
  const { values, weights, block, total } = set;
  const events = values.length;
  if (total === 0) return undefined;
  const weight = weights ? (e: number) => weights[e] : () => 1;
  const r0 = (q / 100) * (total - 1);
  // A systematic sample of the (weight-expanded) values locates the window's edges roughly.
  const sampleSize = Math.min(events, 1 << 16);
  const sampled = new Float64Array(sampleSize);
  {
    let cum = 0;
    let s = 0;
    for (let e = 0; e < events && s < sampleSize; e++) {
      cum += weight(e);
      while (s < sampleSize && ((s + 0.5) * total) / sampleSize < cum) sampled[s++] = values[e];
    }
    sampled.sort();
  }
  const at = (p: number) => sampled[Math.min(sampleSize - 1, Math.max(0, Math.round(p)))];
  // How far a resample moves the percentile's rank: the spread of sum_j W_j (c_j - q t_j),
  // c_j a block's weight below the percentile, t_j its weight, W multinomial.
  const approx = at((q / 100) * (sampleSize - 1));
  const below = new Float64Array(k);
  for (let e = 0; e < events; e++) if (values[e] < approx) below[block[e]] += weight(e);
  let s1 = 0;
  let s2 = 0;
  for (let j = 0; j < k; j++) {
    const a = below[j] - (q / 100) * set.blockWeight[j];
    s1 += a;
    s2 += a * a;
  }
  const spread = Math.sqrt(Math.max(0, s2 - (s1 * s1) / k));
  const half = widen * (8 * spread + 8 * set.maxWeight + 32);
  const loRank = r0 - half;
  const hiRank = r0 + half;
  const clampP = (p: number) => Math.min(1, Math.max(0, p));
  const slack = (p: number) => 4 * Math.sqrt(sampleSize * clampP(p) * (1 - clampP(p))) + 2;
  const pLo = loRank / total;
  const pHi = hiRank / total;
  const xLo = loRank <= 0 ? Number.NEGATIVE_INFINITY : at(pLo * sampleSize - slack(pLo) * widen);
  const xHi =
    hiRank >= total - 1 ? Number.POSITIVE_INFINITY : at(pHi * sampleSize + slack(pHi) * widen);
  const full = xLo === Number.NEGATIVE_INFINITY && xHi === Number.POSITIVE_INFINITY;
  // Exact pass: the weight below the window per block, and the window's events.
  below.fill(0);
  let belowTotal = 0;
  let inside = 0;
  for (let e = 0; e < events; e++) {
    const v = values[e];
    if (v < xLo) {
      below[block[e]] += weight(e);
      belowTotal += weight(e);
    } else if (v <= xHi) inside++;
  }
  const wEvent = new Uint32Array(inside);
  const wValue = new Float64Array(inside);
  let windowWeight = 0;
  for (let e = 0, i = 0; e < events; e++) {
    const v = values[e];
    if (v >= xLo && v <= xHi) {
      wEvent[i] = e;
      wValue[i++] = v;
      windowWeight += weight(e);
    }
  }
  const needLo = Math.max(0, Math.floor(loRank));
  const needHi = Math.min(total, Math.ceil(hiRank) + 2);
  if (!full && (belowTotal > needLo || belowTotal + windowWeight < needHi)) {
    return buildWindow(set, k, q, widen * 2);
  }
  // Sort the window; merge equal values of one block (their order among themselves is moot).
  const order = sortedOrder(wValue);
  const scratch = new Float64Array(k);
  const touched: number[] = [];
  const outValue = new GrowableF64();
  const outBlock = new GrowableU32();
  const outWeight = new GrowableF64();
  for (let i = 0; i < order.length; ) {
    const v = wValue[order[i]];
    let j = i;
    while (j < order.length && wValue[order[j]] === v) {
      const e = wEvent[order[j]];
      const blk = block[e];
      if (scratch[blk] === 0) touched.push(blk);
      scratch[blk] += weight(e);
      j++;
    }
    for (const blk of touched) {
      outValue.push(v);
      outBlock.push(blk);
      outWeight.push(scratch[blk]);
      scratch[blk] = 0;
    }
    touched.length = 0;
    i = j;
  }
  const win = { values: outValue.view(), blocks: outBlock.view(), weights: outWeight.view() };
  // The original percentile, exactly.
  const lo = Math.floor(r0);
  const frac = r0 - lo;
  let cum = belowTotal;
  let p0 = 0;
  while (p0 < win.values.length && cum + win.weights[p0] <= lo) cum += win.weights[p0++];
  if (p0 >= win.values.length) return full ? undefined : buildWindow(set, k, q, widen * 2);
  const vLo = win.values[p0];
  let vHi = vLo;
  if (frac > 0 && lo + 1 >= cum + win.weights[p0] && lo + 1 <= total - 1) {
    if (p0 + 1 >= win.values.length) return buildWindow(set, k, q, widen * 2);
    vHi = win.values[p0 + 1];
  }
  const beforeP0 = below;
  for (let i = 0; i < p0; i++) beforeP0[win.blocks[i]] += win.weights[i];
  return { q, value: vLo + frac * (vHi - vLo), ...win, p0, beforeP0 };
}

/**
 * The percentile of a resample in which block j was drawn w[j] times (total weight `total`):
 * a walk from the original percentile; throws WindowEscape when it leaves the window.
 */
function resampledPercentile(win: Window, w: Uint32Array, total: number): number {
  if (total <= 0) return Number.NaN;
  const r = (win.q / 100) * (total - 1);
  const lo = Math.floor(r);
  const frac = r - lo;
  const { values, blocks, weights, beforeP0 } = win;
  const len = values.length;
  let cum = 0;
  for (let j = 0; j < beforeP0.length; j++) cum += w[j] * beforeP0[j];
  let i: number;
  let mass = 0;
  if (cum <= lo) {
    i = win.p0;
    for (;;) {
      if (i >= len) throw new WindowEscape();
      mass = w[blocks[i]] * weights[i];
      if (cum + mass > lo) break;
      cum += mass;
      i++;
    }
  } else {
    i = win.p0 - 1;
    for (;;) {
      if (i < 0) throw new WindowEscape();
      mass = w[blocks[i]] * weights[i];
      cum -= mass;
      if (cum <= lo) break;
      i--;
    }
  }
  const vLo = values[i];
  if (frac === 0 || lo + 1 > total - 1 || lo + 1 < cum + mass) return vLo;
  let j = i + 1;
  while (j < len && w[blocks[j]] * weights[j] === 0) j++;
  if (j >= len) throw new WindowEscape();
  return vLo + frac * (values[j] - vLo);
}

export interface BootstrapOptions {
  /** Confidence level of the intervals, e.g. 0.95. */
  confidence: number;
  resamples: number;
  seed: number;
  /** The smallest relative change that counts (0.01 = 1 %). */
  minEffect: number;
}

export const DEFAULT_BOOTSTRAP: BootstrapOptions = {
  confidence: 0.95,
  resamples: 2000,
  seed: 42,
  minEffect: DEFAULT_MIN_EFFECT,
};

/** `compare`'s options as typed. */
export interface CompareFlags {
  force?: boolean;
  threshold?: string[];
  confidence?: string;
  resamples?: string;
  seed?: string;
  minEffect?: string;
}

/**
 * What `compare` takes from its options and directories, checked: the bootstrap's settings, the
 * thresholds (read only when nothing is wrong), and each problem (exit 2).
 */
export function compareSettings(
  dirs: readonly string[],
  o: CompareFlags,
): {
  options: BootstrapOptions & { force: boolean };
  thresholds: Threshold[] | undefined;
  problems: string[];
} {
  const problems: string[] = [];
  const options = { ...bootstrapOptions(o, problems), force: o.force === true };
  problems.push(...thresholdProblems(o.threshold));
  if (dirs.length < 2) {
    problems.push(
      `give a baseline and at least one directory to compare with it (got ${dirs.length}): infergauge compare A B [C ...]`,
    );
  }
  const thresholds =
    problems.length === 0 && o.threshold?.length ? parseThresholds(o.threshold) : undefined;
  return { options, thresholds, problems };
}

/**
 * The bootstrap's settings from `compare`'s options as typed (a confidence as 0.95 or 95%, the
 * smallest effect in per cent); each one out of range is a problem naming its flag.
 */
function bootstrapOptions(o: CompareFlags, problems: string[]): BootstrapOptions {
  const number = (flag: string, text: string | undefined, fallback: number) => {
    if (text === undefined) return fallback;
    const n = parseFlagNumber(String(text).replace(/%$/, ''));
    if ('value' in n) return n.value;
    problems.push(`${flag} must be a number (got "${text}")`);
    return fallback;
  };
  let confidence = number('--confidence', o.confidence, DEFAULT_BOOTSTRAP.confidence);
  if (o.confidence !== undefined && (String(o.confidence).endsWith('%') || confidence > 1)) {
    confidence /= 100;
  }
  if (!(confidence >= 0.5 && confidence < 1)) {
    problems.push(
      `--confidence must be between 0.5 and 1, e.g. 0.95 or 95% (got "${o.confidence}")`,
    );
  }
  const resamples = number('--resamples', o.resamples, DEFAULT_BOOTSTRAP.resamples);
  if (!Number.isInteger(resamples) || resamples < 100 || resamples > 100_000) {
    problems.push(`--resamples must be a whole number from 100 to 100,000 (got "${o.resamples}")`);
  }
  const seed = number('--seed', o.seed, DEFAULT_BOOTSTRAP.seed);
  if (!Number.isInteger(seed) || seed < 0) {
    problems.push(`--seed must be a whole number >= 0 (got "${o.seed}")`);
  }
  const minEffect = number('--min-effect', o.minEffect, DEFAULT_BOOTSTRAP.minEffect * 100) / 100;
  if (!(minEffect >= 0 && minEffect < 1)) {
    problems.push(`--min-effect must be a percentage from 0 to 100, e.g. 1 (got "${o.minEffect}")`);
  }
  return { confidence, resamples, seed, minEffect };
}

/** A metric's value in one run and its bootstrap replicates. */
export interface MetricBootstrap {
  value: number;
  /** Samples behind it: requests with the metric, or tokens for ITL. */
  n: number;
  replicates: Float64Array;
  /** Requests per resampled block, and blocks. */
  blockLength: number;
  blocks: number;
}

/** Point estimates and bootstrap replicates of every metric of one run. */
export type RunBootstrap = Map<string, MetricBootstrap | undefined>;

const cache = new WeakMap<RunSample, Map<string, RunBootstrap>>();

/**
 * Every metric of `metrics` for one run with `resamples` bootstrap replicates; `stream` names
 * the random stream (the baseline and the candidates draw from different ones). Cached per
 * sample, so a baseline compared with several candidates is resampled once.
 */
export function bootstrapRun(
  sample: RunSample,
  mode: LoadSpec['mode'],
  metrics: readonly MetricDefinition[],
  options: Pick<BootstrapOptions, 'resamples' | 'seed'>,
  stream: string,
): RunBootstrap {
  const key = `${mode}:${options.resamples}:${options.seed}:${stream}:${metrics.map((m) => m.id).join(',')}`;
  let perSample = cache.get(sample);
  if (!perSample) {
    perSample = new Map();
    cache.set(sample, perSample);
  }
  const cached = perSample.get(key);
  if (cached) return cached;
  const result = blockBootstrap(
    sample,
    mode,
    metrics,
    options.resamples,
    streamSeed(options.seed, stream),
  );
  perSample.set(key, result);
  return result;
}

function blockBootstrap(
  sample: RunSample,
  mode: LoadSpec['mode'],
  metrics: readonly MetricDefinition[],
  B: number,
  seed: number,
): RunBootstrap {
  const out: RunBootstrap = new Map();
  if (sample.counted === 0) {
    for (const m of metrics) out.set(m.id, undefined);
    return out;
  }
  const blocks = makeBlocks(sample);
  const closed = mode === 'closed';
  const concurrency = measuredConcurrency(sample);
  const durationS = sample.durationMs / 1000;
  // One event set per source of values, shared by the metrics (p50 and p99) over it.
  const sets = new Map<string, EventSet>();
  const setOf = (m: MetricDefinition): EventSet | undefined => {
    const src = m.source;
    if (src.kind === 'run') return undefined;
    const name = src.kind === 'itl' ? 'itl' : `${src.kind}:${src.key}`;
    let set = sets.get(name);
    if (!set) {
      set =
        src.kind === 'itl'
          ? itlEvents(sample, blocks)
          : requestEvents(
              src.kind === 'phase' ? sample.phases[src.key] : sample.request[src.key],
              blocks,
            );
      sets.set(name, set);
    }
    return set;
  };
  const percentiles = metrics
    .filter((m) => m.source.kind !== 'run')
    .map((m) => ({ m, set: setOf(m) as EventSet, q: (m.source as { q: number }).q, widen: 1 }));
  const windows = percentiles.map((p) => buildWindow(p.set, blocks.k, p.q, p.widen));
  const setList = [...sets.values()];
  const setIndex = percentiles.map((p) => setList.indexOf(p.set));
  const runMetrics = metrics.filter((m) => m.source.kind === 'run');
  for (;;) {
    const rng = createRng(seed);
    const w = new Uint32Array(blocks.k);
    const totals = new Float64Array(setList.length);
    const runReplicates = runMetrics.map(() => new Float64Array(B));
    const pctReplicates = percentiles.map(() => new Float64Array(B));
    let escaped = -1;
    for (let b = 0; b < B && escaped < 0; b++) {
      w.fill(0);
      for (let i = 0; i < blocks.k; i++) w[rng.int(blocks.k)]++;
      const s: RunSums = {
        output: 0,
        busy: 0,
        completed: 0,
        failed: 0,
        counted: 0,
        phased: 0,
        opened: 0,
      };
      for (let j = 0; j < blocks.k; j++) {
        const x = w[j];
        if (x === 0) continue;
        s.output += x * blocks.output[j];
        s.busy += x * blocks.busy[j];
        s.completed += x * blocks.completed[j];
        s.failed += x * blocks.failed[j];
        s.counted += x * blocks.counted[j];
        s.phased += x * blocks.phased[j];
        s.opened += x * blocks.opened[j];
      }
      for (const [i, m] of runMetrics.entries()) {
        runReplicates[i][b] = runStat(
          (m.source as { stat: RunStat }).stat,
          s,
          closed,
          concurrency,
          durationS,
        );
      }
      for (let t = 0; t < setList.length; t++) {
        const bw = setList[t].blockWeight;
        let total = 0;
        for (let j = 0; j < blocks.k; j++) total += w[j] * bw[j];
        totals[t] = total;
      }
      for (let p = 0; p < percentiles.length; p++) {
        const win = windows[p];
        if (!win) {
          pctReplicates[p][b] = Number.NaN;
          continue;
        }
        try {
          pctReplicates[p][b] = resampledPercentile(win, w, totals[setIndex[p]]);
        } catch (err) {
          if (!(err instanceof WindowEscape)) throw err;
          escaped = p;
          break;
        }
      }
    }
    if (escaped >= 0) {
      // A resample walked off a window: widen it and start over with the same seed, so the
      // replicates do not depend on how wide the windows were.
      const p = percentiles[escaped];
      p.widen *= 4;
      windows[escaped] = buildWindow(p.set, blocks.k, p.q, p.widen);
      continue;
    }
    const info = { blockLength: blocks.length, blocks: blocks.k };
    for (const [i, m] of runMetrics.entries()) {
      const value = runStat(
        (m.source as { stat: RunStat }).stat,
        {
          output: sum(blocks.output),
          busy: sample.busyMs,
          completed: sample.completed,
          failed: sample.failed,
          counted: sample.counted,
          phased: sum(blocks.phased),
          opened: sum(blocks.opened),
        },
        closed,
        concurrency,
        durationS,
      );
      out.set(
        m.id,
        Number.isFinite(value)
          ? { value, n: sample.counted, replicates: runReplicates[i], ...info }
          : undefined,
      );
    }
    for (const [p, { m, set }] of percentiles.entries()) {
      const win = windows[p];
      out.set(
        m.id,
        win ? { value: win.value, n: set.total, replicates: pctReplicates[p], ...info } : undefined,
      );
    }
    return out;
  }
}

function sum(a: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i];
  return s;
}

/** Sums over a (resampled) set of requests' blocks, what runStat reads. */
interface RunSums {
  output: number;
  busy: number;
  completed: number;
  failed: number;
  counted: number;
  phased: number;
  opened: number;
}

/**
 * Run-level statistics of a (resampled) set of requests; on the original requests each equals
 * the summary's number.
 * - Closed loop: the concurrency is the load, held fixed; throughput is Little's law,
 *   L * sum(x) / sum(busy), L = busy / duration the measured concurrency: what the requests
 *   delivered per second of request time, times the requests in flight. It equals
 *   sum(x) / duration on the original requests, and varies with the requests' latencies.
 * - Open loop: the arrival rate is the load and the window is fixed; throughput is
 *   sum(x) / duration, which varies with the output lengths and failures of the requests.
 */
function runStat(
  stat: RunStat,
  s: RunSums,
  closed: boolean,
  concurrency: number,
  durationS: number,
): number {
  const perS = (x: number) =>
    closed
      ? s.busy > 0 && concurrency > 0
        ? (concurrency * x * 1000) / s.busy
        : Number.NaN
      : durationS > 0
        ? x / durationS
        : Number.NaN;
  switch (stat) {
    case 'outputThroughput':
      return perS(s.output);
    case 'requestThroughput':
      return perS(s.completed);
    case 'failureRate':
      return s.counted > 0 ? s.failed / s.counted : Number.NaN;
    // Over the requests whose records say (none in runs older than the phases: NaN, n/a).
    case 'newConnections':
      return s.phased > 0 ? s.opened / s.phased : Number.NaN;
  }
}

// ---------------------------------------------------------------------------------------------
// Deltas, intervals and verdicts.
// ---------------------------------------------------------------------------------------------

export interface ConfidenceInterval {
  /** Confidence level, e.g. 0.95. */
  level: number;
  /** Bounds of B - A, in the metric's unit. */
  low: number;
  high: number;
  /** Bounds of B / A - 1. */
  relativeLow: number;
  relativeHigh: number;
}

export interface MetricComparison {
  id: string;
  label: string;
  unit: MetricUnit;
  better: Better;
  baseline: number | null;
  candidate: number | null;
  /** candidate - baseline. */
  delta: number | null;
  /** candidate / baseline - 1. */
  relative: number | null;
  ci: ConfidenceInterval | null;
  verdict: Verdict;
  /** Why the verdict, in a sentence. */
  why: string;
  samples: { baseline: number; candidate: number };
  /** Too few samples for this percentile (p99 or p1 below 100, p50 below 10, runs below 20). */
  lowConfidence?: true;
}

/** The verdict rule: a change in the good direction, the interval excluding 0, big enough. */
export function verdictOf(
  m: Pick<MetricDefinition, 'better' | 'practical'> & { unit?: MetricUnit },
  delta: number,
  relative: number,
  ci: Pick<ConfidenceInterval, 'low' | 'high'>,
  minEffectText: string,
): { verdict: Verdict; why: string } {
  const up = ci.low > 0;
  const down = ci.high < 0;
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  if (!up && !down) {
    return { verdict: 'no_change', why: 'the confidence interval includes 0' };
  }
  if (Math.sign(delta) !== (up ? 1 : -1)) {
    return { verdict: 'no_change', why: 'the change and its interval disagree in direction' };
  }
  const floor = 'relative' in m.practical ? m.practical.floor : undefined;
  if (floor !== undefined && Math.abs(delta) < floor) {
    const unit = m.unit && m.unit !== 'fraction' ? ` ${m.unit}` : '';
    return {
      verdict: 'no_change',
      why: `significant but small: ${fmtUpTo(Math.abs(delta), 3)}${unit}, under ${fmtUpTo(floor, 3)}${unit}`,
    };
  }
  const practical =
    'relative' in m.practical
      ? Math.abs(relative) >= m.practical.relative
      : Math.abs(delta) >= m.practical.absolute;
  if (!practical) {
    return {
      verdict: 'no_change',
      why:
        'relative' in m.practical
          ? `significant but small: ${pct(Math.abs(relative))}, under ${minEffectText}`
          : `significant but small: ${(Math.abs(delta) * 100).toFixed(2)} percentage points, under ${(m.practical.absolute * 100).toFixed(1)}`,
    };
  }
  const improved = m.better === 'lower' ? down : up;
  return {
    verdict: improved ? 'better' : 'worse',
    why: `the confidence interval excludes 0 and the change is ${'relative' in m.practical ? pct(Math.abs(relative)) : `${(Math.abs(delta) * 100).toFixed(2)} percentage points`} (${m.better} is better)`,
  };
}

const MIN_SAMPLES_FOR = (q: number) => (q <= 1 || q >= 99 ? 100 : q <= 5 || q >= 95 ? 20 : 10);

/**
 * Every metric of B against A: deltas, intervals and verdicts. `modes` are the runs' load modes
 * (closed by default), which decide how run-level throughput is resampled (see runStat).
 */
export function compareSamples(
  a: RunSample,
  b: RunSample,
  options: Partial<BootstrapOptions> = {},
  modes: { baseline: LoadSpec['mode']; candidate: LoadSpec['mode'] } = {
    baseline: 'closed',
    candidate: 'closed',
  },
  /** The metrics to compare on (default: metricsFor's, every one `compare` prints). */
  only?: readonly MetricDefinition[],
): MetricComparison[] {
  const o = { ...DEFAULT_BOOTSTRAP, ...options };
  const metrics = only ?? metricsFor(a, b, o.minEffect);
  const ra = bootstrapRun(a, modes.baseline, metrics, o, 'baseline');
  const rb = bootstrapRun(b, modes.candidate, metrics, o, 'candidate');
  const minEffectText = `${(o.minEffect * 100).toFixed(o.minEffect * 100 < 1 ? 1 : 0)} %`;
  return metrics.map((m) => compareMetric(m, ra.get(m.id), rb.get(m.id), o, minEffectText));
}

function compareMetric(
  m: MetricDefinition,
  a: MetricBootstrap | undefined,
  b: MetricBootstrap | undefined,
  o: BootstrapOptions,
  minEffectText: string,
): MetricComparison {
  const base = {
    id: m.id,
    label: m.label,
    unit: m.unit,
    better: m.better,
    baseline: a ? a.value : null,
    candidate: b ? b.value : null,
    samples: { baseline: a?.n ?? 0, candidate: b?.n ?? 0 },
  };
  if (!a || !b) {
    return {
      ...base,
      delta: null,
      relative: null,
      ci: null,
      verdict: 'n/a',
      why: `${!a && !b ? 'neither run has' : !a ? 'the baseline has no' : 'the candidate has no'} ${m.label}`,
    };
  }
  const delta = b.value - a.value;
  const relative =
    a.value !== 0 ? b.value / a.value - 1 : delta === 0 ? 0 : Math.sign(delta) * Infinity;
  const deltas: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < a.replicates.length; i++) {
    const x = a.replicates[i];
    const y = b.replicates[i];
    if (Number.isNaN(x) || Number.isNaN(y)) continue;
    deltas.push(y - x);
    ratios.push(x !== 0 ? y / x - 1 : y === x ? 0 : Math.sign(y - x) * Infinity);
  }
  const lowConfidence = lowConfidenceOf(m, a.n, b.n);
  if (deltas.length < Math.min(20, a.replicates.length)) {
    return {
      ...base,
      delta,
      relative,
      ci: null,
      verdict: 'n/a',
      why: 'too few usable resamples for an interval',
      ...(lowConfidence ? { lowConfidence } : {}),
    };
  }
  const sortedDeltas = Float64Array.from(deltas).sort();
  const sortedRatios = Float64Array.from(ratios).sort();
  const tail = ((1 - o.confidence) / 2) * 100;
  const ci: ConfidenceInterval = {
    level: o.confidence,
    low: percentileOfSorted(sortedDeltas, tail),
    high: percentileOfSorted(sortedDeltas, 100 - tail),
    relativeLow: percentileOfSorted(sortedRatios, tail),
    relativeHigh: percentileOfSorted(sortedRatios, 100 - tail),
  };
  const { verdict, why } = verdictOf(m, delta, relative, ci, minEffectText);
  return {
    ...base,
    delta,
    relative,
    ci,
    verdict,
    why,
    ...(lowConfidence ? { lowConfidence } : {}),
  };
}

function lowConfidenceOf(m: MetricDefinition, na: number, nb: number): true | undefined {
  const need = m.source.kind === 'run' ? 20 : MIN_SAMPLES_FOR(m.source.q);
  return Math.min(na, nb) < need ? true : undefined;
}

// ---------------------------------------------------------------------------------------------
// Comparability: the same load and the same workload.
// ---------------------------------------------------------------------------------------------

/** What is known about how a run's requests were shaped (manifest.json, when there is one). */
export interface WorkloadFacts {
  endpoint?: string;
  backend?: string;
  /** The scenario's lengths without its name, e.g. `256 in / 128 out tokens`. */
  lengths?: string;
  dataset?: string;
  trace?: string;
  model?: string;
  tokenizer?: string;
  ignoreEos?: boolean;
  temperature?: number;
  /** The server, in words (the simulator's description, or its URL). */
  server?: string;
  /** A session run (multi-turn, agent): its load counts sessions, not requests. */
  sessions?: true;
}

/**
 * What else shaped a run's numbers beside its load and workload (manifest.json, summary.json):
 * what `unlikeReasons` reads. Every field is optional: older runs lack some.
 */
export interface RunConditions {
  seed?: number;
  /** The point's prompt salt; absent in runs made before salts, whose prompts are salt 0's. */
  promptSalt?: number;
  /**
   * The server outlives the run (a --url server), so what one run leaves in its prefix cache a
   * later run can find; the simulator a run starts itself, or virtual time, begins empty.
   */
  persistentServer?: boolean;
  /** The prompts are a dataset's entries, the same in every run whatever the seed and salt. */
  datasetPrompts?: boolean;
  /** The server's prefix-cache hit rate (0..1), over the runs behind the unit. */
  prefixCacheHitRate?: number;
  /** The state of the server's prefix cache the run started in (manifest `cacheState`). */
  cacheState?: CacheState;
  /** The client limited the load it could send (summary clientHealth.clientLimited). */
  clientLimited?: boolean;
  /** The built-in simulator's engine flags, as given. */
  simulatorArgs?: string[];
  /** The validity verdict of the runs behind the unit (the worst), with its reasons' codes. */
  validity?: { verdict: ValidityVerdict; codes: string[] };
  /** The server as the manifest records it (engine, version, GPUs, --server-info). */
  environment?: RunEnvironment;
}

/** What the manifest's `server` says about the environment, as text (src/session/serverEngine.ts). */
export interface RunEnvironment {
  engine?: string;
  engineVersion?: string;
  /** `2x NVIDIA H100 80GB HBM3`. */
  gpu?: string;
  /** `--server-info KEY=VALUE`, as given. */
  serverInfo?: Record<string, string>;
}

/** One measured run (a run directory, a scenario of one, or a sweep point) ready to compare. */
export interface RunUnit {
  /** Where it came from, e.g. `runs/h100` or `sweeps/a/chat/c16`. */
  label: string;
  scenario: string;
  load: LoadSpec;
  workload: WorkloadFacts;
  sample: RunSample;
  conditions?: RunConditions;
}

export function measuredConcurrency(sample: RunSample): number {
  return sample.durationMs > 0 ? sample.busyMs / sample.durationMs : 0;
}

/** A short key for a load: `c16`, `r2.5`. */
export function loadKey(load: LoadSpec): string {
  return load.mode === 'closed' ? `c${load.concurrency}` : `r${Number(load.rate.toPrecision(6))}`;
}

/** The load as configured, without the measured part: `16 concurrent requests` (or sessions). */
export function describeConfiguredLoad(load: LoadSpec, sessions = false): string {
  const unit = sessions ? 'session' : 'request';
  if (load.mode === 'closed') {
    return `${fmtUpTo(load.concurrency)} concurrent ${unit}${load.concurrency === 1 ? '' : 's'}`;
  }
  const cap =
    load.maxConcurrency !== undefined ? `, at most ${fmtUpTo(load.maxConcurrency)} in flight` : '';
  if (load.arrival === 'trace') {
    const t = load.trace as { speed?: number; source?: string } | undefined;
    return `trace replay at ${fmtUpTo(t?.speed ?? 1)}x${cap}`;
  }
  const kind =
    load.arrival === 'gamma'
      ? `gamma arrivals (burstiness ${fmtUpTo(load.burstiness ?? 1)})`
      : `${load.arrival} arrivals`;
  const ramp = load.rampUp
    ? `ramping ${fmtUpTo(load.rampUp.fromRate)} -> ${fmtUpTo(load.rate)} ${unit}s/s over ${fmtUpTo(load.rampUp.seconds)} s`
    : `${fmtUpTo(load.rate)} ${unit}s/s`;
  return `${ramp} ${kind}${cap}`;
}

/** `both at 16 concurrent requests (measured 15.4 / 15.6)`, or each load when they differ. */
export function describeLoads(a: RunUnit, b: RunUnit): string {
  const la = describeConfiguredLoad(a.load, a.workload.sessions);
  const lb = describeConfiguredLoad(b.load, b.workload.sessions);
  const one = (x: number) => fmtNumber(x, 1);
  const ma = one(measuredConcurrency(a.sample));
  const mb = one(measuredConcurrency(b.sample));
  const measured =
    a.load.mode === 'closed' && !a.workload.sessions
      ? 'measured'
      : `measured concurrency${a.workload.sessions ? ' in requests' : ''}`;
  if (la === lb) return `both at ${la} (${measured} ${ma} / ${mb})`;
  return `A at ${la} (measured concurrency ${ma}), B at ${lb} (measured concurrency ${mb})`;
}

export interface Comparability {
  /** Why the runs are not comparable; empty when they are. */
  differences: string[];
  /** Differences that do not prevent a comparison but belong next to it. */
  notes: string[];
}

const sameNumber = (x: number | undefined, y: number | undefined) =>
  x === y ||
  (x !== undefined && y !== undefined && Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(x)));

function loadDifferences(a: LoadSpec, b: LoadSpec): string[] {
  const out: string[] = [];
  if (a.mode !== b.mode) {
    out.push(
      `different load: A runs a ${a.mode} loop (${describeConfiguredLoad(a)}), B a ${b.mode} loop (${describeConfiguredLoad(b)})`,
    );
    return out;
  }
  if (a.mode === 'closed' && b.mode === 'closed') {
    if (a.concurrency !== b.concurrency) {
      out.push(`different load: A at ${a.concurrency} concurrent requests, B at ${b.concurrency}`);
    }
    return out;
  }
  if (a.mode !== 'open' || b.mode !== 'open') return out;
  if (a.arrival !== b.arrival) out.push(`different arrivals: A ${a.arrival}, B ${b.arrival}`);
  if (!sameNumber(a.rate, b.rate)) {
    out.push(`different load: A at ${fmtUpTo(a.rate)} requests/s, B at ${fmtUpTo(b.rate)}`);
  }
  if (!sameNumber(a.burstiness, b.burstiness) && (a.arrival === 'gamma' || b.arrival === 'gamma')) {
    out.push(`different burstiness: A ${a.burstiness ?? 1}, B ${b.burstiness ?? 1}`);
  }
  if (!sameNumber(a.maxConcurrency, b.maxConcurrency)) {
    out.push(
      `different cap on requests in flight: A ${a.maxConcurrency ?? 'none'}, B ${b.maxConcurrency ?? 'none'}`,
    );
  }
  const ramp = (l: typeof a) =>
    l.rampUp ? `${l.rampUp.fromRate}->${l.rate} over ${l.rampUp.seconds} s` : 'none';
  if (ramp(a) !== ramp(b)) out.push(`different ramp-up: A ${ramp(a)}, B ${ramp(b)}`);
  const trace = (l: typeof a) => {
    const t = l.trace as { source?: string; speed?: number } | undefined;
    return t ? `${baseName(t.source ?? '?')} at ${t.speed ?? 1}x` : 'none';
  };
  if (trace(a) !== trace(b)) out.push(`different trace: A ${trace(a)}, B ${trace(b)}`);
  return out;
}

function baseName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

/**
 * Whether requested token counts differ beyond chance: means further apart than 1 % and than
 * four standard errors of their difference (the same random distribution drawn with two seeds
 * passes; fixed lengths must match).
 */
function lengthsDiffer(a: Moments, b: Moments): boolean {
  if (a.n === 0 || b.n === 0) return false;
  const diff = Math.abs(a.mean - b.mean);
  const se = Math.sqrt(a.variance / a.n + b.variance / b.n);
  return diff > Math.max(0.01 * Math.max(Math.abs(a.mean), Math.abs(b.mean)), 4 * se, 1e-9);
}

const describeMoments = (m: Moments) =>
  m.min === m.max
    ? fmtUpTo(m.mean, 1)
    : `mean ${fmtUpTo(m.mean, 1)} (${fmtUpTo(m.min, 0)}-${fmtUpTo(m.max, 0)})`;

/** Refuses different loads and workloads; notes other differences (model, server, tokenizer). */
export function checkComparable(a: RunUnit, b: RunUnit): Comparability {
  const differences = loadDifferences(a.load, b.load);
  const wa = a.workload;
  const wb = b.workload;
  if (wa.endpoint && wb.endpoint && wa.endpoint !== wb.endpoint) {
    differences.push(`different endpoint: A ${wa.endpoint}, B ${wb.endpoint}`);
  }
  if (wa.lengths && wb.lengths && wa.lengths !== wb.lengths) {
    differences.push(`different workload: A asks ${wa.lengths}, B ${wb.lengths}`);
  }
  if ((wa.dataset ?? '') !== (wb.dataset ?? '') && (wa.dataset || wb.dataset)) {
    differences.push(`different dataset: A ${wa.dataset ?? 'none'}, B ${wb.dataset ?? 'none'}`);
  }
  if ((wa.trace ?? '') !== (wb.trace ?? '') && (wa.trace || wb.trace)) {
    differences.push(`different trace: A ${wa.trace ?? 'none'}, B ${wb.trace ?? 'none'}`);
  }
  const sa = a.sample;
  const sb = b.sample;
  for (const [what, ma, mb] of [
    ['input', sa.requestedInput, sb.requestedInput],
    ['output', sa.requestedOutput, sb.requestedOutput],
  ] as const) {
    if (lengthsDiffer(ma, mb)) {
      differences.push(
        `different workload: requested ${what} tokens per request A ${describeMoments(ma)}, B ${describeMoments(mb)}`,
      );
    }
  }
  const notes: string[] = [];
  const note = (what: string, x: unknown, y: unknown) => {
    if (x !== undefined && y !== undefined && x !== y)
      notes.push(`${what}: A ${String(x)}, B ${String(y)}`);
  };
  note('model', wa.model, wb.model);
  note('server', wa.server, wb.server);
  note('backend', wa.backend, wb.backend);
  note('tokenizer', wa.tokenizer, wb.tokenizer);
  note('ignore_eos', wa.ignoreEos, wb.ignoreEos);
  note('temperature', wa.temperature, wb.temperature);
  if (a.scenario !== b.scenario) notes.push(`scenario: A ${a.scenario}, B ${b.scenario}`);
  const la = measuredConcurrency(sa);
  const lb = measuredConcurrency(sb);
  if (la > 0 && lb > 0 && Math.abs(la / lb - 1) > 0.02) {
    notes.push(
      `measured concurrency differs (A ${la.toFixed(1)}, B ${lb.toFixed(1)}): throughput follows it (a short closed-loop run spends more of its time filling and draining)`,
    );
  }
  for (const [name, s] of [
    ['A', sa],
    ['B', sb],
  ] as const) {
    if (s.counted === 0) notes.push(`${name} has no counted request`);
    else if (s.completed < 100) {
      notes.push(
        `${name} has only ${s.completed} completed requests: p99 needs 100 to be resolved`,
      );
    }
    if (s.itlEvery > 1) {
      notes.push(
        `${name}'s ITL is taken over every ${ordinal(s.itlEvery)} request (${fmtNumber(s.itlValue.length)} token events kept of a run too long to hold them all)`,
      );
    }
  }
  return { differences, notes };
}

/**
 * Why two runs of the same load and workload are still not like for like, by stable code. They
 * qualify the verdicts (beside them and in their summary line), not refuse them as different
 * loads do: the comparison may still be what the user wants, but must not read as clean.
 */
export type UnlikeCode =
  | 'prefix_cache_differs'
  | 'identical_prompts'
  | 'client_limited_run'
  | 'simulator_differs'
  | 'cache_state_differs';

export interface UnlikeReason {
  code: UnlikeCode;
  /** One sentence with the figures. */
  text: string;
  /** A few words for the verdicts' summary line. */
  short: string;
}

/** Hit rates further apart than this (5 percentage points) changed what prefill cost. */
export const PREFIX_CACHE_DIFFERENCE = 0.05;

const pctText = (x: number) => `${fmtNumber(x * 100, x > 0 && x < 0.01 ? 2 : 0)} %`;

/**
 * Why a comparison is not like for like beyond load and workload (checkComparable refuses
 * those): a server prefix cache that served one run and not the other, the same prompts sent
 * twice to a server that caches them, a client that limited either run, a differently
 * configured simulator. Different seeds or prompt salts are not a reason: with the workload
 * otherwise equal they change which words are sent and when arrivals fall, which is the sampling
 * the confidence intervals are about; lengths drawn differently are refused by checkComparable
 * already, and a dataset's entries are taken in file order whatever the seed.
 */
export function unlikeReasons(a: RunUnit, b: RunUnit): UnlikeReason[] {
  const ca = a.conditions ?? {};
  const cb = b.conditions ?? {};
  const reasons: UnlikeReason[] = [];
  const ha = ca.prefixCacheHitRate;
  const hb = cb.prefixCacheHitRate;
  if (ha !== undefined && hb !== undefined && Math.abs(ha - hb) > PREFIX_CACHE_DIFFERENCE) {
    const more = hb > ha ? 'B' : 'A';
    reasons.push({
      code: 'prefix_cache_differs',
      text: `the server's prefix-cache hit rate was A ${pctText(ha)}, B ${pctText(hb)}: more of ${more}'s prompts were prefilled from the cache, so its TTFT is not like for like`,
      short: `prefix-cache hit rate A ${pctText(ha)}, B ${pctText(hb)}`,
    });
  }
  const persistent = ca.persistentServer === true && cb.persistentServer === true;
  const samePrompts =
    (ca.datasetPrompts === true && cb.datasetPrompts === true) ||
    (ca.seed !== undefined &&
      ca.seed === cb.seed &&
      (ca.promptSalt ?? 0) === (cb.promptSalt ?? 0) &&
      !ca.datasetPrompts &&
      !cb.datasetPrompts);
  if (persistent && samePrompts) {
    const caching = (ha ?? 0) > 0 || (hb ?? 0) > 0;
    const known = ha !== undefined || hb !== undefined;
    const why = ca.datasetPrompts
      ? 'the same dataset entries'
      : `the same prompts (seed ${ca.seed}, prompt salt ${ca.promptSalt ?? 'none'})`;
    if (caching) {
      reasons.push({
        code: 'identical_prompts',
        text: `both runs sent ${why} to a server that caches prefixes: the later run can prefill from what the earlier one left (a fresh --prompt-salt, the default, avoids it)`,
        short: 'identical prompts to a server that caches prefixes',
      });
    } else if (!known) {
      reasons.push({
        code: 'identical_prompts',
        text: `both runs sent ${why} to the same server, whose prefix-cache counters were not read: if it caches prefixes, the later run prefilled from the earlier one's`,
        short: 'identical prompts to a server that may cache prefixes',
      });
    }
  }
  const limited = [ca.clientLimited ? 'A' : '', cb.clientLimited ? 'B' : ''].filter(Boolean);
  if (limited.length > 0) {
    const who = limited.join(' and ');
    reasons.push({
      code: 'client_limited_run',
      text: `the client limited ${who} (see the run's client health): ${limited.length > 1 ? 'their' : 'its'} numbers measure the client as much as the server`,
      short: `client-limited ${who}`,
    });
  }
  const sa = ca.simulatorArgs;
  const sb = cb.simulatorArgs;
  if (sa && sb && sa.join('\u0000') !== sb.join('\u0000')) {
    const args = (x: string[]) => (x.length > 0 ? x.join(' ') : '(defaults)');
    reasons.push({
      code: 'simulator_differs',
      text: `the simulator ran with other arguments: A ${args(sa)}, B ${args(sb)}`,
      short: 'different simulator arguments',
    });
  }
  const sta = ca.cacheState && cacheStateText(ca.cacheState);
  const stb = cb.cacheState && cacheStateText(cb.cacheState);
  if (sta && stb && sta !== stb) {
    reasons.push({
      code: 'cache_state_differs',
      text: `the runs started with the server's prefix cache in different states: A ${sta}, B ${stb}, so what prefill cost is not like for like`,
      short: `prefix cache A ${sta}, B ${stb}`,
    });
  }
  return reasons;
}

/** One way the two runs' servers differ, as a fact: `server version 0.8.5 -> 0.9.0`. */
export interface EnvironmentChange {
  field: 'engine' | 'engineVersion' | 'gpu' | 'serverInfo';
  /** The --server-info key, for `serverInfo`. */
  key?: string;
  /** Absent where that run did not give the key (serverInfo only). */
  baseline?: string;
  candidate?: string;
  text: string;
}

/**
 * How the two runs' environments differ: the engine, its version and the GPUs where both
 * manifests record them (a run made before they were recorded says nothing), and every
 * --server-info key whose value differs, or that one run gave and the other did not. These are
 * facts beside the verdicts (a version change is often what is being compared), not reasons to
 * doubt them, and never a refusal.
 */
export function environmentChanges(a: RunUnit, b: RunUnit): EnvironmentChange[] {
  const ea = a.conditions?.environment ?? {};
  const eb = b.conditions?.environment ?? {};
  const changes: EnvironmentChange[] = [];
  const both = (field: 'engine' | 'engineVersion' | 'gpu', words: string): void => {
    const x = ea[field];
    const y = eb[field];
    if (x === undefined || y === undefined || x === y) return;
    changes.push({ field, baseline: x, candidate: y, text: `${words} ${x} -> ${y}` });
  };
  both('engine', 'engine');
  both(
    'engineVersion',
    ea.engine !== undefined && ea.engine === eb.engine ? `${ea.engine} version` : 'server version',
  );
  both('gpu', 'GPUs');
  const ia = ea.serverInfo;
  const ib = eb.serverInfo;
  if (ia || ib) {
    const keys = [...new Set([...Object.keys(ia ?? {}), ...Object.keys(ib ?? {})])];
    for (const key of keys) {
      const x = ia && Object.hasOwn(ia, key) ? ia[key] : undefined;
      const y = ib && Object.hasOwn(ib, key) ? ib[key] : undefined;
      if (x === y) continue;
      changes.push({
        field: 'serverInfo',
        key,
        ...(x !== undefined ? { baseline: x } : {}),
        ...(y !== undefined ? { candidate: y } : {}),
        text: `server-info ${key}: ${x ?? '(not given)'} -> ${y ?? '(not given)'}`,
      });
    }
  }
  return changes;
}

/** 2nd, 3rd, 4th, 21st, 64th. */
function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

export interface PairComparison {
  scenario: string;
  /** `c16`, `r2.5`. */
  level: string;
  baseline: string;
  candidate: string;
  /** `both at 16 concurrent requests (measured 15.4 / 15.6)`. */
  load: string;
  /** The baseline's workload, in words. */
  workload?: string;
  differences: string[];
  /** Why the verdicts are not like for like though load and workload match (unlikeReasons). */
  unlike: UnlikeReason[];
  /** How the two servers differ (engine, version, GPUs, --server-info): environmentChanges. */
  environment: EnvironmentChange[];
  notes: string[];
  /** Compared although different (`force`): the differences stand as warnings. */
  forced: boolean;
  /** Not compared: the differences say why. */
  refused: boolean;
  /** How each run was resampled: blocks of `length` requests consecutive in send time. */
  blocks: {
    baseline: { length: number; count: number };
    candidate: { length: number; count: number };
  };
  metrics: MetricComparison[];
  counts: Record<Verdict, number>;
  /** Each side's validity verdict (absent for units read without one). */
  validity?: { baseline?: RunConditions['validity']; candidate?: RunConditions['validity'] };
}

/** Compares one pair of runs, or refuses (with the reasons) when they differ and `force` is off. */
export function compareUnits(
  a: RunUnit,
  b: RunUnit,
  options: Partial<BootstrapOptions> & { force?: boolean } = {},
): PairComparison {
  const { differences, notes } = checkComparable(a, b);
  const refused = differences.length > 0 && !options.force;
  const metrics = refused
    ? []
    : compareSamples(a.sample, b.sample, options, {
        baseline: a.load.mode,
        candidate: b.load.mode,
      });
  const counts: Record<Verdict, number> = { better: 0, worse: 0, no_change: 0, 'n/a': 0 };
  for (const m of metrics) counts[m.verdict]++;
  return {
    scenario: a.scenario,
    level: loadKey(a.load),
    baseline: a.label,
    candidate: b.label,
    load: describeLoads(a, b),
    ...(a.workload.lengths ? { workload: a.workload.lengths } : {}),
    differences,
    unlike: unlikeReasons(a, b),
    environment: environmentChanges(a, b),
    notes,
    forced: differences.length > 0 && !refused,
    refused,
    blocks: { baseline: blocksOf(a.sample), candidate: blocksOf(b.sample) },
    metrics,
    counts,
    ...(a.conditions?.validity || b.conditions?.validity
      ? {
          validity: {
            ...(a.conditions?.validity ? { baseline: a.conditions.validity } : {}),
            ...(b.conditions?.validity ? { candidate: b.conditions.validity } : {}),
          },
        }
      : {}),
  };
}

function blocksOf(sample: RunSample): { length: number; count: number } {
  const length = blockLength(sample.counted, measuredConcurrency(sample));
  return { length, count: Math.ceil(sample.counted / length) };
}

export interface Pairing {
  pairs: [RunUnit, RunUnit][];
  /** Units only one side has, by `scenario level`. */
  onlyBaseline: string[];
  onlyCandidate: string[];
}

/**
 * Matches the units of two targets: a single run with a single run; otherwise by scenario and
 * load level (sweep points, scenario folders), then any scenario left with one unit on each
 * side (its loads differ, which the comparison then says).
 */
export function pairUnits(a: readonly RunUnit[], b: readonly RunUnit[]): Pairing {
  if (a.length === 1 && b.length === 1)
    return { pairs: [[a[0], b[0]]], onlyBaseline: [], onlyCandidate: [] };
  const key = (u: RunUnit) => `${u.scenario} ${loadKey(u.load)}`;
  const pairs: [RunUnit, RunUnit][] = [];
  const restA = [...a];
  const restB = [...b];
  for (let i = 0; i < restA.length; ) {
    const j = restB.findIndex((u) => key(u) === key(restA[i]));
    if (j >= 0) {
      pairs.push([restA[i], restB[j]]);
      restA.splice(i, 1);
      restB.splice(j, 1);
    } else i++;
  }
  // A scenario measured at one load on each side (scenario folders of two runs) is compared
  // even when the loads differ, so that the comparison can say so; sweep levels are not.
  for (const scenario of new Set(restA.map((u) => u.scenario))) {
    const ia = restA.filter((u) => u.scenario === scenario);
    const ib = restB.filter((u) => u.scenario === scenario);
    const single = (units: readonly RunUnit[]) =>
      units.filter((u) => u.scenario === scenario).length === 1;
    if (ia.length === 1 && ib.length === 1 && single(a) && single(b)) {
      pairs.push([ia[0], ib[0]]);
      restA.splice(restA.indexOf(ia[0]), 1);
      restB.splice(restB.indexOf(ib[0]), 1);
    }
  }
  return { pairs, onlyBaseline: restA.map(key), onlyCandidate: restB.map(key) };
}
