import type { LoadSpec } from '../load.js';
import {
  type ClientHealthMeasurements,
  ERROR_KINDS,
  type ErrorKind,
  type RequestRecord,
} from '../record.js';
import {
  LATENCY_KEYS,
  type LatencyKey,
  METRICS,
  type RequestLatencyKey,
  type RunNumbers,
} from './catalog.js';
import { assessClientHealth, type ClientHealth } from './clientHealth.js';
import {
  ConnectionsBuilder,
  type ConnectionsState,
  type ConnectionsSummary,
} from './connections.js';
import {
  type Distribution,
  PERCENTILES,
  type PercentileName,
  percentileOfSorted,
  SampleSet,
  type SampleSetState,
} from './distribution.js';
import { fillIntervals, INTERVAL_METRICS } from './intervals.js';
import { forEachTokenGap, requestMetrics } from './requestMetrics.js';
import { type SessionState, type SessionSummary, SessionsBuilder } from './sessions.js';
import { formatSlo, meetsSlo, type SloCondition } from './slo.js';
import {
  TRANSIENT_KEYS,
  TransientBuilder,
  type TransientHeadline,
  type TransientState,
  type WarmupTransient,
} from './transient.js';
import type { UntilOutcome } from './until.js';
import type { Validity } from './validity.js';
import { type Warning, warning } from './warnings.js';

export type { Warning } from './warnings.js';

export const SUMMARY_SCHEMA_VERSION = 1;

export interface LatencySummary {
  ttftMs: Distribution;
  ttfcMs: Distribution;
  /** Requests that called a tool: time to the first tool-call event. */
  ttftcMs: Distribution;
  /** Requests that reasoned before answering: first reasoning token to first answer. */
  thinkingMs: Distribution;
  ttfbMs: Distribution;
  tpotMs: Distribution;
  /** Per token: each event's gap spread over the tokens it carried. */
  itlMs: Distribution;
  /** Per event: raw gaps between consecutive token events. */
  chunkGapMs: Distribution;
  e2eMs: Distribution;
  queueDelayMs: Distribution;
  userTtftMs: Distribution;
  userE2eMs: Distribution;
  maxStallMs: Distribution;
  outputSpeedTokS: Distribution;
  visibleOutputSpeedTokS: Distribution;
  prefillSpeedTokS: Distribution;
}

/** Percentiles with each failed request counted as +infinity; null where that is the result. */
export type AdjustedPercentiles = Record<PercentileName, number | null>;

export interface RunSummary {
  schemaVersion: typeof SUMMARY_SCHEMA_VERSION;
  load: LoadSpec & {
    /** Time-weighted mean of requests in flight over the measured duration. */
    meanConcurrency: number;
  };
  requests: {
    completed: number;
    failed: number;
    /** Sent during warm-up; recorded but not counted anywhere else. */
    warmup: number;
    errorsByKind: Partial<Record<ErrorKind, number>>;
    /**
     * The first failed request's message of each kind (by send time), clipped to
     * FIRST_ERROR_CHARS: the server's own reason (`HTTP 404: The model ... does not exist`) is
     * what a user needs when every request fails. Server text: escape it where it is shown.
     */
    firstErrorByKind?: Partial<Record<ErrorKind, string>>;
  };
  /** From the first `sentAt` to the last `endAt` of the counted requests. */
  durationS: number;
  tokens: {
    input: number;
    output: number;
    requestedInput: number;
    requestedOutput: number;
    /**
     * Prompt tokens the server said it served from its prefix cache, over the completed requests
     * that said so: from usage's `cached_tokens` where any request carried it, else from
     * llama.cpp's prompt tokens processed (`serverTiming.prefillTokens`, the rest cached).
     */
    cachedInput?: CachedInputTokens;
  };
  throughput: RunNumbers['throughput'];
  /** Open loop: throughput while arrivals were open, without the drain tail (docs/metrics.md). */
  steadyState?: SteadyState;
  /** Any loop: where MSER-5 found the run settled, the headline after it, the shift (docs/metrics.md). */
  warmupTransient?: WarmupTransient;
  latency: LatencySummary;
  latencyAdjusted: { ttftMs: AdjustedPercentiles; e2eMs: AdjustedPercentiles };
  streaming: {
    /** Output tokens per token-carrying event, over all completed requests. */
    tokensPerEvent: number;
    /** How output tokens were counted: requests per source. */
    outputTokensSource: Record<string, number>;
    /** Requests whose per-event token deltas disagreed with the server's total. */
    tokenCountMismatches: number;
    /**
     * Requests sent a second time, for the one cause that allows it: the server closed their
     * kept-alive connection (which had carried an earlier request) before any answer.
     */
    resentRequests: number;
  };
  goodput?: {
    slo: string;
    goodRequests: number;
    requestsPerS: number;
    /** Share of counted requests (failures included) that met every SLO. */
    sloAttainment: number;
  };
  clientHealth?: ClientHealth;
  /** Reasoning vs answer tokens: present when some completed request reasoned. */
  reasoning?: ReasoningSummary;
  /** Present when the records carry a `sessionId` (multi-turn chat, agent tasks). */
  sessions?: SessionSummary;
  /**
   * HTTP/2: how many measured requests each connection carried as streams (records'
   * `connectionId`); absent on HTTP/1.1, one request a connection at a time.
   */
  streamsPerConnection?: { connections: number; mean: number; max: number };
  /** queueDelay's parts and connection set-up phases (docs/metrics.md, "Connection phases"). */
  connections?: ConnectionsSummary;
  interrupted: boolean;
  /** `--until`: whether the interval target was met, and whether it (not a cap) ended the run. */
  until?: UntilOutcome;
  /**
   * The state of the server's prefix cache the run started in (analysis/prefixCache.ts
   * CacheState); absent where nobody said (a library summary, older results).
   */
  cacheState?: 'flushed' | 'uncontrolled' | { primed: number };
  /**
   * `--prefix-hit-rate`: the rate asked for and the one the measured phase reached, from the
   * server's prefix-cache counters (or, in virtual time, the simulated engine's), where known.
   */
  prefixHitRate?: { target: number; achieved?: number; from?: string };
  /**
   * A calibrated simulated run (`--calibration`): how its figures' prediction intervals were
   * made, said once (docs/metrics.md, "Prediction intervals"); the intervals are each figure's
   * `prediction`.
   */
  prediction?: RunPredictionInfo;
  warnings: Warning[];
  /**
   * The verdict of the warnings (src/metrics/validity.ts), set when the point is finished and
   * when a summary is saved; readers judge `warnings` again rather than trust an older copy.
   */
  validity?: Validity;
}

