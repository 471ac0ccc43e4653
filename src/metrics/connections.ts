/**
 * Connection phases from the request records (docs/metrics.md, "Connection phases"): queueDelay
 * split into backlog, pool wait and connection set-up, and the set-up's parts (DNS, TCP
 * connect, TLS handshake) over the requests that opened a connection. Built one record at a
 * time like the run summary and merged across worker threads exactly; the warm-up's requests
 * are kept apart from the measured ones.
 */
import type { RequestRecord } from '../record.js';
import { type Distribution, SampleSet, type SampleSetState } from './distribution.js';

/** Set-up phases over the requests that opened a connection. */
export interface SetupPhasesSummary {
  /** Requests that went out as the first request of a connection they waited for. */
  newConnections: number;
  /** Whole set-up, socket created to ready to send. */
  setupMs: Distribution;
  /** Present when some connection resolved a name. */
  dnsMs?: Distribution;
  tcpMs: Distribution;
  /** Present when some connection shook hands over TLS. */
  tlsMs?: Distribution;
}

/** `summary.connections`: present when the records carry queueDelay's parts. */
export interface ConnectionsSummary extends SetupPhasesSummary {
  /** Counted requests whose records carry the split (failures included). */
  requests: number;
  /** Until handed to the pool: open-loop backlog, a concurrency cap's queue, timer lateness. */
  backlogMs: Distribution;
  /** Waiting in the pool for a free connection, set-up excluded (sent requests only). */
  poolWaitMs: Distribution;
  /** The warm-up requests' own phases (not counted above). */
  warmup?: SetupPhasesSummary & { requests: number };
}

type PhaseKey = 'setupMs' | 'dnsMs' | 'tcpMs' | 'tlsMs';
const PHASE_KEYS: readonly PhaseKey[] = ['setupMs', 'dnsMs', 'tcpMs', 'tlsMs'];

/** A ConnectionsBuilder as plain data, to merge. */
export interface ConnectionsState {
  requests: number;
  warmupRequests: number;
  backlogMs: SampleSetState;
  poolWaitMs: SampleSetState;
  measured: Record<PhaseKey, SampleSetState>;
  warmup: Record<PhaseKey, SampleSetState>;
}

const phaseSets = () =>
  Object.fromEntries(PHASE_KEYS.map((k) => [k, new SampleSet()])) as Record<PhaseKey, SampleSet>;

export class ConnectionsBuilder {
  private requests = 0;
  private warmupRequests = 0;
  private readonly backlogMs = new SampleSet();
  private readonly poolWaitMs = new SampleSet();
  private readonly measured = phaseSets();
  private readonly warmup = phaseSets();

  /** Any record: warm-up ones count apart. Records without the split are passed over. */
  add(record: RequestRecord): void {
    if (record.backlogMs === undefined) return;
    const warm = record.phase === 'warmup';
    if (warm) this.warmupRequests++;
    else {
      this.requests++;
      this.backlogMs.add(record.backlogMs);
      if (record.poolWaitMs !== undefined) this.poolWaitMs.add(record.poolWaitMs);
    }
    const c = record.connection;
    if (!c) return;
    const sets = warm ? this.warmup : this.measured;
    sets.setupMs.add(c.setupMs);
    sets.tcpMs.add(c.tcpMs);
    if (c.dnsMs !== undefined) sets.dnsMs.add(c.dnsMs);
    if (c.tlsMs !== undefined) sets.tlsMs.add(c.tlsMs);
  }

  state(): ConnectionsState {
    const states = (sets: Record<PhaseKey, SampleSet>) =>
      Object.fromEntries(PHASE_KEYS.map((k) => [k, sets[k].state()])) as Record<
        PhaseKey,
        SampleSetState
      >;
    return {
      requests: this.requests,
      warmupRequests: this.warmupRequests,
      backlogMs: this.backlogMs.state(),
      poolWaitMs: this.poolWaitMs.state(),
      measured: states(this.measured),
      warmup: states(this.warmup),
    };
  }

  merge(other: ConnectionsState): void {
    this.requests += other.requests;
    this.warmupRequests += other.warmupRequests;
    this.backlogMs.merge(other.backlogMs);
    this.poolWaitMs.merge(other.poolWaitMs);
    for (const k of PHASE_KEYS) {
      this.measured[k].merge(other.measured[k]);
      this.warmup[k].merge(other.warmup[k]);
    }
  }

  /**
   * Undefined when no record carried the split. A pure function of the records: the
   * connections opened before the clock are no record's, and are client health's
   * (`clientHealth.preopened`).
   */
  build(): ConnectionsSummary | undefined {
    if (this.requests === 0 && this.warmupRequests === 0) return undefined;
    const summary: ConnectionsSummary = {
      requests: this.requests,
      backlogMs: this.backlogMs.describe(),
      poolWaitMs: this.poolWaitMs.describe(),
      ...setupPhases(this.measured),
    };
    if (this.warmupRequests > 0) {
      summary.warmup = { requests: this.warmupRequests, ...setupPhases(this.warmup) };
    }
    return summary;
  }
}

function setupPhases(sets: Record<PhaseKey, SampleSet>): SetupPhasesSummary {
  const phases: SetupPhasesSummary = {
    newConnections: sets.setupMs.count,
    setupMs: sets.setupMs.describe(),
    tcpMs: sets.tcpMs.describe(),
  };
  if (sets.dnsMs.count > 0) phases.dnsMs = sets.dnsMs.describe();
  if (sets.tlsMs.count > 0) phases.tlsMs = sets.tlsMs.describe();
  return phases;
}
