import { MAX_TOKEN_COUNT } from '../backends/timeline.js';
import { jsonSyntaxProblem } from '../jsonText.js';
import type { OpenLoadSpec, TraceReplay, TraceReplayJson } from '../load.js';
import { readTextFile } from './textFile.js';

/** One request of a trace: when it arrived and how long it was. */
export interface TraceEntry {
  /** ms from the trace's first arrival (which is 0). */
  atMs: number;
  inputTokens: number;
  outputTokens: number;
  /**
   * The session (conversation) the request is a turn of: a JSONL line's `session_id` or
   * `conversation_id` (a string or a whole number), when it has one.
   */
  sessionId?: string;
  /**
   * Mooncake's `hash_ids`: the prompt's blocks of `--trace-block-tokens` tokens (TRACE_BLOCK_TOKENS
   * by default; the last one partial), remapped so that two requests with the same first n ids
   * share their first n blocks. Checked on reading: ceil(inputTokens / block) whole ids >= 0.
   */
  hashIds?: readonly number[];
}

/** Tokens per `hash_ids` block in Mooncake's published traces (`--trace-block-tokens`). */
export const TRACE_BLOCK_TOKENS = 512;

/** One session of a trace: its requests in time order (`inputTokens`: the whole prompt). */
export interface TraceSession {
  /** The trace's session id (absent for a line without one: a one-turn session). */
  sessionId?: string;
  /** When its first request arrived (ms from the trace's first). */
  startMs: number;
  turns: TraceEntry[];
}

/**
 * - `mooncake`: JSONL `{"timestamp": <ms>, "input_length": n, "output_length": n, "hash_ids": [...]}`
 *   (kvcache-ai/Mooncake FAST25-release/traces): `hash_ids` name the prompt's blocks of
 *   `--trace-block-tokens` tokens (512 in the published traces), ceil(input_length / block) of
 *   them, and become block-exact prompts (blockPrompts.ts).
 * - `burstgpt`: CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
 *   (HPMLL/BurstGPT; `Timestamp` in seconds; BurstGPT_3 adds `Session ID` and `Elapsed time`).
 *   Rows with 0 response tokens are the requests that failed (the repository's README) and are
 *   left out, as its `BurstGPT_without_fails_*.csv` files leave them out.
 * - `azure`: CSV `TIMESTAMP,ContextTokens,GeneratedTokens` with times such as
 *   `2023-11-16 18:15:46.6805900` (Azure/AzurePublicDataset AzureLLMInferenceDataset2023/2024),
 *   read as UTC unless they carry an offset (`Z`, `+01:00`).
 * - `jsonl`: generic JSONL `{"at_ms" | "timestamp_s" | "time": t, "input_tokens": n,
 *   "output_tokens": n}`: `at_ms` in ms, `timestamp_s` and `time` in seconds.
 * JSON lines of either kind may name their session with `session_id` or `conversation_id`
 * (Mooncake's own traces have none: their `hash_ids` only say which 512-token blocks requests
 * share).
 */
export type TraceFormat = 'mooncake' | 'azure' | 'burstgpt' | 'jsonl';

/** Problems listed in full before the rest are counted. */
const MAX_LISTED = 10;

/**
 * Reads a trace file: entries sorted by time (ties keep file order) and shifted so the first is
 * at 0. The format is detected from the content when not given: JSON lines are Mooncake when
 * the first has `input_length`, generic otherwise; anything else is Azure CSV. A bad line is
 * an error with its line number and what is wrong (up to 10 listed in one Error), never skipped;
 * blank lines are allowed. An empty trace is an error.
 */
export function readTrace(
  path: string,
  format?: TraceFormat,
  onNote?: (message: string) => void,
  blockTokens?: number,
): TraceEntry[] {
  const text = readTextFile(path, 'trace');
  return parseTrace(text, {
    source: path,
    ...(format ? { format } : {}),
    ...(onNote ? { onNote } : {}),
    ...(blockTokens !== undefined ? { blockTokens } : {}),
  }).entries;
}

