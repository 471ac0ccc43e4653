import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Pool } from 'undici';
import { splitServerUrl } from '../backends/request.js';
import type { RequestSpec } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import type { ClientHealthMeasurements, RequestRecord } from '../record.js';
import { arrivalScheduleForLoad } from '../workload/arrivals.js';
import { createRunClock, type RunClock } from './clock.js';
import { executeRequest, type PendingRequest, ReadTracker, type TargetConfig } from './http.js';

/** Sampling interval of the event-loop delay monitor. */
const LOOP_DELAY_RESOLUTION_MS = 2;

export interface EngineOptions {
  target: TargetConfig;
  load: LoadSpec;
  /** Measured requests to send (after warm-up). At least one of `requests`, `durationS`. */
  requests?: number;
  /** Length of the measurement window in seconds, from the first measured request. */
  durationS?: number;
  /** Requests sent first and recorded as warm-up, not counted. */
  warmupRequests: number;
  /** Seeds the arrival schedule. */
  seed: number;
  /** The workload: what request number `id` asks for. */
  nextRequest: (id: number) => RequestSpec;
  /** Called once per finished request, success or failure, as soon as it finishes. */
  onRecord: (record: RequestRecord) => void;
  /** Stop sending new requests; in-flight ones finish. */
  stopSignal?: AbortSignal;
  /** Abort in-flight requests (they are recorded as `cancelled`). */
  cancelSignal?: AbortSignal;
  /** The run clock; pass one to know its origin before the run starts (for the manifest). */
  clock?: RunClock;
}

/** Live counters, for progress display. */
export interface EngineProgress {
  sent: number;
  finished: number;
  failed: number;
  inFlight: number;
}

export interface EngineResult {
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
export async function runEngine(
  options: EngineOptions,
  progress: EngineProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 },
): Promise<EngineResult> {
  const { target, load } = options;
  if (options.requests === undefined && options.durationS === undefined) {
    throw new Error('runEngine needs requests or durationS');
  }
  const { origin, prefix } = splitServerUrl(target.baseUrl);
  const connections = load.mode === 'closed' ? load.concurrency : (load.maxConcurrency ?? null);
  const pool = new Pool(origin, {
    connections,
    pipelining: 1,
    headersTimeout: target.timeoutMs,
    bodyTimeout: target.timeoutMs,
    keepAliveTimeout: 60_000,
  });
  const clock = options.clock ?? createRunClock();
  const reads = new ReadTracker();
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS });
  loopDelay.enable();
  const cpuStart = process.cpuUsage();
  const sendSlipMs: number[] = [];
  /** Abort functions of the requests in flight (one listener for all, not one per request). */
  const cancellers = new Set<() => void>();

  let nextId = 0;
  let measureStartUs: number | undefined;
  let stoppedBySignal = options.stopSignal?.aborted ?? false;
  let planDone = false;
  const measuredEnd = options.warmupRequests + (options.requests ?? Number.POSITIVE_INFINITY);

  /** The next request to send at `scheduledAtUs`, or undefined once the plan is complete. */
  const nextPending = (scheduledAtUs: number): PendingRequest | undefined => {
    if (planDone || stoppedBySignal) return undefined;
    if (nextId >= measuredEnd) {
      planDone = true;
      return undefined;
    }
    const phase = nextId < options.warmupRequests ? 'warmup' : 'measure';
    if (phase === 'measure') {
      measureStartUs ??= scheduledAtUs;
      if (
        options.durationS !== undefined &&
        scheduledAtUs - measureStartUs >= options.durationS * 1e6
      ) {
        planDone = true;
        return undefined;
      }
    }
    const id = nextId++;
    return { id, phase, scheduledAtUs, spec: options.nextRequest(id) };
  };

  const send = async (pending: PendingRequest): Promise<void> => {
    progress.sent++;
    progress.inFlight++;
    const record = await executeRequest(pool, target, prefix, pending, clock, reads, cancellers);
    progress.inFlight--;
    progress.finished++;
    if (record.error) progress.failed++;
    options.onRecord(record);
  };

  let unsentRequests = 0;
  const onStop = () => {
    stoppedBySignal = true;
  };
  options.stopSignal?.addEventListener('abort', onStop, { once: true });
  const onCancel = () => {
    for (const cancelRequest of cancellers) cancelRequest();
  };
  options.cancelSignal?.addEventListener('abort', onCancel, { once: true });
  try {
    if (load.mode === 'closed') {
      await runClosedLoop(load.concurrency, clock, nextPending, send);
    } else {
      unsentRequests = await runOpenLoop(
        load,
        options,
        clock,
        nextPending,
        send,
        sendSlipMs,
        () => stoppedBySignal,
      );
    }
  } finally {
    options.stopSignal?.removeEventListener('abort', onStop);
    options.cancelSignal?.removeEventListener('abort', onCancel);
    loopDelay.disable();
    await pool.destroy();
  }
  const cpu = process.cpuUsage(cpuStart);
  // The histogram holds whole timer intervals; the delay is what exceeds the resolution.
  const delayMs = (ns: number) =>
    Number.isFinite(ns) ? Math.max(0, ns / 1e6 - LOOP_DELAY_RESOLUTION_MS) : 0;
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
      wallS: clock.nowUs() / 1e6,
      sendSlipMs,
      tokenEvents: reads.tokenEvents,
      coalescedTokenEvents: reads.coalescedTokenEvents,
    },
  };
}

