/**
 * Shard run directories (`run --shard i/N`, on several machines or pods) joined into one run.
 * The summary is computed again from every shard's raw records, on one timeline, with the whole
 * plan's load, so its metrics are exactly those of one run that sent all the requests; client
 * health keeps every engine thread's verdict.
 */
import { existsSync, mkdirSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import type { LoadSpec } from '../load.js';
import type { SloCondition } from '../metrics/slo.js';
import { warning } from '../metrics/warnings.js';
import {
  type ClientHealthMeasurements,
  RECORD_TIME_FIELDS,
  type RequestRecord,
} from '../record.js';
import { JsonlWriter, readClientHealth, writeClientHealth } from './jsonl.js';
import { hasResult, RESULT_FILES, resultPath, walkResultsTree } from './layout.js';
import { readManifest, readSummary, type SavedSummary } from './reader.js';
import { newId, writeManifest, writeSummary } from './runFiles.js';
import { RunViewBuilder, streamRecords } from './runView.js';
import type { Manifest } from './schemas.js';

export interface ShardRun {
  dir: string;
  manifest: Manifest & {
    startedAt: string;
    plan: Record<string, unknown> & { load: LoadSpec; slo?: SloCondition[] };
  };
  summary: SavedSummary | undefined;
  startedAtMs: number;
}

/**
 * Plan fields that differ between the shards of one plan by design. Each shard draws its own
 * prompt salt: their request ids are disjoint, so their prompts are distinct all the same. How
 * a shard stores its records (`--records-format`) changes nothing measured.
 */
const PER_SHARD = ['shard', 'out', 'workers', 'label', 'startAt', 'promptSalt', 'recordsFormat'];

/** What keeps the shards from being one run (empty when nothing). */
export function checkShards(shards: ShardRun[], expected: number | undefined): string[] {
  const problems: string[] = [];
  const counts = new Set(shards.map((s) => s.manifest.execution?.shard?.count));
  const unsharded = shards.filter((s) => !s.manifest.execution?.shard);
  if (unsharded.length > 0) {
    problems.push(
      `${unsharded.map((s) => s.dir).join(', ')}: not a shard (run without --shard); merging whole runs counts their requests twice over`,
    );
  }
  const count = expected ?? [...counts][0];
  if (counts.size > 1)
    problems.push(`the shards are of different splits (${[...counts].join(', ')})`);
  if (count !== undefined) {
    const seen = new Map<number, string>();
    for (const s of shards) {
      const index = s.manifest.execution?.shard?.index;
      if (index === undefined) continue;
      const other = seen.get(index);
      if (other) problems.push(`shard ${index} appears twice: ${other} and ${s.dir}`);
      seen.set(index, s.dir);
    }
    const missing = Array.from({ length: count }, (_, i) => i).filter((i) => !seen.has(i));
    if (missing.length > 0) problems.push(`missing shard ${missing.join(', ')} of ${count}`);
  }
  const base = JSON.stringify(withoutKeys(shards[0].manifest.plan, PER_SHARD));
  for (const s of shards.slice(1)) {
    const plan = withoutKeys(s.manifest.plan, PER_SHARD);
    if (JSON.stringify(plan) !== base) {
      const keys = Object.keys({ ...plan, ...shards[0].manifest.plan }).filter(
        (k) =>
          !PER_SHARD.includes(k) &&
          JSON.stringify(plan[k]) !== JSON.stringify(shards[0].manifest.plan[k]),
      );
      problems.push(`${s.dir} ran another plan than ${shards[0].dir} (${keys.join(', ')} differ)`);
    }
  }
  return problems;
}

/**
 * The shard runs under `dirs` (each a run directory, or a directory of them), waiting up to
 * `waitS` seconds until `expected` of them have finished (their summary.json is written last).
 * `unfinished` are those left out.
 */
export async function waitForShards(
  dirs: string[],
  expected: number | undefined,
  waitS: number,
  out: string,
): Promise<{ finished: string[]; unfinished: string[]; skipped: string[] }> {
  const deadline = Date.now() + waitS * 1000;
  for (;;) {
    // The merged run may sit among the shards (merge --out results/merged results).
    const found = findShardDirs(dirs);
    const runs = found.runs.filter((d) => resolve(d) !== resolve(out));
    const finished = runs.filter((d) => hasResult(d, 'summary'));
    const enough = expected === undefined ? finished.length > 0 : finished.length >= expected;
    if ((enough && finished.length === runs.length) || Date.now() >= deadline) {
      if (finished.length === 0) {
        throw new Error(
          `no finished run (${RESULT_FILES.records} and ${RESULT_FILES.summary}) in ${dirs.join(', ')}${waitS > 0 ? ` after ${waitS} s` : ''}`,
        );
      }
      return {
        finished,
        unfinished: runs.filter((d) => !finished.includes(d)),
        skipped: found.skipped,
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

/**
 * Run directories among `dirs` and, for a directory that is not one, its subdirectories, each
 * once by its real path (layout.ts walkResultsTree): a link to nothing is said, not thrown, and
 * a second name for one shard would count its records twice.
 */
function findShardDirs(dirs: string[]): { runs: string[]; skipped: string[] } {
  const runs: string[] = [];
  const skipped: string[] = [];
  for (const dir of dirs) {
    if (!existsSync(dir)) continue;
    const tree = walkResultsTree(
      dir,
      (d) => hasResult(d, 'manifest'),
      hasResult(dir, 'manifest') ? 0 : 1,
    );
    runs.push(...tree.dirs.sort(byNumber));
    skipped.push(...tree.skipped);
  }
  const seen = new Set<string>();
  return {
    runs: runs.filter((d) => {
      const real = realpathSync(d);
      if (seen.has(real)) {
        skipped.push(`${d} is a shard named before (a link to it): read once`);
        return false;
      }
      seen.add(real);
      return true;
    }),
    skipped,
  };
}

export function readShard(dir: string): ShardRun {
  const manifest = readManifest(dir) as ShardRun['manifest'];
  const startedAtMs = Date.parse(manifest.startedAt);
  if (!manifest.plan?.load || Number.isNaN(startedAtMs)) {
    throw new Error(`${resultPath(dir, 'manifest')} does not say what load ran or when it started`);
  }
  return { dir, manifest, summary: readSummary(dir), startedAtMs };
}

/**
 * Makes `out` ready for a merge; throws when it holds a finished run. A merge cut short (a
 * restarted Kubernetes pod) left records without a summary, or its temporary records file:
 * they are redone.
 */
export function prepareMergeDir(out: string): void {
  if (hasResult(out, 'summary')) {
    throw new Error(`${out} already holds a run; choose another --out`);
  }
  rmSync(resultPath(out, 'records'), { force: true });
  rmSync(partialRecordsPath(out), { force: true });
  mkdirSync(out, { recursive: true });
}

/** Where the merged records are written before they are whole (then renamed). */
const partialRecordsPath = (out: string) => `${resultPath(out, 'records')}.partial`;

/** What a shard's records file had skipped as damaged (merge, and the merged manifest). */
export interface ShardDamage {
  dir: string;
  /** Lines skipped (torn, not a record, too long, in a damaged gzip member). */
  lines: number;
  /** Damaged stretches of a gzip stream, a cut last member included. */
  gzipStretches: number;
}

export interface MergeOptions {
  /** Says each damaged shard's records once (the reader's sentence). */
  onProblem?: (message: string) => void;
}

/**
 * Records of every shard into `out/records.jsonl` on the earliest shard's clock (shards started
 * on one --start-at share it already; others are shifted by their wall-clock start difference),
 * summarised as they stream by with the whole plan's load and SLO. Writes the merged manifest,
 * client health and, last (it marks the run finished), the summary.
 *
 * The records go to a temporary file renamed once whole, so a merge that fails or is killed
 * never leaves a `records.jsonl` that looks like a merged run. A shard whose records are damaged
 * (ReadDamage: lines or gzip stretches skipped) is merged as every reader reads it: each
 * complete record kept, the damage said once per file, and carried, so the merged run never
 * hides it: a `records_damaged` warning in its summary and each shard's `damaged` count in its
 * manifest.
 */
export async function mergeShards(
  shards: ShardRun[],
  out: string,
  options: MergeOptions = {},
): Promise<SavedSummary> {
  const originMs = Math.min(...shards.map((s) => s.startedAtMs));
  const first = shards[0].manifest;
  const partial = partialRecordsPath(out);
  const writer = new JsonlWriter<RequestRecord>(partial, false);
  // One pass through the read model: each record shifted, written, then summarised.
  const view = new RunViewBuilder({
    summary: { load: first.plan.load, ...(first.plan.slo ? { slo: first.plan.slo } : {}) },
    onRecord: (record) => writer.write(record),
  });
  const threads: ClientHealthMeasurements[] = [];
  const damaged = new Map<string, ShardDamage>();
  let healthComplete = true;
  let interrupted = false;
  let whole = false;
  try {
    for (const shard of shards) {
      const shiftMs = shard.startedAtMs - originMs;
      await streamRecords(
        resultPath(shard.dir, 'records'),
        {
          add(record) {
            if (shiftMs !== 0) shiftRecord(record, shiftMs);
            view.add(record);
          },
          damaged(damage) {
            view.damaged(damage);
            damaged.set(shard.dir, {
              dir: shard.dir,
              lines: damage.skippedLines,
              gzipStretches: damage.gzipStretches + (damage.gzipCut ? 1 : 0),
            });
          },
        },
        options.onProblem,
      );
      const health = readClientHealth(shard.dir);
      if (health) threads.push(...health);
      else healthComplete = false;
      interrupted ||= shard.summary?.interrupted === true;
    }
    writer.close();
    renameSync(partial, resultPath(out, 'records'));
    whole = true;
  } finally {
    writer.close();
    if (!whole) rmSync(partial, { force: true });
  }
  const summary = view.summary({
    ...(healthComplete && threads.length > 0 ? { clientHealth: threads } : {}),
    interrupted,
  }) as SavedSummary;
  // Every shard scraped the same server: its metrics are the server's, not a shard's share.
  const scraped = shards.find((s) => s.summary?.serverMetrics !== undefined);
  if (scraped) summary.serverMetrics = scraped.summary?.serverMetrics;
  const spreadS = (Math.max(...shards.map((s) => s.startedAtMs)) - originMs) / 1000;
  if (spreadS > 1) {
    summary.warnings.push(warning('shards_not_aligned', { spreadS }));
  }
  const header = { id: newId(), kind: 'merge' as const, command: 'merge' };
  writeManifest(
    out,
    { ...header, endedAt: new Date().toISOString() },
    {
      startedAt: new Date(originMs).toISOString(),
      server: first.server,
      model: first.model,
      workload: first.workload,
      plan: withoutKeys(first.plan, ['shard']),
      execution: {
        shards: shards.length,
        // Engine threads: an in-thread shard (workers 0) sends from its one thread.
        workers: shards.reduce((n, s) => n + Math.max(1, s.manifest.execution?.workers ?? 1), 0),
      },
      merged: shards.map((s) => {
        const damage = damaged.get(s.dir);
        return {
          dir: s.dir,
          shard: s.manifest.execution?.shard,
          startedAt: s.manifest.startedAt,
          shiftMs: s.startedAtMs - originMs,
          host: s.manifest.host,
          ...(damage
            ? { damaged: { lines: damage.lines, gzipStretches: damage.gzipStretches } }
            : {}),
        };
      }),
    },
  );
  if (healthComplete && threads.length > 0) writeClientHealth(out, threads);
  writeSummary(out, summary, undefined);
  return summary;
}

/** Moves a record's times `shiftMs` later, keeping whole microseconds. */
function shiftRecord(record: RequestRecord, shiftMs: number): void {
  for (const key of RECORD_TIME_FIELDS) {
    const value = record[key];
    if (value !== undefined) record[key] = Math.round((value + shiftMs) * 1000) / 1000;
  }
}

/** "shard-10" after "shard-9". */
function byNumber(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

function withoutKeys(value: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([k]) => !keys.includes(k)));
}
