import { fmtNumber } from '../metrics/format.js';
import { type Column, terminalTable } from './table.js';

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
  const count = (r: ScenarioRow) => `${r.completed}${r.failed > 0 ? ` (+${r.failed} failed)` : ''}`;
  const number = (
    label: string,
    value: (r: ScenarioRow) => number,
    digits = 1,
  ): Column<ScenarioRow> => ({
    label,
    align: 'right',
    value: (r) => fmt(value(r), digits),
  });
  const table = terminalTable<ScenarioRow>(
    [
      { label: 'scenario', align: 'left', value: (r) => r.scenario },
      { label: 'requests', align: 'right', value: count },
      number('TTFT p50', (r) => r.ttftP50Ms),
      number('TTFT p99', (r) => r.ttftP99Ms),
      number('TPOT p50', (r) => r.tpotP50Ms, 2),
      number('ITL p99', (r) => r.itlP99Ms, 2),
      number('E2E p99', (r) => r.e2eP99Ms, 0),
      number('output tok/s', (r) => r.outputTokensPerS, 0),
      number('req/s', (r) => r.requestsPerS, 2),
      number('concurrency', (r) => r.meanConcurrency),
    ],
    rows,
  );
  const legend = rows.map((r) => `  ${r.lengths}; ${r.load}`).join('\n');
  return `Scenarios (latency in ms; throughput at each scenario's measured concurrency):\n${table}\n${legend}`;
}
