/**
 * `infergauge compare`'s report: the comparison of each candidate with the baseline
 * (analysis/compare.ts), and its terminal, Markdown, HTML and JSON renderings.
 */

import Table from 'cli-table3';
import pc from 'picocolors';
import {
  type BootstrapOptions,
  compareUnits,
  connectionMetrics,
  type MetricComparison,
  type MetricUnit,
  type PairComparison,
  PHASE_MIN_CHANGE_MS,
  pairUnits,
  type RunConditions,
  VERDICT_TEXT,
  type Verdict,
} from '../analysis/compare.js';
import {
  evaluateThresholdsOnPoints,
  type SweepThresholdEvaluation,
  type Threshold,
} from '../analysis/thresholds.js';
import { fmtNumber } from '../metrics/format.js';
import type { CompareTarget } from '../results/compareInput.js';
import { escapeHtml, escapeMarkdown, terminalSafe } from './format.js';

export interface CandidateComparison {
  label: string;
  dir: string;
  pairs: PairComparison[];
  /** Units of one side without a match on the other (`chat c128`). */
  onlyBaseline: string[];
  onlyCandidate: string[];
  thresholds?: SweepThresholdEvaluation;
}

export interface CompareReport {
  schemaVersion: 1;
  baseline: { label: string; dir: string };
  options: BootstrapOptions & { force: boolean };
  candidates: CandidateComparison[];
  warnings: string[];
  /** The thresholds as written, when any were given. */
  thresholds?: string[];
}

/** Each candidate target compared with the baseline, unit by unit, with its thresholds. */
export function compareTargets(
  [baseline, ...candidates]: CompareTarget[],
  options: BootstrapOptions & { force: boolean },
  thresholds: Threshold[] | undefined,
): CompareReport {
  const report: CompareReport = {
    schemaVersion: 1,
    baseline: { label: baseline.label, dir: baseline.dir },
    options,
    candidates: [],
    warnings: [baseline, ...candidates].flatMap((t) => t.warnings),
    ...(thresholds ? { thresholds: thresholds.map((t) => t.text) } : {}),
  };
  for (const candidate of candidates) {
    const pairing = pairUnits(baseline.units, candidate.units);
    const pairs = pairing.pairs.map(([a, b]) => compareUnits(a, b, options));
    const entry: CandidateComparison = {
      label: candidate.label,
      dir: candidate.dir,
      pairs,
      onlyBaseline: pairing.onlyBaseline,
      onlyCandidate: pairing.onlyCandidate,
    };
    if (thresholds) {
      entry.thresholds = evaluateThresholdsOnPoints(
        candidate.units.flatMap((u) => u.summaries),
        thresholds,
      );
    }
    report.candidates.push(entry);
  }
  return report;
}

/** Infinity and NaN as strings in JSON (JSON.stringify would write null and hide which). */
function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return value;
}

/** `compare --json`: Infinity and NaN kept apart as strings. */
export function renderJson(r: CompareReport): string {
  return `${JSON.stringify(r, jsonReplacer, 2)}\n`;
}

function digitsFor(x: number): number {
  const a = Math.abs(x);
  return a >= 100 ? 1 : a >= 10 ? 2 : a >= 1 ? 3 : 4;
}

function formatValue(x: number | null, unit: MetricUnit): string {
  if (x === null || !Number.isFinite(x)) return '-';
  if (unit === 'fraction') return `${fmtNumber(x * 100, 2)}%`;
  return fmtNumber(x, digitsFor(x));
}

/** A sign in front unless the number reads as zero at the digits shown. */
function signed(text: string, x: number): string {
  const bare = text.replace(/^-/, '');
  if (!/[1-9]/.test(bare)) return bare;
  return x > 0 ? `+${bare}` : x < 0 ? `\u2212${bare}` : bare;
}

function formatDelta(x: number | null, unit: MetricUnit, reference?: number): string {
  if (x === null || !Number.isFinite(x)) return x === null ? '-' : String(x);
  if (unit === 'fraction') return signed(`${fmtNumber(x * 100, 2)} pp`, x);
  return signed(fmtNumber(x, digitsFor(reference ?? x)), x);
}

