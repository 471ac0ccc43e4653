/**
 * The one reader of results directories: each file of a run (summary, manifest, records,
 * telemetry) and the tables of scenarios, sweeps, probes and capacity searches, checked against
 * results/schemas.ts, and the run directories found under a results directory of any kind.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import type { LoadSpec } from '../load.js';
import { parseSlo, type SloCondition } from '../metrics/slo.js';
import { type RunSummary, summarize, type Warning } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { readRecords, readTelemetry } from './jsonl.js';
import { hasResult, RESULT_FILES, type ResultFile, readJson, resultPath } from './layout.js';
import {
  capacitySchema,
  type Manifest,
  manifestSchema,
  parseResult,
  probeSchema,
  type ScenariosTable,
  scenariosSchema,
  summarySchema,
  sweepSchema,
} from './schemas.js';

/** summary.json: the run summary, with the server's metrics when they were scraped. */
export type SavedSummary = RunSummary & { serverMetrics?: ServerMetricsSummary };

const SCHEMAS = {
  summary: [summarySchema, 'a run summary'],
  manifest: [manifestSchema, 'a run manifest'],
  scenarios: [scenariosSchema, 'a scenario table'],
  sweep: [sweepSchema, 'a sweep result'],
  probe: [probeSchema, 'a probe result'],
  capacity: [capacitySchema, 'a capacity result'],
} as const;

/** `dir`'s JSON file of a role, checked against its schema; undefined when there is none. */
function readChecked(dir: string, file: keyof typeof SCHEMAS & ResultFile): unknown {
  const path = resultPath(dir, file);
  const value = readJson(path);
  if (value === undefined) return undefined;
  const [schema, what] = SCHEMAS[file];
  return parseResult(schema, value, path, what);
}

export const readSummary = (dir: string) => readChecked(dir, 'summary') as SavedSummary | undefined;
export const readManifest = (dir: string) => readChecked(dir, 'manifest') as Manifest | undefined;
export const readScenariosTable = (dir: string) =>
  readChecked(dir, 'scenarios') as ScenariosTable | undefined;
/** sweep.json, probe.json, capacity.json: checked, handed on as written. */
export const readTable = (dir: string, file: 'sweep' | 'probe' | 'capacity') =>
  readChecked(dir, file);

/**
 * Says what a reader skipped or rebuilt (a torn line, a missing summary): one sentence each,
 * for the command to print as a warning.
 */
export type OnReadProblem = (message: string) => void;

/** Every record of a run directory (none when it has no records.jsonl). */
export async function readRunRecords(
  dir: string,
  onBadLine?: (lineNumber: number, error: Error) => void,
): Promise<RequestRecord[]> {
  const records: RequestRecord[] = [];
  if (!hasResult(dir, 'records')) return records;
  for await (const r of readRecords(resultPath(dir, 'records'), onBadLine)) records.push(r);
  return records;
}

/** A run's records; a line that is not JSON (cut short by a kill) is skipped and said. */
export function readRecordsTelling(dir: string, onProblem: OnReadProblem) {
  return readRunRecords(dir, (line, err) =>
    onProblem(
      `${resultPath(dir, 'records')} line ${line} is not a whole JSON record (cut short when the run was killed?): skipped (${err.message})`,
    ),
  );
}

/**
 * The summary of a run that never wrote one (killed by SIGKILL or a crash): rebuilt from its
 * records and its manifest's plan, marked interrupted, and said through `onProblem`.
 */
export function unfinishedRunSummary(
  dir: string,
  records: RequestRecord[],
  manifest: Manifest,
  onProblem: OnReadProblem,
): RunSummary {
  const load = runLoad(dir, undefined, manifest);
  onProblem(
    `${dir} did not finish (it has no ${RESULT_FILES.summary}: was the run killed?); its summary is rebuilt from the ${records.length} records in ${RESULT_FILES.records} (infergauge report --write-summary saves it)`,
  );
  const slo = manifest.plan?.slo as SloCondition[] | undefined;
  return summarize(records, { load, ...(slo ? { slo } : {}) }, { interrupted: true });
}

