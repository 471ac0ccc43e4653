/**
 * The KV pool and the prefix cache in it, as the engine model uses them, whichever engine's
 * cache it is: vLLM's and TensorRT-LLM's hashed blocks (blockPool.ts) or SGLang's radix tree
 * (radixCache.ts). Space is counted in blocks (SGLang's are tokens, page size 1). A request
 * holds its own uncached blocks, counted by the engine, and references the leading cached ones
 * by their keys: `keys[i]` names block i with every block before it (chained hashes, or one
 * request's own numbers), so two requests share block i only where they share all before it.
 */
export interface KvPool {
  readonly total: number;
  /**
   * SGLang inserts a request's output into its tree only when the request finishes
   * (`cache_finished_req`); the others cache each block as it fills.
   */
  readonly cachesOutputOnFinish: boolean;
  /** Blocks that can be handed out now: free ones and cached ones nobody references. */
  available(): number;
  /** Blocks in use (referenced or owned by running requests). */
  used(): number;
  /** Takes `n` blocks, evicting unreferenced cached ones as the engine does when short. */
  allocate(n: number): void;
  /** Gives back `n` uncached blocks. */
  release(n: number): void;
  /** The leading blocks, of the first `limit` keys, that are cached: the prefix-cache hit. */
  lookup(keys: readonly number[], limit?: number): number;
  /** How many of the first `count` keys' blocks are cached but unreferenced. */
  evictableCount(keys: readonly number[], count: number): number;
  /** References the cached blocks `keys[0..count)` (a hit just looked up). */
  acquire(keys: readonly number[], count: number): void;
  /**
   * The holder of `keys[0..from)` computed blocks `from..to` in blocks of its own: they become
   * cached (where another request cached the same content meanwhile, the holder references that
   * copy and its own goes back to the pool).
   */
  publish(keys: readonly number[], from: number, to: number): void;
  /** Drops the holder's references to `keys[0..count)`. */
  unreference(keys: readonly number[], count: number): void;
  /** Forgets every cached block, refused while any block is in use. */
  resetPrefixCache(): { ok: true } | { ok: false; blocksInUse: number };
}
