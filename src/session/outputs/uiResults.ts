/**
 * `infergauge ui [RESULTS_DIR]`: finished results in the browser, on the same server rules as
 * the live dashboard (loopback, or a token). A results directory (a run, sweep, probe, capacity
 * search, several scenarios) is served as its report; a folder of them (infergauge-results/)
 * as a list of its sessions, each linking to its report. report.html is served as saved; a
 * directory without one (--no-html) is rendered from its records when asked, through the same
 * read model as `infergauge report`.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { relative } from 'node:path';
import { resultKind, resultPath, walkResultsTree } from '../../results/layout.js';
import { isRunDir, readManifest } from '../../results/reader.js';
import type { Notify } from '../target.js';
import { send, startUiServer, type UiAddress, type UiServer } from './uiServer.js';

/** A results directory the page lists. */
export interface ResultsEntry {
  dir: string;
  /** Its path under the root, as listed. */
  name: string;
  kind: string;
  command?: string;
  model?: string;
  startedAt?: string;
}

const isResults = (dir: string) => resultKind(dir) !== undefined || isRunDir(dir);

/**
 * The results directories at or under `root` (down to 3 levels), the outermost only: a sweep is
 * listed, not each of its points.
 */
export function listResults(root: string, onSkipped: Notify = () => {}): ResultsEntry[] {
  const tree = walkResultsTree(root, isResults, 3);
  for (const s of tree.skipped) onSkipped(s);
  const outer = tree.dirs.filter(
    (d) =>
      !tree.dirs.some((o) => o !== d && !relative(o, d).startsWith('..') && relative(o, d) !== ''),
  );
  return outer.map((dir) => {
    let manifest: ReturnType<typeof readManifest>;
    try {
      manifest = readManifest(dir);
    } catch {
      manifest = undefined;
    }
    const m = manifest as { command?: unknown; model?: unknown; startedAt?: unknown } | undefined;
    return {
      dir,
      name: relative(root, dir) || '.',
      kind: resultKind(dir) ?? 'run (unfinished)',
      ...(typeof m?.command === 'string' ? { command: m.command } : {}),
      ...(typeof m?.model === 'string' ? { model: m.model } : {}),
      ...(typeof m?.startedAt === 'string' ? { startedAt: m.startedAt } : {}),
    };
  });
}

/** Serves `root`: its report when it is one results directory, else the list of those under it. */
export async function serveResults(
  root: string,
  address: UiAddress,
  onNotice: Notify,
): Promise<UiServer> {
  const single = isResults(root);
  const entries = single ? [] : listResults(root, onNotice);
  if (!single && entries.length === 0) {
    throw new Error(
      `${root} holds no infergauge results (no run, sweep, probe or capacity directory)`,
    );
  }
  return startUiServer(
    address,
    (req, res, url) => {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        send(res, 405, 'text/plain; charset=utf-8', 'method not allowed');
        return;
      }
      if (single && url.pathname === '/') return void report(res, root, onNotice);
      if (!single && url.pathname === '/') {
        send(
          res,
          200,
          'text/html; charset=utf-8',
          listPage(root, entries, url.searchParams.get('token')),
          {
            'content-security-policy':
              "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
          },
        );
        return;
      }
      // /r/INDEX/: an index, never a path, so that no request names a file of its own.
      const m = /^\/r\/(\d+)\/$/.exec(url.pathname);
      const entry = m && !single ? entries[Number(m[1])] : undefined;
      if (entry) return void report(res, entry.dir, onNotice);
      send(res, 404, 'text/plain; charset=utf-8', 'not found');
    },
    true,
  );
}

async function report(res: ServerResponse, dir: string, onNotice: Notify): Promise<void> {
  const saved = resultPath(dir, 'report');
  try {
    let html: string | Buffer;
    if (existsSync(saved)) html = readFileSync(saved);
    else {
      // Loaded when first asked: the renderer and the readers are the report command's.
      const [{ renderHtmlReport }, { loadReportInput }] = await Promise.all([
        import('../../report/html.js'),
        import('../../results/load.js'),
      ]);
      html = renderHtmlReport(await loadReportInput(dir, onNotice));
    }
    send(res, 200, 'text/html; charset=utf-8', html);
  } catch (err) {
    send(
      res,
      500,
      'text/plain; charset=utf-8',
      `could not render ${dir}: ${(err as Error).message}`,
    );
  }
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The list of results, newest first; every name and label escaped (folder names are anyone's). */
export function listPage(
  root: string,
  entries: readonly ResultsEntry[],
  token: string | null,
): string {
  const q = token ? `?token=${encodeURIComponent(token)}` : '';
  const order = entries
    .map((e, index) => ({ e, index }))
    .sort(
      (a, b) =>
        (b.e.startedAt ?? '').localeCompare(a.e.startedAt ?? '') ||
        a.e.name.localeCompare(b.e.name),
    );
  const rows = order
    .map(
      ({ e, index }) =>
        `<tr><td><a href="r/${index}/${escapeHtml(q)}">${escapeHtml(e.name)}</a></td><td>${escapeHtml(e.command ?? e.kind)}</td><td>${escapeHtml(e.model ?? '')}</td><td>${escapeHtml(e.startedAt ?? '')}</td></tr>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><link rel="icon" href="data:,">
<title>infergauge: ${escapeHtml(root)}</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:20px;color:#1d2433}table{border-collapse:collapse}th,td{text-align:left;padding:4px 12px;border-bottom:1px solid #e4e7ec}.muted{color:#667085}</style>
</head><body>
<h1>infergauge results <span class="muted">${escapeHtml(root)}</span></h1>
<table id="results"><thead><tr><th>results</th><th>command</th><th>model</th><th>started</th></tr></thead>
<tbody>
${rows}
</tbody></table>
</body></html>
`;
}
