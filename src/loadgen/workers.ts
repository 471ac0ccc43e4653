import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { BackendName } from '../backends/index.js';
import { describeError } from '../errors.js';
import type { LiveDelta } from '../metrics/live.js';
import type { SummaryContext, SummaryState } from '../metrics/summary.js';
import type { WorkloadSource } from '../workload/workload.js';
import type { RunClock } from './clock.js';
import { yieldHelperThreads } from './helperThreads.js';
import type { TargetConfig } from './http.js';
import type { LoadgenProgress, LoadgenResult } from './run.js';
import { maxParts, type ShardPart, splitPart } from './shard.js';

/**
 * `--workers N`: the load split across worker threads (src/loadgen/shard.ts), each with its own
 * event loop, connection pool and timestamps, while this (the coordinating) thread writes their
 * records to disk, merges their summaries and shows progress. Timing never waits on this thread.
 */

/**
 * How far ahead of the moment every worker is ready their shared clock origin is put: time for
 * the start message to reach them all, so they all begin on the same instant.
 */
export const WORKER_START_LEAD_MS = 20;

/** How long a worker has to answer a cancel (flush its records and report) before it is terminated. */
export const WORKER_ANSWER_MS = 5_000;

/**
 * Test only (test/integration/hostile-transport.test.ts, summary-always.test.ts). Only code can
 * set these; nothing a user gives reaches them.
 */
export const testOnly: {
  /** The worker of this index spins in a synchronous loop after its first record, as a worker stuck on a CPU loop would. */
  spinWorker?: number;
  /** The worker of this index throws an uncaught RangeError after its first record, as a bug in a stream handler would. */
  crashWorker?: number;
  /** Replaces WORKER_ANSWER_MS (a spinning worker is terminated sooner). */
  answerMs?: number;
  /** With --workers 0 (src/session/point.ts): the record callback throws a RangeError after writing the first record. */
  throwInThread?: true;
} = {};

/** How long a worker has to answer a cancel: WORKER_ANSWER_MS, unless a test shortened it. */
export function workerAnswerMs(): number {
  return testOnly.answerMs ?? WORKER_ANSWER_MS;
}

/** What one worker runs: plain data (functions cannot cross threads). */
export interface WorkerJob {
  target: Omit<TargetConfig, 'backend'> & { backend: BackendName };
  part: ShardPart & { measureFromId: number };
  durationS?: number;
  seed: number;
  workload: WorkloadSource;
  summaryContext: SummaryContext;
  /** Send live counts (src/metrics/live.ts) this often, and once more at the end; none if absent. */
  liveIntervalMs?: number;
  /** See `testOnly`. */
  spinAfterFirstRecord?: true;
  /** See `testOnly`. */
  crashAfterFirstRecord?: true;
}

export type ToWorker =
  | { type: 'start'; originHrNs: bigint; originIso: string; startAtUs: number }
  | { type: 'stop' }
  | { type: 'cancel' };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'progress'; progress: LoadgenProgress }
  | { type: 'records'; text: string; count: number; progress: LoadgenProgress }
  | { type: 'live'; delta: LiveDelta }
  | { type: 'done'; state: SummaryState; result: LoadgenResult; progress: LoadgenProgress }
  | { type: 'error'; message: string; progress?: LoadgenProgress };

export interface WorkersRun {
  /** The summary state of every worker that finished, in worker order (merge them). */
  states: SummaryState[];
  results: LoadgenResult[];
  /** Workers that did not answer a cancel in time and were terminated. */
  terminated: TerminatedWorker[];
  /** Workers that failed (threw, crashed, exited) after the start; the others ran on. */
  failed: FailedWorker[];
}

export interface TerminatedWorker {
  index: number;
  /** The ids it was sending: its records that reached `onRecords` are among them. */
  part: ShardPart;
  /** Its last report: requests it had sent and finished by then. */
  progress: LoadgenProgress;
  /** Records of it that reached `onRecords`. */
  recordsReceived: number;
}

/** A worker that failed after the start: what it sent, and why it failed. */
export interface FailedWorker extends TerminatedWorker {
  /** The failure: `RangeError: Invalid string length`, `exited (code 1) before finishing`. */
  reason: string;
}

