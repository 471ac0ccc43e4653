import Table from 'cli-table3';
import { fmtNumber } from '../metrics/format.js';

/** One scenario's headline numbers, as saved in scenarios.json. */
export interface ScenarioRow {
  scenario: string;
  lengths: string;
  load: string;
  completed: number;
  failed: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  tpotP50Ms: number;
  itlP99Ms: number;
  e2eP99Ms: number;
  outputTokensPerS: number;
  requestsPerS: number;
  meanConcurrency: number;
}

const fmt = (n: number, digits = 1) => fmtNumber(n, digits);

/** The combined table of a multi-scenario run: one row per scenario, its load stated. */
export function renderScenarioTable(rows: ScenarioRow[]): string {
  const table = new Table({
    head: [
      'scenario',
      'requests',
      'TTFT p50',
      'TTFT p99',
      'TPOT p50',
      'ITL p99',
      'E2E p99',
      'output tok/s',
      'req/s',
      'concurrency',
    ],
    colAligns: ['left', ...Array<'right'>(9).fill('right')],
    style: { head: [], border: [] },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  for (const r of rows) {
    table.push([
      r.scenario,
      `${r.completed}${r.failed > 0 ? ` (+${r.failed} failed)` : ''}`,
      fmt(r.ttftP50Ms),
      fmt(r.ttftP99Ms),
      fmt(r.tpotP50Ms, 2),
      fmt(r.itlP99Ms, 2),
      fmt(r.e2eP99Ms, 0),
      fmt(r.outputTokensPerS, 0),
      fmt(r.requestsPerS, 2),
      fmt(r.meanConcurrency),
    ]);
  }
  const legend = rows.map((r) => `  ${r.lengths}; ${r.load}`).join('\n');
  return `Scenarios (latency in ms; throughput at each scenario's measured concurrency):\n${table.toString()}\n${legend}`;
}
