/** `infergauge size --out DIR`: size.json, its manifest and report.html. */
import { writeFileSync } from 'node:fs';
import { resultPath, writeJson } from '../results/layout.js';
import { newId, openRunDir, writeManifest } from '../results/runFiles.js';

export async function writeSizeResults(dir: string, size: Record<string, unknown>): Promise<void> {
  openRunDir(dir);
  const now = new Date().toISOString();
  writeManifest(
    dir,
    { id: newId(), kind: 'size', command: 'size', endedAt: now },
    {
      startedAt: now,
      plan: { traffic: size.traffic, scenario: size.scenario, slo: size.slo },
    },
  );
  writeJson(resultPath(dir, 'size'), { schemaVersion: 1, ...size });
  const { renderHtmlReport } = await import('../report/html.js');
  writeFileSync(
    resultPath(dir, 'report'),
    renderHtmlReport({ kind: 'size', dir, size: { schemaVersion: 1, ...size } }),
  );
}
