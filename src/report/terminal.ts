import Table from 'cli-table3';
import pc from 'picocolors';
import type { Distribution } from '../metrics/distribution.js';
import type { RunSummary } from '../metrics/summary.js';

export interface TerminalOptions {
  color: boolean;
  /** Extra facts for the headline (model, endpoint). */
  model?: string;
  endpoint?: string;
  /** Where the results were written. */
  outDir?: string;
}

/** "64 concurrent requests (measured 61.8)": a throughput is never shown without its load. */
export function describeLoad(summary: RunSummary): string {
  const { load } = summary;
  const measured = fmt(load.meanConcurrency, 1);
  if (load.mode === 'closed') {
    return `${num(load.concurrency)} concurrent requests (measured ${measured})`;
  }
  const cap =
    load.maxConcurrency !== undefined ? `, at most ${num(load.maxConcurrency)} in flight` : '';
  return `${fmt(load.rate, 2)} requests/s ${load.arrival} arrivals${cap} (measured concurrency ${measured})`;
}

/** The human summary of one run, as printed at its end. */
export function renderTerminalSummary(summary: RunSummary, options: TerminalOptions): string {
  const c = options.color ? pc : pc.createColors(false);
  const lines: string[] = [];
  const counted = summary.requests.completed + summary.requests.failed;
  const perRequest = (n: number) => (counted > 0 ? Math.round(n / counted) : 0);
  const facts = [
    describeLoad(summary),
    `${num(counted)} requests`,
    `${num(perRequest(summary.tokens.requestedInput))} in / ${num(perRequest(summary.tokens.requestedOutput))} out tokens`,
  ];
  if (options.endpoint) facts.push(`${options.endpoint} endpoint`);
  if (options.model) facts.push(`model ${options.model}`);
  lines.push(c.bold(facts.join(', ')));
  if (summary.clientHealth?.clientLimited) {
    lines.push(
      c.red(
        `CLIENT-LIMITED: ${summary.clientHealth.reasons.join('; ')}. Use more workers or another machine.`,
      ),
    );
  }
  if (summary.interrupted) lines.push(c.yellow('Interrupted: only finished requests are counted.'));
  lines.push('');

  const table = new Table({
    head: ['latency (ms)', 'mean', 'p50', 'p90', 'p95', 'p99', 'max', 'n'],
    style: { head: [], border: [] },
    colAligns: ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  const { latency } = summary;
  const rows: [string, Distribution][] = [
    ['TTFT', latency.ttftMs],
    ['ITL (per token)', latency.itlMs],
    ['TPOT', latency.tpotMs],
    ['E2E', latency.e2eMs],
  ];
  if (latency.chunkGapMs.count > 0 && summary.streaming.tokensPerEvent > 1.05) {
    rows.push(['chunk gap', latency.chunkGapMs]);
  }
  if (summary.load.mode === 'open') {
    rows.push(['queue delay', latency.queueDelayMs], ['user TTFT', latency.userTtftMs]);
  }
  for (const [name, d] of rows) table.push([name, ...distributionCells(d), num(d.count)]);
  lines.push(table.toString());
  const low = rows.some(([, d]) => d.lowConfidence?.includes('p99'));
  if (low) lines.push(c.dim('  ~ marks a percentile with too few samples to resolve it'));
  lines.push('');

  const t = summary.throughput;
  lines.push(
    `Throughput at ${describeLoad(summary)}, over ${fmt(summary.durationS, 1)} s:`,
    `  system       ${num(t.outputTokensPerS, 1)} output tok/s, ${num(t.totalTokensPerS, 1)} total tok/s, ${fmt(t.requestsPerS, 2)} req/s`,
    `  per request  output speed mean ${num(latency.outputSpeedTokS.mean, 1)} tok/s, p50 ${num(latency.outputSpeedTokS.p50, 1)}, slowest ${num(latency.outputSpeedTokS.min, 1)}`,
    `  prefill/decode  input ${num(t.inputTokensPerS, 1)} tok/s, decode ${num(t.decodeTokensPerS, 1)} tok/s`,
  );
  const failed = summary.requests.failed;
  const kinds = Object.entries(summary.requests.errorsByKind)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  lines.push(
    `Requests: ${num(summary.requests.completed)} completed, ${num(failed)} failed${failed > 0 ? ` (${kinds})` : ''}${summary.requests.warmup > 0 ? `, ${num(summary.requests.warmup)} warm-up not counted` : ''}`,
  );
  if (failed > 0) {
    const adj = summary.latencyAdjusted.ttftMs;
    lines.push(
      `  TTFT p99 counting failures as never answered: ${adj.p99 === null ? 'infinite' : fmt(adj.p99, 1)}`,
    );
  }
  if (summary.goodput) {
    const g = summary.goodput;
    lines.push(
      `Goodput (${g.slo}): ${fmt(g.requestsPerS, 2)} req/s, SLO attainment ${fmt(g.sloAttainment * 100, 1)}% (${num(g.goodRequests)} of ${num(counted)})`,
    );
  }
  const h = summary.clientHealth;
  if (h) {
    lines.push(
      `Client health: event-loop delay p99 ${fmt(h.eventLoopDelayMs.p99, 2)} ms, CPU ${fmt(h.cpu.utilisation * 100, 0)}% of one core, coalesced events ${fmt(h.coalescedEventShare * 100, 1)}%${h.sendSlipMs ? `, send slip p99 ${fmt(h.sendSlipMs.p99, 2)} ms` : ''}: ${h.clientLimited ? c.red('client-limited') : c.green('ok')}`,
    );
  }
  if (summary.warnings.length > 0) {
    lines.push('Warnings:');
    for (const w of summary.warnings) lines.push(c.yellow(`  - ${w.message}`));
  }
  if (options.outDir) lines.push(`Results: ${options.outDir}`);
  return lines.join('\n');
}

function distributionCells(d: Distribution): string[] {
  if (d.count === 0) return ['-', '-', '-', '-', '-', '-'];
  const mark = (name: 'p90' | 'p95' | 'p99') => (d.lowConfidence?.includes(name) ? '~' : '');
  return [
    fmt(d.mean, 2),
    fmt(d.p50, 2),
    mark('p90') + fmt(d.p90, 2),
    mark('p95') + fmt(d.p95, 2),
    mark('p99') + fmt(d.p99, 2),
    fmt(d.max, 2),
  ];
}

function fmt(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '-';
}

function num(value: number, digits = 0): string {
  return Number.isFinite(value)
    ? value.toLocaleString('en-US', {
        maximumFractionDigits: digits,
        minimumFractionDigits: digits,
      })
    : '-';
}
