import type { RequestRecord } from '../record.js';
import { findMetric } from './catalog.js';
import {
  type Distribution,
  PERCENTILE_SPELLINGS,
  PERCENTILES,
  type PercentileName,
  SampleSet,
} from './distribution.js';
import { type INTERVAL_METRICS, percentileIntervals } from './intervals.js';
import { forEachTokenGap, requestMetrics } from './requestMetrics.js';

/**
 * The stop rule on precision, `--until 'ttft.p99±5%'` (docs/cli.md): a run goes on, within its
 * --requests / --duration caps, until the 95 % interval of one headline percentile is narrow
 * enough. The interval is the summary's own (src/metrics/intervals.ts), so what stopped the run
 * is what summary.json then shows.
 */

type IntervalMetric = (typeof INTERVAL_METRICS)[number];

export interface PrecisionTarget {
  /** As written, e.g. `ttft.p99±5%`. */
  text: string;
  /** The summary's latency key: `ttftMs`. */
  metric: IntervalMetric;
  stat: PercentileName;
  /** Half-width of the interval to reach: a share of the estimate (0.05), or in ms. */
  halfWidth: { relative: number } | { ms: number };
}

/** What the rule came to, in summary.json's `until`. */
export interface UntilOutcome {
  target: string;
  /** The finished run's interval meets the target. */
  met: boolean;
  /** The finished run's estimate and its interval's half-width ((high - low) / 2), in ms; null when a side is open. */
  estimateMs: number;
  halfWidthMs: number | null;
  /** The half-width as a share of the estimate; null when a side is open. */
  relativeHalfWidth: number | null;
  /** Completed measured requests when the rule stopped sending; null: the caps ended the run. */
  stoppedAtRequests: number | null;
}

/** A --until that does not read: the usage error, exit 2, with what to write instead. */
const SYNTAX = "write METRIC.STAT±TARGET, e.g. --until 'ttft.p99±5%' or --until 'e2e.p50±10ms'";

/** The metric ids --until accepts: those whose summary carries intervals. */
export const UNTIL_METRICS: Record<string, IntervalMetric> = {
  ttft: 'ttftMs',
  itl: 'itlMs',
  tpot: 'tpotMs',
  e2e: 'e2eMs',
};

/** Reads a --until rule; the problem (a sentence after `--until`) when it does not read. */
export function readPrecisionTarget(
  text: string,
): { value: PrecisionTarget } | { problem: string } {
  const trimmed = text.trim();
  const m =
    /^([A-Za-z][A-Za-z0-9_-]*)\.([A-Za-z0-9_.]+)\s*(?:±|\+-|\+\/-)\s*(\d+(?:\.\d+)?)\s*(%|ms|s)$/.exec(
      trimmed,
    );
  if (!m) return { problem: `cannot read "${trimmed}": ${SYNTAX}` };
  const [, rawMetric, rawStat, rawNumber, unit] = m;
  const id = findMetric(rawMetric)?.id;
  const metric =
    id !== undefined && Object.hasOwn(UNTIL_METRICS, id) ? UNTIL_METRICS[id] : undefined;
  if (!metric) {
    return {
      problem: `"${trimmed}": "${rawMetric}" has no interval to stop on; use one of ${Object.keys(UNTIL_METRICS).join(', ')}`,
    };
  }
  const statKey = rawStat.toLowerCase();
  const stat = Object.hasOwn(PERCENTILE_SPELLINGS, statKey)
    ? PERCENTILE_SPELLINGS[statKey]
    : undefined;
  if (!stat) {
    return {
      problem: `"${trimmed}": unknown percentile "${rawStat}"; use p50, p90, p95, p99 or p99.9`,
    };
  }
  const target = Number(rawNumber);
  if (!(target > 0)) return { problem: `"${trimmed}": the target must be above 0` };
  if (unit === '%' && target >= 100) {
    return { problem: `"${trimmed}": a relative target must be under 100%` };
  }
  const halfWidth =
    unit === '%' ? { relative: target / 100 } : { ms: unit === 's' ? target * 1000 : target };
  return { value: { text: trimmed, metric, stat, halfWidth } };
}

/** Whether an interval (estimate, low, high) meets the target. */
export function meetsTarget(
  target: PrecisionTarget,
  estimate: number,
  low: number | null,
  high: number | null,
): { met: boolean; halfWidth: number | null; relative: number | null } {
  if (low === null || high === null) return { met: false, halfWidth: null, relative: null };
  const halfWidth = (high - low) / 2;
  const relative = estimate > 0 ? halfWidth / estimate : null;
  const met =
    'relative' in target.halfWidth
      ? relative !== null && relative <= target.halfWidth.relative
      : halfWidth <= target.halfWidth.ms;
  return { met, halfWidth, relative };
}

/**
 * The fewest samples a check waits for, and the growth between checks: an interval is a sort of
 * every sample, so checks come at least 5 % of the samples apart (about 60 checks from 30 to a
 * million, each a sort) and the run stops at most 5 % later than a check per request would.
 */
const FIRST_CHECK = 30;
const CHECK_GROWTH = 1.05;

/**
 * Follows a run's measured records and says when the target is met. Feed it every record
 * (warm-up ones are skipped); `met()` is true from the check that found the interval narrow
 * enough on.
 */
export class UntilTracker {
  private readonly samples = new SampleSet();
  private nextCheck = FIRST_CHECK;
  private completed = 0;
  private stoppedAt: number | null = null;

  constructor(readonly target: PrecisionTarget) {}

  /** Adds a record; true when this record made the rule stop the run. */
  add(record: RequestRecord): boolean {
    if (record.phase === 'warmup' || record.error) return false;
    this.completed++;
    const key = this.target.metric;
    if (key === 'itlMs') {
      forEachTokenGap(record, (gapMs, tokens) => this.samples.add(gapMs / tokens, tokens));
    } else {
      const value = requestMetrics(record)[key];
      if (value !== undefined) this.samples.add(value);
    }
    if (this.stoppedAt !== null || this.samples.count < this.nextCheck) return false;
    this.nextCheck = Math.ceil(this.samples.count * CHECK_GROWTH);
    if (!this.check()) return false;
    this.stoppedAt = this.completed;
    return true;
  }

  /** Whether the rule has stopped the run. */
  get stopped(): boolean {
    return this.stoppedAt !== null;
  }

  private check(): boolean {
    const input = this.samples.intervalInput();
    if (!input) return false;
    const { stat } = this.target;
    const interval = percentileIntervals(input, { names: [stat] })[stat];
    if (!interval) return false;
    const estimate = this.samples.describe()[stat];
    return meetsTarget(this.target, estimate, interval.low, interval.high).met;
  }

  /**
   * The outcome against the finished run's own distribution (the summary's `latency.<metric>`):
   * met or not by its interval, and where the rule stopped sending, if it did.
   */
  outcome(latency: Record<IntervalMetric, Distribution>): UntilOutcome {
    const { metric, stat, text } = this.target;
    const d = latency[metric];
    const interval = d.intervals?.[stat];
    const estimate = d[stat];
    const judged = interval
      ? meetsTarget(this.target, estimate, interval.low, interval.high)
      : { met: false, halfWidth: null, relative: null };
    return {
      target: text,
      met: judged.met,
      estimateMs: estimate,
      halfWidthMs: judged.halfWidth,
      relativeHalfWidth: judged.relative,
      stoppedAtRequests: this.stoppedAt,
    };
  }
}

/** The percentile's name as users write it: `p99.9` for `p99_9`. */
export function statLabel(stat: PercentileName): string {
  return `p${PERCENTILES[stat]}`;
}
