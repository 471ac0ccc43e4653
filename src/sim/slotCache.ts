/**
 * llama-server's per-slot prompt cache, as ggml-org/llama.cpp `tools/server/server-context.cpp`
 * keeps it (get_available_slot, update_slots, try_clear_idle_slots; read in stored late-2025
 * copies of that file, the server of the tree the llamacpp personality models, personality.ts
 * LLAMACPP) with `common/common.h`'s defaults:
 * - A slot keeps the tokens of its last request (prompt and answer, as `slot.prompt.tokens`)
 *   with their KV cells after it goes idle (`server_slot::release` clears nothing).
 * - `get_available_slot`: among idle slots holding tokens, the one whose longest common prefix
 *   with the new prompt is the largest share of that prompt, above `slot_prompt_similarity`
 *   (`common_params`: 0.1); failing that, the least recently released idle slot
 *   (`t_last_used <= t_last`: the last of equals).
 * - `update_slots` with `cache_prompt` (on by default): the request reuses the common prefix and
 *   the cells past it are removed (`llama_memory_seq_rm`); a prompt wholly cached recomputes its
 *   last token, to sample from it. `timings.cache_n` counts the reused tokens.
 * - `try_clear_idle_slots`: with one KV buffer for all slots (`kv_unified`), a batch that finds
 *   no room purges idle slots' tokens, one slot at a time in slot order; with a stream per slot
 *   nothing is purged (a slot's stream is its own).
 * - The host-memory prompt cache (`server_prompt_cache`, `--cache-ram`, 8192 MiB by default;
 *   tools/server/server-task.cpp): when `get_available_slot` takes a slot by LRU, or by
 *   similarity keeping under half its tokens, the slot's tokens are saved to host memory
 *   (`alloc`: skipped where a saved prompt already holds them all, and saved prompts that the
 *   new one holds whole are dropped), then the saved prompt sharing more with the request than
 *   the slot does, both as a share of the saved prompt (at least 0.25) and of the request, is
 *   loaded into the slot and leaves the cache (`load`); `update` drops the oldest prompts while
 *   their KV bytes exceed the limit. Loading takes KV cells: where too few are free the load
 *   fails and the slot is cleared, as llama.cpp clears it. The copy's time is not modelled.
 */

/** What a request finds when it takes a slot. */
export interface SlotTake {
  slot: number;
  /** Leading prompt tokens whose KV the slot already holds. */
  reusedTokens: number;
  /** Cells the slot held past them, now freed. */
  freedCells: number;
}

/** llama-server's `--slot-prompt-similarity` default (`common/common.h`). */
export const LLAMACPP_SLOT_PROMPT_SIMILARITY = 0.1;

/** llama-server's `--cache-ram` default, 8192 MiB (`common/common.h` `cache_ram_mib`). */
export const LLAMACPP_CACHE_RAM_BYTES = 8192 * 1024 * 1024;

export class SlotPromptCache {
  /** Which slots run a request. */
  private readonly busy: boolean[];
  /** When each slot was last released (-1: never used). */
  private readonly releasedNs: number[];
  /** Keys of the tokens each slot holds (its last request's), and how many it holds. */
  private readonly keys: (readonly number[] | undefined)[];
  private readonly cells: number[];
  /** The host-memory prompt cache, oldest first. */
  private saved: { keys: readonly number[]; tokens: number }[] = [];

  constructor(
    slots: number,
    private readonly o: {
      /** One KV buffer for all slots: idle slots are purged under pressure. */
      unified: boolean;
      /** `cache_prompt`: reuse a slot's tokens (else a slot is cleared for each request). */
      cachePrompt: boolean;
      similarity?: number;
      /** `--cache-ram` in bytes (0: none, Infinity: no limit) and a token's KV bytes. */
      hostCacheBytes?: number;
      kvBytesPerToken?: number;
    },
  ) {
    this.busy = new Array<boolean>(slots).fill(false);
    this.releasedNs = new Array<number>(slots).fill(-1);
    this.keys = new Array<readonly number[] | undefined>(slots).fill(undefined);
    this.cells = new Array<number>(slots).fill(0);
  }

  /** Cells idle slots hold (counted as used, as llama.cpp's KV usage counts them). */
  get idleCells(): number {
    let n = 0;
    for (let i = 0; i < this.cells.length; i++) if (!this.busy[i]) n += this.cells[i];
    return n;
  }

  /**
   * The slot a request with these keys takes (one must be idle) and the tokens it reuses there,
   * at most `promptTokens - 1`.
   */
  take(
    keys: readonly number[] | undefined,
    promptTokens: number,
    freeCells = Number.POSITIVE_INFINITY,
  ): SlotTake {
    const similarity = this.o.similarity ?? LLAMACPP_SLOT_PROMPT_SIMILARITY;
    let slot = -1;
    let save = false;
    if (this.o.cachePrompt && keys && similarity !== 0) {
      let best = 0;
      for (let i = 0; i < this.busy.length; i++) {
        if (this.busy[i] || this.cells[i] === 0) continue;
        const sim = this.commonPrefix(i, keys, promptTokens) / promptTokens;
        if (sim > best && sim > similarity) {
          best = sim;
          slot = i;
        }
      }
      // About to lose most of the slot's tokens: they are saved first.
      if (slot >= 0) save = (best * promptTokens) / this.cells[slot] < 0.5;
    }
    if (slot < 0) {
      for (let i = 0; i < this.busy.length; i++) {
        if (this.busy[i]) continue;
        if (slot < 0 || this.releasedNs[i] <= this.releasedNs[slot]) slot = i;
      }
      save = true;
    }
    if (slot < 0) throw new Error('no idle slot');
    const held = this.cells[slot];
    if (save && this.o.cachePrompt && keys && held > 0 && this.hostCacheBytes > 0) {
      this.saveSlot(slot);
      this.loadBest(slot, keys, promptTokens, held + freeCells);
      this.trimSaved();
    }
    let reused =
      this.o.cachePrompt && keys && this.cells[slot] > 0
        ? this.commonPrefix(slot, keys, promptTokens)
        : 0;
    if (reused >= promptTokens) reused = Math.max(0, promptTokens - 1);
    const freedCells = held - reused;
    this.busy[slot] = true;
    this.keys[slot] = undefined;
    this.cells[slot] = 0;
    return { slot, reusedTokens: reused, freedCells };
  }

