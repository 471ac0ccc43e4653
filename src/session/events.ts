/**
 * The session's event seam (k6's `output.Output`, GuideLLM's output registry): every command's
 * session (run, sweep, probe, capacity) tells what happens as typed events, and outputs
 * subscribe. The results directory, the terminal's progress line and the HTML report are
 * outputs; a live page, an exporter or an index is one more, and touches no command.
 *
 * Order: sessionStarted, then per point pointStarted, records and telemetry as they come,
 * snapshots while it runs, pointFinished; sessionFinished last, also when the session failed.
 */
import type { LoadSpec } from '../load.js';
import type { LoadgenProgress } from '../loadgen/run.js';
import type { RunSummary } from '../metrics/summary.js';
import type { ClientHealthMeasurements, RequestRecord } from '../record.js';
import type { ManifestAbout, ResultKindName } from '../results/runFiles.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import type { Notify } from './target.js';

/** What a session is: its id, the command that ran it, its plan and where its results go. */
export interface SessionInfo {
  id: string;
  /** The command as a user types it: `run`, `sweep`, `probe decode`, `capacity`. */
  command: string;
  kind: ResultKindName;
  /** The results directory of the whole session. */
  root: string;
  /** Whether the root is itself the one point's directory (a run of one scenario). */
  rootIsPoint: boolean;
  startedAt: string;
  /** The effective plan, secrets redacted. */
  plan: unknown;
}

export interface PointInfo {
  id: string;
  /** Its index in the session, from 0. */
  index: number;
  kind: ResultKindName;
  /** Its run directory (records, telemetry, manifest, summary); none when nothing is saved. */
  dir?: string;
  load: LoadSpec;
  scenario: string;
}

export interface PointStarted {
  session: SessionInfo;
  point: PointInfo;
  /** What the point's manifest says (the results output adds the session and the time). */
  manifest: ManifestAbout;
  /** Live counts, updated as requests are sent and finish (undefined in virtual time). */
  progress?: LoadgenProgress;
  /** Microseconds on the point's clock; negative while waiting for the start. */
  nowUs(): number;
  /** Requests this process sends, warm-up included; undefined when a duration limits it. */
  totalRequests?: number;
}

/**
 * Finished requests, in the order they finished. A worker thread's batch comes as the JSON
 * lines it sent (`lines`, as records.jsonl holds them): `records()` parses them on demand, so
 * an output that only copies bytes never pays for parsing.
 */
export interface RecordsEvent {
  point: PointInfo;
  count: number;
  lines?: string;
  records(): readonly RequestRecord[];
}

export interface TelemetryEvent {
  point: PointInfo;
  snapshot: TelemetrySnapshot;
}

/**
 * The point's counts so far, every `SNAPSHOT_INTERVAL_MS` while it runs (only when an output
 * subscribes). Counts, not a summary: with worker threads the summary exists only at the end.
 */
export interface SnapshotEvent {
  point: PointInfo;
  counts: LoadgenProgress;
  /** Seconds on the point's clock. */
  atS: number;
}

export interface PointFinished {
  session: SessionInfo;
  point: PointInfo;
  summary: RunSummary;
  /** Scraped server metrics, and whether summary.json keeps them beside the summary. */
  serverMetrics?: ServerMetricsSummary;
  saveServerMetrics: boolean;
  /** Each load generator thread's own health measurements (none in virtual time). */
  threads?: ClientHealthMeasurements[];
  endedAt: string;
}

export interface SessionFinished {
  session: SessionInfo;
  /** The exit code the session ends with (errors.ts EXIT). */
  code: number;
  endedAt: string;
  /** Set when the session ended on an error: outputs close what they hold and write nothing new. */
  error?: Error;
}

/**
 * One subscriber. Every handler is optional; `records` and `telemetry` run on the measuring
 * thread as requests finish, so they must be quick (write, count) and must not wait.
 */
export interface Output {
  readonly name: string;
  /**
   * A required output's failure fails the session (the results directory: records must reach
   * disk); any other output's first failure is told once and the output is dropped.
   */
  readonly required?: boolean;
  sessionStarted?(e: SessionInfo): void;
  pointStarted?(e: PointStarted): void;
  records?(e: RecordsEvent): void;
  telemetry?(e: TelemetryEvent): void;
  snapshot?(e: SnapshotEvent): void;
  pointFinished?(e: PointFinished): void | Promise<void>;
  sessionFinished?(e: SessionFinished): void | Promise<void>;
}

export const SNAPSHOT_INTERVAL_MS = 1000;

