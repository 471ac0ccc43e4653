/**
 * A binary min-heap of items by a number: push and pop in O(log n), where a list sorted again
 * for every pop is O(n log n) (an agentic trace's 10,000s of ready calls, a cache's eviction
 * order).
 */
export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly key: (item: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    const a = this.items;
    const k = this.key(item);
    let i = a.push(item) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.key(a[parent]) <= k) break;
      a[i] = a[parent];
      i = parent;
    }
    a[i] = item;
  }

  /** The item with the smallest key (undefined when empty); ties in no set order. */
  pop(): T | undefined {
    const a = this.items;
    if (a.length === 0) return undefined;
    const top = a[0];
    const last = a.pop() as T;
    if (a.length > 0) {
      const k = this.key(last);
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= a.length) break;
        const c = l + 1 < a.length && this.key(a[l + 1]) < this.key(a[l]) ? l + 1 : l;
        if (this.key(a[c]) >= k) break;
        a[i] = a[c];
        i = c;
      }
      a[i] = last;
    }
    return top;
  }
}
