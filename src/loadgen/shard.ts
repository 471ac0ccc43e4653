import type { LoadSpec, ShardIndex } from '../load.js';

/**
 * Splitting one run's load into shards: worker threads of one process (`--workers`) and
 * processes or pods on several machines (`--shard i/N`) use the same split, and a shard can be
 * split again (a shard's workers). The split is exact: the shards' request ids partition the
 * whole run's ids, so the union of their records is the request set of one unsplit run, and
 * request `id` asks for the same thing wherever it is sent.
 */

/** Request ids `start`, `start + stride`, ... (`count` of them; unbounded when undefined). */
export interface IdSequence {
  start: number;
  stride: number;
  count: number | undefined;
}

/** The part of a run one engine sends. */
export interface ShardPart {
  /** This part's load: its share of the concurrency (or of the open-loop cap). */
  load: LoadSpec;
  /** Warm-up request ids. */
  warmup: IdSequence;
  /** Measured request ids (unbounded when the run is limited by duration only). */
  measured: IdSequence;
}

/** The whole run as one part: warm-up ids 0..W-1, then measured ids from W. */
export function wholeRun(load: LoadSpec, warmupRequests: number, requests?: number): ShardPart {
  return {
    load,
    warmup: { start: 0, stride: 1, count: warmupRequests },
    measured: { start: warmupRequests, stride: 1, count: requests },
  };
}

/** Whether `id` is one of `seq`'s ids. */
export function inSequence(seq: IdSequence, id: number): boolean {
  const offset = id - seq.start;
  if (offset < 0 || offset % seq.stride !== 0) return false;
  return seq.count === undefined || offset / seq.stride < seq.count;
}

/** The `n`-th id of `seq` (0-based), or undefined past its end. */
export function idAt(seq: IdSequence, n: number): number | undefined {
  if (seq.count !== undefined && n >= seq.count) return undefined;
  return seq.start + n * seq.stride;
}

/**
 * The largest number of parts `part` can be split into so that each keeps at least one request
 * slot: a closed loop's concurrency, an open loop's cap (no cap: no limit).
 */
export function maxParts(part: ShardPart): number {
  const load = part.load;
  if (load.mode === 'closed') return load.concurrency;
  return load.maxConcurrency ?? Number.POSITIVE_INFINITY;
}

/**
 * Splits `part` into `count` parts.
 * - Closed loop: the concurrency into near-equal shares (they sum to it exactly); the warm-up and
 *   a counted request total into contiguous id blocks in proportion to each share, so every
 *   shard's users run out of work together; an unbounded measured sequence by interleaving.
 * - Open loop: arrival k of the one seeded schedule belongs to part k mod `count` (interleaved
 *   ids), so the parts' arrivals together are exactly the unsplit schedule; a cap on requests in
 *   flight is split like a concurrency (it is then held per part, not globally).
 * Throws when a part would get no request slot (`count` above maxParts).
 */
export function splitPart(part: ShardPart, count: number): ShardPart[] {
  if (!(Number.isInteger(count) && count >= 1)) {
    throw new Error(`a run splits into a whole number of parts >= 1, not ${count}`);
  }
  if (count > maxParts(part)) {
    const what =
      part.load.mode === 'closed'
        ? `its concurrency of ${part.load.concurrency}`
        : `its --max-concurrency of ${part.load.maxConcurrency}`;
    throw new Error(
      `cannot split a run into ${count} parts: ${what} gives each part at least one request in flight only up to ${maxParts(part)} parts`,
    );
  }
  const parts: ShardPart[] = [];
  for (let i = 0; i < count; i++) {
    const load = part.load;
    if (load.mode === 'closed') {
      const users = shareOf(load.concurrency, count, i);
      const before = shareStart(load.concurrency, count, i);
      parts.push({
        load: { ...load, concurrency: users },
        warmup: proportionalBlock(part.warmup, before, users, load.concurrency),
        measured:
          part.measured.count === undefined
            ? interleaved(part.measured, count, i)
            : proportionalBlock(part.measured, before, users, load.concurrency),
      });
    } else {
      const cap =
        load.maxConcurrency !== undefined
          ? { maxConcurrency: shareOf(load.maxConcurrency, count, i) }
          : {};
      parts.push({
        load: { ...load, ...cap },
        warmup: interleaved(part.warmup, count, i),
        measured: interleaved(part.measured, count, i),
      });
    }
  }
  return parts;
}

/** Shard `index` of `count` of a whole run (`--shard index/count`). */
export function shardOf(whole: ShardPart, shard: ShardIndex): ShardPart {
  return splitPart(whole, shard.count)[shard.index];
}

/** Share `i` of `total` split `count` ways: the first `total mod count` shares get one more. */
function shareOf(total: number, count: number, i: number): number {
  return Math.floor(total / count) + (i < total % count ? 1 : 0);
}

/** The sum of shares before share `i`. */
function shareStart(total: number, count: number, i: number): number {
  return i * Math.floor(total / count) + Math.min(i, total % count);
}

/**
 * The block of a counted sequence that `users` of `total` users starting at `before` get: ids in
 * proportion, with boundaries at floor(count x cumulative share), so blocks tile it exactly.
 */
function proportionalBlock(
  seq: IdSequence,
  before: number,
  users: number,
  total: number,
): IdSequence {
  const count = seq.count as number;
  const from = Math.floor((count * before) / total);
  const to = Math.floor((count * (before + users)) / total);
  return { start: seq.start + from * seq.stride, stride: seq.stride, count: to - from };
}

/** Every `count`-th id of `seq` from its `i`-th. */
function interleaved(seq: IdSequence, count: number, i: number): IdSequence {
  return {
    start: seq.start + i * seq.stride,
    stride: seq.stride * count,
    count: seq.count === undefined ? undefined : Math.max(0, Math.ceil((seq.count - i) / count)),
  };
}
