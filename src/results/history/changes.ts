/**
 * Changes to the history made after the runs: tags added or taken away (`history tag`), and
 * other tools' result files imported as runs (`history --import`). Each writes to the run
 * directories first (the source of truth: a `tags.json` beside a run, an imported run's own
 * directory), then indexes them as a run's end does.
 */

import { existsSync, statSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { FOREIGN_FORMAT_NAMES, readForeign } from '../foreign/index.js';
import { writeForeignRuns } from '../foreign/materialise.js';
import { resultPath, writeJson } from '../layout.js';
import { newId } from '../runFiles.js';
import { type HistoryEntry, readTagsSidecar, sessionPointDirs } from './entry.js';
import { indexDirs } from './indexer.js';
import { type HistoryNotice, readHistory } from './store.js';

/** What a change could not do, in a sentence, and whether the user's input was at fault. */
export interface ChangeProblem {
  problem: string;
  usage: boolean;
}

/**
 * Adds `tags` to (or, `untag`, takes them from) a run: a point's or a session's id as the
 * history lists it, or a results directory under `root`. Returns the rows as indexed again.
 */
export async function tagRun(
  root: string,
  run: string,
  tags: readonly string[],
  o: { untag?: boolean; onNotice: HistoryNotice },
): Promise<HistoryEntry[] | ChangeProblem> {
  let dirs: string[];
  if (existsSync(run) && statSync(run).isDirectory()) {
    // Rows are keyed by their path under the root: a directory elsewhere belongs to another.
    if (relative(root, resolve(run)).startsWith('..')) {
      return {
        problem: `${run} is not under ${root}: give the results root that holds it with --root`,
        usage: true,
      };
    }
    dirs = sessionPointDirs(resolve(run));
  } else {
    const db = await readHistory(root, o.onNotice);
    try {
      const st = db.prepare('SELECT dir FROM runs WHERE id = ? OR session_id = ? ORDER BY dir');
      dirs = [];
      st.bind([run, run]);
      while (st.step()) dirs.push(resolve(root, String(st.get()[0])));
      st.free();
    } finally {
      db.close();
    }
  }
  if (dirs.length === 0) {
    return {
      problem: `${run}: no run with this id or session id in ${root}/history.db, and no such results directory`,
      usage: false,
    };
  }
  for (const dir of dirs) {
    const sidecar = readTagsSidecar(dir);
    const add = o.untag
      ? sidecar.add.filter((t) => !tags.includes(t))
      : [...new Set([...sidecar.add, ...tags])];
    const remove = o.untag
      ? [...new Set([...sidecar.remove, ...tags])]
      : sidecar.remove.filter((t) => !tags.includes(t));
    writeJson(resultPath(dir, 'tags'), { add, remove });
  }
  return indexDirs(root, dirs, { onNotice: o.onNotice });
}

/** An imported run as indexed, and what it was read as (`vLLM bench serve JSON, per request`). */
export interface ImportedRun {
  entry: HistoryEntry;
  readAs: string;
}

/**
 * Reads each file as another tool's runs (results/foreign/), writes them as run directories
 * under `<root>/imported/` with `tags`, and indexes them. A file that cannot be read is told
 * through `onNotice` and counted in `failed`; the others are still imported.
 */
export async function importFiles(
  root: string,
  files: readonly string[],
  o: { tags?: readonly string[]; onNotice: HistoryNotice },
): Promise<{ imported: ImportedRun[]; failed: number }> {
  let failed = 0;
  const dirs: string[] = [];
  const readAs = new Map<string, string>();
  for (const file of files) {
    let runs: Awaited<ReturnType<typeof readForeign>>;
    try {
      runs = await readForeign(file);
    } catch (err) {
      o.onNotice((err as Error).message);
      failed++;
      continue;
    }
    // The file's name, kept readable in the folder's; the id keeps two imports apart.
    const name = basename(file)
      .replace(/[^A-Za-z0-9._-]+/g, '_')
      .slice(0, 80);
    const written = writeForeignRuns(runs, join(root, 'imported', `${name}-${newId()}`));
    for (const [i, d] of written.entries()) {
      const run = runs[i];
      if (run) {
        readAs.set(
          resolve(d),
          `${FOREIGN_FORMAT_NAMES[run.format]}, ${run.perRequest ? 'per request' : 'summary-only'}`,
        );
      }
      if (o.tags?.length) writeJson(resultPath(d, 'tags'), { add: o.tags, remove: [] });
    }
    dirs.push(...written);
  }
  const entries = await indexDirs(root, dirs, { onNotice: o.onNotice });
  return {
    imported: entries.map((entry) => ({
      entry,
      readAs: readAs.get(resolve(root, entry.dir)) ?? 'imported',
    })),
    failed,
  };
}
