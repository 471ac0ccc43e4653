import type { ClientHealthMeasurements } from '../record.js';
import { type Distribution, SampleSet } from './distribution.js';

/**
 * Limits past which the client, not the server, may be what the numbers measure. Chosen so that
 * timestamps stay well inside the 1 ms accuracy the tests hold the client to in normal runs.
 */
export const CLIENT_HEALTH_LIMITS = {
  /** Event-loop delay p99: a busy loop timestamps stream events late. */
  eventLoopDelayP99Ms: 10,
  /** Open-loop send slip p99: arrivals went out late, so the offered load was lower. */
  sendSlipP99Ms: 10,
  /** Share of one core used by the client process. */
  cpuUtilisation: 0.9,
  /** Open loop: achieved send rate below this share of the intended rate. */
  achievedRateShare: 0.95,
} as const;

export interface ClientHealth {
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  cpu: { userS: number; systemS: number; utilisation: number };
  sendSlipMs?: Distribution;
  intendedRatePerS?: number;
  achievedRatePerS?: number;
  /** Share of token events that arrived in one network read with their predecessor. */
  coalescedEventShare: number;
  clientLimited: boolean;
  /** Why `clientLimited` is set, one line per limit crossed. */
  reasons: string[];
}

export function assessClientHealth(
  measured: ClientHealthMeasurements,
  rates: {
    /** Open loop: sends per second the schedule asked for (from `scheduledAt`). */
    intendedRatePerS?: number;
    /** Open loop: sends per second that happened (from `sentAt`). */
    achievedRatePerS?: number;
    /** A concurrency cap held sends back on purpose, so a shortfall is not the client's. */
    capped?: boolean;
  },
): ClientHealth {
  const limits = CLIENT_HEALTH_LIMITS;
  const reasons: string[] = [];
  const utilisation =
    measured.wallS > 0 ? (measured.cpuUserS + measured.cpuSystemS) / measured.wallS : 0;
  const health: ClientHealth = {
    eventLoopDelayMs: measured.eventLoopDelayMs,
    cpu: { userS: measured.cpuUserS, systemS: measured.cpuSystemS, utilisation },
    coalescedEventShare:
      measured.tokenEvents > 0 ? measured.coalescedTokenEvents / measured.tokenEvents : 0,
    clientLimited: false,
    reasons,
  };
  if (measured.eventLoopDelayMs.p99 > limits.eventLoopDelayP99Ms) {
    reasons.push(
      `event-loop delay p99 ${measured.eventLoopDelayMs.p99.toFixed(1)} ms > ${limits.eventLoopDelayP99Ms} ms: stream events were timestamped late`,
    );
  }
  if (utilisation > limits.cpuUtilisation) {
    reasons.push(
      `client CPU ${(utilisation * 100).toFixed(0)}% of one core > ${limits.cpuUtilisation * 100}%`,
    );
  }
  if (measured.sendSlipMs.length > 0) {
    const slip = new SampleSet();
    for (const s of measured.sendSlipMs) slip.add(s);
    health.sendSlipMs = slip.describe();
    if (health.sendSlipMs.p99 > limits.sendSlipP99Ms) {
      reasons.push(
        `send slip p99 ${health.sendSlipMs.p99.toFixed(1)} ms > ${limits.sendSlipP99Ms} ms: arrivals went out late`,
      );
    }
  }
  if (rates.intendedRatePerS !== undefined) {
    health.intendedRatePerS = rates.intendedRatePerS;
    health.achievedRatePerS = rates.achievedRatePerS;
    const achieved = rates.achievedRatePerS ?? 0;
    if (!rates.capped && achieved < rates.intendedRatePerS * limits.achievedRateShare) {
      reasons.push(
        `achieved send rate ${achieved.toFixed(2)}/s < ${limits.achievedRateShare * 100}% of the intended ${rates.intendedRatePerS}/s`,
      );
    }
  }
  health.clientLimited = reasons.length > 0;
  return health;
}
