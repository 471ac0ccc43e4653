import { type ProfileSampler, vllmDefaults } from '../memory/footprint.js';
import type { GpuSpec } from '../memory/hardware.js';
import type { ModelSpec } from '../memory/model.js';
import {
  DEFAULT_EFFICIENCY,
  type Efficiency,
  REQUEST_PATH,
  SAMPLER_BYTES_PER_LOGIT,
} from './roofline.js';

/**
 * Serving-engine personalities: which engine's defaults, memory rule, scheduler and costs the
 * simulated engine follows. `vllm-v1` is the default (today's vLLM).
 */
// TGI is not among them: its router's batching (waiting_served_ratio, max_waiting_tokens) and
// its memory rule are not modelled, and a TGI point run as vLLM misses its TTFT by 50-80 %.
// `llamacpp` is llama.cpp's llama-server on its CPU backend (docs/llamacpp-personality.md).
export const PERSONALITY_IDS = [
  'vllm-v1',
  'vllm-v0',
  'vllm-v0.5',
  'sglang',
  'trtllm',
  'tgi',
  'llamacpp',
] as const;
export type PersonalityId = (typeof PERSONALITY_IDS)[number];
export const DEFAULT_PERSONALITY: PersonalityId = 'vllm-v1';

/** How a data-parallel front end picks a replica for each request. */
export const LOAD_BALANCERS = ['round-robin', 'least-loaded'] as const;
export type LoadBalancer = (typeof LOAD_BALANCERS)[number];

/**
 * Who sends the requests, and so which parts of the request path (roofline.ts REQUEST_PATH)
 * they take: `http`, a client of the server's OpenAI API (all of them); `engine`, the engine's
 * own Python entry point (vLLM's LLM.generate and AsyncLLMEngine, sgl.Engine, TensorRT-LLM's
 * LLM API), which still tokenises and hands the request to the engine's process over its own
 * hops, and keeps the path's fixed part (no source splits the HTTP layer out of it); `none`,
 * token ids straight to the scheduler (trtllm-bench, gptSessionBenchmark).
 */
export const CLIENT_PATHS = ['http', 'engine', 'none'] as const;
export type ClientPath = (typeof CLIENT_PATHS)[number];

/** vLLM's V0 engine, of any version (its scheduler, memory rule and block watermark). */
export const isVllmV0 = (id: PersonalityId): boolean => id === 'vllm-v0' || id === 'vllm-v0.5';

/**
 * Engines that reserve every admitted request's blocks to its full length (prompt + max
 * output) and so never preempt: TensorRT-LLM's GUARANTEED_NO_EVICT and TGI's queue.
 */
export const reservesToMaxLength = (id: PersonalityId): boolean => id === 'trtllm' || id === 'tgi';

export function isPersonalityId(id: string): id is PersonalityId {
  return (PERSONALITY_IDS as readonly string[]).includes(id);
}

