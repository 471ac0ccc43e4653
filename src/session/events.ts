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
import type { LiveSnapshot } from '../metrics/live.js';
import type { RunSummary } from '../metrics/summary.js';
import { validityOf } from '../metrics/validity.js';
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
 * The point's counts and live metrics so far, every `SNAPSHOT_INTERVAL_MS` while it runs and
 * once more when its last record is in (only when an output subscribes). Live metrics, not the
 * summary: every thread sends what it measured each second (src/metrics/live.ts); the summary
 * exists only at the end.
 */
export interface SnapshotEvent {
  point: PointInfo;
  counts: LoadgenProgress;
  /** Seconds on the point's clock. */
  atS: number;
  /** Cumulative and windowed metrics (docs/metrics.md, "Live metrics"). */
  live: LiveSnapshot;
  /** Set on the point's last snapshot, told after its last record and before pointFinished. */
  final?: true;
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
 * thread as requests finish, so they must be quick (write, count) and must not wait. What a
 * handler is given is the session's own: an output of the user's own gets copies instead (its
 * own records, summary, manifest; the session and point descriptions frozen), so that nothing
 * it changes reaches the run, its files or another output.
 */
export interface Output {
  readonly name: string;
  /**
   * A required output's failure fails the session (the results directory: records must reach
   * disk); any other output's first failure is told once and the output is dropped.
   */
  readonly required?: boolean;
  // Any handler may be async (a `void` type takes an async function): a rejection is a
  // failure as a throw is. Only pointFinished and sessionFinished are awaited, within the
  // session's exportTimeoutS.
  sessionStarted?(e: SessionInfo): void;
  pointStarted?(e: PointStarted): void;
  records?(e: RecordsEvent): void;
  telemetry?(e: TelemetryEvent): void;
  snapshot?(e: SnapshotEvent): void;
  pointFinished?(e: PointFinished): void | Promise<void>;
  sessionFinished?(e: SessionFinished): void | Promise<void>;
}

/** What a command gives the outputs it makes (an output's factory's second argument). */
export interface OutputContext {
  /** Tells the user something on the terminal (stderr), as the command's notices are. */
  notice: Notify;
  /** Stops the session as the first Ctrl-C does (what is in flight finishes; exit 130). */
  requestStop?: () => void;
}

type EventName = keyof Omit<Output, 'name' | 'required'>;

export const SNAPSHOT_INTERVAL_MS = 1000;

/**
 * How long pointFinished and sessionFinished of an output of the user's own are awaited
 * (`--export-timeout-s`): past it the output is dropped with a notice and the session goes on,
 * so that a handler that never settles cannot hold a run, its exit code or its gate.
 */
export const EXPORT_TIMEOUT_S = 10;

/** After a stop (Ctrl-C, SIGTERM) outputs of the user's own get this much more, all together. */
export const STOPPED_OUTPUTS_MS = 500;

/** The outputs infergauge ships: they get the session's own objects, and no deadline. */
const BUILT_IN = new WeakSet<Output>();

/** Marks an output as one of infergauge's own (results, HTML, progress, points). */
export function builtInOutput<T extends Output>(output: T): T {
  BUILT_IN.add(output);
  return output;
}

export interface OutputLimits {
  /** Seconds an output of the user's own may take in pointFinished or sessionFinished. */
  exportTimeoutS?: number;
  /** The session's stop (the first Ctrl-C): from then on outputs are waited on briefly. */
  stop?: AbortSignal;
}

/**
 * Fans a session's events out to its outputs, in the order they were given. Handlers are
 * called in turn; a failing optional output is told through `onNotice` once and dropped.
 * A required output that fails once the session runs (a full or read-only disk) stops it:
 * `halt` aborts, so the load stops sending, and the session ends with `failure`.
 */
export class SessionEvents {
  private outputs: Output[];
  private pointCount = 0;
  /** Required outputs that failed: they still hear sessionFinished, to close what they hold. */
  private failedRequired: Output[] = [];
  private firstFailure: Error | undefined;
  private readonly halted = new AbortController();
  private readonly timeoutMs: number;
  private readonly stop: AbortSignal | undefined;
  private stoppedAtMs: number | undefined;
  private sessionView: SessionInfo | undefined;
  private readonly pointViews = new WeakMap<PointInfo, PointInfo>();