/** How a calibrated run's prediction intervals were made (src/metrics/runPrediction.ts). */
export interface RunPredictionInfo {
  /** The calibration.json the run's engine took its fitted values from, as given. */
  calibration: string;
  /** The statistic each `prediction`'s top `low`/`high` is of: the one the calibration fits. */
  statistic: 'p50';
  level: number;
  /** Draws of the fitted values, each a replay of the run's workload with its seed. */
  draws: number;
  /** Measured requests each draw replayed (the run's first); absent: the whole run. */
  drawRequests?: number;
  /** The fit's covariance, or (older calibration files) each value's own standard error. */
  covarianceFrom: 'fit' | 'standard-errors';
  /** Fitted values that flags given beside --calibration replaced: taken as exact. */
  heldByFlags?: string[];
}

/**
 * An open-loop run's steady-state window: from the first send plus the run's p95 E2E (or the
 * first end, if later) to the last send, when the server was both receiving arrivals and
 * finishing answers at their rate (before it, the system fills; after it, the drain tail only
 * finishes what is left).
 */
export interface SteadyState {
  windowS: number;
  /** Completed requests that ended in the window, per second of it. */
  requestsPerS: number;
  /** Output tokens whose stream event arrived in the window, per second of it. */
  outputTokensPerS: number;
  /**
   * The arrival rate asked for (`--rate`); for a trace or a ramp, which name no single rate,
   * the schedule's own (`scheduledRequestsPerS`).
   */
  offeredRequestsPerS: number;
  /**
   * Arrivals per second the schedule drew: (counted - 1) / (last - first scheduledAt). Random
   * arrivals draw more or fewer than asked (26 in 10 s at a Poisson 2/s); absent in older results.
   */
  scheduledRequestsPerS?: number;
  /** From the last send to the last end: the drain tail, and its share of `durationS`. */
  drainS: number;
  drainShare: number;
}

/** Prompt tokens served from the server's cache, as the requests' own answers told it. */
export interface CachedInputTokens {
  /** Prompt tokens not prefilled. */
  cached: number;
  /** All prompt tokens of the requests that told it. */
  ofInput: number;
  requests: number;
  source: 'usage' | 'prefill';
}

/** The reasoning split over the completed requests (docs/metrics.md, "Reasoning"). */
export interface ReasoningSummary {
  /** Completed requests that reasoned (a reasoning count or a reasoning event). */
  requests: number;
  /** Output tokens spent reasoning, over every completed request. */
  reasoningTokens: number;
  /** The rest of the output: `tokens.output - reasoningTokens`. */
  answerTokens: number;
  /** Requests whose reasoning count came from the event split, not the server's usage. */
  inferredRequests: number;
}

/** What the summary needs to know before the records arrive. */
export interface SummaryContext {
  load: LoadSpec;
  slo?: SloCondition[];
  /**
   * Collect only these latency distributions; the others stay empty. For callers that read a
   * few percentiles of many short runs (`infergauge size`'s trials): sorting every per-token gap
   * of every distribution was most of their cost. Default: all.
   */
  latencyKeys?: readonly LatencyKey[];
  /**
   * false: no sampling intervals (a prediction's replays read their figures, not their
   * sampling error; the bootstrap was much of a short replay's cost). Default: computed.
   */
  samplingIntervals?: boolean;
}

/** What is known only once the run is over. */
export interface RunOutcome {
  /** The engine's own measurements; one per worker thread when the run used several. */
  clientHealth?: ClientHealthMeasurements | ClientHealthMeasurements[];
  /** The run was stopped by a signal before its plan finished. */
  interrupted?: boolean;
  /** Open loop: arrivals that were still waiting for a slot when the run stopped. */
  unsentRequests?: number;
}

/** Summarised per request; the rest of LATENCY_KEYS (ITL, chunk gaps) per token gap. */
const REQUEST_LATENCY_KEYS = METRICS.flatMap((m) =>
  m.kind === 'distribution' && m.requestKey ? [m.requestKey] : [],
);

/** Share of token events read together with their predecessor that earns a warning. */
const COALESCED_WARN = 0.05;

/** Width of the time bins that place ends and tokens in the steady-state window. */
const STEADY_BIN_MS = 100;
/** Shortfall of a throughput under the offered rate that earns a warning. */
const OFFERED_SHORTFALL_WARN = 0.05;
/**
 * Mean requests in flight, as a share of `--max-concurrency`, from which the cap (not the
 * server) is what held an open loop's sends back: its slots were full nearly all the run.
 */
const CAP_FULL_SHARE = 0.9;

/**
 * How far (relative) the warm-up transient must move a headline figure to earn a warning. Under
 * it, a shift is within what chance alone gives: MSER also cuts a random burst of arrivals at a
 * run's start, and over a few hundred requests that moves a p99 or a rate by some 5 %.
 */
export const WARMUP_SHIFT_WARN = 0.1;

/** Relative gap between server-counted and requested input tokens that earns a warning. */
const INPUT_DRIFT_WARN = 0.05;

/**
 * Coordinated omission (docs/metrics.md, "Validity"). A healthy continuous-batching server
 * spends next to none of a closed loop's time past twice the median TTFT and TPOT; a server
 * that stalls some requests for seconds spends far more.
 */
