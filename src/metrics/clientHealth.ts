import type { ClientHealthMeasurements, PreopenedConnections } from '../record.js';
import { type Distribution, SampleSet } from './distribution.js';

/**
 * Limits past which the client, not the server, may be what the numbers measure. Chosen so that
 * timestamps stay well inside the 1 ms accuracy the tests hold the client to in normal runs.
 * `limit` is the verdict's; from `near` on, a figure is reported in a note with the limit but
 * does not change the verdict: these figures wobble a few per cent between runs of one setup,
 * and a setup close to a limit should read "near" on every run, not "ok" and "limited" by turns.
 */
export const CLIENT_HEALTH_LIMITS = {
  /** Event-loop delay p99 of any engine thread: a busy loop timestamps stream events late. */
  eventLoopDelayP99Ms: { limit: 10, near: 5 },
  /** Open-loop send slip p99: arrivals went out late, so the offered load was lower. */
  sendSlipP99Ms: { limit: 10, near: 5 },
  /** Share of one core used by any engine thread (the process, where threads are not told apart). */
  cpuUtilisation: { limit: 0.9, near: 0.8 },
  /**
   * Share of the cores the process may use (`taskset`, the machine) used by all its threads
   * together: the engine threads, the coordinating thread, the garbage collector's.
   */
  processCpuShare: { limit: 0.9, near: 0.8 },
  /** Open loop: achieved send rate below this share of the intended rate (lower is worse). */
  achievedRateShare: { limit: 0.95, near: 0.98 },
} as const;

/**
 * Pool wait p50 (docs/metrics.md, "Connection phases") as a share of TTFT p50 past which the
 * client's own connection pool, not the server, held requests back: the wait is outside TTFT
 * but inside user TTFT, and the server saw fewer requests at once than asked. Below `minMs`
 * (the client's stated accuracy) it is not judged.
 */
export const POOL_WAIT_LIMIT = { limit: 0.1, near: 0.05, minMs: 1 } as const;

/**
 * How late the thread's own stalls may make its stamps at p99 (stampDelayEstimate) against the
 * measured ITL p99: the larger of `minMs` and `share` of it; half of that is "near". A
 * millisecond is the accuracy the client promises; against a slow server's 200 ms gaps a few are
 * immaterial.
 */
export const STAMP_DELAY_LIMIT = { minMs: 1, share: 0.05 } as const;

/**
 * Below this event-loop utilisation a thread's stalls are not its load's (it was idle most of the
 * time): garbage collection, or the host running other work on its cores (`npm start` beside
 * its simulator on two cores: a loop 4 % busy held up to 20 ms).
 */
const IDLE_LOOP_UTILISATION = 0.25;

/** Gaps between one thread's arrivals below this go out in bursts: Node's timers tick in 1 ms. */
const TIMER_GRANULARITY_MS = 1;

/** Thread CPU is counted in 10 ms ticks: over less than a second a CPU share is too coarse to judge. */
const MIN_CPU_WALL_S = 1;

/**
 * Over less than a second one pause is 1 % of the time, and the monitor has a few hundred
 * samples: the stamp delay is reported but not judged.
 */
const MIN_STAMP_WALL_S = 1;

/** The health of one engine thread (a worker). */
export interface ThreadHealth {
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /** Event-loop utilisation: share of the wall time the loop was busy. */
  eventLoopUtilisation?: number;
  /**
   * `userS`, `systemS`: the whole process; `threadS`: this thread alone (Linux); `utilisation`:
   * of one core, by the thread where known, else by the process.
   */
  cpu: { userS: number; systemS: number; threadS?: number; utilisation: number };
  /** Share of token events that arrived in one network read with their predecessor. */
  coalescedEventShare: number;
  /** How late the thread's own stalls made its stamps (stampDelayEstimate); absent in older results. */
  stampDelayMs?: StampDelay;
  /** The thread's garbage-collection pauses during the run; absent in older results. */
  gcPauses?: ClientHealthMeasurements['gcPauses'];
  clientLimited: boolean;
  /** A figure was near a limit without crossing it (it is in `notes`, with the limit). */
  nearLimit?: boolean;
  /**
   * Why `clientLimited` is set, one short sentence per limit crossed: the figure against its
   * limit, then what it did to the numbers.
   */
  reasons: string[];
  /**
   * The figure-against-limit part of each reason, in the same order (`event-loop delay p99
   * 14.0 ms (limit 10 ms)`): what a one-line warning names. Absent in older results.
   */
  causes?: string[];
  /** Conditions worth knowing that are not limits: figures near a limit, timer bursts. */
  notes?: string[];
}

