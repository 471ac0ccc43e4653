import { type ConditionOperator, holds, METRICS } from './catalog.js';
import type { RequestMetrics } from './requestMetrics.js';

/**
 * Per-request SLO metrics by name: the catalogue's per-request distributions, in the units of
 * docs/metrics.md (ms; tokens/s for the speeds).
 */
export const SLO_METRICS: Readonly<Record<string, keyof RequestMetrics>> = Object.fromEntries(
  METRICS.flatMap((m) => (m.kind === 'distribution' && m.requestKey ? [[m.id, m.requestKey]] : [])),
);
/** A catalogue id with a per-request value (a key of SLO_METRICS). */
export type SloMetric = string;

export type SloOperator = ConditionOperator;

export interface SloCondition {
  metric: SloMetric;
  op: SloOperator;
  value: number;
}

/**
 * Metrics a request may lack and still meet an SLO on: a one-token answer has no decode gaps,
 * as in vLLM's goodput. Any other missing metric (no token arrived: no TTFT) is a miss.
 */
const MET_WHEN_MISSING = new Set(['tpot', 'maxStall']);

/** Whether a request met every condition. Failed requests never do. */
export function meetsSlo(metrics: RequestMetrics, conditions: SloCondition[]): boolean {
  for (const { metric, op, value } of conditions) {
    const actual = metrics[SLO_METRICS[metric]];
    if (actual === undefined) {
      if (MET_WHEN_MISSING.has(metric)) continue;
      return false;
    }
    if (!holds(actual, op, value)) return false;
  }
  return true;
}

export function formatSlo(conditions: SloCondition[]): string {
  return conditions.map((c) => `${c.metric}${c.op}${c.value}`).join(',');
}