/** readTrace on text already in memory; also says which format it read. */
export function parseTrace(
  text: string,
  options: {
    format?: TraceFormat;
    source?: string;
    /** Says what was done to times out of order or below 0 (sorted, shifted), or rows left out. */
    onNote?: (message: string) => void;
    /** Tokens per `hash_ids` block, which their count is checked against (TRACE_BLOCK_TOKENS). */
    blockTokens?: number;
  } = {},
): { format: TraceFormat; entries: TraceEntry[] } {
  const source = options.source ?? 'trace';
  const lines = text.split('\n');
  const firstLine = lines.findIndex((l) => l.trim() !== '');
  if (firstLine < 0) throw new Error(`${source}: the trace is empty`);
  const format = options.format ?? detectTraceFormat(lines[firstLine], source);
  const problems = new Problems(source);
  const blockTokens = options.blockTokens ?? TRACE_BLOCK_TOKENS;
  const raw =
    format === 'azure'
      ? parseAzure(lines, problems)
      : format === 'burstgpt'
        ? parseBurstGpt(lines, problems, (n) =>
            options.onNote?.(
              `${source}: ${n} rows with 0 Response tokens (requests that failed, as BurstGPT's README says) are left out`,
            ),
          )
        : parseJsonl(lines, format, problems, blockTokens);
  problems.throwIfAny();
  if (raw.length === 0) throw new Error(`${source}: the trace has no entries`);
  const outOfOrder = raw.filter((e, i) => i > 0 && e.atMs < raw[i - 1].atMs).length;
  if (outOfOrder > 0) {
    options.onNote?.(
      `${source}: ${outOfOrder} of ${raw.length} entries come earlier than the entry before them: the trace is replayed sorted by time`,
    );
  }
  // Stable: requests with the same time keep the file's order.
  raw.sort((a, b) => a.atMs - b.atMs);
  const first = raw[0].atMs;
  // A trace of absolute times starts at its first entry, as documented; times below 0 are odd.
  if (first < 0) {
    options.onNote?.(
      `${source}: times start at ${first} ms (below 0): every time is shifted by +${-first} ms so the first request is sent at 0`,
    );
  }
  for (const entry of raw) entry.atMs -= first;
  return { format, entries: raw };
}