export interface ClientHealth extends ThreadHealth {
  /**
   * CPU of all the process's threads together over the run, as a share of the cores it may use
   * (the busiest process, after `merge`); absent in results older than this measurement.
   */
  processCpu?: { share: number; usableCores: number };
  sendSlipMs?: Distribution;
  intendedRatePerS?: number;
  achievedRatePerS?: number;
  /** One entry per worker thread, when the run used more than one. */
  workers?: ThreadHealth[];
  /**
   * No engine thread reported its measurements (every worker was terminated or failed before
   * its end): the thread figures are NaN (`null` in JSON), `notes` says so, and the verdict is
   * "not measured", never "ok".
   */
  unmeasured?: true;
  /**
   * The connections the pools opened before the clock started, over every thread
   * (docs/metrics.md, "Connection phases"); absent when none were, and in older results.
   */
  preopened?: PreopenedConnections;
  /**
   * What to do about a client-limited run, fitted to how it ran (its worker threads against its
   * usable cores): clientHealthAdvice. Absent when not client-limited, and in older results.
   */
  advice?: string;
}

/** What a crossed limit says about its remedy (clientHealthAdvice). */
type Remedy =
  /** One thread was busy: more worker threads, each on a core, spread its streams. */
  | 'threads'
  /** The whole process filled the cores it may use: only more or other cores help. */
  | 'cores'
  /** An idle thread was held up by the host's other work: more threads share the same host. */
  | 'host'
  /** Requests waited for a free connection in the client's pool: no thread or core helps. */
  | 'pool';

/**
 * What to do about a client-limited run, fitted to how it ran: more worker threads spread a
 * busy thread's streams over more cores, but only while there are idle cores for them; once
 * the threads fill (or the process uses) the cores it may use, or the host's other work held an
 * idle thread up, only other cores help: another machine, or the load split into shards.
 */
export function clientHealthAdvice(
  remedies: ReadonlySet<Remedy>,
  threads: number,
  usableCores: number | undefined,
  /** Threads the stamp-delay estimate says would bring a thread under its limit. */
  estimatedThreads?: number,
): string {
  const elsewhere = 'another machine or shards (--shard)';
  if (remedies.size === 1 && remedies.has('pool')) {
    return 'requests waited for a free connection: see the connection phases (a server that closes its kept-alive connections makes each request open one; a cap on streams per connection holds the rest back)';
  }
  if (remedies.has('cores') || (usableCores !== undefined && threads >= usableCores)) {
    const on = usableCores !== undefined ? cores(usableCores) : 'the cores it may use';
    return `more --workers cannot help (${threads} on ${on}): use ${elsewhere}`;
  }
  if (remedies.has('threads')) {
    // The default is one per usable core but one (the main thread writes the records); a
    // thread per core is the most that still helps.
    const wanted = estimatedThreads ?? (usableCores !== undefined ? usableCores - 1 : threads * 2);
    const n = Math.min(usableCores ?? Number.POSITIVE_INFINITY, Math.max(threads + 1, wanted));
    return `use --workers ${n} to spread the streams over more cores`;
  }
  return `other work on the host held the client up: give it idle cores (taskset) or use ${elsewhere}`;
}

/** The verdict in words: what the report prints beside the figures. */
export function clientHealthVerdict(
  h: ThreadHealth & Pick<ClientHealth, 'unmeasured'>,
): 'client-limited' | 'not measured' | 'ok, near a limit' | 'ok' {
  if (h.clientLimited) return 'client-limited';
  if (h.unmeasured) return 'not measured';
  return h.nearLimit ? 'ok, near a limit' : 'ok';
}

