import { cacheStatePhrase, readCacheState } from '../analysis/prefixCache.js';
import type { Distribution } from '../metrics/distribution.js';
import { fmtNumber } from '../metrics/format.js';
import type { RunSummary } from '../metrics/summary.js';
import { validityOf, verdictPhrase } from '../metrics/validity.js';
import { severityOf } from '../metrics/warnings.js';
import type { SavedSummary } from '../results/reader.js';
import { connectionsFacts, PHASE_COLUMNS, phaseRows, streamsLine } from './connectionsText.js';
import { errorKindLines, nothingSucceeded } from './failures.js';
import { markdownCell as cell, escapeMarkdown, metricLabel } from './format.js';
import { describeReasoning, sessionFacts, TURN_COLUMNS } from './sessionsText.js';
import { type Column, markdownTable } from './table.js';
import {
  describeLoad,
  describeSteadyState,
  describeWarmupTransient,
  predictedFigure,
} from './terminal.js';

const fmt = (n: number, digits = 1) => fmtNumber(n, digits);

const LATENCY_COLUMNS: Column<[string, Distribution]>[] = [
  { label: 'latency (ms)', align: 'left', value: ([name]) => name },
  ...(['p50', 'p90', 'p99', 'mean'] as const).map(
    (key): Column<[string, Distribution]> => ({
      label: key,
      align: 'right',
      value: ([, d]) => fmt(d[key]),
    }),
  ),
];

type NamedRun = { name: string; summary: RunSummary };
const runNumber = (
  label: string,
  value: (s: RunSummary) => number,
  digits = 1,
): Column<NamedRun> => ({ label, align: 'right', value: (r) => fmt(value(r.summary), digits) });

const RUN_COLUMNS: Column<NamedRun>[] = [
  { label: 'run', align: 'left', value: (r) => r.name },
  { label: 'load', align: 'left', value: (r) => describeLoad(r.summary) },
  { label: 'completed', align: 'right', value: (r) => String(r.summary.requests.completed) },
  { label: 'failed', align: 'right', value: (r) => String(r.summary.requests.failed) },
  runNumber(`${metricLabel('ttftMs')} p50`, (s) => s.latency.ttftMs.p50),
  runNumber(`${metricLabel('ttftMs')} p99`, (s) => s.latency.ttftMs.p99),
  runNumber(`${metricLabel('itlMs')} p99`, (s) => s.latency.itlMs.p99, 2),
  runNumber(`${metricLabel('e2eMs')} p99`, (s) => s.latency.e2eMs.p99, 0),
  runNumber('output tok/s', (s) => s.throughput.outputTokensPerS, 0),
  { label: 'validity', align: 'left', value: (r) => verdictPhrase(validityOf(r.summary.warnings)) },
];

/**
 * HTTP/2's streams per connection, and the connection phases (docs/metrics.md, "Connection
 * phases") when they matter by the terminal's rule: the facts line and the HTML report's table.
 */
function connectionsMarkdown(s: RunSummary): string[] {
  const lines: string[] = [];
  const streams = streamsLine(s);
  if (streams) lines.push('', cell(streams));
  // Undefined unless they matter, by the terminal's rule (connectionsMatter).
  const facts = connectionsFacts(s);
  if (facts) {
    lines.push(
      '',
      `**Connections:** ${cell(facts)}`,
      '',
      ...markdownTable(PHASE_COLUMNS, phaseRows(s)),
    );
  }
  return lines;
}

/**
 * A calibrated simulated run's prediction intervals in one line: each latency median and the
 * throughput as `21.4 (19.8-23.3)` (docs/metrics.md, "Prediction intervals").
 */
