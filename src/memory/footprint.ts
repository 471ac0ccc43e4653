import { EXIT, InfergaugeError } from '../errors.js';
import { DTYPE_BYTES, type KvDtype, type WeightFormat, weightBytesPerParam } from './dtype.js';
import type { GpuSpec } from './hardware.js';
import { type ModelSpec, paramCounts } from './model.js';

/**
 * Analytic memory footprint of a served model (REFERENCE-memory-and-simulator.md section 1).
 * All sizes are bytes per GPU unless a name says otherwise.
 */

/** Weight bytes of the whole model (all TP ranks together). */
export interface WeightBytes {
  total: number;
  /** Embedding and lm_head (16 bit in quantised checkpoints). */
  embedding: number;
  /** Linear layers and norms. */
  body: number;
  /** The routed experts' share of `body` (0 for dense models). */
  experts: number;
}

/**
 * Bytes of the weights in `format`. A quantised format stores the linear layers at its width,
 * less what the checkpoint keeps unquantised (`format.unquantised`, from its ignore list) and the
 * MoE routers, which the engines build unquantised whatever the checkpoint says.
 */
export function weightBytes(model: ModelSpec, format: WeightFormat): WeightBytes {
  const p = paramCounts(model);
  // fp32 models keep fp32 embeddings; quantised ones keep them in 16 bit.
  const embeddingBytesPerParam = format.dtype === 'fp32' ? 4 : 2;
  const embedding = p.embedding * embeddingBytesPerParam;
  const perParam = weightBytesPerParam(format);
  const keep = format.unquantised;
  const keptPerParam = DTYPE_BYTES[keep?.dtype ?? 'bf16'];
  const quantised = perParam < DTYPE_BYTES.fp16;
  const allExperts = p.moeLayers * (model.moe?.experts ?? 0) * p.perExpert;
  const router = quantised ? p.router : 0;
  const keptExperts = quantised ? Math.min(keep?.expertParams ?? 0, allExperts) : 0;
  const keptDense = quantised ? Math.min(keep?.denseParams ?? 0, p.body - allExperts - router) : 0;
  const experts = (allExperts - keptExperts) * perParam + keptExperts * keptPerParam;
  const dense =
    (p.body - allExperts - keptDense - router) * perParam + (keptDense + router) * keptPerParam;
  const body = dense + experts;
  return { total: embedding + body, embedding, body, experts };
}

/** KV heads one TP rank holds: `ceil(n_kv / tp)`, so KV is replicated when n_kv < tp. */
export function kvHeadsPerRank(model: ModelSpec, tp: number): number {
  return Math.ceil(model.kvHeads / tp);
}

/**
 * KV cache bytes per token on one GPU, all layers. GQA/MHA/MQA: 2 x L x kv heads x head dim x
 * bytes. MLA: L x (kv_lora_rank + rope dims) x bytes, one latent per token that TP does not split.
 */
export function kvBytesPerToken(model: ModelSpec, kvDtype: KvDtype, tp = 1): number {
  const b = DTYPE_BYTES[kvDtype];
  if (model.mla) return model.layers * (model.mla.kvLoraRank + model.mla.ropeHeadDim) * b;
  return 2 * model.layers * kvHeadsPerRank(model, tp) * model.headDim * b;
}

/** Blocks a sequence of `tokens` holds: ceil(tokens / block), capped by a sliding window. */
export function blocksForTokens(
  tokens: number,
  blockSize: number,
  windowCapBlocks = Number.POSITIVE_INFINITY,
): number {
  return Math.min(Math.ceil(tokens / blockSize), windowCapBlocks);
}

/**
 * vLLM's most blocks a sliding-window sequence can hold (`SlidingWindowSpec`):
 * cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1.
 */
export function slidingWindowCapBlocks(
  model: ModelSpec,
  blockSize: number,
  maxNumBatchedTokens: number,
  maxModelLen: number,
): number {
  if (model.slidingWindow === undefined) return Number.POSITIVE_INFINITY;
  const span = Math.min(model.slidingWindow - 1 + maxNumBatchedTokens, maxModelLen);
  return Math.ceil(span / blockSize) + 1;
}