/** Collects limits crossed (`reasons`, `causes`) and figures near a limit (`notes`). */
class Findings {
  readonly reasons: string[] = [];
  readonly causes: string[] = [];
  readonly notes: string[] = [];
  readonly remedies = new Set<Remedy>();
  /** The most threads the stamp-delay estimate asked for (stampDelayFinding). */
  estimatedThreads: number | undefined;
  near = false;

  /**
   * `what`: the figure in words; `limitText`: the limit in the same unit; `why`: what it did to
   * the numbers, a short clause; `remedy`: what removes it.
   */
  check(
    figure: number,
    { limit, near }: { limit: number; near: number },
    what: string,
    limitText: string,
    why: string,
    remedy: Remedy,
  ): void {
    // The send rate is the one limit where lower is worse (its `near` lies above its `limit`).
    const lowerIsWorse = near > limit;
    const past = (bound: number) => (lowerIsWorse ? figure < bound : figure > bound);
    if (past(limit)) {
      const cause = `${what} (limit ${limitText})`;
      this.causes.push(cause);
      this.reasons.push(`${cause}: ${why}`);
      this.remedies.add(remedy);
    } else if (past(near)) {
      this.near = true;
      this.notes.push(`${what}, near the limit of ${limitText}`);
    }
  }
}

/** A share in whole per cent, or to a tenth where whole per cent would read as the limit. */
function pct(share: number, limit?: number): string {
  const whole = Math.round(share * 100);
  const digits = limit !== undefined && whole === Math.round(limit * 100) && share !== limit;
  return `${(share * 100).toFixed(digits ? 1 : 0)}%`;
}

const cores = (n: number) => `${n} usable core${n === 1 ? '' : 's'}`;

/** How late a thread's own stalls made its stamps, for reads arriving at random times. */
export interface StampDelay {
  meanMs: number;
  p99Ms: number;
}

const NO_DELAY: StampDelay = { meanMs: 0, p99Ms: 0 };

/** The run's own figures a stamp delay is judged against. */
interface MeasuredLatency {
  /** ITL p99: what a stamp delay is material against, and the most it can have moved. */
  itlP99Ms?: number;
  /** Mean TTFT: the most a stamp delay can have moved it. */
  ttftMeanMs?: number;
  /** TTFT p50 and pool wait p50: the share POOL_WAIT_LIMIT judges. */
  ttftP50Ms?: number;
  poolWaitP50Ms?: number;
}

/**
 * How late the thread's own stalls (garbage collection, a burst of finished requests, anything
 * that held its event loop) made the stamps of reads arriving at random times, from the
 * loop-delay samples (`loopStallsMs`). A read that arrives `s` ms into a stall of `L` ms waits
 * for the rest of it and then for the reads queued before it, which drain at the loop's spare
 * share `1 - busy`: it waits `L - s (1 - busy)`, so a share `(L - d)+ / (1 - busy)` of each stall's
 * wall time delays reads by more than `d`. Summed over the stalls and divided by the run's wall
 * time this is the share of reads stamped more than `d` late; p99 is the `d` where it is 1 %.
 * With `threads` threads each gets a `1 / threads` share of the reads, and of the garbage and
 * bursts that stall it, so the shares divide by `threads` (the stalls' lengths are kept: an
 * upper bound). Undefined without the samples (older results).
 *
 * The samples are the monitor's: a stall shorter than its 2 ms resolution is seen only in part,
 * and each percentile step's samples take the step's upper value. bench:peer sets the estimate
 * beside the stamps' true lateness (docs/benchmarks.md, "The verdict against the truth").
 */
