/**
 * The one reader of results directories: each file of a run (summary, manifest, records,
 * telemetry) and the tables of scenarios, sweeps, probes and capacity searches, checked against
 * results/schemas.ts, and the run directories found under a results directory of any kind.
 */

import { existsSync, statSync } from 'node:fs';
import { basename, relative } from 'node:path';
import { readCacheState, readPrefixHitRate } from '../analysis/prefixCache.js';
import type { LoadSpec } from '../load.js';
import { keepRunPrediction } from '../metrics/runPrediction.js';
import { parseSlo, type SloCondition } from '../metrics/slo.js';
import type { RunSummary, SummaryContext, Warning } from '../metrics/summary.js';
import { validityOf } from '../metrics/validity.js';
import type { RequestRecord } from '../record.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { readTelemetry } from './jsonl.js';
import {
  hasResult,
  RESULT_FILES,
  type ResultFile,
  readOwnJson,
  recordsPath,
  resultPath,
  walkResultsTree,
} from './layout.js';
import { type RunCharts, RunViewBuilder, type RunViewParts, streamRecords } from './runView.js';
import { type Manifest, parseResult, resultSchemas, type ScenariosTable } from './schemas.js';

/** summary.json: the run summary, with the server's metrics when they were scraped. */
export type SavedSummary = RunSummary & { serverMetrics?: ServerMetricsSummary };

const SCHEMAS = {
  summary: ['summarySchema', 'a run summary'],
  manifest: ['manifestSchema', 'a run manifest'],
  scenarios: ['scenariosSchema', 'a scenario table'],
  sweep: ['sweepSchema', 'a sweep result'],
  probe: ['probeSchema', 'a probe result'],
  capacity: ['capacitySchema', 'a capacity result'],
  size: ['sizeSchema', 'a sizing result'],
} as const;

/**
 * `dir`'s JSON file of a role, checked against its schema; undefined when there is none. A file
 * this process wrote and reads back unchanged (a run's own summary, for its report and history)
 * is as its typed writer made it: it is not checked again, and zod is not loaded for it.
 */
function readChecked(dir: string, file: keyof typeof SCHEMAS & ResultFile): unknown {
  const path = resultPath(dir, file);
  const read = readOwnJson(path);
  if (read === undefined) return undefined;
  if (read.ownWrite) return read.value;
  const [schema, what] = SCHEMAS[file];
  return parseResult(resultSchemas()[schema], read.value, path, what);
}

export const readSummary = (dir: string) => readChecked(dir, 'summary') as SavedSummary | undefined;
export const readManifest = (dir: string) => readChecked(dir, 'manifest') as Manifest | undefined;
export const readScenariosTable = (dir: string) =>
  readChecked(dir, 'scenarios') as ScenariosTable | undefined;
/** sweep.json, probe.json, capacity.json, size.json: checked, handed on as written. */
export const readTable = (dir: string, file: 'sweep' | 'probe' | 'capacity' | 'size') =>
  readChecked(dir, file);

/**
 * Says what a reader skipped or rebuilt (a torn line, a missing summary): one sentence each,
 * for the command to print as a warning.
 */
export type OnReadProblem = (message: string) => void;

/**
 * Every record of a run directory (none when it has no records.jsonl), in memory: for what
 * needs them all at once (the vLLM result's per-request lists); the read model
 * (results/runView.ts) reads a run of any length instead. What is skipped as damaged is said
 * through `onProblem`. Stops with a clear error when the heap fills.
 */
export async function readRunRecords(
  dir: string,
  onProblem?: OnReadProblem,
): Promise<RequestRecord[]> {
  const records: RequestRecord[] = [];
  if (!hasResult(dir, 'records')) return records;
  await streamRecords(resultPath(dir, 'records'), { add: (r) => records.push(r) }, onProblem);
  return records;
}

/** A run's records; what is skipped as damaged (a line cut short by a kill) is said. */
export function readRecordsTelling(dir: string, onProblem: OnReadProblem) {
  return readRunRecords(dir, onProblem);
}

/**
 * Streams a run directory's records (none when it has no records file) through the parts of
 * the read model in `parts`, in one pass; what is skipped as damaged is said once (ReadDamage)
 * and carried into the summary it builds. Returns the builder
 * (its summary and charts) and the number of records read.
 */
export async function readRunView(
  dir: string,
  parts: RunViewParts,
  onProblem: OnReadProblem = () => {},
): Promise<RunViewBuilder> {
  const builder = new RunViewBuilder(parts);
  if (hasResult(dir, 'records')) {
    await streamRecords(resultPath(dir, 'records'), builder, onProblem);
  }
  return builder;
}

/** What summarises a run that never wrote summary.json: its manifest's load and SLO. */
export function unfinishedContext(dir: string, manifest: Manifest): SummaryContext {
  const load = runLoad(dir, undefined, manifest);
  const slo = manifest.plan?.slo as SloCondition[] | undefined;
  return { load, ...(slo ? { slo } : {}) };
}

/**
 * The summary of a run that never wrote one (killed by SIGKILL or a crash), rebuilt from its
 * records (`builder`, given unfinishedContext) and marked interrupted, and said through
 * `onProblem`.
 */
export function unfinishedRunSummary(
  dir: string,
  builder: RunViewBuilder,
  onProblem: OnReadProblem,
): RunSummary {
  onProblem(
    `${dir} did not finish (it has no ${RESULT_FILES.summary}: was the run killed?); its summary is rebuilt from the ${builder.records} records in ${basename(recordsPath(dir))} (infergauge report --write-summary saves it)`,
  );
  return builder.summary({ interrupted: true }) as RunSummary;
}

