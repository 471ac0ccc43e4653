/**
 * Issue 30's simulator with hidden, perturbed constants (an L40S with Llama-3-8B), "measured" in
 * virtual time so that a calibration's truth is exact: shared by test/unit/sim/calibrate.test.ts
 * and bench/calibrate.ts, which must measure it alike.
 */
import type { RequestRecord } from '../../src/record.js';
import { pointFromRecords } from '../../src/sim/calibrate.js';
import { EngineCluster } from '../../src/sim/cluster.js';
import type { EngineModelOptions } from '../../src/sim/engineModel.js';
import { resolveEngine, type SimEngineSettings } from '../../src/sim/options.js';
import { simulateRun } from '../../src/sim/virtual.js';

/** The hidden constants. */
export const HIDDEN = {
  mbu: 0.55,
  mfu: 0.4,
  stepOverheadMs: 4,
  perSeqOverheadUs: 40,
  frontendLatencyMs: 6,
};

/**
 * calibrate's flags for the hidden engine with prefix caching, every hidden constant held but
 * the MFU: a fit of `mfu` alone.
 */
export const HOLD_ALL_BUT_MFU = {
  model: 'llama-3-8b',
  gpu: 'l40s',
  enablePrefixCaching: true,
  mbu: HIDDEN.mbu,
  stepOverheadMs: HIDDEN.stepOverheadMs,
  perSeqOverheadUs: HIDDEN.perSeqOverheadUs,
  frontendLatencyMs: HIDDEN.frontendLatencyMs,
};

/** Llama-3-8B on an L40S with these settings; throws on any problem. */
export function l40sEngine(settings: SimEngineSettings): EngineModelOptions {
  const r = resolveEngine({ model: 'llama-3-8b', gpu: 'l40s', ...settings });
  if (!r.engine || r.problems.length > 0) throw new Error(r.problems.join('; '));
  return r.engine;
}

/**
 * A closed-loop run of `engine` (by default the hidden one), lengths spread +-20 % around the
 * given ones by a seeded generator, as a calibration point.
 */
export function measurePerturbed(
  concurrency: number,
  requests: number,
  input: number,
  output: number,
  engine: EngineModelOptions = l40sEngine(HIDDEN),
) {
  let x = 7 + concurrency * 31 + input;
  const spread = (n: number) => {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    return Math.round(n * (0.8 + (0.4 * x) / 0x7fffffff));
  };
  const lengths = Array.from({ length: requests }, () => [spread(input), spread(output)]);
  const records: RequestRecord[] = [];
  const load = { mode: 'closed' as const, concurrency };
  simulateRun({
    engine: new EngineCluster(engine),
    load,
    requests,
    warmupRequests: 0,
    seed: 1,
    endpoint: 'completions',
    nextRequest: (id) => ({
      prompt: '',
      promptWords: lengths[id][0],
      requestedInputTokens: lengths[id][0],
      requestedOutputTokens: lengths[id][1],
    }),
    onRecord: (r) => records.push(r),
  });
  return pointFromRecords(`c${concurrency} ${input}/${output}`, load, records);
}