export function stampDelayEstimate(
  m: Pick<ClientHealthMeasurements, 'loopStallsMs' | 'wallS' | 'eventLoopUtilisation'>,
  threads = 1,
): StampDelay | undefined {
  const stalls = m.loopStallsMs;
  if (!stalls || !(m.wallS > 0)) return undefined;
  const wallMs = m.wallS * 1000;
  const stalledMs = stalls.reduce((sum, [ms, n]) => sum + ms * n, 0);
  // The loop's own work besides the stalls: what the queued reads drain against.
  const busy = Math.min(0.9, Math.max(0, (m.eventLoopUtilisation ?? 0) - stalledMs / wallMs));
  const weight = 1 / (1 - busy / threads) / wallMs / threads;
  const lateShare = (d: number) =>
    stalls.reduce((sum, [ms, n]) => sum + n * Math.max(0, ms - d), 0) * weight;
  const meanMs = stalls.reduce((sum, [ms, n]) => sum + (n * ms * ms) / 2, 0) * weight;
  let lo = 0;
  let hi = stalls.reduce((max, [ms]) => Math.max(max, ms), 0);
  if (lateShare(0) <= 0.01) hi = 0;
  for (let i = 0; i < 40 && hi - lo > 1e-4; i++) {
    const mid = (lo + hi) / 2;
    if (lateShare(mid) > 0.01) lo = mid;
    else hi = mid;
  }
  return { meanMs, p99Ms: hi };
}

/**
 * The finding on a thread's stamp delay, when past the limit against `measured.itlP99Ms` (the
 * run's ITL p99): what it may have done to ITL p99 and mean TTFT, and how many threads (one core
 * each) would bring it under the limit, by the same estimate. Neither can have moved by more
 * than its measured value (a true gap or TTFT is not below 0): a saturated loop's estimate runs
 * to hundreds of milliseconds (turns of 400 ms, weighed as if the server kept writing through
 * them, which a server held by TCP flow control does not) where the measured ITL p99 is 1.4 ms.
 */
function stampDelayFinding(
  m: ClientHealthMeasurements,
  delay: StampDelay,
  measured: MeasuredLatency,
  found: Findings,
): void {
  const { itlP99Ms, ttftMeanMs } = measured;
  const { minMs, share } = STAMP_DELAY_LIMIT;
  const limit = Math.max(minMs, share * (itlP99Ms ?? 0));
  const itlBound = (d: StampDelay) => Math.min(d.p99Ms, itlP99Ms ?? Number.POSITIVE_INFINITY);
  const ttftBoundMs = Math.min(delay.meanMs, ttftMeanMs ?? Number.POSITIVE_INFINITY);
  const gc = m.gcPauses;
  const pauses =
    gc && gc.over1Ms > 0
      ? ` (${gc.over1Ms} GC pause${gc.over1Ms === 1 ? '' : 's'} over 1 ms, longest ${gc.maxMs.toFixed(1)} ms)`
      : '';
  const itl = itlP99Ms !== undefined ? ` (of ${itlP99Ms.toFixed(1)} ms)` : '';
  // Short: the terminal prints this line under CLIENT-LIMITED, one line a cause (issue 47).
  const moved = `ITL p99 up to ${itlBound(delay).toFixed(1)} ms high${itl}, mean TTFT ~${ttftBoundMs.toFixed(1)} ms high`;
  const elu = m.eventLoopUtilisation;
  let why: string;
  let remedy: Remedy;
  if (elu !== undefined && elu < IDLE_LOOP_UTILISATION) {
    // An idle loop's stalls are not its load's: more threads would share the same host.
    why = `${moved}; thread busy only ${pct(elu)}: GC or other host work held it up${pauses}`;
    remedy = 'host';
  } else {
    let threads = 2;
    while (threads <= 64 && itlBound(stampDelayEstimate(m, threads) ?? NO_DELAY) > limit) {
      threads *= 2;
    }
    // The count goes to the advice, which weighs it against the usable cores.
    if (threads <= 64) found.estimatedThreads = Math.max(found.estimatedThreads ?? 0, threads);
    why = `${moved}; its own stalls held the thread up${pauses}`;
    remedy = 'threads';
  }
  found.check(
    itlBound(delay),
    { limit, near: limit / 2 },
    `stamps up to ${itlBound(delay).toFixed(1)} ms late at p99`,
    `${limit.toFixed(1)} ms`,
    why,
    remedy,
  );
}

/**
 * The client-health verdict (docs/metrics.md, "Client health") from every engine thread's measurements:
 * the run is client-limited when any thread crossed a limit, the process used nearly all the
 * cores it may use, or the sends fell behind. With several workers the headline figures are the
 * worst thread's (CPU: the busiest thread), and the process figure the busiest process's
 * (threads of one process each measured it; shards after `merge` are several processes).
 * With no thread's measurements (every worker terminated or failed) the health says so
 * (`unmeasured`, a note, NaN figures) and claims no verdict of its own: only the records' send
 * rates can still find the sends behind.
 */
