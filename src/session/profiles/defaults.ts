/**
 * The profiles' defaults, apart from their code so that the command line shows them in its help
 * without loading the profiles (each command loads its own when chosen).
 */

/** `probe prefill` and `probe decode`. */
export const PROBE_DEFAULTS = {
  minInput: 128,
  maxInput: 8192,
  batches: [1, 4, 16],
  input: 64,
  output: 256,
  levels: [1, 2, 4, 8, 16, 32, 64],
  requestsPerPoint: 5,
} as const;

/** `sweep`: the concurrency levels stepped through. */
export const DEFAULT_LEVELS = [1, 4, 16, 64, 128];
