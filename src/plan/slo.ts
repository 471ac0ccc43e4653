import { findMetric, readCondition } from '../metrics/catalog.js';
import { SLO_METRICS, type SloCondition } from '../metrics/slo.js';

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
    if (metric === undefined || !(metric in SLO_METRICS)) {
      throw new Error(
        `unknown SLO metric "${c.metric}" in "${part}": use one of ${Object.keys(SLO_METRICS).join(', ')}`,
      );
    }
    conditions.push({ metric, op: c.op, value: Number(c.number) });
  }
  if (conditions.length === 0) throw new Error('empty SLO: write e.g. ttft<500,tpot<50');
  return conditions;
}