/** A run directory's telemetry snapshots (none when it has no telemetry.jsonl). */
export async function readRunTelemetry(dir: string): Promise<TelemetrySnapshot[]> {
  return hasResult(dir, 'telemetry') ? readTelemetry(resultPath(dir, 'telemetry')) : [];
}

/** A folder holding a run's records. */
export const isRunDir = (dir: string) => hasResult(dir, 'records');

/**
 * Every run directory (records.jsonl) at or under `dir` down to `depth` levels (scenario
 * folders, sweep points, probe points), in name order.
 */
export function findRunDirs(dir: string, depth = 3): string[] {
  const dirs: string[] = [];
  const walk = (d: string, left: number) => {
    if (isRunDir(d)) dirs.push(d);
    if (left === 0) return;
    for (const entry of readdirSync(d).sort()) {
      const sub = join(d, entry);
      if (statSync(sub).isDirectory()) walk(sub, left - 1);
    }
  };
  walk(dir, depth);
  return dirs;
}

/** The scenario names of scenarios.json (or sweep.json), in its order. */
export function scenarioNames(table: unknown): string[] {
  const rows = (table as { scenarios?: { scenario?: unknown }[] } | undefined)?.scenarios;
  return Array.isArray(rows)
    ? rows.map((r) => r.scenario).filter((s): s is string => typeof s === 'string')
    : [];
}

/** The load a run ran: its summary's (less the measured mean), else its manifest's plan's. */
export function savedLoad(
  summary: SavedSummary | undefined,
  manifest: Manifest | undefined,
): LoadSpec | undefined {
  if (summary?.load) {
    const { meanConcurrency: _, ...load } = summary.load;
    return load as LoadSpec;
  }
  return manifest?.plan?.load as LoadSpec | undefined;
}

/** savedLoad, or an Error naming the directory when neither file says it. */
function runLoad(dir: string, summary: SavedSummary | undefined, manifest: Manifest): LoadSpec {
  const load = savedLoad(summary, manifest);
  if (load) return load;
  throw new Error(
    `${dir}: no ${RESULT_FILES.summary} or ${RESULT_FILES.manifest} says what load produced it`,
  );
}

/**
 * A summary computed again from a run's records, with what only the run itself knew: client
 * health (measured live), whether it was interrupted, and every warning the run added after
 * summarising (plan, server, shard and sweep warnings), so each output shows the saved ones.
 */
export function withSavedFacts(summary: RunSummary, saved: SavedSummary | undefined): RunSummary {
  if (!saved) return summary;
  if (saved.clientHealth) summary.clientHealth = saved.clientHealth;
  if (saved.interrupted) summary.interrupted = saved.interrupted;
  const key = (w: Warning) => `${w.code}\u0000${w.message}`;
  const have = new Set(summary.warnings.map(key));
  for (const w of saved.warnings) if (!have.has(key(w))) summary.warnings.push(w);
  return summary;
}

/** True when `path` exists and is a directory. */
export function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** A run directory (records.jsonl) found under a results directory. */
export interface SavedRun {
  name: string;
  dir: string;
  records: RequestRecord[];
  summary: RunSummary;
  manifest: Manifest;
  /** It has no summary.json (killed before it wrote one): `summary` was rebuilt. */
  unfinished?: true;
}

/**
 * Every run under `dir` (itself, scenario folders, sweep points, probe points), each
 * summarised again from its raw records: a report never trusts a printed table.
 */
export async function loadSavedRuns(
  dir: string,
  onProblem: OnReadProblem = () => {},
): Promise<SavedRun[]> {
  const runs: SavedRun[] = [];
  for (const d of findRunDirs(dir)) {
    const records = await readRecordsTelling(d, onProblem);
    const saved = readSummary(d);
    const manifest = readManifest(d) ?? {};
    const name = relative(dir, d) || basename(d);
    if (!saved) {
      const summary = unfinishedRunSummary(d, records, manifest, onProblem);
      runs.push({ name, dir: d, records, summary, manifest, unfinished: true });
      continue;
    }
    const load = runLoad(d, saved, manifest);
    const summary = summarize(records, {
      load,
      ...(saved.goodput ? { slo: parseSlo(saved.goodput.slo) } : {}),
    });
    runs.push({ name, dir: d, records, summary: withSavedFacts(summary, saved), manifest });
  }
  return runs;
}
