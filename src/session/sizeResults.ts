/** `infergauge size --out DIR`: size.json, its manifest and report.html. */
import { writeFileSync } from 'node:fs';
import { resultPath, writeJson } from '../results/layout.js';
import { newId, openRunDir, writeManifest } from '../results/runFiles.js';
import { describeScenario } from '../workload/scenarios.js';
import type { SizeOptions, SizeResult } from './size.js';
import type { SizeVerification } from './sizeVerify.js';

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

/**
 * size.json's content: the traffic, the scenario sized (none for a trace, which sets every
 * request's lengths), the SLOs, the result and the check on the server.
 */
export function sizeDocument(
  o: Pick<SizeOptions, 'traffic' | 'scenario' | 'slo'>,
  result: SizeResult,
  verification: SizeVerification | undefined,
): Record<string, unknown> {
  return {
    traffic: o.traffic,
    ...(o.traffic.mode === 'trace' ? {} : { scenario: describeScenario(o.scenario) }),
    slo: o.slo,
    ...result,
    ...(verification ? { verification } : {}),
  };
}
