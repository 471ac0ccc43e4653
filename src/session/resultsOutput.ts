/**
 * The results directory as an output: each point's manifest, records, telemetry, client
 * health and summary, and a manifest at the session's root when its points have their own
 * directories (sweep, probe, capacity, several scenarios). Records reach disk as they finish.
 */
import { mkdirSync } from 'node:fs';
import { relative } from 'node:path';
import type { RecordsFormat, RequestRecord } from '../record.js';
import { JsonlWriter, openRecordsWriter, writeClientHealth } from '../results/jsonl.js';
import { hasResult, RESULT_FILES, resultPath } from '../results/layout.js';
import {
  type ManifestAbout,
  type ManifestHeader,
  openRunDir,
  writeManifest,
  writeSummary,
} from '../results/runFiles.js';
import {
  environmentFromSnapshot,
  mergeEnvironment,
  type ServerEnvironment,
} from '../telemetry/environment.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { Output, PointInfo, SessionInfo } from './events.js';

interface OpenPoint {
  dir: string;
  header: ManifestHeader;
  about: ManifestAbout;
  records: JsonlWriter<RequestRecord>;
  telemetry?: JsonlWriter<TelemetrySnapshot>;
  /** What the point's telemetry said about the server (engine, build, GPUs), so far. */
  environment?: ServerEnvironment;
}

/** A point's directory, or why it cannot be written. */
function dirOf(point: PointInfo): string {
  if (point.dir === undefined) {
    throw new Error(`point ${point.id} has no directory: the results output needs one`);
  }
  return point.dir;
}

/**
 * Runs a write into `where` (a file, or a directory for its small files), naming it in the
 * error: a full or read-only disk says ENOSPC or EROFS, and `write` alone would not say where.
 */
function writing(where: string, write: () => void): void {
  try {
    write();
  } catch (err) {
    const { code, message } = err as NodeJS.ErrnoException;
    throw Object.assign(new Error(`cannot write ${where}: ${message}`, { cause: err }), {
      ...(code !== undefined ? { code } : {}),
    });
  }
}

/** `recordsFormat`: records.jsonl (the default) or records.jsonl.gz. */
export function resultsOutput(recordsFormat?: RecordsFormat): Output {
  const open = new Map<string, OpenPoint>();
  const points: { id: string; kind: string; dir: string }[] = [];
  let rootAbout: ManifestAbout | undefined;
  const rootHeader = (s: SessionInfo, endedAt?: string): ManifestHeader => ({
    id: s.id,
    kind: s.kind,
    command: s.command,
    ...(endedAt ? { endedAt } : {}),
  });
  const closePoint = (p: OpenPoint) => {
    p.records.close();
    p.telemetry?.close();
  };
  return {
    name: 'results',
    required: true,
    sessionStarted(s) {
      if (s.rootIsPoint) return;
      // Never over another session's results: its manifest would be lost.
      if (hasResult(s.root, 'manifest')) {
        throw new Error(
          `${s.root} already holds results (${RESULT_FILES.manifest}); choose another --out`,
        );
      }
      mkdirSync(s.root, { recursive: true });
      rootAbout = { startedAt: s.startedAt, plan: s.plan, points };
      writeManifest(s.root, rootHeader(s), rootAbout);
    },
    pointStarted({ session, point, manifest }) {
      const dir = dirOf(point);
      openRunDir(dir);
      const header: ManifestHeader = {
        id: point.id,
        kind: point.kind,
        command: session.command,
        ...(session.rootIsPoint
          ? {}
          : { parent: { id: session.id, kind: session.kind, dir: relative(dir, session.root) } }),
      };
      writeManifest(dir, header, manifest);
      open.set(point.id, {
        dir,
        header,
        about: manifest,
        records: openRecordsWriter(dir, recordsFormat),
      });
      if (!session.rootIsPoint) {
        points.push({ id: point.id, kind: point.kind, dir: relative(session.root, dir) });
      }
    },
    records(e) {
      const p = open.get(e.point.id);
      if (!p) throw new Error(`records for point ${e.point.id}, which has not started`);
      writing(p.records.path, () => {
        if (e.lines !== undefined) p.records.writeLines(e.lines, e.count);
        else for (const r of e.records()) p.records.write(r);
      });
    },
    telemetry({ point, snapshot }) {
      const p = open.get(point.id);
      if (!p) return;
      const path = resultPath(p.dir, 'telemetry');
      writing(path, () => {
        p.telemetry ??= new JsonlWriter<TelemetrySnapshot>(path);
        p.telemetry.write(snapshot);
      });
      const said = environmentFromSnapshot(snapshot);
      if (Object.keys(said).length > 0) p.environment = mergeEnvironment(p.environment ?? {}, said);
    },
    pointFinished({ point, summary, serverMetrics, saveServerMetrics, threads, endedAt }) {
      const p = open.get(point.id);
      if (!p) return;
      open.delete(point.id);
      writing(p.dir, () => {
        closePoint(p);
        // Kept raw, so that `infergauge merge` can judge shards' threads as it judges workers.
        if (threads) writeClientHealth(p.dir, threads);
        writeSummary(p.dir, summary, saveServerMetrics ? serverMetrics : undefined);
        writeManifest(p.dir, { ...p.header, endedAt }, withEnvironment(p.about, p.environment));
      });
    },
    sessionFinished({ session, endedAt }) {
      for (const p of open.values()) closePoint(p);
      open.clear();
      if (rootAbout) writeManifest(session.root, rootHeader(session, endedAt), rootAbout);
    },
  };
}

/**
 * The manifest's `server` with what the point's telemetry said about it (it arrives after the
 * manifest is first written): an engine the server did not name, build facts, and the GPUs DCGM
 * or nvidia-smi saw, over the ones `--server-info gpu=` stated.
 */
function withEnvironment(about: ManifestAbout, seen: ServerEnvironment | undefined): ManifestAbout {
  if (!seen || !about.server) return about;
  // The server object is shared by a session's points: a new one, never a change to it.
  const server = about.server as Record<string, unknown> & ServerEnvironment;
  return { ...about, server: { ...server, ...mergeEnvironment(server, seen) } };
}
