/** The terminal view of `infergauge size` (size.json): the ranked deployments, then those ruled out. */
import { terminalSafe } from './format.js';
import { type Column, terminalTable } from './table.js';

/** What this view reads of a deployment (session/size.ts SizedDeployment). */
export interface SizeRow {
  gpu: string;
  tp: number;
  dp: number;
  gpus: number;
  dtype: string;
  kvCacheDtype: string;
  maxNumSeqs: number;
  personality: string;
  feasible: boolean;
  reason?: string;
  headroom?: number;
  headroomAtLeast?: boolean;
  at?: { ttftP99Ms: number | null; itlP99Ms: number | null; outputTokPerS: number };
  costPerHour?: number;
  costPerMillionOutputTokens?: number;
  binding?: string;
  pareto?: boolean;
  /** A trace's prefix-cache hit rate at this deployment (the simulator's). */
  prefixCacheHitRate?: number;
  /** With a calibration (session/sizePrediction.ts SizeRowPrediction). */
  prediction?: SizeRowPredictionView;
}

/** What this view reads of a row's prediction. */
export interface SizeRowPredictionView {
  level: number;
  slos: { slo: string; value: number | null; interval?: { low: number; high: number } }[];
  sloChance: number;
  tightest?: string;
  centralDp?: number;
  centralSloChance?: number;
  sameAs?: number[];
}

/** What this view reads of size.json's `prediction` (session/sizePrediction.ts SizePredictionSummary). */
export interface SizePredictionView {
  level: number;
  draws: number;
  intervalRows: number;
  rows: number;
  confidence?: number;
  centralFirst?: { label: string; dp: number; sloChance: number };
  leaders: number[];
  interrupted?: boolean;
}

export interface SizeView {
  candidates: number;
  /** Candidates evaluated (absent in older size.json: all of them). */
  evaluated?: number;
  /** The search was stopped: the ranking is of the `evaluated` candidates only. */
  interrupted?: boolean;
  deployments: SizeRow[];
  simulations: number;
  wallS: number;
  /** The hit rate a trace's block ids imply, when the search was told it. */
  traceImpliedHitRate?: number;
  /** The calibration.json the simulator ran with. */
  calibration?: string;
  prediction?: SizePredictionView;
}

/**
 * A chance as a share, never a certainty: `>99%`, `67%`, `<1%` (a model's tails are thinner
 * than a server's, so even a chance it computes as 1 is not shown as 100 %).
 */
export function chanceText(p: number): string {
  if (!Number.isFinite(p)) return '-';
  if (p >= 0.995) return '>99%';
  if (p <= 0.005) return '<1%';
  return `${Math.round(p * 100)}%`;
}

/** A figure with its interval, compactly: `21.4 (19.8-23.3)`. */
export function withInterval(
  value: number | null | undefined,
  interval: { low: number; high: number } | undefined,
  digits: (v: number) => string,
): string {
  if (value == null) return '-';
  return interval
    ? `${digits(value)} (${digits(interval.low)}-${digits(interval.high)})`
    : digits(value);
}

/** The SLO a row is least sure to meet, as `itl.p99 43.4 (39.3-48.4)`: its name, figure and interval. */
export function tightestText(p: SizeRowPredictionView | undefined): string {
  const slo = p?.slos.find((s) => s.slo === p.tightest);
  if (!slo) return '-';
  const name = slo.slo.split(/[<>=!]/)[0].trim();
  return `${name} ${withInterval(slo.value, slo.interval, figure)}`;
}

/** A figure at three significant digits or so (ms, tok/s, a share). */
function figure(v: number): string {
  const a = Math.abs(v);
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toFixed(3);
}

/**
 * `h100 TP1 x4 fp8/fp8 vllm-v1 max-seqs 256`: a deployment as the lines about it name it
 * (terminalSafe or esc by the caller).
 */
export function sizeRowLabel(r: {
  gpu: string;
  tp: number;
  dp: number;
  dtype: string;
  kvCacheDtype: string;
  personality: string;
  maxNumSeqs: number;
}): string {
  return `${r.gpu} TP${r.tp} x${r.dp} ${r.dtype}/${r.kvCacheDtype} ${r.personality} max-seqs ${r.maxNumSeqs}`;
}

/**
 * What the predictions say under the table: how the chance is read, what --confidence changed,
 * and which top rows the calibration's draws cannot tell apart. Plain text (the caller escapes
 * or makes it terminal-safe).
 */
