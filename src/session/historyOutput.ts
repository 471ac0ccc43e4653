/**
 * The history database as an output: each point is indexed into `<results root>/history.db`
 * as it finishes (a database missing from the default root is first built from its directories;
 * elsewhere it starts with this session), and at the session's end every point of it not indexed yet (one cut short,
 * one whose indexing had to wait too long). The results root is the folder that holds the
 * session's directory. The history is an index of the directories, never their only copy: a
 * failure here is said once and never fails or holds the run (`infergauge history --reindex`
 * rebuilds it from the directories), and each wait for another writer is bounded.
 */
import { resolve } from 'node:path';
import { DEFAULT_RESULTS_ROOT } from '../results/layout.js';
import type { Output, SessionInfo } from './events.js';
import type { Notify } from './target.js';

/** At a point's end, how long indexing may wait for another writer before leaving it for later. */
const POINT_WAIT_MS = 2_000;
/** At the session's end, the last try. */
const SESSION_WAIT_MS = 5_000;

export function historyOutput(
  onNotice: Notify = () => {},
  waits: { pointMs?: number; sessionMs?: number } = {},
): Output {
  const indexed = new Set<string>();
  let told = false;
  const index = async (session: SessionInfo, dirs: string[], waitMs: number) => {
    const todo = dirs.map((d) => resolve(d)).filter((d) => !indexed.has(d));
    if (todo.length === 0) return;
    // Loaded here: a session that saves nothing never loads sql.js.
    const { historyRootOf, indexDirs } = await import('../results/history/indexer.js');
    const root = historyRootOf(session.root);
    // Only the default results root is walked to make a missing database: the folder above an
    // --out directory may be any folder (/tmp), whose other contents are not this run's to read.
    const scanWhenMissing = root === resolve(DEFAULT_RESULTS_ROOT);
    try {
      await indexDirs(root, todo, { onNotice, waitMs, session: session.id, scanWhenMissing });
      for (const d of todo) indexed.add(d);
    } catch (err) {
      if (told) return;
      told = true;
      onNotice(
        `history: not indexed in ${root}/history.db: ${(err as Error).message} (the results are saved; infergauge history --reindex adds them)`,
      );
    }
  };
  return {
    name: 'history',
    async pointFinished({ session, point }) {
      if (point.dir !== undefined) {
        await index(session, [point.dir], waits.pointMs ?? POINT_WAIT_MS);
      }
    },
    async sessionFinished({ session, error }) {
      // A session that failed (its results could not be written) writes nothing new.
      if (error) return;
      const { sessionPointDirs } = await import('../results/history/entry.js');
      await index(session, sessionPointDirs(session.root), waits.sessionMs ?? SESSION_WAIT_MS);
    },
  };
}
