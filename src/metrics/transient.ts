/**
 * The warm-up transient of a run (docs/metrics.md, "Warm-up transient"): MSER-5 (mser.ts) on
 * the measured requests' E2E in the order they ended finds where the run settled; the headline
 * is then taken again over the requests that ended after that point, beside the whole run's,
 * with how far the transient moved each figure. Built one record at a time like the summary
 * and merged across worker threads exactly.
 *
 * Why E2E by end time: it is the one per-request figure every completed request has (TTFT
 * needs a token, TPOT two), and it carries every warm-up effect a client sees: cold caches and
 * compilation on the server, connection set-up and JIT in the client, and an open loop's
 * system filling up (a queue that grows shows as E2E that grows). A per-bin throughput series
 * would hang on a bin width and, in a closed loop, move with E2E anyway (Little's law).
 */
import type { RequestRecord } from '../record.js';
import { type Distribution, ExactSamples, SampleSet } from './distribution.js';
import { mser5 } from './mser.js';
import type { RequestMetrics } from './requestMetrics.js';

/** The figures taken over the steady window, beside the whole run's. */
export interface TransientHeadline {
  ttftP50Ms: number;
  ttftP99Ms: number;
  itlP50Ms: number;
  itlP99Ms: number;
  tpotP50Ms: number;
  e2eP50Ms: number;
  e2eP99Ms: number;
  outputTokensPerS: number;
}

export type TransientKey = keyof TransientHeadline;

export const TRANSIENT_KEYS: readonly TransientKey[] = [
  'ttftP50Ms',
  'ttftP99Ms',
  'itlP50Ms',
  'itlP99Ms',
  'tpotP50Ms',
  'e2eP50Ms',
  'e2eP99Ms',
  'outputTokensPerS',
];

/** `summary.warmupTransient`: present from MSER_MIN_BATCHES * 5 completed requests. */
export interface WarmupTransient {
  method: 'mser5';
  /** The series judged: measured requests' E2E, ordered by their end. */
  series: 'e2eMs';
  /** Completed requests in the series (a multiple of 5: the last `n mod 5` are not judged). */
  completions: number;
  /** Requests cut from the front of the series as the transient. */
  truncatedRequests: number;
  /** Where the steady window starts: the last cut request's end, in s after the first send. */
  truncatedS: number;
  /** The truncation lies in the run's first half (White's rule): the run settled. */
  steadyReached: boolean;
  /** The headline over the requests that ended after the truncation (when steadyReached). */
  steady?: Partial<TransientHeadline>;
  /**
   * The same figures over the whole run: its latency percentiles as `summary.latency` has them;
   * its output tok/s, like the steady window's, up to the last send (the drain tail left out).
   */
  whole?: Partial<TransientHeadline>;
  /**
   * How far the transient moved each figure: whole / steady - 1 (+0.12: the whole run's figure
   * is 12 % above the steady window's). Absent where either side has no figure.
   */
  shift?: Partial<TransientHeadline>;
}

/** What the whole run said, for the shift, and where its clock and token bins lie. */
export interface TransientContext {
  windowStartMs: number;
  /** The last measured send: output tok/s on both sides stop here (see outputTokensPerS). */
  lastSentMs: number;
  /** The whole run's latency figures (its output tok/s is taken here, to the last send). */
  whole: Partial<TransientHeadline>;
  /** Output tokens per bin of `binMs` on the run's clock (the summary's steady-state bins). */
  outputTokensByBin: ReadonlyMap<number, number>;
  binMs: number;
  /**
   * The per-token ITL samples of the records whose ids `keep` accepts; undefined where the run's
   * ITL samples cannot tell records apart (an HDR histogram past a million gaps).
   */
  itlOf?: (keep: (id: number) => boolean) => SampleSet | undefined;
}

/**
 * Completed requests kept for the judgement; beyond it the run is long enough that its
 * warm-up is a sliver, and 6 numbers a request would be the summary's largest cost.
 */
export const TRANSIENT_REQUEST_LIMIT = 1_000_000;

/** Numbers a request's row holds: end, E2E, TTFT, TPOT (NaN where none), its record id. */
const ROW = 5;

/** A TransientBuilder as plain data, to merge. */
export interface TransientState {
  rows: Float64Array;
  /** Completed requests seen past TRANSIENT_REQUEST_LIMIT (then nothing is judged). */
  overflow: boolean;
}

/**
 * Collects, per completed measured request, the few numbers the judgement needs, in chunks
 * never copied once full (an array grown by doubling copied the whole run on the measuring
 * thread at each doubling: late stamps, bench:peer). The steady window's ITL is not kept here
 * twice: the summary's own ITL samples, keyed by record id, give it (TransientContext.itlOf).
 */
export class TransientBuilder {
  private rows = new ExactSamples();
  private overflow = false;

