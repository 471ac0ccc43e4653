/**
 * `size`'s progress on stderr: a search can run for half an hour, so it says first how many
 * candidates it will try, then how long that should take (from the candidates done so far,
 * updated as it goes), then how far it is: on a terminal a line redrawn at most four times a
 * second, off a terminal (CI, a pipe) a line every HEARTBEAT_MS, as a run's heartbeat.
 */
import { fmtNumber } from '../metrics/format.js';
import { HEARTBEAT_MS } from './progressOutput.js';

export interface SizeProgressOptions {
  /** stderr is a terminal: redraw one line rather than print lines. */
  terminal: boolean;
  /** Where the lines go (the command line passes stderr). */
  write: (text: string) => void;
  /** Wall clock in milliseconds (tests). */
  now?: () => number;
  /** Wall time between two lines off a terminal. */
  intervalMs?: number;
}

export interface SizeProgress {
  started(total: number, threads: number): void;
  candidate(done: number, total: number): void;
  /** The calibrated predictions begin on `rows` more deployments (the front and top rows). */
  predicting(rows: number, draws: number): void;
  /** Ends the redrawn line (call once, whatever happened). */
  finished(): void;
}

/** Time left when `done` of `total` took `elapsedMs`: the mean so far for each one left. */
export function sizeRemainingMs(done: number, total: number, elapsedMs: number): number {
  return done > 0 ? ((total - done) * elapsedMs) / done : Number.POSITIVE_INFINITY;
}

/** `about 40 s`, `about 28 min`, `about 2.5 h`. */
export function aboutDuration(ms: number): string {
  const s = ms / 1000;
  if (!Number.isFinite(s)) return 'unknown';
  if (s < 90) return `about ${fmtNumber(Math.max(1, Math.round(s)))} s`;
  if (s < 90 * 60) return `about ${fmtNumber(Math.round(s / 60))} min`;
  return `about ${fmtNumber(s / 3600, 1)} h`;
}

export function sizeProgress(o: SizeProgressOptions): SizeProgress {
  const { write } = o;
  const now = o.now ?? (() => performance.now());
  const intervalMs = o.terminal ? 250 : (o.intervalMs ?? HEARTBEAT_MS);
  const say = (line: string) => write(`infergauge size: ${line}\n`);
  let startedMs = 0;
  let threads = 1;
  let lastMs = 0;
  let estimated = false;
  let drawn = false;
  const left = (done: number, total: number) =>
    `${aboutDuration(sizeRemainingMs(done, total, now() - startedMs))} left`;
  return {
    started(total, t) {
      startedMs = now();
      lastMs = startedMs;
      threads = t;
      say(
        `${fmtNumber(total)} candidates on ${fmtNumber(t)} thread${t === 1 ? '' : 's'}; an estimate of the time follows the first ${t === 1 ? 'one' : fmtNumber(t)} (Ctrl-C ranks those done so far)`,
      );
    },
    candidate(done, total) {
      const at = now();
      // The first estimate once every thread has ended a candidate: their first ones overlap.
      if (!estimated && (done >= threads || done === total)) {
        estimated = true;
        if (drawn) write('\r\x1b[K');
        drawn = false;
        const elapsed = at - startedMs;
        say(
          `${aboutDuration((total * elapsed) / done)} for the ${fmtNumber(total)} candidates (${fmtNumber(elapsed / 1000 / done, 2)} s each so far)`,
        );
        lastMs = at;
        return;
      }
      if (done < total && at - lastMs < intervalMs) return;
      lastMs = at;
      const line = `${fmtNumber(done)}/${fmtNumber(total)} candidates tried, ${done === total ? 'done' : left(done, total)}`;
      if (o.terminal) {
        write(`\r\x1b[Kinfergauge size: ${line}`);
        drawn = true;
      } else say(line);
    },
    predicting(rows, draws) {
      if (drawn) write('\n');
      drawn = false;
      say(
        `predicting ${fmtNumber(rows)} deployment${rows === 1 ? '' : 's'} (the Pareto front and the top rows) at ${fmtNumber(draws)} draws of the calibration each`,
      );
    },
    finished() {
      if (drawn) write('\n');
      drawn = false;
    },
  };
}
