/** The terminal view of a capacity search (capacity.json). */
import Table from 'cli-table3';
import pc from 'picocolors';
import {
  type CapacityLimit,
  type CapacityPrediction,
  type CapacityStep,
  type PredictedStepField,
  timeScaleNote,
} from '../memory/capacity.js';
import { failedCell } from './failures.js';
import { terminalSafe } from './format.js';
import { predictedFigure } from './terminal.js';

/** capacity.json. */
export interface CapacityReport {
  schemaVersion: 1;
  tool: { name: string; version: string };
  server: {
    url: string;
    model: string;
    simulator: string | undefined;
    timeScale?: number;
    /** What the --calibration file's fit warned of (sim/calibrationWarnings.ts). */
    calibrationWarnings?: { code: string; message: string }[];
  };
  workload: {
    inputTokens: number;
    outputTokens: number;
    sequenceTokens: number;
    endpoint: string;
    requestsPerStep: number | string;
  };
  prediction: CapacityPrediction | null;
  predictionNote?: string;
  steps: CapacityStep[];
  limit: CapacityLimit | null;
  capacity: number;
  /**
   * The built-in simulator on a --calibration: the capacity's prediction interval, from its
   * steps' (memory/capacity.ts capacityInterval; docs/metrics.md, "Prediction intervals").
   */
  capacityPredictionInterval?: { low: number; high: number; level: number };
  interrupted: boolean;
}

const BAR_WIDTH = 40;

/**
 * Under the table, each calibrated step's predicted figures as `515 (465-559)` (docs/metrics.md,
 * "Prediction intervals"): output tok/s, TTFT p99 and mean TPOT, the figures the limit reads.
 */
function predictionLines(steps: readonly CapacityStep[]): string[] {
  const predicted = steps.filter((s) => s.predictionIntervals);
  if (predicted.length === 0) return [];
  const shown: [PredictedStepField, string][] = [
    ['outputTokensPerS', 'out tok/s'],
    ['ttftP99Ms', 'TTFT p99'],
    ['tpotMeanMs', 'TPOT'],
  ];
  const level = predicted[0].predictionIntervals?.level ?? 0.9;
  return [
    `${Math.round(level * 100)}% prediction intervals from the calibration (docs/metrics.md, "Prediction intervals"):`,
    ...predicted.map((s) => {
      const parts = shown.flatMap(([field, label]) => {
        const r = s.predictionIntervals?.ranges[field];
        return r ? [`${label} ${predictedFigure(s[field], r)}`] : [];
      });
      return `  batch ${s.batch}: ${parts.join(', ')}`;
    }),
  ];
}