export function assessClientHealth(
  measured: ClientHealthMeasurements | readonly ClientHealthMeasurements[],
  rates: {
    /** Open loop: sends per second the schedule asked for (from `scheduledAt`). */
    intendedRatePerS?: number;
    /** Open loop: sends per second that happened (from `sentAt`). */
    achievedRatePerS?: number;
    /** A concurrency cap held sends back on purpose, so a shortfall is not the client's. */
    capped?: boolean;
  } & MeasuredLatency,
): ClientHealth {
  const list = Array.isArray(measured) ? measured : [measured as ClientHealthMeasurements];
  const judged = list.map((m) => threadHealth(m, rates));
  const threads = judged.map((j) => j.health);
  // No thread at all (every worker terminated or failed): the thread figures are unknown, NaN.
  const worst = (pick: (t: ThreadHealth) => number) =>
    threads.length > 0 ? Math.max(...threads.map(pick)) : Number.NaN;
  const events = list.reduce((n, m) => n + m.tokenEvents, 0);
  const coalesced = list.reduce((n, m) => n + m.coalescedTokenEvents, 0);
  const named = (lines: string[] = [], i: number) =>
    threads.length === 1 ? lines : lines.map((r) => `worker ${i}: ${r}`);
  const found = new Findings();
  found.reasons.push(...threads.flatMap((t, i) => named(t.reasons, i)));
  found.causes.push(...threads.flatMap((t, i) => named(t.causes, i)));
  for (const j of judged) {
    for (const r of j.remedies) found.remedies.add(r);
    if (j.estimatedThreads !== undefined) {
      found.estimatedThreads = Math.max(found.estimatedThreads ?? 0, j.estimatedThreads);
    }
  }
  found.notes.push(...threads.flatMap((t, i) => named(t.notes, i)));
  found.near = threads.some((t) => t.nearLimit);
  const busiest = threads.reduce<ThreadHealth['cpu']>(
    (a, t) => (a.utilisation >= t.cpu.utilisation ? a : t.cpu),
    threads[0]?.cpu ?? { userS: Number.NaN, systemS: Number.NaN, utilisation: Number.NaN },
  );
  const elu = threads.map((t) => t.eventLoopUtilisation).filter((u) => u !== undefined);
  const health: ClientHealth = {
    eventLoopDelayMs: {
      p50: worst((t) => t.eventLoopDelayMs.p50),
      p99: worst((t) => t.eventLoopDelayMs.p99),
      max: worst((t) => t.eventLoopDelayMs.max),
    },
    ...(elu.length > 0 ? { eventLoopUtilisation: Math.max(...elu) } : {}),
    cpu: busiest,
    coalescedEventShare: events > 0 ? coalesced / events : threads.length > 0 ? 0 : Number.NaN,
    ...worstStampDelay(threads),
    clientLimited: false,
    reasons: found.reasons,
  };
  const processCpu = busiestProcess(list);
  if (processCpu) {
    health.processCpu = processCpu;
    found.check(
      processCpu.share,
      CLIENT_HEALTH_LIMITS.processCpuShare,
      `client CPU ${pct(processCpu.share, CLIENT_HEALTH_LIMITS.processCpuShare.limit)} of ${cores(processCpu.usableCores)} (all threads)`,
      pct(CLIENT_HEALTH_LIMITS.processCpuShare.limit),
      'its threads competed for those cores, so stream events were stamped late',
      'cores',
    );
  }
  const slips = list.flatMap((m) => m.sendSlipMs);
  if (slips.length > 0) {
    const slip = new SampleSet();
    for (const s of slips) slip.add(s);
    health.sendSlipMs = slip.describe();
    const limits = CLIENT_HEALTH_LIMITS.sendSlipP99Ms;
    found.check(
      health.sendSlipMs.p99,
      limits,
      `send slip p99 ${health.sendSlipMs.p99.toFixed(1)} ms`,
      `${limits.limit} ms`,
      'arrivals went out late, so the offered load was lower',
      'threads',
    );
  }
  if (threads.length === 0) {
    health.unmeasured = true;
    found.notes.push(
      'no engine thread reported its measurements (each worker terminated or failed before its end): whether the client limited this run is unknown',
    );
  }
  if (rates.intendedRatePerS !== undefined) {
    health.intendedRatePerS = rates.intendedRatePerS;
    health.achievedRatePerS = rates.achievedRatePerS;
    const achieved = rates.achievedRatePerS ?? 0;
    if (!rates.capped) {
      found.check(
        achieved / rates.intendedRatePerS,
        CLIENT_HEALTH_LIMITS.achievedRateShare,
        `achieved send rate ${achieved.toFixed(2)}/s`,
        `${pct(CLIENT_HEALTH_LIMITS.achievedRateShare.limit)} of the intended ${rates.intendedRatePerS.toFixed(2)}/s`,
        'the client sent fewer arrivals than the schedule asked',
        'threads',
      );
    }
    const gapMs = (1000 / rates.intendedRatePerS) * list.length;
    if (list.length > 0 && gapMs < TIMER_GRANULARITY_MS) {
      found.notes.push(
        `at ${rates.intendedRatePerS.toFixed(0)} requests/s each engine thread's arrivals are ${gapMs.toFixed(3)} ms apart, under the ~${TIMER_GRANULARITY_MS} ms timer granularity: they go out in bursts of about ${Math.round(TIMER_GRANULARITY_MS / gapMs)} per wake-up, each up to ~${TIMER_GRANULARITY_MS} ms late (the send slip), while the rate holds over any window of a few ms; more --workers spread them`,
      );
    }
  }
  const { poolWaitP50Ms, ttftP50Ms } = rates;
  if (
    poolWaitP50Ms !== undefined &&
    ttftP50Ms !== undefined &&
    ttftP50Ms > 0 &&
    poolWaitP50Ms >= POOL_WAIT_LIMIT.minMs
  ) {
    found.check(
      poolWaitP50Ms / ttftP50Ms,
      POOL_WAIT_LIMIT,
      `pool wait p50 ${poolWaitP50Ms.toFixed(1)} ms, ${pct(poolWaitP50Ms / ttftP50Ms, POOL_WAIT_LIMIT.limit)} of TTFT p50 ${ttftP50Ms.toFixed(1)} ms`,
      `${pct(POOL_WAIT_LIMIT.limit)}`,
      "requests waited in the client's pool for a free connection, outside TTFT but inside user TTFT, so the server saw fewer at once than asked",
      'pool',
    );
  }
  const preopened = mergePreopened(list.map((m) => m.preopened));
  if (preopened) health.preopened = preopened;
  if (found.notes.length > 0) health.notes = found.notes;
  if (threads.length > 1) health.workers = threads;
  health.clientLimited = found.reasons.length > 0;
  health.nearLimit = found.near;
  if (health.clientLimited) {
    health.causes = found.causes;
    health.advice = clientHealthAdvice(
      found.remedies,
      Math.max(1, list.length),
      health.processCpu?.usableCores ?? list.find((m) => m.usableCores)?.usableCores,
      found.estimatedThreads,
    );
  }
  return health;
}

