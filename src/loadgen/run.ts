import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import {
  monitorEventLoopDelay,
  type PerformanceEntry,
  PerformanceObserver,
  performance,
} from 'node:perf_hooks';
import { headerProblem, splitServerUrl } from '../backends/request.js';
import type { RequestSpec } from '../backends/types.js';
import { UsageError } from '../errors.js';
import type { LoadSpec } from '../load.js';
import { proxyFor } from '../proxy.js';
import type { ClientHealthMeasurements, RequestRecord } from '../record.js';
import { tlsConnectOptions, tlsConnector } from '../tls.js';
import { arrivalScheduleForLoad } from '../workload/arrivals.js';
import {
  type CallGraph,
  CallGraphRun,
  type Conversation,
  type ConversationWorkload,
  type DueCall,
  SESSION_ID_STRIDE,
  type TurnOutcome,
} from '../workload/conversations.js';
import { createRunClock, type RunClock } from './clock.js';
import { FINE_MIN_WAIT_MS, FINE_WAIT_MS, FineTimer, startFineTimer } from './fineTimer.js';
import { H1Pool } from './h1.js';
import { chooseProtocol, H2Pool } from './h2.js';
import { yieldHelperThreads } from './helperThreads.js';
import {
  executeRequest,
  InFlight,
  type PendingRequest,
  ReadTracker,
  type RequestDispatcher,
  type RequestRoute,
  startRequest,
  type TargetConfig,
} from './http.js';
import {
  notePreopened,
  preopenedConnections,
  preopenedOf,
  type TimedConnector,
  timedConnector,
  tunnelConnector,
  WarmConnector,
} from './phases.js';
import { type IdSequence, idAt, inSequence, type ShardPart, wholeRun } from './shard.js';

/** Sampling interval of the event-loop delay monitor. */
const LOOP_DELAY_RESOLUTION_MS = 2;

export interface LoadgenOptions {
  target: TargetConfig;
  load: LoadSpec;
  /**
   * Measured requests to send (after warm-up); sessions, with `nextSession`. At least one of
   * `requests`, `durationS`.
   */
  requests?: number;
  /** Length of the measurement window in seconds, from the first measured request. */
  durationS?: number;
  /** Requests sent first and recorded as warm-up, not counted (default 0). */
  warmupRequests?: number;
  /** Seeds the arrival schedule. */
  seed: number;
  /** The workload: what request number `id` asks for. */
  nextRequest?: (id: number) => RequestSpec;
  /**
   * A session workload instead (multi-turn chat, agent tasks): the ids, counts and load then
   * count sessions, and each session's requests go out step by step (runSession).
   */
  nextSession?: ConversationWorkload;
  /** Called once per finished request, success or failure, as soon as it finishes. */
  onRecord: (record: RequestRecord) => void;
  /** Stop sending new requests; in-flight ones finish. */
  stopSignal?: AbortSignal;
  /** Abort in-flight requests (they are recorded as `cancelled`). */
  cancelSignal?: AbortSignal;
  /** The run clock; pass one to know its origin before the run starts (for the manifest). */
  clock?: RunClock;
  /**
   * A shard of a larger run (src/loadgen/shard.ts): the request ids this engine sends, in place
   * of `warmupRequests` and `requests` (whose ids are 0..W-1, then W..W+R-1), with `load` being
   * the shard's load.
   */
  ids?: Pick<ShardPart, 'warmup' | 'measured'> & {
    /** The whole run's first measured id: an open loop's duration window opens at its arrival. */
    measureFromId: number;
  };
  /**
   * Start sending when the clock reads this (it waits until then); an open loop's schedule
   * starts exactly here, so shards started on a shared clock keep one schedule.
   */
  startAtUs?: number;
  /** Connections opened beforehand (openConnections); by default runLoadgen opens its own. */
  connections?: Connections;
  /**
   * The open loop's helper timer started beforehand (startFineTimer), as a worker thread does
   * before it says ready; by default runLoadgen starts its own. runLoadgen closes it.
   */
  fineTimer?: FineTimer;
}

/** A run's connection pool, opened and warmed before its clock starts. */
export type Connections = RequestDispatcher & { destroy(): Promise<void> };

/** How long a connection (through a proxy: its tunnel) may take to open: undici's default. */
const CONNECT_TIMEOUT_MS = 10_000;

/** How long an idle connection is kept open (undici's Pool option of the same name). */
const KEEP_ALIVE_TIMEOUT_MS = 60_000;

/**
 * How many connections a load opens before its clock starts: its concurrency (closed loop), its
 * cap (open loop with --max-concurrency), none for an uncapped open loop, whose need is not
 * known. Opening them first keeps a first wave of hundreds of simultaneous connects (the
 * client's own storm, and the server's accept queue) out of the first requests' TTFT.
 */