/** The steps' table, the KV-usage bars against the prediction, the limit and the capacity. */
export function renderCapacity(result: CapacityReport, color: boolean): string {
  const { steps } = result;
  const limit = result.limit ?? undefined;
  const prediction = result.prediction ?? undefined;
  const c = pc.createColors(color);
  const f = (n: number | undefined, digits = 0) =>
    n === undefined || Number.isNaN(n)
      ? '-'
      : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const pct = (x: number | undefined) => (x === undefined ? '-' : `${(x * 100).toFixed(1)}%`);
  const lines: string[] = [];
  lines.push(
    c.bold(
      `Capacity of ${terminalSafe(result.server.model)}: closed loop, ${f(result.workload.sequenceTokens)} tokens per sequence`,
    ),
  );
  if (result.server.simulator) lines.push(`Simulated server: ${result.server.simulator}`);
  lines.push('');
  const table = new Table({
    head: [
      'batch',
      'measured',
      'KV peak',
      'predicted',
      'preempt',
      'waiting',
      'GPU mem',
      'out tok/s',
      'per user',
      'TTFT p50',
      'TTFT p99',
      'TPOT',
      'ITL p99',
      'failed',
    ],
    colAligns: Array(14).fill('right'),
    style: { head: [], border: [] },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  for (const s of steps) {
    table.push([
      s.interrupted ? `${s.batch}*` : s.batch,
      f(s.meanConcurrency, 1),
      pct(s.kvCacheUsageMax),
      pct(s.predictedKvCacheUsage),
      f(s.preemptions),
      f(s.waitingMax),
      s.gpuMemoryUsedMaxBytes === undefined
        ? '-'
        : `${(s.gpuMemoryUsedMaxBytes / 2 ** 30).toFixed(1)} GiB`,
      f(s.outputTokensPerS),
      f(s.perUserTokensPerS, 1),
      f(s.ttftP50Ms, 1),
      f(s.ttftP99Ms, 1),
      f(s.tpotMeanMs, 1),
      f(s.itlP99Ms, 1),
      failedCell(s, c.red),
    ]);
  }
  lines.push(table.toString());
  const cut = steps.find((s) => s.interrupted);
  if (cut) {
    const planned =
      typeof result.workload.requestsPerStep === 'number'
        ? result.workload.requestsPerStep
        : Math.max(4, 2 * cut.batch);
    lines.push(
      c.yellow(
        `* interrupted: ${f(cut.completed + cut.failed)} of ${f(planned)} requests finished at batch ${cut.batch}; the step is shown as measured and judged on nothing`,
      ),
    );
  }
  lines.push(
    `(latency in ms, throughput in output tokens/s at the measured concurrency${result.server.timeScale !== undefined ? `; ${timeScaleNote(result.server.timeScale)}` : ''})`,
  );
  lines.push(...predictionLines(steps));
  lines.push('');
  lines.push(
    `KV cache usage by batch: ${c.bold('█')} measured peak, ${c.cyan('|')} analytic prediction (100% at the right edge)`,
  );
  for (const s of steps) {
    const cells = Array<string>(BAR_WIDTH + 1).fill(' ');
    const measured = Math.round(Math.min(1, s.kvCacheUsageMax ?? 0) * BAR_WIDTH);
    for (let i = 0; i < measured; i++) cells[i] = '█';
    let overflow = '';
    if (s.predictedKvCacheUsage !== undefined) {
      const at = Math.round(Math.min(1, s.predictedKvCacheUsage) * BAR_WIDTH);
      cells[at] = c.cyan('|');
      if (s.predictedKvCacheUsage > 1)
        overflow = c.cyan(` predicted ${pct(s.predictedKvCacheUsage)}: does not fit`);
    }
    lines.push(`${String(s.batch).padStart(6)} ${cells.join('')}${overflow}`);
  }
  lines.push('');
  // Only whole steps conclude anything: a search cut short says where, and what held before it.
  const whole = steps.filter((s) => !s.interrupted);
  const lastWhole = whole[whole.length - 1]?.batch;
  if (limit) lines.push(c.yellow(`Limit: ${limit.detail}.`));
  else if (result.interrupted) {
    const at = cut ? `during batch ${cut.batch}` : 'between steps';
    lines.push(
      c.yellow(
        lastWhole === undefined
          ? `The search was interrupted ${at}, before any step was whole: no limit and no capacity measured.`
          : `The search was interrupted ${at}: no limit reached up to batch ${lastWhole}, the last whole step.`,
      ),
    );
  } else lines.push(`No limit reached up to batch ${lastWhole ?? 0}.`);
  const predicted = prediction
    ? ` (analytic prediction: ${f(prediction.maxBatch)}, ${f(prediction.numGpuBlocks)} KV blocks / ${f(prediction.blocksPerSequence)} per sequence)`
    : '';
  const range = result.capacityPredictionInterval;
  const interval = !range
    ? ''
    : range.low === range.high
      ? ` (${f(range.level * 100)}% prediction interval: ${f(range.low)} at both ends)`
      : ` (${f(range.level * 100)}% prediction interval ${f(range.low)}-${f(range.high)})`;
  if (lastWhole === undefined && !limit) {
    lines.push(c.bold(`Capacity: not measured${predicted}.`));
  } else {
    lines.push(
      c.bold(
        `Capacity: ${f(result.capacity)} concurrent sequences of ${f(result.workload.sequenceTokens)} tokens${limit ? '' : ' or more'}${interval}${predicted}.`,
      ),
    );
  }
  return lines.join('\n');
}