  /** A completed measured request and its metrics. */
  add(record: RequestRecord, metrics: RequestMetrics): void {
    if (this.overflow) return;
    if (this.rows.size / ROW >= TRANSIENT_REQUEST_LIMIT) {
      this.overflow = true;
      this.rows = new ExactSamples();
      return;
    }
    const rows = this.rows;
    rows.push(record.endAt, 1);
    rows.push(metrics.e2eMs, 1);
    rows.push(metrics.ttftMs ?? Number.NaN, 1);
    rows.push(metrics.tpotMs ?? Number.NaN, 1);
    rows.push(record.id, 1);
  }

  state(): TransientState {
    return { rows: this.rows.copy(), overflow: this.overflow };
  }

  /** Appends another builder's requests. */
  merge(other: TransientState): void {
    if (
      this.overflow ||
      other.overflow ||
      (this.rows.size + other.rows.length) / ROW > TRANSIENT_REQUEST_LIMIT
    ) {
      this.overflow = true;
      this.rows = new ExactSamples();
      return;
    }
    for (const v of other.rows) this.rows.push(v, 1);
  }

  /** The judgement, or undefined under MSER's minimum of requests or over the limit. */
  build(context: TransientContext): WarmupTransient | undefined {
    if (this.overflow) return undefined;
    const rows = this.rows.copy();
    const n = rows.length / ROW;
    const order = Array.from({ length: n }, (_, i) => i);
    // By end, ties by their figures: the same series whatever order threads delivered rows in.
    const by = (a: number, b: number, k: number) =>
      (rows[a * ROW + k] || 0) - (rows[b * ROW + k] || 0);
    order.sort((a, b) => by(a, b, 0) || by(a, b, 1) || by(a, b, 2) || by(a, b, 3) || by(a, b, 4));
    const series = order.map((i) => rows[i * ROW + 1]);
    const judged = mser5(series);
    if (!judged) return undefined;
    const cut = judged.truncated;
    const startMs = cut > 0 ? rows[order[cut - 1] * ROW] : context.windowStartMs;
    const transient: WarmupTransient = {
      method: 'mser5',
      series: 'e2eMs',
      completions: judged.observations,
      truncatedRequests: cut,
      truncatedS: (startMs - context.windowStartMs) / 1000,
      steadyReached: judged.reached,
    };
    if (!judged.reached) return transient;
    const steady = headline(rows, order.slice(cut), startMs, context);
    const wholeTokens = tokensPerS(context, context.windowStartMs);
    const whole: Partial<TransientHeadline> = {
      ...context.whole,
      ...(wholeTokens !== undefined ? { outputTokensPerS: wholeTokens } : {}),
    };
    const shift: Partial<TransientHeadline> = {};
    for (const key of TRANSIENT_KEYS) {
      const figure = whole[key];
      const there = steady[key];
      if (figure !== undefined && there !== undefined && there > 0) shift[key] = figure / there - 1;
    }
    return { ...transient, steady, whole, shift };
  }
}

/** The headline over the requests `kept` (row indices) and the tokens after `startMs`. */
function headline(
  rows: Float64Array,
  kept: readonly number[],
  startMs: number,
  context: TransientContext,
): Partial<TransientHeadline> {
  const e2e = new SampleSet();
  const ttft = new SampleSet();
  const tpot = new SampleSet();
  const ids = new Set<number>();
  for (const i of kept) {
    e2e.add(rows[i * ROW + 1]);
    const t = rows[i * ROW + 2];
    if (!Number.isNaN(t)) ttft.add(t);
    const p = rows[i * ROW + 3];
    if (!Number.isNaN(p)) tpot.add(p);
    ids.add(rows[i * ROW + 4]);
  }
  const out: Partial<TransientHeadline> = {};
  const put = (set: SampleSet, p50: TransientKey, p99?: TransientKey) => {
    if (set.count === 0) return;
    const d: Distribution = set.describe();
    out[p50] = d.p50;
    if (p99) out[p99] = d.p99;
  };
  put(ttft, 'ttftP50Ms', 'ttftP99Ms');
  const itl = context.itlOf?.((id) => ids.has(id));
  if (itl) put(itl, 'itlP50Ms', 'itlP99Ms');
  put(tpot, 'tpotP50Ms');
  put(e2e, 'e2eP50Ms', 'e2eP99Ms');
  const tokens = tokensPerS(context, startMs);
  if (tokens !== undefined) out.outputTokensPerS = tokens;
  return out;
}

/**
 * Output tokens per second from `fromMs` to the last send: the drain tail after it (the last
 * requests finishing with ever fewer beside them) is the same on both sides of the shift and is
 * no warm-up, so neither counts it. Undefined for a window under two bins.
 */
function tokensPerS(context: TransientContext, fromMs: number): number | undefined {
  const windowMs = context.lastSentMs - fromMs;
  if (windowMs < 2 * context.binMs) return undefined;
  let tokens = 0;
  for (const [bin, k] of context.outputTokensByBin) {
    const middle = (bin + 0.5) * context.binMs;
    if (middle >= fromMs && middle < context.lastSentMs) tokens += k;
  }
  return (tokens / windowMs) * 1000;
}
