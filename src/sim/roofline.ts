import { DTYPE_BYTES, type KvDtype, type WeightFormat } from '../memory/dtype.js';
import { kvBytesPerToken, weightBytes } from '../memory/footprint.js';
import type { ComputeFormat, GpuFamily, GpuSpec, Interconnect } from '../memory/hardware.js';
import { type ModelSpec, paramCounts } from '../memory/model.js';
import { allReduce, ringAllGatherS } from './interconnect.js';

/**
 * Efficiency factors of the roofline (REFERENCE-memory-and-simulator.md sections 3 and 6).
 * Every one is a knob; the defaults are the reference's measured or recommended values.
 */
export interface Efficiency {
  /** Achieved fraction of peak memory bandwidth (aiconfigurator's 0.8). */
  mbu: number;
  /** Best achieved fraction of the bf16 tensor peak for large GEMMs (prefill at 2k: 0.67). */
  mfuMax16: number;
  /** The same for fp8/int8 GEMMs against their own peak (H100 FP8 serving: 0.40-0.46). */
  mfuMax8: number;
  /**
   * Tokens per step at which a GEMM of large (128-row) tiles reaches half its best share:
   * mfu(T) = mfuMax x T / (T + mfuHalfTokens) (reference: 128-256), the tile and wave
   * quantisation and pipeline fill of the prefill-sized GEMMs it was set on. A step small enough
   * for a smaller M tile pays it in that tile's proportion (`gemmHalfTokens`).
   */
  mfuHalfTokens: number;
  /**
   * Fixed time per engine step (kernel boundaries, launch, scheduling, sampling), seconds. By
   * default it grows with the model's layers (`STEP_OVERHEAD_PER_LAYER_S`); a value given here
   * (a flag, a calibration) is the whole of it.
   */
  stepOverheadS: number;
  /** Extra time per sequence in a step (input preparation, detokenisation), seconds. */
  perSeqOverheadS: number;
  /**
   * The request path's fixed part, seconds: what a measured whole leaves once the hops and the
   * tokenising are taken out (REQUEST_PATH, below): the API server's and the engine's
   * per-request CPU, which no source splits further, the engine's own entry point included. A
   * value given by the user (a flag, a calibration) is the whole request path, as it was before
   * the path had parts: the hops and `tokenizeSPerPromptToken` are then 0 unless given too.
   */
  frontendLatencyS: number;
  /**
   * The request's hops between processes, seconds: to the engine process and its first output
   * back (serialising, the socket, the receiving loop, detokenising the first token). 0 where
   * the engine runs in the serving process.
   */
  engineHopS: number;
  /**
   * The same hops when the engine's own Python entry point sends the request (`clientPath`
   * `engine`), seconds: where that entry point runs the engine in the caller's process (vLLM
   * V0's LLM and AsyncLLMEngine), fewer than the HTTP server's.
   */
  entryPointHopS: number;
  /** Tokenising the prompt, seconds per prompt token (one Hugging Face fast tokenizer call). */
  tokenizeSPerPromptToken: number;
  /**
   * CPU time the API server's one loop spends on each chat request before the engine sees it
   * (rendering its template), one request at a time (`FrontEndLoop`), seconds. 0 where the
   * release has no such cost worth modelling.
   */
  frontendChatCpuS: number;
  /**
   * CPU time per schedule the GPU waits for (vLLM V0's scheduling and input preparation), once
   * per schedule: multi-step scheduling spreads it over its steps. 0 where it overlaps the GPU.
   */
  scheduleOverheadS: number;
  /**
   * Bytes each sampled row moves through memory per vocabulary entry between lm_head's GEMM
   * and the sampled token: lm_head's output written, then the sampler's passes over the row
   * (a cast to fp32, temperature, softmax, the pick), each a full read or write of the vocab at
   * the memory bandwidth. The engine's sampler code fixes it (SAMPLER_BYTES_PER_LOGIT); it is
   * small at one row and grows with the batch.
   */
  samplerBytesPerLogit: number;
}

/**
 * The fixed time of a memory-bound step grows with the layers, not per step: each layer is a
 * dozen kernels (vLLM's `llama.py`: norms, four GEMMs, rope, attention, activation; two
 * all-reduces beyond one GPU), and each kernel boundary costs microseconds under CUDA graphs.
 * pytorch-labs/gpt-fast's README (batch 1, 8x A100-80GB, CUDA graphs) shows it: the time beyond
 * streaming the weights is 1.4-1.7 ms for Llama-2-7B (32 layers) at TP 1 to 8 and 5.1 ms for
 * Llama-2-70B (80 layers) at TP 2, 4 and 8 alike, flat across TP though the bytes per GPU
 * quarter. Per layer: the reference's 1.5 ms for the 32-layer 8B models it was set on (47 us;
 * gpt-fast reads 43-63). The all-reduces are `allReduce`'s, apart.
 */
export const STEP_OVERHEAD_PER_LAYER_S = 1.5e-3 / 32;

