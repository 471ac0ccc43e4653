import { UsageError } from '../errors.js';
import {
  type ConditionOperator,
  catalogMetric,
  findMetric,
  holds,
  METRICS,
  type MetricUnit,
  normaliseMetricName,
  readCondition,
} from '../metrics/catalog.js';
import { type Distribution, PERCENTILE_SPELLINGS } from '../metrics/distribution.js';
import { fmtNumber } from '../metrics/format.js';
import type { RunSummary } from '../metrics/summary.js';
import { VERDICT_RANK, VERDICTS, type Verdict, validityOf } from '../metrics/validity.js';

/**
 * CI thresholds: `--threshold 'ttft.p99<500' --threshold 'outputThroughput>1000'`. Each is a
 * metric of a run summary, a comparison and a limit; a run (every point of a sweep, the candidate
 * of a comparison) passes when every threshold holds. A failed threshold makes the command exit
 * with EXIT.thresholdFailed (src/errors.ts), distinct from every other exit code.
 */

export type ThresholdOperator = ConditionOperator;
/** `verdict`: the validity verdict, by its rank (VERDICT_RANK: invalid 0, caution 1, valid 2). */
export type ThresholdUnit = MetricUnit | 'verdict';
export type ThresholdStat = 'p50' | 'p90' | 'p95' | 'p99' | 'p99_9' | 'mean' | 'min' | 'max';

export interface Threshold {
  /** As written, e.g. `ttft.p99<500`. */
  text: string;
  /** Canonical metric name, e.g. `ttft`, `outputThroughput`, `failureRate`. */
  metric: string;
  /** Distribution metrics only. */
  stat?: ThresholdStat;
  op: ThresholdOperator;
  /** In the metric's unit: ms, tokens/s, requests/s, or a fraction (1 % is 0.01). */
  limit: number;
  unit: ThresholdUnit;
}

export interface ThresholdResult {
  threshold: Threshold;
  /** The measured value in the threshold's unit; null when the run does not have it. */
  value: number | null;
  ok: boolean;
  /** Headroom in the metric's unit: positive when met, negative by how much it is missed. */
  margin: number | null;
  /** `ttft.p99 = 612.3 ms, over 500 by 112.3 ms (22 %)`. */
  message: string;
}

export interface ThresholdEvaluation {
  results: ThresholdResult[];
  ok: boolean;
}

/** A threshold rule that does not parse or names no metric: bad usage. */
export class ThresholdError extends UsageError {
  constructor(problems: string[]) {
    super(problems, 'IG_THRESHOLD_INVALID');
    this.message = problems.join('; ');
  }
}

const STATS: Record<string, ThresholdStat> = {
  ...PERCENTILE_SPELLINGS,
  mean: 'mean',
  avg: 'mean',
  min: 'min',
  max: 'max',
};

const ALL_METRICS = () => METRICS.map((m) => m.id);

const SYNTAX =
  "write METRIC[.STAT] OP LIMIT, e.g. 'ttft.p99<500' (ms), 'outputThroughput>1000' (tok/s), 'failureRate<1%', or 'validity=valid'";

/** `validity=valid`, `validity!=invalid`, `validity>=caution` (src/metrics/validity.ts). */
const VALIDITY_RULE = /^validity\s*(==|=|!=|>=|>)\s*(\S+)$/i;

/** A validity threshold: the run's verdict at least as good as the one named. */
function parseValidityThreshold(text: string, op: string, name: string): Threshold {
  const verdict = name.toLowerCase() as Verdict;
  const fix =
    'write validity=valid (only valid runs pass) or validity!=invalid (caution passes too)';
  if (!VERDICTS.includes(verdict)) {
    throw new ThresholdError([`"${text}": a validity is valid, caution or invalid; ${fix}`]);
  }
  const rank = VERDICT_RANK[verdict];
  // The least rank that passes.
  const least =
    op === '!='
      ? verdict === 'invalid'
        ? 1
        : undefined
      : op === '>'
        ? rank + 1
        : op === '>=' || verdict === 'valid'
          ? rank
          : undefined;
  if (least === undefined || least > VERDICT_RANK.valid || least <= VERDICT_RANK.invalid) {
    throw new ThresholdError([
      `"${text}": passes ${least === undefined ? 'a verdict between others' : 'every run or none'}; ${fix}`,
    ]);
  }
  return { text, metric: 'validity', op: '>=', limit: least, unit: 'verdict' };
}