/** A run directory's telemetry snapshots (none when it has no telemetry.jsonl). */
export async function readRunTelemetry(dir: string): Promise<TelemetrySnapshot[]> {
  return hasResult(dir, 'telemetry') ? readTelemetry(resultPath(dir, 'telemetry')) : [];
}

/** A folder holding a run's records. */
export const isRunDir = (dir: string) => hasResult(dir, 'records');

/**
 * Every run directory (records.jsonl) at or under `dir` down to `depth` levels (scenario
 * folders, sweep points, probe points), in name order, each once (layout.ts walkResultsTree);
 * `onSkipped` hears of each link or folder passed over.
 */
export function findRunDirs(
  dir: string,
  depth = 3,
  onSkipped: (message: string) => void = () => {},
): string[] {
  const tree = walkResultsTree(dir, isRunDir, depth);
  for (const message of tree.skipped) onSkipped(message);
  return tree.dirs;
}

/** The scenario names of scenarios.json (or sweep.json), in its order. */
export function scenarioNames(table: unknown): string[] {
  const rows = (table as { scenarios?: { scenario?: unknown }[] } | undefined)?.scenarios;
  return Array.isArray(rows)
    ? rows.map((r) => r.scenario).filter((s): s is string => typeof s === 'string')
    : [];
}

/**
 * The load a run ran: its summary's (less the measured mean), else its manifest's own (a sweep
 * point's level, a probe's batch: the plan's load is the sweep's, not the point's), else its
 * plan's.
 */
export function savedLoad(
  summary: SavedSummary | undefined,
  manifest: Manifest | undefined,
): LoadSpec | undefined {
  if (summary?.load) {
    const { meanConcurrency: _, ...load } = summary.load;
    return load as LoadSpec;
  }
  const own = (manifest as { load?: { mode?: unknown } } | undefined)?.load;
  if (own?.mode === 'closed' || own?.mode === 'open') return own as LoadSpec;
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
  // The cache's state and what --prefix-hit-rate reached: the run's, not in its records.
  const facts = saved as { cacheState?: unknown; prefixHitRate?: unknown };
  const cacheState = readCacheState(facts.cacheState);
  if (cacheState) summary.cacheState = cacheState;
  const reached = readPrefixHitRate(facts.prefixHitRate);
  if (reached) summary.prefixHitRate = reached;
  // A calibrated run's prediction intervals came from replays, not from its records.
  keepRunPrediction(summary, saved);
  const key = (w: Warning) => `${w.code}\u0000${w.message}`;
  const have = new Set(summary.warnings.map(key));
  for (const w of saved.warnings) if (!have.has(key(w))) summary.warnings.push(w);
  summary.validity = validityOf(summary.warnings);
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
  /**
   * Summarised again from its raw records, with what only the run knew (withSavedFacts); the
   * saved one when loadSavedRuns was told not to summarise.
   */
  summary: RunSummary;
  /** summary.json as saved (for a run without one, the summary rebuilt from its records). */
  saved: SavedSummary;
  manifest: Manifest;
  /** Records read, warm-up included. */
  requests: number;
  /** Chart data (loadSavedRuns with `charts`). */
  charts?: RunCharts;
  /** It has no summary.json (killed before it wrote one): `summary` was rebuilt. */
  unfinished?: true;
}

/** What a caller does with each record of one run as it passes (the per-request CSV). */
export interface RecordSink {
  add(record: RequestRecord): void;
  /** After the run's last record. */
  end(): void;
}

export interface LoadRunsOptions {
  /**
   * Summarise each run again from its records (default true). Off, a run with summary.json
   * takes it as its `summary` (a report that only draws the saved numbers skips the work and
   * the memory of summarising again); a run without one is always summarised.
   */
  summarize?: boolean;
  /** Build each run's chart data too (RunCharts). */
  charts?: boolean;
  /** A sink for the records of each run (`index` of `count` runs), or none. */
  sink?: (run: {
    name: string;
    dir: string;
    index: number;
    count: number;
  }) => RecordSink | undefined;
}

/**
 * Every run under `dir` (itself, scenario folders, sweep points, probe points), each
 * summarised again from its raw records (a report never trusts a printed table), in one
 * streaming pass per run.
 */
export async function loadSavedRuns(
  dir: string,
  onProblem: OnReadProblem = () => {},
  options: LoadRunsOptions = {},
): Promise<SavedRun[]> {
  const runs: SavedRun[] = [];
  const dirs = findRunDirs(dir, undefined, onProblem);
  for (const [index, d] of dirs.entries()) {
    const saved = readSummary(d);
    const manifest = readManifest(d) ?? {};
    const name = relative(dir, d) || basename(d);
    const again = options.summarize !== false || !saved;
    const context: SummaryContext | undefined = !again
      ? undefined
      : saved
        ? {
            load: runLoad(d, saved, manifest),
            ...(saved.goodput ? { slo: parseSlo(saved.goodput.slo) } : {}),
          }
        : unfinishedContext(d, manifest);
    const sink = options.sink?.({ name, dir: d, index, count: dirs.length });
    const builder = await readRunView(
      d,
      {
        ...(context ? { summary: context } : {}),
        charts: options.charts,
        ...(sink ? { onRecord: (r: RequestRecord) => sink.add(r) } : {}),
      },
      onProblem,
    );
    sink?.end();
    const charts = builder.charts();
    const base = {
      name,
      dir: d,
      manifest,
      requests: builder.records,
      ...(charts ? { charts } : {}),
    };
    if (!saved) {
      const summary = unfinishedRunSummary(d, builder, onProblem);
      runs.push({ ...base, summary, saved: summary, unfinished: true });
      continue;
    }
    const summary = again ? withSavedFacts(builder.summary() as RunSummary, saved) : saved;
    runs.push({ ...base, summary, saved });
  }
  return runs;
}