const OMISSION_CLOSED_WARN = 0.05;
/** User TTFT p99 over the service's TTFT p99 (and at least OMISSION_OPEN_MIN_MS more). */
const OMISSION_OPEN_WARN = 0.1;
const OMISSION_OPEN_MIN_MS = 1;
/** Fewer completed requests say too little of a loop's time to judge it. */
const OMISSION_MIN_REQUESTS = 20;
/** Mean requests in flight, as a share of a closed loop's concurrency, that counts as delivered. */
const DELIVERED_CONCURRENCY_SHARE = 0.9;

/** Counters a SummaryBuilder adds up: merged by summing. */
const SUMMED = [
  'completed',
  'failed',
  'warmup',
  'busyUs',
  'inputTokens',
  'outputTokens',
  'decodeTokens',
  'requestedInput',
  'requestedOutput',
  'serverCountedInput',
  'serverCountedInputRequested',
  'serverCountedInputRequests',
  'usageCachedInput',
  'usageCachedOfInput',
  'usageCachedRequests',
  'prefillCachedInput',
  'prefillCachedOfInput',
  'prefillCachedRequests',
  'shortOutputs',
  'tokenEvents',
  'tokenCountMismatches',
  'resentRequests',
  'implausibleCounts',
  'goodRequests',
  'reasoningRequests',
  'reasoningTokens',
  'reasoningInferred',
] as const;
/** Extremes a SummaryBuilder keeps: merged by min or max. */
const MINIMA = ['windowStart', 'firstScheduled', 'firstEnd'] as const;
const MAXIMA = ['windowEnd', 'lastScheduled', 'lastSent'] as const;

/** What a SummaryBuilder has gathered, as plain data: a worker's part of a run, to merge. */
export type SummaryState = Record<
  (typeof SUMMED)[number] | (typeof MINIMA)[number] | (typeof MAXIMA)[number],
  number
> & {
  samples: Record<keyof LatencySummary, SampleSetState>;
  /** Per STEADY_BIN_MS bin of the run's clock: completed requests' ends and output tokens. */
  endsByBin: Record<string, number>;
  outputTokensByBin: Record<string, number>;
  errorsByKind: Partial<Record<ErrorKind, number>>;
  firstErrors: Partial<Record<ErrorKind, FirstError>>;
  outputSources: Record<string, number>;
  sessions?: SessionState;
  /** Measured requests per connection number (HTTP/2). */
  streamsByConnection?: Record<string, number>;
  connections?: ConnectionsState;
  transient?: TransientState;
};

/** A kind's first failure: when it was sent (and its id, for a tie) and its message. */
interface FirstError {
  sentAt: number;
  id: number;
  message: string;
}

/** The most characters of a failure's message a summary keeps (the records keep it whole). */
export const FIRST_ERROR_CHARS = 200;

/** Whether `a` was sent before `b`: the same choice whatever order threads deliver records in. */
const earlier = (a: FirstError, b: FirstError | undefined) =>
  b === undefined || a.sentAt < b.sentAt || (a.sentAt === b.sentAt && a.id < b.id);

/**
 * Builds a run summary from raw records, one record at a time, so that a run of any length is
 * summarised in bounded memory (per-request scalars, plus per-token samples up to the HDR limit).
 * A pure function of the records and the context: the same records give the same summary.
 */
export class SummaryBuilder {
  private readonly context: SummaryContext;
  private readonly samples = Object.fromEntries(
    LATENCY_KEYS.map((k) => [k, new SampleSet()]),
  ) as Record<keyof LatencySummary, SampleSet>;
  private completed = 0;
  private failed = 0;
  private warmup = 0;
  private readonly errorsByKind: Partial<Record<ErrorKind, number>> = {};
  private readonly firstErrors: Partial<Record<ErrorKind, FirstError>> = {};
  private windowStart = Number.POSITIVE_INFINITY;
  private windowEnd = Number.NEGATIVE_INFINITY;
  /** Sum of request durations in whole microseconds: integers add up the same in any order. */
  private busyUs = 0;
  private inputTokens = 0;
  private outputTokens = 0;
  private decodeTokens = 0;
  private requestedInput = 0;
  private requestedOutput = 0;
  private serverCountedInput = 0;
  private serverCountedInputRequested = 0;
  private serverCountedInputRequests = 0;
  /** Prompt tokens served from cache by usage's `cached_tokens`, of how many, in how many requests. */
  private usageCachedInput = 0;
  private usageCachedOfInput = 0;
  private usageCachedRequests = 0;
  /** The same from llama.cpp's prompt tokens processed (`serverTiming.prefillTokens`). */
  private prefillCachedInput = 0;
  private prefillCachedOfInput = 0;
  private prefillCachedRequests = 0;
  private shortOutputs = 0;
  private tokenEvents = 0;
  private tokenCountMismatches = 0;
  private resentRequests = 0;
  /** Requests (failed ones too) with a count from the server that could not be true. */
  private implausibleCounts = 0;
  private readonly outputSources: Record<string, number> = {};
  private goodRequests = 0;
  private firstScheduled = Number.POSITIVE_INFINITY;
  private lastScheduled = Number.NEGATIVE_INFINITY;
  private lastSent = Number.NEGATIVE_INFINITY;
  private firstEnd = Number.POSITIVE_INFINITY;
  private readonly endsByBin = new Map<number, number>();
  private readonly outputTokensByBin = new Map<number, number>();
  private reasoningRequests = 0;
  private reasoningTokens = 0;
  private reasoningInferred = 0;
  /** Created by the first record of a session. */
  private sessions: SessionsBuilder | undefined;
  /** Measured requests per connection, where records say it (HTTP/2): one entry a connection. */
  private readonly streamsByConnection = new Map<number, number>();
  private readonly connections = new ConnectionsBuilder();
  /** Not for callers that pick their latency keys (size's many short trials): a cost they skip. */
  private readonly transient: TransientBuilder | undefined;