export function connectionsToWarm(load: LoadSpec): number {
  return load.mode === 'closed' ? load.concurrency : (load.maxConcurrency ?? 0);
}

/**
 * Opens the pool for `target`: HTTP/2 on H2Pool (src/loadgen/h2.ts) where the run's protocol
 * is h2, plain http:// on H1Pool (src/loadgen/h1.ts), anything else on undici's Pool (loaded
 * only then), and warms `connectionsToWarm(load)` connections (streams, on h2) of it.
 */
export async function openConnections(
  target: TargetConfig,
  load: LoadSpec,
  sessions: boolean,
): Promise<Connections> {
  const { origin } = splitServerUrl(target.baseUrl);
  // Sessions bound the requests in flight themselves, and a fan-out step sends several at once.
  const connections = sessions
    ? null
    : load.mode === 'closed'
      ? load.concurrency
      : (load.maxConcurrency ?? null);
  // Decided once for the run, not per request (src/proxy.ts).
  const proxy = proxyFor(origin, target.proxy);
  const protocol =
    target.protocol ??
    (await chooseProtocol(origin, target.http2 ?? 'auto', tlsConnectOptions(target.tls), proxy));
  if (protocol === 'h2') {
    // Streams, not sessions, are bounded by the load: sessions open as the server's
    // stream limit asks.
    const pool = new H2Pool(origin, {
      connections: null,
      ...(target.tls ? { tls: tlsConnectOptions(target.tls) } : {}),
      ...(proxy ? { proxy } : {}),
    });
    await pool.warm(connectionsToWarm(load));
    notePreopened(pool, pool.preopened);
    return pool;
  }
  if (origin.startsWith('http:')) {
    const pool = new H1Pool(origin, {
      connections,
      keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
      ...(proxy ? { proxy } : {}),
    });
    await pool.warm(connectionsToWarm(load));
    notePreopened(pool, pool.preopened);
    return pool;
  }
  const { buildConnector } = await import('undici');
  const tls = tlsConnector(buildConnector, target.tls);
  return await undiciPool(
    origin,
    // Through a proxy, TLS runs end to end inside its CONNECT tunnel, with the run's options.
    proxy ? tunnelConnector(proxy, tls, CONNECT_TIMEOUT_MS) : timedConnector(tls),
    { connections, timeoutMs: target.timeoutMs },
    connectionsToWarm(load),
  );
}

/**
 * undici's Pool on `connector`, with `warm` connections opened before it is returned (as
 * H1Pool.warm does), each socket's set-up timed (src/loadgen/phases.ts).
 */
export async function undiciPool(
  origin: string,
  connector: TimedConnector,
  options: { connections: number | null; timeoutMs: number },
  warm: number,
): Promise<Connections> {
  const { Pool } = await import('undici');
  const warmed = new WarmConnector(connector, origin);
  await warmed.warm(options.connections === null ? warm : Math.min(warm, options.connections));
  const pool = new Pool(origin, {
    connect: warmed.connect,
    connections: options.connections,
    pipelining: 1,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  });
  notePreopened(pool, warmed.preopened);
  // The sockets no client took close with the pool. undici's promise form of destroy calls
  // `this.destroy(err, callback)`: the arguments pass through, or it would recurse.
  const destroy = pool.destroy.bind(pool) as (...args: unknown[]) => Promise<void>;
  return Object.assign(pool, {
    destroy: (...args: unknown[]) => {
      warmed.close();
      return destroy(...args);
    },
  });
}

/** Live counters, for progress display. */
export interface LoadgenProgress {
  sent: number;
  finished: number;
  failed: number;
  inFlight: number;
}

export interface LoadgenResult {
  /** Wall-clock time of the run clock's origin (0 ms in the records). */
  startedAtIso: string;
  stoppedBy: 'plan' | 'signal';
  /** Open loop with a concurrency cap: arrivals still waiting when the run was stopped. */
  unsentRequests: number;
  clientHealth: ClientHealthMeasurements;
}

/**
 * Runs a load against the target and streams each finished request's record to `onRecord`.
 * Closed loop keeps `concurrency` requests in flight; open loop sends on a seeded schedule.
 */