/**
 * Bytes per vocabulary entry per sampled row, by the sampler's code path (greedy requests: the
 * simulated engine does not see a request's sampling parameters, and infergauge and `vllm bench
 * serve` send temperature 0). Each pass is counted as it touches memory: a fp32 element read is
 * 4 bytes, a 16-bit one 2; PyTorch's softmax over a row longer than a thread block's shared
 * memory (`cunn_SoftMaxForward`, aten/src/ATen/native/cuda/SoftMax.cu: a 128k-entry fp32 row is
 * 512 KB) reads the row three times (max, sum of exponentials, output) and writes it once, 16.
 * At a batch of hundreds the rows (hundreds of MB) do not stay in L2, so the passes run at
 * memory speed.
 */
export const SAMPLER_BYTES_PER_LOGIT = {
  /**
   * vLLM V1 (`vllm/v1/sample/sampler.py` at 3e34265: `Sampler.forward` casts to fp32, `sample`
   * takes `greedy_sample`'s argmax and returns when `all_greedy`): lm_head's 16-bit write 2,
   * the cast 2 + 4, the argmax 4. The same path since V1's first sampler (00ec978). Random
   * sampling (temperature > 0, no top-k/top-p: `TopKTopPSampler.forward_native`, 01fa3fe) adds
   * temperature 8, softmax 16 and the exponential race 4 + 12 + 4: 52 for the whole random path, not
   * modelled.
   */
  vllmV1Greedy: 2 + 6 + 4,
  /**
   * vLLM V0 (`vllm/model_executor/layers/sampler.py` at 00f5ff3, as in 0.6 to 0.9): every row,
   * greedy or not, is cast to fp32 and divided by its temperature, and both `torch.softmax` and
   * `torch.log_softmax` run before `_sample` takes the greedy argmax: 2 + 6 + 8 + 16 + 16 + 4.
   */
  vllmV0: 2 + 6 + 8 + 16 + 16 + 4,
  /**
   * SGLang 0.3 (`python/sglang/srt/layers/sampler.py` at 001733e: greedy is top_k 1 at
   * temperature 1, through the same path as sampling): the logits processor's fp32 copy 2 + 6,
   * `logits.div_` 8, `torch.softmax` 16, FlashInfer's `top_k_top_p_sampling_from_probs` reading
   * the probabilities at least once, 4. Later releases' greedy shortcut was not read.
   */
  sglang03: 2 + 6 + 8 + 16 + 4,
} as const;

/** Rows of one tensor-core MMA instruction (mma.m16n8k16): what an attention tile's queries fill. */
const ATTENTION_MMA_ROWS = 16;

/**
 * The M tile of the large GEMM kernels (rows of the step a thread block computes), the one the
 * ramp's `mfuHalfTokens` was measured with: vLLM's CUTLASS `scaled_mm` takes 128-row tiles above
 * 128 rows on sm80 (`sm80_config_default`, 128x128x64) and sm90 (`sm90_fp8_config_default`,
 * 128x128x128), as cuBLAS's large-GEMM kernels do.
 */
const LARGE_GEMM_TILE_ROWS = 128;

/**
 * The M tiles the engines' GEMM dispatch gives a step of few rows, by chip family, smallest
 * first: a step takes the first that holds its rows; one of more rows than the last takes the
 * large tile. vLLM's `cutlass_gemm_sm80_dispatch`
 * (`csrc/quantization/cutlass_w8a8/scaled_mm_c2x_sm80_dispatch.cuh` at vllm-project/vllm@0c790eba,
 * also run on sm86 and sm89) tiles M in [1, 16] with 16 rows, (16, 32] with 32 and (32, 64] with
 * 64 (mma.sync's 16 rows); its `cutlass_gemm_sm90_fp8_dispatch`
 * (`csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh` at @68f442eb) swaps A and
 * B below 65 rows, so the step's rows fill the wgmma's N, 16 for M in [1, 16] and 64 for (16, 64]
 * (an earlier release, @44d638a8, tiled all of [1, 64] with 64). From 65 rows sm80 gives wide-N
 * GEMMs (the MLP's gate and up projection, N 28,672 for Llama 3 8B: over half a layer's FLOPs)
 * 128-row tiles, so such a step keeps the ramp's whole h. Families whose small-M dispatch was not
 * read keep the whole h at every size: Blackwell (vLLM's sm100 fp8 dispatch at @2bed1868 has one
 * 256x128 tile for every M; later releases and the RTX 5090's sm120 path were not read), CDNA3
 * (ROCm's hipBLASLt picks its own tiles) and a CPU (ggml's ramp was measured whole:
 * personality.ts).
 */
const GEMM_SMALL_TILES: Partial<Record<GpuFamily, readonly number[]>> = {
  ampere: [16, 32, 64],
  ada: [16, 32, 64],
  hopper: [16, 64],
};

