/**
 * The one read model of a run's records: what report, compare and merge need from them, built
 * in one streaming pass (readRecords as an async iterator) into bounded parts, never a list of
 * records or token timelines:
 * - the summary again (metrics/summary.ts SummaryBuilder: exact samples up to its limit, then
 *   HDR histograms);
 * - chart data: per-request columns in typed arrays (8 bytes per request and column, so that
 *   distribution curves and the timelines are exact), per-token ITL (every request's token
 *   events up to MAX_CHART_ITL_EVENTS, then every k-th request's), output tokens in time bins
 *   of a width that grows with the run, and failures grouped by message (bounded);
 * - comparison samples (analysis/compare.ts RunSampleBuilder, itself bounded per request);
 * - a sink that sees each record as it passes (the per-request CSV, merge's records writer).
 * Each part is built only when asked for. The pass checks the JavaScript heap as it goes and
 * stops with a clear error (exit 1) well before V8 would abort.
 */
import { getHeapStatistics } from 'node:v8';
import { ChunkedColumn, ItlEvents, type RunSampleBuilder } from '../analysis/compare.js';
import { EXIT, InfergaugeError } from '../errors.js';
import { type FailureCounts, FailureGroups } from '../metrics/failureGroups.js';
import { forEachTokenGap, requestMetrics } from '../metrics/requestMetrics.js';
import {
  type RunOutcome,
  type RunSummary,
  SummaryBuilder,
  type SummaryContext,
} from '../metrics/summary.js';
import { warning } from '../metrics/warnings.js';
import { ERROR_KINDS, type RequestRecord } from '../record.js';
import { ReadDamage, readRecords, recordsFile } from './jsonl.js';

/** Token events kept for the ITL distribution curve, at most (beyond: every k-th request's). */
export const MAX_CHART_ITL_EVENTS = 500_000;
/** Output-token time bins kept at most: past this, bins grow tenfold. */
const MAX_TIME_BINS = 100_000;

/** What a request was: counted and completed, counted and failed, or sent during warm-up. */
export const REQUEST_STATE = { completed: 0, failed: 1, warmup: 2 } as const;

/**
 * One entry per record read (warm-up included), in file order: what the timelines, the
 * distribution curves and the failures draw. Times on the run's clock in ms; NaN where a
 * request has no such value (no token: no TTFT; one token: no TPOT).
 */
export interface RequestColumns {
  id: Float64Array;
  sentAt: Float64Array;
  endAt: Float64Array;
  ttftMs: Float64Array;
  tpotMs: Float64Array;
  outputTokens: Float64Array;
  /** REQUEST_STATE. */
  state: Uint8Array;
  /** Index in ERROR_KINDS of a failed request's error. */
  errorKind: Uint8Array;
}

/** A run's records, reduced to what its charts and failure table draw. */
export interface RunCharts {
  /** Records read, warm-up included. */
  requests: number;
  columns: RequestColumns;
  /** The latest `endAt` (ms on the run's clock), 0 without records. */
  endMs: number;
  /**
   * Per-token ITL of the completed measured requests, per token event (ms per token, and the
   * tokens of the event); `every` > 1 when only every k-th request's events were kept.
   */
  itl: { values: Float64Array; tokens: Float64Array; every: number; requests: number };
  /**
   * Output tokens by the time their event arrived (`widthMs` bins from 0), and those of
   * reasoning-only events where some record carried reasoning text.
   */
  tokenBins: { widthMs: number; output: Float64Array; reasoning?: Float64Array };
  /** Failures of counted requests, grouped by kind, status and message (metrics/failureGroups.ts). */
  failures: FailureCounts;
}

/** The parts of the read model a caller wants built. */
export interface RunViewParts {
  /** Summarise the records again with this context. */
  summary?: SummaryContext;
  /** Build the chart data (RunCharts). */
  charts?: boolean;
  /** Add each record to this comparison sample (pooled runs share one). */
  sample?: RunSampleBuilder;
  /** Sees each record as it is read, before the parts do. */
  onRecord?: (record: RequestRecord) => void;
}

const doubles = () => ChunkedColumn.doubles();
const bytes = () => ChunkedColumn.bytes();

/**
 * Sums by time in bins of a width that is a power of ten ms (1 ms first), ten times wider each
 * time the run outgrows MAX_TIME_BINS bins: any run's bins fit, and they add up exactly into
 * the report's round bins (1, 2 or 5 times a power of ten seconds), which are never narrower.
 */
export class TimeBins {
  widthMs = 1;
  private bins = new Float64Array(1024);
  private size = 0;

  add(atMs: number, n: number): void {
    if (!(atMs >= 0)) return;
    let bin = Math.floor(atMs / this.widthMs);
    while (bin >= MAX_TIME_BINS) {
      this.coarsen();
      bin = Math.floor(atMs / this.widthMs);
    }
    if (bin >= this.bins.length) {
      let length = this.bins.length * 2;
      while (length <= bin) length *= 2;
      const grown = new Float64Array(Math.min(length, MAX_TIME_BINS));
      grown.set(this.bins);
      this.bins = grown;
    }
    this.bins[bin] += n;
    if (bin >= this.size) this.size = bin + 1;
  }

