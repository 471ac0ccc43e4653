import {
  EngineStartError,
  type MemoryRule,
  planVllmMemory,
  type VllmMemoryInput,
  type VllmMemoryPlan,
} from '../memory/footprint.js';
import type { MemoryQuestion } from '../memory/report.js';
import { BlockPool } from './blockPool.js';
import { FrontEndLoop } from './frontEnd.js';
import type { KvPool } from './kvPool.js';
import { type BatchEntry, planUbatches } from './llamacppBatch.js';
import {
  type ClientPath,
  DEFAULT_PERSONALITY,
  isVllmV0,
  LLAMACPP,
  LLAMACPP_ATTENTION,
  type LoadBalancer,
  llamacppContext,
  type PersonalityId,
  parseEngineVersion,
  personalityDefaults,
  personalityEfficiency,
  reservesToMaxLength,
  SGLANG_NEW_TOKEN_RATIO,
  sglangMaxRunningRequests,
  TGI,
} from './personality.js';
import { RadixCache } from './radixCache.js';
import {
  DEFAULT_EFFICIENCY,
  type Efficiency,
  familyEfficiency,
  heldToGemmCeiling,
  type MeasuredSteps,
  STEP_OVERHEAD_PER_LAYER_S,
  StepCostModel,
} from './roofline.js';
import { SlotPromptCache } from './slotCache.js';

/** The engine's configuration, with vLLM's names for every personality: its memory plan's and more. */
export interface EngineModelConfig extends VllmMemoryInput {
  /** Whose defaults, memory rule, scheduler and costs (`vllm-v1` unless set). */
  personality: PersonalityId;
  chunkedPrefill: boolean;
  prefixCaching: boolean;
  /** vLLM V0's multi-step scheduling (`--num-scheduler-steps`): decode steps per schedule. */
  numSchedulerSteps: number;
  /** Data-parallel replicas of this engine behind one front end, and how it picks one. */
  dp: number;
  loadBalancer: LoadBalancer;
  efficiency: Efficiency;
  /**
   * llamacpp: tokens per physical batch, n_ubatch (`--ubatch-size`): each is one forward pass.
   * `maxNumBatchedTokens` is its n_batch, `maxNumSeqs` its slots, `ctxTokens` its n_ctx.
   */
  ubatchSize?: number;
  /** llamacpp: one KV buffer for all slots (`--kv-unified`), else one stream per slot. */
  kvUnified?: boolean;
  /** llamacpp: the host-memory prompt cache's size (`--cache-ram`, MiB; 0 none, -1 no limit). */
  cacheRamMiB?: number;
  /** Step times measured on the served engine (a calibration's `--steps`), over the roofline's. */
  measuredSteps?: MeasuredSteps;
  /** vLLM's and SGLang's release (`0.11.0`; `vllmRelease`, `sglangOverlap`), the latest where absent. */
  engineVersion?: string;
  /**
   * SGLang's overlap scheduler (`sglangOverlap`): a prefill's first token leaves when the
   * engine's next step ends, not its own.
   */
  firstTokenAfterNextStep?: boolean;
  /** Who sends the requests (CLIENT_PATHS): which parts of the request path they take; `http` where absent. */
  clientPath?: ClientPath;
}

export type EngineModelOptions = Pick<EngineModelConfig, 'model' | 'gpu'> &
  Partial<Omit<EngineModelConfig, 'model' | 'gpu' | 'efficiency'>> & {
    efficiency?: Partial<Efficiency>;
  };

/**
 * Fills in the personality's defaults (`personalityDefaults`: vLLM V1's unless set) where the
 * user gave nothing, max_model_len from the model, and the efficiency layers: defaults, the
 * personality's costs, the user's flags. Without chunked prefill the budget holds max_model_len.
 */
export function resolveEngineConfig(o: EngineModelOptions): EngineModelConfig {
  const personality = o.personality ?? DEFAULT_PERSONALITY;
  const maxModelLen =
    o.maxModelLen ??
    (personality === 'tgi' ? Math.min(o.model.maxContext, TGI.maxTotalTokens) : o.model.maxContext);
  const tp = o.tp ?? 1;
  const version = o.engineVersion === undefined ? undefined : parseEngineVersion(o.engineVersion);
  const d = personalityDefaults(personality, {
    gpu: o.gpu,
    model: o.model,
    tp,
    maxModelLen,
    ...(o.chunkedPrefill !== undefined ? { chunkedPrefill: o.chunkedPrefill } : {}),
    ...(version ? { version } : {}),
  });
  const config: EngineModelConfig = {
    model: o.model,
    gpu: o.gpu,
    weights: o.weights ?? { dtype: 'bf16' },
    kvDtype: o.kvDtype ?? 'bf16',
    tp,
    memoryRule: MEMORY_RULE[personality],
    gpuMemoryUtilization: o.gpuMemoryUtilization ?? d.gpuMemoryUtilization,
    blockSize: o.blockSize ?? d.blockSize,
    maxNumSeqs: o.maxNumSeqs ?? d.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens ?? d.maxNumBatchedTokens,
    maxModelLen,
    chunkedPrefill: d.chunkedPrefill,
    prefixCaching: o.prefixCaching ?? d.prefixCaching,
    personality,
    numSchedulerSteps: o.numSchedulerSteps ?? 1,
    dp: o.dp ?? 1,
    loadBalancer: o.loadBalancer ?? 'round-robin',
    // DEFAULT <- the GPU family's GEMM shares <- the engine's costs <- the user's flags.
    efficiency: {
      ...DEFAULT_EFFICIENCY,
      stepOverheadS: STEP_OVERHEAD_PER_LAYER_S * o.model.layers,
      ...familyEfficiency(o.gpu),
      ...heldToGemmCeiling(personalityEfficiency(personality, o.model, version), o.gpu),
      // A front-end latency the user gives (a flag, calibration.json, a validation point's
      // setting) is the whole request path, the meaning it had before the path had parts and
      // the one calibrations were fitted in: the other parts go unless given too.
      ...(o.efficiency?.frontendLatencyS !== undefined
        ? { engineHopS: 0, entryPointHopS: 0, tokenizeSPerPromptToken: 0 }
        : {}),
      ...o.efficiency,
    },
    ...(o.nonKvOverheadBytes !== undefined ? { nonKvOverheadBytes: o.nonKvOverheadBytes } : {}),
    ...(o.measuredSteps ? { measuredSteps: o.measuredSteps } : {}),
    ...(o.cacheRamMiB !== undefined ? { cacheRamMiB: o.cacheRamMiB } : {}),
    ...d.release,
    ...(d.firstTokenAfterNextStep ? { firstTokenAfterNextStep: true } : {}),
    ...(o.engineVersion !== undefined ? { engineVersion: o.engineVersion } : {}),
    ...(o.clientPath !== undefined ? { clientPath: o.clientPath } : {}),
    ...(o.numGpuBlocksOverride !== undefined
      ? { numGpuBlocksOverride: o.numGpuBlocksOverride }
      : {}),
  };
  if (personality === 'llamacpp') Object.assign(config, llamacppConfig(o, config));
  if (personality === 'sglang' && o.maxNumSeqs === undefined) {
    // SGLang sizes max_running_requests from its token pool (left at the default where the
    // engine would not start: the constructor reports that).
    try {
      config.maxNumSeqs = sglangMaxRunningRequests(planVllmMemory(config).kvTokens, maxModelLen);
    } catch (err) {
      if (!(err instanceof EngineStartError)) throw err;
    }
  }
  return config;
}