  /** The sets of the interval metrics (fillIntervals), stamped with each record's id. */
  private readonly ordered: SampleSet[] = INTERVAL_METRICS.map((k) => this.samples[k]);
  private readonly requestKeys: readonly RequestLatencyKey[];
  private readonly itl: boolean;
  private readonly chunkGaps: boolean;

  constructor(context: SummaryContext) {
    this.context = context;
    const wanted = context.latencyKeys;
    this.requestKeys = wanted
      ? REQUEST_LATENCY_KEYS.filter((k) => wanted.includes(k))
      : REQUEST_LATENCY_KEYS;
    this.itl = !wanted || wanted.includes('itlMs');
    this.chunkGaps = !wanted || wanted.includes('chunkGapMs');
    this.transient = wanted ? undefined : new TransientBuilder();
  }

  add(record: RequestRecord): void {
    if (record.backlogMs !== undefined) this.connections.add(record);
    if (record.phase === 'warmup') {
      this.warmup++;
      return;
    }
    this.windowStart = Math.min(this.windowStart, record.sentAt);
    this.windowEnd = Math.max(this.windowEnd, record.endAt);
    this.firstScheduled = Math.min(this.firstScheduled, record.scheduledAt);
    this.lastScheduled = Math.max(this.lastScheduled, record.scheduledAt);
    this.lastSent = Math.max(this.lastSent, record.sentAt);
    this.firstEnd = Math.min(this.firstEnd, record.endAt);
    this.busyUs += Math.round((record.endAt - record.sentAt) * 1000);
    if (record.resent) this.resentRequests++;
    if (record.connectionId !== undefined) {
      const c = record.connectionId;
      this.streamsByConnection.set(c, (this.streamsByConnection.get(c) ?? 0) + 1);
    }
    if (record.countProblem) this.implausibleCounts++;
    if (record.sessionId !== undefined) {
      this.sessions ??= new SessionsBuilder();
      this.sessions.add(record as RequestRecord & { sessionId: number });
    }
    if (record.error) {
      this.failed++;
      const { kind, message } = record.error;
      this.errorsByKind[kind] = (this.errorsByKind[kind] ?? 0) + 1;
      const first = {
        sentAt: record.sentAt,
        id: record.id,
        message: message.slice(0, FIRST_ERROR_CHARS),
      };
      if (earlier(first, this.firstErrors[kind])) this.firstErrors[kind] = first;
      return;
    }
    this.completed++;
    addToBin(this.endsByBin, binOf(record.endAt), 1);
    // Tokens are summed per bin before the map is touched: a bin holds some ten events of a
    // stream, and a map update per event was a quarter of this method's time (6.6 against 4.9 us
    // a record of 128 events, issue 29).
    let atUs = 0;
    let bin = Number.NaN;
    let binTokens = 0;
    for (let i = 0; i < record.events.dtUs.length; i++) {
      atUs += record.events.dtUs[i];
      const k = record.events.tokens[i];
      if (k <= 0) continue;
      const at = binOf(record.sentAt + atUs / 1000);
      if (at !== bin) {
        if (binTokens > 0) addToBin(this.outputTokensByBin, bin, binTokens);
        bin = at;
        binTokens = 0;
      }
      binTokens += k;
    }
    if (binTokens > 0) addToBin(this.outputTokensByBin, bin, binTokens);
    const metrics = requestMetrics(record);
    this.transient?.add(record, metrics);
    // The interval metrics' samples keep their record's id: intervals read them in send order.
    const id = record.id;
    for (const set of this.ordered) set.orderKey = id;
    for (const key of this.requestKeys) {
      const value = metrics[key];
      if (value !== undefined) this.samples[key].add(value);
    }
    const itl = this.samples.itlMs;
    const chunkGap = this.samples.chunkGapMs;
    if (this.itl && this.chunkGaps) {
      forEachTokenGap(record, (gapMs, tokens) => {
        chunkGap.add(gapMs);
        itl.add(gapMs / tokens, tokens);
      });
    } else if (this.itl) {
      forEachTokenGap(record, (gapMs, tokens) => itl.add(gapMs / tokens, tokens));
    } else if (this.chunkGaps) {
      forEachTokenGap(record, (gapMs) => chunkGap.add(gapMs));
    }
    this.tokenEvents += metrics.tokenEvents;
    this.outputTokens += record.outputTokens;
    if (record.outputTokens > 0) this.decodeTokens += record.outputTokens - 1;
    this.inputTokens += record.inputTokens ?? 0;
    this.requestedInput += record.requestedInputTokens;
    this.requestedOutput += record.requestedOutputTokens;
    if (record.inputTokensSource === 'server' && record.inputTokens !== undefined) {
      this.serverCountedInput += record.inputTokens;
      this.serverCountedInputRequested += record.requestedInputTokens;
      this.serverCountedInputRequests++;
    }
    const input = record.inputTokens;
    if (input !== undefined && input > 0) {
      if (record.cachedInputTokens !== undefined) {
        this.usageCachedInput += Math.min(input, record.cachedInputTokens);
        this.usageCachedOfInput += input;
        this.usageCachedRequests++;
      }
      const processed = record.serverTiming?.prefillTokens;
      if (processed !== undefined) {
        this.prefillCachedInput += Math.max(0, input - processed);
        this.prefillCachedOfInput += input;
        this.prefillCachedRequests++;
      }
    }
    if (record.outputTokens < record.requestedOutputTokens) this.shortOutputs++;
    if (record.tokenCountMismatch) this.tokenCountMismatches++;
    if (record.reasoningTokens !== undefined || record.firstReasoningAt !== undefined) {
      this.reasoningRequests++;
      this.reasoningTokens += record.reasoningTokens ?? 0;
      if (record.reasoningTokensSource === 'events') this.reasoningInferred++;
    }
    // Own keys only: a records file's source named `constructor` is counted, not Object's + 1.
    const source = record.outputTokensSource;
    this.outputSources[source] =
      (Object.hasOwn(this.outputSources, source) ? this.outputSources[source] : 0) + 1;
    if (this.context.slo && meetsSlo(metrics, this.context.slo)) this.goodRequests++;
  }

