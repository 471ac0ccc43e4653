import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  assessClientHealth,
  clientHealthVerdict,
  mergePreopened,
} from '../../../src/metrics/clientHealth.js';
import { ConnectionsBuilder } from '../../../src/metrics/connections.js';
import { summarize } from '../../../src/metrics/summary.js';
import type { ClientHealthMeasurements, RequestRecord } from '../../../src/record.js';

const quiet: ClientHealthMeasurements = {
  eventLoopDelayMs: { p50: 0.1, p99: 0.5, max: 1 },
  cpuUserS: 0.1,
  cpuSystemS: 0.05,
  wallS: 10,
  sendSlipMs: [],
  tokenEvents: 100,
  coalescedTokenEvents: 0,
};

function record(id: number, o: Partial<RequestRecord> = {}): RequestRecord {
  return {
    id,
    phase: 'measure',
    scheduledAt: 0,
    sentAt: 0,
    firstTokenAt: 100,
    lastTokenAt: 101,
    endAt: 101,
    requestedInputTokens: 1,
    requestedOutputTokens: 2,
    outputTokens: 2,
    outputTokensSource: 'events',
    events: { dtUs: [100_000, 1000], tokens: [1, 1], contentChars: [1, 1] },
    ...o,
  };
}

describe('client health: pool wait against TTFT', () => {
  test('pool wait p50 past 10 % of TTFT p50 is client-limited, with its own advice', () => {
    const h = assessClientHealth(quiet, { ttftP50Ms: 100, poolWaitP50Ms: 25 });
    assert.equal(clientHealthVerdict(h), 'client-limited');
    assert.match(
      h.causes?.[0] ?? '',
      /pool wait p50 25\.0 ms, 25% of TTFT p50 100\.0 ms \(limit 10%\)/,
    );
    assert.match(h.advice ?? '', /free connection/);
    assert.doesNotMatch(h.advice ?? '', /--workers/);
  });

  test('near the limit is a note; under a millisecond is not judged', () => {
    const near = assessClientHealth(quiet, { ttftP50Ms: 100, poolWaitP50Ms: 7 });
    assert.equal(clientHealthVerdict(near), 'ok, near a limit');
    const tiny = assessClientHealth(quiet, { ttftP50Ms: 2, poolWaitP50Ms: 0.9 });
    assert.equal(clientHealthVerdict(tiny), 'ok');
  });

  test('the summary judges the records: requests that waited a fifth of their TTFT', () => {
    const records = [0, 1, 2, 3].map((id) =>
      record(id, { scheduledAt: 0, sentAt: 20, backlogMs: 0, poolWaitMs: 20, firstTokenAt: 120 }),
    );
    const s = summarize(
      records,
      { load: { mode: 'closed', concurrency: 4 } },
      { clientHealth: quiet },
    );
    assert.equal(s.connections?.poolWaitMs.p50, 20);
    assert.equal(s.clientHealth?.clientLimited, true);
  });
});

describe('ConnectionsBuilder', () => {
  test('measured, warm-up and older records apart; merged exactly', () => {
    const a = new ConnectionsBuilder();
    const b = new ConnectionsBuilder();
    const opened = { setupMs: 3, waitedMs: 3, dnsMs: 1, tcpMs: 1, tlsMs: 1 };
    a.add(record(0, { backlogMs: 0, poolWaitMs: 0, connection: opened }));
    a.add(record(1, { phase: 'warmup', backlogMs: 0, poolWaitMs: 0, connection: opened }));
    a.add(record(2)); // older: no split
    b.add(record(3, { backlogMs: 2, poolWaitMs: 4 }));
    a.merge(b.state());
    const s = a.build();
    assert.equal(s?.requests, 2);
    assert.equal(s?.newConnections, 1);
    assert.equal(s?.tlsMs?.count, 1);
    assert.equal(s?.poolWaitMs.max, 4);
    assert.equal(s?.warmup?.requests, 1);
    assert.equal(s?.warmup?.newConnections, 1);
    assert.equal(new ConnectionsBuilder().build(), undefined);
  });

  test('pre-opened connections of several threads merge by count', () => {
    const m = mergePreopened([
      { connections: 2, failed: 0, setupMsMean: 1, setupMsMax: 1.5 },
      undefined,
      { connections: 3, failed: 1, setupMsMean: 4, setupMsMax: 6 },
    ]);
    assert.deepEqual(m, { connections: 5, failed: 1, setupMsMean: 2.5, setupMsMax: 6 });
  });
});