/**
 * `memory`'s question for an engine: its resolved settings at `contextTokens` (default its
 * max_model_len) holding `batch` sequences; the curve over contexts asks the engine again at
 * each one (`budgetAt`: vLLM V0 without chunked prefill sizes its step by max_model_len).
 */
export function memoryQuestion(
  engine: EngineModelOptions,
  o: { contextTokens?: number; batch: number; budgetGiven: boolean },
): MemoryQuestion {
  const c = resolveEngineConfig({
    ...engine,
    ...(o.contextTokens ? { maxModelLen: o.contextTokens } : {}),
  });
  return {
    ...(c.memoryRule ? { memoryRule: c.memoryRule } : {}),
    model: c.model,
    gpu: c.gpu,
    weights: c.weights,
    kvDtype: c.kvDtype,
    tp: c.tp,
    contextTokens: c.maxModelLen,
    batch: o.batch,
    gpuMemoryUtilization: c.gpuMemoryUtilization,
    blockSize: c.blockSize,
    maxNumBatchedTokens: c.maxNumBatchedTokens,
    maxNumSeqs: c.maxNumSeqs,
    ...(c.profileSampler ? { profileSampler: c.profileSampler } : {}),
    ...(c.cudaGraphsInBudget !== undefined ? { cudaGraphsInBudget: c.cudaGraphsInBudget } : {}),
    budgetGiven: o.budgetGiven,
    budgetAt: (maxModelLen) => {
      const at = resolveEngineConfig({ ...engine, maxModelLen });
      return { maxNumBatchedTokens: at.maxNumBatchedTokens, maxNumSeqs: at.maxNumSeqs };
    },
  };
}

/**
 * llama-server's context and batches (personality.ts LLAMACPP): --parallel given keeps one KV
 * stream per slot unless --kv-unified; none gives 4 slots sharing one. n_ctx (`ctxTokens`,
 * default the model's context) is padded and split per slot; the slot's share is the longest
 * request, and max_model_len, when given, caps it further. n_batch and n_ubatch are capped as
 * llama_context caps them.
 */
function llamacppConfig(
  o: EngineModelOptions,
  c: EngineModelConfig,
): Pick<
  EngineModelConfig,
  'ctxTokens' | 'kvUnified' | 'maxModelLen' | 'maxNumBatchedTokens' | 'ubatchSize'
> {
  const kvUnified = o.kvUnified ?? o.maxNumSeqs === undefined;
  const { ctxTokens, slotTokens } = llamacppContext({
    ctxSize: o.ctxTokens ?? o.model.maxContext,
    slots: c.maxNumSeqs,
    kvUnified,
  });
  const maxNumBatchedTokens = Math.min(c.maxNumBatchedTokens, ctxTokens);
  return {
    ctxTokens,
    kvUnified,
    maxModelLen: Math.min(slotTokens, o.maxModelLen ?? slotTokens),
    maxNumBatchedTokens,
    ubatchSize: Math.min(o.ubatchSize ?? LLAMACPP.nUbatch, maxNumBatchedTokens),
  };
}

/** The measured steps of at most `tokens`, or none when fewer than two sizes are left. */
function stepsUpTo(steps: MeasuredSteps | undefined, tokens: number): MeasuredSteps | undefined {
  if (!steps) return undefined;
  const n = steps.tokens.filter((t) => t <= tokens).length;
  if (n === steps.tokens.length) return steps;
  return n >= 2
    ? { tokens: steps.tokens.slice(0, n), seconds: steps.seconds.slice(0, n) }
    : undefined;
}

/** Each personality's memory rule (TGI is not modelled: vLLM V1's). */
const MEMORY_RULE: Record<PersonalityId, MemoryRule> = {
  'vllm-v1': 'vllm-v1',
  'vllm-v0': 'vllm-v0',
  'vllm-v0.5': 'vllm-v0',
  tgi: 'tgi',
  sglang: 'sglang',
  trtllm: 'trtllm',
  llamacpp: 'llamacpp',
};

/** Receives a sequence's tokens as the engine produces them (times in ns of engine time). */
export interface SequenceListener {
  /** Generation began: the request left the waiting queue for the first time. */
  onScheduled?(atNs: number): void;
  /** One output token; `index` counts from 0. */
  onToken(atNs: number, index: number, last: boolean): void;
  onPreempted?(atNs: number): void;
}

export interface SequenceInput {
  /** When the request reached the server (ns of engine time). */
  arrivalNs: number;
  promptTokens: number;
  maxTokens: number;
  /**
   * Chained hashes of the full blocks of the prompt, then of the output it will generate, for
   * prefix caching (kvPool.ts): blocks of `blockSize` tokens, one token each for SGLang and
   * llama.cpp. Key i names block i with all before it.
   */
  blockHashes?: readonly number[];
  /** A chat request: the front end renders its template (`frontendChatCpuS`). */
  chat?: boolean;
}

/** A request inside the engine. */
export class Sequence {
  /** The scheduler may take it from this time on (out of the front end, + its latency). */
  readyNs: number;
  computed = 0;
  generated = 0;
  /** Uncached blocks it holds. */
  ownBlocks = 0;
  /** Leading prompt blocks it references in the prefix cache. */
  cachedBlocks = 0;
  preemptions = 0;
  scheduledNs?: number;
  firstTokenNs?: number;
  finishedNs?: number;
  /** Prompt tokens found in the prefix cache at its first scheduling. */
  prefixHitTokens = 0;
  /** llamacpp: the slot (llama.cpp's sequence id) it runs in, -1 before it has one. */
  slot = -1;
  done = false;

  /** `readyNs` starts at the arrival; the request path moves it (EngineModel.enterWaiting). */
  constructor(
    readonly id: number,
    readonly input: SequenceInput,
    readonly listener: SequenceListener,
  ) {
    this.readyNs = input.arrivalNs;
  }