/** `--trace-window START:END`: seconds from the trace's first arrival, START below END. */
export function parseTraceWindow(
  text: string,
): { startS: number; endS: number } | { problem: string } {
  const m = /^(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(text);
  if (!m) return { problem: 'must be START:END in seconds from the first arrival (e.g. 600:1200)' };
  const startS = Number(m[1]);
  const endS = Number(m[2]);
  if (!(endS > startS)) return { problem: `END must come after START, got ${text}` };
  return { startS, endS };
}

/**
 * The entries that arrived in [startS, endS) seconds from the trace's first arrival, shifted so
 * the first of them is at 0 (a replay starts with a request, as a whole trace does). An empty
 * window is an error naming how long the trace is.
 */
export function traceWindow(
  entries: readonly TraceEntry[],
  startS: number,
  endS: number,
): TraceEntry[] {
  const fromMs = startS * 1000;
  const toMs = endS * 1000;
  const kept = entries.filter((e) => e.atMs >= fromMs && e.atMs < toMs);
  if (kept.length === 0) {
    const spanS = entries.length > 0 ? entries[entries.length - 1].atMs / 1000 : 0;
    throw new Error(
      `--trace-window ${startS}:${endS} holds no arrival: the trace spans ${spanS.toFixed(3)} s from its first arrival`,
    );
  }
  const first = kept[0].atMs;
  return kept.map((e) => ({ ...e, atMs: e.atMs - first }));
}

/**
 * Every idle gap between consecutive arrivals cut to at most `maxGapMs`: each later arrival moves
 * earlier by what the gaps before it lost, so bursts keep their shape and the night between them
 * shrinks. `removedMs`: trace time taken out; `cappedGaps`: how many gaps were cut.
 */
export function capTraceGaps(
  entries: readonly TraceEntry[],
  maxGapMs: number,
): { entries: TraceEntry[]; removedMs: number; cappedGaps: number } {
  let removedMs = 0;
  let cappedGaps = 0;
  const out = entries.map((e, i) => {
    if (i > 0) {
      const gap = e.atMs - entries[i - 1].atMs;
      if (gap > maxGapMs) {
        removedMs += gap - maxGapMs;
        cappedGaps++;
      }
    }
    return removedMs > 0 ? { ...e, atMs: e.atMs - removedMs } : e;
  });
  return { entries: out, removedMs, cappedGaps };
}

/**
 * `--trace-window` then `--trace-max-gap-s`, as `run` and `size` both apply them (`--trace-speed`
 * then divides what is left): the entries kept, the shaping the results record, and a notice for
 * each change (`verb`: what the command does with the arrivals, "replayed" or "sized").
 */
export function shapeTrace(
  entries: readonly TraceEntry[],
  o: { window?: { startS: number; endS: number }; maxGapS?: number },
  verb: string,
): {
  entries: TraceEntry[];
  shaping: Pick<TraceShaping, 'window' | 'maxGapS' | 'removedGapMs'>;
  notices: string[];
} {
  let kept = [...entries];
  const shaping: Pick<TraceShaping, 'window' | 'maxGapS' | 'removedGapMs'> = {};
  const notices: string[] = [];
  if (o.window) {
    kept = traceWindow(kept, o.window.startS, o.window.endS);
    shaping.window = o.window;
    notices.push(
      `--trace-window ${o.window.startS}:${o.window.endS}: ${kept.length} of ${entries.length} arrivals ${verb}, the first at 0`,
    );
  }
  if (o.maxGapS !== undefined) {
    const capped = capTraceGaps(kept, o.maxGapS * 1000);
    kept = capped.entries;
    shaping.maxGapS = o.maxGapS;
    shaping.removedGapMs = capped.removedMs;
    if (capped.cappedGaps > 0) {
      notices.push(
        `--trace-max-gap-s ${o.maxGapS}: ${capped.cappedGaps} idle gaps cut to ${o.maxGapS} s, ${(capped.removedMs / 1000).toFixed(1)} s of trace time removed`,
      );
    }
  }
  return { entries: kept, shaping, notices };
}

/** A replay's shaping and hit rate as its JSON carries them (TraceReplayJson's optional part). */
export type TraceShaping = Pick<
  TraceReplayJson,
  'window' | 'maxGapS' | 'removedGapMs' | 'blockTokens' | 'impliedHitRate'
>;

/**
 * The LoadSpec's `trace` for these entries (or bare times) replayed at `speed`. Its JSON form
 * (what summary.json and the manifest hold) is `{ source, speed, requests, spanMs }` and what
 * shaped the replay (window, gap cap, hash ids' block size and implied hit rate), not the
 * times, so a 20,000-request trace does not land in every result file.
 */
export function traceReplay(
  entries: readonly TraceEntry[] | readonly number[],
  speed: number,
  source?: string,
  /** What shaped the trace (window, gap cap) and its hash ids' implied hit rate, for the JSON. */
  shaping?: TraceShaping,
): TraceReplay {
  const timesMs = entries.map((e: TraceEntry | number) => (typeof e === 'number' ? e : e.atMs));
  const replay: TraceReplay = { timesMs, speed, ...(source !== undefined ? { source } : {}) };
  const json = (): TraceReplayJson => ({
    ...(source !== undefined ? { source } : {}),
    speed,
    requests: timesMs.length,
    spanMs: timesMs.length > 0 ? timesMs[timesMs.length - 1] - timesMs[0] : 0,
    ...shaping,
  });
  Object.defineProperty(replay, 'toJSON', { value: json, enumerable: false });
  return replay;
}

/**
 * An open-loop LoadSpec replaying `entries` at `speed` (default 1). Its `rate` describes the
 * replay, (requests - 1) / span at that speed; the schedule uses only the times.
 */
export function traceLoad(
  entries: readonly TraceEntry[],
  options: {
    speed?: number;
    source?: string;
    maxConcurrency?: number;
    shaping?: TraceShaping;
  } = {},
): OpenLoadSpec {
  const speed = options.speed ?? 1;
  const spanMs = entries.length > 1 ? entries[entries.length - 1].atMs - entries[0].atMs : 0;
  return {
    mode: 'open',
    rate: spanMs > 0 ? ((entries.length - 1) / spanMs) * 1000 * speed : 0,
    arrival: 'trace',
    trace: traceReplay(entries, speed, options.source, options.shaping),
    ...(options.maxConcurrency !== undefined ? { maxConcurrency: options.maxConcurrency } : {}),
  };
}

/**
 * The lengths to ask for in request `id`: entry `id` of the trace. The engine hands out ids in
 * schedule order from 0, warm-up included, so request `id` is the one sent at entry `id`'s
 * time. Undefined past the end (the engine sends nothing there).
 */
export function traceLengths(
  entries: readonly TraceEntry[],
): (id: number) => { inputTokens: number; outputTokens: number } | undefined {
  return (id) => {
    const e = entries[id];
    return e ? { inputTokens: e.inputTokens, outputTokens: e.outputTokens } : undefined;
  };
}

function detectTraceFormat(firstLine: string, source: string): TraceFormat {
  const line = firstLine.trim();
  if (line.startsWith('{')) {
    try {
      const value = JSON.parse(line) as Record<string, unknown>;
      return 'input_length' in value || 'output_length' in value ? 'mooncake' : 'jsonl';
    } catch {
      // The line-by-line pass reports it with its line number.
      return 'jsonl';
    }
  }
  if (/timestamp/i.test(line) && /request tokens/i.test(line)) return 'burstgpt';
  if (/timestamp/i.test(line) && line.includes(',')) return 'azure';
  throw new Error(
    `${source}: not a trace this reads: expected JSON lines (Mooncake {"timestamp", "input_length", "output_length", "hash_ids"} or {"at_ms"|"timestamp_s"|"time", "input_tokens", "output_tokens"}), Azure CSV (header TIMESTAMP,ContextTokens,GeneratedTokens) or BurstGPT CSV (header Timestamp,Model,Request tokens,Response tokens,...)`,
  );
}

function parseJsonl(
  lines: string[],
  format: 'mooncake' | 'jsonl',
  problems: Problems,
  blockTokens: number,
): TraceEntry[] {
  const entries: TraceEntry[] = [];
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i].trim();
    if (text === '') continue;
    const line = i + 1;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      problems.add(line, jsonSyntaxProblem(err, text));
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      problems.add(line, 'expected a JSON object');
      continue;
    }
    const o = value as Record<string, unknown>;
    const before = problems.count;
    let atMs: number | undefined;
    let inputTokens: number | undefined;
    let outputTokens: number | undefined;
    let hashIds: number[] | undefined;
    if (format === 'mooncake') {
      atMs = time(o, 'timestamp', 1, line, problems);
      inputTokens = tokens(o, 'input_length', line, problems);
      outputTokens = tokens(o, 'output_length', line, problems);
      if (o.hash_ids !== undefined) {
        hashIds = blockIds(o.hash_ids, inputTokens, blockTokens, line, problems);
      }
    } else {
      const keys = (['at_ms', 'timestamp_s', 'time'] as const).filter((k) => k in o);
      if (keys.length === 0) {
        problems.add(line, 'needs one of at_ms (ms), timestamp_s or time (s)');
      } else if (keys.length > 1) {
        problems.add(line, `has ${keys.join(' and ')}; give one time`);
      } else {
        atMs = time(o, keys[0], keys[0] === 'at_ms' ? 1 : 1000, line, problems);
      }
      inputTokens = tokens(o, 'input_tokens', line, problems);
      outputTokens = tokens(o, 'output_tokens', line, problems);
    }
    const sessionId = traceSessionId(o, line, problems);
    if (problems.count > before) continue;
    entries.push({
      atMs: atMs as number,
      inputTokens: inputTokens as number,
      outputTokens: outputTokens as number,
      ...(sessionId !== undefined ? { sessionId } : {}),
      ...(hashIds !== undefined ? { hashIds } : {}),
    });
  }
  return entries;
}

