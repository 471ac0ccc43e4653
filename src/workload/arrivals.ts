import { createRng } from './rng.js';

export type ArrivalProcess = 'poisson' | 'constant';

/**
 * Arrival times in ms from the start of sending, for an open-loop run: a seeded Poisson process
 * (exponential gaps) or a constant rate. Absolute times, so a late timer never shifts later
 * arrivals (no cumulative drift).
 */
export function createArrivalSchedule(
  ratePerS: number,
  process: ArrivalProcess,
  seed: number,
): () => number {
  const rng = createRng(seed);
  const meanGapMs = 1000 / ratePerS;
  let index = 0;
  let at = 0;
  return () => {
    if (process === 'constant') return index++ * meanGapMs;
    // The first request goes out at once, as in vLLM and GuideLLM.
    if (index++ > 0) at += rng.exponential(meanGapMs);
    return at;
  };
}