  /** Tokens whose KV must exist before the next token can be sampled. */
  get knownTokens(): number {
    return this.input.promptTokens + this.generated;
  }
}

/**
 * A request's way to the scheduler, seconds (REQUEST_PATH): the path's fixed part, the hops to
 * the engine's process (the server's for an HTTP client, the entry point's own for the engine's)
 * and the prompt's tokenising; nothing for token ids given to the scheduler.
 */
export function requestPathS(
  e: Pick<
    Efficiency,
    'frontendLatencyS' | 'engineHopS' | 'entryPointHopS' | 'tokenizeSPerPromptToken'
  >,
  client: ClientPath,
  promptTokens: number,
): number {
  if (client === 'none') return 0;
  const hopsS = client === 'http' ? e.engineHopS : e.entryPointHopS;
  return e.frontendLatencyS + hopsS + promptTokens * e.tokenizeSPerPromptToken;
}

/** What one step did. */
export interface StepResult {
  startNs: number;
  endNs: number;
  /** Tokens computed (prefill chunks plus decodes): vLLM's iteration tokens. */
  tokens: number;
  prefillTokens: number;
  decodeSequences: number;
  sequences: number;
  preempted: number;
}

/** Counters the `/metrics` endpoint and the ground truth expose. */
export interface EngineCounters {
  steps: number;
  preemptions: number;
  /** Prompt tokens of requests whose prefill completed (vLLM counts each request once). */
  promptTokens: number;
  generationTokens: number;
  prefixQueryTokens: number;
  prefixHitTokens: number;
  /** Most blocks in use at once. */
  peakUsedBlocks: number;
  /** Most sequences running at once. */
  peakRunning: number;
}

interface Scheduled {
  seq: Sequence;
  /** Tokens computed per sub-step (1 for a decode). */
  tokens: number;
  /** Sub-steps it runs: 1, or a multi-step window's decodes (vLLM V0 `num_scheduler_steps`). */
  steps: number;
}

/** A step being scheduled: who runs, the token budget left, requests preempted for it. */
interface Batch {
  scheduled: Scheduled[];
  budget: number;
  preempted: number;
}

/** Which running requests a scheduling pass takes. */
type RunningKind = 'all' | 'prefill' | 'decode';

/**
 * vLLM V1's engine core as a discrete-event model on its own clock (integer nanoseconds):
 * continuous batching, decode-first chunked prefill under a token budget, `max_num_seqs`,
 * paged KV blocks, preemption by recompute when blocks run out, optional prefix caching, and
 * roofline step times. It does no I/O: the HTTP simulator drives it in real time and
 * `simulateRun` drives it in virtual time, so both produce the same timings.
 */
export class EngineModel {
  readonly config: EngineModelConfig;
  readonly memory: VllmMemoryPlan;
  readonly cost: StepCostModel;
  readonly counters: EngineCounters = {
    steps: 0,
    preemptions: 0,
    promptTokens: 0,
    generationTokens: 0,
    prefixQueryTokens: 0,
    prefixHitTokens: 0,
    peakUsedBlocks: 0,
    peakRunning: 0,
  };
  private readonly pool: KvPool;
  /** The API server's loop that chat requests pass first, where it costs CPU time. */
  private readonly chatFrontEnd?: FrontEndLoop<Sequence>;
  private readonly leftFrontEnd = (seq: Sequence, atNs: number): void => {
    this.enterWaiting(seq, atNs + this.requestPathNs(seq.input));
  };
  /**
   * When the last request to enter the waiting queue reaches the scheduler: requests pass the
   * request path in order (one loop each side of every hop), so none overtakes an earlier one
   * with a longer prompt to tokenise.
   */
  private lastReadyNs = 0;
  private readonly waiting: Sequence[] = [];
  private waitingHead = 0;
  private running: Sequence[] = [];
  private nextId = 0;
  /** TGI: decode steps since its last new batch (the router's `waiting_tokens`). */
  private tgiDecodesSinceBatch = 0;
  /** SGLang's new_token_ratio: the share of max output it reserves per running request. */
  private newTokenRatio: number = SGLANG_NEW_TOKEN_RATIO.init;
  /** llamacpp: its slots, each keeping its last request's tokens (slotCache.ts). */
  private readonly slots?: SlotPromptCache;
  /** llamacpp: prompts the prime phase left in slots so far (warmSlot). */
  private slotPrimes = 0;
  /**
   * `firstTokenAfterNextStep`: sequences whose first token was sampled in the step that ended at
   * `deferredAtNs` and leaves when the next one ends (or then, if none follows at once).
   */
  private readonly deferredFirst: Sequence[] = [];
  private deferredAtNs = 0;
  /** Engine time (ns). */
  now = 0;

  /** Throws EngineStartError where vLLM would refuse to start. */
  constructor(options: EngineModelOptions) {
    this.config = resolveEngineConfig(options);
    const c = this.config;
    if (!c.chunkedPrefill && c.maxNumBatchedTokens < c.maxModelLen && c.personality !== 'trtllm') {
      throw new Error(
        `max_num_batched_tokens (${c.maxNumBatchedTokens}) is smaller than max_model_len (${c.maxModelLen}) with chunked prefill disabled: requests longer than the budget could never run. Raise --max-num-batched-tokens or lower --max-model-len.`,
      );
    }
    if (c.personality === 'llamacpp') {
      if (c.tp > 1) {
        throw new Error(
          `the llamacpp personality models one llama-server on one device; --tp ${c.tp} is not modelled (llama.cpp splits layers across devices, not tensors): use --tp 1, and --dp for several servers`,
        );
      }
    }
    this.memory = planVllmMemory(c);
    if (c.personality === 'llamacpp') {
      this.slots = new SlotPromptCache(c.maxNumSeqs, {
        unified: c.kvUnified ?? true,
        cachePrompt: c.prefixCaching,
        kvBytesPerToken: this.memory.kvBytesPerToken,
        ...(c.cacheRamMiB !== undefined
          ? {
              hostCacheBytes:
                c.cacheRamMiB < 0 ? Number.POSITIVE_INFINITY : c.cacheRamMiB * 1024 * 1024,
            }
          : {}),
      });
    }
    // SGLang and TensorRT-LLM start with the longest request lowered to what the pool holds.
    const served = this.memory.servedMaxModelLen;
    if (served !== undefined) this.config = { ...c, maxModelLen: served };
    // Each engine's own prefix cache (kvPool.ts); llama.cpp's lives in its slots (slotCache.ts).
    this.pool =
      c.personality === 'sglang' && c.prefixCaching
        ? new RadixCache(this.memory.numGpuBlocks)
        : new BlockPool(this.memory.numGpuBlocks);
    const llama = c.personality === 'llamacpp';
    this.cost = new StepCostModel({
      ...c,
      singleRowGemv: llama,
      ...(llama ? { attentionKernels: LLAMACPP_ATTENTION } : {}),
      // A probe's prompt longer than one step (llama.cpp's ubatch, a chunk) was several.
      measuredSteps: stepsUpTo(
        c.measuredSteps,
        llama ? (c.ubatchSize ?? LLAMACPP.nUbatch) : c.maxNumBatchedTokens,
      ),
    });
    const chatCpuNs = Math.round(c.efficiency.frontendChatCpuS * 1e9);
    // The chat template is rendered by the HTTP server; the engine's entry point has its own
    // (LLM.chat) but no validation point or user of --client-path engine has asked for it.
    if (chatCpuNs > 0 && (c.clientPath ?? 'http') === 'http') {
      this.chatFrontEnd = new FrontEndLoop(chatCpuNs);
    }
  }

