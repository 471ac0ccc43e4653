/**
 * A trace replayed whole through the engine model in virtual time: its arrivals at `speed`, its
 * lengths, and (with block ids) the prefix sharing its HTTP replay has (sim/traceKeys.ts), over
 * one engine or data-parallel replicas behind the cluster's router. What `size --trace` runs for
 * each deployment, and what bench/trace-virtual.ts times.
 */
import type { RequestSpec } from '../backends/types.js';
import type { RequestRecord } from '../record.js';
import type { EngineCluster } from '../sim/cluster.js';
import { tracePrefixKeys } from '../sim/traceKeys.js';
import { simulateRun } from '../sim/virtual.js';
import { DISTINCT_PREFIX_TOKENS } from '../workload/synthetic.js';
import { type TraceEntry, traceLoad } from '../workload/trace.js';

export interface TraceReplayOptions {
  entries: readonly TraceEntry[];
  /** `--trace-speed`: 2 replays twice as fast. */
  speed: number;
  /** Tokens per block id (`--trace-block-tokens`). */
  blockTokens: number;
  source?: string;
  /**
   * false: records carry times and counts but no events (sim/virtual.ts), so no ITL; a reader
   * of TTFT and E2E alone saves the time of building them.
   */
  events?: boolean;
  onRecord: (record: RequestRecord) => void;
}

export interface TraceReplayResult {
  /** Engine time the replay covered, seconds. */
  simulatedS: number;
  steps: number;
  /**
   * Prompt tokens served from the prefix cache over prompt tokens asked, all replicas together
   * (the simulator's truth, vLLM's counters); undefined with prefix caching off.
   */
  prefixCacheHitRate?: number;
}

/** Replays the trace: request `id` is entry `id`, sent at its time over the speed. */
export function replayTraceVirtual(
  engine: EngineCluster,
  o: TraceReplayOptions,
): TraceReplayResult {
  const { entries } = o;
  const keys = tracePrefixKeys(entries, engine.config.blockSize, o.blockTokens);
  const result = simulateRun({
    engine,
    load: traceLoad(entries, { speed: o.speed, ...(o.source ? { source: o.source } : {}) }),
    requests: entries.length,
    warmupRequests: 0,
    seed: 1,
    endpoint: 'completions',
    nextRequest: (id): RequestSpec => {
      const e = entries[id];
      // As the HTTP replay asks: at least one token each way (workload.ts).
      const input = Math.max(1, e.inputTokens);
      return {
        prompt: '',
        promptWords: input,
        requestedInputTokens: input,
        requestedOutputTokens: Math.max(1, e.outputTokens),
        // Without ids its prompt shares no block: its own keys (sim/virtual.ts).
        distinctPrefixTokens: DISTINCT_PREFIX_TOKENS,
      };
    },
    ...(keys ? { prefixKeys: keys } : {}),
    events: o.events !== false,
    onRecord: o.onRecord,
  });
  const counters = engine.summedCounters();
  return {
    simulatedS: result.simulatedS,
    steps: result.steps,
    ...(engine.config.prefixCaching
      ? {
          prefixCacheHitRate:
            counters.prefixQueryTokens > 0
              ? counters.prefixHitTokens / counters.prefixQueryTokens
              : 0,
        }
      : {}),
  };
}