/**
 * What a request's way to its first token costs outside the engine's steps, by part (issue 57).
 * The engines' paths, from their sources:
 * - vLLM V1: the API server (FastAPI/uvicorn, the OpenAI request's pydantic model) tokenises in
 *   its own process (AsyncLLM's input processor), sends the request to EngineCore over ZMQ as
 *   msgpack, and EngineCore's output thread sends each step's tokens back the same way, which
 *   AsyncLLM's output handler detokenises before the SSE write: two hops (`vllm/v1/engine/
 *   core_client.py` AsyncMPClient, vllm-project/vllm@364631ab). V0 from 0.6 (MQLLMEngine) has the
 *   same two, pickled over ZMQ PUSH/PULL sockets (`vllm/engine/multiprocessing/client.py`
 *   MQLLMEngineClient._process_request, vllm-project/vllm@01750be4); 0.5's AsyncLLMEngine ran in
 *   the API server's process: none.
 * - SGLang: TokenizerManager (in the HTTP process) tokenises and sends to the Scheduler over
 *   ZMQ; the Scheduler sends tokens to the DetokenizerManager, which sends text back to the
 *   TokenizerManager: three hops (`python/sglang/srt/managers/detokenizer_manager.py`,
 *   sgl-project/sglang@1e890341).
 * - TensorRT-LLM behind Triton: the ensemble runs `preprocessing` (a Python-backend model that
 *   tokenises), `tensorrt_llm` (C++) and `postprocessing` (Python, detokenises) for each
 *   response (`all_models/inflight_batcher_llm/ensemble/config.pbtxt`,
 *   triton-inference-server/tensorrtllm_backend@039e5b4a); each Python-backend model runs in its
 *   own stub process: a request crosses into and out of two of them, four hops.
 * What each part costs, measured:
 * - Tokenising: Hugging Face's fast tokenizer (Rust) on one input takes 1.1 s for a 4 MB
 *   document of about a million tokens, 1.1 us a token (charlesxu.io/parallel-tokenizer). Two
 *   more measurements agree: tokenizers 0.21 from Python, 2.7 MiB/s on English prose (GPT-2
 *   vocabulary, one thread; gist benvanik/9090b155, Feb 2026), 1.5 us a token at about 4 bytes
 *   a token; and Llama 3.1's tokenizer on single sentences, 1.93 MB/s (huggingface/tokenizers
 *   PR #1582), about 2 us.
 * - A hop: pickling and the ZMQ transport between SGLang's TokenizerManager and Scheduler,
 *   measured at 0.1 to 0.2 ms (uw-syfi/vibesys PR #421, the "ipc-hop" span): 0.15 ms each.
 * - The fixed part is what is left of a measured whole at light load:
 *   - SGLang: 9.54 ms TTFT over a 2.63 ms mock forward for 128-token chat prompts at
 *     concurrency 1 (tenstorrent/tt-inference-server issue 3560): 6.91 ms, less three hops and
 *     128 tokens' tokenising, is 6.32 ms.
 *   - vLLM: 20 ms in all (REFERENCE-memory-and-simulator.md section 4.3: TTFT 33 ms for
 *     201-token prompts at 1 req/s, vLLM 0.11 on an H100 in a Kubernetes cluster, kubernetes-sigs/
 *     inference-perf), less two hops and 201 tokens' tokenising: 19.48 ms.
 *   - TensorRT-LLM: its 4.5 ms whole is FITTED (personality.ts); the parts are taken from it
 *     the same way at the fit point's 467-token prompts. No measurement of the Python backend's
 *     shared-memory hop was found: the ZMQ hop's figure stands in for it.
 * No source splits that fixed part into the HTTP layer (FastAPI, the OpenAI request's
 * validation, the SSE write) and the engine's own per-request CPU, so an engine's own Python
 * entry point (`clientPath` `engine`) keeps it whole. (First taken for the HTTP layer alone and
 * dropped for those clients: round three's entry-point points then read TTFT 47 % fast for
 * vLLM V0, and the issue's held-out ones fast too; docs/simulator-validation.md.) Their hops:
 * vLLM V1's LLM and AsyncLLM run EngineCore in its own process by default, the same two hops
 * (`vllm/v1/engine/llm_engine.py` EngineCoreClient.make_client with multiprocess_mode from
 * VLLM_ENABLE_V1_MULTIPROCESSING, vllm-project/vllm@001999d2); V0's LLM and AsyncLLMEngine run
 * the engine in the caller's process (`vllm/engine/async_llm_engine.py`, @9700a6aa): none;
 * sgl.Engine keeps the tokenizer manager in the caller and starts the scheduler and detokenizer
 * processes, the same three (`python/sglang/srt/entrypoints/engine.py`, sgl-project/sglang@
 * 18bfdd16); TensorRT-LLM's LLM API sends to its executor worker over ZMQ and back
 * (`tensorrt_llm/executor/proxy.py` GenerationExecutorProxy, NVIDIA/TensorRT-LLM@b93e14ca): two.
 * A request alone therefore waits HTTP + hops + tokens x tokenising before the scheduler sees
 * it; the first token's way back is counted there too (at light load TTFT is the same).
 */
const TOKENIZE_S_PER_TOKEN = 1.1e-6;
const HOP_S = 0.15e-3;
/** What a measured whole leaves to the fixed part once its hops and tokenising are taken out. */
const fixedShare = (wholeS: number, hops: number, tokens: number): number =>
  wholeS - hops * HOP_S - tokens * TOKENIZE_S_PER_TOKEN;

