import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import type { LoadSpec, ShardIndex } from '../load.js';
import type { SloCondition } from '../metrics/slo.js';
import { type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import type { ClientHealthMeasurements, RequestRecord } from '../record.js';
import { renderTerminalSummary } from '../report/terminal.js';
import { JsonlWriter, readClientHealth, readRecords, writeClientHealth } from '../results/jsonl.js';
import { writeJson } from '../results/layout.js';
import { VERSION } from '../version.js';
import { gate, readJson, thresholdOption } from './report.js';
import { writeHtmlReport } from './run.js';

/**
 * `infergauge merge`: shard run directories (`run --shard i/N`, on several machines or pods)
 * joined into one run. The summary is computed again from every shard's raw records, on one
 * timeline, with the whole plan's load, so its metrics are exactly those of one run that sent
 * all the requests; client health keeps every engine thread's verdict.
 */

interface ShardRun {
  dir: string;
  manifest: {
    startedAt: string;
    plan: Record<string, unknown> & { load: LoadSpec; slo?: SloCondition[] };
    execution?: { shard?: ShardIndex; workers?: number };
    server?: unknown;
    model?: string;
    workload?: unknown;
    host?: unknown;
  };
  summary: (RunSummary & { serverMetrics?: unknown }) | undefined;
  startedAtMs: number;
}

/** Plan fields that differ between the shards of one plan by design. */
const PER_SHARD = ['shard', 'out', 'workers', 'label', 'startAt'];

export function mergeCommand() {
  return new Command('merge')
    .description(
      'Join shard runs (run --shard i/N) into one run: records on one timeline, metrics from all the raw records',
    )
    .argument(
      '<dirs...>',
      'shard run directories, or one directory holding them (e.g. results/shard-0 results/shard-1, or results)',
    )
    .option('--out <dir>', 'where the merged run goes (default: <first dir>-merged)')
    .option('--shards <n>', 'the number of shards to expect (default: the count the shards record)')
    .option(
      '--wait <s>',
      'wait up to this many seconds for every shard to finish (its summary.json), e.g. in a follow-up Kubernetes Job',
    )
    .option('--force', 'merge even when shards are missing or their plans differ')
    .option('--json', 'print the merged summary JSON instead of the table')
    .option('--no-html', 'do not write report.html')
    .addOption(thresholdOption())
    .action(async (dirs, options) => {
      process.exitCode = await merge(dirs, options);
    });
}

async function merge(
  dirs: string[],
  options: {
    out?: string;
    shards?: string;
    wait?: string;
    force?: true;
    json?: true;
    html: boolean;
    threshold?: string[];
  },
): Promise<number> {
  const expected = options.shards !== undefined ? Number(options.shards) : undefined;
  const waitS = options.wait !== undefined ? Number(options.wait) : 0;
  const problems: string[] = [];
  if (expected !== undefined && !(Number.isInteger(expected) && expected >= 1)) {
    problems.push(`--shards must be a whole number >= 1 (got "${options.shards}")`);
  }
  if (!(Number.isFinite(waitS) && waitS >= 0)) {
    problems.push(`--wait must be a number of seconds >= 0 (got "${options.wait}")`);
  }
  if (problems.length > 0) {
    process.stderr.write(`infergauge merge: invalid options\n  - ${problems.join('\n  - ')}\n`);
    return EXIT.invalidOptions;
  }
  const out = options.out ?? `${dirs[0].replace(/\/+$/, '')}-merged`;
  let shards: ShardRun[];
  try {
    shards = await waitForShards(dirs, expected, waitS, resolve(out));
  } catch (err) {
    process.stderr.write(`infergauge merge: ${(err as Error).message}\n`);
    return EXIT.failure;
  }
  const found = checkShards(shards, expected);
  if (found.length > 0) {
    const lead = options.force ? 'warning' : 'cannot merge';
    process.stderr.write(`infergauge merge: ${lead}:\n  - ${found.join('\n  - ')}\n`);
    if (!options.force) {
      process.stderr.write('  (--force merges what there is)\n');
      return EXIT.failure;
    }
  }
  if (existsSync(join(out, 'summary.json'))) {
    process.stderr.write(`infergauge merge: ${out} already holds a run; choose another --out\n`);
    return EXIT.failure;
  }
  // A merge cut short (a restarted Kubernetes pod) left records without a summary: redo it.
  rmSync(join(out, 'records.jsonl'), { force: true });
  mkdirSync(out, { recursive: true });
  const summary = await mergeShards(shards, out);
  writeJson(join(out, 'summary.json'), summary);
  if (options.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else {
    const first = shards[0].manifest;
    process.stdout.write(
      `${renderTerminalSummary(summary, {
        color: process.stdout.isTTY === true,
        model: first.model ?? '',
        endpoint: String(first.plan.endpoint ?? ''),
        outDir: out,
      })}\nMerged ${shards.length} shards: ${shards.map((s) => s.dir).join(', ')}\n`,
    );
  }
  if (options.html) await writeHtmlReport(out);
  return gate('merge', options.threshold, [{ name: out, summary }]);
}

/**
 * Records of every shard into `out/records.jsonl` on the earliest shard's clock (shards started
 * on one --start-at share it already; others are shifted by their wall-clock start difference),
 * summarised as they stream by with the whole plan's load and SLO.
 */
async function mergeShards(
  shards: ShardRun[],
  out: string,
): Promise<RunSummary & { serverMetrics?: unknown }> {
  const originMs = Math.min(...shards.map((s) => s.startedAtMs));
  const first = shards[0].manifest;
  const builder = new SummaryBuilder({
    load: first.plan.load,
    ...(first.plan.slo ? { slo: first.plan.slo } : {}),
  });
  const writer = new JsonlWriter<RequestRecord>(join(out, 'records.jsonl'));
  const threads: ClientHealthMeasurements[] = [];
  let healthComplete = true;
  let interrupted = false;
  try {
    for (const shard of shards) {
      const shiftMs = shard.startedAtMs - originMs;
      for await (const record of readRecords(join(shard.dir, 'records.jsonl'))) {
        if (shiftMs !== 0) shiftRecord(record, shiftMs);
        writer.write(record);
        builder.add(record);
      }
      const health = readClientHealth(shard.dir);
      if (health) threads.push(...health);
      else healthComplete = false;
      interrupted ||= shard.summary?.interrupted === true;
    }
  } finally {
    writer.close();
  }
  const summary: RunSummary & { serverMetrics?: unknown } = builder.build({
    ...(healthComplete && threads.length > 0 ? { clientHealth: threads } : {}),
    interrupted,
  });
  // Every shard scraped the same server: its metrics are the server's, not a shard's share.
  const scraped = shards.find((s) => s.summary?.serverMetrics !== undefined);
  if (scraped) summary.serverMetrics = scraped.summary?.serverMetrics;
  const spreadS = (Math.max(...shards.map((s) => s.startedAtMs)) - originMs) / 1000;
  if (spreadS > 1) {
    summary.warnings.push({
      code: 'shards_not_aligned',
      message: `the shards started up to ${spreadS.toFixed(1)} s apart (no shared --start-at): their loads overlapped only in part, and the merged load is not the plan's`,
    });
  }
  writeJson(join(out, 'manifest.json'), {
    schemaVersion: 1,
    tool: { name: 'infergauge', version: VERSION },
    startedAt: new Date(originMs).toISOString(),
    server: first.server,
    model: first.model,
    workload: first.workload,
    plan: withoutKeys(first.plan, ['shard']),
    execution: {
      shards: shards.length,
      workers: shards.reduce((n, s) => n + (s.manifest.execution?.workers ?? 1), 0),
    },
    merged: shards.map((s) => ({
      dir: s.dir,
      shard: s.manifest.execution?.shard,
      startedAt: s.manifest.startedAt,
      shiftMs: s.startedAtMs - originMs,
      host: s.manifest.host,
    })),
  });
  if (healthComplete && threads.length > 0) writeClientHealth(out, threads);
  return summary;
}

/** What keeps the shards from being one run (empty when nothing). */
function checkShards(shards: ShardRun[], expected: number | undefined): string[] {
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
 */
async function waitForShards(
  dirs: string[],
  expected: number | undefined,
  waitS: number,
  out: string,
): Promise<ShardRun[]> {
  const deadline = Date.now() + waitS * 1000;
  for (;;) {
    // The merged run may sit among the shards (merge --out results/merged results).
    const runs = findRuns(dirs).filter((d) => resolve(d) !== out);
    const finished = runs.filter((d) => existsSync(join(d, 'summary.json')));
    const enough = expected === undefined ? finished.length > 0 : finished.length >= expected;
    if ((enough && finished.length === runs.length) || Date.now() >= deadline) {
      if (finished.length === 0) {
        throw new Error(
          `no finished run (records.jsonl and summary.json) in ${dirs.join(', ')}${waitS > 0 ? ` after ${waitS} s` : ''}`,
        );
      }
      if (finished.length < runs.length) {
        const unfinished = runs.filter((d) => !finished.includes(d));
        process.stderr.write(
          `infergauge merge: not finished (no summary.json), left out: ${unfinished.join(', ')}\n`,
        );
      }
      return finished.map(readShard);
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

/** Run directories among `dirs` and, for a directory that is not one, its subdirectories. */
function findRuns(dirs: string[]): string[] {
  const runs: string[] = [];
  for (const dir of dirs) {
    if (!existsSync(dir)) continue;
    if (existsSync(join(dir, 'manifest.json'))) {
      runs.push(dir);
      continue;
    }
    for (const entry of readdirSync(dir).sort(byNumber)) {
      const sub = join(dir, entry);
      if (statSync(sub).isDirectory() && existsSync(join(sub, 'manifest.json'))) runs.push(sub);
    }
  }
  return runs;
}

function readShard(dir: string): ShardRun {
  const manifest = readJson(join(dir, 'manifest.json')) as ShardRun['manifest'];
  const startedAtMs = Date.parse(manifest.startedAt);
  if (!manifest.plan?.load || Number.isNaN(startedAtMs)) {
    throw new Error(`${dir}/manifest.json does not say what load ran or when it started`);
  }
  return {
    dir,
    manifest,
    summary: readJson(join(dir, 'summary.json')) as ShardRun['summary'],
    startedAtMs,
  };
}

const TIME_FIELDS = [
  'scheduledAt',
  'sentAt',
  'headersAt',
  'firstTokenAt',
  'firstContentAt',
  'lastTokenAt',
  'endAt',
] as const;

/** Moves a record's times `shiftMs` later, keeping whole microseconds. */
function shiftRecord(record: RequestRecord, shiftMs: number): void {
  for (const key of TIME_FIELDS) {
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
