/**
 * The writers of a run directory's own files: the manifest (what ran), the summary and, for
 * several scenarios, the table of them. Run, sweep and probe points write through these.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import type { RunSummary } from '../metrics/summary.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { VERSION } from '../version.js';
import { RESULT_FILES, resultPath, writeJson } from './layout.js';

/** Creates a run directory; refuses one that already holds a run. */
export function openRunDir(dir: string): void {
  if (existsSync(resultPath(dir, 'records'))) {
    throw new Error(`${dir} already holds a run (${RESULT_FILES.records}); choose another --out`);
  }
  mkdirSync(dir, { recursive: true });
}

/** What a manifest says about one run; the tool, host and time are added here. */
export interface ManifestAbout {
  /** The run clock's origin (0 ms in the records). */
  startedAt: string;
  server: Record<string, unknown>;
  model: string;
  workload: Record<string, unknown>;
  /** The effective plan, secrets redacted. */
  plan: unknown;
  execution?: Record<string, unknown>;
  windows: {
    warmupRequests: number;
    measuredRequests: number | null;
    /** Set in a session scenario: warm-up and measured counts are sessions, not requests. */
    unit?: 'sessions';
    measuredDurationS: number | null;
  };
}

/** manifest.json: what ran, where, when (the clock's origin) and how. */
export function writeManifest(dir: string, about: ManifestAbout): void {
  writeJson(resultPath(dir, 'manifest'), {
    schemaVersion: 1,
    tool: { name: 'infergauge', version: VERSION },
    startedAt: about.startedAt,
    node: process.version,
    host: {
      hostname: hostname(),
      platform: process.platform,
      arch: process.arch,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model,
    },
    server: about.server,
    model: about.model,
    workload: about.workload,
    plan: about.plan,
    ...(about.execution ? { execution: about.execution } : {}),
    windows: {
      ...about.windows,
      note: 'warm-up requests are recorded with phase "warmup" and not counted; no request is sent after the measurement window closes',
    },
  });
}

/** The summary as saved (and printed with --json): the server's metrics beside the run's. */
export function savedSummary(
  summary: RunSummary,
  serverMetrics: ServerMetricsSummary | undefined,
): RunSummary & { serverMetrics?: ServerMetricsSummary } {
  return serverMetrics ? { ...summary, serverMetrics } : summary;
}

export function writeSummary(
  dir: string,
  summary: RunSummary,
  serverMetrics: ServerMetricsSummary | undefined,
): void {
  writeJson(resultPath(dir, 'summary'), savedSummary(summary, serverMetrics));
}

/** scenarios.json in the parent folder of several scenarios' runs: one row each. */
export function writeScenarios(root: string, rows: readonly object[]): void {
  writeJson(resultPath(root, 'scenarios'), { scenarios: rows });
}