export async function runLoadgen(
  options: LoadgenOptions,
  progress: LoadgenProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 },
): Promise<LoadgenResult> {
  const { target, load } = options;
  const counted = options.ids ? options.ids.measured.count : options.requests;
  if (counted === undefined && options.durationS === undefined) {
    throw new Error('runLoadgen needs requests or durationS');
  }
  const problem = headerProblem(target.headers, target.apiKey);
  if (problem) throw new UsageError([`target: ${problem}`], 'IG_INVALID_HEADER');
  const { prefix } = splitServerUrl(target.baseUrl);
  yieldHelperThreads();
  // The pacer's helper thread starts beside the connects, before the clock (startFineTimer).
  const fineStarting = options.fineTimer ? undefined : startFineTimer(load);
  let pool: Connections;
  try {
    pool =
      options.connections ??
      (await openConnections(target, load, options.nextSession !== undefined));
  } catch (err) {
    void fineStarting?.then((timer) => timer?.close());
    throw err;
  }
  const fine = options.fineTimer ?? (await fineStarting);
  const clock = options.clock ?? createRunClock();
  const reads = new ReadTracker(pool instanceof H1Pool ? pool : undefined);
  // Health is measured from the start: a wait for a shared start instant is not load.
  if (options.startAtUs !== undefined) {
    const start = new StopWaits(clock, options.stopSignal);
    try {
      await start.until(options.startAtUs);
    } finally {
      start.dispose();
    }
  }
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS });
  loopDelay.enable();
  const gc = watchGcPauses();
  const cpuStart = process.cpuUsage();
  const threadCpuStart = threadCpuS();
  const eluStart = performance.eventLoopUtilization();
  const wallStartUs = clock.nowUs();
  const sendSlipMs: number[] = [];
  /** The requests in flight, to time out and cancel (one listener for all, not one per request). */
  const inFlight = new InFlight(clock);

  let stoppedBySignal = options.stopSignal?.aborted ?? false;
  const ids = options.ids ?? {
    ...wholeRun(load, options.warmupRequests ?? 0, options.requests),
    measureFromId: options.warmupRequests ?? 0,
  };
  const durationUs = options.durationS !== undefined ? options.durationS * 1e6 : undefined;
  const request = (id: number, phase: PendingRequest['phase'], scheduledAtUs: number): Unit => ({
    id,
    phase,
    scheduledAtUs,
  });
  const { nextRequest, nextSession } = options;
  if ((nextRequest === undefined) === (nextSession === undefined)) {
    throw new Error('runLoadgen needs exactly one of nextRequest and nextSession');
  }

  /** Closed loop: the next id to send when a user is free at `atUs`; undefined when done. */
  let warmupSent = 0;
  let measuredSent = 0;
  let closedWindowUs: number | undefined;
  const nextClosed = (atUs: number): Unit | undefined => {
    if (stoppedBySignal || requests.failure) return undefined;
    const warmupId = idAt(ids.warmup, warmupSent);
    if (warmupId !== undefined) {
      warmupSent++;
      return request(warmupId, 'warmup', atUs);
    }
    closedWindowUs ??= atUs;
    if (durationUs !== undefined && atUs - closedWindowUs >= durationUs) return undefined;
    const id = idAt(ids.measured, measuredSent);
    if (id === undefined) return undefined;
    measuredSent++;
    return request(id, 'measure', atUs);
  };

  /**
   * Open loop: arrival `k` of the run's schedule, due at `atUs`: this engine's request, another
   * shard's ('skip'), or undefined once nothing more is to be sent.
   */
  const lastWarmup = lastId(ids.warmup);
  const lastMeasured = lastId(ids.measured);
  let openWindowUs: number | undefined;
  const nextOpen = (k: number, atUs: number): Unit | 'skip' | undefined => {
    if (stoppedBySignal || requests.failure) return undefined;
    if (k < ids.measureFromId) {
      if (inSequence(ids.warmup, k)) return request(k, 'warmup', atUs);
      return k > lastWarmup && lastMeasured < ids.measureFromId ? undefined : 'skip';
    }
    if (k === ids.measureFromId) openWindowUs = atUs;
    if (durationUs !== undefined && atUs - (openWindowUs ?? atUs) >= durationUs) return undefined;
    if (k > lastMeasured) return undefined;
    return inSequence(ids.measured, k) ? request(k, 'measure', atUs) : 'skip';
  };

  /** Aborted when a record cannot be written after its user went on (RequestContext.fail). */
  const recordFailed = new AbortController();
  const requests: RequestContext = {
    pool,
    target,
    prefix,
    clock,
    reads,
    inFlight,
    progress,
    onRecord: options.onRecord,
    fail(failure) {
      requests.failure ??= failure;
      recordFailed.abort();
    },
  };
  /** A session's request; its record goes out at once unless `hold` (a session emits its own). */
  const send = async (pending: PendingRequest, hold = false): Promise<RequestRecord> => {
    progress.sent++;
    progress.inFlight++;
    const record = await executeRequest(requests, pending);
    // Its record and the session's next step wait for a turn of their own (afterTurn).
    await nextTurn();
    recordFinished(requests, record, hold);
    return record;
  };
  const startUnit: StartUnit = nextRequest
    ? plainRequests(requests, nextRequest)
    : (unit, done) => {
        // Async, so that a throw building the session is its failure, not the caller's.
        const session = async () =>
          runSession(unit, (nextSession as ConversationWorkload)(unit.id), {
            send,
            emit: options.onRecord,
            stopped: () => stoppedBySignal,
            pause: (atUs) => pauses.until(atUs),
          });
        session().then(
          () => done(undefined),
          (err: unknown) => done({ err }),
        );
      };

  let unsentRequests = 0;
  const onStop = () => {
    stoppedBySignal = true;
  };
  options.stopSignal?.addEventListener('abort', onStop, { once: true });
  const pauses = new StopWaits(clock, options.stopSignal);
  const onCancel = () => {
    inFlight.cancelAll();
  };
  options.cancelSignal?.addEventListener('abort', onCancel, { once: true });
  try {
    try {
      if (load.mode === 'closed') {
        await runClosedLoop(load.concurrency, clock, nextClosed, startUnit);
      } else {
        unsentRequests = await runOpenLoop(
          load,
          options,
          clock,
          options.startAtUs ?? clock.nowUs(),
          nextOpen,
          startUnit,
          sendSlipMs,
          () => stoppedBySignal || requests.failure !== undefined,
          fine,
          recordFailed.signal,
        );
      }
    } finally {
      // The last requests' records wait for their turns (RequestSlot); a turn queued now is
      // served after them.
      await nextTurn();
    }
    if (requests.failure) throw requests.failure.err;
  } finally {
    options.stopSignal?.removeEventListener('abort', onStop);
    options.cancelSignal?.removeEventListener('abort', onCancel);
    pauses.dispose();
    fine?.close();
    loopDelay.disable();
    gc.stop();
    await pool.destroy();
    inFlight.stop();
  }
  const cpu = process.cpuUsage(cpuStart);
  const threadCpuEnd = threadCpuS();
  // The histogram holds whole timer intervals; the delay is what exceeds the resolution.
  const delayMs = (ns: number) =>
    Number.isFinite(ns) ? Math.max(0, ns / 1e6 - LOOP_DELAY_RESOLUTION_MS) : 0;
  const preopened = preopenedConnections(preopenedOf(pool));
  return {
    startedAtIso: clock.originIso,
    stoppedBy: stoppedBySignal ? 'signal' : 'plan',
    unsentRequests,
    clientHealth: {
      eventLoopDelayMs: {
        p50: delayMs(loopDelay.percentile(50)),
        p99: delayMs(loopDelay.percentile(99)),
        max: delayMs(loopDelay.max),
      },
      cpuUserS: cpu.user / 1e6,
      cpuSystemS: cpu.system / 1e6,
      ...(threadCpuStart !== undefined && threadCpuEnd !== undefined
        ? { threadCpuS: threadCpuEnd - threadCpuStart }
        : {}),
      eventLoopUtilisation: performance.eventLoopUtilization(eluStart).utilization,
      wallS: (clock.nowUs() - wallStartUs) / 1e6,
      usableCores: availableParallelism(),
      sendSlipMs,
      tokenEvents: reads.tokenEvents,
      coalescedTokenEvents: reads.coalescedTokenEvents,
      loopStallsMs: loopStalls(loopDelay),
      gcPauses: gc.pauses,
      ...(preopened ? { preopened } : {}),
    },
  };
}