export function sizePredictionLines(view: SizeView): string[] {
  const p = view.prediction;
  if (!p) {
    return view.calibration === undefined && view.deployments.some((d) => d.feasible)
      ? [
          "No intervals: they come from a calibration's uncertainty (--calibration FILE, from infergauge calibrate).",
        ]
      : [];
  }
  const level = Math.round(p.level * 100);
  const feasible = view.deployments.filter((d) => d.feasible);
  const label = (rank: number) => {
    const d = view.deployments[rank - 1];
    return d ? `#${rank} ${sizeRowLabel(d)}` : `#${rank}`;
  };
  const lines = [
    `P(SLOs): the chance every SLO holds at once at that deployment, over ${p.draws} draws of the calibration's fitted values with its residual scatter; tightest SLO: the one least sure to hold, its predicted figure with the ${level} % interval. Given on the Pareto front and the first ${p.intervalRows} rows.`,
  ];
  if (p.interrupted) lines.push('Predictions interrupted: the rows after the stop have none.');
  if (p.confidence !== undefined) {
    const c = Math.round(p.confidence * 100);
    lines.push(
      `--confidence ${p.confidence}: a deployment short of ${c} % at its replicas gets more (DP +n) until every SLO holds with ${c} % chance, and is ranked at their cost.`,
    );
    if (p.centralFirst) {
      lines.push(
        `--confidence changed the recommendation: the central ranking's first, ${p.centralFirst.label}, meets the SLOs with chance ${chanceText(p.centralFirst.sloChance)}; now first: ${feasible[0] ? sizeRowLabel(feasible[0]) : 'none'}.`,
      );
    }
  }
  if (p.leaders.length > 1) {
    lines.push(
      `Top ${p.leaders.length} cannot be told apart within the calibration's uncertainty (none is better than #1, nor #1 than it, in ${level} % of its draws): ${p.leaders.map(label).join(', ')}.`,
    );
  } else if (p.leaders.length === 1 && feasible.filter((d) => d.prediction).length > 1) {
    lines.push(
      `#1 is better than each other top row in at least ${level} % of the calibration's draws.`,
    );
  }
  return lines;
}

const money = (v: number | undefined, digits = 2) =>
  v === undefined ? '-' : `$${v.toFixed(digits)}`;
const ms = (v: number | null | undefined) =>
  v == null ? '-' : v >= 100 ? v.toFixed(0) : v.toFixed(1);

/**
 * The traffic sized for: requests, or the sessions of a session scenario, per second or at once;
 * or a trace (its file name is the user's: shown through terminalSafe or esc by the caller).
 */
export function sizeTrafficText(
  traffic: {
    mode?: unknown;
    rate?: unknown;
    users?: unknown;
    sessions?: unknown;
    source?: unknown;
    requests?: unknown;
    spanS?: unknown;
    speed?: unknown;
  },
  format: (n: number) => string = String,
): string {
  const sessions = traffic.sessions === true;
  if (traffic.mode === 'trace') {
    const source = typeof traffic.source === 'string' ? ` ${traffic.source}` : '';
    const minutes = Number(traffic.spanS) / 60;
    return `the trace${source} (${format(Number(traffic.requests))} requests over ${minutes >= 10 ? minutes.toFixed(0) : minutes.toFixed(1)} min${Number(traffic.speed) !== 1 ? ` at ${String(traffic.speed)}x` : ''})`;
  }
  return traffic.mode === 'rate'
    ? `${format(Number(traffic.rate))} ${sessions ? 'sessions/s' : 'req/s'}`
    : `${format(Number(traffic.users))} ${sessions ? 'concurrent sessions' : 'users'}`;
}

