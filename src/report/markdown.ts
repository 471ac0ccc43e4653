import { fmtNumber } from '../metrics/format.js';
import type { RunSummary } from '../metrics/summary.js';
import { markdownCell as cell } from './format.js';
import { describeLoad } from './terminal.js';

const fmt = (n: number, digits = 1) => fmtNumber(n, digits);

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
    lines.push(
      `**Load:** ${cell(describeLoad(s))}, ${s.requests.completed} completed, ${s.requests.failed} failed`,
      '',
    );
    lines.push('| latency (ms) | p50 | p90 | p99 | mean |', '|---|---:|---:|---:|---:|');
    for (const [name, d] of [
      ['TTFT', s.latency.ttftMs],
      ['ITL', s.latency.itlMs],
      ['TPOT', s.latency.tpotMs],
      ['E2E', s.latency.e2eMs],
    ] as const) {
      lines.push(`| ${name} | ${fmt(d.p50)} | ${fmt(d.p90)} | ${fmt(d.p99)} | ${fmt(d.mean)} |`);
    }
    lines.push(
      '',
      `**Throughput** at ${cell(describeLoad(s))}: ${fmt(s.throughput.outputTokensPerS, 0)} output tok/s, ${fmt(s.throughput.requestsPerS, 2)} req/s${s.goodput ? `, goodput ${fmt(s.goodput.requestsPerS, 2)} req/s (${fmt(s.goodput.sloAttainment * 100, 1)}% within SLO)` : ''}`,
    );
  } else {
    lines.push(
      '| run | load | completed | failed | TTFT p50 | TTFT p99 | ITL p99 | E2E p99 | output tok/s |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|',
    );
    for (const { name, summary: s } of runs) {
      lines.push(
        `| ${cell(name)} | ${cell(describeLoad(s))} | ${s.requests.completed} | ${s.requests.failed} | ${fmt(s.latency.ttftMs.p50)} | ${fmt(s.latency.ttftMs.p99)} | ${fmt(s.latency.itlMs.p99, 2)} | ${fmt(s.latency.e2eMs.p99, 0)} | ${fmt(s.throughput.outputTokensPerS, 0)} |`,
      );
    }
  }
  const warnings = runs.flatMap(({ name, summary }) =>
    summary.warnings.map((w) => `${runs.length > 1 ? `${name}: ` : ''}${w.message}`),
  );
  if (warnings.length > 0) {
    lines.push('', '**Warnings**', '', ...warnings.map((w) => `- ${cell(w)}`));
  }
  return `${lines.join('\n')}\n`;
}