function formatRelative(r: number | null): string {
  if (r === null) return '';
  if (!Number.isFinite(r)) return r > 0 ? '+inf%' : '\u2212inf%';
  return signed(`${fmtNumber(r * 100, Math.abs(r) >= 0.1 ? 0 : 1)}%`, r);
}

function deltaText(m: MetricComparison): string {
  if (m.delta === null) return '-';
  const abs = formatDelta(m.delta, m.unit, m.baseline ?? undefined);
  return m.unit === 'fraction' ? abs : `${abs} (${formatRelative(m.relative)})`;
}

function ciText(m: MetricComparison): string {
  if (!m.ci) return '-';
  const ref = m.baseline ?? undefined;
  return `[${formatDelta(m.ci.low, m.unit, ref)}, ${formatDelta(m.ci.high, m.unit, ref)}]`;
}

const UNIT_TEXT: Record<MetricUnit, string> = {
  ms: 'ms',
  'tok/s': 'tok/s',
  'req/s': 'req/s',
  fraction: '%',
};

function metricText(m: MetricComparison): string {
  return `${m.label} (${UNIT_TEXT[m.unit]})${m.lowConfidence ? '*' : ''}`;
}

function countsText(counts: Record<Verdict, number>): string {
  const parts = [
    `${counts.better} better`,
    `${counts.worse} worse`,
    `${counts.no_change} no significant change`,
  ];
  if (counts['n/a'] > 0) parts.push(`${counts['n/a']} n/a`);
  return parts.join(', ');
}

/** How the two servers differ, in one line: `server version 0.8.5 -> 0.9.0; GPUs ...`. */
export function environmentText(p: PairComparison): string {
  return p.environment.map((change) => change.text).join('; ');
}

/** `A valid; B caution (output_short)`: each side's validity verdict, where known. */
export function validityText(p: PairComparison): string | undefined {
  const side = (name: string, v: RunConditions['validity']) =>
    v
      ? `${name} ${v.verdict}${v.codes.length > 0 ? ` (${v.codes.join(', ')})` : ''}`
      : `${name} unknown`;
  if (!p.validity) return undefined;
  return `${side('A', p.validity.baseline)}; ${side('B', p.validity.candidate)}`;
}

/**
 * The verdicts' summary line: the counts, and when the runs are not like for like, why, so that
 * "9 better" never stands alone beside a cache that served one run and not the other.
 */
function verdictsText(p: PairComparison): string {
  const counts = countsText(p.counts);
  if (p.unlike.length === 0) return counts;
  return `${counts}; not like for like: ${p.unlike.map((u) => u.short).join('; ')}`;
}

function pairTitle(p: PairComparison, kind: 'one' | 'many'): string {
  return kind === 'one' ? p.scenario : `${p.scenario} at ${p.level}`;
}

const confidenceText = (r: CompareReport) => `${fmtNumber(r.options.confidence * 100, 0)} %`;

function footnotes(r: CompareReport): string[] {
  const pairs = r.candidates.flatMap((c) => c.pairs.filter((p) => !p.refused));
  const lengths = [
    ...new Set(pairs.flatMap((p) => [p.blocks.baseline.length, p.blocks.candidate.length])),
  ].sort((a, b) => a - b);
  const blocks =
    lengths.length === 0
      ? ''
      : ` in blocks of ${lengths.length === 1 ? lengths[0] : `${lengths[0]}-${lengths[lengths.length - 1]}`} consecutive requests`;
  // The connection phases' own rules are told only where their rows are shown.
  const phaseIds = new Set(connectionMetrics().map((m) => m.id));
  const phases = pairs.some((p) => p.metrics.some((m) => phaseIds.has(m.id)));
  const rules = phases
    ? `failure rate and new connections per request: 0.1 percentage points; pool wait and TLS handshake: also ${fmtNumber(PHASE_MIN_CHANGE_MS, 0)} ms`
    : 'failure rate: 0.1 percentage points';
  const notes = [
    `delta = B - A; ${confidenceText(r)} CI of the delta from ${r.options.resamples.toLocaleString('en-US')} bootstrap resamples of requests${blocks} (seed ${r.options.seed}); a verdict needs the CI to exclude 0 and a change of at least ${fmtNumber(r.options.minEffect * 100, r.options.minEffect * 100 < 1 ? 1 : 0)} % (${rules}).`,
  ];
  if (pairs.some((p) => p.metrics.some((m) => m.lowConfidence))) {
    notes.push(
      '* fewer samples than this percentile needs (p99 and p1: 100 requests or tokens), so its interval is rough.',
    );
  }
  return notes;
}

