/**
 * report.html as an output: rendered from the session's results directory once the session
 * ends (a run, a sweep, a probe, several scenarios), unless it ended on an error. A failure to
 * render never fails the session: it is told in one line.
 */
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
      // Loaded at the end, so that the renderer never loads before the first request.
      const { saveHtmlReport } = await import('./outputs.js');
      await saveHtmlReport(session.root, onNotice);
    },
  };
}
