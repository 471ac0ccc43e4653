/**
 * Reading the history: runs by filter (SQL over the database), series (the runs a trend and a
 * regression verdict follow) and a metric's trend along a series.
 */
import type { Database, SqlValue } from 'sql.js';
import type { HistoryEntry } from './entry.js';
import { entryOfRow } from './store.js';

/** What `infergauge history` filters on; each text filter is a glob (`*`, `?`) or an exact value. */
export interface HistoryFilter {
  model?: string;
  url?: string;
  engine?: string;
  engineVersion?: string;
  gpu?: string;
  label?: string;
  scenario?: string;
  load?: string;
  /** The point's kind or its session's: `run`, `sweep`, `sweep-point`, `probe`, `capacity`. */
  kind?: string;
  /** Every one must be among the run's tags. */
  tags?: string[];
  /** ISO times, inclusive since, exclusive until. */
  since?: string;
  until?: string;
}

const GLOB_COLUMNS = {
  model: 'model',
  url: 'url',
  engine: 'engine',
  engineVersion: 'engine_version',
  gpu: 'gpu_type',
  label: 'label',
  scenario: 'scenario',
  load: 'load',
} as const;

/** The SQL condition and its parameters of a filter. */
export function whereOf(f: HistoryFilter): { sql: string; params: SqlValue[] } {
  const parts: string[] = [];
  const params: SqlValue[] = [];
  for (const [key, column] of Object.entries(GLOB_COLUMNS)) {
    const value = f[key as keyof typeof GLOB_COLUMNS];
    if (value === undefined) continue;
    parts.push(`${column} GLOB ?`);
    params.push(value);
  }
  if (f.kind !== undefined) {
    parts.push('(kind GLOB ? OR session_kind GLOB ?)');
    params.push(f.kind, f.kind);
  }
  for (const tag of f.tags ?? []) {
    parts.push('EXISTS (SELECT 1 FROM tags WHERE tags.run_id = runs.id AND tags.tag = ?)');
    params.push(tag);
  }
  if (f.since !== undefined) {
    parts.push('started_at >= ?');
    params.push(f.since);
  }
  if (f.until !== undefined) {
    parts.push('started_at < ?');
    params.push(f.until);
  }
  return { sql: parts.length > 0 ? `WHERE ${parts.join(' AND ')}` : '', params };
}

/** The runs a filter selects, newest first, at most `limit`. */
export function findRuns(db: Database, f: HistoryFilter, limit?: number): HistoryEntry[] {
  const { sql, params } = whereOf(f);
  const st = db.prepare(
    `SELECT * FROM runs ${sql} ORDER BY started_at DESC, id DESC${limit !== undefined ? ' LIMIT ?' : ''}`,
  );
  const out: HistoryEntry[] = [];
  try {
    st.bind(limit !== undefined ? [...params, limit] : params);
    while (st.step()) out.push(entryOfRow(st.getAsObject()));
  } finally {
    st.free();
  }
  return out;
}

/** A series: the runs a trend follows and a regression verdict judges, oldest first. */
export interface Series {
  /** `tag nightly · chat · closed:8`, or `model · url · scenario · load`. */
  name: string;
  /** The tag that makes it, when one does. */
  tag?: string;
  runs: HistoryEntry[];
}

/**
 * The series of `runs`: those with the same tag (the caller's `tag` where given, else each
 * run's first), otherwise the same model and URL; within either, the same scenario and load (a
 * tagged sweep's levels are series of their own). What may differ inside a series (engine
 * version, GPU, server settings) does not split it: seriesDifferences names it.
 */
export function seriesOf(runs: readonly HistoryEntry[], tag?: string): Series[] {
  const byKey = new Map<string, Series>();
  const sorted = [...runs].sort(byStart);
  for (const r of sorted) {
    const t = tag !== undefined && r.tags.includes(tag) ? tag : r.tags[0];
    const head = t !== undefined ? `tag ${t}` : `${r.model ?? '?'} · ${r.url ?? '?'}`;
    const name = `${head} · ${r.scenario ?? '?'} · ${r.load ?? '?'}`;
    let s = byKey.get(name);
    if (!s) {
      s = { name, ...(t !== undefined ? { tag: t } : {}), runs: [] };
      byKey.set(name, s);
    }
    s.runs.push(r);
  }
  return [...byKey.values()];
}

/** Oldest first; the id breaks a tie (two shards started in the same millisecond). */
export function byStart(a: HistoryEntry, b: HistoryEntry): number {
  const x = a.startedAt ?? '';
  const y = b.startedAt ?? '';
  return x < y ? -1 : x > y ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** The server facts that may differ inside a series, by name. */
function facts(r: HistoryEntry): Record<string, string> {
  const out: Record<string, string> = {};
  const put = (k: string, v: string | number | null) => {
    if (v !== null) out[k] = String(v);
  };
  put('model', r.model);
  put('url', r.url);
  put('engine', r.engine);
  put('engine version', r.engineVersion);
  put('GPU', r.gpuType === null ? null : `${r.gpuCount ?? '?'}x ${r.gpuType}`);
  put('infergauge', r.toolVersion);
  for (const [k, v] of Object.entries(r.serverInfo)) out[`server ${k}`] = v;
  return out;
}

/**
 * What differs between `run` and the `others` of its series: one sentence per fact, the run's
 * value against the others' (`engine version 0.6.2, baseline 0.6.1`).
 */
export function seriesDifferences(run: HistoryEntry, others: readonly HistoryEntry[]): string[] {
  const mine = facts(run);
  const theirs = others.map(facts);
  const keys = new Set([...Object.keys(mine), ...theirs.flatMap((f) => Object.keys(f))]);
  const out: string[] = [];
  for (const k of keys) {
    const values = [...new Set(theirs.map((f) => f[k] ?? '(none)'))];
    const own = mine[k] ?? '(none)';
    if (values.length === 1 && values[0] === own) continue;
    out.push(`${k} ${own}, baseline ${values.join(' / ')}`);
  }
  return out;
}

/** One point of a trend. */
export interface TrendPoint {
  id: string;
  startedAt: string | null;
  value: number | null;
  dir: string;
  interrupted: boolean;
}

/** A metric (a --metric name: `ttft.p99`) along a series, oldest first. */
export function trendOf(series: Series, metric: string): TrendPoint[] {
  return series.runs.map((r) => ({
    id: r.id,
    startedAt: r.startedAt,
    value: Object.hasOwn(r.metrics, metric) ? r.metrics[metric] : null,
    dir: r.dir,
    interrupted: r.interrupted,
  }));
}