export const REQUEST_PATH = {
  tokenizeSPerToken: TOKENIZE_S_PER_TOKEN,
  hopS: HOP_S,
  vllmHops: 2,
  sglangHops: 3,
  tritonHops: 4,
  /** vLLM: the whole of 20 ms at 201 prompt tokens. */
  vllmFixedS: fixedShare(20e-3, 2, 201),
  /** SGLang: the whole of 6.91 ms measured at 128 prompt tokens. */
  sglangFixedS: fixedShare(9.54e-3 - 2.63e-3, 3, 128),
  /** TensorRT-LLM behind Triton: the FITTED whole of 4.5 ms at 467 prompt tokens. */
  tritonFixedS: fixedShare(4.5e-3, 4, 467),
  /** The prompt lengths those wholes were measured at (vLLM's parts serve TGI too). */
  wholeAtTokens: { vllm: 201, sglang: 128, trtllm: 467 },
} as const;

/**
 * The GEMM ramp's h for a step of `tokens` rows: `mfuHalfTokens` (h, set with 128-row tiles)
 * in proportion to the M tile the kernels take for that many rows. The ramp's loss is counted
 * in tiles: the last tile's padded rows, the last wave's idle SMs and each tile's pipeline fill
 * are all a tile's work, so a kernel of 16-row tiles loses an eighth of what one of 128 does.
 * The prefill figures h was set on (A100, H100, 2k tokens) ran 128-row tiles; a decode of a
 * few rows runs the dispatch's small-M kernels, which stream the weights. Held to
 * the large tile's h, a step of one row cost as much compute as 129 rows at the best share:
 * on chips whose tensor peak over bandwidth is low (A10G, RTX 3090) a batch-1 decode read as
 * compute-bound, 21-25 % and 111 % slow in round three (docs/simulator-validation.md), though
 * one row streams at 81 % of an RTX 3090's bandwidth (llama.cpp's CUDA llama-bench, Llama 3 8B
 * f16 at 47.40 tokens/s: XiongjieDai/GPU-Benchmarks-on-LLM-Inference README at 00dd2bde). Steps
 * above 64 rows keep h: a prefill of more is unchanged. No tiles read: h at every size.
 */
export function gemmHalfTokens(
  halfTokens: number,
  smallTiles: readonly number[] | undefined,
  tokens: number,
): number {
  // A loop, not find(): the engine's step loop calls this and stays allocation-free.
  if (smallTiles) {
    for (const rows of smallTiles) {
      if (rows >= tokens) return (halfTokens * rows) / LARGE_GEMM_TILE_ROWS;
    }
  }
  return halfTokens;
}

/** The defaults; `stepOverheadS` is a 32-layer model's (resolveEngineConfig scales it by layer). */
export const DEFAULT_EFFICIENCY: Efficiency = {
  mbu: 0.8,
  mfuMax16: 0.65,
  mfuMax8: 0.45,
  mfuHalfTokens: 128,
  stepOverheadS: STEP_OVERHEAD_PER_LAYER_S * 32,
  perSeqOverheadS: 13e-6,
  frontendLatencyS: REQUEST_PATH.vllmFixedS,
  engineHopS: REQUEST_PATH.vllmHops * REQUEST_PATH.hopS,
  entryPointHopS: REQUEST_PATH.vllmHops * REQUEST_PATH.hopS,
  tokenizeSPerPromptToken: REQUEST_PATH.tokenizeSPerToken,
  frontendChatCpuS: 0,
  scheduleOverheadS: 0,
  // TensorRT-LLM's and TGI's samplers were not read: they are given vLLM V1's greedy path, the
  // least any engine read does (lm_head's write, one fp32 copy, one read).
  samplerBytesPerLogit: SAMPLER_BYTES_PER_LOGIT.vllmV1Greedy,
};

/**
 * Measured best matmul throughput as a share of the dense peak (MAMF / theory), from the
 * Maximum Achievable Matmul FLOPS table of stas00/ml-engineering (compute/accelerator/README.md,
 * mamf-finder.py, torch matmul, mean of 100 runs): H100 SXM bf16 80.3 % and fp8 70.9 %,
 * B200 bf16 77.6 % and fp8 76.3 %, MI300X bf16 51.4 % (ROCm 6.3, TunableOp; fp8 not measured).
 */
const MAMF_SHARE = {
  h100Bf16: 0.803,
  h100Fp8: 0.709,
  b200Bf16: 0.776,
  b200Fp8: 0.763,
  mi300xBf16: 0.514,
  /** MI300X fp8: the Azure harness's best hipBLASLt GEMM, 1,159.5 of 2,615 TF (FAMILY_EFFICIENCY). */
  mi300xFp8: 1159.5 / 2615,
};

/**
 * Each chip family's departures from DEFAULT_EFFICIENCY. The defaults were set in serving on
 * A100 and H100 (bf16 prefill MFU 67 % on A100, fp8 at 40-46 % of the H100's peak, and the
 * per-sequence overhead fitted on H100 with them), so Ampere and Hopper keep them; another
 * family scales them by its matmul share against the H100's. The A100's higher share (86.9 %)
 * is not applied: the serving figures already include it. A family with no measurement keeps
 * the defaults.
 */