  /**
   * A request's way to the scheduler, ns (`requestPathS`, for this engine's client). Alone, a
   * request's TTFT is this, the wait for the step under way to end, and its prefill.
   */
  requestPathNs(input: Pick<SequenceInput, 'promptTokens'>): number {
    const { efficiency, clientPath } = this.config;
    return Math.round(requestPathS(efficiency, clientPath ?? 'http', input.promptTokens) * 1e9);
  }

  private enterWaiting(seq: Sequence, readyNs: number): void {
    seq.readyNs = Math.max(readyNs, this.lastReadyNs);
    this.lastReadyNs = seq.readyNs;
    this.waiting.push(seq);
  }

  /** Why a request cannot be served at all (vLLM answers HTTP 400), or undefined. */
  validate(promptTokens: number, maxTokens: number): string | undefined {
    if (this.config.personality === 'llamacpp') {
      // server-context.cpp update_slots: a prompt as long as its slot's context is refused
      // (ERROR_TYPE_EXCEED_CONTEXT_SIZE, HTTP 400); a shorter one runs, its output cut (add).
      if (promptTokens < this.config.maxModelLen) return undefined;
      return `request (${promptTokens} tokens) exceeds the available context size (${this.config.maxModelLen} tokens), try increasing it`;
    }
    const c = this.config;
    if (c.personality === 'trtllm' && !c.chunkedPrefill && promptTokens > c.maxNumBatchedTokens) {
      // TensorRT-LLM's PyTorch backend without chunked prefill (`_check_arguments`).
      return `The sum of prompt length (${promptTokens}), query length (0) should not exceed max_num_tokens (${c.maxNumBatchedTokens})`;
    }
    const total = promptTokens + maxTokens;
    if (total > this.config.maxModelLen) {
      return `This model's maximum context length is ${this.config.maxModelLen} tokens. However, you requested ${total} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`;
    }
    return undefined;
  }

  add(input: SequenceInput, listener: SequenceListener): Sequence {
    if (this.config.personality === 'llamacpp') {
      // server-context.cpp process_token: generation stops once the slot's context is full
      // (prompt + output = n_ctx_slot), the answer truncated.
      const room = this.config.maxModelLen - input.promptTokens;
      if (input.maxTokens > room) input = { ...input, maxTokens: Math.max(1, room) };
    }
    const seq = new Sequence(this.nextId++, input, listener);
    if (input.chat && this.chatFrontEnd) {
      this.chatFrontEnd.enter(seq, input.arrivalNs);
    } else {
      this.enterWaiting(seq, input.arrivalNs + this.requestPathNs(input));
    }
    return seq;
  }

  /**
   * Sends the first tokens held back for the next step (`firstTokenAfterNextStep`) at `atNs`;
   * a request aborted meanwhile gets none.
   */
  private sendDeferredFirst(atNs: number): void {
    const held = this.deferredFirst;
    for (const seq of held) {
      if (seq.done && seq.finishedNs === undefined) continue;
      seq.firstTokenNs = atNs;
      seq.listener.onToken(atNs, 0, false);
    }
    // Emptied, not replaced: the step loop stays allocation-free (only a step's apply adds).
    held.length = 0;
  }

  /** Removes a request (client went away), freeing its blocks. */
  abort(seq: Sequence): void {
    if (seq.done) return;
    seq.done = true;
    if (this.chatFrontEnd?.remove(seq)) return;
    const w = this.waiting.indexOf(seq, this.waitingHead);
    if (w >= 0) this.waiting.splice(w, 1);
    const r = this.running.indexOf(seq);
    if (r >= 0) this.running.splice(r, 1);
    this.releaseSlot(seq);
    this.releaseBlocks(seq);
  }

  get runningCount(): number {
    return this.running.length;
  }

  /** Requests the scheduler could take (still in the HTTP front end: not yet waiting). */
  get waitingCount(): number {
    let n = 0;
    for (let i = this.waitingHead; i < this.waiting.length; i++) {
      if (this.waiting[i].readyNs <= this.now) n++;
    }
    return n;
  }

  /**
   * Empties the prefix cache as the engine's reset route does, or refuses as the engine
   * refuses. SGLang's `Scheduler.flush_cache` (python/sglang/srt/managers/scheduler.py) flushes
   * only when fully idle: "Cache not flushed because there are pending requests" with any
   * request waiting or running. vLLM's `BlockPool.reset_prefix_cache` refuses while any block
   * is in use (vllm/v1/core/block_pool.py); a waiting request holds none. llama-server has no
   * such route: its slots are erased one by one (`POST /slots/{id}?action=erase`), a busy one
   * once it is idle; here every slot is erased at once, refused while any slot is busy.
   * Without prefix caching nothing is cached, and the reset succeeds (vLLM answers it all the
   * same).
   */
  resetPrefixCache(): { ok: true } | { ok: false; reason: string } {
    const refused = this.canResetPrefixCache();
    if (refused !== undefined) return { ok: false, reason: refused };
    if (this.slots) this.pool.release(this.slots.eraseIdle());
    else if (this.config.prefixCaching) this.pool.resetPrefixCache();
    return { ok: true };
  }

  /**
   * Leaves a prompt's full blocks in the prefix cache as a request that ended before the clock
   * started would (`--prefix-hit-rate`'s prime phase in virtual time), with neither the time
   * nor the counters it took. As many leading blocks as the pool holds are kept.
   */
  warmPrefixCache(blockHashes: readonly number[]): void {
    if (!this.config.prefixCaching || blockHashes.length === 0 || blockHashes[0] < 0) return;
    if (this.slots) {
      this.warmSlot(blockHashes);
      return;
    }
    const hit = this.pool.lookup(blockHashes);
    this.pool.acquire(blockHashes, hit);
    const added = Math.min(blockHashes.length - hit, this.pool.available());
    this.pool.allocate(added);
    this.pool.publish(blockHashes, hit, hit + added);
    this.pool.unreference(blockHashes, hit + added);
  }

