/**
 * One history row: what the database keeps of a measured point directory (a run, a scenario of
 * several, a sweep point, a probe point, a capacity step), read through the one reader of
 * results directories (results/reader.ts). The directory is the source of truth: a row is
 * always made from it, live (as a point finishes) and on `--reindex` alike, so the two agree.
 */
import { relative, sep } from 'node:path';
import type { Threshold } from '../../analysis/thresholds.js';
import { thresholdName, thresholdValue } from '../../analysis/thresholds.js';
import { METRICS } from '../../metrics/catalog.js';
import { clientHealthVerdict } from '../../metrics/clientHealth.js';
import type { RunSummary } from '../../metrics/summary.js';
import { validityOf } from '../../metrics/validity.js';
import { hasResult, readJson, resultPath, walkResultsTree } from '../layout.js';
import {
  isRunDir,
  type OnReadProblem,
  readManifest,
  readRunView,
  readSummary,
  savedLoad,
  unfinishedContext,
  unfinishedRunSummary,
} from '../reader.js';
import type { Manifest } from '../schemas.js';

/** The headline latencies kept as columns, and their statistics. */
export const HEADLINE_LATENCIES = ['ttft', 'itl', 'tpot', 'e2e'] as const;
export const HEADLINE_STATS = ['mean', 'p50', 'p90', 'p95', 'p99'] as const;
const LATENCY_KEY = { ttft: 'ttftMs', itl: 'itlMs', tpot: 'tpotMs', e2e: 'e2eMs' } as const;

/** A row of the history database (history/store.ts keeps it; the names are its columns'). */
export interface HistoryEntry {
  /** The manifest's id (`dir:<path>` for a run of the first layout, which has none). */
  id: string;
  sessionId: string | null;
  sessionKind: string | null;
  kind: string;
  command: string | null;
  /** Relative to the history's root, `/`-separated. */
  dir: string;
  startedAt: string | null;
  endedAt: string | null;
  /** Killed or stopped mid-way: no end time in its manifest, or its summary says so. */
  interrupted: boolean;
  model: string | null;
  /** The server's URL; `builtin-simulator` or `virtual` for the simulator's (its port varies). */
  url: string | null;
  engine: string | null;
  engineVersion: string | null;
  gpuType: string | null;
  gpuCount: number | null;
  label: string | null;
  tags: string[];
  note: string | null;
  scenario: string | null;
  /** `closed:8`, `open:20/s`. */
  load: string | null;
  loadMode: string | null;
  /** Concurrency (closed) or requests per second (open). */
  loadValue: number | null;
  /** `--server-info KEY=VALUE` and what the server told, as given. */
  serverInfo: Record<string, string>;
  toolVersion: string | null;
  /** `ttft_p99_ms`: the headline latencies, ms. */
  latency: Record<string, number | null>;
  outputTokPerS: number | null;
  requestsPerS: number | null;
  completed: number | null;
  failed: number | null;
  validity: string | null;
  clientHealth: string | null;
  hasRecords: boolean;
  /** Every catalogue metric the summary has, by the names --metric takes (`ttft.p99`). */
  metrics: Record<string, number>;
}

/** The column of a headline latency: `ttft_p99_ms`. */
export const latencyColumn = (metric: string, stat: string) => `${metric}_${stat}_ms`;

/** `tags.json` beside a run: tags added and removed after it ran (`history tag`). */
export interface TagsSidecar {
  add: string[];
  remove: string[];
}

export function readTagsSidecar(dir: string): TagsSidecar {
  const value = readJson(resultPath(dir, 'tags')) as Partial<TagsSidecar> | undefined;
  const list = (x: unknown) =>
    Array.isArray(x) ? x.filter((t): t is string => typeof t === 'string') : [];
  return { add: list(value?.add), remove: list(value?.remove) };
}

