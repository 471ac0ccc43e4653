import { performance } from 'node:perf_hooks';
import { EngineCluster, type Routed } from './cluster.js';
import type { EngineRequest, GenerationSink, ServingEngine } from './engine.js';
import { EngineModel, type Sequence, type StepResult } from './engineModel.js';
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

/**
 * promptBlockHashes fed text by text, without the words: each text is split as splitWords does
 * (runs of anything but space, tab, CR and LF), so feeding the texts a prompt's words come from,
 * then its answer's words, gives the same hashes and count.
 */
export class WordHasher {
  readonly hashes: number[] = [];
  words = 0;
  private h = 0x811c9dc5;

  constructor(private readonly blockSize: number) {}

  feed(text: string): void {
    let h = this.h;
    let inWord = false;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 10 || c === 9 || c === 13) {
        if (inWord) h = this.endWord(h);
        inWord = false;
      } else {
        h = Math.imul(h ^ c, 0x01000193);
        inWord = true;
      }
    }
    if (inWord) h = this.endWord(h);
    this.h = h;
  }

  private endWord(h: number): number {
    const ended = Math.imul(h ^ 0x20, 0x01000193);
    if (++this.words % this.blockSize === 0) this.hashes.push(ended >>> 0);
    return ended;
  }
}

/** How far (real milliseconds) a step may start behind its engine time before it starts now. */
const LAG_LIMIT_MS = 3;

interface Pending {
  sink: GenerationSink;
  last: boolean;
}

/** One replica's step loop: its timer and the emissions of the step in progress. */
interface Loop {
  timer: NodeJS.Timeout | undefined;
  pending: Pending[];
}

/**
 * Runs the engine model on the wall clock: engine time t ns is released at
 * `origin + t x timeScale` ms of real time. Each step is computed when the previous one ends
 * (so it sees exactly the requests that arrived by then) and its tokens are written when its
 * end time comes; timers aim at absolute targets, so their lateness never accumulates. With
 * data-parallel replicas each has its own step loop on the same clock.
 */
export class PhysicalEngine implements ServingEngine {
  private readonly origin = performance.now();
  readonly cluster: EngineCluster;
  private readonly loops: Loop[];

  constructor(
    engine: EngineModel | EngineCluster,
    private readonly options: { timeScale: number; metrics?: SimMetrics },
  ) {
    this.cluster = engine instanceof EngineModel ? new EngineCluster([engine]) : engine;
    this.loops = this.cluster.replicas.map(() => ({ timer: undefined, pending: [] }));
  }

  /** Engine time now, from the wall clock. */
  private engineNowNs(): number {
    return Math.round(((performance.now() - this.origin) / this.options.timeScale) * 1e6);
  }

  private wallMsAt(ns: number): number {
    return this.origin + (ns / 1e6) * this.options.timeScale;
  }

  validate(request: EngineRequest): string | undefined {
    return this.cluster.validate(request.inputTokens, request.maxOutputTokens);
  }

  /** Also says which replica took the request (the truth records it). */
  submit(request: EngineRequest, sink: GenerationSink): { cancel(): void; replica: number } {
    const metrics = this.options.metrics;
    const config = this.cluster.config;
    const arrivalNs = this.engineNowNs();
    let lastTokenNs = 0;
    let replica = 0;
    const routed: Routed = this.cluster.add(
      {
        arrivalNs,
        promptTokens: request.inputTokens,
        maxTokens: request.maxOutputTokens,
        ...(request.chat ? { chat: true } : {}),
        ...(config.prefixCaching && request.promptWords
          ? {
              blockHashes: promptBlockHashes(
                [...request.promptWords, ...(request.outputWords?.() ?? [])],
                config.blockSize,
              ),
            }
          : {}),
      },
      {
        onScheduled: () => sink.onStart({ cachedPromptTokens: routed.seq.prefixHitTokens }),
        onToken: (atNs, index, last) => {
          if (metrics) {
            if (index === 0) metrics.observeTtft((atNs - arrivalNs) / 1e9, replica);
            else metrics.observeItl((atNs - lastTokenNs) / 1e9, replica);
            if (last) {
              metrics.observeFinished(finishedTiming(routed.seq, arrivalNs, atNs), replica);
            }
          }
          lastTokenNs = atNs;
          this.loops[replica].pending.push({ sink, last });
        },
      },
    );
    replica = routed.replica;
    if (request.maxOutputTokens === 0) {
      this.cluster.abort(routed);
      sink.onTokens(0, true);
      return { cancel: () => {}, replica };
    }
    this.kick(replica);
    // Tokens of a step already computed may still be written: the server drops them once the
    // response is closed.
    return { cancel: () => this.cluster.abort(routed), replica };
  }

