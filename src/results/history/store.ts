/**
 * The history database: `<root>/history.db`, one SQLite file (sql.js: SQLite compiled to
 * WebAssembly, so `npm ci` needs no compiler and any sqlite3 opens the file). sql.js holds a
 * database in memory: a change reads the file, applies, and writes the whole file back,
 * atomically (a temporary file in the same directory, fsync, rename), under a lock file
 * (`history.db.lock`, created exclusively), so that two processes indexing at once (parallel CI
 * jobs, shards) never lose a row nor leave a torn file. Readers take no lock: a rename replaces
 * the file whole.
 *
 * The run directories are the source of truth: a missing, unreadable or older database is
 * rebuilt from them (with a warning), and `infergauge history --reindex` rebuilds it on demand.
 */

import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import v8 from 'node:v8';
import type { Database, SqlJsStatic, SqlValue } from 'sql.js';
import { InfergaugeError } from '../../errors.js';
import {
  entryOf,
  findPointDirs,
  HEADLINE_LATENCIES,
  HEADLINE_STATS,
  type HistoryEntry,
  latencyColumn,
} from './entry.js';

export const HISTORY_FILE = 'history.db';
export const LOCK_FILE = `${HISTORY_FILE}.lock`;

/**
 * The layout of the tables (`PRAGMA user_version`). A database of another version is rebuilt
 * from the directories, as a damaged one is: it is an index, never the only copy.
 */
export const SCHEMA_VERSION = 1;

/** A lock older than this is a crashed holder's, whatever its pid says (a pid is reused). */
export const STALE_LOCK_MS = 30_000;

const LATENCY_COLUMNS = HEADLINE_LATENCIES.flatMap((m) =>
  HEADLINE_STATS.map((s) => latencyColumn(m, s)),
);

/** Columns in the order rows are written; `runs` has these and nothing else. */
const COLUMNS = [
  ['id', 'TEXT PRIMARY KEY'],
  ['session_id', 'TEXT'],
  ['session_kind', 'TEXT'],
  ['kind', 'TEXT NOT NULL'],
  ['command', 'TEXT'],
  ['dir', 'TEXT NOT NULL'],
  ['started_at', 'TEXT'],
  ['ended_at', 'TEXT'],
  ['interrupted', 'INTEGER NOT NULL'],
  ['model', 'TEXT'],
  ['url', 'TEXT'],
  ['engine', 'TEXT'],
  ['engine_version', 'TEXT'],
  ['gpu_type', 'TEXT'],
  ['gpu_count', 'INTEGER'],
  ['label', 'TEXT'],
  ['tags', 'TEXT NOT NULL'],
  ['note', 'TEXT'],
  ['scenario', 'TEXT'],
  ['load', 'TEXT'],
  ['load_mode', 'TEXT'],
  ['load_value', 'REAL'],
  ['server_info', 'TEXT NOT NULL'],
  ['tool_version', 'TEXT'],
  ...LATENCY_COLUMNS.map((c) => [c, 'REAL'] as const),
  ['output_tok_s', 'REAL'],
  ['requests_s', 'REAL'],
  ['completed', 'INTEGER'],
  ['failed', 'INTEGER'],
  ['validity', 'TEXT'],
  ['client_health', 'TEXT'],
  ['has_records', 'INTEGER NOT NULL'],
  ['metrics', 'TEXT NOT NULL'],
] as const;

const SCHEMA = [
  `CREATE TABLE runs (${COLUMNS.map(([n, t]) => `${n} ${t}`).join(', ')})`,
  'CREATE TABLE tags (run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, tag TEXT NOT NULL, PRIMARY KEY (run_id, tag))',
  'CREATE INDEX runs_started ON runs (started_at)',
  'CREATE INDEX runs_series ON runs (model, url, scenario, load)',
  'CREATE INDEX tags_tag ON tags (tag)',
  `PRAGMA user_version = ${SCHEMA_VERSION}`,
];

let sqlJs: Promise<SqlJsStatic> | undefined;

/**
 * sql.js, loaded once, when the history is first touched (a run that saves nothing never is).
 * Its WebAssembly is compiled by Liftoff alone: V8 would otherwise also compile the whole 676 KB
 * module with TurboFan on background threads, 0.18 s of CPU at the end of every saving run
 * (0.32 against 0.14 s for load, open, insert, export, /usr/bin/time), for the few
 * milliseconds of SQL a run or a query runs. No other WebAssembly runs in this process.
 */
export function loadSqlJs(): Promise<SqlJsStatic> {
  sqlJs ??= import('sql.js').then((m) => {
    v8.setFlagsFromString('--liftoff-only');
    return m.default();
  });
  return sqlJs;
}