  /** Everything added so far, as plain data (see merge). */
  state(): SummaryState {
    const state: Record<string, unknown> = {
      samples: Object.fromEntries(Object.entries(this.samples).map(([k, v]) => [k, v.state()])),
      errorsByKind: { ...this.errorsByKind },
      firstErrors: { ...this.firstErrors },
      outputSources: { ...this.outputSources },
      endsByBin: Object.fromEntries(this.endsByBin),
      outputTokensByBin: Object.fromEntries(this.outputTokensByBin),
    };
    for (const key of [...SUMMED, ...MINIMA, ...MAXIMA]) state[key] = this[key];
    if (this.sessions) state.sessions = this.sessions.state();
    if (this.streamsByConnection.size > 0) {
      state.streamsByConnection = Object.fromEntries(this.streamsByConnection);
    }
    state.connections = this.connections.state();
    if (this.transient) state.transient = this.transient.state();
    return state as SummaryState;
  }

  /**
   * Adds what another builder gathered (a worker thread's records, with the same SLO): the
   * summary is then the one of all their records added here, exactly (SampleSet.merge).
   */
  merge(other: SummaryState): void {
    for (const key of SUMMED) this[key] += other[key];
    for (const key of MINIMA) this[key] = Math.min(this[key], other[key]);
    for (const key of MAXIMA) this[key] = Math.max(this[key], other[key]);
    for (const [key, set] of Object.entries(this.samples)) {
      set.merge(other.samples[key as keyof LatencySummary]);
    }
    for (const [kind, n] of Object.entries(other.errorsByKind) as [ErrorKind, number][]) {
      this.errorsByKind[kind] = (this.errorsByKind[kind] ?? 0) + n;
    }
    for (const [kind, first] of Object.entries(other.firstErrors ?? {}) as [
      ErrorKind,
      FirstError,
    ][]) {
      if (earlier(first, this.firstErrors[kind])) this.firstErrors[kind] = first;
    }
    for (const [bin, n] of Object.entries(other.endsByBin))
      addToBin(this.endsByBin, Number(bin), n);
    for (const [bin, n] of Object.entries(other.outputTokensByBin)) {
      addToBin(this.outputTokensByBin, Number(bin), n);
    }
    for (const [source, n] of Object.entries(other.outputSources)) {
      this.outputSources[source] =
        (Object.hasOwn(this.outputSources, source) ? this.outputSources[source] : 0) + n;
    }
    if (other.sessions) {
      this.sessions ??= new SessionsBuilder();
      this.sessions.merge(other.sessions);
    }
    for (const [c, n] of Object.entries(other.streamsByConnection ?? {})) {
      const key = Number(c);
      this.streamsByConnection.set(key, (this.streamsByConnection.get(key) ?? 0) + n);
    }
    if (other.connections) this.connections.merge(other.connections);
    if (other.transient) this.transient?.merge(other.transient);
  }

  build(outcome: RunOutcome = {}): RunSummary {
    const { context } = this;
    const counted = this.completed + this.failed;
    const durationMs = counted > 0 ? this.windowEnd - this.windowStart : 0;
    const durationS = durationMs / 1000;
    const perS = (n: number) => (durationS > 0 ? n / durationS : 0);
    const latency = Object.fromEntries(
      Object.entries(this.samples).map(([k, set]) => [k, set.describe()]),
    ) as unknown as LatencySummary;
    if (context.samplingIntervals !== false) fillIntervals(latency, this.samples);
    const summary: RunSummary = {
      schemaVersion: SUMMARY_SCHEMA_VERSION,
      load: {
        ...context.load,
        meanConcurrency: durationMs > 0 ? this.busyUs / 1000 / durationMs : 0,
      },
      requests: {
        completed: this.completed,
        failed: this.failed,
        warmup: this.warmup,
        errorsByKind: this.errorsByKind,
        ...(this.failed > 0
          ? {
              firstErrorByKind: Object.fromEntries(
                ERROR_KINDS.filter((k) => this.firstErrors[k]).map((k) => [
                  k,
                  this.firstErrors[k]?.message,
                ]),
              ),
            }
          : {}),
      },
      durationS,
      tokens: {
        input: this.inputTokens,
        output: this.outputTokens,
        requestedInput: this.requestedInput,
        requestedOutput: this.requestedOutput,
        ...this.cachedInput(),
      },
      throughput: {
        requestsPerS: perS(this.completed),
        outputTokensPerS: perS(this.outputTokens),
        inputTokensPerS: perS(this.inputTokens),
        totalTokensPerS: perS(this.inputTokens + this.outputTokens),
        decodeTokensPerS: perS(this.decodeTokens),
      },
      latency,
      latencyAdjusted: {
        ttftMs: this.adjusted('ttftMs'),
        e2eMs: this.adjusted('e2eMs'),
      },
      streaming: {
        tokensPerEvent: this.tokenEvents > 0 ? this.outputTokens / this.tokenEvents : 0,
        outputTokensSource: this.outputSources,
        tokenCountMismatches: this.tokenCountMismatches,
        resentRequests: this.resentRequests,
      },
      interrupted: outcome.interrupted ?? false,
      warnings: [],
    };
    if (context.slo) {
      summary.goodput = {
        slo: formatSlo(context.slo),
        goodRequests: this.goodRequests,
        requestsPerS: perS(this.goodRequests),
        sloAttainment: counted > 0 ? this.goodRequests / counted : 0,
      };
    }
    const connections = this.connections.build();
    if (connections) summary.connections = connections;
    if (outcome.clientHealth) {
      const open = context.load.mode === 'open';
      const rate = (first: number, last: number) =>
        counted > 1 && last > first ? ((counted - 1) / (last - first)) * 1000 : undefined;
      summary.clientHealth = assessClientHealth(outcome.clientHealth, {
        intendedRatePerS: open ? rate(this.firstScheduled, this.lastScheduled) : undefined,
        achievedRatePerS: open ? rate(this.windowStart, this.lastSent) : undefined,
        capped: context.load.mode === 'open' && context.load.maxConcurrency !== undefined,
        ...(summary.latency.itlMs.count > 0 ? { itlP99Ms: summary.latency.itlMs.p99 } : {}),
        ...(summary.latency.ttftMs.count > 0 ? { ttftMeanMs: summary.latency.ttftMs.mean } : {}),
        ...(summary.latency.ttftMs.count > 0 && connections && connections.poolWaitMs.count > 0
          ? { ttftP50Ms: summary.latency.ttftMs.p50, poolWaitP50Ms: connections.poolWaitMs.p50 }
          : {}),
      });
    }
    const steady = this.steadyState(counted, durationS);
    if (steady) summary.steadyState = steady;
    // A ramp or a replayed trace changes its load by design: no steady state is to be found.
    const steadyLoad = plainSchedule(context.load) || context.load.mode === 'closed';
    const transient = !steadyLoad
      ? undefined
      : this.transient?.build({
          windowStartMs: this.windowStart,
          lastSentMs: this.lastSent,
          whole: wholeHeadline(summary),
          outputTokensByBin: this.outputTokensByBin,
          binMs: STEADY_BIN_MS,
          itlOf: (keep) => this.samples.itlMs.keptBy(keep),
        });
    if (transient) summary.warmupTransient = transient;
    if (this.reasoningRequests > 0) {
      summary.reasoning = {
        requests: this.reasoningRequests,
        reasoningTokens: this.reasoningTokens,
        answerTokens: this.outputTokens - this.reasoningTokens,
        inferredRequests: this.reasoningInferred,
      };
    }
    if (this.sessions) summary.sessions = this.sessions.build(durationMs);
    if (this.streamsByConnection.size > 0) {
      const counts = [...this.streamsByConnection.values()];
      summary.streamsPerConnection = {
        connections: counts.length,
        mean: counts.reduce((a, b) => a + b, 0) / counts.length,
        max: Math.max(...counts),
      };
    }
    summary.warnings = this.warnings(summary, outcome);
    return summary;
  }