  resetPrefixCache(): { ok: true } | { ok: false; reason: string } {
    return this.cluster.resetPrefixCache();
  }

  metricsText(): string {
    const metrics = this.options.metrics;
    if (!metrics) return '';
    const { replicas, memory: plan, config } = this.cluster;
    const usedMiB = Math.round(plan.deviceUsedBytes / 2 ** 20);
    const totalMiB = Math.round(plan.totalBytes / 2 ** 20);
    // Replica r runs on GPUs r x tp ... r x tp + tp - 1; every GPU holds the same.
    const gpus = Array.from({ length: replicas.length * config.tp }, (_, gpu) => ({
      gpu,
      usedMiB,
      freeMiB: totalMiB - usedMiB,
    }));
    const states = replicas.map((m) => {
      const c = m.counters;
      return {
        running: m.runningCount,
        waiting: m.waitingCount,
        kvCacheUsage: m.kvUsage,
        preemptions: c.preemptions,
        promptTokens: c.promptTokens,
        generationTokens: c.generationTokens,
        prefixQueryTokens: c.prefixQueryTokens,
        prefixHitTokens: c.prefixHitTokens,
      };
    });
    return metrics.render(states, gpus);
  }

  /**
   * The engine for `/debug/truth`: one replica's memory plan (every replica has the same), the
   * counters and queue lengths of all replicas summed (peaks: sums of per-replica peaks), and
   * each replica's own under `replicas`.
   */
  describe(): object {
    const cluster = this.cluster;
    const c = cluster.config;
    const state = (m: EngineModel) => ({
      counters: m.counters,
      running: m.runningCount,
      waiting: m.waitingCount,
      kvCacheUsage: m.kvUsage,
    });
    const replicas = cluster.replicas.map(state);
    return {
      engine: c.personality,
      model: c.model.id,
      gpu: c.gpu.id,
      tp: c.tp,
      dp: cluster.dp,
      loadBalancer: c.loadBalancer,
      memory: cluster.memory,
      counters: cluster.summedCounters(),
      running: replicas.reduce((n, r) => n + r.running, 0),
      waiting: replicas.reduce((n, r) => n + r.waiting, 0),
      kvCacheUsage: replicas.reduce((n, r) => n + r.kvCacheUsage, 0) / replicas.length,
      replicas: replicas.map((r, replica) => ({ replica, memory: cluster.memory, ...r })),
    };
  }

  /** Starts a replica's step loop if it is idle and there is work. */
  private kick(replica: number): void {
    const loop = this.loops[replica];
    if (loop.timer !== undefined) return;
    const startNs = this.cluster.replicas[replica].nextWorkNs();
    if (startNs === undefined) return;
    const delay = this.delayTo(startNs);
    if (delay < 1) this.runStep(replica, startNs);
    else loop.timer = setTimeout(() => this.runStep(replica, startNs), delay);
  }

  private runStep(replica: number, planned: number): void {
    const loop = this.loops[replica];
    const model = this.cluster.replicas[replica];
    loop.timer = undefined;
    // A host that cannot keep up with the time scale (steps shorter in real time than a timer's
    // ~1 ms tick, as at --time-scale 0.05) would leave the engine's clock ever further behind
    // the wall clock that stamps arrivals: it would admit a new request only once idle, serving
    // one at a time. Past LAG_LIMIT_MS of real time behind, the engine starts its step now,
    // as a GPU whose host was late does. Timers late by less keep their absolute targets.
    const nowNs = this.engineNowNs();
    const startNs =
      nowNs - planned > (LAG_LIMIT_MS / this.options.timeScale) * 1e6 ? nowNs : planned;
    model.advanceTo(startNs);
    const result: StepResult | undefined = model.step();
    if (!result) {
      // Nothing schedulable: the next submit starts the loop again, or the next request out of
      // the front end (a later arrival there delayed the one this step was started for).
      const leavesNs = model.frontEndLeaveNs();
      if (leavesNs !== undefined) {
        loop.timer = setTimeout(() => this.runStep(replica, leavesNs), this.delayTo(leavesNs));
      }
      return;
    }
    this.options.metrics?.observeIteration(result.tokens, replica);
    const emissions = loop.pending;
    loop.pending = [];
    loop.timer = setTimeout(() => {
      loop.timer = undefined;
      // A sequence's tokens of one multi-step window leave in one event, as V0 streamed them.
      for (let i = 0; i < emissions.length; ) {
        const { sink } = emissions[i];
        let j = i + 1;
        while (j < emissions.length && emissions[j].sink === sink) j++;
        sink.onTokens(j - i, emissions[j - 1].last);
        i = j;
      }
      this.kick(replica);
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
