import { createHash } from 'node:crypto';
import {
  existsSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { InfergaugeError } from '../errors.js';
import { jsonSyntaxProblem } from '../jsonText.js';
import type { RecordsFormat } from '../record.js';

/**
 * The run directory's layout: every file a run, sweep, probe, capacity search or merge writes,
 * by role. Readers and writers name files only through this table, so a file has one name.
 */
/** Where sessions save without --out (each in a folder of its own), and the history's default root. */
export const DEFAULT_RESULTS_ROOT = 'infergauge-results';

export const RESULT_FILES = {
  /** One JSON line per finished request, written as it finishes: the source of truth. */
  records: 'records.jsonl',
  /**
   * The same records gzip-compressed (`--records-format jsonl.gz`), one gzip member per write;
   * a run directory holds one of the two (find it with recordsPath).
   */
  recordsGz: 'records.jsonl.gz',
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
  /** `infergauge size`: the deployments tried, ranked. */
  size: 'size.json',
  report: 'report.html',
  requestsCsv: 'requests.csv',
  runsCsv: 'runs.csv',
  vllmBench: 'vllm-bench-result.json',
  /** `report --compat llm-d`: llm-d's Benchmark Report, named as llm-d's harness globs them. */
  llmdReport: 'benchmark_report_v0.2,_infergauge.yaml',
  /** Tags added to or removed from a run after it ran (`infergauge history tag`). */
  tags: 'tags.json',
} as const;

export type ResultFile = keyof typeof RESULT_FILES;

/** The kinds of results directory, each marked by its file, in the order they are looked for. */
export const RESULT_KINDS = ['sweep', 'probe', 'capacity', 'size', 'scenarios', 'run'] as const;
export type ResultKind = (typeof RESULT_KINDS)[number];
const MARKER: Record<ResultKind, ResultFile> = {
  sweep: 'sweep',
  probe: 'probe',
  capacity: 'capacity',
  size: 'size',
  scenarios: 'scenarios',
  run: 'summary',
};

/** The marker files' names, in the order they are looked for. */
export const MARKER_NAMES = RESULT_KINDS.map((kind) => RESULT_FILES[MARKER[kind]]);

/** `dir`'s file of a role. */
export function resultPath(dir: string, file: ResultFile): string {
  return join(dir, RESULT_FILES[file]);
}

/** Whether `dir` holds its file of a role; records in either format count as records. */
export function hasResult(dir: string, file: ResultFile): boolean {
  if (file === 'records') return existsSync(recordsPath(dir));
  return existsSync(resultPath(dir, file));
}

/**
 * `dir`'s records file. With a format, that format's file (to write). Without, the one `dir`
 * holds, `records.jsonl` or `records.jsonl.gz` (to read); `records.jsonl` when it holds neither,
 * so that a message about a missing file names the usual one.
 */
export function recordsPath(dir: string, format?: RecordsFormat): string {
  if (format !== undefined) return resultPath(dir, format === 'jsonl' ? 'records' : 'recordsGz');
  const plain = resultPath(dir, 'records');
  if (existsSync(plain)) return plain;
  const gz = resultPath(dir, 'recordsGz');
  return existsSync(gz) ? gz : plain;
}

/** The folders found under a results directory, and the entries passed over, each said. */
export interface ResultsTree {
  /** Folders for which `accept` held, in name order, each read once. */
  dirs: string[];
  /** One sentence per entry passed over: the path, why, and what was done. */
  skipped: string[];
}

/**
 * The folders at or under `dir`, down to `depth` levels, for which `accept` holds (a run's,
 * holding records). Each folder is read once by its real path: a link back up the tree (a
 * loop) or a second link to one folder once counted its runs twice. A link to nothing, a link
 * to itself and a folder that cannot be listed are passed over and said, not thrown.
 */
export function walkResultsTree(
  dir: string,
  accept: (dir: string) => boolean,
  depth = 3,
): ResultsTree {
  const dirs: string[] = [];
  const skipped: string[] = [];
  const seen = new Map<string, string>();
  const walk = (d: string, left: number) => {
    let real: string;
    try {
      real = realpathSync(d);
    } catch (err) {
      skipped.push(`${d}: ${linkProblem(err)}: skipped`);
      return;
    }
    const first = seen.get(real);
    if (first !== undefined) {
      skipped.push(`${d} is ${first} again (a link to it, or a loop): read once`);
      return;
    }
    seen.set(real, d);
    if (accept(d)) dirs.push(d);
    if (left === 0) return;
    let entries: string[];
    try {
      entries = readdirSync(d).sort();
    } catch (err) {
      skipped.push(`${d}: ${linkProblem(err)}: skipped`);
      return;
    }
    for (const entry of entries) {
      const sub = join(d, entry);
      let isDir: boolean;
      try {
        // Follows a link: a link to a folder is walked (by its real path, above).
        isDir = statSync(sub).isDirectory();
      } catch (err) {
        skipped.push(`${sub}: ${linkProblem(err)}: skipped`);
        continue;
      }
      if (isDir) walk(sub, left - 1);
    }
  };
  walk(dir, depth);
  return { dirs, skipped };
}

/** Why a path cannot be followed, in words (the code kept for the rest). */
function linkProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'a link to nothing (its target does not exist)';
  if (code === 'ELOOP') return 'a link that leads back to itself';
  return `cannot be read (${code ?? (err as Error).message})`;
}