  private coarsen(): void {
    const coarse = new Float64Array(this.bins.length);
    for (let i = 0; i < this.size; i++) coarse[Math.floor(i / 10)] += this.bins[i];
    this.bins = coarse;
    this.size = Math.ceil(this.size / 10);
    this.widthMs *= 10;
  }

  done(): Float64Array {
    return this.bins.slice(0, this.size);
  }
}

/** Collects the chart data of a run, record by record (see RunCharts). */
class ChartsBuilder {
  private readonly id = doubles();
  private readonly sentAt = doubles();
  private readonly endAt = doubles();
  private readonly ttftMs = doubles();
  private readonly tpotMs = doubles();
  private readonly outputTokens = doubles();
  private readonly state = bytes();
  private readonly errorKind = bytes();
  private endMs = 0;
  private readonly itl = new ItlEvents(MAX_CHART_ITL_EVENTS);
  private readonly output = new TimeBins();
  private reasoning: TimeBins | undefined;
  private readonly failures = new FailureGroups();

  add(r: RequestRecord): void {
    const state =
      r.phase === 'warmup'
        ? REQUEST_STATE.warmup
        : r.error
          ? REQUEST_STATE.failed
          : REQUEST_STATE.completed;
    this.id.push(r.id);
    this.sentAt.push(r.sentAt);
    this.endAt.push(r.endAt);
    this.outputTokens.push(r.outputTokens);
    this.state.push(state);
    this.errorKind.push(r.error ? Math.max(0, ERROR_KINDS.indexOf(r.error.kind)) : 0);
    if (r.endAt > this.endMs) this.endMs = r.endAt;
    if (state === REQUEST_STATE.completed) {
      const m = requestMetrics(r);
      this.ttftMs.push(m.ttftMs ?? Number.NaN);
      this.tpotMs.push(m.tpotMs ?? Number.NaN);
      if (this.itl.begin()) {
        const itl = this.itl;
        forEachTokenGap(r, (gapMs, tokens) => itl.add(gapMs / tokens, tokens));
      }
      this.itl.end();
    } else {
      this.ttftMs.push(Number.NaN);
      this.tpotMs.push(Number.NaN);
    }
    if (state === REQUEST_STATE.failed) this.addFailure(r);
    this.addTokens(r);
  }

  private addTokens(r: RequestRecord): void {
    const { dtUs, tokens, contentChars, reasoningChars, toolCallChars } = r.events;
    if (reasoningChars) this.reasoning ??= new TimeBins();
    let atUs = r.sentAt * 1000;
    for (let i = 0; i < dtUs.length; i++) {
      atUs += dtUs[i];
      const k = tokens[i];
      if (!(k > 0)) continue;
      this.output.add(atUs / 1000, k);
      const reasoningOnly =
        (reasoningChars?.[i] ?? 0) > 0 && contentChars[i] === 0 && !toolCallChars?.[i];
      if (this.reasoning && reasoningOnly) this.reasoning.add(atUs / 1000, k);
    }
  }

  private addFailure(r: RequestRecord): void {
    const e = r.error as NonNullable<RequestRecord['error']>;
    this.failures.add(e.kind, e.status, e.message, r.id);
  }

  /** The chart data; the builder is spent after (its columns move into the result). */
  build(): RunCharts {
    return {
      requests: this.id.length,
      columns: {
        id: this.id.done(),
        sentAt: this.sentAt.done(),
        endAt: this.endAt.done(),
        ttftMs: this.ttftMs.done(),
        tpotMs: this.tpotMs.done(),
        outputTokens: this.outputTokens.done(),
        state: this.state.done(),
        errorKind: this.errorKind.done(),
      },
      endMs: this.endMs,
      itl: {
        values: this.itl.values.view().slice(),
        tokens: this.itl.tokens.view().slice(),
        every: this.itl.every,
        requests: this.itl.requests,
      },
      tokenBins: {
        widthMs: this.output.widthMs,
        output: this.output.done(),
        ...(this.reasoning ? { reasoning: this.rebinned(this.reasoning) } : {}),
      },
      failures: this.failures.build(),
    };
  }

  /** Reasoning bins at the output bins' width (the output bins may have grown wider). */
  private rebinned(bins: TimeBins): Float64Array {
    const values = bins.done();
    const out = new Float64Array(
      Math.max(1, Math.ceil((values.length * bins.widthMs) / this.output.widthMs)),
    );
    const ratio = this.output.widthMs / bins.widthMs;
    for (let i = 0; i < values.length; i++) out[Math.floor(i / ratio)] += values[i];
    return out;
  }
}

