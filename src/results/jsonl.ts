import { closeSync, createReadStream, openSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { ClientHealthMeasurements, RequestRecord } from '../record.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import { readJson, resultPath, writeResult } from './layout.js';

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
 */
export class JsonlWriter<T> {
  private fd: number | undefined;
  written = 0;

  constructor(readonly path: string) {
    // 'wx': never append to (or overwrite) an earlier run's file.
    this.fd = openSync(path, 'wx');
  }

  write(value: T): void {
    if (this.fd === undefined) throw new Error(`${this.path} is closed`);
    writeSync(this.fd, `${JSON.stringify(value)}\n`);
    this.written++;
  }

  /** Appends `count` lines already serialised (a worker thread's batch, ending in a newline). */
  writeLines(text: string, count: number): void {
    if (this.fd === undefined) throw new Error(`${this.path} is closed`);
    writeSync(this.fd, text);
    this.written += count;
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/**
 * Reads a JSONL file line by line. A line that is not JSON (the last one, cut short by a crash)
 * is skipped and reported through `onBadLine`, never thrown, so everything before it is usable.
 */
export async function* readJsonLines<T>(
  path: string,
  onBadLine: (lineNumber: number, error: Error) => void = () => {},
): AsyncGenerator<T> {
  const lines = createInterface({
    input: createReadStream(path, { encoding: 'utf8', highWaterMark: 1 << 20 }),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let lineNumber = 0;
  for await (const line of lines) {
    lineNumber++;
    if (line.length === 0) continue;
    try {
      yield JSON.parse(line) as T;
    } catch (err) {
      onBadLine(lineNumber, err as Error);
    }
  }
}

/** Reads `records.jsonl` (see readJsonLines). */
export function readRecords(
  path: string,
  onBadLine?: (lineNumber: number, error: Error) => void,
): AsyncGenerator<RequestRecord> {
  return readJsonLines<RequestRecord>(path, onBadLine);
}

/** Every telemetry snapshot of `telemetry.jsonl`; lines without a time are left out. */
export async function readTelemetry(path: string): Promise<TelemetrySnapshot[]> {
  const out: TelemetrySnapshot[] = [];
  for await (const snapshot of readJsonLines<TelemetrySnapshot>(path)) {
    if (typeof snapshot?.at === 'number') out.push(snapshot);
  }
  return out;
}
