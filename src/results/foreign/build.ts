/**
 * What every reader of another tool's results shares: the summary of rebuilt records (by the
 * SummaryBuilder, as infergauge summarises its own runs), the summary of a file that holds only
 * statistics, and the error a damaged file gets.
 */
import { EXIT, InfergaugeError } from '../../errors.js';
import type { LoadSpec } from '../../load.js';
import type { Distribution } from '../../metrics/distribution.js';
import { type LatencySummary, type RunSummary, SummaryBuilder } from '../../metrics/summary.js';
import type { RequestRecord } from '../../record.js';

/** Another tool's file that cannot be read as a run (exit 1): it names the file and what is wrong. */
export class ForeignInputError extends InfergaugeError {
  constructor(message: string) {
    super(message, 'IG_FOREIGN_INPUT', EXIT.failure);
  }
}

/**
 * A value of the file as a message quotes it: JSON, one line, at most 40 characters (a file can
 * put a megabyte of text, or escape sequences, where a number belongs).
 */
export function shown(value: unknown): string {
  const text = (JSON.stringify(value) ?? String(value)).replace(/\p{Cc}/gu, ' ');
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

export function summaryOfRecords(records: readonly RequestRecord[], load: LoadSpec): RunSummary {
  const builder = new SummaryBuilder({ load });
  for (const r of records) builder.add(r);
  return builder.build();
}

/** A tool's statistics of one metric, in ms; undefined where the file does not say. */
export interface StatsMs {
  count?: number;
  mean?: number;
  stddev?: number;
  min?: number;
  p50?: number;
  p90?: number;
  p95?: number;
  p99?: number;
  p99_9?: number;
  max?: number;
}

/** What a file of statistics alone says about its run. */
export interface StatsFacts {
  load: LoadSpec;
  completed: number;
  failed: number;
  durationS: number;
  inputTokens: number;
  outputTokens: number;
  latency: Partial<Record<keyof LatencySummary, StatsMs>>;
}

/**
 * A distribution known only by the statistics the file gives: what it does not say is NaN
 * (written as null), never a number that would read as measured.
 */
function distributionOf(stats: StatsMs, count: number): Distribution {
  const v = (x: number | undefined) => (x !== undefined && Number.isFinite(x) ? x : Number.NaN);
  return {
    count: stats.count ?? count,
    mean: v(stats.mean),
    stddev: v(stats.stddev),
    min: v(stats.min),
    p50: v(stats.p50),
    p90: v(stats.p90),
    p95: v(stats.p95),
    p99: v(stats.p99),
    p99_9: v(stats.p99_9),
    max: v(stats.max),
  };
}

/**
 * The summary of a file that has statistics but no per-request figures: the shape of an empty
 * run's summary, filled with what the file says (counts, duration, tokens, throughput, the
 * distributions it gives); everything it does not say stays empty.
 */
export function summaryOfStats(facts: StatsFacts): RunSummary {
  const summary = new SummaryBuilder({ load: facts.load }).build();
  const perS = (n: number) => (facts.durationS > 0 ? n / facts.durationS : 0);
  // The empty run's verdicts (no requests) are not this run's: the file's statistics carry none.
  summary.warnings = [];
  summary.requests.completed = facts.completed;
  summary.requests.failed = facts.failed;
  summary.durationS = facts.durationS;
  summary.tokens.input = facts.inputTokens;
  summary.tokens.output = facts.outputTokens;
  summary.throughput = {
    requestsPerS: perS(facts.completed),
    outputTokensPerS: perS(facts.outputTokens),
    inputTokensPerS: perS(facts.inputTokens),
    totalTokensPerS: perS(facts.inputTokens + facts.outputTokens),
    decodeTokensPerS: perS(Math.max(0, facts.outputTokens - facts.completed)),
  };
  for (const [key, stats] of Object.entries(facts.latency) as [keyof LatencySummary, StatsMs][]) {
    // ITL counts token gaps, which a file of statistics does not count: one per output token
    // after each request's first.
    const count =
      key === 'itlMs' ? Math.max(0, facts.outputTokens - facts.completed) : facts.completed;
    summary.latency[key] = distributionOf(stats, count);
  }
  return summary;
}

/** A parsed JSON object, read field by field. */
export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A finite number, else undefined (a file's NaN, Infinity or text is no figure). */
export const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
