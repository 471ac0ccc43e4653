/**
 * What a report renders, read from a results directory through results/reader.ts: a run
 * (summary, records, manifest, telemetry), a multi-scenario run (scenarios.json and a folder per
 * scenario), a sweep (sweep.json), a probe (probe.json) or a capacity curve (capacity.json).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { RequestRecord } from '../record.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import { hasResult, kindOfFileName, MARKER_NAMES, RESULT_FILES, resultKind } from './layout.js';
import {
  isRunDir,
  type OnReadProblem,
  readManifest,
  readRecordsTelling,
  readRunTelemetry,
  readScenariosTable,
  readSummary,
  readTable,
  type SavedSummary,
  scenarioNames,
  unfinishedRunSummary,
} from './reader.js';

export type ReportInput =
  | {
      kind: 'run';
      dir: string;
      summary: SavedSummary;
      manifest: unknown;
      records: RequestRecord[];
      telemetry: TelemetrySnapshot[];
    }
  | {
      kind: 'scenarios';
      dir: string;
      runs: Extract<ReportInput, { kind: 'run' }>[];
      table: unknown;
    }
  | { kind: 'sweep'; dir: string; sweep: unknown /* sweep.json */ }
  | { kind: 'probe'; dir: string; probe: unknown }
  | { kind: 'capacity'; dir: string; capacity: unknown };

export type RunReportInput = Extract<ReportInput, { kind: 'run' }>;

const markers = MARKER_NAMES.join(', ');

/**
 * Reads a results directory (its kind from the files present; a path to one of those files is
 * taken as its directory). Throws an Error that names the directory and what was looked for
 * when it is none of them. Records are read fully.
 */
export async function loadReportInput(
  dir: string,
  onProblem: OnReadProblem = () => {},
): Promise<ReportInput> {
  if (!existsSync(dir)) throw new Error(`${dir}: no such file or directory`);
  if (statSync(dir).isFile()) {
    if (!kindOfFileName(basename(dir))) {
      throw new Error(`${dir} is not a results file: give a results directory, or its ${markers}`);
    }
    dir = dirname(dir);
  }
  const kind = resultKind(dir);
  switch (kind) {
    case 'sweep':
      return { kind, dir, sweep: readTable(dir, 'sweep') };
    case 'probe':
      return { kind, dir, probe: readTable(dir, 'probe') };
    case 'capacity':
      return { kind, dir, capacity: readTable(dir, 'capacity') };
    case 'scenarios':
      return loadScenarios(dir, onProblem);
    case 'run':
      return loadRun(dir, onProblem);
    default:
      // A run killed before it wrote summary.json: its records are still the truth.
      if (isRunDir(dir)) return loadRun(dir, onProblem);
      // A multi-scenario run killed before it wrote scenarios.json: its folders are the runs.
      if (runFolders(dir, isRunDir).length > 0) {
        onProblem(
          `${dir} has no ${RESULT_FILES.scenarios}: the multi-scenario run did not finish; reporting the scenario folders it left`,
        );
        return loadScenarios(dir, onProblem, null);
      }
      throw new Error(
        `${dir} is not an infergauge results directory: it holds none of ${markers} (a run, a multi-scenario run, a sweep, a probe or a capacity curve)`,
      );
  }
}

/**
 * One run directory: summary.json, with records, manifest and telemetry where present; without
 * summary.json (a killed run) the summary is rebuilt from the records and said.
 */
export async function loadRun(
  dir: string,
  onProblem: OnReadProblem = () => {},
): Promise<RunReportInput> {
  const records = await readRecordsTelling(dir, onProblem);
  const manifest = readManifest(dir);
  const summary = readSummary(dir) ?? unfinishedRunSummary(dir, records, manifest ?? {}, onProblem);
  return {
    kind: 'run',
    dir,
    summary,
    manifest: manifest ?? null,
    records,
    telemetry: await readRunTelemetry(dir),
  };
}

/**
 * scenarios.json and one run per scenario, in the table's order (else by folder name). Without
 * the table (`null`: a killed run), every folder holding records is a scenario.
 */
async function loadScenarios(
  dir: string,
  onProblem: OnReadProblem,
  table: unknown = readScenariosTable(dir),
): Promise<ReportInput> {
  const isScenario = table === null ? isRunDir : isRun;
  // A name from scenarios.json must stay a folder right inside the results directory.
  const folders = scenarioNames(table).filter(
    (name) => name !== '..' && name !== '.' && !/[\\/]/.test(name) && isRun(join(dir, name)),
  );
  if (folders.length === 0) folders.push(...runFolders(dir, isScenario));
  if (folders.length === 0) {
    throw new Error(
      `${dir} has ${RESULT_FILES.scenarios} but no scenario folder with a ${RESULT_FILES.summary}`,
    );
  }
  const runs: RunReportInput[] = [];
  for (const name of folders) runs.push(await loadRun(join(dir, name), onProblem));
  return { kind: 'scenarios', dir, runs, table };
}

/** The folders right inside `dir` that `isScenario` takes, by name. */
function runFolders(dir: string, isScenario: (path: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && isScenario(join(dir, entry.name)))
    .map((entry) => entry.name)
    .sort((a, b) => a.localeCompare(b));
}

/** A scenario folder holds a finished run: its summary. */
const isRun = (path: string) => hasResult(path, 'summary');
