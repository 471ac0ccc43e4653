/** The load a run applies; every throughput number is reported next to it (docs/metrics.md, "Run-level throughput"). */
export type LoadSpec =
  | {
      /** Closed loop: a fixed number of requests in flight; each finished one starts the next. */
      mode: 'closed';
      concurrency: number;
    }
  | OpenLoadSpec;

/**
 * The most requests one client keeps in flight (closed-loop concurrency, a sweep level, a
 * capacity batch, --max-concurrency): 2^16. Each request in flight holds a connection of its
 * own, and one client address has 65,536 ports toward a server port, so no client reaches more
 * (Linux's ephemeral range gives 28,232 by default); a sweep level of 10 million died of V8's
 * out-of-memory opening them instead of saying so. More load takes several clients (`--shard`,
 * then `merge`).
 */
export const MAX_CONCURRENCY = 2 ** 16;

/** What is wrong with a concurrency above MAX_CONCURRENCY, said after its flag's name. */
export function concurrencyBoundProblem(value: number): string {
  return `must be at most ${MAX_CONCURRENCY} (got ${value}): each request in flight holds a connection of its own, and one client address has 65,536 ports toward a server; split a larger load over several clients with --shard and merge their results`;
}

/**
 * Open loop: requests arrive on a schedule, whether or not earlier ones have finished. The first
 * arrival is at 0 (as in vLLM and GuideLLM); request `id` gets the schedule's `id`-th time
 * (warm-up requests included), so per-request data (trace lengths) can be looked up by id.
 */
export interface OpenLoadSpec {
  mode: 'open';
  /**
   * Intended arrivals per second (after the ramp, if any). For a trace it only describes the
   * replay: its mean rate at `speed` (traceLoad() in src/workload/trace.ts sets it).
   */
  rate: number;
  /**
   * `poisson`: exponential gaps; `constant`: equal gaps; `gamma`: gamma gaps with shape
   * `burstiness` (as vLLM's --burstiness); `trace`: the times in `trace`, nothing after them.
   */
  arrival: ArrivalKind;
  /**
   * Gamma arrivals only (default 1): the gaps' shape. 1 is Poisson, < 1 burstier, > 1 more
   * regular; the gaps' coefficient of variation is 1 / sqrt(burstiness), their mean 1 / rate.
   */
  burstiness?: number;
  /**
   * Poisson, constant or gamma: the rate grows (or falls) linearly from `fromRate` to `rate`
   * over `seconds`, then stays at `rate` (a non-homogeneous process, by time rescaling).
   */
  rampUp?: RampUp;
  /** Trace arrivals only: the replayed times. */
  trace?: TraceReplay;
  /** Optional cap on requests in flight; arrivals beyond it wait in the client (queueDelay). */
  maxConcurrency?: number;
}

export type ArrivalKind = 'poisson' | 'constant' | 'gamma' | 'trace';

export interface RampUp {
  /** Requests per second at the start (0 allowed: the first request still goes at 0). */
  fromRate: number;
  /** Length of the ramp, seconds. */
  seconds: number;
}

/**
 * A trace's arrival times, replayed at `speed`: request i is scheduled at
 * (timesMs[i] - timesMs[0]) / speed ms from the start, and nothing after the last one.
 * Build it with traceReplay() (src/workload/trace.ts): that object's JSON form (summary.json,
 * the manifest) is a short description, `{ source, speed, requests, spanMs }`, not the times.
 */
export interface TraceReplay {
  /** Trace time of each arrival, ms, non-decreasing. */
  timesMs: readonly number[];
  /** 2 replays twice as fast, 0.5 at half speed. */
  speed: number;
  /** Where the times came from (a file path), for reports. */
  source?: string;
}

/** What a TraceReplay built by traceReplay() writes to JSON. */
export interface TraceReplayJson {
  source?: string;
  speed: number;
  requests: number;
  /** Trace time from the first to the last arrival, ms (before `speed`). */
  spanMs: number;
  /** `--trace-window`: the seconds of the trace replayed. */
  window?: { startS: number; endS: number };
  /** `--trace-max-gap-s` and the trace time it removed (ms, before `speed`). */
  maxGapS?: number;
  removedGapMs?: number;
  /** With hash ids: tokens a block, and the hit rate they imply (traceImpliedHitRate). */
  blockTokens?: number;
  impliedHitRate?: number;
}

/** Shard `index` of `count` (0-based), as given by `--shard index/count`. */
export interface ShardIndex {
  index: number;
  count: number;
}

/** Parses `--shard i/N` (0 <= i < N). Throws an Error naming the fix. */
export function parseShard(text: string): ShardIndex {
  const match = /^(\d+)\/(\d+)$/.exec(text.trim());
  const index = match ? Number(match[1]) : Number.NaN;
  const count = match ? Number(match[2]) : Number.NaN;
  if (!match || count < 1 || index >= count) {
    throw new Error(
      `--shard takes INDEX/COUNT with 0 <= INDEX < COUNT, e.g. --shard 0/4 for the first of four (got "${text}")`,
    );
  }
  return { index, count };
}