/** A row's values in COLUMNS' order. */
function rowValues(e: HistoryEntry): SqlValue[] {
  const byColumn: Record<string, SqlValue> = {
    id: e.id,
    session_id: e.sessionId,
    session_kind: e.sessionKind,
    kind: e.kind,
    command: e.command,
    dir: e.dir,
    started_at: e.startedAt,
    ended_at: e.endedAt,
    interrupted: e.interrupted ? 1 : 0,
    model: e.model,
    url: e.url,
    engine: e.engine,
    engine_version: e.engineVersion,
    gpu_type: e.gpuType,
    gpu_count: e.gpuCount,
    label: e.label,
    tags: JSON.stringify(e.tags),
    note: e.note,
    scenario: e.scenario,
    load: e.load,
    load_mode: e.loadMode,
    load_value: e.loadValue,
    server_info: JSON.stringify(e.serverInfo),
    tool_version: e.toolVersion,
    ...e.latency,
    output_tok_s: e.outputTokPerS,
    requests_s: e.requestsPerS,
    completed: e.completed,
    failed: e.failed,
    validity: e.validity,
    client_health: e.clientHealth,
    has_records: e.hasRecords ? 1 : 0,
    metrics: JSON.stringify(e.metrics),
  };
  return COLUMNS.map(([n]) => byColumn[n] ?? null);
}

/** A row as read back. */
export function entryOfRow(row: Record<string, SqlValue>): HistoryEntry {
  const s = (k: string) => (row[k] === null ? null : String(row[k]));
  const n = (k: string) => (row[k] === null ? null : Number(row[k]));
  const latency: Record<string, number | null> = {};
  for (const c of LATENCY_COLUMNS) latency[c] = n(c);
  return {
    id: String(row.id),
    sessionId: s('session_id'),
    sessionKind: s('session_kind'),
    kind: String(row.kind),
    command: s('command'),
    dir: String(row.dir),
    startedAt: s('started_at'),
    endedAt: s('ended_at'),
    interrupted: row.interrupted === 1,
    model: s('model'),
    url: s('url'),
    engine: s('engine'),
    engineVersion: s('engine_version'),
    gpuType: s('gpu_type'),
    gpuCount: n('gpu_count'),
    label: s('label'),
    tags: JSON.parse(String(row.tags)) as string[],
    note: s('note'),
    scenario: s('scenario'),
    load: s('load'),
    loadMode: s('load_mode'),
    loadValue: n('load_value'),
    serverInfo: JSON.parse(String(row.server_info)) as Record<string, string>,
    toolVersion: s('tool_version'),
    latency,
    outputTokPerS: n('output_tok_s'),
    requestsPerS: n('requests_s'),
    completed: n('completed'),
    failed: n('failed'),
    validity: s('validity'),
    clientHealth: s('client_health'),
    hasRecords: row.has_records === 1,
    metrics: JSON.parse(String(row.metrics)) as Record<string, number>,
  };
}

/** Adds or replaces rows (a row is its directory's: indexing one twice changes nothing). */
export function putEntries(db: Database, entries: readonly HistoryEntry[]): void {
  const insert = db.prepare(
    `INSERT OR REPLACE INTO runs VALUES (${COLUMNS.map(() => '?').join(', ')})`,
  );
  const clearTags = db.prepare('DELETE FROM tags WHERE run_id = ?');
  const tag = db.prepare('INSERT OR IGNORE INTO tags VALUES (?, ?)');
  try {
    db.run('BEGIN');
    for (const e of entries) {
      insert.run(rowValues(e));
      clearTags.run([e.id]);
      for (const t of e.tags) tag.run([e.id, t]);
    }
    db.run('COMMIT');
  } finally {
    insert.free();
    clearTags.free();
    tag.free();
  }
}

/** Every row, oldest first. */
export function allEntries(db: Database): HistoryEntry[] {
  const st = db.prepare('SELECT * FROM runs ORDER BY started_at, id');
  const out: HistoryEntry[] = [];
  try {
    while (st.step()) out.push(entryOfRow(st.getAsObject()));
  } finally {
    st.free();
  }
  return out;
}

/** Why a database file cannot be used (damaged, not SQLite, another layout); undefined if it can. */
function problemOf(db: Database): string | undefined {
  try {
    const version = db.exec('PRAGMA user_version')[0]?.values[0]?.[0];
    if (version !== SCHEMA_VERSION) {
      return `its layout is version ${String(version)}, this infergauge reads version ${SCHEMA_VERSION}`;
    }
    const check = db.exec('PRAGMA quick_check')[0]?.values[0]?.[0];
    if (check !== 'ok') return `it is damaged (${String(check)})`;
    db.exec('SELECT id FROM runs LIMIT 1; SELECT tag FROM tags LIMIT 1');
    return undefined;
  } catch (err) {
    return `it is not a readable SQLite database (${(err as Error).message})`;
  }
}

