import { closeSync, existsSync, openSync, readSync, writeSync } from 'node:fs';
import { basename } from 'node:path';
import { gzipSync } from 'node:zlib';
import { jsonSyntaxProblem } from '../jsonText.js';
import {
  type ClientHealthMeasurements,
  type RecordsFormat,
  type RequestRecord,
  recordProblem,
} from '../record.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import { hasResult, readJson, recordsPath, resultPath, writeResult } from './layout.js';
import { CUT_LINE, type LineDamage, MAX_RECORD_LINE_BYTES, readLines } from './lineReader.js';

/**
 * Next to the records, each engine thread's own health measurements, kept raw so that `merge`
 * judges the threads of every shard as `run` judges its workers.
 */
export function writeClientHealth(dir: string, threads: ClientHealthMeasurements[]): void {
  writeResult(dir, 'clientHealth', { threads });
}

/** A run directory's thread measurements; undefined when it has none (an older run). */
export function readClientHealth(dir: string): ClientHealthMeasurements[] | undefined {
  const saved = readJson(resultPath(dir, 'clientHealth')) as
    | { threads: ClientHealthMeasurements[] }
    | undefined;
  return saved?.threads;
}

/**
 * Appends JSON lines (records to `records.jsonl`, one per finished request; telemetry
 * snapshots), each written through to the kernel at once (a synchronous write on an open
 * descriptor, a few microseconds), so a crash or Ctrl-C loses nothing already finished.
 *
 * With `gzip` (`records.jsonl.gz`, `--records-format jsonl.gz`) each write, one record or one
 * worker thread's batch, is compressed on its own into a complete gzip member and appended with
 * one synchronous write: the file is always a valid multi-member gzip stream (`zcat` reads it),
 * and a crash loses at most the write in progress (readJsonLines reports its cut member as one
 * bad line). Why one member a write, measured on records of 128 output tokens (plain about
 * 1,570-1,590 bytes a record):
 * - one member a record (`--simulate`, and `--workers 0`): 430 bytes a record from the virtual
 *   time engine (3.7x), 533 from the simulator in real time, whose event gaps jitter (2.9x),
 *   693 with a synthetic server's jitter of 1.5 ms and random token lengths (2.3x): the digits
 *   of `events.dtUs` are most of what is left. Some 30-65 us a record against 15 for the plain
 *   line: the deflate state's set-up dominates, so level, window and strategy barely matter.
 * - one member a worker batch (up to 64 records; fewer at a low rate): 320 bytes a real-time
 *   record (4.9x) at level 1, 5x faster than the default level for a member 15% larger.
 * - not chosen: one deflate stream kept open and flushed (Z_SYNC_FLUSH) after each write
 *   compresses like a batch for every record, but the file is a valid gzip stream only once
 *   closed (a killed run's file always ends in an error), and Node flushes such a stream
 *   synchronously only through an internal method. gzip members cannot share a preset
 *   dictionary. Members of one write each already halve the file.
 */
export class JsonlWriter<T> {
  private fd: number | undefined;
  written = 0;

  /** `gzip`: each write as its own gzip member; by default when the name ends in `.gz`. */
  constructor(
    readonly path: string,
    readonly gzip = path.endsWith('.gz'),
  ) {
    // 'wx': never append to (or overwrite) an earlier run's file.
    this.fd = openSync(path, 'wx');
  }

  write(value: T): void {
    this.append(`${JSON.stringify(value)}\n`, 1);
    this.written++;
  }

  /** Appends `count` lines already serialised (a worker thread's batch, ending in a newline). */
  writeLines(text: string, count: number): void {
    this.append(text, count);
    this.written += count;
  }

