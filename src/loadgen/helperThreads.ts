import { readdirSync } from 'node:fs';
import { availableParallelism, setPriority } from 'node:os';
import { isMainThread } from 'node:worker_threads';

/** The lowest priority a thread can take (nice 19): it runs when nothing else wants the core. */
const HELPER_NICE = 19;

/**
 * The process's threads when this module loaded, the main thread aside: Node's own (V8 starts its
 * platform threads before any JavaScript runs), and none of the worker threads a program (or
 * infergauge) starts later, which keep their priority.
 */
const startupThreads = listThreads().filter((tid) => tid !== process.pid);

let yielded = false;

/**
 * Puts the process's helper threads (V8's garbage-collection helpers, which mark and sweep beside
 * the JavaScript) at the lowest priority, once, from the main thread, where the process may use
 * one core: the threads there were when this module loaded, so never the main thread nor any
 * worker thread.
 *
 * Why: on a client with one core, a helper woken by the collector took the core from the
 * measuring thread for milliseconds at a time, mid-read, while it looked idle to every probe
 * inside the process. At 256 paced streams on one core, stamp error p99 fell from 4.3-6.8 ms to
 * 2.5-4.0 ms and the longest from 63-71 ms to 16-19 ms, at 0-16 % more CPU (issue 29). At nice
 * 19 the helpers take the time the measuring thread leaves idle, and work they cannot finish the
 * collector does on the JavaScript thread itself.
 *
 * Why only on one core: the measuring thread also waits for a helper that has begun a piece of
 * a collection. Where other work fills the cores (a CPU-bound job beside the client), a helper at
 * nice 19 gets about 1.5 % of a core against it, so a 1-2 ms piece held the measuring thread
 * 60-130 ms: one first token in 30-60 stamped that late beside a busy-looping job on two cores,
 * none with the helpers at normal priority (issue 47). With more than one usable core a helper
 * has a core of its own to run on, so lowering it removed little there and invited that priority
 * inversion. Raising a thread's nice value needs no privilege. Linux only (`/proc/self/task`);
 * elsewhere nothing changes. Returns how many threads were lowered.
 */
export function yieldHelperThreads(usableCores = availableParallelism()): number {
  if (yielded || !isMainThread || usableCores > 1) return 0;
  yielded = true;
  let lowered = 0;
  for (const tid of startupThreads) {
    try {
      setPriority(tid, HELPER_NICE);
      lowered++;
    } catch {
      // Gone since the listing, or not ours to change: it keeps its priority.
    }
  }
  return lowered;
}

function listThreads(): number[] {
  try {
    return readdirSync('/proc/self/task').map(Number);
  } catch {
    return [];
  }
}