/**
 * A line's `hash_ids`: whole numbers >= 0, one per block of the prompt (the last one partial),
 * so ceil(input_length / blockTokens) of them; a wrong count means the block size is not the
 * trace's (`--trace-block-tokens`) or the line is damaged, and either would build prompts that
 * share the wrong prefixes.
 */
function blockIds(
  v: unknown,
  inputTokens: number | undefined,
  blockTokens: number,
  line: number,
  problems: Problems,
): number[] | undefined {
  if (!Array.isArray(v)) {
    problems.add(line, `hash_ids must be a list of whole numbers >= 0, got ${describe(v)}`);
    return undefined;
  }
  const bad = v.findIndex((x) => !Number.isSafeInteger(x) || (x as number) < 0);
  if (bad >= 0) {
    problems.add(line, `hash_ids[${bad}] must be a whole number >= 0, got ${describe(v[bad])}`);
    return undefined;
  }
  if (inputTokens === undefined) return undefined;
  const expected = Math.ceil(inputTokens / blockTokens);
  if (v.length !== expected) {
    problems.add(
      line,
      `hash_ids has ${v.length} blocks but input_length ${inputTokens} needs ${expected} of ${blockTokens} tokens (is --trace-block-tokens the trace's block size?)`,
    );
    return undefined;
  }
  return v as number[];
}