/** Parses one threshold; throws a ThresholdError that names the problem and the syntax. */
export function parseThreshold(text: string): Threshold {
  const trimmed = text.trim();
  const validity = VALIDITY_RULE.exec(trimmed);
  if (validity) return parseValidityThreshold(trimmed, validity[1], validity[2]);
  const m = readCondition(trimmed);
  if (!m) throw new ThresholdError([`cannot read "${trimmed}": ${SYNTAX}`]);
  const { metric: rawMetric, stat: rawStat, op, number: rawLimit, unit: rawUnit } = m;
  const entry = findMetric(rawMetric);
  if (!entry) {
    const suggestion = suggest(rawMetric, ALL_METRICS());
    throw new ThresholdError([
      `"${trimmed}": unknown metric "${rawMetric}"${suggestion ? ` (did you mean ${suggestion}?)` : ''}; known: ${ALL_METRICS().join(', ')}`,
    ]);
  }
  const metric = entry.id;
  let limit = Number(rawLimit);
  const unitText = rawUnit.toLowerCase();
  if (entry.kind !== 'run') {
    if (rawStat === undefined) {
      throw new ThresholdError([
        `"${trimmed}": ${metric} is a distribution: name a statistic, e.g. ${metric}.p99${op}${rawLimit} (p50, p90, p95, p99, p99.9, mean, min, max)`,
      ]);
    }
    const statKey = rawStat.toLowerCase();
    const stat = Object.hasOwn(STATS, statKey) ? STATS[statKey] : undefined;
    if (!stat) {
      throw new ThresholdError([
        `"${trimmed}": unknown statistic "${rawStat}"; use p50, p90, p95, p99, p99.9, mean, min or max`,
      ]);
    }
    if (entry.unit === 'ms') {
      if (unitText === 's') limit *= 1000;
      else if (unitText !== '' && unitText !== 'ms') {
        throw new ThresholdError([
          `"${trimmed}": ${metric} is in ms (or write s), not "${rawUnit}"`,
        ]);
      }
    } else if (unitText !== '' && unitText !== 'tok/s') {
      throw new ThresholdError([`"${trimmed}": ${metric} is in tokens/s, not "${rawUnit}"`]);
    }
    return {
      text: trimmed,
      metric,
      stat,
      op,
      limit,
      unit: entry.unit,
    };
  }
  if (rawStat !== undefined) {
    throw new ThresholdError([
      `"${trimmed}": ${metric} is a single number per run: write ${metric}${op}${rawLimit}${rawUnit}`,
    ]);
  }
  if (entry.unit === 'fraction') {
    if (unitText === '%') limit /= 100;
    else if (unitText !== '') {
      throw new ThresholdError([
        `"${trimmed}": ${metric} is a fraction (0.01) or a percentage (1%)`,
      ]);
    } else if (limit > 1) {
      throw new ThresholdError([
        `"${trimmed}": ${metric} is a fraction between 0 and 1: write ${rawLimit}% or ${Number(rawLimit) / 100}`,
      ]);
    }
  } else if (unitText !== '' && unitText !== entry.unit) {
    throw new ThresholdError([`"${trimmed}": ${metric} is in ${entry.unit}, not "${rawUnit}"`]);
  }
  return { text: trimmed, metric, op, limit, unit: entry.unit };
}

/**
 * Parses every rule (each may hold several, separated by commas); throws one ThresholdError
 * listing every problem found.
 */
export function parseThresholds(rules: readonly string[]): Threshold[] {
  const thresholds: Threshold[] = [];
  const problems: string[] = [];
  for (const rule of rules) {
    for (const part of rule.split(',')) {
      if (part.trim() === '') continue;
      try {
        thresholds.push(parseThreshold(part));
      } catch (err) {
        if (!(err instanceof ThresholdError)) throw err;
        problems.push(...err.problems);
      }
    }
  }
  if (problems.length > 0) throw new ThresholdError(problems);
  if (thresholds.length === 0) throw new ThresholdError([`no threshold given: ${SYNTAX}`]);
  return thresholds;
}

