/**
 * A worker thread's side of `--workers` (see workers.ts): builds its shard's workload, waits for
 * the coordinator's start, runs the engine, and sends its records (as JSON lines, in small
 * batches, so they reach disk as they happen) and at the end its summary state and health.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { BACKENDS } from '../backends/index.js';
import { describeError } from '../errors.js';
import { LiveRecorder } from '../metrics/live.js';
import { SummaryBuilder } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';
import { loadWorkload } from '../workload/workload.js';
import { createRunClock } from './clock.js';
import { startFineTimer } from './fineTimer.js';
import { type LoadgenProgress, openConnections, runLoadgen } from './run.js';
import type { FromWorker, ToWorker, WorkerJob } from './workers.js';

/** A batch of records goes out at this many records, this many characters, or this age. */
const BATCH_RECORDS = 64;
const BATCH_CHARS = 256 * 1024;
const BATCH_AGE_MS = 50;

if (!parentPort) throw new Error('loadgen/worker.ts runs only as a worker thread');
const port = parentPort;
const job = workerData as WorkerJob;
const post = (message: FromWorker) => port.postMessage(message);

const progress: LoadgenProgress = { sent: 0, finished: 0, failed: 0, inFlight: 0 };
/** Records not yet sent to the coordinator (JSON lines). */
let lines: string[] = [];
let chars = 0;
let timer: NodeJS.Timeout | undefined;
const flush = () => {
  clearTimeout(timer);
  timer = undefined;
  if (lines.length === 0) return;
  post({ type: 'records', text: `${lines.join('\n')}\n`, count: lines.length, progress });
  lines = [];
  chars = 0;
};

/**
 * A failure, thrown by the engine or uncaught in a callback of this thread (a stream handler):
 * the records so far go out first, so that they reach disk, then the failure, with the
 * progress that tells how many requests were in flight. The coordinator ends the thread.
 */
let failed = false;
const fail = (err: unknown) => {
  if (failed) return;
  failed = true;
  try {
    flush();
  } catch {
    // The records cannot be sent (the failure may be theirs): the failure still goes out.
  }
  post({ type: 'error', message: describeError(err), progress });
};
process.on('uncaughtException', fail);

async function main(): Promise<void> {
  const workload = await loadWorkload(job.workload);
  const { backend, ...target } = job.target;
  const targetConfig = { ...target, backend: BACKENDS[backend] };
  // Open before saying ready: the shared start must not wait on this thread's connects, nor on
  // its pacer's helper thread.
  const fineTimer = startFineTimer(job.part.load);
  const connections = await openConnections(targetConfig, job.part.load, 'nextSession' in workload);
  const fine = await fineTimer;
  const stop = new AbortController();
  const cancel = new AbortController();
  const started = new Promise<Extract<ToWorker, { type: 'start' }>>((resolve) => {
    port.on('message', (message: ToWorker) => {
      if (message.type === 'start') resolve(message);
      else if (message.type === 'stop') stop.abort();
      else if (message.type === 'cancel') cancel.abort();
    });
  });
  post({ type: 'ready' });
  const start = await started;
  const clock = createRunClock({ originHrNs: start.originHrNs, originIso: start.originIso });
  const builder = new SummaryBuilder(job.summaryContext);
  // Live counts go out after the records they count, so the coordinator never shows a request
  // whose record has not reached it.
  const live = job.liveIntervalMs !== undefined ? new LiveRecorder() : undefined;
  const sendLive = () => {
    if (!live || live.empty) return;
    flush();
    post({ type: 'live', delta: live.take() });
  };
  const liveTicker = live ? setInterval(sendLive, job.liveIntervalMs) : undefined;
  let records = 0;
  const onRecord = (record: RequestRecord) => {
    builder.add(record);
    live?.add(record);
    const line = JSON.stringify(record);
    lines.push(line);
    chars += line.length;
    if (lines.length >= BATCH_RECORDS || chars >= BATCH_CHARS) flush();
    else timer ??= setTimeout(flush, BATCH_AGE_MS);
    // Test only (workers.ts testOnly): a thread stuck in a CPU loop, deaf to every message.
    if (job.spinAfterFirstRecord) for (;;) Math.random();
    // Test only: a bug that throws outside any promise (as in a stream handler), once.
    if (job.crashAfterFirstRecord && records++ === 0) {
      setImmediate(() => {
        throw new RangeError('Invalid string length');
      });
    }
  };
  // Progress between batches (long requests), for the live line.
  const ticker = setInterval(() => post({ type: 'progress', progress }), 250);
  const result = await runLoadgen(
    {
      target: targetConfig,
      connections,
      ...(fine ? { fineTimer: fine } : {}),
      load: job.part.load,
      ids: job.part,
      ...(job.durationS !== undefined ? { durationS: job.durationS } : {}),
      seed: job.seed,
      ...workload,
      onRecord,
      stopSignal: stop.signal,
      cancelSignal: cancel.signal,
      clock,
      startAtUs: start.startAtUs,
    },
    progress,
  );
  clearInterval(ticker);
  clearInterval(liveTicker);
  flush();
  sendLive();
  post({ type: 'done', state: builder.state(), result, progress });
}

main().catch(fail);