  /** Why resetPrefixCache would refuse now, in the engine's words; undefined when it would not. */
  canResetPrefixCache(): string | undefined {
    const waiting = this.waiting.length - this.waitingHead;
    if (this.config.personality === 'sglang' && (waiting > 0 || this.running.length > 0)) {
      return `Cache not flushed because there are pending requests. #queue-req: ${waiting}, #running-req: ${this.running.length}`;
    }
    if (this.slots) {
      return this.running.length > 0
        ? `${this.running.length} slot(s) busy: llama.cpp's slots are erased only when idle`
        : undefined;
    }
    if (!this.config.prefixCaching) return undefined;
    const used = this.pool.used();
    if (used > 0) {
      return `Failed to reset prefix cache because some blocks (${used}) are not freed yet`;
    }
    return undefined;
  }

  /** Fraction of KV blocks holding live data (vLLM's `kv_cache_usage_perc`). */
  get kvUsage(): number {
    return this.pool.total > 0 ? this.pool.used() / this.pool.total : 0;
  }

  get usedBlocks(): number {
    return this.pool.used();
  }

  /** Earliest time the engine has work: now if anything runs, else the first ready arrival. */
  nextWorkNs(): number | undefined {
    if (this.running.length > 0) return this.now;
    const ready =
      this.waitingHead < this.waiting.length ? this.waiting[this.waitingHead].readyNs : undefined;
    const leaves = this.frontEndLeaveNs();
    const nextNs = leaves === undefined ? ready : Math.min(ready ?? leaves, leaves);
    return nextNs === undefined ? undefined : Math.max(this.now, nextNs);
  }

  /** When the next chat request leaves the front end for the scheduler, if one is inside. */
  frontEndLeaveNs(): number | undefined {
    const leaves = this.chatFrontEnd?.nextLeaveNs();
    const head = this.chatFrontEnd?.peek();
    if (leaves === undefined || head === undefined) return leaves;
    return Math.max(leaves + this.requestPathNs(head.input), this.lastReadyNs);
  }

  /** Moves an idle engine's clock forward (never back). */
  advanceTo(ns: number): void {
    if (ns > this.now) this.now = ns;
  }

  /**
   * Schedules and runs one step starting at `now` (a multi-step window of decodes is one
   * call), emits its tokens at the step's end and advances the clock there. Returns undefined
   * when nothing could be scheduled.
   */
  step(): StepResult | undefined {
    const c = this.config;
    const startNs = this.now;
    // No step followed at once (its sequence went back to waiting, the engine idled): the held
    // first tokens leave when the step that sampled them ended.
    if (startNs > this.deferredAtNs) this.sendDeferredFirst(this.deferredAtNs);
    this.chatFrontEnd?.advance(startNs, this.leftFrontEnd);
    if (this.running.length === 0) this.newTokenRatio = SGLANG_NEW_TOKEN_RATIO.init;
    const batch: Batch = { scheduled: [], budget: c.maxNumBatchedTokens, preempted: 0 };
    if (c.personality === 'llamacpp') {
      this.scheduleSlots(batch, startNs);
    } else if (this.prefillFirst) {
      // vLLM V0 without chunked prefill (`Scheduler._schedule_default`), SGLang
      // (`Scheduler.get_next_batch_to_run`; mixed chunks are off by default) and TGI before
      // 2.4: a step runs prefills (SGLang's unfinished chunk first, then waiting requests; for
      // TGI only when its router forms a batch) whenever one can start, else the decodes of
      // everything running. The two never share a step.
      this.scheduleRunning(batch, 'prefill', 1);
      if (c.personality !== 'tgi' || this.tgiFormsBatch(startNs)) this.admitWaiting(batch, startNs);
      if (c.personality === 'tgi') {
        this.tgiDecodesSinceBatch = batch.scheduled.length > 0 ? 1 : this.tgiDecodesSinceBatch + 1;
      }
      if (batch.scheduled.length === 0) {
        if (c.personality === 'sglang' || c.personality === 'tgi') {
          // Their decode batch is bounded by running requests or memory, not the prefill budget.
          batch.budget = Number.POSITIVE_INFINITY;
        }
        if (c.personality === 'sglang') this.retractForDecodes(batch);
        this.scheduleRunning(batch, 'decode', this.windowSteps);
      }
    } else {
      // vLLM V1 and TensorRT-LLM in-flight batching: running requests first (decodes and
      // unfinished prefill chunks), then waiting ones, unless this step had to preempt.
      this.scheduleRunning(batch, 'all', 1);
      if (batch.preempted === 0) this.admitWaiting(batch, startNs);
    }
    const scheduled = batch.scheduled;
    if (scheduled.length === 0) {
      this.sendDeferredFirst(this.deferredAtNs);
      return undefined;
    }

    // Step time from the batch's composition, per sub-step of a multi-step window.
    let totalS = c.efficiency.scheduleOverheadS;
    let tokens = 0;
    let prefillTokens = 0;
    let decodes = 0;
    const window = c.model.slidingWindow ?? Number.POSITIVE_INFINITY;
    let subSteps = 1;
    for (const e of scheduled) if (e.steps > subSteps) subSteps = e.steps;
    if (c.personality === 'llamacpp') {
      // One iteration, its ubatches one forward pass each (sub-steps are vLLM V0's).
      subSteps = 0;
      totalS += this.ubatchesTime(scheduled, window);
      for (const { seq, tokens: n } of scheduled) {
        tokens += n;
        if (seq.computed >= seq.input.promptTokens && n === 1) decodes++;
        else prefillTokens += n;
      }
      this.counters.steps++;
    }
    for (let i = 0; i < subSteps; i++) {
      let stepTokens = 0;
      let sampledRows = 0;
      let sequences = 0;
      let attentionPairs = 0;
      let kvTokensTouched = 0;
      for (const { seq, tokens: n, steps } of scheduled) {
        if (steps <= i) continue;
        const computed = seq.computed + i;
        sequences++;
        stepTokens += n;
        const context = Math.min(computed, window);
        attentionPairs += n * context + (n * n) / 2;
        kvTokensTouched += context + n;
        if (computed + n >= seq.knownTokens) sampledRows++;
        if (i === 0) {
          if (seq.computed >= seq.input.promptTokens && n === 1) decodes++;
          else prefillTokens += n;
        }
      }
      tokens += stepTokens;
      totalS += this.cost.stepTime({
        tokens: stepTokens,
        sampledRows,
        sequences,
        attentionPairs,
        kvTokensTouched,
      }).totalS;
      this.counters.steps++;
    }
    const endNs = startNs + Math.max(1, Math.round(totalS * 1e9));
    this.now = endNs;
    this.counters.peakUsedBlocks = Math.max(this.counters.peakUsedBlocks, this.pool.used());
    this.counters.peakRunning = Math.max(this.counters.peakRunning, this.running.length);

    // Apply: advance computed tokens, publish full prompt blocks, sample, finish. A window's
    // tokens all come out at its end (V0's multi-step output processing streams in bunches).
    // First tokens held back by the step before leave now, ahead of this step's tokens.
    this.sendDeferredFirst(endNs);
    let finished = 0;
    for (const { seq, tokens: n, steps } of scheduled) {
      for (let k = 0; k < steps && !seq.done; k++) {
        seq.computed += n;
        if (c.prefixCaching && seq.input.blockHashes && !this.slots) this.publishBlocks(seq);
        if (seq.computed < seq.knownTokens) continue;
        if (seq.generated === 0 && seq.preemptions === 0) {
          this.counters.promptTokens += seq.input.promptTokens;
        }
        const index = seq.generated++;
        this.counters.generationTokens++;
        const last = seq.generated >= seq.input.maxTokens;
        if (index === 0 && c.firstTokenAfterNextStep && !last) {
          this.deferredFirst.push(seq);
          this.deferredAtNs = endNs;
          continue;
        }
        if (index === 0) seq.firstTokenNs = endNs;
        if (last) {
          seq.done = true;
          seq.finishedNs = endNs;
          if (c.prefixCaching && seq.input.blockHashes && this.pool.cachesOutputOnFinish) {
            this.publishBlocks(seq, true);
          }
          this.releaseSlot(seq);
          this.releaseBlocks(seq);
          finished++;
        }
        seq.listener.onToken(endNs, index, last);
      }
    }
    if (finished > 0) this.running = this.running.filter((s) => !s.done);
    return {
      startNs,
      endNs,
      tokens,
      prefillTokens,
      decodeSequences: decodes,
      sequences: scheduled.length,
      preempted: batch.preempted,
    };
  }