/**
 * How a profiling run's sampler applies top-k and top-p (vLLM's dummy sampler asks for both):
 * `sort` sorts the whole vocabulary with PyTorch, `fused` runs one kernel over it (FlashInfer's
 * sampling, vLLM's Triton top-k/top-p).
 */
export type ProfileSampler = 'sort' | 'fused';

/**
 * Bytes live per logit (sampled row x vocabulary entry) at the sampler's peak. Both hold the
 * model's 16-bit logits (2) and the sampler's fp32 copy (4). `sort`: `logits.sort()` returns
 * fp32 values (4) and int64 indices (8); PyTorch's segmented sort (aten/src/ATen/native/cuda/
 * Sort.cu, `segmented_sort_pairs`, 128 rows or more) adds an int64 index input (8) and cub's
 * alternate key and value buffers (4 + 8): 38. vLLM PR #32558's table measures 1.25 GB for the
 * PyTorch path at 256 x 131,072 (37 per logit). `fused`: the probabilities (4) and one more fp32
 * buffer (FlashInfer's masked logits; the exponential noise of vLLM's `random_sample`): 14.
 */
export const SAMPLER_BYTES_PER_LOGIT: Record<ProfileSampler, number> = { sort: 38, fused: 14 };

/**
 * Peak activation memory of a profiling run: one forward pass over `tokens` tokens, whose largest
 * live set is the MLP's (the residual, the normed input the layer keeps, gate and up, the
 * activated intermediate and the down projection's output: 3 x hidden + 3 x ffn), and the
 * sampler over `sampledRows` rows. With `sampler` (vLLM), the forward returns before the sampler
 * runs (`profile_run`: `_dummy_run`, then `_dummy_sampler_run`; V0's `execute_model` samples
 * after the forward), so the peak is the larger of the forward and the hidden states it returns
 * plus the sampler. Without, the fp32 logits and their softmax copy sit beside the forward (the
 * other engines' rules).
 */
export function activationPeakBytes(
  model: ModelSpec,
  tokens: number,
  sampledRows: number,
  tp: number,
  sampler?: ProfileSampler,
): number {
  const bytes = DTYPE_BYTES.bf16;
  const ffnPerToken = model.moe
    ? Math.max(model.ffnSize, (model.moe.topK + model.moe.sharedExperts) * model.moe.expertFfnSize)
    : model.ffnSize;
  const ffn = (3 * ffnPerToken) / tp;
  const logits = sampledRows * model.vocabSize;
  if (sampler === undefined) return tokens * (2 * model.hiddenSize + ffn) * bytes + logits * 4 * 2;
  const forward = tokens * (3 * model.hiddenSize + ffn) * bytes;
  const held = tokens * model.hiddenSize * bytes;
  return Math.max(forward, held + logits * SAMPLER_BYTES_PER_LOGIT[sampler]);
}

/**
 * The activation peak of the engine's profiling step: vLLM's dummy run spreads its tokens over
 * min(tokens, max_num_seqs) requests (`_dummy_run`), each sampling a row; TGI warms up with
 * requests of max_input_length filling max_batch_prefill_tokens.
 */
export function profiledActivationBytes(
  input: Pick<
    VllmMemoryInput,
    | 'memoryRule'
    | 'model'
    | 'tp'
    | 'maxNumBatchedTokens'
    | 'maxNumSeqs'
    | 'maxModelLen'
    | 'profileSampler'
  >,
): number {
  const sampledRows =
    input.memoryRule === 'tgi'
      ? Math.max(1, Math.floor(input.maxNumBatchedTokens / input.maxModelLen))
      : Math.min(input.maxNumSeqs, input.maxNumBatchedTokens);
  return activationPeakBytes(
    input.model,
    input.maxNumBatchedTokens,
    sampledRows,
    input.tp,
    input.profileSampler,
  );
}

