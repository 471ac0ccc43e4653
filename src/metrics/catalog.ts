import type { Distribution, PredictionRange } from './distribution.js';
import type { RequestMetrics } from './requestMetrics.js';

/**
 * The metric catalogue: every metric a user can name (in an SLO, a CI threshold, a sweep SLO)
 * or read in a table, with its unit, which direction is better, its label and the other
 * spellings people write. SLOs, thresholds, comparison verdicts and report tables take these
 * facts from here; docs/metrics.md defines the metrics themselves.
 */

export type MetricUnit = 'ms' | 'tok/s' | 'req/s' | 'fraction';

/** A per-request latency or speed: a key of RequestMetrics and of the summary's `latency`. */
export type RequestLatencyKey = Exclude<keyof RequestMetrics, 'tokenEvents'>;
/** A key of the summary's `latency` (RunSummary, in summary.ts, which imports this file). */
export type LatencyKey = RequestLatencyKey | 'itlMs' | 'chunkGapMs';

/** The parts of a RunSummary that run-level metrics read. */
export interface RunNumbers {
  requests: { completed: number; failed: number };
  throughput: {
    requestsPerS: number;
    outputTokensPerS: number;
    inputTokensPerS: number;
    totalTokensPerS: number;
    /** Output tokens after each request's first, per second. */
    decodeTokensPerS: number;
    /** A calibrated simulated run's prediction intervals (docs/metrics.md, "Prediction intervals"). */
    prediction?: {
      level: number;
      outputTokensPerS?: PredictionRange;
      requestsPerS?: PredictionRange;
    };
  };
  goodput?: { requestsPerS: number; sloAttainment: number };
  /** Session runs (multi-turn, agent tasks): distributions over sessions, not requests. */
  sessions?: { sessionMs: Distribution; agent?: { taskMs: Distribution } };
}
export type Better = 'lower' | 'higher';

interface MetricFacts {
  /** The name users write and messages print: `ttft`, `outputThroughput`. */
  id: string;
  /** As tables print it: `TTFT`, `output throughput`. */
  label: string;
  unit: MetricUnit;
  better: Better;
  /** Other spellings, matched like the id: case, `_` and `-` ignored. */
  aliases: readonly string[];
}

/** A distribution over requests (or tokens): summarised in `RunSummary.latency[latencyKey]`. */
export interface DistributionMetric extends MetricFacts {
  kind: 'distribution';
  latencyKey: LatencyKey;
  /** Per-request metrics only (not ITL or chunk gaps, which are per token or event). */
  requestKey?: RequestLatencyKey;
}

/** One number per run, read from its summary. */
export interface RunMetric extends MetricFacts {
  kind: 'run';
  read: (s: RunNumbers) => number | undefined;
  /** Why a run may lack it. */
  missing?: string;
}

/** A distribution over sessions or agent tasks (session runs), read from the summary. */
export interface SessionMetric extends MetricFacts {
  kind: 'session';
  read: (s: RunNumbers) => Distribution | undefined;
  missing: string;
}

export type CatalogMetric = DistributionMetric | RunMetric | SessionMetric;

const NO_SLO = 'not measured: the run had no --slo';

const distribution = (
  id: string,
  label: string,
  latencyKey: LatencyKey,
  perRequest: boolean,
  aliases: readonly string[] = [],
): DistributionMetric => {
  const unit = latencyKey.endsWith('TokS') ? 'tok/s' : 'ms';
  return {
    kind: 'distribution',
    id,
    label,
    unit,
    better: unit === 'ms' ? 'lower' : 'higher',
    aliases,
    latencyKey,
    ...(perRequest ? { requestKey: latencyKey as RequestLatencyKey } : {}),
  };
};

