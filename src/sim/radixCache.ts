import type { KvPool } from './kvPool.js';

/**
 * SGLang's radix cache over its token pool, as sgl-project/sglang `python/sglang/srt/mem_cache/
 * radix_cache.py` keeps it (read at commit 006b0e3d317f1cd4a7300e919a4eaa878b1947e7; the
 * personality models v0.5.5, whose tree works the same way), page size 1 (SGLang's default):
 * - A tree of token runs. `match_prefix` finds the longest cached prefix token by token and
 *   stamps every node on the way with the access time; a match ending inside a node splits it.
 * - A running request locks the nodes of its prefix (`inc_lock_ref`, every node up to the
 *   root); locked nodes are never evicted.
 * - What is inserted when: the prompt as it is prefilled (`cache_unfinished_req` after each
 *   chunk and after the prefill), the output only when the request finishes
 *   (`cache_finished_req`: prompt + output up to the KV committed, all but the last token).
 *   Tokens another request inserted meanwhile are freed from the request and the tree's copy
 *   used.
 * - `evict`: the unlocked leaves by last access time, oldest first (the default "lru" policy),
 *   a whole node at a time; a parent left childless and unlocked becomes a candidate.
 * - `reset` (the scheduler's `flush_cache`) empties the tree; the engine refuses it while any
 *   request runs or waits (engineModel.ts resetPrefixCache).
 * The scheduler's default policy is "fcfs" (`ServerArgs.schedule_policy`), so requests are
 * matched in arrival order as they are admitted (`init_next_round_input`); LPM's reordering and
 * in-batch prefix caching apply only when asked for, and are not modelled.
 * Nodes hold runs of a request's keys (`keys[start..end)`, positions in the sequence), so a
 * match compares keys by bisection (the keys are chained: kvPool.ts) and a request costs a few
 * map look-ups per node on its path, not one per token.
 */
export class RadixCache implements KvPool {
  readonly cachesOutputOnFinish = true;
  private free: number;
  private root = RadixNode.root();
  /** Tokens of unlocked nodes: evictable, sooner or later (a node's lock covers its ancestors). */
  private evictableTokens = 0;
  /** The access clock (SGLang's `time.monotonic()`, as a counter: only the order matters). */
  private clock = 0;
  /** Eviction candidates by access time; an entry is stale once its node was touched again. */
  private heap: HeapEntry[] = [];
  private nodes = 0;

  constructor(readonly total: number) {
    this.free = total;
  }

  available(): number {
    return this.free + this.evictableTokens;
  }

  used(): number {
    return this.total - this.available();
  }

  allocate(n: number): void {
    if (n <= 0) return;
    if (n > this.free) this.evict(n - this.free);
    if (n > this.free) throw new Error(`radix cache over-allocated by ${n - this.free}`);
    this.free -= n;
  }

  release(n: number): void {
    this.free += n;
  }

  lookup(keys: readonly number[], limit = keys.length): number {
    return this.walk(keys, Math.min(limit, keys.length), ++this.clock).matched;
  }

  evictableCount(keys: readonly number[], count: number): number {
    if (count <= 0) return 0;
    let n = 0;
    for (let node = this.walk(keys, count, 0).node; node.parent; node = node.parent) {
      if (node.lockRef === 0) n += Math.min(node.end, count) - node.start;
    }
    return n;
  }

  acquire(keys: readonly number[], count: number): void {
    if (count <= 0) return;
    const { node, matched } = this.walk(keys, count, 0);
    if (matched !== count) throw new Error(`radix cache holds ${matched} of ${count} tokens`);
    const end = matched < node.end ? this.split(node, matched) : node;
    for (let n: RadixNode | undefined = end; n?.parent; n = n.parent) this.lock(n);
  }

  publish(keys: readonly number[], from: number, to: number): void {
    const stamp = ++this.clock;
    let { node, matched: pos } = this.walk(keys, from, stamp);
    if (pos !== from || node.end !== from) {
      throw new Error(`radix cache path of ${from} tokens ends at ${pos} of a node to ${node.end}`);
    }
    while (pos < to) {
      const child = node.children.get(keys[pos]);
      if (child) {
        // Another request inserted these tokens first: the tree's copy is used, ours freed.
        const m = matchEnd(child.keys, keys, pos + 1, Math.min(child.end, to));
        const target = m < child.end ? this.split(child, m) : child;
        this.lock(target);
        this.touch(target, stamp);
        this.free += m - pos;
        node = target;
        pos = m;
        continue;
      }
      if (node.parent && node.keys === keys && node.lockRef === 1 && node.children.size === 0) {
        // Our own leaf, held by us alone: it grows.
        node.end = to;
      } else {
        const leaf = new RadixNode(keys, pos, to, node);
        leaf.lockRef = 1;
        node.children.set(keys[pos], leaf);
        this.nodes++;
        node = leaf;
      }
      node.lastAccess = stamp;
      pos = to;
    }
  }