/**
 * A worker's young generation is capped at 12 MB (a 4 MB semi-space; V8's own grows to 48 MB):
 * more, shorter scavenges. Measured with bench:peer's paced regime on one worker (256 streams, 10
 * ms a token, one core): stamp p99 3.9-4.8 ms against 6.7-7.0 uncapped, the longest pause 8-10
 * ms against 15, the same CPU; 6 MB read 3.6-4.3 ms for 25 % more CPU, 3 MB 4.5-4.8 ms
 * (docs/benchmarks.md, "GC settings, measured"). The main thread's cannot be set after start.
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 12 };

/** How a worker's run ended: its report, terminated (no answer to a cancel), or failed. */
type WorkerEnd =
  | Extract<FromWorker, { type: 'done' }>
  | 'terminated'
  | { type: 'failed'; reason: string; progress?: LoadgenProgress };

/**
 * The default worker count: one per available core, less one for this coordinating thread,
 * and never more than the load can give one request slot each. On one usable core (a small
 * machine, or `taskset` to one core) none: a worker would share the core with this thread and
 * add only its own start-up and the records' passage between threads.
 */
export function defaultWorkers(part: ShardPart): number {
  const cores = availableParallelism();
  return cores < 2 ? 0 : Math.max(1, Math.min(cores - 1, maxParts(part)));
}

/**
 * Runs `part` (the whole run, or this process's shard) on `workers` threads. `clockFor` is
 * called once every worker has built its workload: it returns the run clock (whose origin the
 * workers share) and when to start on it. Records arrive through `onRecords` as JSON lines.
 * Rejects when a worker fails before the start (nothing was measured). A worker that fails
 * after it is listed in `failed`, and the others run on: the records it sent before are already
 * with `onRecords`, and the run's other results stand.
 */
export async function runWorkers(o: {
  workers: number;
  part: ShardPart & { measureFromId: number };
  job: Omit<WorkerJob, 'part'>;
  clockFor: () => { clock: RunClock; startAtUs: number };
  onRecords: (text: string, count: number) => void;
  /** A worker's live counts (job.liveIntervalMs), as they arrive. */
  onLive?: (delta: LiveDelta) => void;
  progress: LoadgenProgress;
  stopSignal?: AbortSignal;
  cancelSignal?: AbortSignal;
}): Promise<WorkersRun> {
  const parts = splitPart(o.part, o.workers);
  // Before the measuring threads exist: they keep their priority, the helpers give theirs up.
  yieldHelperThreads();
  const threads = parts.map(
    (part, i) =>
      new WorkerThread({
        ...o.job,
        part: { ...part, measureFromId: o.part.measureFromId },
        ...(testOnly.spinWorker === i ? { spinAfterFirstRecord: true as const } : {}),
        ...(testOnly.crashWorker === i ? { crashAfterFirstRecord: true as const } : {}),
      }),
  );
  const received = parts.map(() => 0);
  const progress = parts.map(() => ({ sent: 0, finished: 0, failed: 0, inFlight: 0 }));
  const sumProgress = () => {
    for (const key of ['sent', 'finished', 'failed', 'inFlight'] as const) {
      o.progress[key] = progress.reduce((n, p) => n + p[key], 0);
    }
  };
  const done: Promise<WorkerEnd>[] = [];
  try {
    await Promise.all(threads.map((t) => t.ready));
    const { clock, startAtUs } = o.clockFor();
    const forward = (message: ToWorker) => () => {
      for (const t of threads) t.worker.postMessage(message);
    };
    const onStop = forward({ type: 'stop' });
    // A worker that does not answer a cancel (stuck in a loop) is terminated: its records so
    // far are with onRecords; those it still held are lost.
    let answerTimer: NodeJS.Timeout | undefined;
    const onCancel = () => {
      forward({ type: 'cancel' })();
      answerTimer = setTimeout(() => {
        for (const t of threads) t.terminate();
      }, workerAnswerMs());
    };
    o.stopSignal?.addEventListener('abort', onStop, { once: true });
    o.cancelSignal?.addEventListener('abort', onCancel, { once: true });
    threads.forEach((t, i) => {
      t.onMessage = (message) => {
        if (message.type === 'records') {
          received[i] += message.count;
          o.onRecords(message.text, message.count);
        } else if (message.type === 'live') o.onLive?.(message.delta);
        if ('progress' in message && message.progress) {
          progress[i] = message.progress;
          sumProgress();
        }
      };
      done.push(t.done);
      t.worker.postMessage({
        type: 'start',
        originHrNs: clock.originHrNs,
        originIso: clock.originIso,
        startAtUs,
      } satisfies ToWorker);
    });
    if (o.stopSignal?.aborted) onStop();
    if (o.cancelSignal?.aborted) onCancel();
    try {
      const ends = await Promise.all(done);
      const lost = (index: number, last = progress[index]): TerminatedWorker => ({
        index,
        part: parts[index],
        progress: last,
        recordsReceived: received[index],
      });
      const run: WorkersRun = { states: [], results: [], terminated: [], failed: [] };
      ends.forEach((m, index) => {
        if (m === 'terminated') run.terminated.push(lost(index));
        else if (m.type === 'failed') {
          run.failed.push({ ...lost(index, m.progress ?? progress[index]), reason: m.reason });
        } else {
          run.states.push(m.state);
          run.results.push(m.result);
        }
      });
      return run;
    } finally {
      clearTimeout(answerTimer);
      o.stopSignal?.removeEventListener('abort', onStop);
      o.cancelSignal?.removeEventListener('abort', onCancel);
    }
  } finally {
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }
}

