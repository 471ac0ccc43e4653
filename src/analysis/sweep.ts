import { findMetric, readCondition } from '../metrics/catalog.js';
import type { Distribution, PredictionRange } from '../metrics/distribution.js';
import type { RunSummary } from '../metrics/summary.js';
import { VERDICT_RANK, type Verdict, validityOf } from '../metrics/validity.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';

/**
 * Sweeps turned into answers: where throughput saturates, where latency falls off a cliff, the
 * largest load that meets percentile SLOs, and an operating point per priority (the
 * latency / throughput / memory triangle). Pure functions over measured points.
 */

/** One measured point of a sweep, flattened from its run summary. */
export interface SweepPoint {
  scenario: string;
  /** The load swept: concurrency (closed loop) or requests/s (open loop). */
  level: number;
  repeat: number;
  meanConcurrency: number;
  outputTokensPerS: number;
  requestsPerS: number;
  /** Mean output speed one request sees (tokens/s). */
  perUserTokensPerS: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  itlP50Ms: number;
  itlP99Ms: number;
  tpotP50Ms: number;
  e2eP50Ms: number;
  e2eP99Ms: number;
  completed: number;
  failed: number;
  goodputRequestsPerS?: number;
  meanInputTokens: number;
  meanOutputTokens: number;
  kvCacheUsageMax?: number;
  preemptions?: number;
  gpuMemoryUsedMaxBytes?: number;
  /** The point's validity verdict and its reasons' codes (src/metrics/validity.ts). */
  validity?: Verdict;
  validityCodes?: string[];
  /** A calibrated simulated point: its figures' prediction intervals (docs/metrics.md). */
  prediction?: PointPrediction;
}

/** The point's figures a calibrated point predicts, by their SweepPoint names. */
export const PREDICTED_POINT_FIELDS = [
  'ttftP50Ms',
  'ttftP99Ms',
  'itlP50Ms',
  'itlP99Ms',
  'tpotP50Ms',
  'e2eP50Ms',
  'e2eP99Ms',
  'outputTokensPerS',
  'requestsPerS',
] as const;
export type PredictedPointField = (typeof PREDICTED_POINT_FIELDS)[number];

/** A sweep point's prediction intervals: each figure's range, at one level. */
export interface PointPrediction {
  level: number;
  ranges: Partial<Record<PredictedPointField, PredictionRange>>;
}

/** The point's ranges from its summary's `prediction` fields (metrics/runPrediction.ts). */
function pointPrediction(s: RunSummary): PointPrediction | undefined {
  if (!s.prediction) return undefined;
  const ranges: PointPrediction['ranges'] = {};
  const latency = (field: PredictedPointField, d: Distribution | undefined, p99: boolean) => {
    const p = d?.prediction;
    const range = p99 ? p?.statistics?.p99 : p;
    if (range) ranges[field] = { low: range.low, high: range.high };
  };
  latency('ttftP50Ms', s.latency.ttftMs, false);
  latency('ttftP99Ms', s.latency.ttftMs, true);
  latency('itlP50Ms', s.latency.itlMs, false);
  latency('itlP99Ms', s.latency.itlMs, true);
  latency('tpotP50Ms', s.latency.tpotMs, false);
  latency('e2eP50Ms', s.latency.e2eMs, false);
  latency('e2eP99Ms', s.latency.e2eMs, true);
  const t = s.throughput.prediction;
  if (t?.outputTokensPerS) ranges.outputTokensPerS = { ...t.outputTokensPerS };
  if (t?.requestsPerS) ranges.requestsPerS = { ...t.requestsPerS };
  return { level: s.prediction.level, ranges };
}