  /**
   * Open loop only (single requests: a session's turns wait on its answers): the window from
   * the first end to the last send, with the ends and tokens of the bins whose middle lies in it.
   */
  private steadyState(counted: number, durationS: number): SteadyState | undefined {
    const { load } = this.context;
    if (load.mode !== 'open' || this.sessions || counted < 2) return undefined;
    // Ends and tokens only reach the arrival rate once the requests sent first have had time
    // to finish: at p95 E2E after the first send, 95 % of any arrival's work is done by then.
    const fillMs = this.samples.e2eMs.percentileWithFailures(95, 0) ?? 0;
    const startMs = Math.max(this.firstEnd, this.windowStart + fillMs);
    const windowMs = this.lastSent - startMs;
    const scheduledMs = this.lastScheduled - this.firstScheduled;
    if (windowMs <= 2 * STEADY_BIN_MS || scheduledMs <= 0) return undefined;
    const inWindow = (bins: Map<number, number>) => {
      let sum = 0;
      for (const [bin, n] of bins) {
        const middle = (bin + 0.5) * STEADY_BIN_MS;
        if (middle >= startMs && middle < this.lastSent) sum += n;
      }
      return sum;
    };
    const windowS = windowMs / 1000;
    const scheduled = ((counted - 1) / scheduledMs) * 1000;
    const drainS = (this.windowEnd - this.lastSent) / 1000;
    return {
      windowS,
      requestsPerS: inWindow(this.endsByBin) / windowS,
      outputTokensPerS: inWindow(this.outputTokensByBin) / windowS,
      offeredRequestsPerS: plainSchedule(load) ? load.rate : scheduled,
      scheduledRequestsPerS: scheduled,
      drainS,
      drainShare: durationS > 0 ? drainS / durationS : 0,
    };
  }

  /** The cached prompt tokens, from usage where any request told them, else from prefill counts. */
  private cachedInput(): { cachedInput?: CachedInputTokens } {
    if (this.usageCachedRequests > 0) {
      return {
        cachedInput: {
          cached: this.usageCachedInput,
          ofInput: this.usageCachedOfInput,
          requests: this.usageCachedRequests,
          source: 'usage',
        },
      };
    }
    if (this.prefillCachedRequests > 0) {
      return {
        cachedInput: {
          cached: this.prefillCachedInput,
          ofInput: this.prefillCachedOfInput,
          requests: this.prefillCachedRequests,
          source: 'prefill',
        },
      };
    }
    return {};
  }

