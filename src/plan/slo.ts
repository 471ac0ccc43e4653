import {
  SLO_METRICS,
  type SloCondition,
  type SloMetric,
  type SloOperator,
} from '../metrics/slo.js';

/**
 * Parses `ttft<500,tpot<50,e2e<10000` into conditions. Throws an Error whose message says what
 * is wrong and what is accepted.
 */
export function parseSlo(text: string): SloCondition[] {
  const conditions: SloCondition[] = [];
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0)) {
    const match = /^([A-Za-z]+)\s*(<=|>=|<|>)\s*([0-9]*\.?[0-9]+)\s*(ms|tok\/s)?$/.exec(part);
    if (!match) {
      throw new Error(
        `cannot read "${part}": write metric, operator and number, e.g. ttft<500 (ms) or outputSpeed>20 (tokens/s)`,
      );
    }
    const [, metric, op, value] = match;
    if (!(metric in SLO_METRICS)) {
      throw new Error(
        `unknown SLO metric "${metric}" in "${part}": use one of ${Object.keys(SLO_METRICS).join(', ')}`,
      );
    }
    conditions.push({ metric: metric as SloMetric, op: op as SloOperator, value: Number(value) });
  }
  if (conditions.length === 0) throw new Error('empty SLO: write e.g. ttft<500,tpot<50');
  return conditions;
}