/**
 * What is wrong with `--threshold` rules, checked before anything is sent: a gate found unreadable
 * only after a long run would have measured for nothing. Empty when they read (or none is given).
 */
export function thresholdProblems(rules: readonly string[] | undefined): string[] {
  if (!rules || rules.length === 0) return [];
  try {
    parseThresholds(rules);
    return [];
  } catch (err) {
    if (!(err instanceof ThresholdError)) throw err;
    return err.problems.map((problem) => `--threshold ${problem}`);
  }
}

/**
 * A metric named alone, as `--metric` takes it (`ttft.p99`, `outputThroughput`): the metric
 * and statistic of a threshold, read by the same parser, so the names are the same everywhere.
 * Throws a ThresholdError naming the problem (a validity is no metric to follow).
 */
export function parseMetricName(text: string): Pick<Threshold, 'metric' | 'stat' | 'unit'> & {
  name: string;
} {
  const name = text.trim();
  let t: Threshold;
  try {
    t = parseThreshold(`${name}<0`);
  } catch (err) {
    if (!(err instanceof ThresholdError)) throw err;
    // The parser quotes the condition it was given: quote the name as typed instead.
    throw new ThresholdError(
      err.problems.map((p) =>
        p
          .replaceAll(`"${name}<0"`, `"${name}"`)
          .replace(
            /^cannot read .*$/,
            `cannot read "${name}": write METRIC[.STAT], e.g. ttft.p99 or outputThroughput`,
          ),
      ),
    );
  }
  if (t.unit === 'verdict') {
    throw new ThresholdError([
      `"${name}": a validity is not a metric to follow; name a metric, e.g. ttft.p99`,
    ]);
  }
  return {
    name: thresholdName(t),
    metric: t.metric,
    ...(t.stat ? { stat: t.stat } : {}),
    unit: t.unit,
  };
}

/** The threshold's metric in a summary, in the threshold's unit (undefined: not measured). */
export function thresholdValue(summary: RunSummary, t: Threshold): number | undefined {
  if (t.unit === 'verdict') return VERDICT_RANK[validityOf(summary.warnings).verdict];
  const entry = catalogMetric(t.metric);
  if (entry.kind !== 'run') {
    const d: Distribution | undefined =
      entry.kind === 'session' ? entry.read(summary) : summary.latency[entry.latencyKey];
    if (!d || d.count === 0) return undefined;
    const value = d[t.stat ?? 'p99'];
    return Number.isFinite(value) ? value : undefined;
  }
  const value = entry.read(summary);
  return value !== undefined && Number.isFinite(value) ? value : undefined;
}

/** The name as it reads in messages: `ttft.p99`, `outputThroughput`. */
export function thresholdName(t: Threshold): string {
  return t.stat ? `${t.metric}.${t.stat === 'p99_9' ? 'p99.9' : t.stat}` : t.metric;
}

