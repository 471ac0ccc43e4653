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
 * Not modelled: the host-memory prompt cache (`--cache-ram`), which saves a slot's tokens when
 * it is taken by LRU and can load another saved prompt into it.
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

export class SlotPromptCache {
  /** Which slots run a request. */
  private readonly busy: boolean[];
  /** When each slot was last released (-1: never used). */
  private readonly releasedNs: number[];
  /** Keys of the tokens each slot holds (its last request's), and how many it holds. */
  private readonly keys: (readonly number[] | undefined)[];
  private readonly cells: number[];

  constructor(
    slots: number,
    private readonly o: {
      /** One KV buffer for all slots: idle slots are purged under pressure. */
      unified: boolean;
      /** `cache_prompt`: reuse a slot's tokens (else a slot is cleared for each request). */
      cachePrompt: boolean;
      similarity?: number;
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
  take(keys: readonly number[] | undefined, promptTokens: number): SlotTake {
    const similarity = this.o.similarity ?? LLAMACPP_SLOT_PROMPT_SIMILARITY;
    let slot = -1;
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
    }
    if (slot < 0) {
      for (let i = 0; i < this.busy.length; i++) {
        if (this.busy[i]) continue;
        if (slot < 0 || this.releasedNs[i] <= this.releasedNs[slot]) slot = i;
      }
    }
    if (slot < 0) throw new Error('no idle slot');
    let reused =
      this.o.cachePrompt && keys && this.cells[slot] > 0
        ? this.commonPrefix(slot, keys, promptTokens)
        : 0;
    if (reused >= promptTokens) reused = promptTokens - 1;
    const freedCells = this.cells[slot] - reused;
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
