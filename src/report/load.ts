/**
 * Reads a results directory for a report: a run (summary.json, records.jsonl, manifest.json,
 * telemetry.jsonl), a multi-scenario run (scenarios.json and a folder per scenario), a sweep
 * (sweep.json), a probe (probe.json) or a capacity curve (capacity.json).
 */
import { createReadStream, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { RunSummary } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';
import { readRecords } from '../results/jsonl.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';

export type ReportInput =
  | {
      kind: 'run';
      dir: string;
      summary: RunSummary & { serverMetrics?: ServerMetricsSummary };
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

/** The file that marks each kind of results directory, in the order they are looked for. */
const MARKERS = [
  ['sweep.json', 'sweep'],
  ['probe.json', 'probe'],
  ['capacity.json', 'capacity'],
  ['scenarios.json', 'scenarios'],
  ['summary.json', 'run'],
] as const;

/**
 * Reads a results directory (its kind from the files present; a path to one of those files is
 * taken as its directory). Throws an Error that names the directory and what was looked for
 * when it is none of them. Records are read fully.
 */
export async function loadReportInput(dir: string): Promise<ReportInput> {
  if (!existsSync(dir)) throw new Error(`${dir}: no such file or directory`);
  if (statSync(dir).isFile()) {
    const name = basename(dir);
    if (!MARKERS.some(([file]) => file === name)) {
      throw new Error(
        `${dir} is not a results file: give a results directory, or its ${MARKERS.map(([f]) => f).join(', ')}`,
      );
    }
    dir = dirname(dir);
  }
  const has = (file: string) => existsSync(join(dir, file));
  const kind = MARKERS.find(([file]) => has(file))?.[1];
  switch (kind) {
    case 'sweep':
      return { kind, dir, sweep: readJson(join(dir, 'sweep.json')) };
    case 'probe':
      return { kind, dir, probe: readJson(join(dir, 'probe.json')) };
    case 'capacity':
      return { kind, dir, capacity: readJson(join(dir, 'capacity.json')) };
    case 'scenarios':
      return loadScenarios(dir);
    case 'run':
      return loadRun(dir);
    default:
      throw new Error(
        `${dir} is not an infergauge results directory: it holds none of ${MARKERS.map(([f]) => f).join(', ')} (a run, a multi-scenario run, a sweep, a probe or a capacity curve)`,
      );
  }
}

/** One run directory: summary.json, with records, manifest and telemetry where present. */
export async function loadRun(dir: string): Promise<RunReportInput> {
  const summary = readJson(join(dir, 'summary.json')) as RunReportInput['summary'];
  if (typeof summary !== 'object' || summary === null || !('latency' in summary)) {
    throw new Error(`${join(dir, 'summary.json')} is not a run summary (no latency)`);
  }
  const manifestPath = join(dir, 'manifest.json');
  const records: RequestRecord[] = [];
  const recordsPath = join(dir, 'records.jsonl');
  if (existsSync(recordsPath)) for await (const r of readRecords(recordsPath)) records.push(r);
  const telemetryPath = join(dir, 'telemetry.jsonl');
  return {
    kind: 'run',
    dir,
    summary,
    manifest: existsSync(manifestPath) ? readJson(manifestPath) : null,
    records,
    telemetry: existsSync(telemetryPath) ? await readTelemetry(telemetryPath) : [],
  };
}

/** scenarios.json and one run per scenario, in the table's order (else by folder name). */
async function loadScenarios(dir: string): Promise<ReportInput> {
  const table = readJson(join(dir, 'scenarios.json'));
  const rows = (table as { scenarios?: { scenario?: unknown }[] }).scenarios;
  const named = Array.isArray(rows)
    ? rows.map((r) => r.scenario).filter((s): s is string => typeof s === 'string')
    : [];
  // A name from scenarios.json must stay a folder right inside the results directory.
  const folders = named.filter(
    (name) => name !== '..' && name !== '.' && !/[\\/]/.test(name) && isRunDir(join(dir, name)),
  );
  if (folders.length === 0) {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      if (entry.isDirectory() && isRunDir(join(dir, entry.name))) folders.push(entry.name);
    }
  }
  if (folders.length === 0) {
    throw new Error(`${dir} has scenarios.json but no scenario folder with a summary.json`);
  }
  const runs: RunReportInput[] = [];
  for (const name of folders) runs.push(await loadRun(join(dir, name)));
  return { kind: 'scenarios', dir, runs, table };
}

function isRunDir(path: string): boolean {
  return existsSync(join(path, 'summary.json'));
}

function readJson(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}

/** telemetry.jsonl, skipping a last line cut short by a crash. */
async function readTelemetry(path: string): Promise<TelemetrySnapshot[]> {
  const lines = createInterface({
    input: createReadStream(path, { encoding: 'utf8' }),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  const out: TelemetrySnapshot[] = [];
  for await (const line of lines) {
    if (line.length === 0) continue;
    try {
      const snapshot = JSON.parse(line) as TelemetrySnapshot;
      if (typeof snapshot.at === 'number') out.push(snapshot);
    } catch {
      // A partial last line: everything before it is still usable.
    }
  }
  return out;
}