/** In the order messages list them. */
export const METRICS: readonly CatalogMetric[] = [
  distribution('ttft', 'TTFT', 'ttftMs', true, ['timeToFirstToken']),
  distribution('ttfc', 'TTFC', 'ttfcMs', true, ['timeToFirstChunk']),
  distribution('ttftc', 'TTFTC', 'ttftcMs', true, ['timeToFirstToolCall']),
  distribution('thinking', 'thinking time', 'thinkingMs', true),
  distribution('ttfb', 'TTFB', 'ttfbMs', true, ['timeToFirstByte']),
  distribution('tpot', 'TPOT', 'tpotMs', true, ['timePerOutputToken']),
  distribution('itl', 'ITL', 'itlMs', false, ['interTokenLatency']),
  distribution('chunkGap', 'chunk gap', 'chunkGapMs', false),
  distribution('e2e', 'E2E', 'e2eMs', true, ['endToEnd', 'e2eLatency']),
  distribution('queueDelay', 'queue delay', 'queueDelayMs', true),
  distribution('userTtft', 'user TTFT', 'userTtftMs', true),
  distribution('userE2e', 'user E2E', 'userE2eMs', true),
  distribution('maxStall', 'max stall', 'maxStallMs', true),
  distribution('outputSpeed', 'output speed', 'outputSpeedTokS', true),
  distribution('visibleOutputSpeed', 'visible output speed', 'visibleOutputSpeedTokS', true),
  distribution('prefillSpeed', 'prefill speed', 'prefillSpeedTokS', true),
  {
    kind: 'session',
    id: 'session',
    label: 'session time',
    unit: 'ms',
    better: 'lower',
    aliases: ['sessionMs', 'sessionTime'],
    read: (s) => s.sessions?.sessionMs,
    missing: 'not measured: no session ran to its end (a session scenario: multi-turn, agent)',
  },
  {
    kind: 'session',
    id: 'task',
    label: 'agent task time',
    unit: 'ms',
    better: 'lower',
    aliases: ['taskMs', 'taskTime'],
    read: (s) => s.sessions?.agent?.taskMs,
    missing: 'not measured: no agent task ran to its end (the agent scenario)',
  },
  {
    kind: 'run',
    id: 'outputThroughput',
    label: 'output throughput',
    unit: 'tok/s',
    better: 'higher',
    aliases: ['outputTokensPerS', 'outputTokPerS'],
    read: (s) => s.throughput.outputTokensPerS,
  },
  {
    kind: 'run',
    id: 'inputThroughput',
    label: 'input throughput',
    unit: 'tok/s',
    better: 'higher',
    aliases: [],
    read: (s) => s.throughput.inputTokensPerS,
  },
  {
    kind: 'run',
    id: 'totalThroughput',
    label: 'total throughput',
    unit: 'tok/s',
    better: 'higher',
    aliases: [],
    read: (s) => s.throughput.totalTokensPerS,
  },
  {
    kind: 'run',
    id: 'decodeThroughput',
    label: 'decode throughput',
    unit: 'tok/s',
    better: 'higher',
    aliases: [],
    read: (s) => s.throughput.decodeTokensPerS,
  },
  {
    kind: 'run',
    id: 'requestThroughput',
    label: 'request throughput',
    unit: 'req/s',
    better: 'higher',
    aliases: ['requestsPerS', 'reqPerS', 'requestRate'],
    read: (s) => s.throughput.requestsPerS,
  },
  {
    kind: 'run',
    id: 'goodput',
    label: 'goodput',
    unit: 'req/s',
    better: 'higher',
    aliases: ['goodputRequestsPerS'],
    read: (s) => s.goodput?.requestsPerS,
    missing: NO_SLO,
  },
  {
    kind: 'run',
    id: 'failureRate',
    label: 'failure rate',
    unit: 'fraction',
    better: 'lower',
    aliases: ['errorRate', 'failRate'],
    read: (s) => {
      const counted = s.requests.completed + s.requests.failed;
      return counted > 0 ? s.requests.failed / counted : undefined;
    },
    missing: 'not measured: no request was counted',
  },
  {
    kind: 'run',
    id: 'sloAttainment',
    label: 'SLO attainment',
    unit: 'fraction',
    better: 'higher',
    aliases: ['slo'],
    read: (s) => s.goodput?.sloAttainment,
    missing: NO_SLO,
  },
];

/** The summary's latency entries, per-request ones first, in the order summary.json has them. */
export const LATENCY_KEYS: readonly LatencyKey[] = [
  ...METRICS.flatMap((m) => (m.kind === 'distribution' && m.requestKey ? [m.requestKey] : [])),
  ...METRICS.flatMap((m) => (m.kind === 'distribution' && !m.requestKey ? [m.latencyKey] : [])),
];

/** How names are matched: case, `_` and `-` ignored (`error_rate` is `errorRate`). */
export const normaliseMetricName = (name: string) => name.toLowerCase().replace(/[_-]/g, '');

const BY_NAME = new Map<string, CatalogMetric>();
for (const m of METRICS) {
  for (const name of [m.id, ...m.aliases]) BY_NAME.set(normaliseMetricName(name), m);
}

/** The metric a user's name means (id or alias, any case), or undefined. */
export function findMetric(name: string): CatalogMetric | undefined {
  return BY_NAME.get(normaliseMetricName(name));
}

/** The catalogue entry of an id; throws on a typo in code, never on user input. */
export function catalogMetric(id: string): CatalogMetric {
  const m = METRICS.find((x) => x.id === id);
  if (!m) throw new Error(`no metric "${id}" in the catalogue`);
  return m;
}

/** A distribution's summary entry by metric id: `latencyKeyOf('ttft')` is `ttftMs`. */
export function latencyKeyOf(id: string): LatencyKey {
  const m = catalogMetric(id);
  if (m.kind !== 'distribution') throw new Error(`"${id}" is not a distribution`);
  return m.latencyKey;
}

// ---------------------------------------------------------------------------------------------
// The condition grammar: METRIC[.STAT] OP NUMBER [UNIT], e.g. `ttft<500`, `ttft.p99 < 0.5s`,
// `failureRate<1%`. SLOs, thresholds and sweep SLOs read conditions with it and then check
// what their context allows (a statistic or none, which units).

export type ConditionOperator = '<' | '<=' | '>' | '>=';

/** A condition as written, before its metric, statistic and unit are checked. */
export interface ConditionText {
  metric: string;
  stat?: string;
  op: ConditionOperator;
  /** The number as written (`500`, `0.5`, `1e3`). */
  number: string;
  /** As written, possibly empty: `ms`, `s`, `%`, `tok/s`. */
  unit: string;
}

const CONDITION =
  /^([A-Za-z][\w-]*)(?:\.([A-Za-z0-9_.]+?))?\s*(<=|>=|<|>)\s*([-+]?[0-9]*\.?[0-9]+(?:e[-+]?\d+)?)\s*([A-Za-z%/]*)$/i;

/** Splits one condition into its parts; undefined when it does not have the shape. */
export function readCondition(text: string): ConditionText | undefined {
  const m = CONDITION.exec(text.trim());
  if (!m) return undefined;
  const [, metric, stat, op, number, unit] = m;
  return {
    metric,
    ...(stat !== undefined ? { stat } : {}),
    op: op as ConditionOperator,
    number,
    unit,
  };
}

/** Whether `value op limit` holds. */
export function holds(value: number, op: ConditionOperator, limit: number): boolean {
  return op === '<'
    ? value < limit
    : op === '<='
      ? value <= limit
      : op === '>'
        ? value > limit
        : value >= limit;
}