const FAMILY_EFFICIENCY: Record<GpuFamily, Partial<Efficiency>> = {
  ampere: {},
  hopper: {},
  blackwell: {
    mfuMax16: (DEFAULT_EFFICIENCY.mfuMax16 * MAMF_SHARE.b200Bf16) / MAMF_SHARE.h100Bf16,
    mfuMax8: (DEFAULT_EFFICIENCY.mfuMax8 * MAMF_SHARE.b200Fp8) / MAMF_SHARE.h100Fp8,
  },
  // MI300X against the H100 in one harness (Azure AI-benchmarking-guide, ND MI300X v5 and
  // ND H100 v5 results, issue 31): STREAM Triad 4.09 of 5.3 TB/s (77 %) against 2.97 of 3.35
  // (89 %); best fp8 GEMM (hipBLASLt / cuBLASLt) 1,159.5 of 2,615 TF (44 %) against 1,382.2 of
  // 1,979 (70 %). The defaults scale by each ratio.
  cdna3: {
    mfuMax16: (DEFAULT_EFFICIENCY.mfuMax16 * MAMF_SHARE.mi300xBf16) / MAMF_SHARE.h100Bf16,
    mfuMax8: (DEFAULT_EFFICIENCY.mfuMax8 * MAMF_SHARE.mi300xFp8) / (1382.2 / 1979),
    mbu: (DEFAULT_EFFICIENCY.mbu * (4.09 / 5.3)) / (2.97 / 3.35),
  },
  // No MAMF measurement of an Ada part (L4, L40, L40S, RTX 4090) was found: the defaults.
  ada: {},
  // A CPU's shares depend on the engine's kernels more than on the chip: the llamacpp
  // personality carries ggml's (personality.ts); calibrate fits the rest.
  cpu: {},
};

/**
 * The most of each peak a GEMM reaches on the family's chips: the measured best matmul (MAMF,
 * above; MI300X fp8 from the Azure harness's best hipBLASLt GEMM). No serving GEMM beats the
 * best matmul the chip runs, so an engine's share is held to it; a family not measured has none.
 * The A100's (bf16 86.9 %) is above every share in use and is left out with its serving figures.
 */
const GEMM_SHARE_CEILING: Partial<Record<GpuFamily, { mfuMax16: number; mfuMax8?: number }>> = {
  hopper: { mfuMax16: MAMF_SHARE.h100Bf16, mfuMax8: MAMF_SHARE.h100Fp8 },
  blackwell: { mfuMax16: MAMF_SHARE.b200Bf16, mfuMax8: MAMF_SHARE.b200Fp8 },
  cdna3: { mfuMax16: MAMF_SHARE.mi300xBf16, mfuMax8: MAMF_SHARE.mi300xFp8 },
};

/**
 * An engine's cost constants with its GEMM shares held to the chip's best matmul
 * (GEMM_SHARE_CEILING). TensorRT-LLM's fp8 share, 0.75, was fitted on an H100 whose best fp8
 * matmul reaches 0.709 of the peak: beyond it the fit stood for costs the step left out (the
 * sampled rows' logits among them), not for a GEMM. A user's flags are not held: a calibration
 * may fold other costs into its share on purpose.
 */
export function heldToGemmCeiling(e: Partial<Efficiency>, gpu: GpuSpec): Partial<Efficiency> {
  const c = gpu.family ? GEMM_SHARE_CEILING[gpu.family] : undefined;
  if (!c) return e;
  const held = { ...e };
  if (held.mfuMax16 !== undefined) held.mfuMax16 = Math.min(held.mfuMax16, c.mfuMax16);
  if (held.mfuMax8 !== undefined && c.mfuMax8 !== undefined) {
    held.mfuMax8 = Math.min(held.mfuMax8, c.mfuMax8);
  }
  return held;
}

/** The GPU family's efficiencies: DEFAULT_EFFICIENCY <- this <- a personality's <- user flags. */
export function familyEfficiency(gpu: GpuSpec): Partial<Efficiency> {
  return gpu.family ? FAMILY_EFFICIENCY[gpu.family] : {};
}

/** The compute path of a weight format: which tensor-core peak its GEMMs run at. */
export function gemmFormat(weights: WeightFormat, gpu: GpuSpec): ComputeFormat {
  // W8A8 uses the 8-bit peak where the chip has one; int4 (W4A16) and fp8 weights on chips
  // without fp8 (Marlin weight-only kernels) dequantise to 16 bit and run at the bf16 peak.
  if (weights.dtype === 'fp8' && gpu.peakFlops.fp8 !== undefined) return 'fp8';
  if (weights.dtype === 'int8' && gpu.peakFlops.int8 !== undefined) return 'int8';
  return 'bf16';
}

