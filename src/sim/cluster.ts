import type { VllmMemoryPlan } from '../memory/footprint.js';
import {
  type EngineCounters,
  EngineModel,
  type EngineModelConfig,
  type EngineModelOptions,
  type Sequence,
  type SequenceInput,
  type SequenceListener,
} from './engineModel.js';

/**
 * vLLM's data-parallel load-balancing score (`DPLBAsyncMPClient.get_core_engine_for_request` in
 * vllm/v1/engine/core_client.py): `waiting * 4 + running`, the lowest wins, ties to the first
 * engine looked at (engine 0 for a single API server, whose `eng_start_index` is 0).
 */
const WAITING_WEIGHT = 4;

/** A request placed on one replica. */
export interface Routed {
  replica: number;
  seq: Sequence;
}

/**
 * `dp` replicas of one engine (`--dp`, vLLM's `--data-parallel-size`), each on its own `tp`
 * GPUs with its own KV pool and scheduler, behind one front end that picks a replica per new
 * request: `round-robin`, or `least-loaded` by vLLM's score. A request stays on its replica
 * (vLLM does not migrate requests). It does no I/O and keeps no clock of its own: virtual.ts
 * and physical.ts drive the replicas.
 */
export class EngineCluster {
  readonly replicas: EngineModel[];
  /** Requests on each replica that have not finished or been aborted (waiting + running). */
  private readonly unfinished: number[];
  private nextRoundRobin = 0;

  /**
   * Resets every replica's prefix cache (each engine core keeps its own), refusing as a whole
   * when one refuses: a reset that left one replica warm would not be one. Every replica is
   * asked first, so a refusal changes nothing.
   */
  resetPrefixCache(): { ok: true } | { ok: false; reason: string } {
    for (const [i, replica] of this.replicas.entries()) {
      const refused = replica.canResetPrefixCache();
      if (refused !== undefined) {
        return {
          ok: false,
          reason: this.replicas.length > 1 ? `replica ${i}: ${refused}` : refused,
        };
      }
    }
    for (const replica of this.replicas) replica.resetPrefixCache();
    return { ok: true };
  }

  /** Throws where vLLM would refuse to start (every replica has the same plan). */
  constructor(options: EngineModelOptions | EngineModel[]) {
    if (Array.isArray(options)) this.replicas = options;
    else {
      const first = new EngineModel(options);
      this.replicas = [first];
      for (let r = 1; r < first.config.dp; r++) this.replicas.push(new EngineModel(options));
    }
    this.unfinished = this.replicas.map(() => 0);
  }

  /** Each replica's configuration (they are the same). */
  get config(): EngineModelConfig {
    return this.replicas[0].config;
  }

  /** One replica's memory plan, per GPU (every replica has the same). */
  get memory(): VllmMemoryPlan {
    return this.replicas[0].memory;
  }

  get dp(): number {
    return this.replicas.length;
  }

  /** KV blocks of all replicas together. */
  get totalBlocks(): number {
    return this.memory.numGpuBlocks * this.replicas.length;
  }

  validate(promptTokens: number, maxTokens: number): string | undefined {
    return this.replicas[0].validate(promptTokens, maxTokens);
  }

  /** Routes a new request to a replica by the load balancer and adds it there. */
  add(input: SequenceInput, listener: SequenceListener): Routed {
    const replica = this.pick();
    const engine = this.replicas[replica];
    if (this.replicas.length === 1) return { replica, seq: engine.add(input, listener) };
    this.unfinished[replica]++;
    // Count the request out when it ends; the listener stays the caller's own otherwise.
    const seq = engine.add(input, {
      ...(listener.onScheduled ? { onScheduled: (at) => listener.onScheduled?.(at) } : {}),
      ...(listener.onPreempted ? { onPreempted: (at) => listener.onPreempted?.(at) } : {}),
      onToken: (at, index, last) => {
        if (last) this.unfinished[replica]--;
        listener.onToken(at, index, last);
      },
    });
    return { replica, seq };
  }

  abort(routed: Routed): void {
    if (routed.seq.done) return;
    this.replicas[routed.replica].abort(routed.seq);
    if (this.replicas.length > 1) this.unfinished[routed.replica]--;
  }

  /** The replica a new request goes to now. */
  private pick(): number {
    const n = this.replicas.length;
    if (n === 1) return 0;
    if (this.config.loadBalancer === 'round-robin') {
      const r = this.nextRoundRobin;
      this.nextRoundRobin = (r + 1) % n;
      return r;
    }
    // vLLM counts a routed request as waiting at once (its local increment between the
    // coordinator's stats updates), so every request not yet running counts as waiting here.
    let best = 0;
    let bestScore = Number.POSITIVE_INFINITY;
    for (let r = 0; r < n; r++) {
      const running = this.replicas[r].runningCount;
      const score = (this.unfinished[r] - running) * WAITING_WEIGHT + running;
      if (score < bestScore) {
        bestScore = score;
        best = r;
      }
    }
    return best;
  }

  /** Counters of all replicas summed; the peaks are sums of per-replica peaks (an upper bound). */
  summedCounters(): EngineCounters {
    const sum: EngineCounters = { ...this.replicas[0].counters };
    for (let r = 1; r < this.replicas.length; r++) {
      const c = this.replicas[r].counters;
      for (const key of Object.keys(sum) as (keyof EngineCounters)[]) sum[key] += c[key];
    }
    return sum;
  }
}
