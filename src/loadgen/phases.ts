import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { buildConnector } from 'undici';
import type { ConnectionPhases, PreopenedConnections, RequestRecord } from '../record.js';

/**
 * A connection's set-up as its socket's own events timed it (docs/metrics.md, "Connection
 * phases"), in ms on performance.now()'s clock: one clock read at the open and one at each
 * set-up event, so a connection costs at most four reads and a stream event none.
 */
export class ConnectionTiming {
  readonly startMs = performance.now();
  /** The name was resolved ('lookup': absent when the host is an address). */
  lookupMs: number | undefined;
  /** TCP connected. */
  connectMs: number | undefined;
  /** TLS handshake done ('secureConnect'; absent on plain TCP). */
  secureMs: number | undefined;
  /**
   * Opened before the run's clock started (a warmed pool): no request waited for it, so its
   * set-up is the warm-up's, never a measured request's.
   */
  preopened = false;
}

/**
 * Times `socket`'s set-up from now: call it right after the socket is created (net.connect,
 * tls.connect, a connector), before its events can fire.
 */
export function timeConnection(socket: Socket): ConnectionTiming {
  const timing = new ConnectionTiming();
  socket.once('lookup', () => {
    timing.lookupMs = performance.now();
  });
  socket.once('connect', () => {
    timing.connectMs = performance.now();
  });
  socket.once('secureConnect', () => {
    timing.secureMs = performance.now();
  });
  return timing;
}

/** Set-up timings of the sockets undici's connector opened, for the request that learns its socket. */
const socketTimings = new WeakMap<object, ConnectionTiming>();

/** The timing `timeConnection` took of `socket` through `timedConnector`, if any. */
export function timingOf(socket: object): ConnectionTiming | undefined {
  return socketTimings.get(socket);
}

/**
 * Wraps an undici connector (buildConnector's) so that each socket it opens is timed from its
 * creation: the `undici:client:connected` channel comes only after the handshake, too late for
 * its parts.
 */
export function timedConnector(connector: buildConnector.connector): buildConnector.connector {
  return (options, callback) => {
    // Typed void, but undici's connector returns the socket it made (lib/core/connect.js).
    const socket = connector(options, callback) as unknown as Socket | undefined;
    if (socket && typeof socket.once === 'function') {
      socketTimings.set(socket, timeConnection(socket));
    }
  };
}

const us = (ms: number) => Math.round(ms * 1000);

/**
 * The phases of the connection a request waited for, with `waitUs` the request's whole wait
 * in the pool (handed to it until sent): the set-up's share of that wait is at most the wait,
 * since a request handed to the pool after the connection began opening waited only its rest.
 * Undefined when the connection never connected (nothing was sent on it).
 */
export function connectionPhases(
  timing: ConnectionTiming,
  waitUs: number,
): ConnectionPhases | undefined {
  if (timing.connectMs === undefined) return undefined;
  // Offsets from the open, each rounded once, so the parts add up to the set-up exactly.
  const lookupUs = timing.lookupMs === undefined ? undefined : us(timing.lookupMs - timing.startMs);
  const connectUs = us(timing.connectMs - timing.startMs);
  const secureUs = timing.secureMs === undefined ? undefined : us(timing.secureMs - timing.startMs);
  const setupUs = Math.max(0, secureUs ?? connectUs);
  const phases: ConnectionPhases = {
    setupMs: setupUs / 1000,
    waitedMs: Math.max(0, Math.min(waitUs, setupUs)) / 1000,
    tcpMs: (connectUs - (lookupUs ?? 0)) / 1000,
  };
  if (lookupUs !== undefined) phases.dnsMs = lookupUs / 1000;
  if (secureUs !== undefined) phases.tlsMs = (secureUs - connectUs) / 1000;
  return phases;
}

/**
 * Splits a sent request's queueDelay into its parts on its record (docs/metrics.md,
 * "Connection phases"): `backlogMs` until it was handed to the pool, the set-up it waited for
 * when it opened a connection (`connection.waitedMs`), and `poolWaitMs`, the rest of its wait
 * for a free connection (a resent request's lost first attempt included). All in whole µs, so
 * that backlogMs + poolWaitMs + connection.waitedMs = sentAt - scheduledAt exactly.
 */
export function splitQueueDelay(
  record: RequestRecord,
  scheduledAtUs: number,
  dispatchedAtUs: number,
  sentAtUs: number,
  opened: ConnectionTiming | undefined,
): void {
  const waitUs = sentAtUs - dispatchedAtUs;
  const phases = opened && !opened.preopened ? connectionPhases(opened, waitUs) : undefined;
  record.backlogMs = (dispatchedAtUs - scheduledAtUs) / 1000;
  record.poolWaitMs = (waitUs - (phases ? us(phases.waitedMs) : 0)) / 1000;
  if (phases) record.connection = phases;
}

/** What a pool's pre-opened connections cost, as the manifest keeps it; undefined for none. */
export function preopenedConnections(
  timings: readonly ConnectionTiming[],
): PreopenedConnections | undefined {
  if (timings.length === 0) return undefined;
  let failed = 0;
  let totalUs = 0;
  let maxUs = 0;
  for (const t of timings) {
    const phases = connectionPhases(t, Number.POSITIVE_INFINITY);
    if (!phases) {
      failed++;
      continue;
    }
    const setupUs = us(phases.setupMs);
    totalUs += setupUs;
    maxUs = Math.max(maxUs, setupUs);
  }
  const ok = timings.length - failed;
  return {
    connections: timings.length,
    failed,
    setupMsMean: ok > 0 ? Math.round(totalUs / ok) / 1000 : 0,
    setupMsMax: maxUs / 1000,
  };
}
