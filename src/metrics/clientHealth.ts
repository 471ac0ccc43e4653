import type { ClientHealthMeasurements } from '../record.js';
import { type Distribution, SampleSet } from './distribution.js';

/**
 * Limits past which the client, not the server, may be what the numbers measure. Chosen so that
 * timestamps stay well inside the 1 ms accuracy the tests hold the client to in normal runs.
 */
export const CLIENT_HEALTH_LIMITS = {
  /** Event-loop delay p99 of any engine thread: a busy loop timestamps stream events late. */
  eventLoopDelayP99Ms: 10,
  /** Open-loop send slip p99: arrivals went out late, so the offered load was lower. */
  sendSlipP99Ms: 10,
  /** Share of one core used by any engine thread (the process, where threads are not told apart). */
  cpuUtilisation: 0.9,
  /** Open loop: achieved send rate below this share of the intended rate. */
  achievedRateShare: 0.95,
} as const;

/** Gaps between one thread's arrivals below this go out in bursts: Node's timers tick in 1 ms. */
const TIMER_GRANULARITY_MS = 1;

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
  clientLimited: boolean;
  /** Why `clientLimited` is set, one line per limit crossed. */
  reasons: string[];
}

export interface ClientHealth extends ThreadHealth {
  sendSlipMs?: Distribution;
  intendedRatePerS?: number;
  achievedRatePerS?: number;
  /** Conditions worth knowing that are not limits (arrivals sent in timer bursts). */
  notes?: string[];
  /** One entry per worker thread, when the run used more than one. */
  workers?: ThreadHealth[];
}

/**
 * The client-health verdict (docs/metrics.md, "Client health") from every engine thread's measurements:
 * the run is client-limited when any thread crossed a limit, or the sends fell behind.
 * With several workers the headline figures are the worst thread's (CPU: the busiest thread).
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
  },
): ClientHealth {
  const list = Array.isArray(measured) ? measured : [measured as ClientHealthMeasurements];
  const threads = list.map(threadHealth);
  const worst = (pick: (t: ThreadHealth) => number) => Math.max(...threads.map(pick));
  const events = list.reduce((n, m) => n + m.tokenEvents, 0);
  const coalesced = list.reduce((n, m) => n + m.coalescedTokenEvents, 0);
  const reasons =
    threads.length === 1
      ? [...threads[0].reasons]
      : threads.flatMap((t, i) => t.reasons.map((r) => `worker ${i}: ${r}`));
  const busiest = threads.reduce((a, b) => (b.cpu.utilisation > a.cpu.utilisation ? b : a));
  const elu = threads.map((t) => t.eventLoopUtilisation).filter((u) => u !== undefined);
  const health: ClientHealth = {
    eventLoopDelayMs: {
      p50: worst((t) => t.eventLoopDelayMs.p50),
      p99: worst((t) => t.eventLoopDelayMs.p99),
      max: worst((t) => t.eventLoopDelayMs.max),
    },
    ...(elu.length > 0 ? { eventLoopUtilisation: Math.max(...elu) } : {}),
    cpu: busiest.cpu,
    coalescedEventShare: events > 0 ? coalesced / events : 0,
    clientLimited: false,
    reasons,
  };
  const slips = list.flatMap((m) => m.sendSlipMs);
  if (slips.length > 0) {
    const slip = new SampleSet();
    for (const s of slips) slip.add(s);
    health.sendSlipMs = slip.describe();
    if (health.sendSlipMs.p99 > CLIENT_HEALTH_LIMITS.sendSlipP99Ms) {
      reasons.push(
        `send slip p99 ${health.sendSlipMs.p99.toFixed(1)} ms > ${CLIENT_HEALTH_LIMITS.sendSlipP99Ms} ms: arrivals went out late`,
      );
    }
  }
  if (rates.intendedRatePerS !== undefined) {
    health.intendedRatePerS = rates.intendedRatePerS;
    health.achievedRatePerS = rates.achievedRatePerS;
    const achieved = rates.achievedRatePerS ?? 0;
    const share = CLIENT_HEALTH_LIMITS.achievedRateShare;
    if (!rates.capped && achieved < rates.intendedRatePerS * share) {
      reasons.push(
        `achieved send rate ${achieved.toFixed(2)}/s < ${share * 100}% of the intended ${rates.intendedRatePerS.toFixed(2)}/s`,
      );
    }
    const gapMs = (1000 / rates.intendedRatePerS) * list.length;
    if (gapMs < TIMER_GRANULARITY_MS) {
      health.notes = [
        `at ${rates.intendedRatePerS.toFixed(0)} requests/s each engine thread's arrivals are ${gapMs.toFixed(3)} ms apart, under the ~${TIMER_GRANULARITY_MS} ms timer granularity: they go out in bursts of about ${Math.round(TIMER_GRANULARITY_MS / gapMs)} per wake-up, each up to ~${TIMER_GRANULARITY_MS} ms late (the send slip), while the rate holds over any window of a few ms; more --workers spread them`,
      ];
    }
  }
  if (threads.length > 1) health.workers = threads;
  health.clientLimited = reasons.length > 0;
  return health;
}

function threadHealth(measured: ClientHealthMeasurements): ThreadHealth {
  const limits = CLIENT_HEALTH_LIMITS;
  const reasons: string[] = [];
  const cpuS = measured.threadCpuS ?? measured.cpuUserS + measured.cpuSystemS;
  const utilisation = measured.wallS > 0 ? cpuS / measured.wallS : 0;
  if (measured.eventLoopDelayMs.p99 > limits.eventLoopDelayP99Ms) {
    reasons.push(
      `event-loop delay p99 ${measured.eventLoopDelayMs.p99.toFixed(1)} ms > ${limits.eventLoopDelayP99Ms} ms: stream events were timestamped late`,
    );
  }
  // Thread CPU is counted in 10 ms ticks: over less than a second the share is too coarse to judge.
  if (measured.wallS >= 1 && utilisation > limits.cpuUtilisation) {
    reasons.push(
      `client CPU ${(utilisation * 100).toFixed(0)}% of one core > ${limits.cpuUtilisation * 100}%`,
    );
  }
  return {
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
    clientLimited: reasons.length > 0,
    reasons,
  };
}
