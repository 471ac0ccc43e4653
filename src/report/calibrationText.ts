/** The terminal view of a calibration (calibration.json): fitted values, then each run's errors. */
import { terminalSafe } from './format.js';
import { type Column, terminalTable } from './table.js';

const value = (v: number) =>
  v === 0
    ? '0'
    : Math.abs(v) >= 100
      ? v.toFixed(0)
      : Math.abs(v) >= 1
        ? v.toFixed(2)
        : v.toFixed(3);
const pct = (e: number) =>
  Number.isFinite(e) ? `${e >= 0 ? '+' : ''}${(e * 100).toFixed(1)}%` : '-';
const metrics = (m: PointMetrics) =>
  `${Number.isFinite(m.ttftMs) ? m.ttftMs.toFixed(1) : '-'} / ${Number.isFinite(m.tpotMs) ? m.tpotMs.toFixed(2) : '-'} / ${Number.isFinite(m.outputTokPerS) ? m.outputTokPerS.toFixed(0) : '-'}`;
const errors = (e: PointMetrics) => `${pct(e.ttftMs)} ${pct(e.tpotMs)} ${pct(e.outputTokPerS)}`;
const abs = (e: PointMetrics) =>
  `TTFT ${pct(e.ttftMs).replace('+', '')}, TPOT ${pct(e.tpotMs).replace('+', '')}, throughput ${pct(e.outputTokPerS).replace('+', '')}`;

/** The metrics of a run as calibration.json holds them (sim/calibrationFile.ts PointMetrics). */
interface PointMetrics {
  ttftMs: number;
  tpotMs: number;
  outputTokPerS: number;
}
interface PointRow {
  label: string;
  load: string;
  requests: number;
  measured: PointMetrics;
  error: PointMetrics;
  leaveOneOut?: { error: PointMetrics };
}
interface FittedRow {
  value: number;
  stdErr: number;
  low: number;
  high: number;
  before: number;
}
interface StepsView {
  points: { tokens: number; ms: number }[];
}
/** What this view reads of calibration.json (sim/calibrationFile.ts CalibrationFile). */
export interface CalibrationView {
  fitted: Partial<Record<string, FittedRow>>;
  held: Partial<Record<string, number>>;
  steps?: StepsView;
  points: PointRow[];
  medianAbsError: { fit: PointMetrics; leaveOneOut?: PointMetrics };
  leaveOneOutCoverage?: { level: number; inside: number; figures: number };
  simulations: number;
  /** What the fit could not explain (sim/calibrationWarnings.ts); absent in older files. */
  warnings?: { code: string; message: string }[];
}
type Fitted = FittedRow & { key: string };