export function sweepPoint(
  scenario: string,
  level: number,
  repeat: number,
  s: RunSummary,
  server?: ServerMetricsSummary,
): SweepPoint {
  const counted = Math.max(1, s.requests.completed + s.requests.failed);
  const point: SweepPoint = {
    scenario,
    level,
    repeat,
    meanConcurrency: s.load.meanConcurrency,
    outputTokensPerS: s.throughput.outputTokensPerS,
    requestsPerS: s.throughput.requestsPerS,
    perUserTokensPerS: s.latency.outputSpeedTokS.mean,
    ttftP50Ms: s.latency.ttftMs.p50,
    ttftP99Ms: s.latency.ttftMs.p99,
    itlP50Ms: s.latency.itlMs.p50,
    itlP99Ms: s.latency.itlMs.p99,
    tpotP50Ms: s.latency.tpotMs.p50,
    e2eP50Ms: s.latency.e2eMs.p50,
    e2eP99Ms: s.latency.e2eMs.p99,
    completed: s.requests.completed,
    failed: s.requests.failed,
    meanInputTokens: s.tokens.input / counted,
    meanOutputTokens: s.tokens.output / counted,
  };
  if (s.goodput) point.goodputRequestsPerS = s.goodput.requestsPerS;
  const m = server?.memory;
  if (m?.kvCacheUsage) point.kvCacheUsageMax = m.kvCacheUsage.max;
  if (m?.preemptions !== undefined) point.preemptions = m.preemptions;
  if (m?.gpuMemoryUsedBytes) point.gpuMemoryUsedMaxBytes = m.gpuMemoryUsedBytes.max;
  const prediction = pointPrediction(s);
  if (prediction) point.prediction = prediction;
  const validity = validityOf(s.warnings);
  point.validity = validity.verdict;
  if (validity.reasons.length > 0) {
    point.validityCodes = [...new Set(validity.reasons.map((r) => r.code))];
  }
  return point;
}

/** Points of several repeats at one level, averaged (medians would hide a bad repeat less). */
export function averageRepeats(points: SweepPoint[]): SweepPoint[] {
  const byLevel = new Map<string, SweepPoint[]>();
  for (const p of points) {
    const key = `${p.scenario}\u0000${p.level}`;
    byLevel.set(key, [...(byLevel.get(key) ?? []), p]);
  }
  return [...byLevel.values()].map((group) => {
    if (group.length === 1) return group[0];
    const mean = (f: (p: SweepPoint) => number | undefined) => {
      const values = group.map(f).filter((v): v is number => v !== undefined);
      return values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : undefined;
    };
    const out = { ...group[0], repeat: -1 } as SweepPoint;
    // A level is as valid as its worst repeat, for every reason any repeat had.
    const verdicts = group.flatMap((p) => (p.validity ? [p.validity] : []));
    if (verdicts.length > 0) {
      out.validity = verdicts.reduce((a, b) => (VERDICT_RANK[b] < VERDICT_RANK[a] ? b : a));
      const codes = [...new Set(group.flatMap((p) => p.validityCodes ?? []))];
      if (codes.length > 0) out.validityCodes = codes;
      else delete out.validityCodes;
    }
    for (const key of Object.keys(out) as (keyof SweepPoint)[]) {
      if (typeof out[key] === 'number' && key !== 'level' && key !== 'repeat') {
        (out as unknown as Record<string, number | undefined>)[key] = mean(
          (p) => p[key] as number | undefined,
        );
      }
    }
    // The repeats' ranges averaged end by end, as their figures are.
    const first = group[0].prediction;
    if (first) {
      const ranges: PointPrediction['ranges'] = {};
      for (const f of PREDICTED_POINT_FIELDS) {
        const low = mean((p) => p.prediction?.ranges[f]?.low);
        const high = mean((p) => p.prediction?.ranges[f]?.high);
        if (low !== undefined && high !== undefined) ranges[f] = { low, high };
      }
      out.prediction = { level: first.level, ranges };
    }
    return out;
  });
}

export interface Knee {
  /** The last level that still scaled: where the service saturates. */
  saturatesAt: number;
  /** The first level past it. */
  level: number;
  throughputGain: number;
  loadGain: number;
  latencyGain: number;
  why: string;
}

