/**
 * `calibrate`'s progress on stderr. A fit replays every run hundreds of times and holds the
 * thread while it does (no timer fires), so the session reports as it goes and this decides
 * what reaches the stream: on a terminal a line redrawn at most four times a second and
 * cleared at the end; off one (CI, a pipe) a line every HEARTBEAT_MS of wall time, as a run's
 * heartbeat, so that minutes of work never look hung and a quick one prints nothing.
 */
import { fmtNumber } from '../metrics/format.js';
import { HEARTBEAT_MS } from './progressOutput.js';

/** Where a calibration is: reading the runs, fitting, or predicting each run from the others. */
export type CalibrateProgress =
  | { stage: 'reading'; runs: number; of: number }
  | { stage: 'fitting'; runs: number; parameters: number; simulations: number }
  | { stage: 'cross-checking'; folds: number; of: number; simulations: number };

/** The progress in words (without the command's name). */
export function calibrateProgressLine(p: CalibrateProgress, elapsedS: number): string {
  const time = `${fmtNumber(elapsedS, 0)} s`;
  switch (p.stage) {
    case 'reading':
      return `reading runs: ${fmtNumber(p.runs)}/${fmtNumber(p.of)}, ${time}`;
    case 'fitting':
      return `fitting ${p.parameters} parameter${p.parameters === 1 ? '' : 's'} to ${fmtNumber(p.runs)} runs: ${fmtNumber(p.simulations)} runs replayed, ${time}`;
    case 'cross-checking':
      return `predicting each run from the others: ${p.folds}/${p.of} fits, ${fmtNumber(p.simulations)} runs replayed, ${time}`;
  }
}

export interface CalibrateProgressOptions {
  /** A terminal: one line redrawn in place; otherwise a line every HEARTBEAT_MS. */
  redraw: boolean;
  write: (text: string) => void;
  /** Wall clock in milliseconds (tests). */
  now?: () => number;
  intervalMs?: number;
}

/** A sink for the session's progress, and `end` to clear the terminal's line. */
export function calibrateProgressOutput(o: CalibrateProgressOptions): {
  report: (p: CalibrateProgress) => void;
  end: () => void;
} {
  const now = o.now ?? (() => performance.now());
  const intervalMs = o.intervalMs ?? (o.redraw ? 250 : HEARTBEAT_MS);
  const startedMs = now();
  let lastMs = startedMs;
  let drawn = false;
  return {
    report(p) {
      const at = now();
      if (at - lastMs < intervalMs) return;
      lastMs = at;
      const line = `infergauge calibrate: ${calibrateProgressLine(p, (at - startedMs) / 1000)}`;
      if (o.redraw) {
        o.write(`\r\x1b[2K${line}`);
        drawn = true;
      } else o.write(`${line}\n`);
    },
    end() {
      if (drawn) o.write('\r\x1b[2K');
      drawn = false;
    },
  };
}