/**
 * Forward-pass times measured on the served engine itself (calibrate's `--steps`: a prefill
 * probe run one request at a time, with the prompt time the server reports): a prompt of
 * `tokens[i]` tokens, from an empty cache, processed alone in one step, took `seconds[i]`, its
 * one sampled row and the engine's per-step cost included. Ascending `tokens`, two or more.
 * A kernel's small-batch cost is not one roofline (llama.cpp's CPU GEMMs switch kernels and
 * tile shapes with the batch: docs/llamacpp-personality.md), and this table is its shape on the
 * user's own hardware, as AIConfigurator's kernel tables are NVIDIA's.
 */
export interface MeasuredSteps {
  tokens: number[];
  seconds: number[];
}

/** One scheduled sequence in a step. */
export interface StepSequence {
  /** Tokens computed in this step (1 for a decode, the chunk for a prefill). */
  newTokens: number;
  /** Tokens already in the KV cache before this step (attention context). */
  contextTokens: number;
  /** This step samples a token for it (decode, or the chunk that completes the prefill). */
  sampled: boolean;
}

/** Where a step's time went, seconds. */
export interface StepTime {
  totalS: number;
  gemmS: number;
  attentionS: number;
  commS: number;
  /**
   * The sampled rows' logits past lm_head's GEMM: their gather over the TP ranks' vocab shards
   * and the sampler's passes over them (`samplerBytesPerLogit`).
   */
  logitsS: number;
  overheadS: number;
  /** The linear layers were bound by compute (else by weight reads). */
  gemmComputeBound: boolean;
}

/**
 * Per-step time of a transformer forward pass on one TP rank (all ranks run in lock step):
 * linear layers max(FLOPs / (peak x mfu(T)), weight bytes / (bandwidth x mbu)), attention the
 * same over the KV actually read, the TP all-reduces, the sampled rows' logits (gather and
 * sampler), and a fixed plus per-sequence overhead.
 */
export class StepCostModel {
  private readonly peakGemm: number;
  private readonly peak16: number;
  private readonly mfuMax: number;
  private readonly effBandwidth: number;
  private readonly flopsPerTokenLinear: number;
  private readonly flopsPerSampledRow: number;
  private readonly denseWeightBytes: number;
  private readonly expertBytesPerLayer: number;
  private readonly moeLayers: number;
  private readonly attnFlopsPerPair: number;
  private readonly kvBytesPerToken: number;
  private readonly queryRowsPerToken: number;
  /** Bytes of one all-reduce per token: the hidden state in 16 bit. */
  private readonly allReduceBytesPerToken: number;
  /** All-reduces per step: two per layer (after attention and after the MLP). */
  private readonly allReducesPerStep: number;
  private readonly link: Interconnect;
  private readonly tp: number;
  readonly efficiency: Efficiency;
  private readonly model: ModelSpec;
  private readonly singleRowGemv: boolean;
  private readonly measured: MeasuredSteps | undefined;
  private readonly attentionKernels: { tileRows: number; perRowShare: number } | undefined;
  /** lm_head's share of a token's linear FLOPs: what an extra sampled row adds. */
  private readonly lmHeadShare: number;
  /** Vocabulary entries of one sampled row (lm_head's output width). */
  private readonly vocab: number;
  /** The M tiles of the chip's small-M GEMM kernels (GEMM_SMALL_TILES). */
  private readonly smallTiles: readonly number[] | undefined;