/**
 * One worker thread. Under tsx (the tests, `npm run bench:*`) the entry is TypeScript, which a
 * bare Worker cannot load on Node 20: the thread first registers tsx's loader, then imports it.
 */
class WorkerThread {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  /** Never rejects: a failure resolves it as `failed` (and rejects `ready`, before the start). */
  readonly done: Promise<WorkerEnd>;
  onMessage: (message: FromWorker) => void = () => {};
  /** Ends the thread unless it is done; `done` then resolves as 'terminated'. */
  readonly terminate: () => void;

  constructor(job: WorkerJob) {
    const typescript = import.meta.url.endsWith('.ts');
    const entry = new URL(typescript ? './worker.ts' : './worker.js', import.meta.url);
    this.worker = typescript
      ? new Worker(
          // tsx as this file resolves it: eval code would resolve it from the working directory.
          `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`,
          { eval: true, workerData: job, resourceLimits: WORKER_LIMITS },
        )
      : new Worker(entry, { workerData: job, resourceLimits: WORKER_LIMITS });
    const ready = deferred<void>();
    const done = deferred<WorkerEnd>();
    this.ready = ready.promise;
    this.done = done.promise;
    // Once its end is known (done, terminated, failed), nothing more of the thread counts.
    let ended = false;
    this.terminate = () => {
      ended = true;
      done.resolve('terminated');
      void this.worker.terminate();
    };
    // Settled promises ignore later calls: an exit after `done` changes nothing.
    const fail = (reason: string, progress?: LoadgenProgress) => {
      ready.reject(new Error(`a worker failed: ${reason}`));
      if (ended) return;
      ended = true;
      done.resolve({ type: 'failed', reason, ...(progress ? { progress } : {}) });
      // A thread that reported its failure may still have requests going: they end with it.
      void this.worker.terminate();
    };
    this.worker.on('message', (message: FromWorker) => {
      if (ended) return;
      if (message.type === 'ready') ready.resolve();
      else if (message.type === 'done') {
        this.onMessage(message);
        ended = true;
        done.resolve(message);
      } else if (message.type === 'error') {
        fail(message.message, message.progress);
      } else this.onMessage(message);
    });
    this.worker.on('error', (err) => fail(describeError(err)));
    this.worker.on('exit', (code) => fail(`it exited (code ${code}) before finishing`));
  }
}

/** A promise with its settle functions (Promise.withResolvers, which Node 20 lacks). */
function deferred<T>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (err: Error) => void;
} {
  let resolve: (value: T) => void = () => {};
  let reject: (err: Error) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