/**
 * The loop-delay histogram as (delay ms, samples) pairs, read at percentiles that close in on the
 * maximum by a quarter-octave a step (50, 57.9, 64.6, ... 99.99...): the tail, where the stalls
 * are, keeps its detail in some 80 pairs. Each step's samples take the step's upper value, so the
 * estimate built on them (stampDelayEstimate) errs long, by less than a step.
 */
function loopStalls(histogram: ReturnType<typeof monitorEventLoopDelay>): [number, number][] {
  const stalls: [number, number][] = [];
  const count = histogram.count;
  let previous = 0;
  for (let step = 0; previous < 100; step++) {
    const remaining = 50 * 2 ** (-step / 4);
    // Past one sample's share the rest is the maximum.
    const percentile = step === 0 ? 50 : remaining * count < 100 ? 100 : 100 - remaining;
    const samples = Math.round(((percentile - previous) / 100) * count);
    const delayMs = Math.max(0, histogram.percentile(percentile) / 1e6 - LOOP_DELAY_RESOLUTION_MS);
    previous = percentile;
    if (samples > 0 && delayMs > 0) stalls.push([Math.round(delayMs * 1000) / 1000, samples]);
  }
  return stalls;
}

/** Counts this thread's garbage-collection pauses from now until `stop`. */
function watchGcPauses(): {
  stop(): void;
  pauses: NonNullable<ClientHealthMeasurements['gcPauses']>;
} {
  const pauses = { count: 0, totalMs: 0, maxMs: 0, over1Ms: 0 };
  const add = (list: { getEntries(): PerformanceEntry[] } | PerformanceEntry[]) => {
    for (const entry of Array.isArray(list) ? list : list.getEntries()) {
      pauses.count++;
      pauses.totalMs += entry.duration;
      pauses.maxMs = Math.max(pauses.maxMs, entry.duration);
      if (entry.duration > 1) pauses.over1Ms++;
    }
  };
  const observer = new PerformanceObserver(add);
  observer.observe({ entryTypes: ['gc'] });
  return {
    pauses,
    stop() {
      // Entries not yet delivered (they come a turn later) are taken now.
      add(observer.takeRecords());
      observer.disconnect();
    },
  };
}