  constructor(options: {
    model: ModelSpec;
    gpu: GpuSpec;
    weights: WeightFormat;
    kvDtype: KvDtype;
    tp: number;
    efficiency: Efficiency;
    /**
     * A one-token step multiplies with a GEMV kernel, not the GEMM whose ramp `mfu(T)` models:
     * it runs at the best share (ggml's CPU backend: llamacpp personality).
     */
    singleRowGemv?: boolean;
    /** Steps of these many tokens take the measured time, not the roofline's (MeasuredSteps). */
    measuredSteps?: MeasuredSteps;
    /**
     * Attention by kernel rather than by ramp (ggml's CPU flash attention): a step of at least
     * `tileRows` query rows runs the tiled kernel at the best share; fewer run one row at a time
     * at `perRowShare` of it.
     */
    attentionKernels?: { tileRows: number; perRowShare: number };
  }) {
    const { model, gpu, weights, tp, efficiency } = options;
    this.model = model;
    this.efficiency = efficiency;
    this.singleRowGemv = options.singleRowGemv ?? false;
    this.measured = options.measuredSteps;
    this.attentionKernels = options.attentionKernels;
    const format = gemmFormat(weights, gpu);
    this.peak16 = gpu.peakFlops.bf16;
    this.mfuMax = format === 'bf16' ? efficiency.mfuMax16 : efficiency.mfuMax8;
    this.effBandwidth = gpu.bandwidthBytesPerS * efficiency.mbu;
    const p = paramCounts(model);
    const peak = gpu.peakFlops[format] ?? gpu.peakFlops.bf16;
    const keep = weights.unquantised;
    if (format !== 'bf16' && keep && p.activeBody > 0) {
      // The layers the checkpoint keeps unquantised run 16-bit GEMMs: the 8-bit peak is blended
      // with the 16-bit one by their share of a token's FLOPs (experts by top-k of E).
      const expertShare = model.moe ? model.moe.topK / model.moe.experts : 0;
      const kept = Math.min(1, (keep.denseParams + keep.expertParams * expertShare) / p.activeBody);
      const secondsPerFlop =
        (1 - kept) / (peak * this.mfuMax) + kept / (this.peak16 * efficiency.mfuMax16);
      this.peakGemm = 1 / (secondsPerFlop * this.mfuMax);
    } else {
      this.peakGemm = peak;
    }
    const w = weightBytes(model, weights);
    this.flopsPerTokenLinear = (2 * p.activeBody) / tp;
    this.flopsPerSampledRow = (2 * p.lmHead) / tp;
    this.lmHeadShare =
      this.flopsPerSampledRow / (this.flopsPerTokenLinear + this.flopsPerSampledRow || 1);
    // The input embedding is a row lookup, not a full read; lm_head is read every step.
    const lmHeadBytes = p.lmHead * (w.embedding / p.embedding);
    // Experts a checkpoint keeps unquantised make the average expert heavier.
    const expertCount = p.moeLayers * (model.moe?.experts ?? 0);
    const expertBytes = expertCount > 0 ? w.experts / expertCount : 0;
    this.denseWeightBytes = (w.body - w.experts + lmHeadBytes) / tp;
    this.expertBytesPerLayer = expertBytes / tp;
    this.moeLayers = p.moeLayers;
    // Attention FLOPs per (query token, context token) pair: QK^T and PV, 2 FLOPs each.
    const qkDim = model.mla ? model.mla.kvLoraRank + model.mla.ropeHeadDim : model.headDim;
    this.attnFlopsPerPair = (4 * model.layers * model.queryHeads * qkDim) / tp;
    // Query heads a KV head serves: attention kernels (FlashAttention, FlashInfer) pack them
    // into one tile's rows. MLA's latent is one KV head for all of them.
    this.queryRowsPerToken = model.mla ? model.queryHeads : model.queryHeads / model.kvHeads;
    this.kvBytesPerToken = kvBytesPerToken(model, options.kvDtype, tp);
    this.allReduceBytesPerToken = model.hiddenSize * DTYPE_BYTES.bf16;
    this.allReducesPerStep = 2 * model.layers;
    this.link = gpu.interconnect;
    this.tp = tp;
    this.vocab = model.vocabSize;
    this.smallTiles = gpu.family ? GEMM_SMALL_TILES[gpu.family] : undefined;
  }

  /**
   * The logits of `rows` sampled rows past lm_head: each rank's 16-bit vocab shard gathered
   * into whole rows under TP (every engine read: vLLM's and SGLang's `LogitsProcessor`), then
   * the sampler's passes over the whole vocab at the memory bandwidth, on every rank alike.
   */
  private logitsTime(rows: number): number {
    if (rows <= 0) return 0;
    const gatherS =
      this.tp > 1 ? ringAllGatherS(this.link, this.tp, rows * this.vocab * DTYPE_BYTES.bf16) : 0;
    return gatherS + (rows * this.vocab * this.efficiency.samplerBytesPerLogit) / this.effBandwidth;
  }

  /**
   * mfu(T) = mfuMax x T / (T + h(T)), h(T) = `gemmHalfTokens`; mfuMax at one token with
   * `singleRowGemv`.
   */
  mfu(tokens: number): number {
    if (tokens === 1 && this.singleRowGemv) return this.mfuMax;
    return (
      (this.mfuMax * tokens) /
      (tokens + gemmHalfTokens(this.efficiency.mfuHalfTokens, this.smallTiles, tokens))
    );
  }

