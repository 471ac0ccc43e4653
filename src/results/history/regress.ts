/**
 * Regression verdicts over the history: a series' latest run (or a chosen one) against a
 * baseline window of the runs before it. Where every run involved kept its per-request records,
 * `compare`'s paired block bootstrap judges (analysis/compare.ts compareSamples: the baseline's
 * records pooled as a sweep's repeats are); where one did not, a stated rule on the summaries
 * judges, and says it is one.
 */
import { join } from 'node:path';
import {
  type BootstrapOptions,
  type ConfidenceInterval,
  compareSamples,
  type MetricDefinition,
  type RequestMetricKey,
  RunSampleBuilder,
  type Verdict,
} from '../../analysis/compare.js';
import type { LoadSpec } from '../../load.js';
import { type Better, catalogMetric } from '../../metrics/catalog.js';
import { readRunView } from '../reader.js';
import type { HistoryEntry } from './entry.js';
import { type Series, seriesDifferences } from './query.js';

/** A metric a verdict is about: its --metric name, catalogue id and statistic. */
export interface RegressMetric {
  /** `ttft.p99`, `outputThroughput`. */
  name: string;
  metric: string;
  stat?: string;
}

/** The metrics judged when none is named: the tail latencies users gate on, and throughput. */
export const DEFAULT_REGRESS_METRICS: readonly RegressMetric[] = [
  { name: 'ttft.p99', metric: 'ttft', stat: 'p99' },
  { name: 'itl.p99', metric: 'itl', stat: 'p99' },
  { name: 'e2e.p99', metric: 'e2e', stat: 'p99' },
  { name: 'outputThroughput', metric: 'outputThroughput' },
];

/** The baseline window: the `runs` runs before the candidate, or those since a time. */
export type BaselineWindow = { runs: number } | { since: string };

export const DEFAULT_BASELINE_RUNS = 5;

/**
 * The summary rule's margin, by default: worse when the latest run is beyond the worst run of
 * the baseline by more than this share (5 %), better when beyond its best by as much.
 */
export const DEFAULT_SUMMARY_MARGIN = 0.05;

export interface RegressOptions {
  baseline: BaselineWindow;
  metrics: readonly RegressMetric[];
  bootstrap: BootstrapOptions;
  /** The summary rule's margin (a share: 0.05). */
  summaryMargin: number;
}

export interface MetricVerdict {
  name: string;
  label: string;
  unit: string;
  better: Better;
  /** `bootstrap`: compare's paired bootstrap; `summary rule`: the stated rule on the summaries. */
  method: 'bootstrap' | 'summary rule';
  verdict: Verdict;
  baseline: number | null;
  candidate: number | null;
  relative: number | null;
  /** The bootstrap's interval of candidate - baseline (bootstrap only). */
  ci: ConfidenceInterval | null;
  /** The baseline runs' range of the metric (summary rule only). */
  range: { min: number; max: number } | null;
  why: string;
}

export interface SeriesVerdict {
  series: string;
  candidate: {
    id: string;
    dir: string;
    startedAt: string | null;
    interrupted: boolean;
    /** Its validity verdict: a verdict on an invalid run is read with that in mind. */
    validity: string | null;
  };
  baseline: { id: string; dir: string; startedAt: string | null }[];
  /** Server facts that differ between the candidate and its baseline (named, not split on). */
  differences: string[];
  metrics: MetricVerdict[];
  /** Some metric is worse. */
  regression: boolean;
  /** Why nothing was judged (no baseline run). */
  skipped?: string;
}

const Q: Record<string, number> = { p50: 50, p90: 90, p95: 95, p99: 99, p99_9: 99.9 };
const REQUEST_KEYS = new Set<string>(['ttftMs', 'tpotMs', 'e2eMs', 'outputSpeedTokS']);
const RUN_STATS = new Set(['outputThroughput', 'requestThroughput', 'failureRate']);

/**
 * compare's definition of a metric where its bootstrap can resample it (a percentile of a
 * per-request metric or of ITL; output and request throughput; failure rate); undefined for the
 * rest (a mean, a session's duration), which the summary rule judges.
 */
export function bootstrapDefinition(
  m: RegressMetric,
  minEffect: number,
): MetricDefinition | undefined {
  const c = catalogMetric(m.metric);
  const practical = { relative: minEffect };
  if (c.kind === 'run') {
    if (!RUN_STATS.has(c.id)) return undefined;
    return {
      id: m.name,
      label: c.label,
      unit: c.unit,
      better: c.better,
      source: { kind: 'run', stat: c.id as 'outputThroughput' },
      // As compare: a failure rate's change counts from 0.1 percentage points.
      practical: c.id === 'failureRate' ? { absolute: 0.001 } : practical,
    };
  }
  if (c.kind !== 'distribution' || m.stat === undefined || !(m.stat in Q)) return undefined;
  const q = Q[m.stat];
  const source =
    c.requestKey && REQUEST_KEYS.has(c.requestKey)
      ? ({ kind: 'request', key: c.requestKey as RequestMetricKey, q } as const)
      : c.id === 'itl'
        ? ({ kind: 'itl', q } as const)
        : undefined;
  if (!source) return undefined;
  return {
    id: m.name,
    label: `${c.label} ${m.stat}`,
    unit: c.unit,
    better: c.better,
    source,
    practical,
  };
}

