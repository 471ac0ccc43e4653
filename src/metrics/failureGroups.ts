/**
 * Failed requests grouped by kind, status and message, in bounded memory whatever the run's
 * messages: every distinct message is counted exactly by a 64-bit hash of it (20 bytes a
 * message, no text), up to MAX_DISTINCT_FAILURES distinct; only the `keep` most frequent keep
 * their text. Since each count is exact, "most frequent" is exact too: a message enters the kept
 * set the moment its count passes the least kept one's (a heap of `keep`), so counts only
 * rising means the kept set is always the true top `keep` (ties to the earlier). A message that
 * 98 % of the failures carry is shown even when a thousand others came first.
 *
 * Two messages share a group only if both 32-bit halves of their hashes collide: at a million
 * distinct messages, about 3 chances in 100 million for any pair in the run.
 */
import type { ErrorKind } from '../record.js';

/** Distinct messages whose text is kept (the report shows the 20 most frequent). */
export const MAX_FAILURE_GROUPS = 1000;
/**
 * Distinct messages counted exactly (a table of 2^21 slots, 40 MiB, at most). A message first
 * seen after this many others is counted as a failure but in no group (`ungrouped`).
 */
export const MAX_DISTINCT_FAILURES = 2 ** 20;
/** Characters of a message kept and compared (longer ones are grouped by their start). */
export const FAILURE_MESSAGE_CHARS = 1000;

export interface FailureGroup {
  kind: ErrorKind;
  status?: number;
  message: string;
  /** Requests that failed so: exact. */
  n: number;
  /** Id of the first of them read. */
  first: number;
}

/** What a run's failures come to (see FailureGroups). */
export interface FailureCounts {
  /** Failed requests. */
  failed: number;
  /** The most frequent messages (at most MAX_FAILURE_GROUPS), by count, most first. */
  groups: FailureGroup[];
  /** Distinct messages: exact when `ungrouped` is 0, else a lower bound. */
  distinct: number;
  /** Failures whose message came after MAX_DISTINCT_FAILURES distinct ones: in no group. */
  ungrouped: number;
}

interface Kept {
  group: FailureGroup;
  hi: number;
  lo: number;
  /** Its slot in the table. */
  slot: number;
}

const INITIAL_SLOTS = 64;

export class FailureGroups {
  failed = 0;
  private ungrouped = 0;
  private size = 0;
  /** Per slot: the two hash halves at 2i and 2i+1; count 0 marks an empty slot. */
  private hashes = new Uint32Array(2 * INITIAL_SLOTS);
  private counts = new Uint32Array(INITIAL_SLOTS);
  private firsts = new Float64Array(INITIAL_SLOTS);
  /** Min-heap by count of the kept messages, and where each kept slot sits in it. */
  private readonly heap: Kept[] = [];
  private readonly heapIndex = new Map<number, number>();

  constructor(
    private readonly keep = MAX_FAILURE_GROUPS,
    private readonly maxDistinct = MAX_DISTINCT_FAILURES,
  ) {}

  /** Bytes of the counting table (the kept texts aside). */
  get tableBytes(): number {
    return this.hashes.byteLength + this.counts.byteLength + this.firsts.byteLength;
  }

  add(kind: ErrorKind, status: number | undefined, rawMessage: string, id: number): void {
    this.failed++;
    const message =
      rawMessage.length > FAILURE_MESSAGE_CHARS
        ? rawMessage.slice(0, FAILURE_MESSAGE_CHARS)
        : rawMessage;
    hashInto(kind, status, message);
    const hi = hashOut[0];
    const lo = hashOut[1];
    let slot = this.find(hi, lo);
    if (this.counts[slot] === 0) {
      if (this.size >= this.maxDistinct) {
        this.ungrouped++;
        return;
      }
      // Grown at half full: probes stay short, and the largest table is 2 x maxDistinct slots.
      if (2 * (this.size + 1) > this.counts.length) {
        this.grow();
        slot = this.find(hi, lo);
      }
      this.hashes[2 * slot] = hi;
      this.hashes[2 * slot + 1] = lo;
      this.firsts[slot] = id;
      this.size++;
    }
    const n = ++this.counts[slot];
    this.rank(slot, hi, lo, n, kind, status, message);
  }

