import type { RequestMetrics } from './requestMetrics.js';

/** Per-request SLO metrics, in the units of METRICS.md (ms; tokens/s for `outputSpeed`). */
export const SLO_METRICS = {
  ttft: 'ttftMs',
  ttfc: 'ttfcMs',
  ttfb: 'ttfbMs',
  tpot: 'tpotMs',
  e2e: 'e2eMs',
  userTtft: 'userTtftMs',
  userE2e: 'userE2eMs',
  queueDelay: 'queueDelayMs',
  maxStall: 'maxStallMs',
  outputSpeed: 'outputSpeedTokS',
} as const satisfies Record<string, keyof RequestMetrics>;
export type SloMetric = keyof typeof SLO_METRICS;

export type SloOperator = '<' | '<=' | '>' | '>=';

export interface SloCondition {
  metric: SloMetric;
  op: SloOperator;
  value: number;
}

/**
 * Whether a request met every condition. Failed requests never do. A metric a request does not
 * have counts as met only for `tpot` and `maxStall` (a one-token answer has no decode gaps, as in
 * vLLM's goodput); a missing TTFT (no token arrived) is a miss.
 */
export function meetsSlo(metrics: RequestMetrics, conditions: SloCondition[]): boolean {
  for (const { metric, op, value } of conditions) {
    const actual = metrics[SLO_METRICS[metric]];
    if (actual === undefined) {
      if (metric === 'tpot' || metric === 'maxStall') continue;
      return false;
    }
    const ok =
      op === '<'
        ? actual < value
        : op === '<='
          ? actual <= value
          : op === '>'
            ? actual > value
            : actual >= value;
    if (!ok) return false;
  }
  return true;
}

export function formatSlo(conditions: SloCondition[]): string {
  return conditions.map((c) => `${c.metric}${c.op}${c.value}`).join(',');
}