/** `concurrency` virtual users, each sending its next request as soon as the last finishes. */
async function runClosedLoop(
  concurrency: number,
  clock: RunClock,
  nextPending: (scheduledAtUs: number) => PendingRequest | undefined,
  send: (pending: PendingRequest) => Promise<void>,
): Promise<void> {
  const user = async () => {
    for (;;) {
      const pending = nextPending(clock.nowUs());
      if (!pending) return;
      await send(pending);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, user));
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
  options: EngineOptions,
  clock: RunClock,
  nextPending: (scheduledAtUs: number) => PendingRequest | undefined,
  send: (pending: PendingRequest) => Promise<void>,
  sendSlipMs: number[],
  stopped: () => boolean,
): Promise<number> {
  const schedule = arrivalScheduleForLoad(load, options.seed);
  const cap = load.maxConcurrency ?? Number.POSITIVE_INFINITY;
  const startUs = clock.nowUs();
  const waiting: PendingRequest[] = [];
  let inFlight = 0;
  let scheduling = true;
  let timer: NodeJS.Timeout | undefined;
  let nextAtUs = startUs + Math.round(schedule() * 1000);

  return new Promise((resolve) => {
    const settleIfDone = () => {
      if (scheduling || inFlight > 0) return;
      resolve(waiting.length);
    };
    const start = (pending: PendingRequest) => {
      inFlight++;
      void send(pending).then(() => {
        inFlight--;
        const queued = stopped() ? undefined : waiting.shift();
        if (queued) start(queued);
        settleIfDone();
      });
    };
    const stopScheduling = () => {
      scheduling = false;
      if (timer) clearTimeout(timer);
      options.stopSignal?.removeEventListener('abort', stopScheduling);
      settleIfDone();
    };
    options.stopSignal?.addEventListener('abort', stopScheduling, { once: true });
    const tick = () => {
      timer = undefined;
      const nowUs = clock.nowUs();
      while (scheduling && nextAtUs <= nowUs) {
        const pending = nextPending(nextAtUs);
        if (!pending) return stopScheduling();
        sendSlipMs.push((nowUs - nextAtUs) / 1000);
        if (inFlight < cap) start(pending);
        else waiting.push(pending);
        nextAtUs = startUs + Math.round(schedule() * 1000);
      }
      if (!scheduling) return;
      // The schedule has ended (a trace's last arrival is sent).
      if (nextAtUs === Number.POSITIVE_INFINITY) return stopScheduling();
      // Node fires a timeout over 2^31 - 1 ms at once; a longer gap takes several wake-ups.
      const waitMs = Math.min(1e9, Math.max(0, (nextAtUs - clock.nowUs()) / 1000));
      timer = setTimeout(tick, waitMs);
    };
    if (stopped()) stopScheduling();
    else tick();
  });
}