  unreference(keys: readonly number[], count: number): void {
    if (count <= 0) return;
    const { node, matched } = this.walk(keys, count, 0);
    if (matched !== count || node.end !== count) {
      throw new Error(`radix cache path of ${count} tokens not held (${matched})`);
    }
    for (let n: RadixNode | undefined = node; n?.parent; n = n.parent) {
      if (--n.lockRef > 0) continue;
      this.evictableTokens += n.size;
      if (n.children.size === 0) this.push(n);
    }
  }

  resetPrefixCache(): { ok: true } | { ok: false; blocksInUse: number } {
    const used = this.used();
    if (used > 0) return { ok: false, blocksInUse: used };
    this.root = RadixNode.root();
    this.free = this.total;
    this.evictableTokens = 0;
    this.heap = [];
    this.nodes = 0;
    return { ok: true };
  }

  /** Evicts unlocked leaves, least recently accessed first, until `need` tokens are free. */
  private evict(need: number): void {
    let left = need;
    while (left > 0 && this.heap.length > 0) {
      const { stamp, node } = this.pop();
      if (!this.isCandidate(node) || stamp !== node.lastAccess) continue;
      const parent = node.parent as RadixNode;
      parent.children.delete(node.keys[node.start]);
      node.evicted = true;
      this.nodes--;
      this.evictableTokens -= node.size;
      this.free += node.size;
      left -= node.size;
      if (this.isCandidate(parent)) this.push(parent);
    }
  }

  /**
   * Follows `keys` from the root for at most `limit` tokens: the node the match ends in and
   * the tokens matched. A `stamp` (not 0) is the access time given to every node passed.
   */
  private walk(
    keys: readonly number[],
    limit: number,
    stamp: number,
  ): { node: RadixNode; matched: number } {
    let node = this.root;
    let pos = 0;
    while (pos < limit) {
      const child = node.children.get(keys[pos]);
      if (!child) break;
      pos = matchEnd(child.keys, keys, pos + 1, Math.min(child.end, limit));
      node = child;
      if (stamp) this.touch(child, stamp);
      if (pos < child.end) break;
    }
    return { node, matched: pos };
  }

  /** Splits `node` at position `at` (inside it); returns the new upper part. */
  private split(node: RadixNode, at: number): RadixNode {
    const parent = node.parent as RadixNode;
    const upper = new RadixNode(node.keys, node.start, at, parent);
    upper.lockRef = node.lockRef;
    upper.lastAccess = node.lastAccess;
    parent.children.set(node.keys[node.start], upper);
    node.start = at;
    node.parent = upper;
    upper.children.set(node.keys[at], node);
    this.nodes++;
    return upper;
  }

  private lock(node: RadixNode): void {
    if (node.lockRef++ === 0) this.evictableTokens -= node.size;
  }

  private touch(node: RadixNode, stamp: number): void {
    node.lastAccess = stamp;
    if (this.isCandidate(node)) this.push(node);
  }

  private isCandidate(node: RadixNode): boolean {
    return (
      node.parent !== undefined && !node.evicted && node.lockRef === 0 && node.children.size === 0
    );
  }

  private push(node: RadixNode): void {
    const heap = this.heap;
    if (heap.length > 2 * this.nodes + 4096) {
      // Mostly stale entries (nodes touched again, locked or gone): keep the live ones.
      this.heap = heap.filter((e) => this.isCandidate(e.node) && e.stamp === e.node.lastAccess);
      this.heap.sort((a, b) => a.stamp - b.stamp);
    }
    const h = this.heap;
    let i = h.push({ stamp: node.lastAccess, node }) - 1;
    const e = h[i];
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p].stamp <= e.stamp) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = e;
  }

  private pop(): HeapEntry {
    const h = this.heap;
    const top = h[0];
    const last = h.pop() as HeapEntry;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const c = l + 1 < h.length && h[l + 1].stamp < h[l].stamp ? l + 1 : l;
        if (h[c].stamp >= last.stamp) break;
        h[i] = h[c];
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

interface HeapEntry {
  stamp: number;
  node: RadixNode;
}

class RadixNode {
  readonly children = new Map<number, RadixNode>();
  lockRef = 0;
  lastAccess = 0;
  evicted = false;

  constructor(
    /** The keys of the request that inserted it; it holds `keys[start..end)`. */
    readonly keys: readonly number[],
    public start: number,
    public end: number,
    public parent: RadixNode | undefined,
  ) {}

  static root(): RadixNode {
    const root = new RadixNode([], 0, 0, undefined);
    root.lockRef = 1;
    return root;
  }

  get size(): number {
    return this.end - this.start;
  }
}

/** The first position in [from, to) where the chained keys differ, else `to`. */
function matchEnd(a: readonly number[], b: readonly number[], from: number, to: number): number {
  let lo = from;
  let hi = to;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] === b[mid]) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
