import { performance } from 'node:perf_hooks';

/**
 * The serving engine behind the simulated HTTP server. The HTTP layer only submits requests and
 * receives token emissions, so a physically grounded engine can replace the scripted one
 * without touching the wire protocol.
 */
export interface ServingEngine {
  submit(request: EngineRequest, sink: GenerationSink): { cancel(): void };
  /** Why the engine can never serve this request (answered HTTP 400), or undefined. */
  validate?(request: EngineRequest): string | undefined;
  /** Prometheus text for `GET /metrics`, when the engine keeps metrics. */
  metricsText?(): string;
  /**
   * Empties the prefix cache, or refuses as the engine refuses (requests in flight): the
   * simulator's `/reset_prefix_cache` and `/flush_cache`. Absent: the engine caches nothing.
   */
  resetPrefixCache?(): { ok: true } | { ok: false; reason: string };
  /** Facts about the engine for `GET /debug/truth` (memory plan, counters). */
  describe?(): object;
}

export interface EngineRequest {
  inputTokens: number;
  maxOutputTokens: number;
  /** The prompt's tokens as words (the simulator's tokenizer), for prefix caching. */
  promptWords?: readonly string[];
  /**
   * The answer's tokens as words, as the next turn's prompt will hold them (built only by an
   * engine that caches prefixes, as it costs a string per token): vLLM V1 caches the
   * full blocks of generated tokens too (v1/core/kv_cache_manager.py allocate_slots caches up
   * to num_computed + num_new tokens of request.all_token_ids, prompt and output).
   */
  outputWords?: () => readonly string[];
  /** Came to /v1/chat/completions: the front end renders a chat template for it. */
  chat?: boolean;
}

export interface GenerationSink {
  /** The request got a slot and started (prefill begins), with its prefix-cache hit if modelled. */
  onStart(info?: { cachedPromptTokens: number }): void;
  /** `tokens` new output tokens are ready; `last` is set on the final emission. */
  onTokens(tokens: number, last: boolean): void;
}

/** Deterministic timing of the first simulator. All times in ms. */
export interface ScriptedTiming {
  /** TTFT = ttftBaseMs + ttftPerInputTokenMs x input tokens, from the moment a slot is free. */
  ttftBaseMs: number;
  ttftPerInputTokenMs: number;
  /** Time per output token after the first. */
  itlMs: number;
  /** Tokens sent per stream event after the first (the first token always goes alone). */
  tokensPerEvent: number;
  /** Requests generating at once; later ones wait in a FIFO queue. */
  maxConcurrency: number;
}

export const DEFAULT_SCRIPTED_TIMING: ScriptedTiming = {
  ttftBaseMs: 20,
  ttftPerInputTokenMs: 0.1,
  itlMs: 8,
  tokensPerEvent: 1,
  maxConcurrency: 64,
};

interface Job {
  request: EngineRequest;
  sink: GenerationSink;
  cancelled: boolean;
  timer?: NodeJS.Timeout | NodeJS.Immediate;
}

/**
 * Scripted timing: each running request emits its first token after the TTFT formula, then
 * `tokensPerEvent` tokens every `tokensPerEvent x itlMs`, independent of other requests. Every
 * emission is scheduled against an absolute target time, so timer lateness does not accumulate.
 */
export class ScriptedEngine implements ServingEngine {
  private readonly timing: ScriptedTiming;
  private readonly queue: Job[] = [];
  private running = 0;

  constructor(timing: ScriptedTiming) {
    this.timing = timing;
  }

  submit(request: EngineRequest, sink: GenerationSink): { cancel(): void } {
    const job: Job = { request, sink, cancelled: false };
    this.queue.push(job);
    this.pump();
    return {
      cancel: () => {
        if (job.cancelled) return;
        job.cancelled = true;
        const index = this.queue.indexOf(job);
        if (index >= 0) this.queue.splice(index, 1);
        else if (job.timer) {
          clearTimeout(job.timer as NodeJS.Timeout);
          clearImmediate(job.timer as NodeJS.Immediate);
          this.release();
        }
      },
    };
  }

  private pump(): void {
    while (this.running < this.timing.maxConcurrency && this.queue.length > 0) {
      const job = this.queue.shift() as Job;
      this.running++;
      this.start(job);
    }
  }

  private release(): void {
    this.running--;
    this.pump();
  }

  private start(job: Job): void {
    const t = this.timing;
    const startedAt = performance.now();
    job.sink.onStart();
    const firstAt = startedAt + t.ttftBaseMs + t.ttftPerInputTokenMs * job.request.inputTokens;
    const total = Math.max(0, job.request.maxOutputTokens);
    let emitted = 0;
    let step = 0;
    const emit = () => {
      if (job.cancelled) return;
      const tokens = emitted === 0 ? 1 : Math.min(t.tokensPerEvent, total - emitted);
      emitted += tokens;
      const last = emitted >= total;
      job.sink.onTokens(tokens, last);
      if (last) {
        job.timer = undefined;
        this.release();
        return;
      }
      step++;
      schedule(firstAt + step * t.tokensPerEvent * t.itlMs);
    };
    const schedule = (targetAt: number) => {
      const wait = targetAt - performance.now();
      job.timer = wait >= 1 ? setTimeout(emit, wait) : setImmediate(emit);
    };
    if (total === 0) {
      job.sink.onTokens(0, true);
      this.release();
      return;
    }
    schedule(firstAt);
  }
}
