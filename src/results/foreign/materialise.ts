/**
 * Another tool's run written as an infergauge run directory, so that everything that reads
 * run directories (report, history, compare) reads it as it reads its own: records.jsonl where
 * the file had per-request figures, summary.json, and manifest.json saying where it came from
 * (`imported`).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { resultPath } from '../layout.js';
import { newId, writeManifest, writeScenarios, writeSummary } from '../runFiles.js';
import { FOREIGN_FORMAT_NAMES } from './index.js';
import type { ForeignRun } from './types.js';

/** What manifest.json's `imported` says. */
export interface ImportedFacts {
  format: ForeignRun['format'];
  formatVersion?: string;
  source: string;
  perRequest: boolean;
  notes: string[];
}

/** Writes one run into `dir` (created). */
export function writeForeignRun(
  run: ForeignRun,
  dir: string,
  parent?: { id: string; dir: string },
): void {
  mkdirSync(dir, { recursive: true });
  if (run.records) {
    writeFileSync(
      resultPath(dir, 'records'),
      run.records.map((r) => `${JSON.stringify(r)}\n`).join(''),
    );
  }
  writeSummary(dir, run.summary, undefined);
  const imported: ImportedFacts = {
    format: run.format,
    ...(run.formatVersion !== undefined ? { formatVersion: run.formatVersion } : {}),
    source: run.source,
    perRequest: run.perRequest,
    notes: run.notes,
  };
  const now = new Date().toISOString();
  writeManifest(
    dir,
    {
      id: newId(),
      kind: 'run',
      command: `import ${FOREIGN_FORMAT_NAMES[run.format]}`,
      ...(parent ? { parent: { ...parent, kind: 'scenarios' as const } } : {}),
      endedAt: now,
    },
    {
      // The run's own start where the file says it, else the import's.
      startedAt: run.startedAt ?? now,
      ...(run.model !== undefined ? { model: run.model } : {}),
      ...(run.url !== undefined ? { server: { url: run.url } } : {}),
      plan: { ...(run.load ? { load: run.load } : {}) },
      imported,
    },
  );
}

/**
 * Writes the runs of one file under `dir`: one run is the directory itself; several (a GuideLLM
 * file's benchmarks) are its scenario folders `benchmark-1`, `benchmark-2`, ... with
 * scenarios.json, as a multi-scenario run. Returns the run directories written.
 */
export function writeForeignRuns(runs: readonly ForeignRun[], dir: string): string[] {
  if (runs.length === 1 && runs[0]) {
    writeForeignRun(runs[0], dir);
    return [dir];
  }
  mkdirSync(dir, { recursive: true });
  const parent = { id: newId(), dir };
  const names = runs.map((_, i) => `benchmark-${i + 1}`);
  for (const [i, run] of runs.entries())
    writeForeignRun(run, join(dir, names[i] as string), parent);
  writeScenarios(
    dir,
    names.map((scenario, i) => ({ scenario, source: runs[i]?.source })),
  );
  return names.map((name) => join(dir, name));
}
