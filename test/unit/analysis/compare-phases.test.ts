/**
 * `compare` on the connection phases (issue 49): pool wait p50 and p99, new connections per
 * request and the TLS handshake's p50, lower better, where either run has them; runs from
 * before the phases still compare (their rows n/a, or none).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  compareMetrics,
  compareSamples,
  type MetricComparison,
  sampleRecords,
} from '../../../src/analysis/compare.js';
import { summarize } from '../../../src/metrics/summary.js';
import { phasedRecords } from '../../helpers/phasedRecords.js';

const options = { resamples: 400 };
const byId = (ms: MetricComparison[], id: string) => {
  const m = ms.find((x) => x.id === id);
  assert.ok(m, `no metric ${id}`);
  return m;
};
const ids = (ms: MetricComparison[]) => ms.map((m) => m.id);
const BASE = compareMetrics().map((m) => m.id);

describe('compare: connection phases', () => {
  test('pool wait that grew from 2 ms to 20 ms is worse at p50 and p99; rows only for what the runs have', () => {
    const a = phasedRecords(1, { poolWaitMedianMs: 2 });
    const b = phasedRecords(2, { poolWaitMedianMs: 20 });
    const result = compareSamples(sampleRecords(a), sampleRecords(b), options);
    // Plain TCP: no TLS row.
    assert.deepEqual(ids(result), [...BASE, 'poolWait.p50', 'poolWait.p99', 'newConnections']);
    for (const id of ['poolWait.p50', 'poolWait.p99']) {
      const m = byId(result, id);
      assert.equal(m.verdict, 'worse', `${id}: ${m.why}`);
      assert.equal(m.better, 'lower');
      assert.equal(m.unit, 'ms');
    }
    // The values are the summary's own (numpy's percentile over the same requests).
    const summary = summarize(a, { load: { mode: 'closed', concurrency: 4 } });
    const p50 = byId(result, 'poolWait.p50');
    assert.ok(Math.abs((p50.baseline ?? 0) - (summary.connections?.poolWaitMs.p50 ?? -1)) < 1e-9);
    assert.ok(Math.abs((p50.candidate ?? 0) / 20 - 1) < 0.1, `${p50.candidate}`);
    // Neither opened a connection: 0 % each, no change.
    const opened = byId(result, 'newConnections');
    assert.deepEqual([opened.baseline, opened.candidate, opened.verdict], [0, 0, 'no_change']);
  });

  test('microseconds of pool wait that double are no change: under the 1 ms floor', () => {
    const a = phasedRecords(3, { poolWaitMedianMs: 0.002 });
    const b = phasedRecords(4, { poolWaitMedianMs: 0.004 });
    const m = byId(compareSamples(sampleRecords(a), sampleRecords(b), options), 'poolWait.p50');
    assert.ok((m.relative ?? 0) > 0.5, `relative ${m.relative}`);
    assert.ok(m.ci && m.ci.low > 0, 'the change itself is significant');
    assert.equal(m.verdict, 'no_change');
    assert.match(m.why, /significant but small: 0\.002 ms, under 1 ms/);
  });

  test('B opens a TLS connection for a tenth of its requests: new connections worse, TLS n/a in A', () => {
    const a = phasedRecords(5, {});
    const b = phasedRecords(6, { openShare: 0.1, tlsMs: 8 });
    const result = compareSamples(sampleRecords(a), sampleRecords(b), options);
    assert.deepEqual(ids(result).slice(BASE.length), [
      'poolWait.p50',
      'poolWait.p99',
      'newConnections',
      'tls.p50',
    ]);
    const opened = byId(result, 'newConnections');
    const summary = summarize(b, { load: { mode: 'closed', concurrency: 4 } });
    const c = summary.connections;
    assert.ok(c && c.newConnections > 20);
    // A share of the requests, as the summary counts them.
    assert.equal(opened.candidate, c.newConnections / c.requests);
    assert.equal(opened.unit, 'fraction');
    assert.equal(opened.verdict, 'worse', opened.why);
    const tls = byId(result, 'tls.p50');
    assert.equal(tls.baseline, null);
    assert.ok(Math.abs((tls.candidate ?? 0) - (c.tlsMs?.p50 ?? -1)) < 1e-9);
    assert.equal(tls.verdict, 'n/a');
    assert.match(tls.why, /the baseline has no TLS handshake p50/);
  });

  test('a run from before the phases compares: its rows n/a beside a newer run, absent between two', () => {
    const old = phasedRecords(7, { old: true });
    const now = phasedRecords(8, { poolWaitMedianMs: 3 });
    const mixed = compareSamples(sampleRecords(old), sampleRecords(now), options);
    for (const id of ['poolWait.p50', 'poolWait.p99', 'newConnections']) {
      const m = byId(mixed, id);
      assert.equal(m.verdict, 'n/a', id);
      assert.equal(m.baseline, null);
      assert.notEqual(m.candidate, null);
      assert.match(m.why, /the baseline has no/);
    }
    // The rest compares as before.
    assert.equal(byId(mixed, 'ttft.p50').verdict, 'no_change');
    const both = compareSamples(sampleRecords(old), sampleRecords(old), options);
    assert.deepEqual(ids(both), BASE);
  });
});