/** A release as major, minor, patch (`0.11.0`, `v0.14`, `0.8.5.post1`), or undefined. */
export function parseEngineVersion(text: string): [number, number, number] | undefined {
  const m = /^v?(\d+)\.(\d+)(?:\.(\d+))?(?![\d])/.exec(text.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : undefined;
}

/** The problem with an `--engine-version` that names no release, or undefined. */
export const engineVersionProblem = (text: string): string | undefined =>
  parseEngineVersion(text)
    ? undefined
    : `--engine-version ${text} is not a release; give one as 0.11.0`;

/** Whether release `v` is `w` or later (missing parts read 0). */
export const atLeast = (v: readonly number[], w: readonly number[]): boolean => {
  for (let i = 0; i < 3; i++) if ((v[i] ?? 0) !== (w[i] ?? 0)) return (v[i] ?? 0) > (w[i] ?? 0);
  return true;
};

/** What the simulator models of a vLLM release's start-up memory, where releases differ. */
export interface VllmRelease {
  profileSampler: ProfileSampler;
  /** CUDA-graph memory estimated and taken from the KV budget before the pool is sized. */
  cudaGraphsInBudget: boolean;
  gpuMemoryUtilization: number;
}

/**
 * A vLLM release's profiling sampler, CUDA-graph accounting and default memory fraction (the
 * latest where `version` is absent), from vLLM's history:
 * - V0 profiles with top_p 0.99 and top_k vocab - 1 (`model_runner.py profile_run`) and sorts;
 *   it samples with FlashInfer only with VLLM_USE_FLASHINFER_SAMPLER=1.
 * - V1 up to 0.11.0 samples with FlashInfer where it is installed (the official image has it):
 *   `VLLM_USE_FLASHINFER_SAMPLER` unset meant on; PR #26859 (Oct 2025, in 0.11.1) made it
 *   opt-in, so 0.11.1 to 0.16 sort with PyTorch; PR #33538 (Feb 2026, in 0.17) added the Triton
 *   top-k/top-p kernel (from 8 rows: fewer sort, a few MB), and PR #40376 (Apr 2026) turned
 *   FlashInfer back on.
 * - ROCm always sorts (`TopKTopPSampler`: FlashInfer is CUDA's; the aiter sampler is disabled).
 * - From 0.21 the profile estimates CUDA-graph memory and takes it from the budget, and the
 *   default gpu_memory_utilization is 0.92 (PR #38284: "Enabled by default as of v0.21.0").
 */
export function vllmRelease(
  id: PersonalityId,
  gpu: GpuSpec,
  version?: readonly [number, number, number],
): VllmRelease {
  if (isVllmV0(id)) {
    return { profileSampler: 'sort', cudaGraphsInBudget: false, gpuMemoryUtilization: 0.9 };
  }
  const latest = version === undefined;
  const sorts =
    gpu.family === 'cdna3' ||
    (!latest && atLeast(version, [0, 11, 1]) && !atLeast(version, [0, 17, 0]));
  const v021 = latest || atLeast(version, [0, 21, 0]);
  return {
    profileSampler: sorts ? 'sort' : 'fused',
    cudaGraphsInBudget: v021,
    gpuMemoryUtilization: v021 ? 0.92 : 0.9,
  };
}

/**
 * vLLM 0.11.0 parses the chat template on every chat request, on the API server's one event
 * loop: PR #25794 (a security fix, 2025-09-27, in 0.11.0) added `resolve_chat_template_kwargs`,
 * which builds a Jinja sandbox and parses the template each call (`vllm/entrypoints/
 * chat_utils.py`); PR #26227 (2025-10-04, after the 0.11.0 release, so in 0.11.1) cached it
 * (`lru_cache`). The same kind of uncached parse cost 6-8 s per 1,000 requests before PR #20065.
 * The time it costs is FITTED (`frontendChatCpuS`): the mean of the two fit points
 * gpustack-vllm0110-qwen3-14b-{h100,a100}-random128-4-offline (15.3 and 10.1 ms: their hosts'
 * CPUs differ), each 1,000 chat requests of 128 tokens at once whose mean TTFT (18.3 and 19.5 s)
 * is mostly the front end; the Qwen3-32B bursts on the same pages check it (they read 14.7 and
 * 9.2 ms).
 */
export const VLLM_0110_CHAT_TEMPLATE_S = 12.7e-3;
const vllmUncachedChatTemplate = (v: readonly number[]): boolean =>
  v[0] === 0 && v[1] === 11 && v[2] === 0;

/** The engine settings a personality fills in where the user gave none. */
export interface PersonalityDefaults {
  /** The memory fraction of the personality's own rule. */
  gpuMemoryUtilization: number;
  /** KV block (page) size in tokens. */
  blockSize: number;
  /** Most running sequences; SGLang's comes from its pool (`sglangMaxRunningRequests`). */
  maxNumSeqs: number;
  /** Tokens per step with the final chunked-prefill setting. */
  maxNumBatchedTokens: number;
  chunkedPrefill: boolean;
  prefixCaching: boolean;
  /** vLLM's: its release's profiling sampler and CUDA-graph accounting (`vllmRelease`). */
  release?: Omit<VllmRelease, 'gpuMemoryUtilization'>;
  /** SGLang's overlap scheduler: a prefill's first token leaves at the next step's end (`sglangOverlap`). */
  firstTokenAfterNextStep?: boolean;
}

/**
 * Whether an SGLang release runs its overlap scheduler by default (`event_loop_overlap`,
 * python/sglang/srt/managers/scheduler.py), absent: today's. PR #2067 turned it on (merged
 * 2024-11-19, so from 0.3.6; the v0.4 release post of 2024-12-04 presents it as the
 * zero-overhead batch scheduler). It launches a batch before it processes the one before, so a
 * prefill's first token is sent on once the next batch has gone out: "we delayed the
 * processing of the first batch in favor of launching the kernels for the next batch first"
 * (the PR's author, on why the CI's median TTFT bound rose from 80 to 86 ms), and "the TTFT ...
 * includes an additional decode latency" without prefill/decode disaggregation (PR #25772,
 * May 2026, closed unmerged). PR #11856 (Oct 2025) processes a prefill before launching a second
 * prefill after it, behind an environment variable its reviewer kept from the default ("Do not
 * make it a default behavior"). Later tokens come out as their steps end: the next batch's
 * launch overlaps the running one.
 */
export function sglangOverlap(version: readonly [number, number, number] | undefined): boolean {
  return !version || atLeast(version, [0, 3, 6]);
}

const MiB = 1024 * 1024;

/**
 * Each engine's defaults, from its own source. `chunkedPrefill` is the user's setting if given
 * (the default budget depends on it).
 */
export function personalityDefaults(
  id: PersonalityId,
  s: {
    gpu: GpuSpec;
    model: ModelSpec;
    tp: number;
    maxModelLen: number;
    chunkedPrefill?: boolean;
    /** The release (vLLM's: `vllmRelease`; SGLang's: `sglangOverlap`); the latest where absent. */
    version?: [number, number, number];
  },
): PersonalityDefaults {
  switch (id) {
    case 'vllm-v0':
    case 'vllm-v0.5': {
      // vLLM 0.6.x (and 0.5.x, the same in these) `EngineArgs.create_engine_config`: chunked prefill turns itself on for
      // max_model_len > 32K on GPUs (not with sliding windows); `SchedulerConfig`: budget 512
      // with chunked prefill, else max(max_model_len, 2048); max_num_seqs 256; block 16;
      // prefix caching off.
      const chunked =
        s.chunkedPrefill ?? (s.maxModelLen > 32 * 1024 && s.model.slidingWindow === undefined);
      const { gpuMemoryUtilization, ...release } = vllmRelease(id, s.gpu);
      return {
        gpuMemoryUtilization,
        release,
        blockSize: 16,
        maxNumSeqs: 256,
        maxNumBatchedTokens: chunked ? 512 : Math.max(s.maxModelLen, 2048),
        chunkedPrefill: chunked,
        prefixCaching: false,
      };
    }
    case 'sglang': {
      // SGLang `server_args.py _handle_gpu_memory_settings` (v0.5.3 on; read at v0.5.5, commit
      // 0c006b8), gpu_mem in MiB as nvidia-smi reports it: chunked_prefill_size and
      // cuda_graph_max_bs by memory class (below 20 / 35 / 60 / 160 GiB, TP < 4 or not), then
      // reserved = 512 + 1.5 x max(chunk, 2048) + 2 x cuda_graph_max_bs + TP x 128 MiB, at
      // least 10 GiB above 60 GiB, and mem_fraction_static = round((gpu_mem - reserved) /
      // gpu_mem, 3); page size 1; radix (prefix) cache on; chunked prefill on.
      const gpuMiB = s.gpu.smiMemoryMiB ?? s.gpu.memoryBytes / MiB;
      const small = s.tp < 4;
      const [chunk, graphBs] =
        gpuMiB < 20 * 1024
          ? [2048, 8]
          : gpuMiB < 35 * 1024
            ? [2048, small ? 24 : 80]
            : gpuMiB < 60 * 1024
              ? [4096, small ? 32 : 160]
              : gpuMiB < 160 * 1024
                ? [8192, small ? 256 : 512]
                : [16384, 512];
      const chunked = s.chunkedPrefill ?? true;
      // Without chunking the activations are sized by max_prefill_tokens (16384).
      const prefill = chunked ? chunk : 16384;
      let reservedMiB = 512 + 1.5 * Math.max(prefill, 2048) + 2 * graphBs + s.tp * 128;
      if (gpuMiB > 60 * 1024) reservedMiB = Math.max(reservedMiB, 10 * 1024);
      return {
        gpuMemoryUtilization: Math.round(((gpuMiB - reservedMiB) / gpuMiB) * 1000) / 1000,
        blockSize: 1,
        maxNumSeqs: 2048,
        // Without chunking a prompt must fit one prefill batch (max_prefill_tokens 16384).
        maxNumBatchedTokens: chunked ? chunk : Math.max(16384, s.maxModelLen),
        chunkedPrefill: chunked,
        prefixCaching: true,
        firstTokenAfterNextStep: sglangOverlap(s.version),
      };
    }
    case 'trtllm': {
      // TensorRT-LLM `BuildConfig` (tensorrt_llm/builder.py) and `trtllm-serve`: max_batch_size
      // 2048, max_num_tokens 8192, enable_chunked_prefill off; trtllm-build
      // `--tokens_per_block` 64; `KvCacheConfig` free_gpu_memory_fraction 0.9, block reuse off
      // (`executor.h` `KvCacheConfig(bool enableBlockReuse = false, ...)`; later releases turn it on,
      // with partial-block reuse, not modelled); --enable-prefix-caching turns it on.
      // max_num_tokens stays 8192 without chunking: the PyTorch backend refuses a longer
      // prompt instead (`llmapi/llm.py _check_arguments`: "should not exceed max_num_tokens"),
      // and the engine builder raises it only with context FMHA off (`check_max_num_tokens`),
      // which the default builds have on. Its profiling prefill is max_num_tokens long.
      const chunked = s.chunkedPrefill ?? false;
      return {
        gpuMemoryUtilization: 0.9,
        blockSize: 64,
        maxNumSeqs: 2048,
        maxNumBatchedTokens: 8192,
        chunkedPrefill: chunked,
        prefixCaching: false,
      };
    }
    case 'tgi': {
      // TGI 2.0.2 to 2.3 (`launcher/src/main.rs`, `router/src/infer.rs`, `router/src/queue.rs`
      // at v2.0): cuda_memory_fraction 1.0; paged blocks of 16 (`cache_manager.py`); no
      // max_batch_size, the token budgets bound the batch; max_batch_prefill_tokens =
      // max_input_tokens + 50 with max_input_tokens = max_total_tokens - 1 (`max_model_len`
      // here, itself min(max_position_embeddings, 4096) by default: resolveEngineConfig); no
      // chunking (prefill chunking came with 2.4 for flash models), no prefix cache (2.3).
      return {
        gpuMemoryUtilization: 1,
        blockSize: 16,
        maxNumSeqs: TGI.noBatchLimit,
        maxNumBatchedTokens: s.maxModelLen - 1 + 50,
        chunkedPrefill: s.chunkedPrefill ?? false,
        prefixCaching: false,
      };
    }
    case 'llamacpp': {
      // llama-server (LLAMACPP, below): with no --parallel, 4 slots; n_batch 2048 tokens per
      // iteration, never above n_ctx; no paging, so one cell per token (block 1); prompts are
      // processed n_batch tokens at a time beside the slots' decodes (continuous batching on);
      // the KV buffer is the whole n_ctx, not a share of memory. Its per-slot prompt cache is on
      // (`cache_prompt` true by default in `task_params`): each slot keeps its last request's
      // tokens (slotCache.ts); --no-enable-prefix-caching stands for cache_prompt false.
      return {
        gpuMemoryUtilization: 1,
        blockSize: 1,
        maxNumSeqs: LLAMACPP.autoParallel,
        maxNumBatchedTokens: LLAMACPP.nBatch,
        chunkedPrefill: true,
        prefixCaching: true,
      };
    }
    default: {
      // vLLM V1 (`vllmDefaults`): gpu_memory_utilization by release (`vllmRelease`), block 16,
      // chunked prefill on; without chunking the budget must hold max_model_len. Prefix caching
      // on, as V1 has it (`EngineArgs.enable_prefix_caching` None -> True for the V1 engine; the
      // vLLM V1 blog, Jan 2025: "enabled by default" at zero overhead on a miss);
      // --no-enable-prefix-caching.
      const d = vllmDefaults(s.gpu);
      const chunked = s.chunkedPrefill ?? true;
      const { gpuMemoryUtilization, ...release } = vllmRelease(id, s.gpu, s.version);
      return {
        gpuMemoryUtilization,
        release,
        blockSize: 16,
        maxNumSeqs: d.maxNumSeqs,
        maxNumBatchedTokens: chunked
          ? d.maxNumBatchedTokens
          : Math.max(d.maxNumBatchedTokens, s.maxModelLen),
        chunkedPrefill: chunked,
        prefixCaching: true,
      };
    }
  }
}

/**
 * llama.cpp's llama-server, as built by the tests (node-llama-cpp 3.21.1's bundle: llama.cpp
 * commit 80fb11ac73e66d89eae2c6a91d8a77428fa733ed, `llama-server --version` 0.4.0-dev); paths are
 * in that tree.
 * - `common/common.h` `common_params`: n_ctx 0 (the model's training context), n_batch 2048
 *   ("logical batch size for prompt processing"), n_ubatch 512 ("physical batch size"),
 *   cache_type_k/v F16.
 * - `common/arg.cpp` `common_params_parser_init`: the server's n_parallel is -1 (auto), and
 *   `tools/server/server.cpp` turns auto into 4 slots with kv_unified = true; a --parallel given
 *   keeps kv_unified false (`common.h`) unless --kv-unified is given too.
 * - `src/llama-context.cpp` (constructor): n_ctx is padded up to a multiple of 256; without a
 *   unified cache each sequence gets n_ctx_seq = pad256(n_ctx / n_seq_max) and n_ctx becomes
 *   n_ctx_seq x n_seq_max; with one, every sequence may use the whole n_ctx. n_batch =
 *   min(n_ctx, n_batch), n_ubatch = min(n_batch, n_ubatch).
 */
export const LLAMACPP = {
  nBatch: 2048,
  nUbatch: 512,
  autoParallel: 4,
  ctxPad: 256,
} as const;

/** The slots' context: the padded n_ctx and each slot's share (llama-context.cpp). */
export function llamacppContext(s: { ctxSize: number; slots: number; kvUnified: boolean }): {
  /** The KV buffer's cells (tokens), after padding. */
  ctxTokens: number;
  /** What one slot may hold: a request's prompt must be shorter, prompt + output no longer. */
  slotTokens: number;
} {
  const pad = (n: number) => Math.ceil(n / LLAMACPP.ctxPad) * LLAMACPP.ctxPad;
  const ctx = pad(s.ctxSize);
  if (s.kvUnified) return { ctxTokens: ctx, slotTokens: ctx };
  const slot = pad(Math.floor(ctx / s.slots));
  return { ctxTokens: slot * s.slots, slotTokens: slot };
}

/**
 * SGLang's default max_running_requests from its token pool: `model_runner.py
 * init_memory_pool` sizes the request pool min(max(pool / context_len x 512, 2048), 4096) and
 * the scheduler (`tp_worker.py`) caps running requests at min(pool // 2, that).
 */
export function sglangMaxRunningRequests(poolTokens: number, contextLen: number): number {
  const requestPool = Math.min(Math.max(Math.floor((poolTokens / contextLen) * 512), 2048), 4096);
  return Math.max(1, Math.min(Math.floor(poolTokens / 2), requestPool));
}

/**
 * SGLang's admission reservation (`schedule_policy.py PrefillAdder`, `environ.py`): each running
 * request reserves min(remaining max_new_tokens, 4096) x new_token_ratio tokens; the ratio starts
 * at 0.7, decays by (0.7 - 0.7 x 0.14) / 600 per decode batch to 0.098, and after a retraction
 * jumps to (decoded + 20 x requests) / max_new_tokens of the batch (`retract_decode`).
 */
/**
 * TGI's router (`router/src/infer.rs` batching loop, v2.0.2 on): while a batch runs, a new
 * one is formed only when at least `waitingServedRatio` x the running requests are queued, or
 * after `maxWaitingTokens` decode steps; its prefill is a forward of its own, the running
 * requests waiting (`Request are waiting because we cannot concatenate the batches`). Each
 * admitted request's blocks for input + max_new_tokens are reserved up front (`queue.rs`).
 */
export const TGI = {
  /** `--waiting-served-ratio` (1.2 before 2.0.2). */
  waitingServedRatio: 0.3,
  /** `--max-waiting-tokens`. */
  maxWaitingTokens: 20,
  /** `--max-total-tokens` default: min(max_position_embeddings, 4096). */
  maxTotalTokens: 4096,
  /** No `--max-batch-size` by default: a bound no batch reaches. */
  noBatchLimit: 1 << 20,
} as const;

export const SGLANG_NEW_TOKEN_RATIO = {
  init: 0.7,
  min: 0.7 * 0.14,
  decayPerStep: (0.7 - 0.7 * 0.14) / 600,
  clipMaxNewTokens: 4096,
  retractDecodeSteps: 20,
} as const;

/**
 * Each personality's cost constants over DEFAULT_EFFICIENCY (and the GPU family's); user flags
 * override them.
 */
export function personalityEfficiency(
  id: PersonalityId,
  model: ModelSpec,
  version?: readonly [number, number, number],
): Partial<Efficiency> {
  switch (id) {
    case 'vllm-v1':
      return version && vllmUncachedChatTemplate(version)
        ? { frontendChatCpuS: VLLM_0110_CHAT_TEMPLATE_S }
        : {};
    case 'vllm-v0':
      // CPU per schedule not overlapped with the GPU (scheduling, input preparation), paid once
      // per multi-step window (`--num-scheduler-steps`). Before 0.6 it was 3.8 ms (29 % of a
      // 13 ms Llama-3-8B H100 step: the vLLM v0.6.0 blog, vllm-project.github.io
      // _posts/2024-09-05-perf-update.md); 0.6 moved output processing off that path and no
      // source gives what is left, so this one constant is FITTED: 1.8 ms makes the fit point
      // ip-h100-llama31-8b-v0-090-rate40 (test/fixtures/sim-validation/points.json: vLLM 0.9 V0,
      // 40 req/s) read its published mean TPOT (17.0 ms).
      // Its LLM and AsyncLLMEngine run the engine in the caller's process (REQUEST_PATH).
      return {
        scheduleOverheadS: 1.8e-3,
        samplerBytesPerLogit: SAMPLER_BYTES_PER_LOGIT.vllmV0,
        entryPointHopS: 0,
      };
    case 'vllm-v0.5':
      // vLLM 0.5.x processed each step's outputs on the CPU in step with the GPU (async output
      // processing, PR 7049, first shipped in 0.6.0): the 3.8 ms of scheduling and output
      // gathering per step of the v0.6.0 blog (29 % of a 13 ms Llama-3-8B H100 step on 0.5.3),
      // and `_process_model_outputs` growing with the batch, 0.2 ms at 1 and 3.4 ms at 32
      // sequences (RFC 6913, Llama 70B on 4x H100): about 0.1 ms more per sequence. No
      // multi-step scheduling (0.6.0). The API server's share (33 % of that step, in the same
      // process before 0.6) is not modelled.
      // Its AsyncLLMEngine ran inside the API server's process (the ZMQ front end came with
      // 0.5.4's frontend multiprocessing and 0.6's MQLLMEngine): no hop to an engine process.
      return {
        scheduleOverheadS: 3.8e-3,
        perSeqOverheadS: DEFAULT_EFFICIENCY.perSeqOverheadS + (3.4e-3 - 0.2e-3) / 31,
        samplerBytesPerLogit: SAMPLER_BYTES_PER_LOGIT.vllmV0,
        engineHopS: 0,
        entryPointHopS: 0,
      };
    case 'sglang':
      // Request path: SGLang's CPU path measured against a mock forward (tenstorrent/
      // tt-inference-server issue 3560: batch-1 TTFT 9.54 ms over a 2.63 ms forward), 6.9 ms
      // for 128-token prompts, in parts (REQUEST_PATH): its fixed part, three hops (tokenizer
      // manager, scheduler, detokenizer) and tokenising. The time per step not hidden behind
      // the GPU is FITTED:
      // that measurement's 0.31 ms per token is today's overlap scheduler (on by default since
      // 0.3.6: `sglangOverlap`), and the fit point sgl030-l31-8b-a100-tp1-sharegpt-rps4 (SGLang 0.3.0, median TPOT
      // 13.2 ms) reads right at 2.1 ms; older versions' points need it, newer ones may be faster.
      // (It read right at 1.0 ms while the GEMM ramp charged its 8-30-row decodes the compute of
      // 128-row tiles; refitted on the same point once the small tiles came: roofline.ts
      // gemmHalfTokens.) It grows with the layers as the default does
      // (STEP_OVERHEAD_PER_LAYER_S): 2.1 ms is that 32-layer model's.
      return {
        frontendLatencyS: REQUEST_PATH.sglangFixedS,
        engineHopS: REQUEST_PATH.sglangHops * REQUEST_PATH.hopS,
        entryPointHopS: REQUEST_PATH.sglangHops * REQUEST_PATH.hopS,
        stepOverheadS: (2.1e-3 / 32) * model.layers,
        samplerBytesPerLogit: SAMPLER_BYTES_PER_LOGIT.sglang03,
      };
    case 'trtllm':
      // FITTED, as no published figure fixes them (docs/cli.md "Validation"): the Triton
      // request path, 4.5 ms in all for 467-token prompts, from the fit point
      // trt014-online-l31-8b-h100-tp1-467-256-qps2 (mean TTFT 23 ms at 2 req/s), in parts
      // (REQUEST_PATH: the ensemble's four Python-backend hops and tokenising, the rest its fixed
      // part; the parts' split is sourced, their sum still the fit's), and the share of the
      // fp8 peak its fp8 GEMMs reach, 0.75, from trt014-l31-8b-h100-fp8-tp1-128-128 (26,933
      // output tok/s offline). The share is above the H100's best fp8 matmul (0.709): on Hopper
      // it is held there (`heldToGemmCeiling`). trtllm-serve's Python server is another path,
      // not modelled.
      return {
        frontendLatencyS: REQUEST_PATH.tritonFixedS,
        engineHopS: REQUEST_PATH.tritonHops * REQUEST_PATH.hopS,
        // The LLM API's proxy to its executor worker and back (REQUEST_PATH).
        entryPointHopS: 2 * REQUEST_PATH.hopS,
        mfuMax8: 0.75,
      };
    case 'llamacpp':
      return LLAMACPP_EFFICIENCY;
    default:
      return {};
  }
}

/**
 * llama.cpp's CPU backend over DEFAULT_EFFICIENCY. ggml multiplies a one-row batch with its
 * vector-dot GEMV (`ggml/src/ggml-cpu/llamafile/sgemm.cpp` llamafile_sgemm: "only enable sgemm
 * for prompt processing", n < 2 falls back), which streams the weights at memory speed: the
 * engine runs one-token steps with no small-GEMM ramp (StepCostModel's `singleRowGemv`). From two
 * rows on, tinyBLAS tiles of at most 4 x 4 (`tinyBLAS_Q0_AVX::mnpack`) take a fixed cost per
 * pass over the weights and then a cost per token: t(T) = b (T + h), the roofline's ramp
 * mfu(T) = mfuMax T / (T + h) with h = `mfuHalfTokens`.
 * h is MEASURED, not derived: `bench/llama-calibration.ts --steps` times llama-server's prompt
 * processing (its own prompt_ms) for one prompt of 2 to 511 tokens on one thread of an AMD EPYC
 * (Zen 5, family 26, 2.1 GHz) and fits t = a + b T through 2 to 256 tokens: three runs read h =
 * a / b = 5.1, 9.5 and 6.0 (b 2.25-2.48 ms per token, a 13-21 ms; docs/llamacpp-personality.md);
 * 6 is their median. calibrate fits b (the share `--mfu-8bit`) and keeps h.
 * Attention is LLAMACPP_ATTENTION's, below.
 * The front end and step costs are starting points for calibrate, not sources: llama-server
 * answers in C++ on its own HTTP threads, and this repository's llama-server test reads TTFT
 * within a few ms of the server's prompt_ms (test/integration/llama-server.test.ts).
 */
const LLAMACPP_EFFICIENCY: Partial<Efficiency> = {
  mfuHalfTokens: 6,
  // Its whole request path: llama-server tokenises in C++ in its own process.
  frontendLatencyS: 3e-3,
  engineHopS: 0,
  entryPointHopS: 0,
  tokenizeSPerPromptToken: 0,
  stepOverheadS: 0.5e-3,
  perSeqOverheadS: 50e-6,
  // llama-server samples each slot on the CPU after ggml's graph (`common_sampler`): that work is
  // per sequence, in the per-sequence overhead calibrate fits, not a GPU pass over the logits.
  samplerBytesPerLogit: 0,
};

/**
 * llama.cpp's attention on the CPU, by kernel: llama_context turns flash attention on by default
 * where the backend has it (`flash_attn_type` auto, `src/llama-context.cpp`), and ggml's CPU
 * kernel (`ggml/src/ggml-cpu/ops.cpp` ggml_compute_forward_flash_attn_ext_f16) runs a tiled
 * fp32 path when the ubatch has at least GGML_FA_TILE_Q = 64 query rows (`ggml-cpu/common.h`),
 * and otherwise takes each row against its unmasked keys one vec-dot, one expf and one
 * multiply-add of V at a time. The tiled path keeps the default share of the fp32 peak. The
 * per-row one is 1/7 of it, what the GEMM ramp (h = 6) gave attention at one token before the
 * kernels were told apart; the decode slopes that `bench/llama-calibration.ts --steps` measured
 * (docs/llamacpp-personality.md: 2.6 to 7.7 us per context token) read 0.048 to 0.24 of it,
 * median 0.11. calibrate fits the tiled share (`--mfu`); the ratio stays.
 */
export const LLAMACPP_ATTENTION = { tileRows: 64, perRowShare: 1 / 7 } as const;