/** A line's `session_id` or `conversation_id` as text; a problem when it has both or a bad one. */
function traceSessionId(
  o: Record<string, unknown>,
  line: number,
  problems: Problems,
): string | undefined {
  const keys = (['session_id', 'conversation_id'] as const).filter(
    (k) => o[k] !== undefined && o[k] !== null,
  );
  if (keys.length === 0) return undefined;
  if (keys.length > 1) {
    problems.add(line, 'has session_id and conversation_id; give one');
    return undefined;
  }
  const v = o[keys[0]];
  if ((typeof v === 'string' && v !== '') || Number.isSafeInteger(v)) return String(v);
  problems.add(line, `${keys[0]} must be a non-empty string or a whole number, got ${describe(v)}`);
  return undefined;
}

/**
 * The trace's sessions in the order they start (ties: file order): lines with the same session
 * id, in time order, are the turns of one session; a line without one is a session of one turn.
 */
export function traceSessions(entries: readonly TraceEntry[]): TraceSession[] {
  const sessions: TraceSession[] = [];
  const byId = new Map<string, TraceSession>();
  // Entries are sorted by time (parseTrace), so each session's first entry opens it in order.
  for (const entry of entries) {
    const open = entry.sessionId !== undefined ? byId.get(entry.sessionId) : undefined;
    if (open) {
      open.turns.push(entry);
      continue;
    }
    const session: TraceSession = {
      ...(entry.sessionId !== undefined ? { sessionId: entry.sessionId } : {}),
      startMs: entry.atMs,
      turns: [entry],
    };
    sessions.push(session);
    if (entry.sessionId !== undefined) byId.set(entry.sessionId, session);
  }
  return sessions;
}

