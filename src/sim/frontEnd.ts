/**
 * A serving front end's one event loop, where each request's synchronous part costs the same
 * CPU time: vLLM's API server is one asyncio loop whose ready queue is first-in first-out. A
 * request's handler runs its synchronous part (chat-template rendering) in turn, then awaits;
 * its continuation is queued behind the synchronous parts of every request that arrived
 * meanwhile, so it leaves once those have run. A burst therefore leaves together at its end
 * rather than one by one, and a lone request leaves after its own part.
 *
 * GPUStack's 1,000-request bursts of 128 tokens show it on vLLM 0.11.0: median TTFT equals the
 * mean (18.1 and 18.3 s on an H100, 19.2 and 19.5 s on an A100), and the engine's steps then
 * run the prompts all together (median TPOT 597 ms on the H100); leaving one by one would have
 * spread TTFT from 0 to the end and kept the steps small (docs/performance-lab/qwen3-14b/
 * h100.md and a100.md, gpustack/gpustack@47277d79).
 *
 * Request i's part ends at partEnd(i) = max(arrival(i), partEnd(i - 1)) + work; it leaves at
 * partEnd(k), k the last request that arrived by partEnd(i). Leaving is in arrival order.
 */
export class FrontEndLoop<T> {
  private readonly inside: { item: T; arrivalNs: number; partEndNs: number; gone: boolean }[] = [];
  private head = 0;
  /** The last request that arrived by the head's part end (never before the head). */
  private lastArrived = 0;
  /** When the loop ends the synchronous parts it has been given. */
  private busyUntilNs = 0;

  constructor(readonly workNs: number) {}

  /** Adds a request arriving at `atNs`. */
  enter(item: T, atNs: number): void {
    this.busyUntilNs = Math.max(atNs, this.busyUntilNs) + this.workNs;
    this.inside.push({ item, arrivalNs: atNs, partEndNs: this.busyUntilNs, gone: false });
  }

  /**
   * Tells `left` of each request that left by `atNs`, in order, with when it left. Every arrival
   * up to `atNs` must have entered.
   */
  advance(atNs: number, left: (item: T, atNs: number) => void): void {
    while (this.head < this.inside.length) {
      const first = this.inside[this.head];
      if (first.partEndNs > atNs) break;
      const leavesNs = this.leaveNs();
      if (leavesNs > atNs) break;
      this.head++;
      if (!first.gone) left(first.item, leavesNs);
    }
    if (this.head === this.inside.length) {
      this.inside.length = 0;
      this.head = 0;
      this.lastArrived = 0;
    } else if (this.head > 1024 && this.head * 2 > this.inside.length) {
      this.inside.splice(0, this.head);
      this.lastArrived -= this.head;
      this.head = 0;
    }
  }

  /** The first request inside whose client is still there, or undefined. */
  peek(): T | undefined {
    for (let i = this.head; i < this.inside.length; i++) {
      if (!this.inside[i].gone) return this.inside[i].item;
    }
    return undefined;
  }

  /** When the first request inside leaves if no other comes, or undefined when empty. */
  nextLeaveNs(): number | undefined {
    return this.head < this.inside.length ? this.leaveNs() : undefined;
  }

  /**
   * Its client went away: the request never reaches the engine. Its part still runs (the
   * handler notices only at its next await), so the others' times stay.
   */
  remove(item: T): boolean {
    for (let i = this.head; i < this.inside.length; i++) {
      const entry = this.inside[i];
      if (entry.item === item && !entry.gone) {
        entry.gone = true;
        return true;
      }
    }
    return false;
  }

  /** The head's leave time, by the arrivals known so far. */
  private leaveNs(): number {
    const partEndNs = this.inside[this.head].partEndNs;
    let k = Math.max(this.lastArrived, this.head);
    while (k + 1 < this.inside.length && this.inside[k + 1].arrivalNs <= partEndNs) k++;
    this.lastArrived = k;
    return this.inside[k].partEndNs;
  }
}