  /** The counts so far (the builder can go on after). */
  build(): FailureCounts {
    const groups = this.heap
      .map((k) => ({ ...k.group }))
      .sort((a, b) => b.n - a.n || a.first - b.first);
    return { failed: this.failed, groups, distinct: this.size, ungrouped: this.ungrouped };
  }

  /** The message's slot, or the empty slot where it would go (linear probing). */
  private find(hi: number, lo: number): number {
    const mask = this.counts.length - 1;
    let slot = (lo ^ Math.imul(hi, 0x9e3779b1)) & mask;
    while (this.counts[slot] !== 0) {
      if (this.hashes[2 * slot] === hi && this.hashes[2 * slot + 1] === lo) return slot;
      slot = (slot + 1) & mask;
    }
    return slot;
  }

  private grow(): void {
    const { hashes, counts, firsts } = this;
    this.hashes = new Uint32Array(hashes.length * 2);
    this.counts = new Uint32Array(counts.length * 2);
    this.firsts = new Float64Array(firsts.length * 2);
    for (let i = 0; i < counts.length; i++) {
      if (counts[i] === 0) continue;
      const slot = this.find(hashes[2 * i], hashes[2 * i + 1]);
      this.hashes[2 * slot] = hashes[2 * i];
      this.hashes[2 * slot + 1] = hashes[2 * i + 1];
      this.counts[slot] = counts[i];
      this.firsts[slot] = firsts[i];
    }
    this.heapIndex.clear();
    this.heap.forEach((k, i) => {
      k.slot = this.find(k.hi, k.lo);
      this.heapIndex.set(k.slot, i);
    });
  }

  /** Keeps the message's text if its count is now among the `keep` highest. */
  private rank(
    slot: number,
    hi: number,
    lo: number,
    n: number,
    kind: ErrorKind,
    status: number | undefined,
    message: string,
  ): void {
    const at = this.heapIndex.get(slot);
    if (at !== undefined) {
      this.heap[at].group.n = n;
      this.siftDown(at);
      return;
    }
    if (this.keep === 0) return;
    const group: FailureGroup = {
      kind,
      ...(status !== undefined ? { status } : {}),
      message,
      n,
      first: this.firsts[slot],
    };
    if (this.heap.length < this.keep) {
      this.heap.push({ group, hi, lo, slot });
      this.heapIndex.set(slot, this.heap.length - 1);
      this.siftUp(this.heap.length - 1);
      return;
    }
    // Only a count above the least kept one's displaces it (ties stay with the earlier).
    if (n <= this.heap[0].group.n) return;
    this.heapIndex.delete(this.heap[0].slot);
    this.heap[0] = { group, hi, lo, slot };
    this.heapIndex.set(slot, 0);
    this.siftDown(0);
  }

  private siftUp(i: number): void {
    const { heap } = this;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent].group.n <= heap[i].group.n) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private siftDown(i: number): void {
    const { heap } = this;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) return;
      const right = left + 1;
      const child = right < heap.length && heap[right].group.n < heap[left].group.n ? right : left;
      if (heap[i].group.n <= heap[child].group.n) return;
      this.swap(i, child);
      i = child;
    }
  }

  private swap(i: number, j: number): void {
    const { heap } = this;
    [heap[i], heap[j]] = [heap[j], heap[i]];
    this.heapIndex.set(heap[i].slot, i);
    this.heapIndex.set(heap[j].slot, j);
  }
}

/**
 * Two independent 32-bit hashes of kind, status and message (FNV-1a and a Murmur-style mix,
 * each finished with Murmur3's fmix32), read as one 64-bit hash: `hashOut` holds it after.
 */
export function hashKey(
  kind: string,
  status: number | undefined,
  message: string,
): [number, number] {
  hashInto(kind, status, message);
  return [hashOut[0], hashOut[1]];
}

/** Where hashInto leaves its two halves (no array per failure on the read path). */
const hashOut = new Uint32Array(2);

function hashInto(kind: string, status: number | undefined, message: string): void {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < kind.length; i++) {
    const c = kind.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 13;
  }
  // A separator no kind holds, then the status as a value of its own (absent: all ones).
  for (const c of [0x10000, status === undefined ? 0xffffffff : status >>> 0]) {
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 13;
  }
  for (let i = 0; i < message.length; i++) {
    const c = message.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 13;
  }
  hashOut[0] = fmix32(a ^ message.length);
  hashOut[1] = fmix32(b ^ kind.length);
}

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