function time(
  o: Record<string, unknown>,
  key: string,
  msPerUnit: number,
  line: number,
  problems: Problems,
): number | undefined {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    problems.add(line, `${key} must be a number, got ${describe(v)}`);
    return undefined;
  }
  const ms = v * msPerUnit;
  if (Math.abs(ms) > MAX_TIME_MS) {
    problems.add(line, `${key} must lie within 285 years of 0, got ${describe(v)}`);
    return undefined;
  }
  return ms;
}

/** Times are held to the microsecond, which a double does up to 2^53 µs (285 years). */
export const MAX_TIME_MS = 2 ** 53 / 1000;

/** A request's length from a trace: a whole number no model's context exceeds. */
/** A token count a trace may give: a whole number from 0 to MAX_TOKEN_COUNT (LENGTH_RULE). */
export function isLength(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= MAX_TOKEN_COUNT;
}
export const LENGTH_RULE = `a whole number from 0 to ${MAX_TOKEN_COUNT}`;

function tokens(
  o: Record<string, unknown>,
  key: string,
  line: number,
  problems: Problems,
): number | undefined {
  const v = o[key];
  if (!isLength(v)) {
    problems.add(line, `${key} must be ${LENGTH_RULE}, got ${describe(v)}`);
    return undefined;
  }
  return v;
}

const AZURE_COLUMNS = ['TIMESTAMP', 'ContextTokens', 'GeneratedTokens'] as const;

function parseAzure(lines: string[], problems: Problems): TraceEntry[] {
  const entries: TraceEntry[] = [];
  let baseMs: number | undefined;
  const table = { columns: AZURE_COLUMNS, expected: 'TIMESTAMP,ContextTokens,GeneratedTokens' };
  readCsvRows(lines, problems, table, (row) => {
    const text = row.field(0) ?? '';
    const stamp = parseTimestamp(text);
    if (!stamp) {
      row.problem(
        `TIMESTAMP must look like 2023-11-16 18:15:46.6805900, got ${JSON.stringify(text)}`,
      );
    }
    const inputTokens = row.length(1);
    const outputTokens = row.length(2);
    if (row.bad || !stamp) return;
    // Whole ms relative to the first row, plus the fraction: exact to well under a µs.
    baseMs ??= stamp.wholeMs;
    entries.push({ atMs: stamp.wholeMs - baseMs + stamp.fractionMs, inputTokens, outputTokens });
  });
  return entries;
}

const BURSTGPT_COLUMNS = ['Timestamp', 'Request tokens', 'Response tokens', 'Session ID'] as const;

/**
 * BurstGPT CSV: `Timestamp` in seconds from the trace's first day, `Request tokens` and
 * `Response tokens`; `Session ID` (BurstGPT_3) names the conversation. `Model` and `Log Type`
 * are not read: `--trace` replays one stream (filter the file to replay one model or log type).
 */
function parseBurstGpt(
  lines: string[],
  problems: Problems,
  onFailedRows: (count: number) => void,
): TraceEntry[] {
  const entries: TraceEntry[] = [];
  let failed = 0;
  const table = {
    columns: BURSTGPT_COLUMNS,
    optional: ['Session ID'],
    expected: 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type',
  };
  readCsvRows(lines, problems, table, (row) => {
    const text = row.field(0) ?? '';
    const seconds = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isFinite(seconds) || seconds * 1000 > MAX_TIME_MS) {
      row.problem(`Timestamp must be seconds (a number >= 0), got ${JSON.stringify(text)}`);
    }
    const inputTokens = row.length(1);
    const outputTokens = row.length(2);
    if (row.bad) return;
    if (outputTokens === 0) {
      failed++;
      return;
    }
    const session = row.field(3) ?? '';
    entries.push({
      atMs: seconds * 1000,
      inputTokens,
      outputTokens,
      ...(session !== '' ? { sessionId: session } : {}),
    });
  });
  if (failed > 0) onFailedRows(failed);
  return entries;
}