/** `top` feasible deployments, then a line per reason the others were ruled out. */
export function renderSize(view: SizeView, top: number, traffic: string): string {
  const feasible = view.deployments.filter((d) => d.feasible);
  const predicted = feasible.some((d) => d.prediction !== undefined);
  const columns: Column<SizeRow & { rank: number }>[] = [
    { label: '#', align: 'right', value: (r) => `${r.rank}${r.pareto ? '*' : ''}` },
    { label: 'GPU', align: 'left', value: (r) => terminalSafe(r.gpu) },
    { label: 'TP', align: 'right', value: (r) => String(r.tp) },
    {
      label: 'DP',
      align: 'right',
      value: (r) =>
        r.prediction?.centralDp !== undefined
          ? `${r.dp} (+${r.dp - r.prediction.centralDp})`
          : String(r.dp),
    },
    { label: 'GPUs', align: 'right', value: (r) => String(r.gpus) },
    { label: 'weights', align: 'left', value: (r) => r.dtype },
    { label: 'KV', align: 'left', value: (r) => r.kvCacheDtype },
    { label: 'max seqs', align: 'right', value: (r) => String(r.maxNumSeqs) },
    { label: 'engine', align: 'left', value: (r) => r.personality },
    { label: '$/h', align: 'right', value: (r) => money(r.costPerHour) },
    { label: '$/M out tok', align: 'right', value: (r) => money(r.costPerMillionOutputTokens, 3) },
    { label: 'p99 TTFT ms', align: 'right', value: (r) => ms(r.at?.ttftP99Ms) },
    { label: 'p99 ITL ms', align: 'right', value: (r) => ms(r.at?.itlP99Ms) },
    {
      label: 'headroom',
      align: 'right',
      value: (r) =>
        r.headroom === undefined
          ? '-'
          : `${r.headroomAtLeast ? '>=' : ''}${Math.round(r.headroom * 100)}%`,
    },
    ...(predicted
      ? [
          {
            label: 'P(SLOs)',
            align: 'right' as const,
            value: (r: SizeRow) => (r.prediction ? chanceText(r.prediction.sloChance) : '-'),
          },
          {
            label: `tightest SLO (${Math.round((view.prediction?.level ?? 0.9) * 100)}%)`,
            align: 'left' as const,
            value: (r: SizeRow) => terminalSafe(tightestText(r.prediction)),
          },
        ]
      : []),
    ...(feasible.some((d) => d.prefixCacheHitRate !== undefined)
      ? [
          {
            label: 'hit rate',
            align: 'right' as const,
            value: (r: SizeRow) =>
              r.prefixCacheHitRate === undefined
                ? '-'
                : `${(r.prefixCacheHitRate * 100).toFixed(1)}%`,
          },
        ]
      : []),
    { label: 'what binds one replica', align: 'left', value: (r) => terminalSafe(r.binding ?? '') },
  ];
  const ruledOut = new Map<string, number>();
  for (const d of view.deployments) {
    if (d.feasible) continue;
    // Group by the reason's kind (its words before any number), one example each.
    const key = (d.reason ?? 'ruled out').split(':')[0];
    ruledOut.set(key, (ruledOut.get(key) ?? 0) + 1);
  }
  const examples = [...ruledOut].map(([reason, n]) => {
    const first = view.deployments.find((d) => !d.feasible && (d.reason ?? '').startsWith(reason));
    return `  ${n} ${reason}, e.g. ${first?.gpu} TP${first?.tp} ${first?.dtype}: ${terminalSafe(first?.reason ?? '')}`;
  });
  const partial = view.interrupted
    ? [
        `Partial answer (interrupted): ${view.evaluated ?? view.deployments.length} of ${view.candidates} candidates evaluated.`,
      ]
    : [];
  const lines = [
    ...partial,
    `${feasible.length} of ${view.interrupted ? (view.evaluated ?? view.deployments.length) : view.candidates}${view.interrupted ? ' evaluated' : ''} deployments serve ${traffic} within the SLOs (${view.simulations} virtual runs, ${view.wallS.toFixed(1)} s)${feasible.length > top ? `; the ${top} best:` : ':'}`,
    ...(feasible.length > 0
      ? [
          terminalTable(
            columns,
            feasible.slice(0, top).map((d, i) => ({ ...d, rank: i + 1 })),
          ),
        ]
      : []),
    ...(feasible.length > 0
      ? [
          `* on the cost/latency Pareto front: no other deployment ${feasible.some((d) => d.costPerHour !== undefined) ? 'costs less per hour' : 'uses fewer GPUs'} and has a lower p99 TTFT. Latency and headroom are each replica at its share of the traffic.`,
        ]
      : []),
    ...(feasible.some((d) => d.prefixCacheHitRate !== undefined)
      ? [
          `hit rate: the trace's prompt tokens the simulator served from the prefix cache at that deployment (the rate it assumed; replicas split the sharing)${view.traceImpliedHitRate !== undefined ? `; the trace's block ids imply ${(view.traceImpliedHitRate * 100).toFixed(1)}% with a cache that never evicts` : ''}.`,
        ]
      : []),
    ...sizePredictionLines(view).map(terminalSafe),
    ...(examples.length > 0 ? ['Ruled out:', ...examples] : []),
  ];
  return `${lines.join('\n')}\n`;
}
