/**
 * `--prefix-hit-rate R`: a workload that reaches prefix-cache hit rate R on an engine that
 * caches prompt blocks. Every measured prompt starts with one of HIT_RATE_PREFIXES shared
 * prefixes of round(R x input / block) x block tokens, then text of its own; a prime phase sends
 * each prefix once before the clock starts (session/point.ts), so that the measured requests
 * find them cached: a hit of the prefix's tokens, of the prompt's, is R.
 *
 * The prefix is a whole number of the engine's cache blocks, as only full blocks are cached:
 * vLLM's `block_size` 16 (vllm/config/cache.py), SGLang's radix tree at `page_size` 1 (token
 * by token), TensorRT-LLM's `tokens_per_block` (64 for trtllm-build, 32 for the PyTorch
 * backend's KvCacheConfig: 64 is a multiple of both), llama.cpp's per-slot prompt cache token
 * by token. An engine not known gets 64, a multiple of every block size above.
 */
/** Shared prefixes a hit-rate workload cycles through (prompt `id` takes prefix `id mod 8`). */
export const HIT_RATE_PREFIXES = 8;

/** The prime phase's prompt ids: far past any measured id, each `k mod 8` names prefix k. */
export const PRIME_FIRST_ID = 1_000_000_000;

/** A measured rate this far (3 points) from the target missed it. */
export const HIT_RATE_TOLERANCE = 0.03;

/** Tokens per cache block where the engine is not known: a multiple of 1, 16, 32 and 64. */
export const UNKNOWN_BLOCK_TOKENS = 64;

/** By the engine names of telemetry/environment.ts (which this layer does not import). */
const BLOCK_TOKENS: Readonly<Record<string, number>> = {
  vllm: 16,
  'infergauge-sim': 16,
  sglang: 1,
  trtllm: 64,
  llamacpp: 1,
};

/** The block size prefixes are rounded to for this engine. */
export function engineBlockTokens(engine: string | undefined): number {
  return (
    (engine !== undefined && Object.hasOwn(BLOCK_TOKENS, engine)
      ? BLOCK_TOKENS[engine]
      : undefined) ?? UNKNOWN_BLOCK_TOKENS
  );
}

/** How a point reaches its hit rate: prefixes of `prefixTokens` each, in `blockTokens` blocks. */
export interface HitRatePlan {
  /** The rate asked for, 0..1. */
  rate: number;
  blockTokens: number;
  /** Prompt tokens the server counts per request (`--input-tokens`). */
  inputTokens: number;
  /** Tokens of each shared prefix (a whole number of blocks). */
  prefixTokens: number;
  prefixes: number;
}

/**
 * The prefix for `rate` of prompts of `inputTokens` (the server's count, of which
 * `overheadTokens` are its chat template's and BOS), or why there is none. The prefix leaves at
 * least one token of each prompt its own, so no two prompts are the same.
 */
export function hitRatePlan(o: {
  rate: number;
  inputTokens: number;
  blockTokens: number;
  overheadTokens: number;
}): HitRatePlan | { problem: string } {
  const content = o.inputTokens - o.overheadTokens;
  const most = Math.floor((content - 1) / o.blockTokens) * o.blockTokens;
  const wanted = Math.round((o.rate * o.inputTokens) / o.blockTokens) * o.blockTokens;
  if (wanted > most) {
    return {
      problem: `--prefix-hit-rate ${o.rate}: a prompt of ${o.inputTokens} tokens (${o.overheadTokens} of them the server's template) holds at most ${most} tokens of shared prefix in blocks of ${o.blockTokens}, ${pct(most / o.inputTokens)} of it; raise --input-tokens or lower the rate`,
    };
  }
  return {
    rate: o.rate,
    blockTokens: o.blockTokens,
    inputTokens: o.inputTokens,
    prefixTokens: wanted,
    prefixes: HIT_RATE_PREFIXES,
  };
}

/** What a hit-rate point achieved against its target, and whether it missed. */
export interface HitRateOutcome {
  target: number;
  /** Measured over the measured phase; absent where nothing measured it. */
  achieved?: number;
  /** Where `achieved` came from (the counters' names, or the simulator's own). */
  from?: string;
  missed: boolean;
}

export function hitRateOutcome(
  target: number,
  measured: { hitRate: number; from: string } | undefined,
): HitRateOutcome {
  if (!measured) return { target, missed: false };
  return {
    target,
    achieved: measured.hitRate,
    from: measured.from,
    missed: Math.abs(measured.hitRate - target) > HIT_RATE_TOLERANCE,
  };
}

function pct(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}