/**
 * The busiest process's CPU over the cores it may use, from the threads that measured it (each
 * thread of a process measured the same process CPU over nearly the same window); undefined when
 * no thread measured its usable cores (older results) or ran too briefly to judge.
 */
function busiestProcess(
  list: readonly ClientHealthMeasurements[],
): ClientHealth['processCpu'] | undefined {
  let busiest: ClientHealth['processCpu'] | undefined;
  for (const m of list) {
    if (m.usableCores === undefined || m.usableCores < 1 || m.wallS < MIN_CPU_WALL_S) continue;
    const share = (m.cpuUserS + m.cpuSystemS) / m.wallS / m.usableCores;
    if (!busiest || share > busiest.share) busiest = { share, usableCores: m.usableCores };
  }
  return busiest;
}

/** The headline stamp delay and pauses: the thread whose stamps were latest. */
function worstStampDelay(threads: ThreadHealth[]): Pick<ThreadHealth, 'stampDelayMs' | 'gcPauses'> {
  let worst: ThreadHealth | undefined;
  for (const t of threads) {
    if (
      t.stampDelayMs &&
      (!worst?.stampDelayMs || t.stampDelayMs.p99Ms > worst.stampDelayMs.p99Ms)
    ) {
      worst = t;
    }
  }
  return worst?.stampDelayMs
    ? { stampDelayMs: worst.stampDelayMs, ...(worst.gcPauses ? { gcPauses: worst.gcPauses } : {}) }
    : {};
}