/** A database's file, opened; `problem` set (and `db` empty) when it cannot be used. */
function openFile(SQL: SqlJsStatic, path: string): { db?: Database; problem?: string } {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { problem: 'missing' };
    return { problem: `it cannot be read (${(err as Error).message})` };
  }
  let db: Database;
  try {
    db = new SQL.Database(bytes);
  } catch (err) {
    return { problem: `it is not a readable SQLite database (${(err as Error).message})` };
  }
  const problem = problemOf(db);
  if (problem) {
    db.close();
    return { problem };
  }
  return { db };
}

/** An empty database with the current tables. */
function emptyDatabase(SQL: SqlJsStatic): Database {
  const db = new SQL.Database();
  for (const statement of SCHEMA) db.run(statement);
  return db;
}

/** Says something worth knowing (a rebuild, a lock broken or given up on). */
export type HistoryNotice = (message: string) => void;

/**
 * A database made from the directories under `root`: one row per measured point. `onNotice`
 * hears what the reader skipped; a directory that cannot be read is passed over and said.
 */
export async function buildFromDirs(
  SQL: SqlJsStatic,
  root: string,
  onNotice: HistoryNotice,
): Promise<{ db: Database; rows: number }> {
  const entries: HistoryEntry[] = [];
  for (const dir of findPointDirs(root, onNotice)) {
    try {
      entries.push(await entryOf(root, dir, onNotice));
    } catch (err) {
      onNotice(`history: ${dir} not indexed: ${(err as Error).message}`);
    }
  }
  const db = emptyDatabase(SQL);
  putEntries(db, entries);
  return { db, rows: entries.length };
}

/** Writes `bytes` to `path` whole or not at all: temporary file, fsync, rename. */
function writeAtomic(path: string, bytes: Uint8Array): void {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, bytes);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // Already gone.
    }
    throw err;
  }
}

/** How long `withLock` waits for another holder, by default. */
export const LOCK_WAIT_MS = 10_000;

/** The lock could not be had within the wait: the change is not made, and said. */
export class HistoryBusyError extends InfergaugeError {
  constructor(message: string) {
    super(message, 'IG_HISTORY_BUSY');
  }
}

