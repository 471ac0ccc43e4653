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
  const columns: Column<SizeRow & { rank: number }>[] = [
    { label: '#', align: 'right', value: (r) => `${r.rank}${r.pareto ? '*' : ''}` },
    { label: 'GPU', align: 'left', value: (r) => terminalSafe(r.gpu) },
    { label: 'TP', align: 'right', value: (r) => String(r.tp) },
    { label: 'DP', align: 'right', value: (r) => String(r.dp) },
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
    ...(examples.length > 0 ? ['Ruled out:', ...examples] : []),
  ];
  return `${lines.join('\n')}\n`;
}
