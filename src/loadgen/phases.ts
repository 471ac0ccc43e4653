import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { buildConnector } from 'undici';
import { closingTunnel, openTunnel, type ProxyRoute } from '../proxy.js';
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
export function timeConnection(
  socket: Socket,
  timing: ConnectionTiming = new ConnectionTiming(),
): ConnectionTiming {
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

/**
 * The timing of a connection through a proxy's CONNECT tunnel, from now: its owner sets
 * `connectMs` when the tunnel is open and `secureMs` at the TLS handshake's end inside it. The
 * proxy resolves the server's name and connects to it, so a tunnel's "TCP" phase is the whole
 * way to an open tunnel (TCP to the proxy, CONNECT, the proxy's own connect), and it has no DNS.
 */
export function timeTunnel(): ConnectionTiming {
  return new ConnectionTiming();
}

/** An undici connector that fills `timing` as its connection's set-up goes (WarmConnector's). */
export type TimedConnector = (
  options: buildConnector.Options,
  callback: buildConnector.Callback,
  timing: ConnectionTiming,
) => void;

/** `base` (buildConnector's), timing the socket it returns from its creation. */
export function timedConnector(base: buildConnector.connector): TimedConnector {
  return (options, callback, timing) => {
    // Typed void, but undici's connector returns the socket it made (lib/core/connect.js).
    const socket = base(options, callback) as unknown as Socket | undefined;
    if (socket && typeof socket.once === 'function') timeConnection(socket, timing);
  };
}

/**
 * An https:// pool's connector through `route`: each connection is a CONNECT tunnel, which
 * `tls` (undici's buildConnector, with whatever TLS options the pool has) then runs its
 * handshake over, as it would over a socket of its own; timed as `timeTunnel` says.
 */
export function tunnelConnector(
  route: ProxyRoute,
  tls: buildConnector.connector,
  timeoutMs: number,
): TimedConnector {
  return (options, callback, timing) => {
    openTunnel(route, options.hostname, Number(options.port) || 443, timeoutMs).then(
      (tunnel) => {
        timing.connectMs = performance.now();
        const socket = tls({ ...options, httpSocket: tunnel }, callback) as unknown as
          | Socket
          | undefined;
        if (!socket || typeof socket.once !== 'function') return;
        closingTunnel(socket, tunnel).once('secureConnect', () => {
          timing.secureMs = performance.now();
        });
      },
      (err: Error) => callback(err, null),
    );
  };
}

/** Set-up timings of the sockets undici's connector opened, for the request that learns its socket. */
const socketTimings = new WeakMap<object, ConnectionTiming>();

/** The timing `timeConnection` took of `socket` through a WarmConnector, if any. */
export function timingOf(socket: object): ConnectionTiming | undefined {
  return socketTimings.get(socket);
}

/** The pre-opened connections' timings of a run's pool (H1Pool.warm, WarmConnector.warm). */
const preopenedTimings = new WeakMap<object, readonly ConnectionTiming[]>();

/** Notes that `pool` opened these connections before the run's clock started. */
export function notePreopened(pool: object, timings: readonly ConnectionTiming[]): void {
  preopenedTimings.set(pool, timings);
}

export function preopenedOf(pool: object): readonly ConnectionTiming[] {
  return preopenedTimings.get(pool) ?? [];
}

/**
 * An undici connector (buildConnector's) that times each socket it opens from its creation
 * (the `undici:client:connected` channel comes only after the handshake, too late for its
 * parts), and that can open sockets before the run's clock starts (`warm`): undici's Pool has
 * no way to connect ahead, so without it every https run's first wave timed its own
 * connection storm (TCP and TLS) inside its first requests. The pool's clients take the
 * pre-opened sockets first, as they need connections.
 */
export class WarmConnector {
  private readonly stock: Socket[] = [];
  readonly preopened: ConnectionTiming[] = [];

  constructor(
    private readonly base: TimedConnector,
    private readonly origin: string,
  ) {}

  readonly connect: buildConnector.connector = (options, callback) => {
    for (let socket = this.stock.pop(); socket; socket = this.stock.pop()) {
      // One the server closed while it waited is passed over, as an idle connection would be.
      if (socket.destroyed || !socket.writable) continue;
      socket.ref();
      // undici's own connector calls back from a socket event, never synchronously.
      queueMicrotask(() => callback(null, socket));
      return;
    }
    const timing = new ConnectionTiming();
    this.base(
      options,
      ((err: Error | null, socket: Socket | null) => {
        // Before any request can go out on it (undici:client:sendHeaders looks it up).
        if (socket) socketTimings.set(socket, timing);
        callback(err as never, socket as never);
      }) as buildConnector.Callback,
      timing,
    );
  };

  /** Opens `count` sockets and resolves once each has connected or failed; returns those open. */
  async warm(count: number): Promise<number> {
    const url = new URL(this.origin);
    // As undici's Client does: an IPv6 address without its brackets.
    const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const opening: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      const timing = new ConnectionTiming();
      timing.preopened = true;
      this.preopened.push(timing);
      opening.push(
        new Promise<void>((resolve) => {
          this.base(
            { host: url.host, hostname, protocol: url.protocol, port: url.port } as never,
            ((err: Error | null, connected: Socket | null) => {
              if (!err && connected) {
                socketTimings.set(connected, timing);
                // Waiting unref'd: a socket no request needed never holds the process open.
                this.stock.push(connected.unref());
              }
              resolve();
            }) as never,
            timing,
          );
        }),
      );
    }
    await Promise.all(opening);
    return this.stock.length;
  }

  /** Closes the sockets no client took. */
  close(): void {
    for (const socket of this.stock.splice(0)) socket.destroy();
  }
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