/** Memory outside weights, KV cache and activations, by component. */
export interface OverheadParts {
  /** cuBLAS/cuBLASLt workspaces, allocator slack, other non-torch allocations after start-up. */
  nonTorchBytes: number;
  /** NCCL buffers, only with TP > 1 (aiconfigurator: 342 MB at TP 2, 392 MB at TP >= 4). */
  ncclBytes: number;
  /** CUDA graphs captured for decode batch sizes. */
  cudaGraphBytes: number;
}

/**
 * Default overheads. NCCL from aiconfigurator. Non-torch and CUDA-graph memory are not
 * published per GPU; these values reproduce the measured 1.24 GB residual of the vLLM 0.19
 * RTX 4090 Llama-3.1-8B run together with the activation formula above (2,598 blocks against
 * the measured 2,588: 0.4 % more KV), and are knobs, not facts.
 */
export function defaultOverhead(tp: number): OverheadParts {
  return {
    nonTorchBytes: 0.25e9,
    ncclBytes: tp <= 1 ? 0 : tp === 2 ? 342e6 : 392e6,
    cudaGraphBytes: 0.5e9,
  };
}

/**
 * vLLM V1's scheduler defaults for online serving (`EngineArgs._set_default_args`): GPUs with
 * at least 70 GiB (other than A100) get max_num_batched_tokens 8192 and max_num_seqs 1024,
 * others 2048 and 256.
 */
export function vllmDefaults(gpu: GpuSpec): { maxNumBatchedTokens: number; maxNumSeqs: number } {
  const large = gpu.memoryBytes >= 70 * GiB && !gpu.id.startsWith('a100');
  return large
    ? { maxNumBatchedTokens: 8192, maxNumSeqs: 1024 }
    : { maxNumBatchedTokens: 2048, maxNumSeqs: 256 };
}

/** The CUDA context lives outside vLLM's budget but on the device (PyTorch #107667: 300–400 MB). */
export const CUDA_CONTEXT_BYTES = 0.4e9;

/**
 * Whose start-up rule sizes the KV pool (the engine personality's): vLLM V1's, vLLM V0's (CUDA
 * graphs captured after the pool is sized), SGLang's static fraction, TensorRT-LLM's fraction
 * of the memory left free after load, or llama.cpp's buffer of n_ctx cells (`ctxTokens`).
 */
export type MemoryRule = 'vllm-v1' | 'vllm-v0' | 'sglang' | 'trtllm' | 'tgi' | 'llamacpp';

export interface VllmMemoryInput {
  /** Default `vllm-v1`. `gpuMemoryUtilization` is the rule's own fraction. */
  memoryRule?: MemoryRule;
  model: ModelSpec;
  gpu: GpuSpec;
  weights: WeightFormat;
  kvDtype: KvDtype;
  tp: number;
  gpuMemoryUtilization: number;
  blockSize: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  maxModelLen: number;
  /** Replaces activations + non-torch + NCCL + CUDA graphs with one measured residual. */
  nonKvOverheadBytes?: number;
  /** vLLM `num_gpu_blocks_override`. */
  numGpuBlocksOverride?: number;
  /**
   * vLLM: how its profiling run samples (`vllmRelease`); sets the activation peak's sampler term.
   * Absent for the other engines.
   */
  profileSampler?: ProfileSampler;
  /** vLLM V1: whether CUDA-graph memory is taken from the KV budget (from 0.21; default true). */
  cudaGraphsInBudget?: boolean;
  /**
   * llama.cpp's KV buffer in cells (tokens), its n_ctx: allocated whole at start-up, whatever the
   * memory left (`--ctx-size`; the `llamacpp` rule).
   */
  ctxTokens?: number;
}

