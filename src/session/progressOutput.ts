/**
 * Progress for a log (CI, a pipe), where a redrawn line is noise and minutes of silence look
 * hung: a heartbeat line every HEARTBEAT_MS of wall time while a point runs, and for commands
 * that print nothing else per point, a line as each point ends. The terminal's redrawn line is
 * the command line's (cli/progress.ts).
 */
import type { LoadSpec } from '../load.js';
import { fmtNumber } from '../metrics/format.js';
import { errorKindCounts } from '../report/failures.js';
import type { Output, PointInfo } from './events.js';

/** Wall time between two heartbeat lines. */
export const HEARTBEAT_MS = 15_000;

export interface PlainProgressOptions {
  /** A line as each point ends (commands that already print one pass false). */
  pointLines: boolean;
  /** A point in words (default: `chat at concurrency 8`, its scenario at its load). */
  label?: (point: PointInfo) => string;
  intervalMs?: number;
  write?: (line: string) => void;
  /** Wall clock in milliseconds (tests). */
  now?: () => number;
}

/**
 * Progress for a log: `infergauge sweep: chat at concurrency 8: 40/100 finished, 1 failed, 8 in
 * flight, 45 s` every `intervalMs` while a point runs, and with `pointLines`, `infergauge probe
 * decode: ... at concurrency 8: 98 completed, 2 failed in 31.0 s` as it ends.
 */
export function plainProgressOutput(o: PlainProgressOptions): Output {
  const write = o.write ?? ((line: string) => process.stderr.write(line));
  const now = o.now ?? (() => performance.now());
  const intervalMs = o.intervalMs ?? HEARTBEAT_MS;
  const pointLabel = o.label ?? scenarioAtLoad;
  let timer: NodeJS.Timeout | undefined;
  let startedMs = 0;
  const end = () => {
    clearInterval(timer);
    timer = undefined;
  };
  return {
    name: 'progress',
    pointStarted(e) {
      end();
      startedMs = now();
      const beat = () => {
        const { progress: p, totalRequests } = e;
        const counts = p
          ? `${fmtNumber(p.finished)}${totalRequests !== undefined ? `/${fmtNumber(totalRequests)}` : ''} finished, ${fmtNumber(p.failed)} failed, ${fmtNumber(p.inFlight)} in flight`
          : 'running';
        write(
          `infergauge ${e.session.command}: ${pointLabel(e.point)}: ${counts}, ${fmtNumber((now() - startedMs) / 1000, 0)} s\n`,
        );
      };
      timer = setInterval(beat, intervalMs);
      // A heartbeat never keeps the process alive.
      timer.unref();
    },
    pointFinished(e) {
      end();
      if (!o.pointLines) return;
      const { completed, failed } = e.summary.requests;
      const outcome =
        completed === 0 && failed > 0
          ? `all ${fmtNumber(failed)} requests failed (${errorKindCounts(e.summary.requests)})`
          : `${fmtNumber(completed)} completed, ${fmtNumber(failed)} failed`;
      write(
        `infergauge ${e.session.command}: ${pointLabel(e.point)}: ${outcome} in ${fmtNumber((now() - startedMs) / 1000, 1)} s\n`,
      );
    },
    sessionFinished: end,
  };
}

/** `chat at concurrency 8`, `chat at 4 req/s`: a point as its load names it. */
function scenarioAtLoad(point: PointInfo): string {
  return `${point.scenario} at ${describePointLoad(point.load)}`;
}

function describePointLoad(load: LoadSpec): string {
  if (load.mode === 'closed') return `concurrency ${fmtNumber(load.concurrency)}`;
  if (load.arrival === 'trace') return 'trace replay';
  return `${fmtNumber(load.rate, 2)} req/s`;
}
