import {
  closeSync,
  createReadStream,
  existsSync,
  openSync,
  readFileSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { ClientHealthMeasurements, RequestRecord } from '../record.js';

/**
 * Next to the records, each engine thread's own health measurements, kept raw so that `merge`
 * judges the threads of every shard as `run` judges its workers.
 */
const CLIENT_HEALTH_FILE = 'client-health.json';

export function writeClientHealth(dir: string, threads: ClientHealthMeasurements[]): void {
  writeFileSync(join(dir, CLIENT_HEALTH_FILE), `${JSON.stringify({ threads }, null, 2)}\n`);
}

/** A run directory's thread measurements; undefined when it has none (an older run). */
export function readClientHealth(dir: string): ClientHealthMeasurements[] | undefined {
  const path = join(dir, CLIENT_HEALTH_FILE);
  if (!existsSync(path)) return undefined;
  return (JSON.parse(readFileSync(path, 'utf8')) as { threads: ClientHealthMeasurements[] })
    .threads;
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
 * Reads `records.jsonl` line by line. A last line cut short by a crash is skipped and reported
 * through `onBadLine`, never thrown, so everything before it is still usable.
 */
export async function* readRecords(
  path: string,
  onBadLine: (lineNumber: number, error: Error) => void = () => {},
): AsyncGenerator<RequestRecord> {
  const lines = createInterface({
    input: createReadStream(path, { encoding: 'utf8', highWaterMark: 1 << 20 }),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let lineNumber = 0;
  for await (const line of lines) {
    lineNumber++;
    if (line.length === 0) continue;
    try {
      yield JSON.parse(line) as RequestRecord;
    } catch (err) {
      onBadLine(lineNumber, err as Error);
    }
  }
}
