/**
 * Another tool's result file read as runs (issue 54): the format found by content, never by
 * file name, each file's reader turning it into `ForeignRun`s (a file of several benchmarks:
 * one each). A file too large, not JSON, or of no known format is a ForeignInputError naming
 * the file and what is wrong.
 */
import { readFile, stat } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { isAiperfExport, isAiperfRecord, readAiperfExport, readAiperfRecords } from './aiperf.js';
import { ForeignInputError } from './build.js';
import { isGuidellmReport, readGuidellmReport } from './guidellm.js';
import { isLlmdReport, MAX_LLMD_REPORT_DEPTH, nestingDepth, readLlmdReport } from './llmd.js';
import type { ForeignFormat, ForeignRun } from './types.js';
import { isVllmBench, readVllmBench } from './vllm.js';

export { ForeignInputError } from './build.js';
export type { ForeignFormat, ForeignRun } from './types.js';

/** Each format's name in messages and notes. */
export const FOREIGN_FORMAT_NAMES: Record<ForeignFormat, string> = {
  'vllm-bench': 'vLLM bench serve JSON',
  guidellm: 'GuideLLM benchmarks file',
  aiperf: 'AIPerf profile export',
  'llm-d': 'llm-d Benchmark Report',
};

/**
 * The largest file read: 256 MiB. The file is parsed whole (these formats are one JSON
 * document), and a parsed JSON holds several times its bytes; a vLLM --save-detailed run of
 * 100,000 requests is about 60 MB.
 */
export const MAX_FOREIGN_BYTES = 256 * 2 ** 20;

/** One format: how its content is told, and how it is read (source names it in messages). */
export interface ForeignDetector {
  /** The format's name in messages. */
  name: string;
  detect(value: unknown): boolean;
  read(value: unknown, source: string): ForeignRun[];
}

/**
 * The formats read, in the order they are tried: the first whose `detect` says yes reads the
 * file. Each test looks at field names that only its format writes.
 */
export const FOREIGN_DETECTORS: ForeignDetector[] = [
  {
    name: FOREIGN_FORMAT_NAMES['vllm-bench'],
    detect: isVllmBench,
    read: (value, source) => [readVllmBench(value as Record<string, unknown>, source)],
  },
  {
    name: FOREIGN_FORMAT_NAMES.guidellm,
    detect: isGuidellmReport,
    read: (value, source) => readGuidellmReport(value as Record<string, unknown>, source),
  },
  {
    name: 'AIPerf profile_export.jsonl',
    detect: (value) =>
      value instanceof JsonLines ? isAiperfRecord(value.lines[0]) : isAiperfRecord(value),
    read: (value, source) =>
      value instanceof JsonLines
        ? [readAiperfRecords(value.lines, source, value.skipped)]
        : [readAiperfRecords([value], source, 0)],
  },
  {
    name: 'AIPerf profile_export_aiperf.json',
    detect: isAiperfExport,
    read: (value, source) => [readAiperfExport(value as Record<string, unknown>, source)],
  },
  {
    name: FOREIGN_FORMAT_NAMES['llm-d'],
    detect: isLlmdReport,
    // Its reader takes text (YAML or JSON): the parsed document goes back to it as JSON.
    read: (value, source) => [readLlmdReport(JSON.stringify(value), source)],
  },
];

/** A file of JSON lines (AIPerf's profile_export.jsonl): the lines that parsed, and how many did not. */
export class JsonLines {
  constructor(
    readonly lines: unknown[],
    readonly skipped: number,
  ) {}
}

/**
 * The text as JSON lines, where it is not one JSON document: a line that does not parse (a run
 * cut short tears its last line) is counted, not fatal, while most lines parse.
 */
function jsonLines(text: string): JsonLines | undefined {
  const lines: unknown[] = [];
  let skipped = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      lines.push(JSON.parse(line));
    } catch {
      skipped++;
    }
  }
  return lines.length > 1 && skipped <= lines.length / 2
    ? new JsonLines(lines, skipped)
    : undefined;
}

/** Whether a parsed document is one of the formats read. */
export function foreignFormatOf(value: unknown): ForeignDetector | undefined {
  return FOREIGN_DETECTORS.find((d) => d.detect(value));
}

/**
 * A file's text as one document: JSON, else (where it does not open as JSON does) YAML, as
 * GuideLLM writes `benchmarks.yaml`. YAML's aliases are bounded (the library's default, 100),
 * so a file of nested aliases cannot expand past memory.
 */
function parseDocument(text: string, source: string): unknown {
  const opening = /^\s*(.)/.exec(text)?.[1];
  if (opening === '{' || opening === '[' || opening === undefined) {
    try {
      return JSON.parse(text);
    } catch (err) {
      const lines = jsonLines(text);
      if (lines) return lines;
      throw new ForeignInputError(`${source}: not JSON (${(err as Error).message})`);
    }
  }
  // The YAML parser recurses per level: a document nested thousands deep overflows its stack
  // (once, the process ran out of memory), so depth is counted before it parses.
  if (nestingDepth(text) > MAX_LLMD_REPORT_DEPTH) {
    throw new ForeignInputError(
      `${source}: nested over ${MAX_LLMD_REPORT_DEPTH} levels deep (a result file has some ten)`,
    );
  }
  try {
    return parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new ForeignInputError(
      `${source}: neither JSON nor YAML (${(err as Error).message.split('\n')[0]})`,
    );
  }
}

/** Reads the parsed text of a file; `source` names it. */
export function parseForeign(text: string, source: string): ForeignRun[] {
  const value = parseDocument(text, source);
  const detector = foreignFormatOf(value);
  if (!detector) {
    throw new ForeignInputError(
      `${source}: not a result file of a format infergauge reads (${FOREIGN_DETECTORS.map((d) => d.name).join(', ')})`,
    );
  }
  return detector.read(value, source);
}

/** Reads another tool's result file as runs. */
export async function readForeign(path: string): Promise<ForeignRun[]> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch (err) {
    throw new ForeignInputError(`cannot read ${path}: ${(err as Error).message}`);
  }
  if (size > MAX_FOREIGN_BYTES) {
    throw new ForeignInputError(
      `${path}: ${(size / 2 ** 20).toFixed(0)} MiB, past the ${MAX_FOREIGN_BYTES / 2 ** 20} MiB a result file of another tool may have (it is read whole)`,
    );
  }
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ForeignInputError(`cannot read ${path}: ${(err as Error).message}`);
  }
  return parseForeign(text, path);
}
