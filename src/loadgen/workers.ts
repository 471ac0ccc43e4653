import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { BackendName } from '../backends/index.js';
import type { SummaryContext, SummaryState } from '../metrics/summary.js';
import type { WorkloadSource } from '../workload/workload.js';
import type { RunClock } from './clock.js';
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
 * Test only (test/integration/hostile-transport.test.ts): the worker of this index spins in a
 * synchronous loop after its first record, as a worker stuck on a CPU loop would. Only code can
 * set it; nothing a user gives reaches it.
 */
export const testOnly: { spinWorker?: number } = {};

/** What one worker runs: plain data (functions cannot cross threads). */
export interface WorkerJob {
  target: Omit<TargetConfig, 'backend'> & { backend: BackendName };
  part: ShardPart & { measureFromId: number };
  durationS?: number;
  seed: number;
  workload: WorkloadSource;
  summaryContext: SummaryContext;
  /** See `testOnly`. */
  spinAfterFirstRecord?: true;
}

export type ToWorker =
  | { type: 'start'; originHrNs: bigint; originIso: string; startAtUs: number }
  | { type: 'stop' }
  | { type: 'cancel' };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'progress'; progress: LoadgenProgress }
  | { type: 'records'; text: string; count: number; progress: LoadgenProgress }
  | { type: 'done'; state: SummaryState; result: LoadgenResult; progress: LoadgenProgress }
  | { type: 'error'; message: string };

export interface WorkersRun {
  /** The summary state of every worker that finished, in worker order (merge them). */
  states: SummaryState[];
  results: LoadgenResult[];
  /** Workers that did not answer a cancel in time and were terminated. */
  terminated: TerminatedWorker[];
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
 * Rejects when a worker fails; the records it sent before are already with `onRecords`.
 */
export async function runWorkers(o: {
  workers: number;
  part: ShardPart & { measureFromId: number };
  job: Omit<WorkerJob, 'part'>;
  clockFor: () => { clock: RunClock; startAtUs: number };
  onRecords: (text: string, count: number) => void;
  progress: LoadgenProgress;
  stopSignal?: AbortSignal;
  cancelSignal?: AbortSignal;
}): Promise<WorkersRun> {
  const parts = splitPart(o.part, o.workers);
  const threads = parts.map(
    (part, i) =>
      new WorkerThread({
        ...o.job,
        part: { ...part, measureFromId: o.part.measureFromId },
        ...(testOnly.spinWorker === i ? { spinAfterFirstRecord: true as const } : {}),
      }),
  );
  const received = parts.map(() => 0);
  const progress = parts.map(() => ({ sent: 0, finished: 0, failed: 0, inFlight: 0 }));
  const sumProgress = () => {
    for (const key of ['sent', 'finished', 'failed', 'inFlight'] as const) {
      o.progress[key] = progress.reduce((n, p) => n + p[key], 0);
    }
  };
  const done: Promise<Extract<FromWorker, { type: 'done' }> | 'terminated'>[] = [];
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
      }, WORKER_ANSWER_MS);
    };
    o.stopSignal?.addEventListener('abort', onStop, { once: true });
    o.cancelSignal?.addEventListener('abort', onCancel, { once: true });
    threads.forEach((t, i) => {
      t.onMessage = (message) => {
        if (message.type === 'records') {
          received[i] += message.count;
          o.onRecords(message.text, message.count);
        }
        if ('progress' in message) {
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
      const finished = ends.filter((m) => m !== 'terminated');
      return {
        states: finished.map((m) => m.state),
        results: finished.map((m) => m.result),
        terminated: ends.flatMap((m, index) =>
          m === 'terminated'
            ? [
                {
                  index,
                  part: parts[index],
                  progress: progress[index],
                  recordsReceived: received[index],
                },
              ]
            : [],
        ),
      };
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
  readonly done: Promise<Extract<FromWorker, { type: 'done' }> | 'terminated'>;
  onMessage: (message: FromWorker) => void = () => {};
  /** Ends the thread unless it is done; `done` then resolves as 'terminated'. */
  readonly terminate: () => void;

  constructor(job: WorkerJob) {
    const typescript = import.meta.url.endsWith('.ts');
    const entry = new URL(typescript ? './worker.ts' : './worker.js', import.meta.url);
    this.worker = typescript
      ? new Worker(
          `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`,
          { eval: true, workerData: job },
        )
      : new Worker(entry, { workerData: job });
    const ready = deferred<void>();
    const done = deferred<Extract<FromWorker, { type: 'done' }> | 'terminated'>();
    this.ready = ready.promise;
    this.done = done.promise;
    this.terminate = () => {
      done.resolve('terminated');
      void this.worker.terminate();
    };
    // A failure before start rejects `ready`; nobody awaits `done` then.
    this.done.catch(() => {});
    // Settled promises ignore later calls: an exit after `done` changes nothing.
    const fail = (err: Error) => {
      ready.reject(err);
      done.reject(err);
    };
    this.worker.on('message', (message: FromWorker) => {
      if (message.type === 'ready') ready.resolve();
      else if (message.type === 'done') {
        this.onMessage(message);
        done.resolve(message);
      } else if (message.type === 'error') fail(new Error(`a worker failed: ${message.message}`));
      else this.onMessage(message);
    });
    this.worker.on('error', (err) => fail(new Error(`a worker failed: ${err.message}`)));
    this.worker.on('exit', (code) => {
      fail(new Error(`a worker exited (code ${code}) before finishing`));
    });
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
