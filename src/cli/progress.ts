/**
 * The terminal's progress line as an output: redrawn on stderr four times a second while a
 * point runs, cleared when it ends. log-update is loaded here, on a terminal only; the first
 * line waits for it.
 */
import type { Output, PointStarted } from '../session/events.js';

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