function allPairs(c: CandidateComparison): 'one' | 'many' {
  return c.pairs.length + c.onlyBaseline.length + c.onlyCandidate.length > 1 ? 'many' : 'one';
}

export function renderTerminal(r: CompareReport, color: boolean): string {
  const c = pc.createColors(color);
  const paint = (v: Verdict, text: string) =>
    v === 'better' ? c.green(text) : v === 'worse' ? c.red(text) : c.dim(text);
  const lines: string[] = [];
  for (const cand of r.candidates) {
    lines.push(c.bold(`A (baseline): ${r.baseline.label}   B: ${cand.label}`));
    const kind = allPairs(cand);
    for (const p of cand.pairs) {
      lines.push('');
      if (kind === 'many') lines.push(c.bold(pairTitle(p, kind)));
      lines.push(`Load: ${p.load}${p.workload ? `; workload ${p.workload}` : ''}`);
      const validity = validityText(p);
      if (validity) {
        const worst = [p.validity?.baseline?.verdict, p.validity?.candidate?.verdict];
        const paintV = worst.includes('invalid')
          ? c.red
          : worst.includes('caution')
            ? c.yellow
            : c.green;
        lines.push(paintV(`Validity: ${terminalSafe(validity)}`));
      }
      // Facts, not warnings: a version change is often the very thing compared.
      if (p.environment.length > 0) {
        lines.push(c.cyan(`Environment: ${terminalSafe(environmentText(p))}`));
      }
      for (const d of p.differences) {
        lines.push(
          p.refused
            ? c.red(`  not comparable: ${terminalSafe(d)}`)
            : c.yellow(`  warning: ${terminalSafe(d)}`),
        );
      }
      if (p.refused) {
        lines.push(c.red('  not compared (--force compares anyway)'));
        continue;
      }
      for (const u of p.unlike) {
        lines.push(c.yellow(`  not like for like (${u.code}): ${terminalSafe(u.text)}`));
      }
      for (const n of p.notes) lines.push(c.dim(`  note: ${n}`));
      const table = new Table({
        head: ['metric', 'A', 'B', 'delta', `${confidenceText(r)} CI`, 'verdict'],
        colAligns: ['left', 'right', 'right', 'right', 'right', 'left'],
        style: { head: [], border: [] },
        chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
      });
      for (const m of p.metrics) {
        table.push([
          metricText(m),
          formatValue(m.baseline, m.unit),
          formatValue(m.candidate, m.unit),
          deltaText(m),
          ciText(m),
          paint(m.verdict, VERDICT_TEXT[m.verdict]),
        ]);
      }
      lines.push(table.toString());
      const verdicts = `Verdicts: ${terminalSafe(verdictsText(p))}`;
      lines.push(p.unlike.length > 0 ? c.yellow(verdicts) : verdicts);
    }
    if (cand.onlyBaseline.length > 0)
      lines.push(c.yellow(`Only in A (not compared): ${cand.onlyBaseline.join(', ')}`));
    if (cand.onlyCandidate.length > 0)
      lines.push(c.yellow(`Only in B (not compared): ${cand.onlyCandidate.join(', ')}`));
    if (cand.thresholds) {
      for (const [i, l] of thresholdLines(cand, r).entries()) {
        const text = i === 0 ? l.text : `  ${l.text}`;
        lines.push(l.ok ? c.green(text) : c.red(text));
      }
    }
    lines.push('');
  }
  for (const w of r.warnings) lines.push(c.yellow(`warning: ${terminalSafe(w)}`));
  lines.push(...footnotes(r).map((f) => c.dim(f)));
  return lines.join('\n');
}

