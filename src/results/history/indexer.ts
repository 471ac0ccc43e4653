/**
 * Indexing directories into the history database: the one entry point of the session's output
 * and of `infergauge history tag` (the rows are made from the directories, as a rebuild makes
 * them).
 */
import { dirname, resolve } from 'node:path';
import { entryOf, type HistoryEntry } from './entry.js';
import { changeHistory, type HistoryNotice, putEntries } from './store.js';

/** The history's root of a session's results directory: the folder that holds it. */
export function historyRootOf(sessionRoot: string): string {
  return dirname(resolve(sessionRoot));
}

export interface IndexOptions {
  onNotice: HistoryNotice;
  /** How long to wait for another writer (store.ts LOCK_WAIT_MS by default). */
  waitMs?: number;
  /** The session whose points these are (a missing database is then rebuilt without a word). */
  session?: string;
  /** See ChangeOptions.scanWhenMissing. */
  scanWhenMissing?: boolean;
}

/** Indexes point directories under `root` (each made a row from its files); returns the rows. */
export async function indexDirs(
  root: string,
  dirs: readonly string[],
  o: IndexOptions,
): Promise<HistoryEntry[]> {
  const entries: HistoryEntry[] = [];
  for (const dir of dirs) {
    try {
      entries.push(await entryOf(root, dir, o.onNotice));
    } catch (err) {
      // One unreadable directory (a hand-made one, a manifest torn by a crash) costs its own row only.
      o.onNotice(`history: ${dir} not indexed: ${(err as Error).message}`);
    }
  }
  if (entries.length === 0) return entries;
  await changeHistory(root, (db) => putEntries(db, entries), {
    onNotice: o.onNotice,
    ...(o.waitMs !== undefined ? { waitMs: o.waitMs } : {}),
    ...(o.session !== undefined ? { session: o.session } : {}),
    ...(o.scanWhenMissing !== undefined ? { scanWhenMissing: o.scanWhenMissing } : {}),
  });
  return entries;
}
