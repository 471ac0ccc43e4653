import type { LoadSpec } from '../load.js';
import { arrivalScheduleForLoad } from '../workload/arrivals.js';

/** What a run's hard deadline is computed from (docs/cli.md, "Every run ends"). */
export interface DeadlineInputs {
  load: LoadSpec;
  warmupRequests: number;
  /** Measured requests; undefined when only a duration limits the run. */
  requests?: number;
  durationS?: number;
  /** The per-request limit (`--timeout`). */
  timeoutS: number;
  /** What in-flight requests get after a stop (`--grace`). */
  graceS: number;
  seed: number;
}

/**
 * Seconds from a run's schedule start by which it has ended if every request ended within its
 * timeout: the time to send the planned requests at the load's limit (closed loop: every
 * request of a user taking the whole timeout; open loop: the schedule's last arrival, plus, under
 * a concurrency cap, every queued arrival waiting a whole timeout for a slot), plus one timeout
 * for the last ones in flight, plus the grace period. Past it, something is stuck.
 */
export function runDeadlineS(o: DeadlineInputs): number {
  const { load, timeoutS } = o;
  const requests = o.requests ?? Number.POSITIVE_INFINITY;
  const durationS = o.durationS ?? Number.POSITIVE_INFINITY;
  let sendS: number;
  if (load.mode === 'closed') {
    const rounds = (n: number) => Math.ceil(n / load.concurrency) * timeoutS;
    sendS = rounds(o.warmupRequests) + Math.min(durationS, rounds(requests));
  } else {
    const schedule = arrivalScheduleForLoad(load, o.seed);
    let arrivals = 0;
    let lastS = 0;
    let windowEndS = Number.POSITIVE_INFINITY;
    for (; arrivals < o.warmupRequests + requests; arrivals++) {
      const atS = schedule() / 1000;
      if (arrivals === o.warmupRequests) windowEndS = atS + durationS;
      if (!Number.isFinite(atS) || atS >= windowEndS) break;
      lastS = atS;
    }
    const queuedS =
      load.maxConcurrency !== undefined ? Math.ceil(arrivals / load.maxConcurrency) * timeoutS : 0;
    sendS = lastS + queuedS;
  }
  return sendS + timeoutS + o.graceS;
}