  constructor(
    readonly info: SessionInfo,
    outputs: readonly Output[],
    private readonly onNotice: Notify = () => {},
    /** Whether the session writes its results directory (its own tables beside the points'). */
    readonly saves = true,
    limits: OutputLimits = {},
  ) {
    this.outputs = [...outputs];
    this.timeoutMs = (limits.exportTimeoutS ?? EXPORT_TIMEOUT_S) * 1000;
    const { stop } = limits;
    this.stop = stop;
    if (stop?.aborted) this.stoppedAtMs = performance.now();
    else {
      stop?.addEventListener('abort', () => (this.stoppedAtMs = performance.now()), {
        once: true,
      });
    }
  }

  /** Aborted when a required output failed mid-session: send nothing more. */
  get halt(): AbortSignal {
    return this.halted.signal;
  }

  /** Why a required output failed mid-session (the session ends with it); undefined if none did. */
  get failure(): Error | undefined {
    return this.firstFailure;
  }

  /** Whether any output wants this event (the snapshot timer runs only then). */
  wants(event: EventName): boolean {
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
    for (const o of [...this.outputs]) {
      if (!o.sessionStarted) continue;
      const given = BUILT_IN.has(o) ? this.info : this.session();
      this.tell(o, 'sessionStarted', () => o.sessionStarted?.(given));
    }
  }

  pointStarted(e: Omit<PointStarted, 'session'>): void {
    const event: PointStarted = { session: this.info, ...e };
    const view = (): PointStarted => ({
      ...event,
      session: this.session(),
      point: this.point(e.point),
      manifest: ownCopy(e.manifest),
      // Live counts: read as they change, never written.
      ...(e.progress ? { progress: readOnlyLive(e.progress) } : {}),
    });
    for (const o of [...this.outputs]) {
      if (!o.pointStarted) continue;
      const given = BUILT_IN.has(o) ? event : view();
      this.tell(o, 'pointStarted', () => o.pointStarted?.(given));
    }
  }

