/**
 * Connection phases in words (docs/metrics.md, "Connection phases"), shared by the terminal and
 * the HTML report. Printed only when they matter, so a run on a warmed pool reads as before.
 */
import { POOL_WAIT_LIMIT } from '../metrics/clientHealth.js';
import type { ConnectionsSummary, SetupPhasesSummary } from '../metrics/connections.js';
import type { Distribution } from '../metrics/distribution.js';
import { fmtNumber } from '../metrics/format.js';
import type { RunSummary } from '../metrics/summary.js';
import type { Column } from './table.js';

const ms = (v: number) => fmtNumber(v, v < 10 ? 2 : 1);
const p = (d: Distribution, q: 'p50' | 'p99') =>
  `${d.lowConfidence?.includes(q) ? '~' : ''}${ms(d[q])}`;

/**
 * Whether the phases matter: some measured request opened a connection (its set-up sits in
 * its queueDelay, and the server saw it arrive late), or pool wait p99 reached the "near" share
 * of TTFT p50 that the client-health verdict judges (POOL_WAIT_LIMIT).
 */
export function connectionsMatter(summary: RunSummary): boolean {
  const c = summary.connections;
  if (!c) return false;
  if (c.newConnections > 0) return true;
  const wait = c.poolWaitMs;
  const ttft = summary.latency.ttftMs;
  return (
    wait.count > 0 &&
    wait.p99 >= POOL_WAIT_LIMIT.minMs &&
    (ttft.count === 0 || wait.p99 >= POOL_WAIT_LIMIT.near * ttft.p50)
  );
}

/** "DNS 0.12, TCP 0.30, TLS 2.10 ms" at p50: the set-up's parts present in the run. */
export function setupParts(c: Pick<ConnectionsSummary, 'dnsMs' | 'tcpMs' | 'tlsMs'>): string {
  const parts = [
    ...(c.dnsMs ? [`DNS ${p(c.dnsMs, 'p50')}`] : []),
    `TCP ${p(c.tcpMs, 'p50')}`,
    ...(c.tlsMs ? [`TLS ${p(c.tlsMs, 'p50')}`] : []),
  ];
  return `${parts.join(', ')} ms`;
}

/**
 * "Connections: 6 opened by measured requests, set-up p50 0.42 ms p99 1.10 ms (DNS 0.10, TCP
 * 0.32 ms at p50); pool wait p50 0.00 ms p99 12.30 ms beside TTFT p50 45.00 ms; 4 opened before
 * the clock (set-up mean 0.30 ms, max 0.52 ms)". Undefined when they do not matter.
 */
export function connectionsLine(summary: RunSummary): string | undefined {
  const facts = connectionsFacts(summary);
  return facts === undefined ? undefined : `Connections: ${facts}`;
}

/** connectionsLine's facts without its label, for a format that sets the label its own way. */
export function connectionsFacts(summary: RunSummary): string | undefined {
  const c = summary.connections;
  if (!c || !connectionsMatter(summary)) return undefined;
  const facts: string[] = [];
  if (c.newConnections > 0) {
    facts.push(
      `${fmtNumber(c.newConnections)} opened by measured requests, set-up p50 ${p(c.setupMs, 'p50')} ms p99 ${p(c.setupMs, 'p99')} ms (${setupParts(c)} at p50)`,
    );
  }
  const ttft = summary.latency.ttftMs;
  facts.push(
    `pool wait p50 ${p(c.poolWaitMs, 'p50')} ms p99 ${p(c.poolWaitMs, 'p99')} ms${ttft.count > 0 ? ` beside TTFT p50 ${p(ttft, 'p50')} ms` : ''}`,
  );
  const pre = summary.clientHealth?.preopened;
  if (pre) {
    facts.push(
      `${fmtNumber(pre.connections)} opened before the clock (set-up mean ${ms(pre.setupMsMean)} ms, max ${ms(pre.setupMsMax)} ms${pre.failed > 0 ? `, ${fmtNumber(pre.failed)} failed` : ''})`,
    );
  }
  return facts.join('; ');
}

/** One row of the phases' table: a phase's distribution, in ms. */
export interface PhaseRow {
  name: string;
  ms: Distribution;
}

/** The phases' table's columns, one definition for the HTML and Markdown reports. */
export const PHASE_COLUMNS: Column<PhaseRow>[] = [
  { label: 'phase (ms)', align: 'left', value: (r) => r.name },
  ...(['p50', 'p95', 'p99', 'max'] as const).map(
    (key): Column<PhaseRow> => ({
      label: key,
      align: 'right',
      value: (r) => fmtNumber(r.ms[key], 2),
    }),
  ),
  { label: 'n', align: 'right', value: (r) => fmtNumber(r.ms.count) },
];

/**
 * The phases' table, shared by the HTML and Markdown reports so both list the same rows: backlog,
 * pool wait, the set-up of the connections measured requests opened and its parts, TTFT beside
 * them, then the warm-up's own set-up (kept apart: its connections are no measured request's).
 * Rows without samples are left out.
 */
export function phaseRows(summary: RunSummary): PhaseRow[] {
  const c = summary.connections;
  if (!c) return [];
  const setup = (s: SetupPhasesSummary, prefix: string): [string, Distribution | undefined][] =>
    s.newConnections > 0
      ? [
          [`${prefix}connection set-up (requests that opened one)`, s.setupMs],
          [`${prefix}set-up: DNS`, s.dnsMs],
          [`${prefix}set-up: TCP connect`, s.tcpMs],
          [`${prefix}set-up: TLS handshake`, s.tlsMs],
        ]
      : [];
  const rows: [string, Distribution | undefined][] = [
    ['backlog (until handed to the pool)', c.backlogMs],
    ['pool wait', c.poolWaitMs],
    ...setup(c, ''),
    ['TTFT', summary.latency.ttftMs],
    ...(c.warmup ? setup(c.warmup, 'warm-up ') : []),
  ];
  return rows
    .filter((r): r is [string, Distribution] => (r[1]?.count ?? 0) > 0)
    .map(([name, ms]) => ({ name, ms }));
}

/** `summary.streamsPerConnection` as one row: HTTP/2 only. */
export interface StreamsRow {
  protocol: 'h2';
  connections: number;
  mean: number;
  max: number;
}

export const STREAMS_COLUMNS: Column<StreamsRow>[] = [
  { label: 'protocol', align: 'left', value: (r) => r.protocol },
  { label: 'connections', align: 'right', value: (r) => fmtNumber(r.connections) },
  { label: 'streams per connection, mean', align: 'right', value: (r) => fmtNumber(r.mean, 1) },
  { label: 'max', align: 'right', value: (r) => fmtNumber(r.max) },
];

/** The streams row; undefined on HTTP/1.1 (one request a connection at a time) and older runs. */
export function streamsRow(summary: RunSummary): StreamsRow | undefined {
  const s = summary.streamsPerConnection;
  return s ? { protocol: 'h2', ...s } : undefined;
}

/** "HTTP/2: 2 connections, 8.0 streams each on average (max 9)", for the terminal and Markdown. */
export function streamsLine(summary: RunSummary): string | undefined {
  const s = summary.streamsPerConnection;
  if (!s) return undefined;
  return `HTTP/2: ${fmtNumber(s.connections)} connection${s.connections === 1 ? '' : 's'}, ${fmtNumber(s.mean, 1)} streams each on average (max ${fmtNumber(s.max)})`;
}