/** The kind of results directory `dir` is, from the files present; undefined when none. */
export function resultKind(dir: string): ResultKind | undefined {
  return RESULT_KINDS.find((kind) => hasResult(dir, MARKER[kind]));
}

/** The kind a results file marks (`sweep.json` a sweep), undefined for any other name. */
export function kindOfFileName(name: string): ResultKind | undefined {
  return RESULT_KINDS.find((kind) => RESULT_FILES[MARKER[kind]] === name);
}

/**
 * The digest of the text this process last wrote to each JSON file (by absolute path): a file
 * read back with those bytes is the value its typed writer made, and needs no schema check.
 */
const ownWrites = new Map<string, string>();
const digest = (text: string) => createHash('sha1').update(text).digest('base64');

export function writeJson(path: string, value: unknown): void {
  const text = `${JSON.stringify(value, null, 2)}\n`;
  writeFileSync(path, text);
  ownWrites.set(resolve(path), digest(text));
}

/** Writes `dir`'s file of a role as indented JSON. */
export function writeResult(dir: string, file: ResultFile, value: unknown): void {
  writeJson(resultPath(dir, file), value);
}

/** A results file that exists but cannot be read or parsed; `reason` says why. */
export class ResultFileError extends InfergaugeError {
  constructor(
    readonly path: string,
    readonly reason: string,
    message = `${path} is not valid JSON: ${reason}`,
  ) {
    super(message, 'IG_RESULTS_FILE');
  }
}

/**
 * A JSON file's value; undefined when there is no such file. Throws ResultFileError when it
 * cannot be read or is not JSON.
 */
export function readJson(path: string): unknown {
  return readOwnJson(path)?.value;
}

/**
 * readJson, and whether the file holds the very bytes this process last wrote there
 * (writeJson): a run reads its own summary and manifest back for report.html and the history.
 */
export function readOwnJson(path: string): { value: unknown; ownWrite: boolean } | undefined {
  if (!existsSync(path)) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ResultFileError(
      path,
      (err as Error).message,
      `cannot read ${path}: ${(err as Error).message}`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    const problem = jsonSyntaxProblem(err, text);
    throw new ResultFileError(path, problem, `${path} is ${problem}`);
  }
  const own = ownWrites.get(resolve(path));
  return { value, ownWrite: own !== undefined && own === digest(text) };
}