export interface VllmMemoryPlan {
  rule: MemoryRule;
  /** Device memory per GPU. */
  totalBytes: number;
  /**
   * What the engine may use per GPU: gpu_memory_utilization (SGLang's mem_fraction_static) x
   * total; for TensorRT-LLM the non-KV memory plus its fraction of what was left free.
   */
  budgetBytes: number;
  weightBytes: number;
  activationBytes: number;
  overhead: OverheadParts;
  /** Everything in the budget that is not KV cache. */
  nonKvBytes: number;
  /** KV bytes per token per GPU, all layers. */
  kvBytesPerToken: number;
  /** One block of `blockSize` tokens, all layers. */
  blockBytes: number;
  numGpuBlocks: number;
  kvPoolBytes: number;
  kvTokens: number;
  /** vLLM's logged "maximum concurrency for max_model_len tokens per request". */
  maxConcurrencyAtMaxLen: number;
  /**
   * SGLang and TensorRT-LLM: the longest request the engine serves where the pool holds less
   * than max_model_len (they start with it lowered; vLLM refuses instead). Absent otherwise.
   */
  servedMaxModelLen?: number;
  /** Most blocks one sequence can hold (sliding window), or Infinity. */
  windowCapBlocks: number;
  /** What the device shows as used once the engine is up (pool pre-allocated + CUDA context). */
  deviceUsedBytes: number;
}

/** vLLM refuses to start; the message follows vLLM's own. */
export class EngineStartError extends InfergaugeError {
  constructor(code: 'IG_SIM_NO_KV_MEMORY' | 'IG_SIM_MAX_MODEL_LEN', message: string) {
    super(message, code, EXIT.invalidOptions);
  }
}

const GiB = 1024 ** 3;
const gib = (bytes: number) => `${(bytes / GiB).toFixed(2)} GiB`;

/** Where a rule puts the KV pool: the engine's share, what else it holds, what is left for KV. */
interface KvBudget {
  budgetBytes: number;
  nonKvBytes: number;
  availableBytes: number;
}

function kvBudget(
  input: VllmMemoryInput,
  weights: number,
  activationBytes: number,
  overhead: OverheadParts,
): KvBudget {
  const total = input.gpu.memoryBytes;
  const fraction = input.gpuMemoryUtilization;
  const override = input.nonKvOverheadBytes;
  switch (input.memoryRule ?? 'vllm-v1') {
    case 'vllm-v0': {
      // vLLM V0 `worker.py determine_num_available_blocks` (v0.6.x): total x util - the profiled
      // peak (weights, activations, non-torch); `_warm_up_model` captures CUDA graphs only
      // after `initialize_cache`, so their memory is not taken from the pool.
      const nonKvBytes =
        weights + (override ?? activationBytes + overhead.nonTorchBytes + overhead.ncclBytes);
      return {
        budgetBytes: total * fraction,
        nonKvBytes,
        availableBytes: total * fraction - nonKvBytes,
      };
    }
    case 'sglang': {
      // SGLang `model_runner.py profile_max_num_token`: rest = available - total x (1 -
      // mem_fraction_static), available being the memory free after the weights load (CUDA
      // context and NCCL already there): KV = total x fraction - weights - context - NCCL.
      // Activations and CUDA graphs live in the (1 - fraction) reserve.
      const nonKvBytes = weights + (override ?? CUDA_CONTEXT_BYTES + overhead.ncclBytes);
      return {
        budgetBytes: total * fraction,
        nonKvBytes,
        availableBytes: total * fraction - nonKvBytes,
      };
    }
    case 'llamacpp': {
      // llama.cpp (`src/llama-kv-cache.cpp` constructor) allocates n_ctx cells of K and V, then
      // the compute buffer for one n_ubatch graph: no fraction, the KV is what n_ctx says and
      // it must fit beside the weights in the device's (here: the host's) memory.
      const nonKvBytes = weights + (override ?? activationBytes);
      return { budgetBytes: total, nonKvBytes, availableBytes: total - nonKvBytes };
    }
    case 'trtllm': {
      // TensorRT-LLM `KvCacheConfig.free_gpu_memory_fraction` (default 0.9): the pool takes that
      // share of the memory still free once the engine (weights, activation buffers sized for
      // max_num_tokens, workspaces, NCCL) is loaded; no CUDA graphs in the TRT backend.
      const nonKvBytes =
        weights + (override ?? activationBytes + overhead.nonTorchBytes + overhead.ncclBytes);
      const availableBytes = fraction * (total - CUDA_CONTEXT_BYTES - nonKvBytes);
      return { budgetBytes: nonKvBytes + availableBytes, nonKvBytes, availableBytes };
    }
    case 'tgi': {
      // TGI's warm-up (`flash_causal_lm.py warmup`, v2.0): after a prefill of
      // max_batch_prefill_tokens, free = free memory - (1 - cuda_memory_fraction) x total, and
      // the blocks are 0.95 of it (`num_blocks = int(free * 0.95 // block_bytes)`, plus the
      // warm-up's own); CUDA graphs are captured after, in the 5 % left.
      const nonKvBytes =
        weights + (override ?? activationBytes + overhead.nonTorchBytes + overhead.ncclBytes);
      const availableBytes = 0.95 * (total * fraction - CUDA_CONTEXT_BYTES - nonKvBytes);
      return { budgetBytes: total * fraction, nonKvBytes, availableBytes };
    }
    default: {
      // CUDA graphs are captured after the pool is sized; from v0.21 the profile estimates
      // their memory first (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` on, vLLM PR #38284).
      const graphs = input.cudaGraphsInBudget === false ? 0 : overhead.cudaGraphBytes;
      const nonKvBytes =
        weights +
        (override ?? activationBytes + overhead.nonTorchBytes + overhead.ncclBytes + graphs);
      return {
        budgetBytes: total * fraction,
        nonKvBytes,
        availableBytes: total * fraction - nonKvBytes,
      };
    }
  }
}