  private append(text: string, count: number): void {
    if (this.fd === undefined) throw new Error(`${this.path} is closed`);
    if (!this.gzip) {
      writeSync(this.fd, text);
      return;
    }
    // One record: the deflate state's set-up costs more than the level. A batch: level 1 is
    // five times faster than the default 6 for a member 15% larger.
    const member = gzipSync(text, count > 1 ? { level: 1 } : {});
    // A member written in part and then another after it would leave a damaged member in the
    // middle of the file: a short write (a full disk) is finished or throws.
    for (let at = 0; at < member.length; ) at += writeSync(this.fd, member, at);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/**
 * A run directory's records writer in `format` (default plain `records.jsonl`). Refuses a
 * directory that already holds records in either format.
 */
export function openRecordsWriter(
  dir: string,
  format: RecordsFormat = 'jsonl',
): JsonlWriter<RequestRecord> {
  if (hasResult(dir, 'records')) {
    throw new Error(
      `${dir} already holds a run (${basename(recordsPath(dir))}); choose another --out`,
    );
  }
  return new JsonlWriter<RequestRecord>(recordsPath(dir, format));
}

/**
 * Reads a JSONL file line by line, plain or gzip-compressed (a `.gz` name or gzip's magic bytes;
 * any number of members), through results/lineReader.ts. Nothing in the file is thrown: what
 * cannot be used goes to `onBadLine` with its line number and is skipped, and every complete
 * line around it is read:
 * - a line that is not JSON (SyntaxError): cut short by a kill, garbled;
 * - a line cut by damage to the file after its start (CutLineError);
 * - a line that parses but that `problemOf` refuses (NotAValueError);
 * - a line longer than MAX_RECORD_LINE_BYTES, a damaged or cut gzip member, bytes between
 *   members that are none (DamagedDataError: its `damage` says which; its line number is the
 *   first line at or after it).
 * ReadDamage counts them by kind and says them in one sentence per file.
 */
export async function* readJsonLines<T>(
  path: string,
  onBadLine: (lineNumber: number, error: Error) => void = () => {},
  problemOf: (value: unknown) => string | undefined = () => undefined,
): AsyncGenerator<T> {
  let lineNumber = 0;
  const onDamage = (damage: LineDamage) => {
    // A line past the bound is a line of the file, skipped where it stood.
    if (damage.kind === 'too_long') lineNumber++;
    onBadLine(damage.line, new DamagedDataError(damage));
  };
  for await (const line of readLines(path, isGzipFile(path), onDamage)) {
    lineNumber++;
    if (line === CUT_LINE) {
      onBadLine(lineNumber, new CutLineError());
      continue;
    }
    if (line.length === 0) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      // V8's message quotes the line: a records file can be anything (a link to /etc/shadow),
      // so the problem is told by where the line breaks, never by what it holds.
      const why = jsonSyntaxProblem(err, line).replace(/^not valid JSON( at line 1,|:)? ?/, '');
      onBadLine(lineNumber, new SyntaxError(why.startsWith('column') ? `breaks at ${why}` : why));
      continue;
    }
    const problem = problemOf(value);
    if (problem === undefined) yield value as T;
    else onBadLine(lineNumber, new NotAValueError(problem));
  }
}

/** A line that is whole JSON but not what the file holds (readJsonLines' `problemOf`). */
export class NotAValueError extends Error {}

/** A line whose start was read and whose end was lost to damage after it. */
export class CutLineError extends Error {
  constructor() {
    super('cut by damage to the file after it');
  }
}

/** Damage to the file itself (lineReader.ts LineDamage): a line past the bound, gzip damage. */
export class DamagedDataError extends Error {
  constructor(readonly damage: LineDamage) {
    super(damage.message);
  }
}

const count = (n: number, one: string, many = `${one}s`) =>
  `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/**
 * What readJsonLines skipped in one file, counted by kind and said in one sentence that names
 * the file (docs/cli.md, "Damaged records"): the one damaged-input policy of every reader of
 * records (report, compare, merge, calibrate).
 */
export class ReadDamage {
  /** Lines that are not whole JSON: cut short by a kill, cut or garbled by damage. */
  notJson = 0;
  /** Lines that are JSON but no record. */
  notRecord = 0;
  /** Lines longer than MAX_RECORD_LINE_BYTES. */
  tooLong = 0;
  /** Damaged stretches of a gzip stream, their compressed bytes, the lines dropped with them. */
  gzipStretches = 0;
  gzipBytes = 0;
  gzipLines = 0;
  /** The gzip stream ends inside its last member (a run killed while writing). */
  gzipCut = false;
  /** The first problem, with where it was. */
  first: string | undefined;

  constructor(readonly file: string) {}

  /** readJsonLines' `onBadLine`. */
  readonly onBadLine = (line: number, err: Error): void => {
    let what: string;
    if (err instanceof DamagedDataError) {
      const { damage } = err;
      if (damage.kind === 'too_long') this.tooLong++;
      else if (damage.kind === 'gzip_cut') this.gzipCut = true;
      else {
        this.gzipStretches++;
        this.gzipBytes += damage.bytes ?? 0;
        this.gzipLines += damage.lines ?? 0;
      }
      what = damage.message;
    } else if (err instanceof NotAValueError) {
      this.notRecord++;
      what = `line ${line} is JSON but not a request record (${err.message}): skipped`;
    } else {
      this.notJson++;
      what = `line ${line} is not whole JSON (${err.message}): skipped`;
    }
    this.first ??= what;
  };

  /** Lines skipped: not JSON, not records, too long, dropped with a damaged gzip member. */
  get skippedLines(): number {
    return this.notJson + this.notRecord + this.tooLong + this.gzipLines;
  }

  get damaged(): boolean {
    return this.skippedLines > 0 || this.gzipStretches > 0 || this.gzipCut;
  }

  /** One sentence: what was skipped, and the first problem; undefined when nothing was. */
  message(): string | undefined {
    if (!this.damaged) return undefined;
    const n = (x: number) => x.toLocaleString('en-US');
    const kinds = [
      this.notJson > 0 ? `${n(this.notJson)} not whole JSON` : '',
      this.notRecord > 0 ? `${n(this.notRecord)} JSON but no request record` : '',
      this.tooLong > 0
        ? `${n(this.tooLong)} longer than ${Math.round(MAX_RECORD_LINE_BYTES / 2 ** 20)} MiB`
        : '',
      this.gzipLines > 0 ? `${n(this.gzipLines)} in gzip members that fail their checksum` : '',
    ].filter(Boolean);
    const parts = [
      this.skippedLines > 0
        ? `${count(this.skippedLines, 'line')} skipped (${kinds.join(', ')})`
        : '',
      this.gzipStretches > 0
        ? `${count(this.gzipStretches, 'damaged stretch', 'damaged stretches')} of its gzip stream skipped (${count(this.gzipBytes, 'byte')})`
        : '',
      this.gzipCut ? 'its gzip stream is cut short in its last member' : '',
    ].filter(Boolean);
    const killed =
      this.gzipCut || (this.notJson === 1 && this.skippedLines === 1 && this.gzipStretches === 0)
        ? ' (a run killed while writing leaves its last line cut)'
        : '';
    const problems =
      this.notJson + this.notRecord + this.tooLong + this.gzipStretches + (this.gzipCut ? 1 : 0);
    // One problem says itself; several are counted, and the first said.
    if (problems === 1) return `${this.file}: ${this.first}${killed}`;
    return `${this.file}: ${parts.join(' and ')}${killed}; the first: ${this.first}`;
  }
}

/** A `.gz` name, or a file that starts with gzip's magic bytes (no JSON line does). */
function isGzipFile(path: string): boolean {
  if (path.endsWith('.gz')) return true;
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const head = Buffer.alloc(2);
    return readSync(fd, head, 0, 2, 0) === 2 && head[0] === 0x1f && head[1] === 0x8b;
  } catch {
    // Unreadable: the plain reader says why.
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Reads the records of `path`: `records.jsonl` or `records.jsonl.gz` (see readJsonLines). A
 * `records.jsonl` that is not there is read as `records.jsonl.gz` when that is (a run with
 * --records-format jsonl.gz); recordsPath(dir) finds a directory's file either way.
 */
export function readRecords(
  path: string,
  onBadLine?: (lineNumber: number, error: Error) => void,
): AsyncGenerator<RequestRecord> {
  return readJsonLines<RequestRecord>(recordsFile(path), onBadLine, recordProblem);
}

/** The file readRecords reads for `path`: `path`, or `path.gz` when only that is there. */
export function recordsFile(path: string): string {
  return !existsSync(path) && existsSync(`${path}.gz`) ? `${path}.gz` : path;
}

/** Every telemetry snapshot of `telemetry.jsonl`; lines without a time are left out. */
export async function readTelemetry(path: string): Promise<TelemetrySnapshot[]> {
  const out: TelemetrySnapshot[] = [];
  for await (const snapshot of readJsonLines<TelemetrySnapshot>(path)) {
    if (typeof snapshot?.at === 'number') out.push(snapshot);
  }
  return out;
}
