import { blocksForTokens, type VllmMemoryPlan } from './footprint.js';

/**
 * The batch-1-to-OOM capacity curve: pure functions over the steps `infergauge capacity`
 * measured, and the analytic prediction beside them.
 */

/** What one batch size did. */
export interface CapacityStep {
  batch: number;
  completed: number;
  failed: number;
  errorsByKind: Record<string, number>;
  /** The first message of each error kind (the server's reason), as the step's summary has it. */
  firstErrorByKind?: Record<string, string>;
  /** Measured concurrency (closed loop: close to `batch` unless the server queues). */
  meanConcurrency: number;
  outputTokensPerS: number;
  /** Mean per-request output speed (tokens/s one user sees). */
  perUserTokensPerS: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  /** Mean time per output token: the decode speed users get, robust to single stutters. */
  tpotMeanMs: number;
  itlP99Ms: number;
  /** From server telemetry, when it has them. */
  kvCacheUsageMax?: number;
  preemptions?: number;
  waitingMax?: number;
  gpuMemoryUsedMaxBytes?: number;
  /** The analytic model's KV usage for `batch` sequences at full length (can exceed 1). */
  predictedKvCacheUsage?: number;
  /**
   * The built-in simulator run at a --time-scale: the times and rates as measured on the
   * clock, at that scale. The step's own figures are then the modelled hardware's (times
   * divided by the scale, rates multiplied by it), as the server's would read.
   */
  measuredAtTimeScale?: CapacityStepTimes;
  /**
   * A stop (SIGINT) cut the step short: its requests were not all sent, so no limit and no
   * capacity rests on it; its figures are what finished.
   */
  interrupted?: true;
  /**
   * The built-in simulator on a --calibration: the step's figures' prediction intervals
   * (docs/metrics.md, "Prediction intervals"), at the modelled hardware's speed as its figures.
   */
  predictionIntervals?: StepPrediction;
}

/** The step figures a calibrated step predicts. */
export const PREDICTED_STEP_FIELDS = [
  'outputTokensPerS',
  'ttftP50Ms',
  'ttftP99Ms',
  'tpotMeanMs',
  'itlP99Ms',
] as const;
export type PredictedStepField = (typeof PREDICTED_STEP_FIELDS)[number];

/** A step's prediction intervals: each figure's range, at one level. */
export interface StepPrediction {
  level: number;
  ranges: Partial<Record<PredictedStepField, { low: number; high: number }>>;
}

/**
 * The interval of a capacity search's answer from its steps' prediction intervals: the search
 * judged again (capacityLimit) with every step's figures at the low end of their ranges, and
 * again at the high end. One draw of the fitted values moves a figure the same way at every
 * batch, so the ends are taken together; the memory limits (failures, preemptions, a full KV
 * cache) do not move with the fitted values, only a latency cliff does. A judgement that finds
 * no limit among the steps measured gives the last step (the search went no further).
 * Undefined when no step has a prediction.
 */
export function capacityInterval(
  steps: readonly CapacityStep[],
  cliffFactor: number,
  capacity: number,
): { low: number; high: number; level: number } | undefined {
  const whole = steps.filter((s) => !s.interrupted);
  const level = whole.find((s) => s.predictionIntervals)?.predictionIntervals?.level;
  if (level === undefined) return undefined;
  const judged = (end: 'low' | 'high') => {
    const at = whole.map((s) => {
      const r = s.predictionIntervals?.ranges;
      return {
        ...s,
        ttftP99Ms: r?.ttftP99Ms?.[end] ?? s.ttftP99Ms,
        tpotMeanMs: r?.tpotMeanMs?.[end] ?? s.tpotMeanMs,
      };
    });
    for (let i = 0; i < at.length; i++) {
      if (capacityLimit(at[i], at[i - 1], cliffFactor)) return at[i - 1]?.batch ?? 0;
    }
    return at[at.length - 1]?.batch ?? 0;
  };
  const ends = [judged('low'), judged('high'), capacity];
  return { low: Math.min(...ends), high: Math.max(...ends), level };
}

/** A step's figures that a --time-scale stretches or shrinks. */
export type CapacityStepTimes = Pick<
  CapacityStep,
  'outputTokensPerS' | 'perUserTokensPerS' | 'ttftP50Ms' | 'ttftP99Ms' | 'tpotMeanMs' | 'itlP99Ms'
>;

/**
 * A step measured against the simulator at `timeScale` real seconds per simulated second, with
 * the modelled hardware's figures: a search at 0.1 runs ten times faster than the GPU it models,
 * and its measured rates, ten times the GPU's, would be read as the GPU's. The measurement stays,
 * named, in `measuredAtTimeScale`; counts, concurrency and KV usage do not depend on the scale.
 */
