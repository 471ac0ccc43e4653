/**
 * Another tool's run written as an infergauge run directory, so that everything that reads
 * run directories (report, history, compare) reads it as it reads its own: records.jsonl where
 * the file had per-request figures, summary.json, and manifest.json saying where it came from
 * (`imported`).
 */
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { EXIT, InfergaugeError } from '../../errors.js';
import { resultPath } from '../layout.js';
import { newId, writeManifest, writeScenarios, writeSummary } from '../runFiles.js';
import { FOREIGN_FORMAT_NAMES, readForeign } from './index.js';
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

/**
 * `report FILE`: another tool's result file read and written as a run directory, `out` or
 * `<file>.infergauge` beside it. An earlier import of the same file there is derived data,
 * written again whole; anything else there is never overwritten (IG_REPORT_OUT, exit 2).
 */
export async function importAsRunDirectory(
  file: string,
  out: string | undefined,
): Promise<{ dir: string; runs: ForeignRun[] }> {
  const runs = await readForeign(file);
  const dir = out ?? join(dirname(file), `${basename(file)}.infergauge`);
  const problem = importTargetProblem(dir, file);
  if (problem) throw new InfergaugeError(problem, 'IG_REPORT_OUT', EXIT.invalidOptions);
  rmSync(dir, { recursive: true, force: true });
  writeForeignRuns(runs, dir);
  return { dir, runs };
}

/**
 * Why `dir` cannot take the import of `file`: it holds something else than an earlier import
 * of the same file (a run, another file's import, anything a user keeps), which is never
 * overwritten.
 */
function importTargetProblem(dir: string, file: string): string | undefined {
  if (!existsSync(dir) || (statSync(dir).isDirectory() && readdirSync(dir).length === 0)) {
    return undefined;
  }
  const manifests = [join(dir, 'manifest.json'), join(dir, 'benchmark-1', 'manifest.json')];
  for (const path of manifests) {
    try {
      const imported = (
        JSON.parse(readFileSync(path, 'utf8')) as { imported?: { source?: unknown } }
      ).imported;
      const source = typeof imported?.source === 'string' ? imported.source : '';
      if (source === file || source.startsWith(`${file} benchmarks[`)) return undefined;
    } catch {
      // not ours
    }
  }
  return `${dir} exists and is not an earlier import of ${file}: give another --out`;
}