  records(e: RecordsEvent): void {
    // Once per record on the measuring thread: nothing is copied unless an output of the
    // user's own subscribes, and the handler is called inline rather than through tell.
    for (const o of this.outputs) {
      if (!o.records) continue;
      const given = BUILT_IN.has(o) ? e : this.recordsView(e);
      try {
        const result: unknown = o.records(given);
        if (isThenable(result)) this.later(o, 'records', result);
      } catch (err) {
        this.failed(o, err, 'records');
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
    const parsed = lazy(() => parseLines(lines));
    this.records({ point, count, lines, records: parsed });
  }

  telemetry(e: TelemetryEvent): void {
    const view = (): TelemetryEvent => ({
      point: this.point(e.point),
      snapshot: ownCopy(e.snapshot),
    });
    for (const o of [...this.outputs]) {
      if (!o.telemetry) continue;
      const given = BUILT_IN.has(o) ? e : view();
      this.tell(o, 'telemetry', () => o.telemetry?.(given));
    }
  }

  snapshot(e: SnapshotEvent): void {
    const view = (): SnapshotEvent => ({
      ...e,
      point: this.point(e.point),
      counts: ownCopy(e.counts),
      live: ownCopy(e.live),
    });
    for (const o of [...this.outputs]) {
      if (!o.snapshot) continue;
      const given = BUILT_IN.has(o) ? e : view();
      this.tell(o, 'snapshot', () => o.snapshot?.(given));
    }
  }

  async pointFinished(e: Omit<PointFinished, 'session' | 'endedAt'>): Promise<void> {
    // Judged here, after every warning of the point was added, for every output alike.
    e.summary.validity = validityOf(e.summary.warnings);
    const event: PointFinished = { session: this.info, endedAt: new Date().toISOString(), ...e };
    const view = (): PointFinished => ({
      ...event,
      session: this.session(),
      point: this.point(e.point),
      summary: ownCopy(e.summary),
      ...(e.serverMetrics ? { serverMetrics: ownCopy(e.serverMetrics) } : {}),
      ...(e.threads ? { threads: ownCopy(e.threads) } : {}),
    });
    for (const o of [...this.outputs]) {
      if (!o.pointFinished) continue;
      const given = BUILT_IN.has(o) ? event : view();
      const failure = await this.settle(o, 'pointFinished', () => o.pointFinished?.(given));
      if (failure) this.failed(o, failure.err, 'pointFinished');
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
    const view = (): SessionFinished => ({
      ...event,
      session: this.session(),
      ...(error ? { error: errorCopy(error) } : {}),
    });
    // A failed required output still closes what it holds; its second failure is no news.
    for (const o of this.failedRequired) {
      await this.settle(o, 'sessionFinished', () => o.sessionFinished?.(event));
    }
    let first: unknown;
    for (const o of [...this.outputs]) {
      if (!o.sessionFinished) continue;
      const given = BUILT_IN.has(o) ? event : view();
      const failure = await this.settle(o, 'sessionFinished', () => o.sessionFinished?.(given));
      if (!failure) continue;
      if (o.required) first ??= failure.err;
      else this.failed(o, failure.err, 'sessionFinished');
    }
    if (first !== undefined && !error) throw first;
  }

  /** Calls a handler whose promise is not awaited: a rejection is a failure, told when it comes. */
  private tell(o: Output, what: EventName, call: () => unknown): void {
    try {
      const result = call();
      if (isThenable(result)) this.later(o, what, result);
    } catch (err) {
      this.failed(o, err, what);
    }
  }

  private later(o: Output, what: EventName, result: PromiseLike<unknown>): void {
    // Promise.resolve: a hostile `then` that throws becomes a rejection, not a throw here.
    Promise.resolve(result).then(undefined, (err: unknown) => {
      // A required output's rejection cannot fail a caller that has moved on: it halts.
      if (this.outputs.includes(o)) this.failed(o, err, what, true);
    });
  }

  /**
   * Calls an awaited handler: a built-in one is awaited as long as it takes; one of the user's
   * own until exportTimeoutS (or briefly after a stop), then dropped with a notice. Returns
   * the failure, if any, for the caller to handle; a timeout is handled here.
   */
  private async settle(
    o: Output,
    what: EventName,
    call: () => unknown,
  ): Promise<{ err: unknown } | undefined> {
    let result: unknown;
    try {
      result = call();
      if (!isThenable(result)) return undefined;
      if (BUILT_IN.has(o) || o.required) {
        await result;
        return undefined;
      }
    } catch (err) {
      return { err };
    }
    const outcome = await this.within(result);
    if (outcome.kind === 'rejected') return { err: outcome.err };
    if (outcome.kind === 'late') {
      this.drop(
        o,
        outcome.stopped
          ? `output ${o.name} was still busy with ${what} when the session stopped; it is dropped`
          : `output ${o.name} did not finish ${what} within ${this.timeoutMs / 1000} s (--export-timeout-s); it is dropped for the rest of the session`,
      );
    }
    return undefined;
  }

  /**
   * Waits for `result` until the deadline or, once the session is stopped, until
   * STOPPED_OUTPUTS_MS after the stop. The timer holds the process open: an exit on an empty
   * event loop would skip the summary and the exit code.
   */
  private within(
    result: PromiseLike<unknown>,
  ): Promise<
    { kind: 'done' } | { kind: 'rejected'; err: unknown } | { kind: 'late'; stopped: boolean }
  > {
    return new Promise((resolve) => {
      const timers: NodeJS.Timeout[] = [];
      const end = (outcome: Parameters<typeof resolve>[0]) => {
        for (const t of timers) clearTimeout(t);
        this.stop?.removeEventListener('abort', onStop);
        resolve(outcome);
      };
      const lateBy = (ms: number, stopped: boolean) =>
        timers.push(setTimeout(() => end({ kind: 'late', stopped }), Math.max(0, ms)));
      const onStop = () => lateBy(STOPPED_OUTPUTS_MS, true);
      if (this.stoppedAtMs !== undefined) {
        lateBy(this.stoppedAtMs + STOPPED_OUTPUTS_MS - performance.now(), true);
      } else {
        lateBy(this.timeoutMs, false);
        this.stop?.addEventListener('abort', onStop, { once: true });
      }
      Promise.resolve(result).then(
        () => end({ kind: 'done' }),
        (err: unknown) => end({ kind: 'rejected', err }),
      );
    });
  }

  /**
   * An optional output's failure: told once, and the output is dropped. A required output's
   * failure before anything was sent (its sessionStarted, pointStarted) is thrown; later, or
   * `late` (a promise's rejection, whose caller has moved on), it halts the session.
   */
  private failed(o: Output, err: unknown, what: EventName, late = false): void {
    if (o.required) {
      if (!late && (what === 'sessionStarted' || what === 'pointStarted')) throw err;
      this.outputs = this.outputs.filter((x) => x !== o);
      this.failedRequired.push(o);
      this.firstFailure ??= err instanceof Error ? err : new Error(String(err));
      this.halted.abort(this.firstFailure);
      return;
    }
    this.drop(
      o,
      `output ${o.name} failed on ${what} and is off for the rest of the session: ${(err as Error)?.message ?? String(err)}`,
    );
  }

  private drop(o: Output, notice: string): void {
    if (!this.outputs.includes(o)) return;
    this.outputs = this.outputs.filter((x) => x !== o);
    this.onNotice(notice);
  }

  private session(): SessionInfo {
    this.sessionView ??= deepFreeze(ownCopy(this.info));
    return this.sessionView;
  }

  private point(p: PointInfo): PointInfo {
    let view = this.pointViews.get(p);
    if (!view) {
      view = deepFreeze(ownCopy(p));
      this.pointViews.set(p, view);
    }
    return view;
  }

  /**
   * The records as an output of the user's own gets them: its own copies, made when it asks
   * (a worker's lines parsed for it, a record of this thread copied), so that what it changes
   * reaches neither the session, its files, nor another output.
   */
  private recordsView(e: RecordsEvent): RecordsEvent {
    const { lines } = e;
    return {
      point: this.point(e.point),
      count: e.count,
      ...(lines !== undefined ? { lines } : {}),
      records: lazy(() => (lines !== undefined ? parseLines(lines) : ownCopy(e.records()))),
    };
  }
}

/** `make()`, made once, at the first call. */
function lazy<T>(make: () => T): () => T {
  let made = false;
  let value: T | undefined;
  return () => {
    if (!made) {
      value = make();
      made = true;
    }
    return value as T;
  };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function parseLines(lines: string): RequestRecord[] {
  return lines
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as RequestRecord);
}

/**
 * A deep copy of plain data (records, summaries, manifests): what an output of the user's own is
 * given. Hand-made because structuredClone is ten times slower on a record's event arrays
 * (bench/outputs.ts); anything but plain objects and arrays goes through structuredClone.
 */
export function ownCopy<T>(value: T): T {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const copy = value.slice();
    for (let i = 0; i < copy.length; i++) {
      const v: unknown = copy[i];
      if (v !== null && typeof v === 'object') copy[i] = ownCopy(v);
    }
    return copy as T;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value))
    copy[key] = ownCopy((value as Record<string, unknown>)[key]);
  return copy as T;
}

/**
 * Frozen all the way down: the session's and a point's description, shared by every output of
 * the user's own (small objects; a frozen array is slow to read, so records are never frozen).
 */
function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  if (ArrayBuffer.isView(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
  return value;
}

/** A live object's read-only face: reads go through, writes fail. */
function readOnlyLive<T extends object>(value: T): T {
  const refuse = () => false;
  return new Proxy(value, { set: refuse, defineProperty: refuse, deleteProperty: refuse });
}

/** An error as an output of the user's own sees it: its name and message, frozen. */
function errorCopy(error: Error): Error {
  const copy = new Error(error.message);
  copy.name = error.name;
  return Object.freeze(copy);
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