export function evaluateThreshold(summary: RunSummary, t: Threshold): ThresholdResult {
  if (t.unit === 'verdict') {
    const v = validityOf(summary.warnings);
    const rank = VERDICT_RANK[v.verdict];
    const ok = rank >= t.limit;
    const wanted = t.limit === VERDICT_RANK.valid ? 'valid' : 'valid or caution';
    const codes = [...new Set(v.reasons.map((r) => r.code))].join(', ');
    return {
      threshold: t,
      value: rank,
      ok,
      margin: rank - t.limit,
      message: `validity = ${v.verdict}${codes ? ` (${codes})` : ''}, ${ok ? 'as' : 'not'} ${wanted}`,
    };
  }
  const value = thresholdValue(summary, t);
  const name = thresholdName(t);
  if (value === undefined) {
    const entry = catalogMetric(t.metric);
    const missing =
      (entry.kind !== 'distribution' ? entry.missing : undefined) ??
      `not measured: no request had a ${t.metric}${t.metric === 'tpot' ? ' (one-token answers have none)' : ''}`;
    return { threshold: t, value: null, ok: false, margin: null, message: `${name}: ${missing}` };
  }
  const upper = t.op === '<' || t.op === '<=';
  const ok = holds(value, t.op, t.limit);
  const margin = upper ? t.limit - value : value - t.limit;
  const shown = `${name} = ${formatValue(value, t.unit)}`;
  const limit = formatLimit(t.limit, t.unit);
  const by = formatDelta(Math.abs(margin), t.unit);
  const share = t.limit !== 0 ? ` (${formatShare(Math.abs(margin) / Math.abs(t.limit))})` : '';
  let message: string;
  if (ok) {
    message = `${shown}, ${upper ? 'under' : 'over'} ${limit}${margin === 0 ? ' (at the limit)' : ` (${by} to spare)`}`;
  } else if (margin === 0) {
    message = `${shown}, at the limit, which ${t.op} excludes`;
  } else {
    message = `${shown}, ${upper ? 'over' : 'under'} ${limit} by ${by}${share}`;
  }
  return { threshold: t, value, ok, margin, message };
}

/** Every threshold against one run summary. */
export function evaluateThresholds(
  summary: RunSummary,
  thresholds: readonly Threshold[],
): ThresholdEvaluation {
  const results = thresholds.map((t) => evaluateThreshold(summary, t));
  return { results, ok: results.every((r) => r.ok) };
}

export interface PointThresholdEvaluation extends ThresholdEvaluation {
  /** The point, e.g. `chat c16` or a run directory. */
  name: string;
}

export interface SweepThresholdEvaluation {
  points: PointThresholdEvaluation[];
  ok: boolean;
  /** One line per failed threshold, naming its point: `chat c64: ttft.p99 = ...`. */
  failures: string[];
}

/**
 * Every threshold against every point of a sweep (or every scenario of a run, or every
 * candidate of a comparison): ok only when every point meets every threshold.
 */
export function evaluateThresholdsOnPoints(
  points: readonly { name: string; summary: RunSummary }[],
  thresholds: readonly Threshold[],
): SweepThresholdEvaluation {
  const evaluated = points.map((p) => ({
    name: p.name,
    ...evaluateThresholds(p.summary, thresholds),
  }));
  const failures = evaluated.flatMap((p) =>
    p.results
      .filter((r) => !r.ok)
      .map((r) => (points.length > 1 ? `${p.name}: ${r.message}` : r.message)),
  );
  return { points: evaluated, ok: evaluated.every((p) => p.ok), failures };
}

/** Enough digits to tell small numbers apart, one decimal from 10 on. */
function digitsFor(x: number): number {
  const a = Math.abs(x);
  return a === 0 || a >= 10 ? 1 : a >= 1 ? 2 : 3;
}

function formatValue(value: number, unit: ThresholdUnit): string {
  if (unit === 'fraction') return `${fmtNumber(value * 100, digitsFor(value * 100))} %`;
  return `${fmtNumber(value, digitsFor(value))} ${unit}`;
}

function formatLimit(limit: number, unit: ThresholdUnit): string {
  if (unit === 'fraction') return `${trimNumber(limit * 100)} %`;
  return trimNumber(limit);
}

function formatDelta(delta: number, unit: ThresholdUnit): string {
  if (unit === 'fraction') {
    const points = delta * 100;
    return `${fmtNumber(points, digitsFor(points))} percentage points`;
  }
  return `${fmtNumber(delta, digitsFor(delta))} ${unit}`;
}

function formatShare(share: number): string {
  const pct = share * 100;
  return `${pct >= 10 ? fmtNumber(Math.round(pct)) : fmtNumber(pct, 1, false)} %`;
}

function trimNumber(x: number): string {
  return Number.isInteger(x) ? x.toLocaleString('en-US') : String(Number(x.toPrecision(6)));
}

function suggest(word: string, candidates: string[]): string | undefined {
  const w = normaliseMetricName(word);
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = editDistance(w, normaliseMetricName(c));
    if (d < bestDistance) {
      bestDistance = d;
      best = c;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(w.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j] + 1,
        current[j - 1] + 1,
        previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length];
}