/**
 * Resolves on a later turn of the event loop, one waiter per turn, first come first served.
 * A request finishes inside the read that brought its last event; its record and what follows
 * it (the summary, a session's next step: a hundred microseconds and more) would run before any
 * other read of that turn is stamped, and a closed loop's requests finish in waves: at 256
 * streams a wave held every other stream's events for 50-140 ms (bench:peer's per-event stamp
 * error). With one finished request per turn, libuv polls the sockets between them, so a
 * waiting read is stamped after at most one request's work. A plain request's next one goes out
 * before its turn (RequestSlot), in the read that ended it: a read of the same poll waits for
 * the sends of the answers that ended before it, some tens of microseconds each.
 */
function afterTurn(callback: () => void): void {
  turnWaiters.push(callback);
  if (!turnScheduled) {
    turnScheduled = true;
    setImmediate(serveTurn);
  }
}

/** See afterTurn. */
function nextTurn(): Promise<void> {
  return new Promise(afterTurn);
}

const turnWaiters: (() => void)[] = [];
let turnHead = 0;
let turnScheduled = false;

/** One waiter per turn: an immediate queued from an immediate runs after the next poll. */
function serveTurn(): void {
  const resolve = turnWaiters[turnHead++];
  if (turnHead === turnWaiters.length) {
    turnWaiters.length = 0;
    turnHead = 0;
  } else if (turnHead > 1024 && turnHead * 2 > turnWaiters.length) {
    // Dropped from the front now and then: Array#shift would copy the queue every time.
    turnWaiters.splice(0, turnHead);
    turnHead = 0;
  }
  turnScheduled = turnHead < turnWaiters.length;
  if (turnScheduled) setImmediate(serveTurn);
  resolve?.();
}

/** The last id of a counted sequence (-1 when empty; Infinity when unbounded). */
function lastId(seq: IdSequence): number {
  if (seq.count === undefined) return Number.POSITIVE_INFINITY;
  return seq.count > 0 ? seq.start + (seq.count - 1) * seq.stride : -1;
}

/**
 * Timed waits (a shared start instant, each session's pause between steps) that the stop ends
 * at once, through one abort listener for all of them: a listener per wait put one on the
 * shared stop signal for every session pausing at that moment, past Node's limit of 10 (a
 * MaxListenersExceededWarning) as soon as a dozen sessions were thinking at once.
 */
class StopWaits {
  private readonly wakers = new Set<() => void>();
  private readonly wakeAll = () => {
    for (const wake of this.wakers) wake();
  };

  constructor(
    private readonly clock: RunClock,
    private readonly stop: AbortSignal | undefined,
  ) {
    stop?.addEventListener('abort', this.wakeAll, { once: true });
  }

  /** Waits until the clock reads `atUs` (already past: returns at once), or the stop. */
  async until(atUs: number): Promise<void> {
    for (let leftUs = atUs - this.clock.nowUs(); leftUs > 0 && !this.stop?.aborted; ) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.wakers.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(leftUs / 1000, 1e9));
        this.wakers.add(wake);
      });
      leftUs = atUs - this.clock.nowUs();
    }
  }

  /** Stops listening; a wait still pending ends now rather than hold a timer. */
  dispose(): void {
    this.stop?.removeEventListener('abort', this.wakeAll);
    this.wakeAll();
  }
}

/**
 * CPU seconds of the calling thread (Linux: /proc/thread-self/stat, in 1/100 s ticks), so each
 * worker thread reports its own load; undefined where the system does not say.
 */
