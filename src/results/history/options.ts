/**
 * `infergauge history`'s options checked into what the history library takes: filters, the
 * trend's metrics, the regression baseline and bootstrap, each problem named (bad usage, exit 2).
 * The command line only parses, calls and prints.
 */
import { type CompareFlags, compareSettings } from '../../analysis/compare.js';
import { parseMetricName, ThresholdError } from '../../analysis/thresholds.js';
import { parseFlagNumber } from '../../flagNumber.js';
import type { HistoryFilter } from './query.js';
import type { BaselineWindow, RegressMetric } from './regress.js';

export interface HistoryOptions extends CompareFlags {
  root?: string;
  model?: string;
  url?: string;
  engine?: string;
  engineVersion?: string;
  gpu?: string;
  label?: string;
  tag?: string[];
  since?: string;
  until?: string;
  scenario?: string;
  load?: string;
  kind?: string;
  limit?: string;
  metric?: string[];
  html?: string;
  json?: boolean;
  regress?: boolean;
  run?: string;
  baseline?: string;
  baselineSince?: string;
  summaryMargin?: string;
  reindex?: boolean;
  import?: string[];
}

/** A date (`2026-12-01`, the whole day) or a time (`2026-12-01T09:00Z`) as an ISO time. */
function isoTime(text: string, flag: string, problems: string[], end = false): string | undefined {
  const day = /^\d{4}-\d{2}-\d{2}$/.test(text);
  const ms = Date.parse(day ? `${text}T00:00:00Z` : text);
  if (!Number.isFinite(ms)) {
    problems.push(
      `${flag} takes a date or a time, e.g. 2026-12-01 or 2026-12-01T09:00:00Z (got "${text}")`,
    );
    return undefined;
  }
  // --until a day: through its end.
  return new Date(day && end ? ms + 86_400_000 : ms).toISOString();
}

export interface HistorySettings {
  filter: HistoryFilter;
  limit?: number;
  metrics: (RegressMetric & { unit: string })[];
  baseline: BaselineWindow;
  summaryMargin: number;
  bootstrap: ReturnType<typeof compareSettings>['options'];
}

/** Every option checked; each problem named (exit 2). */
export function historySettings(o: HistoryOptions): {
  settings: HistorySettings;
  problems: string[];
} {
  const problems: string[] = [];
  const filter: HistoryFilter = {};
  for (const key of [
    'model',
    'url',
    'engine',
    'engineVersion',
    'gpu',
    'label',
    'scenario',
    'load',
    'kind',
  ] as const) {
    if (o[key] !== undefined) filter[key] = o[key];
  }
  // A filter takes any tag as given (a run's may come from a plan): it only matches or not.
  if (o.tag) filter.tags = o.tag;
  if (o.since !== undefined) {
    const t = isoTime(o.since, '--since', problems);
    if (t) filter.since = t;
  }
  if (o.until !== undefined) {
    const t = isoTime(o.until, '--until', problems, true);
    if (t) filter.until = t;
  }
  let limit: number | undefined;
  if (o.limit !== undefined) {
    const n = parseFlagNumber(o.limit);
    if ('value' in n && Number.isInteger(n.value) && n.value > 0) limit = n.value;
    else problems.push(`--limit must be a whole number above 0 (got "${o.limit}")`);
  }
  const metrics: HistorySettings['metrics'] = [];
  for (const m of o.metric ?? []) {
    try {
      const p = parseMetricName(m);
      metrics.push({
        name: p.name,
        metric: p.metric,
        ...(p.stat ? { stat: p.stat } : {}),
        unit: p.unit,
      });
    } catch (err) {
      if (!(err instanceof ThresholdError)) throw err;
      problems.push(...err.problems.map((x) => `--metric ${x}`));
    }
  }
  let baseline: BaselineWindow = { runs: 5 };
  if (o.baseline !== undefined && o.baselineSince !== undefined) {
    problems.push('give --baseline N or --baseline-since DATE, not both');
  } else if (o.baseline !== undefined) {
    const n = parseFlagNumber(o.baseline);
    if ('value' in n && Number.isInteger(n.value) && n.value > 0) baseline = { runs: n.value };
    else problems.push(`--baseline must be a whole number of runs above 0 (got "${o.baseline}")`);
  } else if (o.baselineSince !== undefined) {
    const t = isoTime(o.baselineSince, '--baseline-since', problems);
    if (t) baseline = { since: t };
  }
  let summaryMargin = 0.05;
  if (o.summaryMargin !== undefined) {
    const n = parseFlagNumber(String(o.summaryMargin).replace(/%$/, ''));
    if ('value' in n && n.value >= 0 && n.value < 1000) summaryMargin = n.value / 100;
    else
      problems.push(
        `--summary-margin must be a percentage from 0, e.g. 5 (got "${o.summaryMargin}")`,
      );
  }
  // compare's own checks of its bootstrap flags (a baseline and a candidate stand for its dirs).
  const compare = compareSettings(['baseline', 'latest'], o);
  problems.push(...compare.problems);
  const regressOnly = [
    'run',
    'baseline',
    'baselineSince',
    'confidence',
    'resamples',
    'seed',
    'minEffect',
    'summaryMargin',
  ] as const;
  if (!o.regress) {
    for (const k of regressOnly) {
      if (o[k] !== undefined)
        problems.push(`--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is for --regress`);
    }
  }
  if (o.html !== undefined && metrics.length === 0)
    problems.push('--html draws a trend: name the metric with --metric');
  if (o.reindex && (o.regress || metrics.length > 0)) {
    problems.push(
      '--reindex rebuilds the database and lists it: give --metric and --regress on another call',
    );
  }
  return {
    settings: {
      filter,
      ...(limit !== undefined ? { limit } : {}),
      metrics,
      baseline,
      summaryMargin,
      bootstrap: compare.options,
    },
    problems,
  };
}
