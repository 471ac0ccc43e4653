/**
 * Progress while points run, on stderr. On a terminal: a line redrawn four times a second
 * while a point runs, cleared when it ends (log-update is loaded here, on a terminal only; the
 * first line waits for it). Off a terminal (CI, a pipe), where redrawing is noise and silence
 * for minutes looks hung: a heartbeat line every HEARTBEAT_MS of wall time, and for commands
 * that print nothing else per point, a line as each point ends.
 */
import type { LoadSpec } from '../load.js';
import { fmtNumber } from '../metrics/format.js';
import { errorKindCounts } from '../report/failures.js';
import type { Output, PointInfo, PointStarted } from '../session/events.js';

/** Wall time between two heartbeat lines off a terminal. */
export const HEARTBEAT_MS = 15_000;

/**
 * The progress outputs for stderr: the redrawn line on a terminal (unless `live` is false:
 * virtual time, JSON on stdout), else the plain lines.
 */
export function progressOutputs(
  stream: { isTTY?: boolean },
  o: { live: boolean } & Pick<PlainProgressOptions, 'pointLines' | 'label'>,
): Output[] {
  if (stream.isTTY) return o.live ? [progressOutput()] : [];
  return [
    plainProgressOutput({ pointLines: o.pointLines, ...(o.label ? { label: o.label } : {}) }),
  ];
}

export function progressOutput(): Output {
  let stop: (() => void) | undefined;
  const end = () => {
    stop?.();
    stop = undefined;
  };
  return {
    name: 'progress',
    pointStarted(e) {
      end();
      stop = draw(e);
    },
    pointFinished: end,
    sessionFinished: end,
  };
}

function draw(view: PointStarted): () => void {
  const loading = import('log-update');
  let logUpdate: typeof import('log-update')['logUpdateStderr'] | undefined;
  void loading.then((m) => {
    logUpdate = m.logUpdateStderr;
  });
  const timer = setInterval(() => logUpdate?.(progressLine(view)), 250);
  return () => {
    clearInterval(timer);
    logUpdate?.clear();
  };
}

function progressLine({ progress, nowUs, totalRequests }: PointStarted): string {
  const now = nowUs();
  if (now < 0) return `starting in ${(-now / 1e6).toFixed(1)} s (--start-at)`;
  const finished = progress?.finished ?? 0;
  const done = totalRequests !== undefined ? `${finished}/${totalRequests}` : `${finished}`;
  return `[${(now / 1e6).toFixed(1)} s] ${done} finished, ${progress?.inFlight ?? 0} in flight, ${progress?.failed ?? 0} failed`;
}

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
