import { type ConditionOperator, findMetric, holds, METRICS, readCondition } from './catalog.js';
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

/**
 * Parses `ttft<500,tpot<50,e2e<10000` (the catalogue's condition grammar, per request: no
 * statistic, ms or tok/s) into conditions. Throws an Error whose message says what is wrong and
 * what is accepted.
 */
export function parseSlo(text: string): SloCondition[] {
  const conditions: SloCondition[] = [];
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0)) {
    const c = readCondition(part);
    if (
      !c ||
      c.stat !== undefined ||
      !/^[0-9]*\.?[0-9]+$/.test(c.number) ||
      !['', 'ms', 'tok/s'].includes(c.unit)
    ) {
      throw new Error(
        `cannot read "${part}": write metric, operator and number, e.g. ttft<500 (ms) or outputSpeed>20 (tokens/s)`,
      );
    }
    const metric = findMetric(c.metric)?.id;
    if (metric === undefined || !Object.hasOwn(SLO_METRICS, metric)) {
      throw new Error(
        `unknown SLO metric "${c.metric}" in "${part}": use one of ${Object.keys(SLO_METRICS).join(', ')}`,
      );
    }
    conditions.push({ metric, op: c.op, value: Number(c.number) });
  }
  if (conditions.length === 0) throw new Error('empty SLO: write e.g. ttft<500,tpot<50');
  return conditions;
}