  /**
   * llama-server's iteration (server-context.cpp): each ready request takes an idle slot as
   * get_available_slot picks it (takeSlot); then update_slots batches one token for every generating
   * slot and prompt tokens of the others, slot by slot in slot order, up to n_batch in all. The
   * KV never runs short with a stream per slot; a shared buffer that fills up fails every
   * running request in llama.cpp ("Context size has been exceeded"), which is not modelled
   * (the sequence takes what cells are left).
   */
  private scheduleSlots(batch: Batch, startNs: number): void {
    const c = this.config;
    while (this.waitingHead < this.waiting.length && this.running.length < c.maxNumSeqs) {
      const seq = this.waiting[this.waitingHead];
      if (seq.readyNs > startNs) break;
      this.waitingHead++;
      seq.slot = this.takeSlot(seq);
      if (seq.scheduledNs === undefined) {
        seq.scheduledNs = startNs;
        seq.listener.onScheduled?.(startNs);
      }
      // Running stays in slot order, the order update_slots visits the slots in.
      let at = this.running.length;
      while (at > 0 && this.running[at - 1].slot > seq.slot) at--;
      this.running.splice(at, 0, seq);
    }
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting.splice(0, this.waitingHead);
      this.waitingHead = 0;
    }
    const isDecode = (seq: Sequence) => seq.generated > 0 && seq.knownTokens - seq.computed === 1;
    for (const seq of this.running) if (isDecode(seq)) this.scheduleCells(batch, seq, 1);
    for (const seq of this.running) {
      if (batch.budget <= 0) break;
      if (isDecode(seq)) continue;
      this.scheduleCells(batch, seq, Math.min(seq.knownTokens - seq.computed, batch.budget));
    }
  }

  /** Puts `tokens` of a sequence in the batch, with KV cells for them. */
  private scheduleCells(batch: Batch, seq: Sequence, tokens: number): void {
    const need = this.blocksFor(seq.computed + tokens) - this.heldBlocks(seq);
    while (need > this.pool.available()) {
      const freed = (this.slots as SlotPromptCache).purgeIdle();
      if (freed === 0) break;
      this.pool.release(freed);
    }
    const blocks = Math.min(need, this.pool.available());
    this.pool.allocate(blocks);
    seq.ownBlocks += Math.max(0, blocks);
    batch.scheduled.push({ seq, tokens, steps: 1 });
    batch.budget -= tokens;
  }

  /**
   * llama-server's share of the prime: the prompt (one cell a token, `keys` one a token) takes a
   * slot as a request does, so the slot's earlier prompt is saved to the host-memory cache as
   * get_available_slot saves it, and is left there computed, as the HTTP prime leaves it. Its
   * release comes before any request's and after the primes before it: llama.cpp picks the
   * least recently used slot by that time, and equal times would give every prime one slot.
   */
  private warmSlot(keys: readonly number[]): void {
    const slots = this.slots as SlotPromptCache;
    if (this.running.length >= this.config.maxNumSeqs) return;
    const { slot, reusedTokens, freedCells } = slots.take(keys, keys.length, this.pool.available());
    if (freedCells >= 0) this.pool.release(freedCells);
    else this.pool.allocate(-freedCells);
    const need = keys.length - reusedTokens;
    while (need > this.pool.available()) {
      const freed = slots.purgeIdle();
      if (freed === 0) break;
      this.pool.release(freed);
    }
    const added = Math.min(need, this.pool.available());
    this.pool.allocate(added);
    slots.release(slot, keys, reusedTokens + added, this.now - 1 / (2 + this.slotPrimes++));
  }

  /**
   * The slot llama-server gives a request (slotCache.ts): with its prompt cache on, the prefix
   * it shares with the slot's last request is already computed there, and the cells past it go
   * back to the buffer.
   */
  private takeSlot(seq: Sequence): number {
    const slots = this.slots as SlotPromptCache;
    const keys = this.config.prefixCaching ? seq.input.blockHashes : undefined;
    const { slot, reusedTokens, freedCells } = slots.take(
      keys,
      seq.knownTokens,
      this.pool.available(),
    );
    // A prompt loaded from the host-memory cache may hold more cells than the slot had.
    if (freedCells >= 0) this.pool.release(freedCells);
    else this.pool.allocate(-freedCells);
    seq.ownBlocks = reusedTokens;
    seq.computed = reusedTokens;
    if (this.config.prefixCaching && seq.preemptions === 0) {
      // llama.cpp's `timings.cache_n` over the prompt tokens: vLLM's query/hit counters.
      this.counters.prefixQueryTokens += seq.input.promptTokens;
      this.counters.prefixHitTokens += reusedTokens;
      seq.prefixHitTokens = reusedTokens;
    }
    return slot;
  }

  /** The request leaves its slot; with the prompt cache on, the slot keeps its cells. */
  private releaseSlot(seq: Sequence): void {
    if (seq.slot < 0 || !this.slots) return;
    const keep = this.config.prefixCaching ? seq.ownBlocks : 0;
    this.slots.release(seq.slot, seq.input.blockHashes, keep, this.now);
    this.pool.release(seq.ownBlocks - keep);
    seq.ownBlocks = 0;
    seq.slot = -1;
  }

  /**
   * One llama-server iteration's time: its batch cut into ubatches as llama.cpp cuts it
   * (llamacppBatch.ts), each a forward pass timed by the roofline over the tokens it holds. A
   * sequence split over ubatches attends to its earlier part in the later ones; only the ubatch
   * with a sequence's last token samples it.
   */
  private ubatchesTime(scheduled: readonly Scheduled[], window: number): number {
    const c = this.config;
    const entries: BatchEntry[] = scheduled.map((e) => ({ slot: e.seq.slot, tokens: e.tokens }));
    const ubatches = planUbatches(entries, {
      nBatch: c.maxNumBatchedTokens,
      nUbatch: c.ubatchSize ?? LLAMACPP.nUbatch,
      unified: c.kvUnified ?? true,
    });
    const done = new Array<number>(scheduled.length).fill(0);
    let totalS = 0;
    for (const ubatch of ubatches) {
      let stepTokens = 0;
      let sampledRows = 0;
      let attentionPairs = 0;
      let kvTokensTouched = 0;
      for (const { entry, tokens: n } of ubatch) {
        const { seq } = scheduled[entry];
        const computed = seq.computed + done[entry];
        done[entry] += n;
        stepTokens += n;
        const context = Math.min(computed, window);
        attentionPairs += n * context + (n * n) / 2;
        kvTokensTouched += context + n;
        if (computed + n >= seq.knownTokens) sampledRows++;
      }
      totalS += this.cost.stepTime({
        tokens: stepTokens,
        sampledRows,
        sequences: ubatch.length,
        attentionPairs,
        kvTokensTouched,
      }).totalS;
    }
    return totalS;
  }

  /** Prefill and decode run in separate steps (vLLM V0 without chunked prefill, SGLang). */
  private get prefillFirst(): boolean {
    const c = this.config;
    return (
      (isVllmV0(c.personality) && !c.chunkedPrefill) ||
      c.personality === 'sglang' ||
      (c.personality === 'tgi' && !c.chunkedPrefill)
    );
  }

  /** Decode steps per schedule: vLLM V0's `num_scheduler_steps`, else 1. */
  private get windowSteps(): number {
    return this.config.personality === 'vllm-v0' ? this.config.numSchedulerSteps : 1;
  }

  /**
   * Schedules running requests of a kind, in order, under the budget. A multi-step window
   * reserves blocks for all its decodes at the schedule (V0's lookahead slots). When blocks run
   * out, the last running request is preempted by recompute.
   */
  private scheduleRunning(batch: Batch, kind: RunningKind, windowSteps: number): void {
    const c = this.config;
    for (let i = 0; i < this.running.length && batch.budget > 0; ) {
      const seq = this.running[i];
      const need = seq.knownTokens - seq.computed;
      const isDecode = seq.generated > 0 && need === 1;
      if ((kind === 'decode' && !isDecode) || (kind === 'prefill' && isDecode)) {
        i++;
        continue;
      }
      const tokens = Math.min(need, batch.budget);
      if (!c.chunkedPrefill && tokens < need) {
        i++;
        continue;
      }
      const steps = isDecode ? Math.min(windowSteps, seq.input.maxTokens - seq.generated) : 1;
      const blocks = this.blocksFor(seq.computed + tokens + steps - 1) - this.heldBlocks(seq);
      let selfPreempted = false;
      while (blocks > this.pool.available()) {
        const victim = this.running.pop() as Sequence;
        this.preempt(victim);
        batch.preempted++;
        if (victim === seq) {
          selfPreempted = true;
          break;
        }
      }
      if (selfPreempted) break;
      this.pool.allocate(blocks);
      seq.ownBlocks += Math.max(0, blocks);
      batch.scheduled.push({ seq, tokens, steps });
      batch.budget -= tokens;
      i++;
    }
  }

  /**
   * SGLang's `update_running_batch`: when the decodes' next tokens do not fit, retract requests
   * (fewest output tokens, then longest prompt, first) and raise new_token_ratio to the
   * remaining batch's estimate; otherwise the ratio decays.
   */
  private retractForDecodes(batch: Batch): void {
    const r = SGLANG_NEW_TOKEN_RATIO;
    const extra = (seq: Sequence) =>
      seq.generated > 0 && seq.knownTokens - seq.computed === 1
        ? Math.max(0, this.blocksFor(seq.computed + 1) - this.heldBlocks(seq))
        : 0;
    let need = this.running.reduce((sum, seq) => sum + extra(seq), 0);
    let retracted = false;
    while (need > this.pool.available() && this.running.length > 1) {
      let v = 0;
      for (let i = 1; i < this.running.length; i++) {
        const a = this.running[i];
        const b = this.running[v];
        if (
          a.generated < b.generated ||
          (a.generated === b.generated && a.input.promptTokens > b.input.promptTokens)
        )
          v = i;
      }
      const [victim] = this.running.splice(v, 1);
      need -= extra(victim);
      this.preempt(victim);
      batch.preempted++;
      retracted = true;
    }
    if (retracted) {
      let decoded = 0;
      let maxNew = 0;
      for (const seq of this.running) {
        decoded += seq.generated;
        maxNew += seq.input.maxTokens;
      }
      this.newTokenRatio = Math.min(
        1,
        (decoded + r.retractDecodeSteps * this.running.length) / Math.max(1, maxNew),
      );
    } else {
      this.newTokenRatio = Math.max(r.min, this.newTokenRatio - r.decayPerStep);
    }
  }

  /**
   * Admits waiting requests in arrival order while the budget, max_num_seqs and the
   * personality's memory admission allow: the blocks of the first chunk for vLLM (V0 keeps a
   * 1 % watermark free), prompt + max output for TensorRT-LLM's GUARANTEED_NO_EVICT, prompt +
   * the clipped max output over the running requests' new_token_ratio reservation for SGLang.
   */
  private admitWaiting(batch: Batch, startNs: number): void {
    const c = this.config;
    let reserved = this.admissionReserve();
    while (
      this.waitingHead < this.waiting.length &&
      batch.budget > 0 &&
      this.running.length < c.maxNumSeqs
    ) {
      const seq = this.waiting[this.waitingHead];
      if (seq.readyNs > startNs) break;
      let hitBlocks = 0;
      const hashes = seq.input.blockHashes;
      if (c.prefixCaching && hashes && seq.computed === 0 && seq.cachedBlocks === 0) {
        // Only blocks of tokens it has: the prompt (and output so far, after a preemption).
        hitBlocks = this.pool.lookup(hashes, Math.floor(seq.knownTokens / c.blockSize));
      }
      // A full hit still recomputes the last prompt token to sample from it.
      const computed = Math.min(hitBlocks * c.blockSize, seq.knownTokens - 1);
      const need = seq.knownTokens - computed;
      const tokens = Math.min(need, batch.budget);
      if (!c.chunkedPrefill && tokens < need) break;
      const blocks = this.blocksFor(computed + tokens) - hitBlocks;
      // Cached blocks we are about to reference may be evictable: they stop being available.
      const free = this.pool.available() - this.evictableAmong(hashes, hitBlocks);
      const claim = this.admissionClaim(seq, need, hitBlocks, blocks);
      if (blocks > free || claim > free - reserved) break;
      reserved += claim - blocks;
      this.waitingHead++;
      if (c.prefixCaching && hashes && seq.preemptions === 0) {
        this.counters.prefixQueryTokens += seq.input.promptTokens;
        this.counters.prefixHitTokens += computed;
        seq.prefixHitTokens = computed;
      }
      this.pool.acquire(hashes ?? [], hitBlocks);
      seq.cachedBlocks = hitBlocks;
      seq.computed = computed;
      this.pool.allocate(blocks);
      seq.ownBlocks += blocks;
      if (seq.scheduledNs === undefined) {
        seq.scheduledNs = startNs;
        seq.listener.onScheduled?.(startNs);
      }
      this.running.push(seq);
      batch.scheduled.push({ seq, tokens, steps: 1 });
      batch.budget -= tokens;
    }
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting.splice(0, this.waitingHead);
      this.waitingHead = 0;
    }
  }

  /**
   * TGI's router forms a new batch beside a running one only when enough requests wait: at
   * least waiting_served_ratio x the running ones, unless max_waiting_tokens decode steps
   * passed (TGI). (Its queue also drops a batch that the budgets cut below that size; here
   * the count of ready requests decides.)
   */
  private tgiFormsBatch(startNs: number): boolean {
    if (this.running.length === 0 || this.tgiDecodesSinceBatch >= TGI.maxWaitingTokens) return true;
    const minSize = Math.floor(this.running.length * TGI.waitingServedRatio);
    let ready = 0;
    for (let i = this.waitingHead; i < this.waiting.length && ready < minSize; i++) {
      if (this.waiting[i].readyNs <= startNs) ready++;
    }
    return ready >= Math.max(1, minSize);
  }

  /** Blocks the running requests hold back from admission under the personality's rule. */
  private admissionReserve(): number {
    const c = this.config;
    if (isVllmV0(c.personality)) {
      // V0 `BlockSpaceManager.can_allocate`: watermark 0.01 of the blocks stays free.
      return Math.ceil(0.01 * this.pool.total);
    }
    let reserved = 0;
    for (const seq of this.running) {
      const remaining = seq.input.maxTokens - seq.generated;
      if (reservesToMaxLength(c.personality)) {
        // Every running request's blocks to its max length stay reserved: none is evicted.
        const full = this.blocksFor(seq.input.promptTokens + seq.input.maxTokens);
        reserved += Math.max(0, full - this.heldBlocks(seq));
      } else if (c.personality === 'sglang') {
        reserved +=
          Math.min(remaining, SGLANG_NEW_TOKEN_RATIO.clipMaxNewTokens) * this.newTokenRatio;
      }
    }
    return c.personality === 'sglang' ? reserved / c.blockSize : reserved;
  }

  /** Blocks a request must find free to be admitted (beyond `blocks`, its first chunk's). */
  private admissionClaim(seq: Sequence, need: number, hitBlocks: number, blocks: number): number {
    const c = this.config;
    if (reservesToMaxLength(c.personality)) {
      return this.blocksFor(seq.input.promptTokens + seq.input.maxTokens) - hitBlocks;
    }
    if (c.personality === 'sglang') {
      // `PrefillAdder.add_one_req`: extend input + min(max_new_tokens, 4096) must stay below
      // what is left (free plus evictable, less the reservations).
      const remaining = seq.input.maxTokens - seq.generated;
      return (need + Math.min(remaining, SGLANG_NEW_TOKEN_RATIO.clipMaxNewTokens)) / c.blockSize;
    }
    return blocks;
  }

  private blocksFor(tokens: number): number {
    return Math.min(Math.ceil(tokens / this.config.blockSize), this.memory.windowCapBlocks);
  }

  private heldBlocks(seq: Sequence): number {
    return seq.ownBlocks + seq.cachedBlocks;
  }

  private evictableAmong(hashes: readonly number[] | undefined, count: number): number {
    if (!hashes || count === 0) return 0;
    return this.pool.evictableCount(hashes, count);
  }

  /**
   * Caches the blocks a sequence computed, up to what the engine caches by now: every full
   * block as it fills (vLLM, TensorRT-LLM); for SGLang the prompt as it is prefilled and the
   * output when the request finishes (`finished`).
   */
  private publishBlocks(seq: Sequence, finished = false): void {
    const keys = seq.input.blockHashes as readonly number[];
    const tokens =
      this.pool.cachesOutputOnFinish && !finished
        ? Math.min(seq.computed, seq.input.promptTokens)
        : seq.computed;
    const full = Math.min(
      keys.length,
      Math.floor(tokens / this.config.blockSize),
      seq.cachedBlocks + seq.ownBlocks,
    );
    if (full <= seq.cachedBlocks) return;
    this.pool.publish(keys, seq.cachedBlocks, full);
    seq.ownBlocks -= full - seq.cachedBlocks;
    seq.cachedBlocks = full;
  }

  private releaseBlocks(seq: Sequence): void {
    this.pool.release(seq.ownBlocks);
    this.pool.unreference(seq.input.blockHashes ?? [], seq.cachedBlocks);
    seq.ownBlocks = 0;
    seq.cachedBlocks = 0;
  }

  private preempt(seq: Sequence): void {
    this.releaseSlot(seq);
    this.releaseBlocks(seq);
    seq.computed = 0;
    seq.preemptions++;
    this.counters.preemptions++;
    // Back to the front of the waiting queue; it will recompute prompt and output so far.
    if (this.waitingHead > 0) this.waiting[--this.waitingHead] = seq;
    else this.waiting.unshift(seq);
    seq.listener.onPreempted?.(this.now);
  }
}