export function atModelledSpeed(step: CapacityStep, timeScale: number): CapacityStep {
  if (timeScale === 1) return step;
  const measured: CapacityStepTimes = {
    outputTokensPerS: step.outputTokensPerS,
    perUserTokensPerS: step.perUserTokensPerS,
    ttftP50Ms: step.ttftP50Ms,
    ttftP99Ms: step.ttftP99Ms,
    tpotMeanMs: step.tpotMeanMs,
    itlP99Ms: step.itlP99Ms,
  };
  return {
    ...step,
    outputTokensPerS: step.outputTokensPerS * timeScale,
    perUserTokensPerS: step.perUserTokensPerS * timeScale,
    ttftP50Ms: step.ttftP50Ms / timeScale,
    ttftP99Ms: step.ttftP99Ms / timeScale,
    tpotMeanMs: step.tpotMeanMs / timeScale,
    itlP99Ms: step.itlP99Ms / timeScale,
    measuredAtTimeScale: measured,
  };
}

export type CapacityLimitReason = 'failures' | 'preemptions' | 'kv_cache_full' | 'latency_cliff';

export interface CapacityLimit {
  /** The batch at which the limit showed. */
  batch: number;
  reason: CapacityLimitReason;
  /** Why, in a sentence with the numbers. */
  detail: string;
}

/** The analytic prediction for sequences of `sequenceTokens` on a vLLM-style paged pool. */
export interface CapacityPrediction {
  numGpuBlocks: number;
  blocksPerSequence: number;
  /** Most sequences the pool holds at once at full length. */
  maxBatch: number;
}

export function predictCapacity(
  plan: VllmMemoryPlan,
  sequenceTokens: number,
  blockSize: number,
  /** Data-parallel replicas, each with its own pool of `plan.numGpuBlocks`. */
  replicas = 1,
) {
  const blocksPerSequence = blocksForTokens(sequenceTokens, blockSize, plan.windowCapBlocks);
  return {
    numGpuBlocks: plan.numGpuBlocks * replicas,
    blocksPerSequence,
    // A sequence lives in one replica's pool: whole sequences per replica, times replicas.
    maxBatch: replicas * Math.floor(plan.numGpuBlocks / blocksPerSequence),
  } satisfies CapacityPrediction;
}

/** KV usage the analytic model expects for `batch` sequences at full length (may exceed 1). */
export function predictedKvUsage(prediction: CapacityPrediction, batch: number): number {
  return (batch * prediction.blocksPerSequence) / prediction.numGpuBlocks;
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

/**
 * Whether this step hit the service's limit, and why: requests failed, the server preempted
 * (its KV cache could not hold the batch), KV usage reached 100 %, or p99 TTFT or mean TPOT
 * jumped by `cliffFactor` or more over the previous step. The first that applies is reported.
 * p99 ITL is shown but not used: with chunked prefill a decode that shares a step with a long
 * prompt's chunk stutters once, which moves p99 ITL a lot without any queueing behind it.
 */
export function capacityLimit(
  step: CapacityStep,
  previous: CapacityStep | undefined,
  cliffFactor: number,
): CapacityLimit | undefined {
  const { batch } = step;
  if (step.failed > 0) {
    const kinds = Object.entries(step.errorsByKind)
      .map(([kind, n]) => `${n} ${kind}`)
      .join(', ');
    return {
      batch,
      reason: 'failures',
      detail:
        step.completed === 0
          ? `every request (${step.failed}) failed at batch ${batch} (${kinds}): nothing was measured there`
          : `${step.failed} of ${step.completed + step.failed} requests failed at batch ${batch} (${kinds})`,
    };
  }
  if ((step.preemptions ?? 0) > 0) {
    return {
      batch,
      reason: 'preemptions',
      detail: `the server preempted ${step.preemptions} times at batch ${batch}: its KV cache cannot hold ${batch} sequences at once (KV usage peaked at ${pct(step.kvCacheUsageMax ?? 1)})`,
    };
  }
  if ((step.kvCacheUsageMax ?? 0) >= 0.99) {
    return {
      batch,
      reason: 'kv_cache_full',
      detail: `KV cache usage reached ${pct(step.kvCacheUsageMax as number)} at batch ${batch}`,
    };
  }
  if (previous) {
    for (const [name, now, before] of [
      ['p99 TTFT', step.ttftP99Ms, previous.ttftP99Ms],
      ['mean TPOT', step.tpotMeanMs, previous.tpotMeanMs],
    ] as const) {
      if (before > 0 && now / before >= cliffFactor) {
        return {
          batch,
          reason: 'latency_cliff',
          detail: `${name} jumped ${(now / before).toFixed(1)}x (${before.toFixed(1)} -> ${now.toFixed(1)} ms) from batch ${previous.batch} to ${batch}`,
        };
      }
    }
  }
  return undefined;
}

/** Batches to try: doubling from 1 to `maxBatch` (inclusive when it is a power of two). */
export function doublingBatches(maxBatch: number): number[] {
  const batches: number[] = [];
  for (let b = 1; b <= maxBatch; b *= 2) batches.push(b);
  if (batches[batches.length - 1] !== maxBatch) batches.push(maxBatch);
  return batches;
}

/**
 * What a --time-scale did to the figures: they are the modelled GPU's; the clock's own are kept
 * beside them. One clause for the terminal and the HTML report.
 */
export function timeScaleNote(timeScale: number): string {
  return `the simulator ran at --time-scale ${timeScale}: times and rates are the modelled GPU's, not the scaled clock's (those are each step's measuredAtTimeScale in capacity.json)`;
}