  /**
   * Coordinated omission (docs/metrics.md, "Validity"). A closed loop: the share of its slots'
   * time that requests spent stalled (TTFT past twice its median, and TPOT past twice its
   * median over the mean answer's decode tokens), which is load the loop did not offer while
   * the server was slow. An open loop: user TTFT p99 over the service's TTFT p99, where neither
   * the client (client_limited) nor its --max-concurrency already explains the wait.
   */
  private omissionWarning(
    summary: RunSummary,
    offered: Warning | undefined,
    clientLimited: boolean,
  ): Warning | undefined {
    if (summary.sessions || this.completed < OMISSION_MIN_REQUESTS) return undefined;
    const { latency, load } = summary;
    if (load.mode === 'closed') {
      const ttftExcess = excessOverMedian(this.samples.ttftMs);
      const tpotExcess = excessOverMedian(this.samples.tpotMs);
      const loopMs = latency.e2eMs.mean * latency.e2eMs.count;
      if (ttftExcess === undefined || tpotExcess === undefined || !(loopMs > 0)) return undefined;
      const decodeTokens = Math.max(0, this.outputTokens / this.completed - 1);
      const share = (ttftExcess + decodeTokens * tpotExcess) / loopMs;
      if (!(share > OMISSION_CLOSED_WARN)) return undefined;
      return warning('coordinated_omission', {
        loop: 'closed',
        share,
        limit: OMISSION_CLOSED_WARN,
        concurrency: load.concurrency,
      });
    }
    if (clientLimited || offered?.code === 'max_concurrency_capped') return undefined;
    const user = latency.userTtftMs.p99;
    const service = latency.ttftMs.p99;
    if (!(service > 0) || !(user - service > OMISSION_OPEN_MIN_MS)) return undefined;
    const share = user / service - 1;
    if (!(share > OMISSION_OPEN_WARN)) return undefined;
    return warning('coordinated_omission', {
      loop: 'open',
      share,
      limit: OMISSION_OPEN_WARN,
      userP99Ms: user,
      serviceP99Ms: service,
    });
  }

  private adjusted(key: 'ttftMs' | 'e2eMs'): AdjustedPercentiles {
    const set = this.samples[key];
    // A successful request without any token has no TTFT; for the user it never came either.
    const failures = this.failed + Math.max(0, this.completed - set.count);
    return Object.fromEntries(
      Object.entries(PERCENTILES).map(([name, q]) => [
        name,
        set.percentileWithFailures(q, failures),
      ]),
    ) as AdjustedPercentiles;
  }

  private warnings(summary: RunSummary, outcome: RunOutcome): Warning[] {
    const warnings: Warning[] = [];
    const counted = this.completed + this.failed;
    const health = summary.clientHealth;
    if (health?.clientLimited) warnings.push(warning('client_limited', health));
    const coalesced = health?.coalescedEventShare ?? 0;
    if (coalesced > COALESCED_WARN) {
      warnings.push(warning('coalesced_events', { share: coalesced }));
    }
    if (summary.interrupted) {
      warnings.push(warning('interrupted', { unsent: outcome.unsentRequests ?? 0 }));
    }
    if (counted === 0) {
      warnings.push(warning('no_requests', {}));
      return warnings;
    }
    if (this.failed > 0) {
      const kinds = ERROR_KINDS.filter((k) => this.errorsByKind[k])
        .map((k) => `${k} ${this.errorsByKind[k]}`)
        .join(', ');
      warnings.push(warning('requests_failed', { failed: this.failed, counted, kinds }));
    }
    const offered = offeredRateWarning(summary);
    if (offered) warnings.push(offered);
    const omission = this.omissionWarning(summary, offered, health?.clientLimited === true);
    if (omission) warnings.push(omission);
    const delivered = deliveredLoadWarning(summary);
    if (delivered) warnings.push(delivered);
    if (this.completed > 0 && this.completed < 100) {
      warnings.push(warning('low_sample', { completed: this.completed }));
    }
    if (this.serverCountedInputRequests > 0 && this.serverCountedInputRequested > 0) {
      const drift = this.serverCountedInput / this.serverCountedInputRequested - 1;
      if (Math.abs(drift) > INPUT_DRIFT_WARN) {
        warnings.push(
          warning('input_drift', {
            meanInput: this.serverCountedInput / this.serverCountedInputRequests,
            meanRequested: this.serverCountedInputRequested / this.serverCountedInputRequests,
            limit: INPUT_DRIFT_WARN,
          }),
        );
      }
    }
    if (this.shortOutputs > 0) {
      warnings.push(
        warning('output_short', {
          short: this.shortOutputs,
          completed: this.completed,
          meanOutput: this.outputTokens / this.completed,
          meanRequested: this.requestedOutput / this.completed,
        }),
      );
    }
    const tokensPerEvent = summary.streaming.tokensPerEvent;
    if (tokensPerEvent > 1.05) warnings.push(warning('multi_token_events', { tokensPerEvent }));
    if (this.outputSources.events) {
      warnings.push(
        warning('no_usage', {
          requests: this.outputSources.events,
          implausible: this.implausibleCounts > 0,
        }),
      );
    }
    if (this.resentRequests > 0) {
      warnings.push(warning('resent_requests', { resent: this.resentRequests, counted }));
    }
    if (this.implausibleCounts > 0) {
      warnings.push(warning('implausible_usage', { requests: this.implausibleCounts }));
    }
    if (this.tokenCountMismatches > 0) {
      warnings.push(warning('token_count_mismatch', { requests: this.tokenCountMismatches }));
    }
    const transient = transientWarning(summary.warmupTransient);
    if (transient) warnings.push(transient);
    return warnings;
  }
}

/** Summarises a finite list of records (convenience over SummaryBuilder). */
export function summarize(
  records: Iterable<RequestRecord>,
  context: SummaryContext,
  outcome: RunOutcome = {},
): RunSummary {
  const builder = new SummaryBuilder(context);
  for (const record of records) builder.add(record);
  return builder.build(outcome);
}

/** An open loop at one asked rate (not a replayed trace, not a ramp): `load.rate` is what it offered. */
function plainSchedule(load: LoadSpec): load is Extract<LoadSpec, { mode: 'open' }> {
  return load.mode === 'open' && load.arrival !== 'trace' && !load.rampUp;
}

/**
 * An open-loop run whose whole-run requests/s falls short of the offered rate: the client's own
 * --max-concurrency when its slots were full (arrivals waited in the client, never reaching the
 * server at the asked rate), else the drain tail when the steady-state window kept up, else a
 * server that could not keep up. The shortfall is judged against the lower of the asked rate
 * and the rate the schedule drew: random arrivals may draw fewer than asked, and a run that
 * finished all it was sent did not fall short.
 */