/** The run's tags: its plan's, then those added after, less those removed. */
export function effectiveTags(planTags: readonly string[], sidecar: TagsSidecar): string[] {
  const removed = new Set(sidecar.remove);
  const tags: string[] = [];
  for (const t of [...planTags, ...sidecar.add]) {
    if (!removed.has(t) && !tags.includes(t)) tags.push(t);
  }
  return tags;
}

const str = (x: unknown): string | null => (typeof x === 'string' && x !== '' ? x : null);
const num = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);

/** A string map of an object (serverInfo, info): non-strings as JSON. */
function stringMap(x: unknown): Record<string, string> {
  if (x === null || typeof x !== 'object' || Array.isArray(x)) return {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(x)) {
    if (v === undefined || v === null) continue;
    out[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  return out;
}

/** The scenario's name: the manifest's, else the first layout's `name: lengths` description. */
function scenarioOf(manifest: Manifest): string | null {
  const own = str((manifest as { scenario?: unknown }).scenario);
  if (own) return own;
  const described = str((manifest.workload as { scenario?: unknown } | undefined)?.scenario);
  return described ? (described.split(':')[0]?.trim() ?? null) : null;
}

/** The server's URL as a series key: the simulator's random loopback port is no identity. */
function urlOf(server: Record<string, unknown>): string | null {
  if (server.virtualTime === true) return 'virtual';
  if (server.builtInSimulator === true) return 'builtin-simulator';
  const url = str(server.url);
  if (url === null) return null;
  // Credentials in a URL never reach the index (the manifest's are stripped already; a
  // hand-made one may not be).
  try {
    const u = new URL(url);
    if (u.username === '' && u.password === '') return url;
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}

/** Every metric of the catalogue that the summary has, by its --metric name. */
function metricValues(summary: RunSummary): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of METRICS) {
    const stats = m.kind === 'run' ? [undefined] : METRIC_STATS;
    for (const stat of stats) {
      const t: Threshold = {
        text: '',
        metric: m.id,
        ...(stat ? { stat } : {}),
        op: '<',
        limit: 0,
        unit: m.unit,
      };
      let value: number | undefined;
      try {
        value = thresholdValue(summary, t);
      } catch {
        // A summary of an older layout may lack a part a metric reads: not measured.
        value = undefined;
      }
      if (value !== undefined) out[thresholdName(t)] = value;
    }
  }
  return out;
}
const METRIC_STATS = ['p50', 'p90', 'p95', 'p99', 'p99_9', 'mean', 'min', 'max'] as const;

/** `closed:8`, `open:20/s`, and the mode and value apart. */
function loadOf(load: { mode: string; concurrency?: number; rate?: number } | undefined) {
  if (!load) return { load: null, loadMode: null, loadValue: null };
  const value = load.mode === 'closed' ? load.concurrency : load.rate;
  const v = num(value);
  return {
    load: v === null ? load.mode : load.mode === 'closed' ? `closed:${v}` : `open:${v}/s`,
    loadMode: load.mode,
    loadValue: v,
  };
}

/** The id of a directory's row: its manifest's, else its path (the first layout had none). */
export function entryId(manifest: Manifest | undefined, rel: string): string {
  return manifest?.id ?? `dir:${rel}`;
}

/** `dir` relative to `root`, `/`-separated (the same on every platform). */
export function relativeDir(root: string, dir: string): string {
  return relative(root, dir).split(sep).join('/') || '.';
}

/**
 * The row of a measured point directory. A directory without summary.json (a killed run) is
 * summarised from its records by the read model and marked interrupted; `onProblem` hears
 * what the reader skipped or rebuilt.
 */
export async function entryOf(
  root: string,
  dir: string,
  onProblem: OnReadProblem = () => {},
): Promise<HistoryEntry> {
  const manifest = readManifest(dir) ?? {};
  let summary: RunSummary | undefined = readSummary(dir);
  const hasRecords = isRunDir(dir);
  if (!summary && hasRecords) {
    const builder = await readRunView(
      dir,
      { summary: unfinishedContext(dir, manifest) },
      // The history says it is interrupted: the reader's sentence about it is not news here.
      (m) => onProblem(m),
    );
    summary = unfinishedRunSummary(dir, builder, () => {});
  }
  const rel = relativeDir(root, dir);
  const m = manifest as Manifest & Record<string, unknown>;
  const plan = (m.plan ?? {}) as Record<string, unknown>;
  const server = (m.server ?? {}) as Record<string, unknown>;
  const gpu = (server.gpu ?? {}) as Record<string, unknown>;
  const planTags = Array.isArray(plan.tags)
    ? plan.tags.filter((t): t is string => typeof t === 'string')
    : [];
  const latency: Record<string, number | null> = {};
  for (const metric of HEADLINE_LATENCIES) {
    const d = summary?.latency[LATENCY_KEY[metric]];
    for (const stat of HEADLINE_STATS) {
      latency[latencyColumn(metric, stat)] = d && d.count > 0 ? num(d[stat]) : null;
    }
  }
  const health = summary?.clientHealth;
  return {
    id: entryId(manifest, rel),
    sessionId: m.parent?.id ?? str(m.id),
    sessionKind: m.parent?.kind ?? str(m.kind),
    kind: str(m.kind) ?? 'run',
    command: str(m.command),
    dir: rel,
    startedAt: str(m.startedAt),
    endedAt: str(m.endedAt),
    interrupted:
      summary?.interrupted === true || (m.schemaVersion === 2 && m.endedAt === undefined),
    model: str(m.model),
    url: urlOf(server),
    engine: str(server.engine),
    engineVersion: str(server.engineVersion),
    gpuType: str(gpu.type),
    gpuCount: num(gpu.count),
    label: str(plan.label),
    tags: effectiveTags(planTags, readTagsSidecar(dir)),
    note: str(plan.note),
    scenario: scenarioOf(manifest),
    ...loadOf(savedLoad(summary, manifest) as Parameters<typeof loadOf>[0]),
    serverInfo: { ...stringMap(server.info), ...stringMap(plan.serverInfo) },
    toolVersion: str(m.tool?.version),
    latency,
    outputTokPerS: num(summary?.throughput.outputTokensPerS),
    requestsPerS: num(summary?.throughput.requestsPerS),
    completed: num(summary?.requests.completed),
    failed: num(summary?.requests.failed),
    validity: summary ? (summary.validity ?? validityOf(summary.warnings)).verdict : null,
    clientHealth: health ? clientHealthVerdict(health) : null,
    hasRecords,
    metrics: summary ? metricValues(summary) : {},
  };
}

/**
 * Whether `dir` is a measured point: it holds records, or a point's manifest (a point killed
 * before its first record). A session's root (a sweep's, a probe's) is not: its points are.
 */
export function isPointDir(dir: string): boolean {
  if (isRunDir(dir)) return true;
  if (!hasResult(dir, 'manifest')) return false;
  try {
    const kind = readManifest(dir)?.kind;
    return kind !== undefined && POINT_KINDS.has(kind);
  } catch {
    return false;
  }
}
const POINT_KINDS = new Set(['run', 'sweep-point', 'probe-point', 'capacity-step']);

/** How deep under the root points are looked for: session, scenario or point, repeat. */
const SCAN_DEPTH = 4;

/**
 * Every measured point directory under `root`, in name order (layout.ts walkResultsTree: links
 * read once, folders that cannot be read passed over and said).
 */
export function findPointDirs(root: string, onSkipped: OnReadProblem = () => {}): string[] {
  const tree = walkResultsTree(root, (d) => d !== root && isPointDir(d), SCAN_DEPTH);
  for (const s of tree.skipped) onSkipped(s);
  return tree.dirs;
}

/** The point directories of a session's root (itself when it is the point). */
export function sessionPointDirs(dir: string): string[] {
  if (isPointDir(dir)) return [dir];
  return walkResultsTree(dir, isPointDir, SCAN_DEPTH - 1).dirs;
}
