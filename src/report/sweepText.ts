/** The terminal view of a sweep (sweep.json's scenarios). */

import Table from 'cli-table3';
import pc from 'picocolors';
import type {
  Cliff,
  Knee,
  MaxLoadSearch,
  PredictedPointField,
  Recommendation,
  SweepPoint,
} from '../analysis/sweep.js';
import { fmtNumber } from '../metrics/format.js';
import type { Warning } from '../metrics/summary.js';
import { failedCell } from './failures.js';
import { terminalSafe } from './format.js';
import { predictedFigure } from './terminal.js';

/** One scenario's sweep, as saved in sweep.json. */
export interface ScenarioSweep {
  scenario: string;
  points: SweepPoint[];
  knee?: Knee;
  cliff?: Cliff;
  search?: MaxLoadSearch & { slos: string[]; binding?: string };
  recommendations: Recommendation[];
  warnings: Warning[];
}

/** The sweep's table, saturation, cliff, capacity and operating points, per scenario. */
export function renderSweep(
  target: string,
  mode: 'concurrency' | 'rate',
  results: ScenarioSweep[],
  color: boolean,
): string {
  const c = pc.createColors(color);
  const f = (n: number | undefined, digits = 0) => fmtNumber(n ?? Number.NaN, digits);
  const lv = (n: number | undefined) => f(n, mode === 'rate' ? 2 : 0);
  const lines: string[] = [c.bold(`Sweep of ${terminalSafe(target)}`), ''];
  for (const r of results) {
    lines.push(c.bold(`Scenario ${r.scenario}`));
    const table = new Table({
      head: [
        mode === 'concurrency' ? 'concurrency' : 'rate/s',
        'measured',
        'out tok/s',
        'per user',
        'TTFT p50',
        'TTFT p99',
        'ITL p50',
        'ITL p99',
        'E2E p99',
        'KV peak',
        'failed',
        'validity',
      ],
      colAligns: [...Array(11).fill('right'), 'left'],
      style: { head: [], border: [] },
      chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
    });
    for (const p of r.points) {
      table.push([
        lv(p.level),
        f(p.meanConcurrency, 1),
        f(p.outputTokensPerS),
        f(p.perUserTokensPerS, 1),
        f(p.ttftP50Ms, 1),
        f(p.ttftP99Ms, 1),
        f(p.itlP50Ms, 1),
        f(p.itlP99Ms, 1),
        f(p.e2eP99Ms),
        p.kvCacheUsageMax === undefined ? '-' : `${(p.kvCacheUsageMax * 100).toFixed(0)}%`,
        failedCell(p, c.red),
        verdictCell(p, c),
      ]);
    }
    lines.push(table.toString());
    const dead = r.points.filter((p) => p.completed === 0 && p.failed > 0);
    if (dead.length > 0) {
      lines.push(
        c.red(
          `No request succeeded at ${mode} ${dead.map((p) => lv(p.level)).join(', ')}: those rows measure nothing (the errors: each point's line above, its records.jsonl).`,
        ),
      );
    }
    lines.push('(latency in ms; throughput in output tokens/s at the measured concurrency)');
    lines.push(...predictionLines(r.points, mode, lv));
    lines.push(
      r.knee
        ? c.yellow(`Saturation: at ${mode} ${lv(r.knee.saturatesAt)}: ${r.knee.why}.`)
        : noKnee(r.points, mode, lv),
    );
    if (r.cliff)
      lines.push(c.yellow(`Latency cliff: at ${mode} ${lv(r.cliff.level)}: ${r.cliff.why}.`));
    if (r.search) {
      const best = r.search.bestPoint;
      lines.push(
        c.bold(
          best
            ? `Capacity under ${r.search.slos.join(', ')}: ${lv(r.search.best)} ${mode === 'concurrency' ? 'concurrent users' : 'requests/s'}${r.search.prediction ? ` (${f(r.search.prediction.level * 100)}% prediction interval ${lv(r.search.prediction.low)}-${lv(r.search.prediction.high)})` : ''} (next tried: ${lv(r.search.failedAt)}, which fails); goodput ${f(best.goodputRequestsPerS ?? best.requestsPerS, 2)} req/s, ${f(best.outputTokensPerS)} output tok/s, ${f(best.perUserTokensPerS, 1)} tok/s per user; binding SLO: ${r.search.binding}.`
            : `Capacity under ${r.search.slos.join(', ')}: none: even ${mode} ${lv(r.search.tried[0]?.level)} misses them.`,
        ),
      );
    }
    lines.push('Operating points:');
    for (const rec of r.recommendations)
      lines.push(`  ${rec.profile} (${rec.rule}): ${rec.costs}.`);
    for (const w of r.warnings) lines.push(c.yellow(`  warning: ${terminalSafe(w.message)}`));
    lines.push('');
  }
  return lines.join('\n');
}

/**
 * Under the table, each calibrated point's predicted figures as `515 (465-559)` (docs/metrics.md,
 * "Prediction intervals"): output tok/s, TTFT p50 and p99, ITL p99, E2E p99.
 */
function predictionLines(
  points: readonly SweepPoint[],
  mode: string,
  lv: (level: number) => string,
): string[] {
  const predicted = points.filter((p) => p.prediction);
  if (predicted.length === 0) return [];
  const shown: [PredictedPointField, string][] = [
    ['outputTokensPerS', 'out tok/s'],
    ['ttftP50Ms', 'TTFT p50'],
    ['ttftP99Ms', 'TTFT p99'],
    ['itlP99Ms', 'ITL p99'],
    ['e2eP99Ms', 'E2E p99'],
  ];
  const level = predicted[0].prediction?.level ?? 0.9;
  return [
    `${fmtNumber(level * 100, 0)}% prediction intervals from the calibration (docs/metrics.md, "Prediction intervals"):`,
    ...predicted.map((p) => {
      const parts = shown.flatMap(([field, label]) => {
        const range = p.prediction?.ranges[field];
        return range ? [`${label} ${predictedFigure(p[field], range)}`] : [];
      });
      return `  ${mode} ${lv(p.level)}: ${parts.join(', ')}`;
    }),
  ];
}

/** A point's verdict, painted, with its first reason's code: `caution: output_short +1`. */
function verdictCell(p: SweepPoint, c: ReturnType<typeof pc.createColors>): string {
  if (!p.validity) return '-';
  const paint = p.validity === 'valid' ? c.green : p.validity === 'caution' ? c.yellow : c.red;
  const codes = p.validityCodes ?? [];
  const why =
    codes.length > 0 ? `: ${codes[0]}${codes.length > 1 ? ` +${codes.length - 1}` : ''}` : '';
  return paint(terminalSafe(`${p.validity}${why}`));
}

/**
 * What to say when no knee was found: a load where nothing succeeded is no evidence that
 * throughput still grows, so the claim is made only up to the last load that measured something.
 */
function noKnee(points: SweepPoint[], mode: string, lv: (level: number) => string): string {
  const measured = points.filter((p) => p.completed > 0);
  if (measured.length === 0) return 'Saturation: not measured: no request succeeded at any load.';
  const top = Math.max(...measured.map((p) => p.level));
  const deadAbove = points.filter((p) => p.completed === 0 && p.level > top);
  if (deadAbove.length === 0)
    return 'Saturation: not reached in this range: throughput still grows with load.';
  const next = Math.min(...deadAbove.map((p) => p.level));
  return `Saturation: not found: throughput grows up to ${mode} ${lv(top)}; at ${lv(next)} no request succeeded, so what lies between is not measured.`;
}
