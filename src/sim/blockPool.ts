/**
 * vLLM's paged KV block pool with optional prefix caching. Blocks are counted, not addressed:
 * a sequence owns `own` uncached blocks plus references to cached full prompt blocks, named by
 * the chained hash of their tokens. A cached block nobody references stays reusable until
 * space is needed; then the least recently freed one is evicted (vLLM's free-queue order).
 */
export class BlockPool {
  private free: number;
  /** Cached blocks in use: hash -> references. */
  private readonly referenced = new Map<number, number>();
  /** Cached blocks with no reference, oldest first (Map keeps insertion order). */
  private readonly evictable = new Map<number, true>();

  constructor(readonly total: number) {
    this.free = total;
  }

  /** Blocks that can be handed out now (free plus evictable cached ones). */
  available(): number {
    return this.free + this.evictable.size;
  }

  /** Blocks holding live sequence data, vLLM's `kv_cache_usage_perc` numerator. */
  used(): number {
    return this.total - this.available();
  }

  /** Takes `n` blocks, evicting cached ones if needed. The caller checked `available()`. */
  allocate(n: number): void {
    if (n <= 0) return;
    const fromFree = Math.min(n, this.free);
    this.free -= fromFree;
    let rest = n - fromFree;
    for (const hash of this.evictable.keys()) {
      if (rest === 0) break;
      this.evictable.delete(hash);
      rest--;
    }
    if (rest > 0) throw new Error(`block pool over-allocated by ${rest}`);
  }

  release(n: number): void {
    this.free += n;
  }

  /**
   * Leading hashes, of the first `limit`, that are cached (referenced or evictable): the
   * prefix-cache hit in blocks.
   */
  lookup(hashes: readonly number[], limit = hashes.length): number {
    let hits = 0;
    while (hits < Math.min(limit, hashes.length)) {
      const h = hashes[hits];
      if (!this.referenced.has(h) && !this.evictable.has(h)) break;
      hits++;
    }
    return hits;
  }

  /** How many of `hashes[0..count)` are cached but unreferenced (taking them uses space). */
  evictableCount(hashes: readonly number[], count: number): number {
    let n = 0;
    for (let i = 0; i < count; i++) if (this.evictable.has(hashes[i])) n++;
    return n;
  }

  /** References the cached blocks `hashes[0..count)`, taking them out of the evictable set. */
  acquire(hashes: readonly number[], count: number): void {
    for (let i = 0; i < count; i++) {
      const h = hashes[i];
      if (this.evictable.delete(h)) this.referenced.set(h, 1);
      else this.referenced.set(h, (this.referenced.get(h) ?? 0) + 1);
    }
  }

  /**
   * Turns one of a sequence's own full prompt blocks into the cached block `hash`. When that
   * content is already cached (two sequences computed it at once) the sequence references the
   * cached copy instead and its own block goes back to the pool.
   */
  publish(hash: number): void {
    if (this.referenced.has(hash) || this.evictable.has(hash)) {
      this.acquire([hash], 1);
      this.free++;
      return;
    }
    this.referenced.set(hash, 1);
  }

  /** Drops one reference to each cached block; unreferenced ones become evictable. */
  unreference(hashes: readonly number[], count: number): void {
    for (let i = 0; i < count; i++) {
      const h = hashes[i];
      const refs = (this.referenced.get(h) ?? 1) - 1;
      if (refs > 0) this.referenced.set(h, refs);
      else {
        this.referenced.delete(h);
        this.evictable.set(h, true);
      }
    }
  }
}
