import {
  planVllmMemory,
  type VllmMemoryInput,
  type VllmMemoryPlan,
  vllmDefaults,
} from '../memory/footprint.js';
import { BlockPool } from './blockPool.js';
import type { LoadBalancer, PersonalityId } from './personality.js';
import {
  DEFAULT_EFFICIENCY,
  type Efficiency,
  familyEfficiency,
  StepCostModel,
} from './roofline.js';

/** The engine's configuration, with vLLM's names (V1 personality): its memory plan's and more. */
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
}

export type EngineModelOptions = Pick<EngineModelConfig, 'model' | 'gpu'> &
  Partial<Omit<EngineModelConfig, 'model' | 'gpu' | 'efficiency'>> & {
    efficiency?: Partial<Efficiency>;
  };

/**
 * Fills in vLLM V1's defaults (online serving): the scheduler budget by GPU size
 * (`vllmDefaults`), gpu_memory_utilization 0.9, block size 16, chunked prefill on, max_model_len
 * from the model. With chunked prefill off, vLLM needs a budget of at least max_model_len.
 */
export function resolveEngineConfig(o: EngineModelOptions): EngineModelConfig {
  const defaults = vllmDefaults(o.gpu);
  const chunkedPrefill = o.chunkedPrefill ?? true;
  const maxModelLen = o.maxModelLen ?? o.model.maxContext;
  const defaultBudget = defaults.maxNumBatchedTokens;
  return {
    model: o.model,
    gpu: o.gpu,
    weights: o.weights ?? { dtype: 'bf16' },
    kvDtype: o.kvDtype ?? 'bf16',
    tp: o.tp ?? 1,
    gpuMemoryUtilization: o.gpuMemoryUtilization ?? 0.9,
    blockSize: o.blockSize ?? 16,
    maxNumSeqs: o.maxNumSeqs ?? defaults.maxNumSeqs,
    maxNumBatchedTokens:
      o.maxNumBatchedTokens ??
      (chunkedPrefill ? defaultBudget : Math.max(defaultBudget, maxModelLen)),
    maxModelLen,
    chunkedPrefill,
    prefixCaching: o.prefixCaching ?? false,
    personality: o.personality ?? 'vllm-v1',
    numSchedulerSteps: o.numSchedulerSteps ?? 1,
    dp: o.dp ?? 1,
    loadBalancer: o.loadBalancer ?? 'round-robin',
    efficiency: { ...DEFAULT_EFFICIENCY, ...familyEfficiency(o.gpu), ...o.efficiency },
    ...(o.nonKvOverheadBytes !== undefined ? { nonKvOverheadBytes: o.nonKvOverheadBytes } : {}),
    ...(o.numGpuBlocksOverride !== undefined
      ? { numGpuBlocksOverride: o.numGpuBlocksOverride }
      : {}),
  };
}

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
   * Chained hashes of the full blocks of the prompt, then of the output it will generate (whose
   * blocks are cached as they fill), for prefix caching.
   */
  blockHashes?: readonly number[];
}

/** A request inside the engine. */
export class Sequence {
  /** The scheduler may take it from this time on (arrival + front-end latency). */
  readonly readyNs: number;
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
  done = false;

  constructor(
    readonly id: number,
    readonly input: SequenceInput,
    frontendNs: number,
    readonly listener: SequenceListener,
  ) {
    this.readyNs = input.arrivalNs + frontendNs;
  }