/** One data row of a trace CSV, its fields by the index of their column in the reader's list. */
interface CsvRow {
  /** The field of column `k`; undefined for an optional column the header lacks. */
  field(k: number): string | undefined;
  /** Column `k` as a token count (LENGTH_RULE); 0 and a problem when it is not one. */
  length(k: number): number;
  problem(what: string): void;
  /** A problem was found in this row. */
  readonly bad: boolean;
}

/**
 * The rows of a trace CSV whose header names `table.columns` (in any order and case; the
 * `optional` ones may be missing, and their fields read undefined): each non-blank row with at
 * least the header's fields goes to `onRow`. A header without a needed column is one problem,
 * naming the header the format `expected`.
 */
function readCsvRows(
  lines: string[],
  problems: Problems,
  table: { columns: readonly string[]; optional?: readonly string[]; expected: string },
  onRow: (row: CsvRow) => void,
): void {
  const { columns, expected } = table;
  const headerIndex = lines.findIndex((l) => l.trim() !== '');
  const header = splitCsv(lines[headerIndex]).map((h) => h.toLowerCase());
  const column = columns.map((name) => header.indexOf(name.toLowerCase()));
  const missing = columns.filter((name, i) => column[i] < 0 && !table.optional?.includes(name));
  if (missing.length > 0) {
    problems.add(
      headerIndex + 1,
      `the header "${lines[headerIndex].trim()}" lacks ${missing.join(', ')} (expected ${expected})`,
    );
    return;
  }
  for (let i = headerIndex + 1; i < lines.length; i++) {
    if (lines[i].trim() === '') continue;
    const line = i + 1;
    const fields = splitCsv(lines[i]);
    if (fields.length < header.length) {
      problems.add(line, `expected ${header.length} fields, got ${fields.length}`);
      continue;
    }
    const before = problems.count;
    const field = (k: number) => (column[k] >= 0 ? fields[column[k]] : undefined);
    onRow({
      field,
      length(k) {
        const text = field(k) ?? '';
        const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
        if (isLength(n)) return n;
        problems.add(line, `${columns[k]} must be ${LENGTH_RULE}, got ${JSON.stringify(text)}`);
        return 0;
      },
      problem: (what) => problems.add(line, what),
      get bad() {
        return problems.count > before;
      },
    });
  }
}

/** "2023-11-16 18:15:46.6805900" (or with T, Z, +hh:mm): whole ms since 1970 and the rest. */
function parseTimestamp(text: string): { wholeMs: number; fractionMs: number } | undefined {
  const m =
    /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$/.exec(
      text,
    );
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return undefined;
  }
  let wholeMs = Date.UTC(year, month - 1, day, hour, minute, second);
  const zone = m[8];
  if (zone && zone !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    wholeMs -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
  }
  const fractionMs = m[7] ? Number(`0.${m[7]}`) * 1000 : 0;
  return { wholeMs, fractionMs };
}

function splitCsv(line: string): string[] {
  return line.split(',').map((f) => f.trim().replace(/^"(.*)"$/, '$1'));
}

/** A value a trace gave, as its problems quote it (JSON, cut to 40 characters). */
export function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = JSON.stringify(v);
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

/** Problems of a file, by line or entry, thrown together. */
export class Problems {
  readonly listed: string[] = [];
  count = 0;

  constructor(
    readonly source: string,
    readonly unit = 'line',
  ) {}

  add(at: number, what: string): void {
    this.count++;
    if (this.listed.length < MAX_LISTED) this.listed.push(`${this.unit} ${at}: ${what}`);
  }

  throwIfAny(): void {
    if (this.count === 0) return;
    const more = this.count - this.listed.length;
    const head =
      this.count === 1 ? `${this.source}: 1 problem` : `${this.source}: ${this.count} problems`;
    throw new Error(
      `${head}:\n  ${this.listed.join('\n  ')}${more > 0 ? `\n  ... and ${more} more` : ''}`,
    );
  }
}
