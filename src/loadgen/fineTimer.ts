import { Worker } from 'node:worker_threads';
import type { LoadSpec } from '../load.js';

/**
 * A wake-up to the tenth of a millisecond, for the open loop's last stretch before an arrival.
 *
 * Why: libuv counts timers in whole milliseconds (its loop time and epoll's timeout both), so a
 * setTimeout fires 0-1.2 ms after it was due even on an idle core: an open loop paced by it
 * sends at 1,000 requests/s with a schedule lag p50 of 0.6 ms and p99 over 1 ms before any work
 * of its own (issue 51). A helper thread sleeps in Atomics.wait, whose timeout the kernel keeps
 * to tens of microseconds, and notifies a shared counter when the time has come, which wakes
 * the engine's loop through Atomics.waitAsync at once: p50 0.10 ms and p99 0.18 ms at 1,000
 * wake-ups a second on an idle core (a MessagePort instead: the same lateness, half as dear
 * again per wake-up at 3,000 a second).
 *
 * What it costs: a thread (~1 MB and tens of ms of CPU once, before the run's clock:
 * startFineTimer) and two thread switches per wake-up (45-70 µs of CPU), so the pacer uses it
 * only for waits between FINE_MIN_WAIT_MS and FINE_WAIT_MS and a setTimeout for the rest.
 *
 * The helper shares the engine's clock through process.hrtime, which every thread reads alike.
 */
export const FINE_WAIT_MS = 2;

/**
 * Under this wait the pacer takes the millisecond timer: at gaps this short a wake-up per
 * arrival would cost over 10 % of a core, and each timer wake-up sends the several arrivals due
 * by then (their lag under ~1.2 ms, the timer's own).
 */
export const FINE_MIN_WAIT_MS = 0.5;

/** From this rate the helper starts with the open loop, before its first short wait. */
export const FINE_START_RATE_PER_S = 100;

const HELPER = `
const { parentPort, workerData } = require('node:worker_threads');
const state = new Int32Array(workerData, 0, 3);
const due = new Float64Array(workerData, 16, 1);
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
nowMs();
parentPort.postMessage('ready');
for (;;) {
  const generation = Atomics.load(state, 0);
  if (Atomics.load(state, 1) !== 0) break;
  const leftMs = due[0] - nowMs();
  if (Number.isNaN(leftMs)) Atomics.wait(state, 0, generation);
  else if (leftMs > 0) Atomics.wait(state, 0, generation, leftMs);
  else {
    Atomics.add(state, 2, 1);
    Atomics.notify(state, 2);
    // Until the engine arms the next wake-up (a new generation), or stops the helper.
    Atomics.wait(state, 0, generation);
  }
}
`;

/** Int32 slots of the shared state; the due time (ms on hrtime, NaN: none) is a Float64 after them. */
const GENERATION = 0;
const STOP = 1;
const FIRED = 2;

/** Atomics.waitAsync (ES2024; Node 16+), which the ES2023 lib does not declare. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      array: Int32Array,
      index: number,
      value: number,
    ): { async: false; value: string } | { async: true; value: Promise<string> };
  }
).waitAsync;

export class FineTimer {
  private readonly shared = new SharedArrayBuffer(24);
  private readonly state = new Int32Array(this.shared, 0, 3);
  private readonly due = new Float64Array(this.shared, 16, 1);
  private readonly helper: Worker;
  private online = false;
  private armed = false;
  /** A waitAsync on FIRED is pending (one at a time, however often the wake-up is re-armed). */
  private listening = false;
  private closed = false;
  /** Runs on this thread at each wake-up that `at` armed. */
  onWake: () => void = () => {};
  /**
   * Resolves once the helper runs (true), or could not start (false: a thread limit), so that a
   * caller can start it before its clock and keep the thread's start out of what it measures.
   */
  readonly started: Promise<boolean>;

  /** Starts the helper; once started it holds the event loop open only while a wake-up is armed. */
  constructor() {
    this.due[0] = Number.NaN;
    this.helper = new Worker(HELPER, { eval: true, workerData: this.shared });
    // Held while starting, so that a caller awaiting `started` is not left by an empty loop.
    this.started = new Promise((resolve) => {
      // Once its set-up (its first require, compiling the loop) is done, not at 'online':
      // that work is then before the caller's clock too.
      this.helper.once('message', () => {
        this.online = true;
        if (!this.armed) this.helper.unref();
        resolve(true);
      });
      // A helper that cannot run leaves the pacer on its timers: an armed wake-up comes now,
      // and the caller, no longer `ready`, arms a setTimeout instead.
      this.helper.on('error', () => {
        this.online = false;
        resolve(false);
        this.fired();
      });
    });
  }

  /**
   * Whether the helper runs and can take an arm: until it has started (tens of ms) the caller
   * paces by setTimeout, so that the first arrivals are not held for the thread's start.
   */
  get ready(): boolean {
    return this.online && !this.closed;
  }

  /** Arms one wake-up at `atHrMs` (process.hrtime in ms), replacing any armed one. */
  at(atHrMs: number): void {
    // Listen from the count before the arm: a wake-up the helper signals at once is not missed.
    if (!this.listening) this.listen(Atomics.load(this.state, FIRED));
    if (!this.armed && this.online) this.helper.ref();
    this.armed = true;
    this.due[0] = atHrMs;
    this.bump();
  }

  /** Cancels the armed wake-up, if any. */
  cancel(): void {
    if (!this.armed) return;
    this.disarm();
    this.due[0] = Number.NaN;
    this.bump();
  }

  /** Stops the helper thread (it ends at its next check, at once when asleep). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.disarm();
    Atomics.store(this.state, STOP, 1);
    this.bump();
    // Releases the pending waitAsync, whose wake-up is then dropped.
    Atomics.add(this.state, FIRED, 1);
    Atomics.notify(this.state, FIRED);
  }

  private disarm(): void {
    if (this.armed && this.online) this.helper.unref();
    this.armed = false;
  }

  private bump(): void {
    Atomics.add(this.state, GENERATION, 1);
    Atomics.notify(this.state, GENERATION);
  }

  private listen(seen: number): void {
    const wait = waitAsync(this.state, FIRED, seen);
    if (!wait.async) {
      this.fired();
      return;
    }
    this.listening = true;
    void wait.value.then(this.onFired);
  }

  private readonly onFired = (): void => {
    this.listening = false;
    this.fired();
  };

  /** A wake-up of an arm since replaced by a later one comes early: the caller's tick re-arms. */
  private fired(): void {
    if (!this.armed || this.closed) return;
    this.disarm();
    this.onWake();
  }
}

/**
 * The open loop's FineTimer, started, where `load` will want one from its start (an open loop of
 * FINE_START_RATE_PER_S or more); undefined otherwise, or where no helper could start. Called
 * before a run's clock is set (as its connections are opened): the thread's start, tens of ms
 * of CPU, would otherwise hold the first arrivals, or eat into a shared start's lead.
 */
export async function startFineTimer(load: LoadSpec): Promise<FineTimer | undefined> {
  if (load.mode !== 'open' || load.rate < FINE_START_RATE_PER_S) return undefined;
  const timer = new FineTimer();
  if (await timer.started) return timer;
  timer.close();
  return undefined;
}

/** process.hrtime in milliseconds, the clock FineTimer.at takes. */
export function hrNowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
