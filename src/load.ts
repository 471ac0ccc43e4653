/** The load a run applies; every throughput number is reported next to it (METRICS.md section 3). */
export type LoadSpec =
  | {
      /** Closed loop: a fixed number of requests in flight; each finished one starts the next. */
      mode: 'closed';
      concurrency: number;
    }
  | {
      /** Open loop: requests arrive on a schedule, whether or not earlier ones have finished. */
      mode: 'open';
      /** Intended arrivals per second. */
      rate: number;
      arrival: 'poisson' | 'constant';
      /** Optional cap on requests in flight; arrivals beyond it wait in the client (queueDelay). */
      maxConcurrency?: number;
    };