const FRACTION_FLAG: Record<MemoryRule, string> = {
  'vllm-v1': 'gpu_memory_utilization',
  'vllm-v0': 'gpu_memory_utilization',
  sglang: 'mem_fraction_static',
  trtllm: 'kv_cache_free_gpu_mem_fraction',
  tgi: 'cuda_memory_fraction',
  llamacpp: 'ctx_size',
};

/**
 * The engine's start-up memory plan under its rule (`kvBudget`; vLLM V1's by default:
 * `gpu_worker.determine_available_memory`, `kv_cache_utils`): available = total x util -
 * (weights + profiled activation peak + non-torch [+ CUDA graphs]); num_blocks = available //
 * page_size // num_layers. Throws EngineStartError where the engine would refuse to start: no
 * memory left for the cache, or not one `max_model_len` sequence fits.
 */
export function planVllmMemory(input: VllmMemoryInput): VllmMemoryPlan {
  const { model, gpu, tp } = input;
  const rule = input.memoryRule ?? 'vllm-v1';
  const totalBytes = gpu.memoryBytes;
  const weights = weightBytes(model, input.weights).total / tp;
  const activationBytes = profiledActivationBytes(input);
  const overhead = defaultOverhead(tp);
  const {
    budgetBytes,
    nonKvBytes,
    availableBytes: available,
  } = kvBudget(input, weights, activationBytes, overhead);
  const kvPerToken = kvBytesPerToken(model, input.kvDtype, tp);
  const blockBytes = kvPerToken * input.blockSize;
  if (available <= 0 && input.numGpuBlocksOverride === undefined) {
    throw new EngineStartError(
      'IG_SIM_NO_KV_MEMORY',
      `No available memory for the cache blocks: ${model.name} weights need ${gib(weights)} per GPU and the rest of the engine ${gib(nonKvBytes - weights)}, over the ${gib(budgetBytes)} budget (${FRACTION_FLAG[rule]} ${input.gpuMemoryUtilization} of ${gib(totalBytes)} on ${gpu.name}, TP ${tp}). Try more GPUs (--tp), a smaller weight dtype, or a larger GPU.`,
    );
  }
  // vLLM divides by the per-layer page and then by the layer count.
  // (SGLang and TensorRT-LLM divide the pool by the whole token or block size.)
  const perLayerPage = blockBytes / model.layers;
  const numGpuBlocks =
    input.numGpuBlocksOverride ??
    (rule === 'llamacpp'
      ? Math.ceil((input.ctxTokens ?? input.maxModelLen) / input.blockSize)
      : rule === 'vllm-v1' || rule === 'vllm-v0'
        ? Math.floor(Math.floor(available / perLayerPage) / model.layers)
        : Math.floor(available / blockBytes));
  if (rule === 'llamacpp' && numGpuBlocks * blockBytes > available) {
    // llama.cpp: "failed to allocate buffer for kv cache" (ggml's allocation fails).
    throw new EngineStartError(
      'IG_SIM_NO_KV_MEMORY',
      `The KV cache of ${numGpuBlocks * input.blockSize} cells (--ctx-size) needs ${gib(numGpuBlocks * blockBytes)}, more than the ${gib(Math.max(0, available))} left beside ${model.name}'s weights (${gib(weights)}) on ${gpu.name} (${gib(totalBytes)}). Lower --ctx-size, or use a smaller weight or cache type.`,
    );
  }
  const windowCapBlocks = slidingWindowCapBlocks(
    model,
    input.blockSize,
    input.maxNumBatchedTokens,
    input.maxModelLen,
  );
  let blocksPerMaxLen = blocksForTokens(input.maxModelLen, input.blockSize, windowCapBlocks);
  let maxModelLen = input.maxModelLen;
  if (numGpuBlocks < blocksPerMaxLen && (rule === 'sglang' || rule === 'trtllm')) {
    // Neither refuses: SGLang serves requests up to max_req_len = min(context_len - 1, pool - 1)
    // (`tp_worker.py`, v0.5.5; it stops only when that is under 6 tokens); TensorRT-LLM's
    // KVCacheManager lowers max_seq_len to what the pool holds, with a warning, and starts
    // (`resource_manager.py`, fail_fast_on_attention_window_too_large off by default).
    maxModelLen =
      rule === 'sglang' ? numGpuBlocks * input.blockSize - 1 : numGpuBlocks * input.blockSize;
    if (maxModelLen < 6) {
      throw new EngineStartError(
        'IG_SIM_NO_KV_MEMORY',
        `The KV pool holds ${numGpuBlocks * input.blockSize} tokens, too few for any request (${model.name} on ${gpu.name}, TP ${tp}). Raise ${FRACTION_FLAG[rule]}, or use more GPUs (--tp) or a smaller weight dtype.`,
      );
    }
    blocksPerMaxLen = blocksForTokens(maxModelLen, input.blockSize, windowCapBlocks);
  }
  if (numGpuBlocks < blocksPerMaxLen) {
    throw new EngineStartError(
      'IG_SIM_MAX_MODEL_LEN',
      rule === 'tgi'
        ? // TGI's router refuses a max_total_tokens its warmed-up pool cannot hold.
          `Not enough memory to handle max_total_tokens=${input.maxModelLen}: the KV cache holds ${numGpuBlocks * input.blockSize} tokens. Lower --max-total-tokens (--max-model-len) or raise --cuda-memory-fraction.`
        : `To serve at least one request with the model's max seq len (${input.maxModelLen}), ${gib(blocksPerMaxLen * blockBytes)} KV cache is needed, which is larger than the available KV cache memory (${gib(numGpuBlocks * blockBytes)}). Try increasing gpu_memory_utilization or decreasing max_model_len (--max-model-len).`,
    );
  }
  const kvPoolBytes = numGpuBlocks * blockBytes;
  return {
    rule,
    totalBytes,
    budgetBytes,
    weightBytes: weights,
    activationBytes,
    overhead,
    nonKvBytes,
    kvBytesPerToken: kvPerToken,
    blockBytes,
    numGpuBlocks,
    kvPoolBytes,
    kvTokens: numGpuBlocks * input.blockSize,
    maxConcurrencyAtMaxLen: numGpuBlocks / blocksPerMaxLen,
    ...(maxModelLen < input.maxModelLen ? { servedMaxModelLen: maxModelLen } : {}),
    windowCapBlocks,
    deviceUsedBytes: Math.min(
      totalBytes,
      nonKvBytes +
        kvPoolBytes +
        // SGLang's non-KV count already has the context; its activations and graphs come after.
        // llama.cpp on a CPU has no CUDA context.
        (rule === 'sglang'
          ? activationBytes + overhead.cudaGraphBytes
          : rule === 'llamacpp'
            ? 0
            : CUDA_CONTEXT_BYTES),
    ),
  };
}
