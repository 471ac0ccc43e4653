/**
 * How llama.cpp cuts one server iteration's batch into the physical batches (ubatches) it
 * computes, each a full forward pass over the weights: on a CPU, where a pass costs the weights'
 * read or a tinyBLAS pass, their count is most of a step's time. Pure; llama.cpp commit
 * 80fb11ac73e66d89eae2c6a91d8a77428fa733ed (node-llama-cpp 3.21.1), paths in that tree:
 * - `tools/server/server-context.cpp` update_slots: the batch is decoded in views of n_batch
 *   tokens, each one llama_decode;
 * - `src/llama-kv-cache.cpp` init_batch: one KV stream (a unified cache) splits a view
 *   `split_simple(n_ubatch)`, n_ubatch tokens at a time in batch order; one stream per slot
 *   splits it `split_equal(n_ubatch, sequential = true)`;
 * - `src/llama-batch.cpp` split_equal: a ubatch takes sequences in batch order whose ids run
 *   consecutively upward (0, 1, 2, ...: one stream after another), then the same number of tokens
 *   from each, as many as the shortest has, at most n_ubatch in all.
 */

/** One sequence's tokens in the batch, in batch order (decodes first, then prompt chunks). */
export interface BatchEntry {
  /** The slot (llama.cpp's sequence id) it runs in. */
  slot: number;
  tokens: number;
}

/** One ubatch: for each entry it takes from, the entry's index and the tokens it takes. */
export type Ubatch = { entry: number; tokens: number }[];

/**
 * The ubatches llama.cpp computes for one iteration's batch: views of `nBatch` tokens, each cut
 * by `split_simple` (`unified`) or `split_equal` (one KV stream per slot).
 */
export function planUbatches(
  entries: readonly BatchEntry[],
  o: { nBatch: number; nUbatch: number; unified: boolean },
): Ubatch[] {
  const out: Ubatch[] = [];
  // Views: consecutive n_batch-token slices of the batch (an entry may straddle two).
  let view: { entry: number; tokens: number; slot: number }[] = [];
  let inView = 0;
  const flush = () => {
    if (view.length === 0) return;
    if (o.unified) splitSimple(view, o.nUbatch, out);
    else splitEqual(view, o.nUbatch, out);
    view = [];
    inView = 0;
  };
  entries.forEach((e, entry) => {
    let left = e.tokens;
    while (left > 0) {
      const take = Math.min(left, o.nBatch - inView);
      view.push({ entry, tokens: take, slot: e.slot });
      inView += take;
      left -= take;
      if (inView >= o.nBatch) flush();
    }
  });
  flush();
  return out;
}

/** `split_simple`: the next n_ubatch tokens in batch order, whoever they belong to. */
function splitSimple(view: { entry: number; tokens: number }[], nUbatch: number, out: Ubatch[]) {
  let current: Ubatch = [];
  let size = 0;
  for (const part of view) {
    let left = part.tokens;
    while (left > 0) {
      const take = Math.min(left, nUbatch - size);
      current.push({ entry: part.entry, tokens: take });
      size += take;
      left -= take;
      if (size === nUbatch) {
        out.push(current);
        current = [];
        size = 0;
      }
    }
  }
  if (current.length > 0) out.push(current);
}

/**
 * `split_equal(n_ubatch, sequential = true)`, by entries rather than tokens (a view holds each
 * sequence's tokens together): scan the unfinished entries in order, taking one when its slot
 * is the last taken + 1 (the first always), at most n_ubatch + 1 of them as llama.cpp's scan
 * does; then k tokens from each, k = min(the fewest any has left, n_ubatch / taken, at least 1).
 */
function splitEqual(
  view: { entry: number; tokens: number; slot: number }[],
  nUbatch: number,
  out: Ubatch[],
) {
  const left = view.map((p) => p.tokens);
  let remaining = left.reduce((a, b) => a + b, 0);
  while (remaining > 0) {
    const taken: number[] = [];
    let lastSlot = Number.NaN;
    for (let i = 0; i < view.length; i++) {
      if (left[i] === 0) continue;
      if (taken.length > 0 && view[i].slot !== lastSlot + 1) continue;
      taken.push(i);
      lastSlot = view[i].slot;
      if (taken.length > nUbatch) break;
    }
    let fewest = Number.POSITIVE_INFINITY;
    for (const i of taken) fewest = Math.min(fewest, left[i]);
    const k = Math.max(1, Math.min(fewest, Math.floor(nUbatch / taken.length)));
    out.push(taken.map((i) => ({ entry: view[i].entry, tokens: k })));
    for (const i of taken) left[i] -= k;
    remaining -= k * taken.length;
  }
}
