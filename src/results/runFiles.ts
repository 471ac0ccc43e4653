/**
 * The writers of a run directory's own files: the manifest (what ran), the summary and, for
 * several scenarios, the table of them. Run, sweep and probe points write through these.
 */

import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import { basename, join } from 'node:path';
import type { RunSummary } from '../metrics/summary.js';
import { validityOf } from '../metrics/validity.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { VERSION } from '../version.js';
import { hasResult, recordsPath, resultPath, writeJson } from './layout.js';

/** Creates a run directory; refuses one that already holds a run. */
export function openRunDir(dir: string): void {
  if (hasResult(dir, 'records')) {
    throw new Error(
      `${dir} already holds a run (${basename(recordsPath(dir))}); choose another --out`,
    );
  }
  mkdirSync(dir, { recursive: true });
}

/**
 * Creates and returns a new directory `parent/name`, or `name-2`, `name-3`, ... when that is
 * taken: default names are made to the second, and a loop of runs (or two processes started in
 * the same second) must never fail for its own naming. mkdir without `recursive` fails on an
 * existing directory, so the claim is atomic: of two racing processes each gets its own.
 */
export function claimNewDir(parent: string, name: string): string {
  mkdirSync(parent, { recursive: true });
  for (let n = 1; ; n++) {
    const dir = join(parent, n === 1 ? name : `${name}-${n}`);
    try {
      mkdirSync(dir);
      return dir;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

/** A fresh id for a results directory: 12 hex digits, unique enough to join files across runs. */
export function newId(): string {
  return randomBytes(6).toString('hex');
}

/** What a results directory is: its manifest's `kind`. */
export type ResultKindName =
  | 'run'
  | 'scenarios'
  | 'sweep'
  | 'sweep-point'
  | 'probe'
  | 'probe-point'
  | 'capacity'
  | 'capacity-step'
  | 'size'
  | 'merge';

/**
 * The manifest's layout version. 2 added `id`, `kind`, `command`, `parent` and `endedAt`, and
 * a manifest in every results directory (sweep, probe and capacity roots and points, merges);
 * readers take version 1 as a run's (results/reader.ts readManifest).
 */
export const MANIFEST_SCHEMA_VERSION = 2;

/** What a manifest says about one point (a run, a sweep point, a probe point, a capacity step). */
export interface ManifestAbout {
  /** The run clock's origin (0 ms in the records). */
  startedAt: string;
  /** A point's target and workload (a session's root manifest has its points instead). */
  server?: Record<string, unknown>;
  model?: string;
  workload?: Record<string, unknown>;
  /** The effective plan, secrets redacted. */
  plan: unknown;
  /** The point's own load (a sweep's level, a probe's batch); a run's is the plan's. */
  load?: unknown;
  scenario?: string;
  execution?: Record<string, unknown>;
  windows?: {
    warmupRequests: number;
    measuredRequests: number | null;
    /** Set in a session scenario: warm-up and measured counts are sessions, not requests. */
    unit?: 'sessions';
    measuredDurationS: number | null;
  };
  /** Anything else the kind needs (a merge's shards). */
  [more: string]: unknown;
}

/** Who wrote a results directory, and where it belongs. */
export interface ManifestHeader {
  id: string;
  kind: ResultKindName;
  /** The command as typed: `run`, `sweep`, `probe decode`, `capacity`, `merge`. */
  command: string;
  /** The session (sweep, probe, capacity, several scenarios) this directory is a point of. */
  parent?: { id: string; kind: ResultKindName; dir: string };
  /** Set once the directory is complete; a manifest without it belongs to a cut-short run. */
  endedAt?: string;
}

/**
 * manifest.json: what ran, where, when (the clock's origin) and how, with the tool, the host
 * and the layout version. The one manifest writer: every results directory's goes through it.
 */
export function writeManifest(dir: string, header: ManifestHeader, about: ManifestAbout): void {
  const { windows, ...rest } = about;
  writeJson(resultPath(dir, 'manifest'), {
    schemaVersion: MANIFEST_SCHEMA_VERSION,
    id: header.id,
    kind: header.kind,
    command: header.command,
    ...(header.parent ? { parent: header.parent } : {}),
    tool: { name: 'infergauge', version: VERSION },
    ...rest,
    ...(header.endedAt ? { endedAt: header.endedAt } : {}),
    node: process.version,
    host: {
      hostname: hostname(),
      platform: process.platform,
      arch: process.arch,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model,
    },
    ...(windows
      ? {
          windows: {
            ...windows,
            note: 'warm-up requests are recorded with phase "warmup" and not counted; no request is sent after the measurement window closes',
          },
        }
      : {}),
  });
}

/** The summary as saved (and printed with --json): the server's metrics beside the run's. */
export function savedSummary(
  summary: RunSummary,
  serverMetrics: ServerMetricsSummary | undefined,
): RunSummary & { serverMetrics?: ServerMetricsSummary } {
  // The verdict of the warnings as saved (merge and report add warnings of their own).
  const judged = { ...summary, validity: validityOf(summary.warnings) };
  return serverMetrics ? { ...judged, serverMetrics } : judged;
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
