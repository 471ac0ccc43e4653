import type { RequestRecord } from '../../src/record.js';
import { createRng } from '../../src/rng.js';

export interface Phased {
  requests?: number;
  /** Pool wait per request: log-normal around this median (ms), sigma 0.3. */
  poolWaitMedianMs?: number;
  /** Share of requests that open a connection (TCP 0.2 ms, then TLS when `tlsMs` is given). */
  openShare?: number;
  /** TLS handshake median (ms) of a connection opened. */
  tlsMs?: number;
  /** Records from before the connection phases: no backlogMs, poolWaitMs or connection. */
  old?: boolean;
}

/**
 * A closed loop of 4 slots: each request's TTFT 50 ms and eight tokens 10 ms apart after its
 * pool wait; known connection phases (docs/metrics.md, "Connection phases"), drawn per request.
 */
export function phasedRecords(seed: number, o: Phased = {}): RequestRecord[] {
  const rng = createRng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
  const slots = [0, 0, 0, 0];
  return Array.from({ length: o.requests ?? 400 }, (_, id) => {
    const slot = slots.indexOf(Math.min(...slots));
    const scheduledAt = slots[slot];
    const poolWaitMs = (o.poolWaitMedianMs ?? 0.002) * Math.exp(0.3 * gauss());
    const opens = rng.next() < (o.openShare ?? 0);
    const tlsMs = o.tlsMs !== undefined ? o.tlsMs * Math.exp(0.2 * gauss()) : undefined;
    const setupMs = 0.2 + (tlsMs ?? 0);
    const connection = opens
      ? { setupMs, waitedMs: setupMs, tcpMs: 0.2, ...(tlsMs !== undefined ? { tlsMs } : {}) }
      : undefined;
    const sentAt = scheduledAt + poolWaitMs + (connection?.waitedMs ?? 0);
    const dtUs = [50_000, ...Array.from({ length: 7 }, () => 10_000)];
    slots[slot] = sentAt + 120;
    const record: RequestRecord = {
      id,
      phase: 'measure',
      scheduledAt,
      sentAt,
      firstTokenAt: sentAt + 50,
      firstContentAt: sentAt + 50,
      lastTokenAt: sentAt + 120,
      endAt: sentAt + 120,
      requestedInputTokens: 256,
      requestedOutputTokens: 8,
      status: 200,
      outputTokens: 8,
      outputTokensSource: 'server',
      events: { dtUs, tokens: dtUs.map(() => 1), contentChars: dtUs.map(() => 4) },
    };
    if (!o.old) {
      record.backlogMs = 0;
      record.poolWaitMs = poolWaitMs;
      if (connection) record.connection = connection;
    }
    return record;
  });
}
