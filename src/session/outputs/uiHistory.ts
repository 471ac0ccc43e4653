/**
 * What the live dashboard remembers of a session, so that a tab opened late sees the whole run:
 * one small row per snapshot and per telemetry scrape (halved, every other row kept, whenever
 * they pass MAX_ROWS), the points, each finished point's headline, and the latest full snapshot.
 * Bounded whatever the run's length; pure data, no I/O.
 */
import type { LoadSpec } from '../../load.js';
import { clientHealthVerdict } from '../../metrics/clientHealth.js';
import type { LiveSnapshot, LiveWindowStats } from '../../metrics/live.js';
import type { RunSummary } from '../../metrics/summary.js';
import { commonFields } from '../../telemetry/common.js';
import type { TelemetrySnapshot } from '../../telemetry/snapshot.js';

/** Rows kept per series before halving: a few hours at one a second, a few hundred KiB sent. */
export const MAX_ROWS = 3600;
/** Finished points kept (a capacity search or a long sweep has tens). */
export const MAX_POINTS = 1000;

/** One snapshot, as the charts draw it. Seconds are since the session started. */
export interface UiRow {
  t: number;
  point: number;
  completed: number;
  failed: number;
  inFlight: number;
  /** Over the live window. */
  requestsPerS: number;
  outputTokensPerS: number;
  concurrency?: number;
  ttftP50Ms?: number;
  ttftP99Ms?: number;
  itlP50Ms?: number;
  itlP99Ms?: number;
  e2eP50Ms?: number;
}

/** One server scrape: what the server says of its batch. */
export interface UiTelemetryRow {
  t: number;
  kvCacheUsage?: number;
  running?: number;
  waiting?: number;
}

export interface UiPoint {
  index: number;
  id: string;
  scenario: string;
  load: string;
  kind: string;
}

/** A finished point: its summary's headline and verdicts, as summary.json says them. */
export interface UiFinished {
  index: number;
  scenario: string;
  load: string;
  completed: number;
  failed: number;
  interrupted: boolean;
  requestsPerS: number;
  outputTokensPerS: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  itlP50Ms: number;
  itlP99Ms: number;
  e2eP50Ms: number;
  validity?: { verdict: string; reasons: { code: string; verdict: string; text: string }[] };
  clientHealth?: { verdict: string; reasons: string[] };
}

/** The latest snapshot, without its exporters' histograms. */
export interface UiSnapshot {
  point: number;
  elapsedS: number;
  sent: number;
  inFlight: number;
  etaS?: number;
  totalRequests?: number;
  cumulative: LiveWindowStats;
  window: LiveWindowStats;
  final: boolean;
}

export interface UiSession {
  id: string;
  command: string;
  kind: string;
  /** Whether the page's Stop button can stop it (a live run; virtual time cannot be). */
  stoppable: boolean;
}

export interface UiEnd {
  code: number;
  /** Whether report.html is there to be loaded. */
  report: boolean;
  error?: string;
}

/** An event as the page hears it: a name and its JSON. */
export interface UiEvent {
  event: string;
  data: unknown;
}

/** Keeps every other row past `max` (the first and the last always): older history thins out. */
function halve<T>(rows: T[], max: number): T[] {
  if (rows.length <= max) return rows;
  const last = rows[rows.length - 1];
  const kept = rows.filter((_, i) => i % 2 === 0);
  if (kept[kept.length - 1] !== last) kept.push(last);
  return kept;
}

export class UiHistory {
  session: UiSession | undefined;
  rows: UiRow[] = [];
  telemetry: UiTelemetryRow[] = [];
  points: UiPoint[] = [];
  finished: UiFinished[] = [];
  latest: UiSnapshot | undefined;
  end: UiEnd | undefined;
  /** How many times the rows were halved (the page says its history is thinned). */
  thinned = 0;

  constructor(private readonly maxRows = MAX_ROWS) {}

  addRow(row: UiRow): void {
    this.rows.push(row);
    if (this.rows.length > this.maxRows) {
      this.rows = halve(this.rows, this.maxRows);
      this.thinned++;
    }
  }

  addTelemetry(row: UiTelemetryRow): void {
    this.telemetry.push(row);
    if (this.telemetry.length > this.maxRows) this.telemetry = halve(this.telemetry, this.maxRows);
  }

  addPoint(point: UiPoint): void {
    if (this.points.length < MAX_POINTS) this.points.push(point);
  }

