import { closeSync, createReadStream, existsSync, openSync, readSync, writeSync } from 'node:fs';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';
import { StringDecoder } from 'node:string_decoder';
import { createGunzip, gzipSync } from 'node:zlib';
import {
  type ClientHealthMeasurements,
  type RecordsFormat,
  type RequestRecord,
  recordProblem,
} from '../record.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import { hasResult, readJson, recordsPath, resultPath, writeResult } from './layout.js';

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
 * any number of members). A line that is not JSON (the last one, cut short by a crash) is
 * skipped and reported through `onBadLine`, never thrown, so everything before it is usable. In
 * a gzip file a last member cut short (or a damaged one, after which nothing more can be read)
 * is one bad line the same way: the complete lines decoded before it are kept, the rest of it
 * is skipped. A line that parses but that `problemOf` refuses is a bad line too (NotAValueError).
 */
export async function* readJsonLines<T>(
  path: string,
  onBadLine: (lineNumber: number, error: Error) => void = () => {},
  problemOf: (value: unknown) => string | undefined = () => undefined,
): AsyncGenerator<T> {
  // A line that parses but is not a T is skipped and said, as a torn one is.
  const parse = (line: string, lineNumber: number): T | undefined => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      onBadLine(lineNumber, err as Error);
      return undefined;
    }
    const problem = problemOf(value);
    if (problem === undefined) return value as T;
    onBadLine(lineNumber, new NotAValueError(problem));
    return undefined;
  };
  if (isGzipFile(path)) {
    let lineNumber = 0;
    for await (const line of gunzipLines(path)) {
      lineNumber++;
      if (typeof line !== 'string') {
        onBadLine(lineNumber, line.cut);
        return;
      }
      if (line.length === 0) continue;
      const value = parse(line, lineNumber);
      if (value !== undefined) yield value;
    }
    return;
  }
  const lines = createInterface({
    input: createReadStream(path, { encoding: 'utf8', highWaterMark: 1 << 20 }),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let lineNumber = 0;
  for await (const line of lines) {
    lineNumber++;
    if (line.length === 0) continue;
    const value = parse(line, lineNumber);
    if (value !== undefined) yield value;
  }
}

/** A line that is whole JSON but not what the file holds (readJsonLines' `problemOf`). */
export class NotAValueError extends Error {}

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
 * The lines of a gzip file, decompressed as they are read; ends with `{ cut }` when the stream
 * breaks (a last member cut short, a damaged one), dropping the text after the last newline.
 * An empty file has no lines. Errors reading the file are thrown.
 */
async function* gunzipLines(path: string): AsyncGenerator<string | { cut: Error }> {
  const input = createReadStream(path, { highWaterMark: 1 << 20 });
  const gunzip = createGunzip({ chunkSize: 1 << 16 });
  input.on('error', (err) => gunzip.destroy(err));
  input.pipe(gunzip);
  const decoder = new StringDecoder('utf8');
  let parts: string[] = [];
  let bytes = 0;
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      const text = decoder.write(chunk);
      let start = 0;
      for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
        parts.push(text.slice(start, nl));
        const line = parts.join('');
        parts = [];
        start = nl + 1;
        yield line;
      }
      if (start < text.length) parts.push(text.slice(start));
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (typeof code !== 'string' || !code.startsWith('Z_')) throw err;
    // An empty file (a run that wrote no record yet) is no stream at all, not a cut one.
    if (bytes === 0 && input.bytesRead === 0) return;
    yield {
      cut: new Error(
        `the gzip stream is cut short or damaged after ${bytes.toLocaleString('en-US')} bytes of records (${(err as Error).message})`,
      ),
    };
    return;
  } finally {
    input.destroy();
    gunzip.destroy();
  }
  const last = parts.join('') + decoder.end();
  if (last.length > 0) yield last;
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
  const file = !existsSync(path) && existsSync(`${path}.gz`) ? `${path}.gz` : path;
  return readJsonLines<RequestRecord>(file, onBadLine, recordProblem);
}

/** Every telemetry snapshot of `telemetry.jsonl`; lines without a time are left out. */
export async function readTelemetry(path: string): Promise<TelemetrySnapshot[]> {
  const out: TelemetrySnapshot[] = [];
  for await (const snapshot of readJsonLines<TelemetrySnapshot>(path)) {
    if (typeof snapshot?.at === 'number') out.push(snapshot);
  }
  return out;
}
