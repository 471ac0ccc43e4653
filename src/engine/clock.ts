import { performance } from 'node:perf_hooks';

/**
 * The run's monotonic clock. Times are integer microseconds since the run's origin, so records
 * can carry exact deltas; wall-clock time is read once, for the manifest.
 */
export interface RunClock {
  /** Microseconds since the origin, rounded to an integer. */
  nowUs(): number;
  /** Wall-clock time of the origin, as an ISO string. */
  readonly originIso: string;
}

export function createRunClock(): RunClock {
  const origin = performance.now();
  const originIso = new Date(Date.now()).toISOString();
  return {
    nowUs: () => Math.round((performance.now() - origin) * 1000),
    originIso,
  };
}

/** Microseconds to milliseconds (exactly representable to the microsecond for any run length). */
export function usToMs(us: number): number {
  return us / 1000;
}
