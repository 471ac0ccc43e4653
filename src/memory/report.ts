import {
  blocksForTokens,
  CUDA_CONTEXT_BYTES,
  defaultOverhead,
  EngineStartError,
  kvBytesPerToken,
  planVllmMemory,
  profiledActivationBytes,
  slidingWindowCapBlocks,
  type VllmMemoryInput,
  type VllmMemoryPlan,
  vllmDefaults,
  weightBytes,
} from './footprint.js';
import { GPU_PRESETS, type GpuSpec } from './hardware.js';
import { paramCounts } from './model.js';

/**
 * What `infergauge memory` is asked: an engine's memory settings (its rule, model, GPU, formats,
 * budget, release facts), a context and a batch.
 */
export interface MemoryQuestion
  extends Pick<
    VllmMemoryInput,
    | 'memoryRule'
    | 'model'
    | 'gpu'
    | 'weights'
    | 'kvDtype'
    | 'tp'
    | 'gpuMemoryUtilization'
    | 'blockSize'
    | 'maxNumBatchedTokens'
    | 'maxNumSeqs'
    | 'profileSampler'
    | 'cudaGraphsInBudget'
  > {
  /** Tokens per sequence (prompt + output) the deployment must hold. */
  contextTokens: number;
  /** Sequences held at once at that context. */
  batch: number;
  /** The scheduler budget was given: other GPUs keep it rather than their own vLLM defaults. */
  budgetGiven?: boolean;
  /**
   * The engine's budget when started at another max_model_len (vLLM V0 without chunked prefill
   * raises max_num_batched_tokens to it): the curve's points are each an engine of their own.
   */
  budgetAt?: (contextTokens: number) => { maxNumBatchedTokens: number; maxNumSeqs: number };
}

/** One deployment that would hold the question's batch at its context. */
export interface GpuFit {
  gpu: string;
  tp: number;
  numGpuBlocks: number;
  maxSequences: number;
}

/** The analytic footprint and the answers people want, per GPU unless a name says otherwise. */
export interface MemoryReport {
  params: { total: number; active: number };
  kvBytesPerTokenAllGpus: number;
  perGpu: {
    weightBytes: number;
    kvBytesPerToken: number;
    /** One sequence of `contextTokens`, rounded up to whole blocks. */
    kvBytesPerSequence: number;
    /** Bytes lost to rounding in the last block of each sequence. */
    blockWasteBytesPerSequence: number;
    kvBytesForBatch: number;
    activationBytes: number;
    cudaContextBytes: number;
    nonTorchBytes: number;
    cudaGraphBytes: number;
    ncclBytes: number;
    /** Weights + KV for the batch + activations + every overhead. */
    totalBytes: number;
    deviceBytes: number;
    /** The batch fits on the device at all (ignoring vLLM's budget share). */
    fitsDevice: boolean;
  };
  /** vLLM's start-up plan with max_model_len = contextTokens, or why it would refuse to start. */
  vllm: { plan?: VllmMemoryPlan; error?: string };
  /** Most sequences of `contextTokens` the KV pool holds at once (vLLM's rule). */
  maxSequences: number;
  /** Context at which one sequence's KV cache outgrows the weights (and the batch's). */
  kvOvertakesWeightsAt: { oneSequence: number; batch: number };
  /** Max concurrent sequences at other context lengths, for the curve. */
  sequencesByContext: { contextTokens: number; maxSequences: number }[];
  /** The smallest single GPU, and the smallest deployment by total memory, that hold the batch. */
  smallestFit: { singleGpu?: GpuFit; anyTp?: GpuFit };
}

function vllmPlan(q: MemoryQuestion, gpu: GpuSpec, tp: number): VllmMemoryPlan {
  const { contextTokens, batch, budgetGiven, budgetAt, ...engine } = q;
  const budget = budgetGiven || gpu === q.gpu ? q : vllmDefaults(gpu);
  return planVllmMemory({
    ...engine,
    gpu,
    tp,
    maxNumBatchedTokens: budget.maxNumBatchedTokens,
    maxNumSeqs: budget.maxNumSeqs,
    maxModelLen: contextTokens,
  });
}

function sequencesThatFit(plan: VllmMemoryPlan, q: MemoryQuestion, context: number): number {
  const perSequence = blocksForTokens(context, q.blockSize, plan.windowCapBlocks);
  return Math.floor(plan.numGpuBlocks / perSequence);
}

const CONTEXTS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

