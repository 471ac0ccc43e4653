/**
 * `infergauge history`'s outputs: the list of runs, a metric's trend along each series (a table
 * and an HTML chart), and the regression verdicts. Server text (model ids, URLs, labels, tags,
 * notes) is made terminal-safe on the terminal and escaped in HTML.
 */

import { fmtSig } from '../metrics/format.js';
import type { HistoryEntry } from '../results/history/entry.js';
import type { Series } from '../results/history/query.js';
import type { MetricVerdict, SeriesVerdict } from '../results/history/regress.js';
import { type ChartSpec, renderChart } from './charts.js';
import { escapeHtml, terminalSafe } from './format.js';
import { type Column, terminalTable } from './table.js';

const dash = (x: string | number | null | undefined) =>
  x === null || x === undefined || x === '' ? '-' : String(x);
const num = (x: number | null | undefined) =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : fmtSig(x);
/** `2026-12-06 11:15` (UTC): a run's start as a table shows it. */
const when = (iso: string | null) => (iso ? iso.slice(0, 16).replace('T', ' ') : '-');

const LIST_COLUMNS: Column<HistoryEntry>[] = [
  { label: 'started (UTC)', align: 'left', value: (r) => when(r.startedAt) },
  { label: 'id', align: 'left', value: (r) => r.id },
  { label: 'kind', align: 'left', value: (r) => r.kind },
  { label: 'model', align: 'left', value: (r) => dash(r.model) },
  {
    label: 'engine',
    align: 'left',
    value: (r) => dash([r.engine, r.engineVersion].filter(Boolean).join(' ')),
  },
  { label: 'scenario', align: 'left', value: (r) => dash(r.scenario) },
  { label: 'load', align: 'left', value: (r) => dash(r.load) },
  { label: 'tags', align: 'left', value: (r) => dash(r.tags.join(',')) },
  { label: 'TTFT p99 ms', align: 'right', value: (r) => num(r.latency.ttft_p99_ms) },
  { label: 'ITL p99 ms', align: 'right', value: (r) => num(r.latency.itl_p99_ms) },
  { label: 'tok/s', align: 'right', value: (r) => num(r.outputTokPerS) },
  { label: 'failed', align: 'right', value: (r) => dash(r.failed) },
  {
    label: 'verdict',
    align: 'left',
    value: (r) =>
      r.interrupted ? `interrupted${r.validity ? `, ${r.validity}` : ''}` : dash(r.validity),
  },
  { label: 'dir', align: 'left', value: (r) => r.dir },
];

/** The runs, newest first, one line each. */
export function renderRunList(runs: readonly HistoryEntry[], root: string): string {
  if (runs.length === 0) return `No runs in ${terminalSafe(root)} match.\n`;
  const rows = runs.map((r) =>
    Object.fromEntries(LIST_COLUMNS.map((c) => [c.label, terminalSafe(c.value(r))])),
  );
  const safe = LIST_COLUMNS.map((c) => ({
    ...c,
    value: (row: Record<string, string>) => row[c.label],
  }));
  return `${terminalTable(safe, rows)}\n${runs.length} run${runs.length === 1 ? '' : 's'} in ${terminalSafe(root)} (newest first)\n`;
}

/** Each series' trend of the metrics, oldest first, one table per series. */
export function renderTrend(series: readonly Series[], metrics: readonly string[]): string {
  if (series.length === 0) return 'No runs match: no trend to show.\n';
  const out: string[] = [];
  for (const s of series) {
    const columns: Column<HistoryEntry>[] = [
      { label: 'started (UTC)', align: 'left', value: (r) => when(r.startedAt) },
      { label: 'id', align: 'left', value: (r) => terminalSafe(r.id) },
      ...metrics.map(
        (m): Column<HistoryEntry> => ({
          label: m,
          align: 'right',
          value: (r) => num(r.metrics[m]),
        }),
      ),
      ...metrics.map(
        (m): Column<HistoryEntry> => ({
          label: `${m} vs previous`,
          align: 'right',
          value: (r) => changeText(s.runs, r, m),
        }),
      ),
      {
        label: 'engine',
        align: 'left',
        value: (r) => terminalSafe(dash([r.engine, r.engineVersion].filter(Boolean).join(' '))),
      },
      {
        label: 'note',
        align: 'left',
        value: (r) =>
          r.interrupted ? 'interrupted' : r.validity === 'valid' ? '' : dash(r.validity),
      },
    ];
    out.push(`${terminalSafe(s.name)} (${s.runs.length} run${s.runs.length === 1 ? '' : 's'})`);
    out.push(terminalTable(columns, s.runs), '');
  }
  return `${out.join('\n')}`;
}

/** The change of a metric from the run before in the series, in per cent. */
function changeText(runs: readonly HistoryEntry[], r: HistoryEntry, m: string): string {
  const i = runs.indexOf(r);
  const before = runs
    .slice(0, i)
    .reverse()
    .find((x) => typeof x.metrics[m] === 'number');
  const a = before?.metrics[m];
  const b = r.metrics[m];
  if (a === undefined || b === undefined || a === 0) return '-';
  const pct = (b / a - 1) * 100;
  return `${pct > 0 ? '+' : pct < 0 ? '\u2212' : ''}${Math.abs(pct).toFixed(1)} %`;
}

/** A value in its unit: a fraction as per cent. */
function valueText(x: number | null, unit: string): string {
  if (x === null || !Number.isFinite(x)) return '-';
  return unit === 'fraction' ? `${fmtSig(x * 100)} %` : `${fmtSig(x)} ${unit}`;
}

