import { performance } from 'node:perf_hooks';
import type { EngineRequest, GenerationSink, ServingEngine } from './engine.js';
import type { EngineModel, Sequence, StepResult } from './engineModel.js';
import type { SimMetrics } from './metrics.js';

/**
 * Chained hashes of a token sequence's full blocks (FNV-1a over the words of each block, seeded with
 * the previous block's hash), as vLLM's prefix cache keys a block by its tokens and all before.
 */
export function promptBlockHashes(words: readonly string[], blockSize: number): number[] {
  const hashes: number[] = [];
  let h = 0x811c9dc5;
  for (let b = 0; (b + 1) * blockSize <= words.length; b++) {
    for (let i = b * blockSize; i < (b + 1) * blockSize; i++) {
      const w = words[i];
      for (let j = 0; j < w.length; j++) h = Math.imul(h ^ w.charCodeAt(j), 0x01000193);
      h = Math.imul(h ^ 0x20, 0x01000193);
    }
    hashes.push(h >>> 0);
  }
  return hashes;
}

interface Pending {
  sink: GenerationSink;
  last: boolean;
}

/**
 * Runs the engine model on the wall clock: engine time t ns is released at
 * `origin + t x timeScale` ms of real time. Each step is computed when the previous one ends
 * (so it sees exactly the requests that arrived by then) and its tokens are written when its
 * end time comes; timers aim at absolute targets, so their lateness never accumulates.
 */
export class PhysicalEngine implements ServingEngine {
  private readonly origin = performance.now();
  private timer: NodeJS.Timeout | undefined;
  private pending: Pending[] = [];

  constructor(
    readonly model: EngineModel,
    private readonly options: { timeScale: number; metrics?: SimMetrics },
  ) {}

  /** Engine time now, from the wall clock. */
  private engineNowNs(): number {
    return Math.round(((performance.now() - this.origin) / this.options.timeScale) * 1e6);
  }

  private wallMsAt(ns: number): number {
    return this.origin + (ns / 1e6) * this.options.timeScale;
  }

  validate(request: EngineRequest): string | undefined {
    return this.model.validate(request.inputTokens, request.maxOutputTokens);
  }

  submit(request: EngineRequest, sink: GenerationSink): { cancel(): void } {
    const metrics = this.options.metrics;
    const arrivalNs = this.engineNowNs();
    let lastTokenNs = 0;
    const seq: Sequence = this.model.add(
      {
        arrivalNs,
        promptTokens: request.inputTokens,
        maxTokens: request.maxOutputTokens,
        ...(this.model.config.prefixCaching && request.promptWords
          ? {
              blockHashes: promptBlockHashes(
                [...request.promptWords, ...(request.outputWords?.() ?? [])],
                this.model.config.blockSize,
              ),
            }
          : {}),
      },
      {
        onScheduled: () => sink.onStart({ cachedPromptTokens: seq.prefixHitTokens }),
        onToken: (atNs, index, last) => {
          if (metrics) {
            if (index === 0) metrics.observeTtft((atNs - arrivalNs) / 1e9);
            else metrics.observeItl((atNs - lastTokenNs) / 1e9);
            if (last) metrics.observeFinished(finishedTiming(seq, arrivalNs, atNs));
          }
          lastTokenNs = atNs;
          this.pending.push({ sink, last });
        },
      },
    );
    if (request.maxOutputTokens === 0) {
      this.model.abort(seq);
      sink.onTokens(0, true);
      return { cancel: () => {} };
    }
    this.kick();
    // Tokens of a step already computed may still be written: the server drops them once the
    // response is closed.
    return { cancel: () => this.model.abort(seq) };
  }

  metricsText(): string {
    const m = this.model;
    const c = m.counters;
    const plan = m.memory;
    const usedMiB = Math.round(plan.deviceUsedBytes / 2 ** 20);
    const totalMiB = Math.round(plan.totalBytes / 2 ** 20);
    const gpus = Array.from({ length: m.config.tp }, (_, gpu) => ({
      gpu,
      usedMiB,
      freeMiB: totalMiB - usedMiB,
    }));
    return (
      this.options.metrics?.render(
        {
          running: m.runningCount,
          waiting: m.waitingCount,
          kvCacheUsage: m.kvUsage,
          preemptions: c.preemptions,
          promptTokens: c.promptTokens,
          generationTokens: c.generationTokens,
          prefixQueryTokens: c.prefixQueryTokens,
          prefixHitTokens: c.prefixHitTokens,
        },
        gpus,
      ) ?? ''
    );
  }

  describe(): object {
    const m = this.model;
    return {
      engine: 'vllm-v1',
      model: m.config.model.id,
      gpu: m.config.gpu.id,
      tp: m.config.tp,
      memory: m.memory,
      counters: m.counters,
      running: m.runningCount,
      waiting: m.waitingCount,
      kvCacheUsage: m.kvUsage,
    };
  }

  /** Starts the step loop if it is idle and there is work. */
  private kick(): void {
    if (this.timer !== undefined) return;
    const startNs = this.model.nextWorkNs();
    if (startNs === undefined) return;
    const delay = this.delayTo(startNs);
    if (delay < 1) this.runStep(startNs);
    else this.timer = setTimeout(() => this.runStep(startNs), delay);
  }

  private runStep(startNs: number): void {
    this.timer = undefined;
    this.model.advanceTo(startNs);
    const result: StepResult | undefined = this.model.step();
    // Nothing schedulable: the next submit starts the loop again.
    if (!result) return;
    this.options.metrics?.observeIteration(result.tokens);
    const emissions = this.pending;
    this.pending = [];
    this.timer = setTimeout(() => {
      this.timer = undefined;
      for (const { sink, last } of emissions) sink.onTokens(1, last);
      this.kick();
    }, this.delayTo(result.endNs));
  }

  private delayTo(ns: number): number {
    return Math.max(0, this.wallMsAt(ns) - performance.now());
  }
}

function finishedTiming(seq: Sequence, arrivalNs: number, endNs: number) {
  const s = (ns: number) => ns / 1e9;
  const scheduled = seq.scheduledNs ?? arrivalNs;
  const first = seq.firstTokenNs ?? endNs;
  const generated = seq.generated;
  return {
    promptTokens: seq.input.promptTokens,
    generationTokens: generated,
    finishedReason: 'length' as const,
    queueS: s(scheduled - arrivalNs),
    prefillS: s(first - scheduled),
    decodeS: s(endNs - first),
    inferenceS: s(endNs - scheduled),
    e2eS: s(endNs - arrivalNs),
    ...(generated > 1 ? { tpotS: s(endNs - first) / (generated - 1) } : {}),
  };
}