  /** A request left its slot at `nowNs`, its `cells` (tokens with KV, keyed by `keys`) kept. */
  release(slot: number, keys: readonly number[] | undefined, cells: number, nowNs: number): void {
    this.busy[slot] = false;
    this.releasedNs[slot] = nowNs;
    this.keys[slot] = keys;
    this.cells[slot] = cells;
  }

  /**
   * `try_clear_idle_slots`: frees the first idle slot's tokens (unified KV only). Returns the
   * cells freed, 0 when none could be.
   */
  purgeIdle(): number {
    if (!this.o.unified) return 0;
    for (let i = 0; i < this.cells.length; i++) {
      if (this.busy[i] || this.cells[i] === 0) continue;
      const freed = this.cells[i];
      this.cells[i] = 0;
      this.keys[i] = undefined;
      return freed;
    }
    return 0;
  }

  /** Clears every idle slot (`POST /slots/{id}?action=erase` on each); returns the cells freed. */
  eraseIdle(): number {
    let freed = 0;
    for (let i = 0; i < this.cells.length; i++) {
      if (this.busy[i]) continue;
      freed += this.cells[i];
      this.cells[i] = 0;
      this.keys[i] = undefined;
    }
    return freed;
  }

  /** Prompts in the host-memory cache, and their tokens. */
  get hostCache(): { prompts: number; tokens: number } {
    let tokens = 0;
    for (const p of this.saved) tokens += p.tokens;
    return { prompts: this.saved.length, tokens };
  }

  private get hostCacheBytes(): number {
    return this.o.hostCacheBytes ?? LLAMACPP_CACHE_RAM_BYTES;
  }

  /** `server_prompt_cache::alloc`: the slot's tokens, saved to host memory. */
  private saveSlot(slot: number): void {
    const keys = this.keys[slot] as readonly number[];
    const tokens = Math.min(this.cells[slot], keys.length);
    if (tokens === 0) return;
    for (const p of this.saved) {
      if (commonPrefixLength(p.keys, keys, Math.min(p.tokens, tokens)) === tokens) return;
    }
    this.saved = this.saved.filter(
      (p) => commonPrefixLength(p.keys, keys, Math.min(p.tokens, tokens)) !== p.tokens,
    );
    this.saved.push({ keys, tokens });
  }

  /**
   * `server_prompt_cache::load`: the saved prompt sharing a larger share both of itself and of
   * the request than the slot's tokens do (keeping at least a quarter of itself) replaces them;
   * `room` is the cells the slot may fill.
   */
  private loadBest(slot: number, keys: readonly number[], promptTokens: number, room: number) {
    const held = this.cells[slot];
    const lcp = this.commonPrefix(slot, keys, promptTokens);
    let keepBest = held > 0 ? lcp / held : -1;
    let simBest = lcp / promptTokens;
    let best = -1;
    for (let i = 0; i < this.saved.length; i++) {
      const p = this.saved[i];
      const shared = commonPrefixLength(p.keys, keys, Math.min(p.tokens, promptTokens));
      const keep = shared / p.tokens;
      const sim = shared / promptTokens;
      if (keep < 0.25) continue;
      if (keepBest < keep && simBest < sim) {
        keepBest = keep;
        simBest = sim;
        best = i;
      }
    }
    if (best < 0) return;
    const [p] = this.saved.splice(best, 1);
    // llama_state_seq_set_data needs the cells; where it fails the slot is cleared.
    const loaded = p.tokens <= room;
    this.keys[slot] = loaded ? p.keys : undefined;
    this.cells[slot] = loaded ? p.tokens : 0;
  }

  /** `server_prompt_cache::update`: the oldest prompts go while the cache is over its size. */
  private trimSaved(): void {
    const perToken = this.o.kvBytesPerToken ?? 0;
    let tokens = 0;
    for (const p of this.saved) tokens += p.tokens;
    while (this.saved.length > 0 && tokens * perToken > this.hostCacheBytes) {
      tokens -= (this.saved.shift() as { tokens: number }).tokens;
    }
  }

  /** Leading tokens, of the first `limit` of `keys`, that slot `i` holds. */
  private commonPrefix(i: number, keys: readonly number[], limit: number): number {
    const held = this.keys[i];
    if (!held) return 0;
    return commonPrefixLength(held, keys, Math.min(limit, this.cells[i]));
  }
}

/**
 * How many leading keys two chains share, of the first `limit`. Keys name a token with all
 * before it (chained hashes, or one request's own numbers), so the shared part is a prefix and
 * its end is found by bisection.
 */
export function commonPrefixLength(
  a: readonly number[],
  b: readonly number[],
  limit = Number.POSITIVE_INFINITY,
): number {
  let lo = 0;
  let hi = Math.min(limit, a.length, b.length);
  // Invariant: the first lo keys agree; key hi (if any) and all after it differ.
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] === b[mid]) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