/** The threshold results of a candidate: a headline and one line per threshold and point. */
function thresholdLines(
  cand: CandidateComparison,
  r: CompareReport,
): { ok: boolean; text: string }[] {
  const t = cand.thresholds as SweepThresholdEvaluation;
  const total = t.points.reduce((n, p) => n + p.results.length, 0);
  const failed = t.points.reduce((n, p) => n + p.results.filter((x) => !x.ok).length, 0);
  const lines = [
    {
      ok: t.ok,
      text: `Thresholds on B (${r.thresholds?.join(', ')}): ${t.ok ? `all ${total} met` : `${failed} of ${total} failed`}`,
    },
  ];
  for (const p of t.points) {
    for (const x of p.results) {
      lines.push({
        ok: x.ok,
        text: `${x.ok ? 'ok' : 'FAILED'}: ${t.points.length > 1 ? `${p.name}: ` : ''}${x.message}`,
      });
    }
  }
  return lines;
}

const MD_VERDICT: Record<Verdict, string> = {
  better: '\u2705 better',
  worse: '\u274c **worse**',
  no_change: 'no significant change',
  'n/a': 'n/a',
};

export function renderMarkdown(r: CompareReport): string {
  const e = escapeMarkdown;
  const lines: string[] = ['## infergauge compare', ''];
  for (const cand of r.candidates) {
    lines.push(`**A** (baseline): ${e(r.baseline.label)} \u00b7 **B**: ${e(cand.label)}`, '');
    const kind = allPairs(cand);
    for (const p of cand.pairs) {
      if (kind === 'many') lines.push(`#### ${e(pairTitle(p, kind))}`, '');
      lines.push(`${e(capitalise(p.load))}${p.workload ? `; ${e(p.workload)}` : ''}.`, '');
      const validity = validityText(p);
      if (validity) lines.push(`**Validity:** ${e(validity)}.`, '');
      if (p.environment.length > 0) lines.push(`**Environment:** ${e(environmentText(p))}.`, '');
      if (p.refused) {
        lines.push(
          `**Not compared** (\`--force\` compares anyway): ${p.differences.map(e).join('; ')}.`,
          '',
        );
        continue;
      }
      for (const d of p.differences) lines.push(`> \u26a0\ufe0f ${e(d)}`);
      for (const u of p.unlike) {
        lines.push(`> \u26a0\ufe0f **Not like for like** (\`${u.code}\`): ${e(u.text)}`);
      }
      if (p.differences.length + p.unlike.length > 0) lines.push('');
      lines.push(`| metric | A | B | delta | ${confidenceText(r)} CI | verdict |`);
      lines.push('|---|--:|--:|--:|--:|---|');
      for (const m of p.metrics) {
        lines.push(
          // Our own labels and numbers: nothing in these cells comes from a run.
          `| ${metricText(m).replace('*', '\\*')} | ${formatValue(m.baseline, m.unit)} | ${formatValue(m.candidate, m.unit)} | ${deltaText(m)} | ${ciText(m)} | ${MD_VERDICT[m.verdict]} |`,
        );
      }
      lines.push('', `${e(verdictsText(p))}.`, '');
      if (p.notes.length > 0) lines.push(...p.notes.map((n) => `- ${e(n)}`), '');
    }
    if (cand.onlyBaseline.length > 0)
      lines.push(`Only in A (not compared): ${cand.onlyBaseline.map(e).join(', ')}`, '');
    if (cand.onlyCandidate.length > 0)
      lines.push(`Only in B (not compared): ${cand.onlyCandidate.map(e).join(', ')}`, '');
    if (cand.thresholds) {
      for (const l of thresholdLines(cand, r))
        lines.push(`- ${l.ok ? e(l.text) : `**${e(l.text)}**`}`);
      lines.push('');
    }
  }
  for (const w of r.warnings) lines.push(`> ${e(w)}`, '');
  lines.push(...footnotes(r).map((f) => `<sub>${e(f)}</sub>`), '');
  return lines.join('\n');
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

const CSS = `
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#1f2328;line-height:1.45}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem}h3{font-size:1rem;margin-top:1.5rem}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:right}th{background:#f6f8fa}
td:first-child,th:first-child,td:last-child,th:last-child{text-align:left}
.better{color:#1a7f37;font-weight:600}.worse{color:#cf222e;font-weight:600}.no_change,.na{color:#656d76}
.warn{color:#9a6700}.env{color:#0550ae}.refused{color:#cf222e}.note,.foot{color:#656d76;font-size:.9em}
.ok{color:#1a7f37}.fail{color:#cf222e;font-weight:600}
`;

export function renderHtml(r: CompareReport): string {
  const h = escapeHtml;
  const body: string[] = [`<h1>infergauge compare</h1>`];
  for (const cand of r.candidates) {
    body.push(
      `<h2>B: ${h(cand.label)} <small>vs A (baseline): ${h(r.baseline.label)}</small></h2>`,
    );
    const kind = allPairs(cand);
    for (const p of cand.pairs) {
      if (kind === 'many') body.push(`<h3>${h(pairTitle(p, kind))}</h3>`);
      body.push(`<p>${h(capitalise(p.load))}${p.workload ? `; ${h(p.workload)}` : ''}.</p>`);
      const validity = validityText(p);
      if (validity) body.push(`<p>Validity: ${h(validity)}.</p>`);
      if (p.environment.length > 0) {
        body.push(`<p class="env">Environment: ${h(environmentText(p))}.</p>`);
      }
      for (const d of p.differences) {
        body.push(
          `<p class="${p.refused ? 'refused' : 'warn'}">${p.refused ? 'Not comparable' : 'Warning'}: ${h(d)}</p>`,
        );
      }
      if (p.refused) {
        body.push('<p class="refused">Not compared (--force compares anyway).</p>');
        continue;
      }
      for (const u of p.unlike) {
        body.push(`<p class="warn">Not like for like (${h(u.code)}): ${h(u.text)}</p>`);
      }
      body.push(
        `<table><thead><tr><th>metric</th><th>A</th><th>B</th><th>delta</th><th>${h(confidenceText(r))} CI</th><th>verdict</th></tr></thead><tbody>`,
      );
      for (const m of p.metrics) {
        const cls = m.verdict === 'n/a' ? 'na' : m.verdict;
        body.push(
          `<tr><td>${h(metricText(m))}</td><td>${h(formatValue(m.baseline, m.unit))}</td><td>${h(formatValue(m.candidate, m.unit))}</td><td>${h(deltaText(m))}</td><td>${h(ciText(m))}</td><td class="${cls}" title="${h(m.why)}">${h(VERDICT_TEXT[m.verdict])}</td></tr>`,
        );
      }
      body.push(
        '</tbody></table>',
        `<p${p.unlike.length > 0 ? ' class="warn"' : ''}>${h(verdictsText(p))}.</p>`,
      );
      for (const n of p.notes) body.push(`<p class="note">Note: ${h(n)}</p>`);
    }
    if (cand.onlyBaseline.length > 0)
      body.push(`<p class="warn">Only in A (not compared): ${h(cand.onlyBaseline.join(', '))}</p>`);
    if (cand.onlyCandidate.length > 0)
      body.push(
        `<p class="warn">Only in B (not compared): ${h(cand.onlyCandidate.join(', '))}</p>`,
      );
    if (cand.thresholds) {
      body.push('<ul>');
      for (const l of thresholdLines(cand, r)) {
        body.push(`<li class="${l.ok ? 'ok' : 'fail'}">${h(l.text)}</li>`);
      }
      body.push('</ul>');
    }
  }
  for (const w of r.warnings) body.push(`<p class="warn">Warning: ${h(w)}</p>`);
  body.push(...footnotes(r).map((f) => `<p class="foot">${h(f)}</p>`));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>infergauge compare: ${h(r.candidates.map((c) => c.label).join(', '))} vs ${h(r.baseline.label)}</title>
<style>${CSS}</style>
</head>
<body>
${body.join('\n')}
</body>
</html>
`;
}
