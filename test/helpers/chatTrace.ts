import { createRng, type Rng } from '../../src/rng.js';
import type { TraceEntry } from '../../src/workload/trace.js';

/**
 * A Mooncake-like trace of chats that grow turn by turn: each request either continues a chat
 * (re-sending its block ids and adding a turn's) or opens one with the shared first block 0.
 * Ids are chained per chat, as Mooncake's remapped hashes are.
 */
export function chatTrace(
  n: number,
  o: {
    seed: number;
    /** Chance that a request continues an open chat. */
    continueChance: number;
    /** The block size of the ids (default 512). */
    blockTokens?: number;
    /** Tokens a turn adds (default one block). */
    turnTokens?: number;
    outputTokens: { min: number; spread: number };
    /** ms before the request (the first then shifted to 0), or after it when `gapAfter`. */
    gapMs: (rng: Rng) => number;
    gapAfter?: boolean;
  },
): TraceEntry[] {
  const block = o.blockTokens ?? 512;
  const perTurn = (o.turnTokens ?? block) / block;
  const rng = createRng(o.seed);
  const chats: number[][] = [];
  let next = 1;
  const fresh = () => Array.from({ length: perTurn }, () => next++);
  let atMs = 0;
  const out: TraceEntry[] = [];
  for (let i = 0; i < n; i++) {
    if (!o.gapAfter) atMs += o.gapMs(rng);
    let ids: number[];
    if (chats.length > 0 && rng.next() < o.continueChance) {
      const c = rng.int(chats.length);
      ids = [...chats[c], ...fresh()];
      chats[c] = ids;
    } else {
      ids = [0, ...fresh()];
      chats.push(ids);
    }
    out.push({
      atMs: Math.round(atMs),
      inputTokens: (ids.length - 1) * block + 1 + rng.int(block),
      outputTokens: o.outputTokens.min + rng.int(o.outputTokens.spread),
      hashIds: ids,
    });
    if (o.gapAfter) atMs += o.gapMs(rng);
  }
  const t0 = out[0]?.atMs ?? 0;
  for (const e of out) e.atMs -= t0;
  return out;
}