interface LockHolder {
  pid: number;
  at: string;
  token: string;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Why the lock at `path` is stale (its holder is gone, or it is too old); undefined if not. */
function staleness(path: string, text: string): string | undefined {
  let holder: Partial<LockHolder> = {};
  try {
    holder = JSON.parse(text) as Partial<LockHolder>;
  } catch {
    // Torn (its writer died between create and write): judged by age alone.
  }
  let ageMs: number;
  try {
    ageMs = Date.now() - statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
  if (ageMs > STALE_LOCK_MS) return `held for ${Math.round(ageMs / 1000)} s`;
  if (typeof holder.pid === 'number' && !alive(holder.pid)) {
    return `its holder (pid ${holder.pid}) is gone`;
  }
  return undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `body` holding `<root>/history.db.lock`. A stale lock (holder gone, or older than
 * STALE_LOCK_MS) is broken with a notice; a live one is waited for, at most `waitMs` in all,
 * then HistoryBusyError. Breaking renames the lock aside and checks it is still the stale one,
 * so that a lock just taken by another process is never removed by a late breaker.
 */
export async function withLock<T>(
  root: string,
  body: () => Promise<T> | T,
  onNotice: HistoryNotice,
  waitMs = LOCK_WAIT_MS,
): Promise<T> {
  const path = join(root, LOCK_FILE);
  const token = randomBytes(8).toString('hex');
  const mine = JSON.stringify({ pid: process.pid, at: new Date().toISOString(), token });
  const until = performance.now() + waitMs;
  for (let attempt = 0; ; attempt++) {
    let fd: number | undefined;
    try {
      fd = openSync(path, 'wx');
      writeSync(fd, mine);
      closeSync(fd);
      break;
    } catch (err) {
      if (fd !== undefined) {
        // Created but not written (a full or failing disk): an empty lock would hold every
        // writer off until it turned stale, so it goes with the failure.
        try {
          closeSync(fd);
        } catch {}
        try {
          unlinkSync(path);
        } catch {}
        throw err;
      }
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let text = '';
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      continue; // Released between the two calls: try again at once.
    }
    const stale = staleness(path, text);
    if (stale) {
      const aside = `${path}.${token}.stale`;
      try {
        renameSync(path, aside);
        if (readFileSync(aside, 'utf8') === text) {
          unlinkSync(aside);
          onNotice(`history: broke a stale lock ${path} (${stale})`);
        } else {
          // Another process took the lock in between: give it back.
          try {
            linkSync(aside, path);
          } catch {
            // The lock was taken again meanwhile; that holder goes on.
          }
          unlinkSync(aside);
        }
      } catch {
        // Another breaker moved it first.
      }
      continue;
    }
    if (performance.now() >= until) {
      throw new HistoryBusyError(
        `${path} is held by another process (${text.slice(0, 120) || 'no holder written'}) for longer than ${Math.round(waitMs / 1000)} s`,
      );
    }
    // Jittered, so that writers that collided do not collide again in step.
    await sleep(
      Math.min(10 + Math.random() * 20 * Math.min(attempt + 1, 5), until - performance.now()),
    );
  }
  try {
    return await body();
  } finally {
    try {
      if (readFileSync(path, 'utf8') === mine) unlinkSync(path);
    } catch {
      // Broken by another process as stale: nothing of ours to remove.
    }
  }
}

export interface ChangeOptions {
  onNotice: HistoryNotice;
  /** How long to wait for another writer's lock (LOCK_WAIT_MS by default). */
  waitMs?: number;
  /** Build the database from the directories whatever the file holds (`--reindex`). */
  rebuild?: boolean;
  /**
   * The session being indexed: a missing database is said only when it is rebuilt with rows of
   * other sessions (a results root's first run makes its database without a word).
   */
  session?: string;
  /**
   * Whether a missing database is built from every results directory under the root (the
   * default), or starts with what this change adds: a run saved with `--out /tmp/x` indexes
   * into /tmp/history.db without walking all of /tmp (`--reindex` adds what is there).
   */
  scanWhenMissing?: boolean;
}

/**
 * Changes the database at `<root>/history.db` under its lock: opens it (rebuilding it from the
 * directories, with a warning, when it is missing, damaged or of another layout), runs
 * `change`, and writes it back atomically. Returns what `change` returned.
 */
export async function changeHistory<T>(
  root: string,
  change: (db: Database) => Promise<T> | T,
  o: ChangeOptions,
): Promise<T> {
  const SQL = await loadSqlJs();
  const path = join(root, HISTORY_FILE);
  return withLock(
    root,
    async () => {
      let db: Database | undefined;
      if (!o.rebuild) {
        const opened = openFile(SQL, path);
        db = opened.db;
        if (!db && opened.problem !== 'missing') {
          o.onNotice(`history: ${path} is rebuilt from the results directories: ${opened.problem}`);
        }
      }
      if (!db && o.scanWhenMissing === false && !existsSync(path)) db = emptyDatabase(SQL);
      if (!db) {
        db = (await buildFromDirs(SQL, root, o.onNotice)).db;
        const others = countOthers(db, o.session);
        if (!o.rebuild && others > 0 && !existsSync(path)) {
          o.onNotice(
            `history: ${path} was missing: rebuilt from the ${others} measured point${others === 1 ? '' : 's'} under ${root}`,
          );
        }
      }
      try {
        const result = await change(db);
        writeAtomic(path, db.export());
        return result;
      } finally {
        db.close();
      }
    },
    o.onNotice,
    o.waitMs,
  );
}

/** Rows of sessions other than `session`. */
function countOthers(db: Database, session: string | undefined): number {
  const st = db.prepare('SELECT count(*) FROM runs WHERE session_id IS NOT ?');
  try {
    st.bind([session ?? null]);
    st.step();
    return Number(st.get()[0]);
  } finally {
    st.free();
  }
}

/**
 * The database at `<root>/history.db` to read: as it is when it can be used, else rebuilt
 * from the directories and saved (with a warning). The caller closes it.
 */
export async function readHistory(root: string, onNotice: HistoryNotice): Promise<Database> {
  const SQL = await loadSqlJs();
  const path = join(root, HISTORY_FILE);
  const opened = openFile(SQL, path);
  if (opened.db) return opened.db;
  // Rebuilt under the lock (another process may be writing it), then read as saved.
  try {
    await changeHistory(root, () => undefined, { onNotice });
  } catch (err) {
    // Busy, or a root this process may read but not write (CI artifacts): read all the same.
    onNotice(`history: ${(err as Error).message}; read from the directories, not saved`);
    return (await buildFromDirs(SQL, root, onNotice)).db;
  }
  const again = openFile(SQL, path);
  if (again.db) return again.db;
  throw new InfergaugeError(`cannot read ${path}: ${again.problem}`, 'IG_HISTORY_UNREADABLE');
}
