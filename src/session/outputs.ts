import { writeFileSync } from 'node:fs';
import { renderHtmlReport } from '../report/html.js';
import { resultPath } from '../results/layout.js';
import { loadReportInput } from '../results/load.js';
import type { Notify } from './target.js';

/**
 * report.html next to the records of a run, sweep, probe or merge; a failure to render never
 * fails the run itself: it is told through `onProblem` (one line).
 */
export async function saveHtmlReport(dir: string, onProblem: Notify): Promise<void> {
  const path = resultPath(dir, 'report');
  try {
    writeFileSync(path, renderHtmlReport(await loadReportInput(dir)));
  } catch (err) {
    onProblem(`could not write ${path}: ${(err as Error).message}`);
  }
}
