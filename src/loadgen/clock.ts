import { performance } from 'node:perf_hooks';

/**
 * The run's monotonic clock. Times are integer microseconds since the run's origin, so records
 * can carry exact deltas; wall-clock time is read once, for the manifest.
 */
export interface RunClock {
  /** Microseconds since the origin, rounded to an integer (negative before it). */
  nowUs(): number;
  /** A `performance.now()` reading (ms) as microseconds since the origin, as nowUs rounds it. */
  usAt(perfMs: number): number;
  /** Wall-clock time of the origin, as an ISO string. */
  readonly originIso: string;
  /** The origin on process.hrtime's clock (ns), which every thread of the process shares. */
  readonly originHrNs: bigint;
}

/**
 * A clock whose origin is now, `startInMs` from now, an instant of another thread's clock
 * (`originHrNs`: worker threads share their coordinator's origin) or a wall-clock instant
 * (`originEpochMs`: processes on several machines share `--start-at`, as well as their clocks
 * agree). The monotonic clock then runs on; later wall-clock steps do not move it.
 */
export function createRunClock(
  at: { startInMs?: number; originHrNs?: bigint; originEpochMs?: number; originIso?: string } = {},
): RunClock {
  const nowPerf = performance.now();
  const nowHrNs = process.hrtime.bigint();
  let offsetMs = at.startInMs ?? 0;
  if (at.originHrNs !== undefined) offsetMs = Number(at.originHrNs - nowHrNs) / 1e6;
  else if (at.originEpochMs !== undefined) offsetMs = at.originEpochMs - Date.now();
  const origin = nowPerf + offsetMs;
  return {
    nowUs: () => Math.round((performance.now() - origin) * 1000),
    usAt: (perfMs) => Math.round((perfMs - origin) * 1000),
    originIso:
      at.originIso ?? new Date(at.originEpochMs ?? Math.round(Date.now() + offsetMs)).toISOString(),
    originHrNs: nowHrNs + BigInt(Math.round(offsetMs * 1e6)),
  };
}

/** Microseconds to milliseconds (exactly representable to the microsecond for any run length). */
export function usToMs(us: number): number {
  return us / 1000;
}
