/**
 * Progress while points run, on stderr. On a terminal: a line redrawn four times a second
 * while a point runs, cleared when it ends (log-update is loaded here, on a terminal only; the
 * first line waits for it). Off a terminal (CI, a pipe): session/progressOutput.ts's lines.
 */
import { builtInOutput, type Output, type PointStarted } from '../session/events.js';
import { type PlainProgressOptions, plainProgressOutput } from '../session/progressOutput.js';

/**
 * A line on stderr as each point ends, named by the point itself (`decode: concurrency 8`,
 * `batch 8`): the probes' and capacity's progress.
 */
export function pointLineOutputs(stream: NodeJS.WriteStream): Output[] {
  return progressOutputs(stream, {
    live: false,
    pointLines: true,
    label: (point) => point.scenario,
  });
}

/**
 * The progress outputs for stderr: the redrawn line on a terminal (unless `live` is false:
 * virtual time, JSON on stdout), else the plain lines.
 */
export function progressOutputs(
  stream: { isTTY?: boolean },
  o: { live: boolean } & Pick<PlainProgressOptions, 'pointLines' | 'label'>,
): Output[] {
  if (stream.isTTY) return o.live ? [builtInOutput(progressOutput())] : [];
  return [
    builtInOutput(
      plainProgressOutput({ pointLines: o.pointLines, ...(o.label ? { label: o.label } : {}) }),
    ),
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