/**
 * Fans a session's events out to its outputs, in the order they were given. Handlers are
 * called in turn; a failing optional output is told through `onNotice` once and dropped.
 */
export class SessionEvents {
  private outputs: Output[];
  private pointCount = 0;

  constructor(
    readonly info: SessionInfo,
    outputs: readonly Output[],
    private readonly onNotice: Notify = () => {},
    /** Whether the session writes its results directory (its own tables beside the points'). */
    readonly saves = true,
  ) {
    this.outputs = [...outputs];
  }

  /** Whether any output wants this event (the snapshot timer runs only then). */
  wants(event: keyof Omit<Output, 'name' | 'required'>): boolean {
    return this.outputs.some((o) => o[event] !== undefined);
  }

  /** The next point of this session, with its id; its directory, load and scenario as given. */
  nextPoint(p: Omit<PointInfo, 'id' | 'index' | 'kind'> & { kind?: ResultKindName }): PointInfo {
    const index = this.pointCount++;
    return {
      ...p,
      // A run of one scenario is its session's only point: one id for both.
      id: this.info.rootIsPoint ? this.info.id : `${this.info.id}-${index}`,
      index,
      kind: p.kind ?? pointKind(this.info.kind),
    };
  }

  sessionStarted(): void {
    this.each('sessionStarted', (o) => o.sessionStarted?.(this.info));
  }

  pointStarted(e: Omit<PointStarted, 'session'>): void {
    const event = { session: this.info, ...e };
    this.each('pointStarted', (o) => o.pointStarted?.(event));
  }

  records(e: RecordsEvent): void {
    for (const o of this.outputs) {
      if (!o.records) continue;
      try {
        o.records(e);
      } catch (err) {
        this.failed(o, err);
      }
    }
  }

  /** One record, as measured in this thread (or in virtual time). */
  record(point: PointInfo, record: RequestRecord): void {
    const one = [record];
    this.records({ point, count: 1, records: () => one });
  }

  /** A worker's batch of `count` JSON lines (each ending in a newline). */
  lines(point: PointInfo, lines: string, count: number): void {
    let parsed: RequestRecord[] | undefined;
    this.records({
      point,
      count,
      lines,
      records: () => {
        parsed ??= lines
          .split('\n')
          .filter((l) => l.length > 0)
          .map((l) => JSON.parse(l) as RequestRecord);
        return parsed;
      },
    });
  }

  telemetry(e: TelemetryEvent): void {
    this.each('telemetry', (o) => o.telemetry?.(e));
  }

  snapshot(e: SnapshotEvent): void {
    this.each('snapshot', (o) => o.snapshot?.(e));
  }

  async pointFinished(e: Omit<PointFinished, 'session' | 'endedAt'>): Promise<void> {
    const event = { session: this.info, endedAt: new Date().toISOString(), ...e };
    for (const o of [...this.outputs]) {
      try {
        await o.pointFinished?.(event);
      } catch (err) {
        this.failed(o, err);
      }
    }
  }

  /** Every output hears it, even after another failed; a required output's failure is thrown last. */
  async sessionFinished(code: number, error?: Error): Promise<void> {
    const event: SessionFinished = {
      session: this.info,
      code,
      endedAt: new Date().toISOString(),
      ...(error ? { error } : {}),
    };
    let first: unknown;
    for (const o of [...this.outputs]) {
      try {
        await o.sessionFinished?.(event);
      } catch (err) {
        if (o.required) first ??= err;
        else this.failed(o, err);
      }
    }
    if (first !== undefined && !error) throw first;
  }

  private each(what: string, call: (o: Output) => void): void {
    for (const o of [...this.outputs]) {
      try {
        call(o);
      } catch (err) {
        this.failed(o, err, what);
      }
    }
  }

  private failed(o: Output, err: unknown, what?: string): void {
    if (o.required) throw err;
    this.outputs = this.outputs.filter((x) => x !== o);
    this.onNotice(
      `output ${o.name} failed${what ? ` on ${what}` : ''} and is off for the rest of the session: ${(err as Error)?.message ?? String(err)}`,
    );
  }
}

/** The kind of a session's points: a run's are runs, a sweep's are sweep points, ... */
function pointKind(session: ResultKindName): ResultKindName {
  switch (session) {
    case 'sweep':
      return 'sweep-point';
    case 'probe':
      return 'probe-point';
    case 'capacity':
      return 'capacity-step';
    case 'scenarios':
      return 'run';
    default:
      return session;
  }
}
