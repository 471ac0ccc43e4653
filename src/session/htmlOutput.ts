/**
 * report.html as an output: rendered from the session's results directory once the session
 * ends (a run, a sweep, a probe, several scenarios), unless it ended on an error. A failure to
 * render never fails the session: it is told in one line.
 */
import { writeFileSync } from 'node:fs';
import { resultPath } from '../results/layout.js';
import type { Output } from './events.js';
import type { Notify } from './target.js';

export function htmlOutput(onNotice: Notify = () => {}): Output {
  let measured = 0;
  return {
    name: 'html',
    pointFinished() {
      measured++;
    },
    async sessionFinished({ session, error }) {
      // Stopped before its first point, or failed: there is nothing to render.
      if (error || measured === 0) return;
      await saveHtmlReport(session.root, onNotice);
    },
  };
}

/**
 * report.html in a results directory (a run, sweep, probe or merge), drawn from the read model
 * (one streaming pass over the records: results/runView.ts), so a run of any length gets one; a
 * failure to render (a heap too small included: ReadMemoryError) is told through `onProblem`
 * in one line, never thrown.
 */
export async function saveHtmlReport(dir: string, onProblem: Notify): Promise<void> {
  const path = resultPath(dir, 'report');
  try {
    // Loaded here, so that the renderer and the readers never load before a run's first request.
    const [{ renderHtmlReport }, { loadReportInput }] = await Promise.all([
      import('../report/html.js'),
      import('../results/load.js'),
    ]);
    writeFileSync(path, renderHtmlReport(await loadReportInput(dir)));
  } catch (err) {
    onProblem(`could not write ${path}: ${(err as Error).message}`);
  }
}
