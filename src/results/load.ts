/**
 * What a report renders, read from a results directory through results/reader.ts: a run
 * (summary, chart data from one streaming pass over its records, manifest, telemetry), a
 * multi-scenario run (scenarios.json and a folder per scenario), a sweep (sweep.json), a probe
 * (probe.json) or a capacity curve (capacity.json).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { RequestRecord } from '../record.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import { hasResult, kindOfFileName, MARKER_NAMES, RESULT_FILES, resultKind } from './layout.js';
import {
  isRunDir,
  type OnReadProblem,
  readManifest,
  readRunTelemetry,
  readRunView,
  readScenariosTable,
  readSummary,
  readTable,
  type SavedRun,
  type SavedSummary,
  scenarioNames,
  unfinishedContext,
  unfinishedRunSummary,
} from './reader.js';
import type { RunCharts } from './runView.js';
import type { Manifest } from './schemas.js';

export type ReportInput =
  | {
      kind: 'run';
      dir: string;
      summary: SavedSummary;
      manifest: unknown;
      /**
       * What the charts and the failure table draw, from one pass over records.jsonl (always
       * set by loadReportInput).
       */
      charts?: RunCharts;
      /**
       * Records held in memory by a caller that has them (a test, a library user): when
       * present, the report draws from them instead of `charts`.
       */
      records?: RequestRecord[];
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
  | { kind: 'capacity'; dir: string; capacity: unknown }
  | { kind: 'size'; dir: string; size: unknown };

export type RunReportInput = Extract<ReportInput, { kind: 'run' }>;

const markers = MARKER_NAMES.join(', ');

export interface LoadReportOptions {
  /**
   * Runs already read with their chart data (loadSavedRuns with `charts`): a run directory
   * among them is not read again.
   */
  runs?: SavedRun[];
}

/**
 * Reads a results directory (its kind from the files present; a path to one of those files is
 * taken as its directory). Throws an Error that names the directory and what was looked for
 * when it is none of them. Records are read fully.
 */
export async function loadReportInput(
  dir: string,
  onProblem: OnReadProblem = () => {},
  options: LoadReportOptions = {},
): Promise<ReportInput> {
  const read = (runDir: string) => loadRun(runDir, onProblem, options.runs);
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
    case 'size':
      return { kind, dir, size: readTable(dir, 'size') };
    case 'scenarios':
      return loadScenarios(dir, read);
    case 'run':
      return read(dir);
    default:
      // A run killed before it wrote summary.json: its records are still the truth.
      if (isRunDir(dir)) return read(dir);
      // A multi-scenario run killed before it wrote scenarios.json: its folders are the runs.
      if (runFolders(dir, isRunDir).length > 0) {
        onProblem(
          `${dir} has no ${RESULT_FILES.scenarios}: the multi-scenario run did not finish; reporting the scenario folders it left`,
        );
        return loadScenarios(dir, read, null);
      }
      throw new Error(
        `${dir} is not an infergauge results directory: it holds none of ${markers} (a run, a multi-scenario run, a sweep, a probe, a capacity curve or a sizing)`,
      );
  }
}

/**
 * What a reader says of a run written in the previous layout (manifest version 1, before every
 * results directory had one with its id, kind and end time): it is read as a run's.
 */
function olderLayout(dir: string, manifest: Manifest | undefined): string | undefined {
  if (manifest?.schemaVersion !== 1) return undefined;
  const by = manifest.tool?.version ? ` (infergauge ${manifest.tool.version})` : '';
  return `${dir}: results layout 1${by}: read as a run; its manifest has no id, kind or end time`;
}

/**
 * One run directory: summary.json, with chart data (one streaming pass over its records),
 * manifest and telemetry where present; without summary.json (a killed run) the summary is
 * rebuilt from the records in the same pass and said. A run among `runs` (read already) is
 * taken from there.
 */
export async function loadRun(
  dir: string,
  onProblem: OnReadProblem = () => {},
  runs: SavedRun[] = [],
): Promise<RunReportInput> {
  const telemetry = await readRunTelemetry(dir);
  const older = olderLayout(dir, readManifest(dir));
  if (older) onProblem(older);
  const known = runs.find((r) => r.charts && resolve(r.dir) === resolve(dir));
  if (known?.charts) {
    return {
      kind: 'run',
      dir,
      summary: known.saved,
      manifest: readManifest(dir) ?? null,
      charts: known.charts,
      telemetry,
    };
  }
  const manifest = readManifest(dir);
  const saved = readSummary(dir);
  const builder = await readRunView(
    dir,
    { charts: true, ...(saved ? {} : { summary: unfinishedContext(dir, manifest ?? {}) }) },
    onProblem,
  );
  return {
    kind: 'run',
    dir,
    summary: saved ?? unfinishedRunSummary(dir, builder, onProblem),
    manifest: manifest ?? null,
    charts: builder.charts() as RunCharts,
    telemetry,
  };
}

/**
 * scenarios.json and one run per scenario, in the table's order (else by folder name). Without
 * the table (`null`: a killed run), every folder holding records is a scenario.
 */
async function loadScenarios(
  dir: string,
  read: (runDir: string) => Promise<RunReportInput>,
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
  for (const name of folders) runs.push(await read(join(dir, name)));
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