function threadCpuS(): number | undefined {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of proc(5), utime and stime, counted from field 3 (state) here.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** What the loops schedule: one request, or one session of a session workload. */
type Unit = Pick<PendingRequest, 'id' | 'phase' | 'scheduledAtUs'>;

/** How a unit (a request, a session) ended: undefined, or what was thrown (a bug, a write). */
type UnitDone = (failure: { err: unknown } | undefined) => void;
/** Starts a unit; `done` is called once it has ended and its records are out. */
type StartUnit = (unit: Unit, done: UnitDone) => void;

/** What sending a request needs, and what counts and writes it. */
interface RequestContext extends RequestRoute {
  progress: LoadgenProgress;
  onRecord: (record: RequestRecord) => void;
  /**
   * A record that could not be written after its user had gone on (RequestSlot): nothing more
   * is sent, and the run fails with it once the requests in flight have ended.
   */
  failure?: { err: unknown };
  /** Sets `failure` (the first) and stops the sending at once. */
  fail(failure: { err: unknown }): void;
}

/**
 * Counts a request as finished and, unless `hold`, writes its record. `left`: its user already
 * went on, and it was counted out of flight then.
 */
function recordFinished(
  c: RequestContext,
  record: RequestRecord,
  hold: boolean,
  left = false,
): void {
  if (!left) c.progress.inFlight--;
  c.progress.finished++;
  if (record.error) c.progress.failed++;
  if (!hold) c.onRecord(record);
}

/**
 * Sends single requests with no promise, async frame or closure of their own. A request lives
 * 1.3 s at an engine's pace, surviving young-generation collections that copy what it holds,
 * and three suspended async frames (the user's loop, the unit, the send) with their promises,
 * reactions and contexts were 1.4 KB of the 5.4 KB a request held (issue 29). A slot's
 * callbacks are made once and the slot is reused, request after request.
 */
function plainRequests(c: RequestContext, nextRequest: (id: number) => RequestSpec): StartUnit {
  const free: RequestSlot[] = [];
  return (unit, done) => (free.pop() ?? new RequestSlot(c, nextRequest, free)).send(unit, done);
}

class RequestSlot {
  private record: RequestRecord | undefined;
  private done: UnitDone | undefined;
  /** The unit's end, called from a microtask once the read that ended its request is parsed. */
  private leaving: UnitDone | undefined;

  constructor(
    private readonly c: RequestContext,
    private readonly nextRequest: (id: number) => RequestSpec,
    private readonly free: RequestSlot[],
  ) {}

  send(unit: Unit, done: UnitDone): void {
    let pending: PendingRequest;
    try {
      pending = {
        id: unit.id,
        phase: unit.phase,
        scheduledAtUs: unit.scheduledAtUs,
        spec: this.nextRequest(unit.id),
      };
    } catch (err) {
      this.free.push(this);
      done({ err });
      return;
    }
    this.done = done;
    const { c } = this;
    c.progress.sent++;
    c.progress.inFlight++;
    startRequest(c, pending, this.finished);
  }

  // An answer's end frees its user at once: the next request goes out when the read that ended
  // this one has been parsed (a microtask: by then the connection is back in the pool where that
  // read held the answer's last bytes; else the request waits for a connection, as any does), as
  // a closed loop's user sends as soon as its answer ends. Its record waits for a turn of its own
  // (afterTurn), so that the reads already waiting are stamped before it is written. Sent on that
  // turn too, a wave's next requests were spread over as many turns, tens of milliseconds at 256
  // streams: fewer requests in flight than the concurrency asked while they waited, and against a
  // server that paces each stream from its request, the streams' events out of phase, read in
  // several times as many wake-ups (docs/benchmarks.md, "engine-paced"). A failed request (refused,
  // unsendable: maybe before any read, and the next one at once again) frees its user only with
  // its record, a turn later: sent at once, a run of such failures would never yield to the loop.
  private readonly finished = (record: RequestRecord): void => {
    this.record = record;
    if (record.error === undefined) {
      this.leaving = this.done;
      this.done = undefined;
      this.c.progress.inFlight--;
      queueMicrotask(this.leave);
    }
    afterTurn(this.recorded);
  };

  private readonly leave = (): void => {
    const leaving = this.leaving as UnitDone;
    this.leaving = undefined;
    leaving(undefined);
  };

  private readonly recorded = (): void => {
    const record = this.record as RequestRecord;
    const done = this.done;
    this.record = undefined;
    this.done = undefined;
    let failure: { err: unknown } | undefined;
    try {
      recordFinished(this.c, record, false, done === undefined);
    } catch (err) {
      failure = { err };
    }
    this.free.push(this);
    if (done) done(failure);
    else if (failure) this.c.fail(failure);
  };
}

interface SessionDriver {
  /** Sends one request and resolves with its record, which it does not emit when `hold`. */
  send(pending: PendingRequest, hold: boolean): Promise<RequestRecord>;
  emit(record: RequestRecord): void;
  /** Send nothing more: a session stops before its next step. */
  stopped(): boolean;
  /** Waits until the run's clock reads `atUs`, or less when the run is stopped. */
  pause(atUs: number): Promise<void>;
}

/**
 * Runs one session (docs/metrics.md, "Sessions"): each step's requests go out together, the
 * next step is built from their answers and sent after its pause, counted from the end of the
 * step's last request. A failed request ends the session. Every record is emitted as its request
 * ends, except the step's last, which waits for the next step to be built, so that the record
 * which ends a session that ran to its end carries `sessionDone`.
 */
async function runSession(unit: Unit, conversation: Conversation, d: SessionDriver): Promise<void> {
  if (conversation.graph) return runCallGraph(unit, conversation.graph, d);
  const base = unit.id * SESSION_ID_STRIDE;
  let index = 0;
  let step = conversation.next();
  let atUs = unit.scheduledAtUs;
  for (let turn = 1; step && step.requests.length > 0; turn++) {
    const fanOut = step.requests.length;
    // Past the ids a session may use, the session is cut (SESSION_ID_STRIDE requests).
    if (index + fanOut > SESSION_ID_STRIDE) return;
    const pendings: PendingRequest[] = step.requests.map((spec, call) => ({
      id: base + index++,
      phase: unit.phase,
      scheduledAtUs: atUs,
      spec,
      session: { sessionId: unit.id, turn, ...(fanOut > 1 ? { call } : {}) },
    }));
    let left = fanOut;
    let held: RequestRecord | undefined;
    const records = await Promise.all(
      pendings.map(async (pending) => {
        const record = await d.send(pending, true);
        // Every record but the step's last to end goes out as it ends.
        if (--left > 0) d.emit(record);
        else held = record;
        return record;
      }),
    );
    const endUs = Math.round(Math.max(...records.map((r) => r.endAt)) * 1000);
    const failed = records.some((r) => r.error !== undefined);
    step =
      failed || d.stopped()
        ? undefined
        : conversation.next(records.map((record, i) => ({ record, answer: pendings[i].answer })));
    const last = held as RequestRecord;
    if (!step && !failed && !d.stopped()) last.sessionDone = true;
    d.emit(last);
    if (!step) return;
    atUs = endUs + Math.round(step.pauseMs * 1000);
    await d.pause(atUs);
    if (d.stopped()) return;
  }
}

/**
 * Runs a session of calls that wait for named calls (an agentic trace; CallGraphRun): each call
 * goes out when it is due, once the last call it waits for has ended plus its delay, whatever
 * the other calls are doing. A failed request ends the session: calls in flight finish, none is
 * sent after. Every record is emitted as its request ends; the one whose end finished the last
 * call carries `sessionDone`.
 */
async function runCallGraph(unit: Unit, graph: CallGraph, d: SessionDriver): Promise<void> {
  const base = unit.id * SESSION_ID_STRIDE;
  const run = new CallGraphRun(graph);
  const outcomes: (TurnOutcome | undefined)[] = [];
  let failed = false;
  // A throw (building a request, writing a record) stops the session's sends, and is the
  // session's failure once every call in flight has ended, as a unit's must be.
  let thrown: { err: unknown } | undefined;
  const send = (due: DueCall): Promise<void> =>
    sendCall(due).catch((err: unknown) => {
      failed = true;
      thrown ??= { err };
    });
  const sendCall = async ({ call: i, atUs }: DueCall): Promise<void> => {
    await d.pause(atUs);
    if (failed || d.stopped()) return;
    const { turn, call } = graph.calls[i];
    const pending: PendingRequest = {
      id: base + i,
      phase: unit.phase,
      scheduledAtUs: atUs,
      spec: graph.request(i, outcomes),
      session: { sessionId: unit.id, turn, call },
    };
    const record = await d.send(pending, true);
    outcomes[i] = { record, ...(pending.answer ? { answer: pending.answer } : {}) };
    if (record.error !== undefined) failed = true;
    const due = failed || d.stopped() ? [] : run.end(i, Math.round(record.endAt * 1000));
    if (run.finished && !failed && !d.stopped()) {
      record.sessionDone = true;
      record.taskToolWaitMs = run.chainWaitMs(i);
    }
    d.emit(record);
    await Promise.all(due.map(send));
  };
  await Promise.all(run.start(unit.scheduledAtUs).map(send));
  if (thrown) throw thrown.err;
}

/** `concurrency` virtual users, each sending its next request as soon as the last finishes. */
function runClosedLoop(
  concurrency: number,
  clock: RunClock,
  nextPending: (scheduledAtUs: number) => Unit | undefined,
  start: StartUnit,
): Promise<void> {
  // A failure (a bug thrown while building a session's next turn, or writing a record) stops
  // every user from sending more, and the loop rejects once those in flight have ended: users
  // left sending after it would meet a destroyed pool and write records of requests never sent.
  return new Promise((resolve, reject) => {
    let failure: { err: unknown } | undefined;
    let users = concurrency;
    // A user whose unit ended starts its next; the users are alike, so one callback serves all.
    const next: UnitDone = (failed) => {
      failure ??= failed;
      let unit: Unit | undefined;
      if (!failure) {
        try {
          unit = nextPending(clock.nowUs());
        } catch (err) {
          failure = { err };
        }
      }
      if (unit) start(unit, next);
      else if (--users === 0) {
        if (failure) reject(failure.err);
        else resolve();
      }
    };
    if (users <= 0) resolve();
    for (let i = 0; i < concurrency; i++) next(undefined);
  });
}

/**
 * Sends on an arrival schedule held against the monotonic clock: every wake-up sends all
 * arrivals that are due, each keeping its own `scheduledAt`, so timer lateness never shifts
 * later arrivals. Arrivals over the concurrency cap wait in a FIFO (their wait is queueDelay).
 * A schedule that ends (a replayed trace: Infinity after its last time) ends the sending.
 * Returns how many arrivals were still waiting when the run was stopped.
 */
function runOpenLoop(
  load: Extract<LoadSpec, { mode: 'open' }>,
  options: LoadgenOptions,
  clock: RunClock,
  startUs: number,
  nextArrival: (k: number, atUs: number) => Unit | 'skip' | undefined,
  startUnit: StartUnit,
  sendSlipMs: number[],
  stopped: () => boolean,
  started: FineTimer | undefined,
  /** Stops the sending as the stop signal does (a record that could not be written). */
  halted: AbortSignal,
): Promise<number> {
  const schedule = arrivalScheduleForLoad(load, options.seed);
  const cap = load.maxConcurrency ?? Number.POSITIVE_INFINITY;
  const waiting: Unit[] = [];
  let inFlight = 0;
  let scheduling = true;
  let timer: NodeJS.Timeout | undefined;
  /**
   * Started by the caller where waits under FINE_WAIT_MS will be common, else here at the first
   * one: a slow schedule may never start its thread.
   */
  let fine = started;
  let ownFine = false;
  const originHrMs = Number(clock.originHrNs) / 1e6;
  let k = 0;
  let nextAtUs = startUs + Math.round(schedule() * 1000);

  // As in the closed loop, a failure stops the sending and rejects once nothing is in flight.
  let failure: { err: unknown } | undefined;
  return new Promise((resolve, reject) => {
    const settleIfDone = () => {
      if (scheduling || inFlight > 0) return;
      if (failure) reject(failure.err);
      else resolve(waiting.length);
    };
    const ended: UnitDone = (failed) => {
      if (failed) {
        failure ??= failed;
        stopScheduling();
      }
      inFlight--;
      const queued = stopped() || failure ? undefined : waiting.shift();
      if (queued) start(queued);
      settleIfDone();
    };
    const start = (unit: Unit) => {
      inFlight++;
      startUnit(unit, ended);
    };
    const stopScheduling = () => {
      scheduling = false;
      if (timer) clearTimeout(timer);
      if (ownFine) fine?.close();
      else fine?.cancel();
      options.stopSignal?.removeEventListener('abort', stopScheduling);
      halted.removeEventListener('abort', stopScheduling);
      settleIfDone();
    };
    options.stopSignal?.addEventListener('abort', stopScheduling, { once: true });
    halted.addEventListener('abort', stopScheduling, { once: true });
    const tick = () => {
      timer = undefined;
      const nowUs = clock.nowUs();
      while (scheduling && nextAtUs <= nowUs) {
        const pending = nextArrival(k++, nextAtUs);
        if (!pending) return stopScheduling();
        if (pending !== 'skip') {
          // Judged over the measured arrivals, as queueDelay and the send rates are: a cold
          // process's first warm-up arrivals go out late, which no measured figure holds.
          if (pending.phase === 'measure') sendSlipMs.push((nowUs - nextAtUs) / 1000);
          if (inFlight < cap) start(pending);
          else waiting.push(pending);
        }
        nextAtUs = startUs + Math.round(schedule() * 1000);
      }
      if (!scheduling) return;
      // The schedule has ended (a trace's last arrival is sent).
      if (nextAtUs === Number.POSITIVE_INFINITY) return stopScheduling();
      const waitMs = (nextAtUs - clock.nowUs()) / 1000;
      if (waitMs < FINE_WAIT_MS && waitMs >= FINE_MIN_WAIT_MS) {
        // The last stretch: setTimeout would fire up to 1.2 ms late (FineTimer).
        if (!fine) {
          fine = new FineTimer();
          ownFine = true;
        }
        fine.onWake = tick;
        if (fine.ready) return fine.at(originHrMs + nextAtUs / 1000);
      }
      // Wakes FINE_WAIT_MS / 2 early when the helper will take the rest. Node fires a timeout
      // over 2^31 - 1 ms at once; a longer gap takes several wake-ups.
      const earlyMs = fine?.ready ? FINE_WAIT_MS / 2 : 0;
      timer = setTimeout(tick, Math.min(1e9, Math.max(0, waitMs - earlyMs)));
    };
    if (stopped()) stopScheduling();
    else tick();
  });
}