const pct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(0)}%`;

/**
 * The saturation knee: the first step up in load where system throughput grew by less than
 * `minShare` of the load's growth while latency (p50 TPOT or p99 TTFT, whichever grew more)
 * rose by more than `minLatencyGain`.
 */
export function findKnee(
  points: SweepPoint[],
  minShare = 0.25,
  minLatencyGain = 0.1,
): Knee | undefined {
  const sorted = [...points].sort((a, b) => a.level - b.level);
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1];
    const b = sorted[i];
    const loadGain = b.level / a.level - 1;
    const throughputGain = a.outputTokensPerS > 0 ? b.outputTokensPerS / a.outputTokensPerS - 1 : 0;
    const latencyGain = Math.max(
      a.tpotP50Ms > 0 ? b.tpotP50Ms / a.tpotP50Ms - 1 : 0,
      a.ttftP99Ms > 0 ? b.ttftP99Ms / a.ttftP99Ms - 1 : 0,
    );
    if (loadGain > 0 && throughputGain < minShare * loadGain && latencyGain > minLatencyGain) {
      return {
        saturatesAt: a.level,
        level: b.level,
        throughputGain,
        loadGain,
        latencyGain,
        why: `from ${a.level} to ${b.level} the load grew ${pct(loadGain)} but system throughput only ${pct(throughputGain)} (${Math.round(a.outputTokensPerS)} -> ${Math.round(b.outputTokensPerS)} tok/s) while latency grew ${pct(latencyGain)}`,
      };
    }
  }
  return undefined;
}

export interface Cliff {
  level: number;
  previous: number;
  metric: 'p99 TTFT' | 'p99 ITL';
  factor: number;
  why: string;
}

/** The latency cliff: the first step where p99 TTFT or p99 ITL jumps by `factor` or more. */
export function findCliff(points: SweepPoint[], factor = 3): Cliff | undefined {
  const sorted = [...points].sort((a, b) => a.level - b.level);
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1];
    const b = sorted[i];
    for (const [metric, before, now] of [
      ['p99 TTFT', a.ttftP99Ms, b.ttftP99Ms],
      ['p99 ITL', a.itlP99Ms, b.itlP99Ms],
    ] as const) {
      if (before > 0 && now / before >= factor) {
        return {
          level: b.level,
          previous: a.level,
          metric,
          factor: now / before,
          why: `${metric} jumped ${(now / before).toFixed(1)}x (${before.toFixed(1)} -> ${now.toFixed(1)} ms) from ${a.level} to ${b.level}`,
        };
      }
    }
  }
  return undefined;
}

/** A percentile SLO over a whole run, e.g. `ttft.p99<500` (ms). */
export interface AggregateSlo {
  metric: 'ttft' | 'itl' | 'tpot' | 'e2e';
  stat: 'p50' | 'p90' | 'p95' | 'p99' | 'mean';
  limitMs: number;
  text: string;
}

/** The latency percentiles a sweep point keeps, by catalogue metric (see sweepPoint). */
const POINT_PERCENTILES: Record<AggregateSlo['metric'], readonly AggregateSlo['stat'][]> = {
  ttft: ['p50', 'p99'],
  itl: ['p50', 'p99'],
  tpot: ['p50'],
  e2e: ['p50', 'p99'],
};

/** The sweep point's field for a percentile: `ttftP99Ms`. */
const pointField = (slo: AggregateSlo) =>
  `${slo.metric}${slo.stat.toUpperCase()}Ms` as 'ttftP99Ms' | 'itlP99Ms' | 'tpotP50Ms';

/**
 * Parses `ttft.p99<500,itl.p99<50` (the catalogue's condition grammar, upper limits in ms on a
 * percentile the sweep keeps); throws naming the bad part and the syntax.
 */
export function parseAggregateSlos(text: string): AggregateSlo[] {
  return text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .map((part) => {
      const c = readCondition(part);
      const metric = c && findMetric(c.metric)?.id;
      const stats =
        metric !== undefined ? POINT_PERCENTILES[metric as AggregateSlo['metric']] : undefined;
      if (
        !c ||
        !stats ||
        (c.stat !== 'p50' && c.stat !== 'p99') ||
        c.op !== '<' ||
        c.unit !== '' ||
        !/^[0-9.]+$/.test(c.number) ||
        !(Number(c.number) > 0)
      ) {
        throw new Error(
          `cannot read "${part}": write METRIC.STAT<MS with METRIC one of ttft, itl, tpot, e2e and STAT p50 or p99 (tpot: p50), e.g. 'ttft.p99<500,itl.p99<50'`,
        );
      }
      if (!stats.includes(c.stat)) {
        throw new Error(`"${part}": ${metric} is summarised at ${stats.join(', ')} only`);
      }
      return { metric, stat: c.stat, limitMs: Number(c.number), text: part } as AggregateSlo;
    });
}

export interface SloCheck {
  ok: boolean;
  /** The SLO closest to (or furthest past) its limit: value / limit. */
  binding: AggregateSlo;
  bindingRatio: number;
}

export function checkSlos(point: SweepPoint, slos: AggregateSlo[]): SloCheck {
  let binding = slos[0];
  let worst = Number.NEGATIVE_INFINITY;
  for (const slo of slos) {
    const value = point[pointField(slo)];
    const ratio = Number.isFinite(value) ? value / slo.limitMs : Number.POSITIVE_INFINITY;
    if (ratio > worst) {
      worst = ratio;
      binding = slo;
    }
  }
  return { ok: worst < 1 && point.failed === 0, binding, bindingRatio: worst };
}

export interface MaxLoadSearch {
  /** The largest level that met every SLO (0 when even the first failed). */
  best: number;
  /**
   * A calibrated simulated search: the interval of `best` from its points' prediction
   * intervals (maxLoadInterval).
   */
  prediction?: { low: number; high: number; level: number };
  bestPoint?: SweepPoint;
  /** The smallest level seen to fail. */
  failedAt?: number;
  /** Every level tried, in order, and whether it passed. */
  tried: { level: number; ok: boolean }[];
}

/**
 * The largest load meeting the SLOs: double from `start` until a level fails (or `max`), then
 * bisect between the last pass and the first failure down to `resolution` (1 for
 * concurrency). Assumes latency grows with load, as it does past the knee.
 */
export async function searchMaxLoad(
  evaluate: (level: number) => Promise<{ ok: boolean; point: SweepPoint }>,
  options: { start: number; max: number; resolution: number; integer: boolean },
): Promise<MaxLoadSearch> {
  const tried: MaxLoadSearch['tried'] = [];
  let best = 0;
  let bestPoint: SweepPoint | undefined;
  let failedAt: number | undefined;
  const step = async (level: number) => {
    const { ok, point } = await evaluate(level);
    tried.push({ level, ok });
    if (ok && level > best) {
      best = level;
      bestPoint = point;
    }
    if (!ok && (failedAt === undefined || level < failedAt)) failedAt = level;
    return ok;
  };
  let level = options.start;
  while (level <= options.max && (await step(level))) {
    if (level === options.max) break;
    level = Math.min(options.max, level * 2);
  }
  if (failedAt !== undefined) {
    let lo = best;
    let hi = failedAt;
    while (hi - lo > options.resolution) {
      const mid = options.integer ? Math.floor((lo + hi) / 2) : (lo + hi) / 2;
      if (mid <= lo || mid >= hi) break;
      if (await step(mid)) lo = mid;
      else hi = mid;
    }
  }
  return {
    best,
    ...(bestPoint ? { bestPoint } : {}),
    ...(failedAt !== undefined ? { failedAt } : {}),
    tried,
  };
}

/**
 * The interval of the largest level within every SLO, from the prediction intervals of the
 * points measured (the sweep's and the search's): its low end with each SLO figure at the high
 * end of its range, its high end with each at the low end. One draw of the fitted values moves
 * a figure the same way at every load, so the figures' ends at each load are taken to move
 * together. At each end, the capacity is where the binding SLO's figure crosses its limit,
 * interpolated on the log of the figure between the last level within and the first past it
 * (a level with failures is past); above the highest level measured it is not extrapolated.
 * Undefined when no point has a prediction.
 */
export function maxLoadInterval(
  points: readonly SweepPoint[],
  slos: readonly AggregateSlo[],
  o: { best: number; integer: boolean },
): { low: number; high: number; level: number } | undefined {
  const predicted = points.filter((p) => p.prediction);
  if (predicted.length === 0 || slos.length === 0) return undefined;
  const byLevel = new Map<number, SweepPoint>();
  for (const p of predicted) if (!byLevel.has(p.level)) byLevel.set(p.level, p);
  const sorted = [...byLevel.values()].sort((a, b) => a.level - b.level);
  const at = (end: 'low' | 'high') => {
    // The binding SLO's figure over its limit, at each level: < 1 is within.
    const ratio = (p: SweepPoint) => {
      if (p.failed > 0 || p.completed === 0) return Number.POSITIVE_INFINITY;
      let worst = 0;
      for (const slo of slos) {
        const field = pointField(slo);
        const value = p.prediction?.ranges[field]?.[end] ?? p[field];
        worst = Math.max(worst, Number.isFinite(value) ? value / slo.limitMs : Infinity);
      }
      return worst;
    };
    let last: { level: number; r: number } | undefined;
    for (const p of sorted) {
      const r = ratio(p);
      if (r < 1) {
        last = { level: p.level, r };
        continue;
      }
      if (!last) return 0;
      if (!Number.isFinite(r) || !(last.r > 0)) return last.level;
      const share = -Math.log(last.r) / (Math.log(r) - Math.log(last.r));
      const level = last.level + share * (p.level - last.level);
      return o.integer ? Math.max(last.level, Math.floor(level)) : level;
    }
    return last?.level ?? 0;
  };
  const level = predicted[0].prediction?.level as number;
  return { low: Math.min(o.best, at('high')), high: Math.max(o.best, at('low')), level };
}

/** Thresholds of the three corners of the triangle. */
export interface TriangleThresholds {
  latencyTtftP99Ms: number;
  latencyItlP99Ms: number;
  throughputItlP99Ms: number;
  /** Memory-first: the share of the best throughput that the smallest footprint must reach. */
  memoryThroughputShare: number;
}

export const DEFAULT_TRIANGLE: TriangleThresholds = {
  latencyTtftP99Ms: 300,
  latencyItlP99Ms: 50,
  throughputItlP99Ms: 200,
  memoryThroughputShare: 0.9,
};

export interface Recommendation {
  profile: 'latency-first' | 'throughput-first' | 'memory-first';
  point?: SweepPoint;
  rule: string;
  /** What the choice costs on the other two corners, in a sentence. */
  costs: string;
}

/**
 * An operating point per priority, from one scenario's points:
 * - latency-first: the highest load with p99 TTFT and p99 ITL under their thresholds;
 * - throughput-first: the highest system throughput with p99 ITL within its threshold;
 * - memory-first: the smallest KV footprint (fewest sequences held at once) that still reaches
 *   `memoryThroughputShare` of the best throughput without preempting: past it, more memory
 *   buys little throughput.
 */
export function recommend(
  points: SweepPoint[],
  t: TriangleThresholds = DEFAULT_TRIANGLE,
): Recommendation[] {
  const clean = points.filter((p) => p.failed === 0);
  const maxThroughput = Math.max(0, ...clean.map((p) => p.outputTokensPerS));
  const kvTokens = (p: SweepPoint) => p.meanConcurrency * (p.meanInputTokens + p.meanOutputTokens);
  const describe = (p: SweepPoint) =>
    `${Math.round(p.outputTokensPerS).toLocaleString('en-US')} output tok/s (${((p.outputTokensPerS / Math.max(1, maxThroughput)) * 100).toFixed(0)}% of the best seen), ${p.perUserTokensPerS.toFixed(1)} tok/s per user, p99 TTFT ${p.ttftP99Ms.toFixed(0)} ms, p99 ITL ${p.itlP99Ms.toFixed(1)} ms, ~${Math.round(kvTokens(p)).toLocaleString('en-US')} tokens of KV held${p.kvCacheUsageMax !== undefined ? ` (peak ${(p.kvCacheUsageMax * 100).toFixed(0)}% of the pool)` : ''}`;
  const highest = (ps: SweepPoint[]) => ps.sort((a, b) => b.level - a.level)[0];
  const latency = highest(
    clean.filter((p) => p.ttftP99Ms < t.latencyTtftP99Ms && p.itlP99Ms < t.latencyItlP99Ms),
  );
  const throughput = clean
    .filter((p) => p.itlP99Ms <= t.throughputItlP99Ms)
    .sort((a, b) => b.outputTokensPerS - a.outputTokensPerS)[0];
  const unpreempted = clean.filter((p) => (p.preemptions ?? 0) === 0);
  const bestUnpreempted = Math.max(0, ...unpreempted.map((p) => p.outputTokensPerS));
  const memory = unpreempted
    .filter((p) => p.outputTokensPerS >= t.memoryThroughputShare * bestUnpreempted)
    .sort((a, b) => kvTokens(a) - kvTokens(b))[0];
  const rec = (
    profile: Recommendation['profile'],
    point: SweepPoint | undefined,
    rule: string,
  ): Recommendation => ({
    profile,
    ...(point ? { point } : {}),
    rule,
    costs: point
      ? `load ${point.level}: ${describe(point)}`
      : profile === 'memory-first' && clean.every((p) => p.kvCacheUsageMax === undefined)
        ? "needs the server's KV cache usage (its /metrics): none was scraped"
        : 'no measured point meets it: lower the load range or relax the thresholds',
  });
  return [
    rec(
      'latency-first',
      latency,
      `highest load with p99 TTFT < ${t.latencyTtftP99Ms} ms and p99 ITL < ${t.latencyItlP99Ms} ms`,
    ),
    rec(
      'throughput-first',
      throughput,
      `most system throughput with p99 ITL <= ${t.throughputItlP99Ms} ms`,
    ),
    rec(
      'memory-first',
      memory,
      `smallest KV footprint with ${(t.memoryThroughputShare * 100).toFixed(0)}% of the best throughput and no preemption`,
    ),
  ];
}