  /** Tokens whose KV must exist before the next token can be sampled. */
  get knownTokens(): number {
    return this.input.promptTokens + this.generated;
  }
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
  tokens: number;
}

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
  private readonly pool: BlockPool;
  private readonly frontendNs: number;
  private readonly waiting: Sequence[] = [];
  private waitingHead = 0;
  private running: Sequence[] = [];
  private nextId = 0;
  /** Engine time (ns). */
  now = 0;

  /** Throws EngineStartError where vLLM would refuse to start. */
  constructor(options: EngineModelOptions) {
    this.config = resolveEngineConfig(options);
    const c = this.config;
    if (!c.chunkedPrefill && c.maxNumBatchedTokens < c.maxModelLen) {
      throw new Error(
        `max_num_batched_tokens (${c.maxNumBatchedTokens}) is smaller than max_model_len (${c.maxModelLen}) with chunked prefill disabled: requests longer than the budget could never run. Raise --max-num-batched-tokens or lower --max-model-len.`,
      );
    }
    this.memory = planVllmMemory(c);
    this.pool = new BlockPool(this.memory.numGpuBlocks);
    this.cost = new StepCostModel(c);
    this.frontendNs = Math.round(c.efficiency.frontendLatencyS * 1e9);
  }

  /** Why a request cannot be served at all (vLLM answers HTTP 400), or undefined. */
  validate(promptTokens: number, maxTokens: number): string | undefined {
    const total = promptTokens + maxTokens;
    if (total > this.config.maxModelLen) {
      return `This model's maximum context length is ${this.config.maxModelLen} tokens. However, you requested ${total} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`;
    }
    return undefined;
  }

  add(input: SequenceInput, listener: SequenceListener): Sequence {
    const seq = new Sequence(this.nextId++, input, this.frontendNs, listener);
    this.waiting.push(seq);
    return seq;
  }

  /** Removes a request (client went away), freeing its blocks. */
  abort(seq: Sequence): void {
    if (seq.done) return;
    seq.done = true;
    const w = this.waiting.indexOf(seq, this.waitingHead);
    if (w >= 0) this.waiting.splice(w, 1);
    const r = this.running.indexOf(seq);
    if (r >= 0) this.running.splice(r, 1);
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
    if (this.waitingHead < this.waiting.length) {
      return Math.max(this.now, this.waiting[this.waitingHead].readyNs);
    }
    return undefined;
  }

  /** Moves an idle engine's clock forward (never back). */
  advanceTo(ns: number): void {
    if (ns > this.now) this.now = ns;
  }

  /**
   * Schedules and runs one step starting at `now`, emits its tokens at the step's end and
   * advances the clock there. Returns undefined when nothing could be scheduled.
   */
  step(): StepResult | undefined {
    const c = this.config;
    const startNs = this.now;
    let budget = c.maxNumBatchedTokens;
    const scheduled: Scheduled[] = [];
    let preempted = 0;

    // Running requests first (decodes and unfinished prefill chunks), in order.
    for (let i = 0; i < this.running.length && budget > 0; ) {
      const seq = this.running[i];
      const need = seq.knownTokens - seq.computed;
      const tokens = Math.min(need, budget);
      if (!c.chunkedPrefill && tokens < need) {
        i++;
        continue;
      }
      const blocks = this.blocksFor(seq.computed + tokens) - this.heldBlocks(seq);
      let selfPreempted = false;
      while (blocks > this.pool.available()) {
        // Out of blocks: preempt the lowest-priority running request (the last), recompute.
        const victim = this.running.pop() as Sequence;
        this.preempt(victim);
        preempted++;
        if (victim === seq) {
          selfPreempted = true;
          break;
        }
      }
      if (selfPreempted) break;
      this.pool.allocate(blocks);
      seq.ownBlocks += Math.max(0, blocks);
      scheduled.push({ seq, tokens });
      budget -= tokens;
      i++;
    }

    // Then waiting requests in arrival order, unless this step had to preempt.
    if (preempted === 0) {
      while (
        this.waitingHead < this.waiting.length &&
        budget > 0 &&
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
        const tokens = Math.min(need, budget);
        if (!c.chunkedPrefill && tokens < need) break;
        const blocks = this.blocksFor(computed + tokens) - hitBlocks;
        // Cached blocks we are about to reference may be evictable: they stop being available.
        if (blocks > this.pool.available() - this.evictableAmong(hashes, hitBlocks)) break;
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
        scheduled.push({ seq, tokens });
        budget -= tokens;
      }
      if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
        this.waiting.splice(0, this.waitingHead);
        this.waitingHead = 0;
      }
    }
    if (scheduled.length === 0) return undefined;

    // Step time from the batch's composition.
    let tokens = 0;
    let prefillTokens = 0;
    let sampledRows = 0;
    let decodes = 0;
    let attentionPairs = 0;
    let kvTokensTouched = 0;
    const window = c.model.slidingWindow ?? Number.POSITIVE_INFINITY;
    for (const { seq, tokens: n } of scheduled) {
      tokens += n;
      const context = Math.min(seq.computed, window);
      attentionPairs += n * context + (n * n) / 2;
      kvTokensTouched += context + n;
      if (seq.computed + n === seq.knownTokens) sampledRows++;
      if (seq.computed >= seq.input.promptTokens && n === 1) decodes++;
      else prefillTokens += n;
    }
    const time = this.cost.stepTime({
      tokens,
      sampledRows,
      sequences: scheduled.length,
      attentionPairs,
      kvTokensTouched,
    });
    const endNs = startNs + Math.max(1, Math.round(time.totalS * 1e9));
    this.now = endNs;
    this.counters.steps++;
    this.counters.peakUsedBlocks = Math.max(this.counters.peakUsedBlocks, this.pool.used());
    this.counters.peakRunning = Math.max(this.counters.peakRunning, this.running.length);

    // Apply: advance computed tokens, publish full prompt blocks, sample, finish.
    let finished = 0;
    for (const { seq, tokens: n } of scheduled) {
      seq.computed += n;
      if (c.prefixCaching && seq.input.blockHashes) this.publishBlocks(seq);
      if (seq.computed < seq.knownTokens) continue;
      if (seq.generated === 0 && seq.preemptions === 0) {
        this.counters.promptTokens += seq.input.promptTokens;
      }
      const index = seq.generated++;
      this.counters.generationTokens++;
      if (index === 0) seq.firstTokenNs = endNs;
      const last = seq.generated >= seq.input.maxTokens;
      if (last) {
        seq.done = true;
        seq.finishedNs = endNs;
        this.releaseBlocks(seq);
        finished++;
      }
      seq.listener.onToken(endNs, index, last);
    }
    if (finished > 0) this.running = this.running.filter((s) => !s.done);
    return {
      startNs,
      endNs,
      tokens,
      prefillTokens,
      decodeSequences: decodes,
      sequences: scheduled.length,
      preempted,
    };
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

  private publishBlocks(seq: Sequence): void {
    const hashes = seq.input.blockHashes as readonly number[];
    const full = Math.min(hashes.length, Math.floor(seq.computed / this.config.blockSize));
    while (seq.cachedBlocks < full && seq.ownBlocks > 0) {
      this.pool.publish(hashes[seq.cachedBlocks]);
      seq.cachedBlocks++;
      seq.ownBlocks--;
    }
  }

  private releaseBlocks(seq: Sequence): void {
    this.pool.release(seq.ownBlocks);
    this.pool.unreference(seq.input.blockHashes ?? [], seq.cachedBlocks);
    seq.ownBlocks = 0;
    seq.cachedBlocks = 0;
  }

  private preempt(seq: Sequence): void {
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