export function memoryReport(q: MemoryQuestion): MemoryReport {
  const p = paramCounts(q.model);
  const weights = weightBytes(q.model, q.weights).total / q.tp;
  const kvPerToken = kvBytesPerToken(q.model, q.kvDtype, q.tp);
  const windowCap = slidingWindowCapBlocks(
    q.model,
    q.blockSize,
    q.maxNumBatchedTokens,
    q.contextTokens,
  );
  const blocks = blocksForTokens(q.contextTokens, q.blockSize, windowCap);
  const kvPerSequence = blocks * q.blockSize * kvPerToken;
  const heldTokens = Math.min(q.contextTokens, windowCap * q.blockSize);
  const activationBytes = profiledActivationBytes({ ...q, maxModelLen: q.contextTokens });
  const overhead = defaultOverhead(q.tp);
  const totalBytes =
    weights +
    kvPerSequence * q.batch +
    activationBytes +
    CUDA_CONTEXT_BYTES +
    overhead.nonTorchBytes +
    overhead.cudaGraphBytes +
    overhead.ncclBytes;
  const vllm: MemoryReport['vllm'] = {};
  try {
    vllm.plan = vllmPlan(q, q.gpu, q.tp);
  } catch (err) {
    if (!(err instanceof EngineStartError)) throw err;
    vllm.error = err.message;
  }
  const plan = vllm.plan;
  const longest = Math.max(q.model.maxContext, q.contextTokens);
  const contexts = [...new Set([...CONTEXTS.filter((c) => c <= longest), q.contextTokens])].sort(
    (a, b) => a - b,
  );
  const sequencesByContext = contexts.map((contextTokens) => {
    try {
      const at = vllmPlan({ ...q, contextTokens, ...q.budgetAt?.(contextTokens) }, q.gpu, q.tp);
      return { contextTokens, maxSequences: sequencesThatFit(at, q, contextTokens) };
    } catch {
      return { contextTokens, maxSequences: 0 };
    }
  });
  return {
    params: { total: p.total, active: p.activeBody + p.lmHead },
    kvBytesPerTokenAllGpus: kvBytesPerToken(q.model, q.kvDtype, 1),
    perGpu: {
      weightBytes: weights,
      kvBytesPerToken: kvPerToken,
      kvBytesPerSequence: kvPerSequence,
      blockWasteBytesPerSequence: kvPerSequence - heldTokens * kvPerToken,
      kvBytesForBatch: kvPerSequence * q.batch,
      activationBytes,
      cudaContextBytes: CUDA_CONTEXT_BYTES,
      nonTorchBytes: overhead.nonTorchBytes,
      cudaGraphBytes: overhead.cudaGraphBytes,
      ncclBytes: overhead.ncclBytes,
      totalBytes,
      deviceBytes: q.gpu.memoryBytes,
      fitsDevice: totalBytes <= q.gpu.memoryBytes,
    },
    vllm,
    maxSequences: plan ? sequencesThatFit(plan, q, q.contextTokens) : 0,
    kvOvertakesWeightsAt: {
      oneSequence: Math.ceil(weights / kvPerToken),
      batch: Math.ceil(weights / (kvPerToken * q.batch)),
    },
    sequencesByContext,
    smallestFit: smallestFit(q),
  };
}

/** Presets by memory, TP 1, 2, 4, 8: the first that starts and holds the batch at the context. */
function smallestFit(q: MemoryQuestion): MemoryReport['smallestFit'] {
  const fits: GpuFit[] = [];
  for (const gpu of GPU_PRESETS) {
    for (const tp of [1, 2, 4, 8]) {
      try {
        const plan = vllmPlan(q, gpu, tp);
        const maxSequences = sequencesThatFit(plan, q, q.contextTokens);
        if (maxSequences >= q.batch) {
          fits.push({ gpu: gpu.id, tp, numGpuBlocks: plan.numGpuBlocks, maxSequences });
          break;
        }
      } catch {
        // Does not start at this TP: try more GPUs.
      }
    }
  }
  const memory = (f: GpuFit) =>
    (GPU_PRESETS.find((g) => g.id === f.gpu) as GpuSpec).memoryBytes * f.tp;
  const single = fits
    .filter((f) => f.tp === 1)
    .sort((a, b) => memory(a) - memory(b) || b.maxSequences - a.maxSequences)[0];
  const any = [...fits].sort((a, b) => memory(a) - memory(b) || a.tp - b.tp)[0];
  return { ...(single ? { singleGpu: single } : {}), ...(any ? { anyTp: any } : {}) };
}