function offeredRateWarning(summary: RunSummary): Warning | undefined {
  const steady = summary.steadyState;
  const whole = summary.throughput.requestsPerS;
  const { load } = summary;
  if (load.mode !== 'open' || summary.sessions) return undefined;
  if (!steady && !plainSchedule(load)) return undefined;
  const offered = steady
    ? Math.min(steady.offeredRequestsPerS, steady.scheduledRequestsPerS ?? Number.POSITIVE_INFINITY)
    : load.rate;
  if (whole >= offered * (1 - OFFERED_SHORTFALL_WARN)) return undefined;
  const cap = load.maxConcurrency;
  if (cap !== undefined && summary.load.meanConcurrency >= cap * CAP_FULL_SHARE) {
    return warning('max_concurrency_capped', {
      cap,
      offeredPerS: steady?.offeredRequestsPerS ?? load.rate,
      wholePerS: whole,
      queueDelayP50Ms: summary.latency.queueDelayMs.p50,
      deliveredShare: 1 - OFFERED_SHORTFALL_WARN,
    });
  }
  if (!steady) {
    // No window: arrivals stopped before the first answers' E2E had passed.
    return warning('below_offered_rate', {
      offeredPerS: offered,
      wholePerS: whole,
      e2eP95Ms: summary.latency.e2eMs.p95,
    });
  }
  // Random arrivals put about sqrt(n) noise on the n answers of the window: only a shortfall
  // beyond three of those (or 5 %) says the server fell behind.
  const noise =
    load.arrival !== 'constant'
      ? 3 / Math.sqrt(Math.max(1, steady.requestsPerS * steady.windowS))
      : 0;
  const keptUpShare = 1 - Math.max(OFFERED_SHORTFALL_WARN, noise);
  const keptUp = steady.requestsPerS >= offered * keptUpShare;
  if (keptUp) {
    return warning('drain_tail', {
      offeredPerS: offered,
      wholePerS: whole,
      drainS: steady.drainS,
      drainShare: steady.drainShare,
      steady,
    });
  }
  return warning('below_offered_rate', {
    offeredPerS: offered,
    wholePerS: whole,
    steady,
    keptUpShare,
  });
}

/**
 * A closed loop that kept fewer requests (sessions, in a session run) in flight than asked, over
 * its measured duration: its ramp-up and drain tail weigh more the fewer requests each slot
 * sends (a sweep level above its --requests never reaches its concurrency). An interrupted run
 * says so itself.
 */
function deliveredLoadWarning(summary: RunSummary): Warning | undefined {
  const { load } = summary;
  if (load.mode !== 'closed' || summary.interrupted) return undefined;
  if (summary.requests.completed + summary.requests.failed === 0) return undefined;
  // Sessions count as open through their think time: the loop's concurrency is of sessions.
  const measured = summary.sessions ? summary.sessions.meanOpenSessions : load.meanConcurrency;
  if (!(measured < load.concurrency * DELIVERED_CONCURRENCY_SHARE)) return undefined;
  return warning('load_not_delivered', {
    concurrency: load.concurrency,
    measured,
    limit: DELIVERED_CONCURRENCY_SHARE,
    ...(summary.sessions ? { unit: 'sessions' as const } : {}),
  });
}

/**
 * The sum of how far each sample lies beyond twice the samples' median: a stall, not the
 * spread a busy batch gives every request (a healthy server's p99 TTFT is well within twice its
 * p50, and a loaded client's timer jitter within it too). Undefined where the samples are in an
 * HDR histogram, which keeps no single sample to sum.
 */
function excessOverMedian(set: SampleSet): number | undefined {
  const sorted = set.sorted();
  if (!sorted || sorted.length === 0) return undefined;
  const typical = 2 * percentileOfSorted(sorted, 50);
  let excess = 0;
  for (let i = sorted.length - 1; i >= 0 && sorted[i] > typical; i--) excess += sorted[i] - typical;
  return excess;
}

/** The whole run's figures that the warm-up transient is measured against. */
function wholeHeadline(summary: RunSummary): Partial<TransientHeadline> {
  const { ttftMs, itlMs, tpotMs, e2eMs } = summary.latency;
  return {
    ...(ttftMs.count > 0 ? { ttftP50Ms: ttftMs.p50, ttftP99Ms: ttftMs.p99 } : {}),
    ...(itlMs.count > 0 ? { itlP50Ms: itlMs.p50, itlP99Ms: itlMs.p99 } : {}),
    ...(tpotMs.count > 0 ? { tpotP50Ms: tpotMs.p50 } : {}),
    ...(e2eMs.count > 0 ? { e2eP50Ms: e2eMs.p50, e2eP99Ms: e2eMs.p99 } : {}),
  };
}

/**
 * No steady state, or a transient that moved some headline by more than WARMUP_SHIFT_WARN
 * (each such figure named, the furthest moved first).
 */
function transientWarning(t: WarmupTransient | undefined): Warning | undefined {
  if (!t) return undefined;
  const figures = {
    truncated: t.truncatedRequests,
    completions: t.completions,
    truncatedS: t.truncatedS,
  };
  if (!t.steadyReached) return warning('no_steady_state', figures);
  if (t.truncatedRequests === 0 || !t.shift) return undefined;
  const shift = t.shift;
  const moved = TRANSIENT_KEYS.flatMap((key) => {
    const by = shift[key];
    return by !== undefined && Math.abs(by) > WARMUP_SHIFT_WARN ? [{ key, by }] : [];
  }).sort((a, b) => Math.abs(b.by) - Math.abs(a.by));
  return moved.length > 0
    ? warning('warmup_shift', { ...figures, moved, limit: WARMUP_SHIFT_WARN })
    : undefined;
}

/** The steady-state bin of a time on the run's clock (ms). */
function binOf(atMs: number): number {
  return Math.floor(atMs / STEADY_BIN_MS);
}

function addToBin(bins: Map<number, number>, bin: number, n: number): void {
  bins.set(bin, (bins.get(bin) ?? 0) + n);
}