  /**
   * Time of one step. Accumulated sums rather than a sequence list keep the engine's hot loop
   * allocation-free: `tokens` computed in all, `sampledRows`, `sequences`, the sum over all
   * sequences of newTokens x context + newTokens^2 / 2 (attention pairs) and of the KV tokens
   * read and written.
   */
  stepTime(s: {
    tokens: number;
    sampledRows: number;
    sequences: number;
    attentionPairs: number;
    kvTokensTouched: number;
  }): StepTime {
    const e = this.efficiency;
    const flops = this.flopsPerTokenLinear * s.tokens + this.flopsPerSampledRow * s.sampledRows;
    let weightBytesRead = this.denseWeightBytes;
    if (this.moeLayers > 0 && this.model.moe) {
      // Experts touched by T tokens routing top-k of E each: E (1 - (1 - k/E)^T) per layer.
      const { experts, topK } = this.model.moe;
      const touched = experts * (1 - (1 - topK / experts) ** s.tokens);
      weightBytesRead += this.moeLayers * touched * this.expertBytesPerLayer;
    }
    const gemmCompute = s.tokens > 0 ? flops / (this.peakGemm * this.mfu(s.tokens)) : 0;
    const gemmMemory = weightBytesRead / this.effBandwidth;
    const attentionS = this.attentionTime(
      s.tokens,
      s.sequences,
      s.attentionPairs,
      s.kvTokensTouched,
    );
    const commS =
      this.tp > 1
        ? this.allReducesPerStep *
          allReduce(this.link, this.tp, this.allReduceBytesPerToken * s.tokens).seconds
        : 0;
    const gemmComputeBound = gemmCompute > gemmMemory;
    const measured = this.measuredTime(s.tokens);
    if (measured !== undefined) {
      // The measured step less what differs from the probe's: attention over the context this
      // step reads (the probe's prompt attended only to itself), the other sampled rows (at
      // lm_head's share of the measured cost of as many tokens) and the other sequences' cost.
      const n = s.tokens;
      const otherRowsS =
        s.sampledRows > 1
          ? this.lmHeadShare * (this.interpolated(s.sampledRows) - this.interpolated(1))
          : 0;
      const overheadS = e.perSeqOverheadS * Math.max(0, s.sequences - 1);
      // The probe sampled one row; the others' logits are this step's own.
      const logitsS = s.sampledRows > 1 ? this.logitsTime(s.sampledRows) - this.logitsTime(1) : 0;
      const totalS = Math.max(
        0,
        measured -
          this.attentionTime(n, 1, (n * n) / 2, n) +
          attentionS +
          otherRowsS +
          logitsS +
          overheadS,
      );
      return {
        totalS,
        gemmS: Math.max(0, totalS - attentionS - logitsS - overheadS),
        attentionS,
        commS: 0,
        logitsS,
        overheadS,
        gemmComputeBound,
      };
    }
    const overheadS = e.stepOverheadS + e.perSeqOverheadS * s.sequences;
    const gemmS = Math.max(gemmCompute, gemmMemory);
    const logitsS = this.logitsTime(s.sampledRows);
    return {
      totalS: gemmS + attentionS + commS + logitsS + overheadS,
      gemmS,
      attentionS,
      commS,
      logitsS,
      overheadS,
      gemmComputeBound,
    };
  }

  /**
   * Attention's time: its FLOPs at the kernel's share, or the KV it reads, whichever is longer.
   * A sequence's attention runs over its own KV: what fills the tensor cores is that sequence's
   * query tokens times the query heads each KV head serves, not the step's tokens. Decode
   * kernels (FlashInfer's, FlashAttention's packed GQA) put a KV head's query heads into the 16
   * rows of an MMA instruction (mma.m16n8k16) and split the context over the SMs: a decode (4
   * heads a KV head for Llama 3 8B, 8 for 70B) fills a quarter to a half of them and reads its
   * KV at memory speed; more sequences add KV, not rows. Prefill kernels tile 128 query rows per
   * block over the heads, so a short prompt fills few SMs: the GEMM ramp over its rows, with the
   * whole h at every length (not `gemmHalfTokens`): the kernel's query block is fixed by head
   * dimension and architecture, not by the prompt's length, unlike the linear layers' M-bucket
   * dispatch (FlashAttention-2 `run_mha_fwd_hdim128`, `flash_fwd_launch_template.h`: 128 rows on
   * sm80, 64 for causal on sm86/sm89). (ggml's CPU kernel, `attentionKernels`, tiles the whole
   * ubatch's rows together.)
   */
  private attentionTime(
    tokens: number,
    sequences: number,
    pairs: number,
    kvTokensTouched: number,
  ): number {
    const e = this.efficiency;
    const k = this.attentionKernels;
    const perSequence = tokens / Math.max(1, sequences);
    const rows = perSequence * this.queryRowsPerToken;
    const mfu =
      tokens === 0
        ? 1
        : k
          ? e.mfuMax16 * (tokens >= k.tileRows ? 1 : k.perRowShare)
          : perSequence <= 1
            ? e.mfuMax16 * Math.min(1, rows / ATTENTION_MMA_ROWS)
            : (e.mfuMax16 * rows) / (rows + e.mfuHalfTokens);
    return Math.max(
      (this.attnFlopsPerPair * pairs) / (this.peak16 * mfu),
      (this.kvBytesPerToken * kvTokensTouched) / this.effBandwidth,
    );
  }

  /** The measured time of a step of `tokens`; undefined outside the probe's sizes. */
  private measuredTime(tokens: number): number | undefined {
    const t = this.measured?.tokens;
    if (!t || tokens < t[0] || tokens > t[t.length - 1]) return undefined;
    return this.interpolated(tokens);
  }

  /** Linear between the probe's sizes, its first or last size's time beyond them. */
  private interpolated(tokens: number): number {
    const { tokens: t, seconds } = this.measured as MeasuredSteps;
    if (tokens <= t[0]) return seconds[0];
    let i = 1;
    while (i < t.length - 1 && t[i] < tokens) i++;
    const f = Math.min(1, (tokens - t[i - 1]) / (t[i] - t[i - 1]));
    return seconds[i - 1] + f * (seconds[i] - seconds[i - 1]);
  }

  /** Weight bytes one step reads on one rank when a single token runs (dense part + lm_head). */
  get weightBytesPerDecodeStep(): number {
    return (
      this.denseWeightBytes +
      (this.moeLayers > 0
        ? this.moeLayers * (this.model.moe?.topK ?? 0) * this.expertBytesPerLayer
        : 0)
    );
  }
}