/** The runs the candidate is judged against: before it in its series, not interrupted. */
export function baselineOf(
  series: Series,
  candidate: HistoryEntry,
  window: BaselineWindow,
): HistoryEntry[] {
  const before = series.runs.slice(
    0,
    series.runs.findIndex((r) => r.id === candidate.id),
  );
  const usable = before.filter((r) => !r.interrupted);
  if ('runs' in window) return usable.slice(-window.runs);
  return usable.filter((r) => (r.startedAt ?? '') >= window.since);
}

/** A run's per-request sample; `into` pools several (a segment each). */
async function sampleOf(
  root: string,
  runs: readonly HistoryEntry[],
  onProblem: (m: string) => void,
) {
  const builder = new RunSampleBuilder();
  for (const [i, r] of runs.entries()) {
    if (i > 0) builder.segment();
    await readRunView(join(root, r.dir), { sample: builder }, onProblem);
  }
  return builder.build();
}

/** The summary rule on one metric: the candidate against the baseline runs' range. */
function summaryVerdict(
  m: RegressMetric,
  candidate: HistoryEntry,
  baseline: readonly HistoryEntry[],
  margin: number,
  reason: string,
): MetricVerdict {
  const c = catalogMetric(m.metric);
  const label = m.stat ? `${c.label} ${m.stat}` : c.label;
  const values = baseline
    .map((r) => r.metrics[m.name])
    .filter((v): v is number => typeof v === 'number');
  const value = candidate.metrics[m.name] ?? null;
  const base = {
    name: m.name,
    label,
    unit: c.unit,
    better: c.better,
    method: 'summary rule' as const,
    ci: null,
  };
  if (value === null || values.length === 0) {
    return {
      ...base,
      verdict: 'n/a',
      baseline: null,
      candidate: value,
      relative: null,
      range: null,
      why: value === null ? `the latest run has no ${m.name}` : `no baseline run has ${m.name}`,
    };
  }
  const min = Math.min(...values);
  const max = Math.max(...values);
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  // "Worst" and "best" by the metric's direction.
  const [worst, best] = c.better === 'lower' ? [max, min] : [min, max];
  const sign = c.better === 'lower' ? 1 : -1;
  const beyond = (limit: number, by: number) => sign * (value - limit) > Math.abs(limit) * by;
  const pct = `${(margin * 100).toFixed(margin * 100 < 1 ? 1 : 0)} %`;
  const rule = `summary rule (${reason}): worse when beyond the baseline's worst by more than ${pct}, better when beyond its best by as much`;
  const verdict: Verdict = beyond(worst, margin)
    ? 'worse'
    : -sign * (value - best) > Math.abs(best) * margin
      ? 'better'
      : 'no_change';
  return {
    ...base,
    verdict,
    baseline: mean,
    candidate: value,
    relative: mean !== 0 ? value / mean - 1 : null,
    range: { min, max },
    why: rule,
  };
}

/**
 * The verdict of `candidate` (default: the series' latest run) against its baseline window.
 * `onProblem` hears what the records reader skipped.
 */
export async function regressSeries(
  root: string,
  series: Series,
  o: RegressOptions,
  onProblem: (m: string) => void,
  candidate: HistoryEntry = series.runs[series.runs.length - 1],
): Promise<SeriesVerdict> {
  const baseline = baselineOf(series, candidate, o.baseline);
  const head = {
    series: series.name,
    candidate: {
      id: candidate.id,
      dir: candidate.dir,
      startedAt: candidate.startedAt,
      interrupted: candidate.interrupted,
      validity: candidate.validity,
    },
    baseline: baseline.map((r) => ({ id: r.id, dir: r.dir, startedAt: r.startedAt })),
    differences: seriesDifferences(candidate, baseline),
  };
  if (baseline.length === 0) {
    return {
      ...head,
      metrics: [],
      regression: false,
      skipped: 'no earlier run in its series to compare with',
    };
  }
  const withRecords = candidate.hasRecords && baseline.every((r) => r.hasRecords);
  const defined = o.metrics.map((m) => ({
    m,
    def: withRecords ? bootstrapDefinition(m, o.bootstrap.minEffect) : undefined,
  }));
  const bootstrapped = defined.filter((d) => d.def !== undefined);
  const byName = new Map<string, MetricVerdict>();
  if (bootstrapped.length > 0) {
    const a = await sampleOf(root, baseline, onProblem);
    const b = await sampleOf(root, [candidate], onProblem);
    const mode = (r: HistoryEntry) =>
      (r.loadMode === 'open' ? 'open' : 'closed') as LoadSpec['mode'];
    const results = compareSamples(
      a,
      b,
      o.bootstrap,
      { baseline: mode(baseline[0]), candidate: mode(candidate) },
      bootstrapped.map((d) => d.def as MetricDefinition),
    );
    for (const r of results) {
      byName.set(r.id, {
        name: r.id,
        label: r.label,
        unit: r.unit,
        better: r.better,
        method: 'bootstrap',
        verdict: r.verdict,
        baseline: r.baseline,
        candidate: r.candidate,
        relative: r.relative,
        ci: r.ci,
        range: null,
        why: `${r.why}; paired block bootstrap, the ${baseline.length} baseline run${baseline.length === 1 ? "'s" : "s'"} records pooled`,
      });
    }
  }
  const metrics = defined.map(
    ({ m }) =>
      byName.get(m.name) ??
      summaryVerdict(
        m,
        candidate,
        baseline,
        o.summaryMargin,
        withRecords
          ? `the bootstrap has no interval for ${m.name}`
          : 'a run without per-request records',
      ),
  );
  return { ...head, metrics, regression: metrics.some((m) => m.verdict === 'worse') };
}