/** Builds the parts of the read model a caller asked for, one record at a time. */
export class RunViewBuilder {
  private readonly summaryBuilder: SummaryBuilder | undefined;
  private readonly chartsBuilder: ChartsBuilder | undefined;
  private readonly sample: RunSampleBuilder | undefined;
  private readonly onRecord: ((record: RequestRecord) => void) | undefined;
  /** Records added. */
  records = 0;
  private readonly damage: ReadDamage[] = [];

  constructor(parts: RunViewParts) {
    this.summaryBuilder = parts.summary ? new SummaryBuilder(parts.summary) : undefined;
    this.chartsBuilder = parts.charts ? new ChartsBuilder() : undefined;
    this.sample = parts.sample;
    this.onRecord = parts.onRecord;
  }

  add(record: RequestRecord): void {
    this.records++;
    this.onRecord?.(record);
    this.summaryBuilder?.add(record);
    this.chartsBuilder?.add(record);
    this.sample?.add(record);
  }

  /** What streamRecords skipped as damaged, file by file. */
  damaged(damage: ReadDamage): void {
    this.damage.push(damage);
  }

  /**
   * The summary of the records added (undefined unless `summary` was asked for), with a
   * `records_damaged` warning when some of them were skipped as damaged.
   */
  summary(outcome: RunOutcome = {}): RunSummary | undefined {
    const summary = this.summaryBuilder?.build(outcome);
    if (summary && this.damage.length > 0) {
      summary.warnings.push(
        warning('records_damaged', {
          lines: this.damage.reduce((n, d) => n + d.skippedLines, 0),
          stretches: this.damage.reduce((n, d) => n + d.gzipStretches + (d.gzipCut ? 1 : 0), 0),
          said: this.damage.map((d) => d.message() ?? d.file),
        }),
      );
    }
    return summary;
  }

  /** The chart data (undefined unless `charts` was asked for). */
  charts(): RunCharts | undefined {
    return this.chartsBuilder?.build();
  }
}

/** Chart data of records in memory (a report rendered from records a caller holds). */
export function chartsOf(records: Iterable<RequestRecord>): RunCharts {
  const builder = new ChartsBuilder();
  for (const r of records) builder.add(r);
  return builder.build();
}

/** Records between two looks at the heap. */
const HEAP_CHECK_EVERY = 8192;
/** Share of V8's heap limit past which a read stops with an error instead of a V8 abort. */
const HEAP_LIMIT_SHARE = 0.85;

/** The error a read stops with when the heap nears its limit. */
export class ReadMemoryError extends InfergaugeError {
  constructor(message: string) {
    super(message, 'IG_OUT_OF_MEMORY', EXIT.failure);
  }
}

/**
 * Throws ReadMemoryError when the JavaScript heap holds more than HEAP_LIMIT_SHARE of its limit:
 * `what` says what was being read, `read` how far.
 */
export function checkHeap(
  what: string,
  read: string,
  heap: { used_heap_size: number; heap_size_limit: number } = getHeapStatistics(),
): void {
  if (heap.used_heap_size <= HEAP_LIMIT_SHARE * heap.heap_size_limit) return;
  const mb = (bytes: number) => `${Math.round(bytes / 2 ** 20).toLocaleString('en-US')} MB`;
  throw new ReadMemoryError(
    `reading ${what} filled the JavaScript heap (${mb(heap.used_heap_size)} of its ${mb(heap.heap_size_limit)} limit) after ${read}: stopped before Node.js would abort. Give Node.js a larger heap, e.g. NODE_OPTIONS=--max-old-space-size=${Math.max(4096, Math.ceil((2 * heap.heap_size_limit) / 2 ** 20 / 1024) * 1024)}, or read fewer runs at once`,
  );
}

/** What streamRecords read of one records file. */
export interface StreamedRecords {
  /** Records read. */
  records: number;
  /** What was skipped as damaged (ReadDamage.message says it). */
  damage: ReadDamage;
}

/**
 * Streams the records file `path` (`records.jsonl`, or the `.gz` beside it) through `builder`
 * (any number of them: one pass), checking the heap as it goes. What is skipped as damaged (a
 * torn line, a line that is no record, a line past the bound, a damaged gzip stretch) is said
 * once, naming the file read, through `onProblem`, and handed to `builder.damaged` (a run view
 * carries it into its summary).
 */
export async function streamRecords(
  path: string,
  builder: { add(record: RequestRecord): void; damaged?(damage: ReadDamage): void },
  onProblem?: (message: string) => void,
): Promise<StreamedRecords> {
  const file = recordsFile(path);
  const damage = new ReadDamage(file);
  let n = 0;
  for await (const record of readRecords(file, damage.onBadLine)) {
    builder.add(record);
    if (++n % HEAP_CHECK_EVERY === 0) checkHeap(file, `${n.toLocaleString('en-US')} records`);
  }
  const said = damage.message();
  if (said !== undefined) {
    onProblem?.(said);
    builder.damaged?.(damage);
  }
  return { records: n, damage };
}