function predictionMarkdown(s: RunSummary): string | undefined {
  if (!s.prediction) return undefined;
  const parts: string[] = [];
  for (const key of ['ttftMs', 'itlMs', 'tpotMs', 'e2eMs'] as const) {
    const d = s.latency[key];
    if (d.prediction && d.count > 0) {
      parts.push(`${metricLabel(key)} p50 ${predictedFigure(d.p50, d.prediction)}`);
    }
  }
  const t = s.throughput.prediction?.outputTokensPerS;
  if (t) parts.push(`${predictedFigure(s.throughput.outputTokensPerS, t)} output tok/s`);
  if (parts.length === 0) return undefined;
  return `**Predicted** (${fmt(s.prediction.level * 100, 0)}% prediction intervals from the calibration): ${cell(parts.join(', '))}`;
}

/**
 * A compact summary for a CI job summary or a pull-request comment: the load first, latency
 * percentiles, throughput with its load, failures and warnings. `runs` holds one or more
 * named summaries (scenarios, sweep points).
 */
export function markdownSummary(
  title: string,
  runs: { name: string; summary: RunSummary }[],
): string {
  const lines: string[] = [`### ${cell(title)}`, ''];
  if (runs.length === 1) {
    const s = runs[0].summary;
    // Nothing succeeded: the server's reasons lead, before tables of nothing.
    if (nothingSucceeded([s])) {
      lines.push(
        `**All ${s.requests.failed} requests failed**: nothing below is a measurement.`,
        '',
        ...errorKindLines(s.requests).map((l) => `- ${escapeMarkdown(l)}`),
        '',
      );
    }
    lines.push(
      `**Validity:** ${cell(verdictPhrase(validityOf(s.warnings)))}`,
      '',
      `**Load:** ${cell(describeLoad(s))}, ${s.requests.completed} completed, ${s.requests.failed} failed`,
      '',
    );
    const cacheState = readCacheState(s.cacheState);
    if (cacheState)
      lines.push(
        `**Prefix cache at the start:** ${cacheStatePhrase(cacheState, s.prefixHitRate)}`,
        '',
      );
    lines.push(
      ...markdownTable(LATENCY_COLUMNS, [
        [metricLabel('ttftMs'), s.latency.ttftMs],
        [metricLabel('itlMs'), s.latency.itlMs],
        [metricLabel('tpotMs'), s.latency.tpotMs],
        [metricLabel('e2eMs'), s.latency.e2eMs],
      ]),
    );
    const predicted = predictionMarkdown(s);
    if (predicted) lines.push('', predicted);
    lines.push(
      '',
      `**Throughput** at ${cell(describeLoad(s))}: ${fmt(s.throughput.outputTokensPerS, 0)} output tok/s, ${fmt(s.throughput.requestsPerS, 2)} req/s${s.goodput ? `, goodput ${fmt(s.goodput.requestsPerS, 2)} req/s (${fmt(s.goodput.sloAttainment * 100, 1)}% within SLO)` : ''}`,
    );
    const steady = describeSteadyState(s);
    if (steady) lines.push('', `**Steady state**: ${cell(steady)}`);
    const transient = describeWarmupTransient(s);
    if (transient) lines.push('', `**Warm-up transient**: ${cell(transient)}`);
    // A saved summary carries the server's numbers: the cache hit rate explains the turns.
    const sessions = sessionFacts(s, (s as SavedSummary).serverMetrics);
    if (sessions && s.sessions) {
      for (const line of sessions) lines.push('', cell(line));
      lines.push('', ...markdownTable(TURN_COLUMNS, s.sessions.turns));
    }
    const reasoning = describeReasoning(s);
    if (reasoning) lines.push('', `**Reasoning:** ${cell(reasoning)}`);
    lines.push(...connectionsMarkdown(s));
  } else {
    lines.push(...markdownTable(RUN_COLUMNS, runs));
  }
  const warnings = runs.flatMap(({ name, summary }) =>
    summary.warnings.map(
      (w) =>
        `${runs.length > 1 ? `${name}: ` : ''}${severityOf(w)} \`${w.code}\`: ${w.message}${w.detail ? ` ${w.detail}` : ''}`,
    ),
  );
  if (warnings.length > 0) {
    lines.push('', '**Warnings**', '', ...warnings.map((w) => `- ${cell(w)}`));
  }
  return `${lines.join('\n')}\n`;
}