function threadHealth(
  measured: ClientHealthMeasurements,
  latency: MeasuredLatency,
): { health: ThreadHealth; remedies: ReadonlySet<Remedy>; estimatedThreads?: number } {
  const limits = CLIENT_HEALTH_LIMITS;
  const found = new Findings();
  const cpuS = measured.threadCpuS ?? measured.cpuUserS + measured.cpuSystemS;
  const utilisation = measured.wallS > 0 ? cpuS / measured.wallS : 0;
  const delayP99 = measured.eventLoopDelayMs.p99;
  found.check(
    delayP99,
    limits.eventLoopDelayP99Ms,
    `event-loop delay p99 ${delayP99.toFixed(1)} ms`,
    `${limits.eventLoopDelayP99Ms.limit} ms`,
    'stream events were stamped late',
    // An idle loop's delay is not its load's (IDLE_LOOP_UTILISATION).
    (measured.eventLoopUtilisation ?? 1) < IDLE_LOOP_UTILISATION ? 'host' : 'threads',
  );
  const stampDelay = stampDelayEstimate(measured);
  if (stampDelay && measured.wallS >= MIN_STAMP_WALL_S) {
    stampDelayFinding(measured, stampDelay, latency, found);
  }
  if (measured.wallS >= MIN_CPU_WALL_S) {
    found.check(
      utilisation,
      limits.cpuUtilisation,
      `client CPU ${pct(utilisation, limits.cpuUtilisation.limit)} of one core (${measured.threadCpuS !== undefined ? 'one thread' : 'the process'})`,
      pct(limits.cpuUtilisation.limit),
      'the thread was too busy to read its streams on time',
      'threads',
    );
  }
  const health: ThreadHealth = {
    eventLoopDelayMs: measured.eventLoopDelayMs,
    ...(measured.eventLoopUtilisation !== undefined
      ? { eventLoopUtilisation: measured.eventLoopUtilisation }
      : {}),
    cpu: {
      userS: measured.cpuUserS,
      systemS: measured.cpuSystemS,
      ...(measured.threadCpuS !== undefined ? { threadS: measured.threadCpuS } : {}),
      utilisation,
    },
    coalescedEventShare:
      measured.tokenEvents > 0 ? measured.coalescedTokenEvents / measured.tokenEvents : 0,
    ...(stampDelay ? { stampDelayMs: stampDelay } : {}),
    ...(measured.gcPauses ? { gcPauses: measured.gcPauses } : {}),
    clientLimited: found.reasons.length > 0,
    nearLimit: found.near,
    reasons: found.reasons,
    ...(found.causes.length > 0 ? { causes: found.causes } : {}),
    ...(found.notes.length > 0 ? { notes: found.notes } : {}),
  };
  return {
    health,
    remedies: found.remedies,
    ...(found.estimatedThreads !== undefined ? { estimatedThreads: found.estimatedThreads } : {}),
  };
}

/** Several threads' pre-opened connections as one: counts add, the mean is weighted, maxima take the larger. */
export function mergePreopened(
  parts: readonly (PreopenedConnections | undefined)[],
): PreopenedConnections | undefined {
  let merged: PreopenedConnections | undefined;
  for (const p of parts) {
    if (!p) continue;
    if (!merged) {
      merged = { ...p };
      continue;
    }
    const a = merged.connections - merged.failed;
    const b = p.connections - p.failed;
    merged.setupMsMean = a + b > 0 ? (merged.setupMsMean * a + p.setupMsMean * b) / (a + b) : 0;
    merged.setupMsMax = Math.max(merged.setupMsMax, p.setupMsMax);
    merged.connections += p.connections;
    merged.failed += p.failed;
  }
  return merged;
}