/** `flagOf` names a fitted key as its flag (`stepOverheadMs`: `--step-overhead-ms`). */
export function renderCalibration(
  file: CalibrationView,
  engine: string,
  wallS: number,
  flagOf: (key: string) => string,
): string {
  const fitted: Fitted[] = Object.entries(file.fitted).flatMap(([key, v]) =>
    v ? [{ key, ...v }] : [],
  );
  const fittedColumns: Column<Fitted>[] = [
    { label: 'parameter', align: 'left', value: (r) => flagOf(r.key) },
    { label: 'fitted', align: 'right', value: (r) => value(r.value) },
    { label: '± 1 s.e.', align: 'right', value: (r) => value(r.stdErr) },
    { label: '68 % range', align: 'right', value: (r) => `${value(r.low)} .. ${value(r.high)}` },
    { label: 'before', align: 'right', value: (r) => value(r.before) },
  ];
  const pointColumns: Column<PointRow>[] = [
    { label: 'run', align: 'left', value: (r) => terminalSafe(r.label) },
    { label: 'load', align: 'left', value: (r) => r.load },
    { label: 'requests', align: 'right', value: (r) => String(r.requests) },
    { label: 'measured TTFT / TPOT ms / tok/s', align: 'right', value: (r) => metrics(r.measured) },
    { label: 'fit error', align: 'right', value: (r) => errors(r.error) },
    {
      label: 'left out: error',
      align: 'right',
      value: (r) => (r.leaveOneOut ? errors(r.leaveOneOut.error) : '-'),
    },
  ];
  const held = Object.entries(file.held).map(([k, v]) => `${flagOf(k)} ${value(v ?? 0)}`);
  const lines = [
    `Calibrated ${engine} from ${file.points.length} run${file.points.length === 1 ? '' : 's'} (${file.simulations} virtual runs, ${wallS.toFixed(1)} s):`,
    fitted.length > 0
      ? terminalTable(fittedColumns, fitted)
      : 'nothing fitted: the measured step times and the values held predict every run',
    ...(held.length > 0 ? [`held, not fitted: ${held.join(', ')}`] : []),
    ...(file.steps ? [stepsLine(file.steps)] : []),
    '',
    'Each run: medians of TTFT and TPOT, output throughput; errors of the simulator against it (TTFT TPOT throughput), in the fit and fitted without that run:',
    terminalTable(pointColumns, file.points),
    `median |error| in the fit: ${abs(file.medianAbsError.fit)}`,
    file.medianAbsError.leaveOneOut
      ? `median |error| of each run predicted from the others: ${abs(file.medianAbsError.leaveOneOut)}`
      : 'leave-one-out needs 3 runs or more: add runs to see how well the fit predicts loads it has not seen',
    ...(file.leaveOneOutCoverage ? [coverageLine(file.leaveOneOutCoverage)] : []),
    ...warningLines(file.warnings ?? []),
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * The fit's checks: each warning by its code, or that none fired. Said here and kept in the
 * file, where every command that uses it repeats them.
 */
function warningLines(warnings: { code: string; message: string }[]): string[] {
  if (warnings.length === 0) {
    return [
      'checks: no fitted value at a bound or unidentified, no run missed, no unmodelled cache hits',
    ];
  }
  return [
    '',
    `The fit cannot explain everything: ${warnings.length} warning${warnings.length === 1 ? '' : 's'} (kept in the file, repeated wherever it is used):`,
    ...warnings.map((w) => `  ${terminalSafe(w.code)}: ${terminalSafe(w.message)}`),
  ];
}

/** The prediction intervals checked on the runs each fold left out. */
function coverageLine(c: { level: number; inside: number; figures: number }): string {
  return `prediction intervals checked on the left-out runs: ${c.inside} of ${c.figures} measured figures inside their ${Math.round(c.level * 100)} % intervals (docs/metrics.md, "Prediction intervals")`;
}

/** The step probe's times. */
function stepsLine(steps: StepsView): string {
  const list = steps.points.map(
    (p) => `${p.tokens}: ${p.ms >= 100 ? p.ms.toFixed(0) : p.ms.toFixed(1)}`,
  );
  return `measured step times (--steps, ${steps.points.length} prompt lengths, ms by tokens): ${list.join(', ')}; the roofline beyond ${steps.points[steps.points.length - 1].tokens} tokens`;
}

/** `calibrate --suggest`: the measurements that identify every parameter, as commands. */
export function calibrationPlan(url: string | undefined): string {
  const u = url ?? 'URL';
  return [
    'Measure the server at these points (each writes a results directory), then calibrate from them:',
    '',
    '  # decode at loads from 1 to 128, prompts of mixed length: --mbu, --step-overhead-ms, --per-seq-overhead-us',
    `  infergauge sweep --url ${u} --endpoint completions --levels 1,8,32,128 --input-tokens uniform:128:2048 --output-tokens 256 --ignore-eos --requests 200 --out calibration-runs/sweep`,
    '  # prefill, long prompts at batch 1: --mfu (or --mfu-8bit)',
    `  infergauge probe prefill --url ${u} --endpoint completions --out calibration-runs/prefill`,
    '  # the front end, short prompts at batch 1: --frontend-latency-ms',
    `  infergauge run --url ${u} --endpoint completions --concurrency 1 --input-tokens 32 --output-tokens 64 --ignore-eos --requests 30 --out calibration-runs/front`,
    '',
    '  infergauge calibrate calibration-runs --model MODEL --gpu GPU --tp N --engine-personality ENGINE --out calibration.json',
    '',
    "A server that reports its own prompt time (llama.cpp's llama-server, Ollama) can also give the step times themselves,",
    'which no roofline follows on a CPU or at small batches: one prompt at a time up to a physical batch (llama.cpp: 512),',
    'given with --steps (not a fit point; it measures the front end too, and calibrate then fits attention and the per-sequence cost):',
    '',
    `  infergauge probe prefill --url ${u} --endpoint completions --batches 1 --min-input 1 --max-input 511 --requests-per-point 3 --out calibration-steps`,
    '  infergauge calibrate calibration-runs --steps calibration-steps ... --out calibration.json',
    '',
    'Use random prompts (the synthetic scenarios): prompts are not replayed, so prefix-cache hits cannot be.',
  ].join('\n');
}
