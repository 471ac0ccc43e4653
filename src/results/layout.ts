import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The run directory's layout: every file a run, sweep, probe, capacity search or merge writes,
 * by role. Readers and writers name files only through this table, so a file has one name.
 */
export const RESULT_FILES = {
  /** One JSON line per finished request, written as it finishes: the source of truth. */
  records: 'records.jsonl',
  /** Server and GPU telemetry snapshots on the run's clock. */
  telemetry: 'telemetry.jsonl',
  /** Each load generator thread's own health measurements (see results/jsonl.ts). */
  clientHealth: 'client-health.json',
  /** The run summary (metrics/summary.ts), with every warning. */
  summary: 'summary.json',
  /** What was run: the effective plan, the target, versions, time. */
  manifest: 'manifest.json',
  /** Several scenarios in one run: one row each. */
  scenarios: 'scenarios.json',
  sweep: 'sweep.json',
  probe: 'probe.json',
  capacity: 'capacity.json',
  report: 'report.html',
  requestsCsv: 'requests.csv',
  runsCsv: 'runs.csv',
  vllmBench: 'vllm-bench-result.json',
} as const;

export type ResultFile = keyof typeof RESULT_FILES;

/** `dir`'s file of a role. */
export function resultPath(dir: string, file: ResultFile): string {
  return join(dir, RESULT_FILES[file]);
}

export function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

/** A JSON file's value; undefined when there is no such file. */
export function readJson(path: string): unknown {
  return existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : undefined;
}