  addFinished(finished: UiFinished): void {
    if (this.finished.length < MAX_POINTS) this.finished.push(finished);
  }

  /** Everything a new tab needs, in the order it happened (per kind). */
  replay(): UiEvent[] {
    // A tab that reconnects (EventSource does by itself) starts over rather than doubling up.
    const events: UiEvent[] = [{ event: 'reset', data: {} }];
    if (this.session) events.push({ event: 'session', data: this.session });
    for (const p of this.points) events.push({ event: 'point', data: p });
    events.push({
      event: 'history',
      data: { rows: this.rows, telemetry: this.telemetry, thinned: this.thinned },
    });
    for (const f of this.finished) events.push({ event: 'finished', data: f });
    if (this.latest) events.push({ event: 'snapshot', data: this.latest });
    if (this.end) events.push({ event: 'end', data: this.end });
    return events;
  }
}

/** A load in a few words: `concurrency 16`, `4 req/s`. */
export function loadLabel(load: LoadSpec): string {
  return load.mode === 'closed' ? `concurrency ${load.concurrency}` : `${load.rate} req/s`;
}

export function rowOf(t: number, point: number, live: LiveSnapshot): UiRow {
  const w = live.window;
  const c = live.cumulative;
  return {
    t: round(t, 3),
    point,
    completed: c.completed,
    failed: c.failed,
    inFlight: live.inFlight,
    requestsPerS: round(w.requestsPerS, 3),
    outputTokensPerS: round(w.outputTokensPerS, 1),
    ...(w.concurrency !== undefined ? { concurrency: round(w.concurrency, 2) } : {}),
    ...ms('ttftP50Ms', w.ttftMs?.p50),
    ...ms('ttftP99Ms', w.ttftMs?.p99),
    ...ms('itlP50Ms', w.itlMs?.p50),
    ...ms('itlP99Ms', w.itlMs?.p99),
    ...ms('e2eP50Ms', w.e2eMs?.p50),
  };
}

export function snapshotOf(
  point: number,
  live: LiveSnapshot,
  totalRequests: number | undefined,
  final: boolean,
): UiSnapshot {
  return {
    point,
    elapsedS: live.elapsedS,
    sent: live.sent,
    inFlight: live.inFlight,
    ...(live.etaS !== undefined ? { etaS: live.etaS } : {}),
    ...(totalRequests !== undefined ? { totalRequests } : {}),
    cumulative: live.cumulative,
    window: live.window,
    final,
  };
}

/** A scrape's batch figures, or undefined when it names none (another source, an error). */
export function telemetryRowOf(t: number, snapshot: TelemetrySnapshot): UiTelemetryRow | undefined {
  if (!snapshot.values) return undefined;
  const f = commonFields(snapshot.values);
  if (f.kvCacheUsage === undefined && f.running === undefined && f.waiting === undefined) {
    return undefined;
  }
  return {
    t: round(t, 3),
    ...(f.kvCacheUsage !== undefined ? { kvCacheUsage: f.kvCacheUsage } : {}),
    ...(f.running !== undefined ? { running: f.running } : {}),
    ...(f.waiting !== undefined ? { waiting: f.waiting } : {}),
  };
}

export function finishedOf(point: UiPoint, summary: RunSummary): UiFinished {
  const l = summary.latency;
  const h = summary.clientHealth;
  return {
    index: point.index,
    scenario: point.scenario,
    load: point.load,
    completed: summary.requests.completed,
    failed: summary.requests.failed,
    interrupted: summary.interrupted,
    requestsPerS: summary.throughput.requestsPerS,
    outputTokensPerS: summary.throughput.outputTokensPerS,
    ttftP50Ms: l.ttftMs.p50,
    ttftP99Ms: l.ttftMs.p99,
    itlP50Ms: l.itlMs.p50,
    itlP99Ms: l.itlMs.p99,
    e2eP50Ms: l.e2eMs.p50,
    ...(summary.validity
      ? {
          validity: {
            verdict: summary.validity.verdict,
            reasons: summary.validity.reasons.map((r) => ({
              code: r.code,
              verdict: r.verdict,
              text: r.text,
            })),
          },
        }
      : {}),
    ...(h
      ? {
          clientHealth: {
            verdict: clientHealthVerdict(h),
            reasons: [...h.reasons, ...(h.notes ?? [])],
          },
        }
      : {}),
  };
}

function ms(key: keyof UiRow, value: number | undefined): Partial<UiRow> {
  return value === undefined ? {} : { [key]: round(value, 3) };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
