/**
 * Connection phases in words (docs/metrics.md, "Connection phases"), shared by the terminal and
 * the HTML report. Printed only when they matter, so a run on a warmed pool reads as before.
 */
import { POOL_WAIT_LIMIT } from '../metrics/clientHealth.js';
import type { ConnectionsSummary } from '../metrics/connections.js';
import type { Distribution } from '../metrics/distribution.js';
import { fmtNumber } from '../metrics/format.js';
import type { RunSummary } from '../metrics/summary.js';

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
  return `Connections: ${facts.join('; ')}`;
}