/** The interval that proves a verdict: the bootstrap's, or the baseline's range. */
export function evidenceText(m: MetricVerdict): string {
  const pct = (x: number) =>
    `${x > 0 ? '+' : x < 0 ? '\u2212' : ''}${Math.abs(x * 100).toFixed(1)} %`;
  if (m.ci) {
    return `${Math.round(m.ci.level * 100)} % CI of the change [${pct(m.ci.relativeLow)}, ${pct(m.ci.relativeHigh)}]`;
  }
  if (m.range)
    return `baseline range [${valueText(m.range.min, m.unit)}, ${valueText(m.range.max, m.unit)}]`;
  return '-';
}

const VERDICT_WORDS: Record<string, string> = {
  worse: 'REGRESSION',
  better: 'better',
  no_change: 'no significant change',
  'n/a': 'n/a',
};

/** The verdicts, series by series, then one line that says whether anything regressed. */
export function renderVerdicts(verdicts: readonly SeriesVerdict[]): string {
  if (verdicts.length === 0) return 'No runs match: nothing to judge.\n';
  const out: string[] = [];
  for (const v of verdicts) {
    const c = v.candidate;
    out.push(
      `${terminalSafe(v.series)}: ${terminalSafe(c.id)} (${when(c.startedAt)}${c.interrupted ? ', interrupted' : ''}${c.validity && c.validity !== 'valid' ? `, ${c.validity}` : ''}) against ${v.baseline.length} earlier run${v.baseline.length === 1 ? '' : 's'}`,
    );
    if (v.skipped) {
      out.push(`  not judged: ${v.skipped}`, '');
      continue;
    }
    const columns: Column<MetricVerdict>[] = [
      { label: 'metric', align: 'left', value: (m) => m.name },
      { label: 'baseline', align: 'right', value: (m) => valueText(m.baseline, m.unit) },
      { label: 'latest', align: 'right', value: (m) => valueText(m.candidate, m.unit) },
      { label: 'evidence', align: 'left', value: evidenceText },
      { label: 'verdict', align: 'left', value: (m) => VERDICT_WORDS[m.verdict] ?? m.verdict },
      { label: 'method', align: 'left', value: (m) => m.method },
    ];
    out.push(terminalTable(columns, v.metrics));
    const rules = [
      ...new Set(v.metrics.filter((m) => m.method === 'summary rule').map((m) => m.why)),
    ];
    for (const r of rules) out.push(`  ${r}`);
    for (const d of v.differences)
      out.push(`  differs from the baseline (not split on): ${terminalSafe(d)}`);
    out.push('');
  }
  const regressed = verdicts.filter((v) => v.regression);
  out.push(
    regressed.length > 0
      ? `Regression in ${regressed.length} of ${verdicts.length} series.`
      : `No regression in ${verdicts.length} series.`,
  );
  return `${out.join('\n')}\n`;
}

/** Days since `t0` of an ISO time. */
const daysSince = (t0: number, iso: string | null) =>
  iso ? (Date.parse(iso) - t0) / 86_400_000 : Number.NaN;

/**
 * A page with one chart per metric: each series a line over time (days since the first run
 * shown), server-rendered SVG (report/charts.ts), no script, no CDN.
 */
export function renderTrendHtml(
  series: readonly Series[],
  metrics: readonly string[],
  units: Record<string, string>,
): string {
  const starts = series.flatMap((s) => s.runs.map((r) => Date.parse(r.startedAt ?? '')));
  const t0 = Math.min(...starts.filter(Number.isFinite));
  const first = Number.isFinite(t0)
    ? new Date(t0).toISOString().slice(0, 16).replace('T', ' ')
    : '-';
  const charts = metrics.map((m) => {
    const spec: ChartSpec = {
      kind: 'xy',
      id: `history-${m}`,
      title: `${m} over time`,
      caption: `Each line is a series (the same tag, otherwise the same model and URL; with the same scenario and load). Days since ${first} UTC.`,
      x: { name: 'days', unit: 'days', scale: true },
      y: [{ name: m, unit: units[m] ?? '', scale: true }],
      series: series.map((s) => ({
        name: s.name,
        type: 'line' as const,
        data: s.runs
          .filter((r) => typeof r.metrics[m] === 'number')
          .map((r) => [daysSince(t0, r.startedAt), r.metrics[m]] as [number, number]),
        labels: s.runs
          .filter((r) => typeof r.metrics[m] === 'number')
          .map(
            (r) =>
              `${s.name}: ${fmtSig(r.metrics[m])} ${units[m] ?? ''} (${r.id}, ${when(r.startedAt)})`,
          ),
        symbol: 'circle' as const,
      })),
      width: 960,
      height: 360,
    };
    return renderChart(spec);
  });
  const tables = series
    .map((s) => {
      const head = ['started (UTC)', 'id', ...metrics, 'engine', 'dir'];
      const rows = s.runs.map((r) => [
        when(r.startedAt),
        r.id,
        ...metrics.map((m) => num(r.metrics[m])),
        dash([r.engine, r.engineVersion].filter(Boolean).join(' ')),
        r.dir,
      ]);
      return `<h2>${escapeHtml(s.name)}</h2><table><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((row) => `<tr>${row.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`).join('')}</tbody></table>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>infergauge history</title>
<style>body{font-family:sans-serif;color:#1f2937;margin:2em;max-width:1000px}svg text{font-family:sans-serif}table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{padding:.2em .6em;border-bottom:1px solid #e5e7eb;text-align:right}th:nth-child(-n+2),td:nth-child(-n+2){text-align:left}figcaption{color:#6b7280;font-size:.9em}</style>
</head><body><h1>infergauge history</h1>
${charts.map((c) => `<figure><h2>${escapeHtml(c.title)}</h2>${c.svg}${c.caption ? `<figcaption>${escapeHtml(c.caption)}</figcaption>` : ''}</figure>`).join('\n')}
${tables}
</body></html>
`;
}
