/**
 * Issue 27, case 4: a run whose every worker was terminated (or failed) has no engine thread's
 * measurements. Its client health says they are missing instead of throwing or claiming "ok".
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assessClientHealth, clientHealthVerdict } from '../../../src/metrics/clientHealth.js';
import { summarize } from '../../../src/metrics/summary.js';
import type { ClientHealthMeasurements } from '../../../src/record.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';

const UNMEASURED = /no engine thread reported its measurements/;

/** One calm engine thread over 10 s. */
const calm: ClientHealthMeasurements = {
  eventLoopDelayMs: { p50: 0.1, p99: 0.5, max: 3 },
  cpuUserS: 1,
  cpuSystemS: 0.2,
  threadCpuS: 1,
  eventLoopUtilisation: 0.1,
  wallS: 10,
  usableCores: 4,
  sendSlipMs: [],
  tokenEvents: 100,
  coalescedTokenEvents: 0,
};

describe('client health over zero engine threads', () => {
  test('says the measurements are missing: no verdict of ok, no figure made up', () => {
    const health = assessClientHealth([], {});
    assert.equal(health.unmeasured, true);
    assert.equal(health.clientLimited, false);
    assert.equal(health.nearLimit, false);
    assert.deepEqual(health.reasons, []);
    assert.equal(clientHealthVerdict(health), 'not measured');
    assert.equal(health.notes?.length, 1);
    assert.match(health.notes?.[0] ?? '', UNMEASURED);
    // The thread figures are unknown: NaN here, null in summary.json, as an empty distribution's.
    assert.ok(Number.isNaN(health.eventLoopDelayMs.p99));
    assert.ok(Number.isNaN(health.cpu.utilisation));
    assert.ok(Number.isNaN(health.coalescedEventShare));
    assert.equal(health.processCpu, undefined);
    assert.equal(health.workers, undefined);
    const saved = JSON.parse(JSON.stringify(health));
    assert.equal(saved.eventLoopDelayMs.p99, null);
    assert.equal(saved.cpu.utilisation, null);
  });

  test("the records' send rates are still judged, without a note on threads' timer bursts", () => {
    const behind = assessClientHealth([], { intendedRatePerS: 5000, achievedRatePerS: 4000 });
    assert.equal(behind.unmeasured, true);
    assert.equal(behind.clientLimited, true);
    assert.equal(clientHealthVerdict(behind), 'client-limited');
    assert.match(behind.reasons.join('; '), /achieved send rate 4000\.00\/s \(limit 95%/);
    // Per-thread arrival gaps need a thread count: with none, no note about them.
    assert.deepEqual(behind.notes?.length, 1);
    assert.match(behind.notes?.[0] ?? '', UNMEASURED);
  });

  test('one thread or several: nothing changes (no unmeasured mark)', () => {
    for (const threads of [[calm], [calm, calm]]) {
      const health = assessClientHealth(threads, {});
      assert.equal(health.unmeasured, undefined);
      assert.equal(clientHealthVerdict(health), 'ok');
      assert.equal(health.notes, undefined);
    }
  });

  test('a summary over zero threads builds, warns of nothing it cannot know, and prints', () => {
    const summary = summarize(
      [],
      { load: { mode: 'closed', concurrency: 1 } },
      { clientHealth: [] },
    );
    assert.equal(summary.clientHealth?.unmeasured, true);
    const codes = summary.warnings.map((w) => w.code);
    assert.ok(!codes.includes('client_limited'), codes.join(', '));
    assert.ok(!codes.includes('coalesced_events'), codes.join(', '));
    const text = renderTerminalSummary(summary, { color: false });
    assert.match(text, /Client health: .*: not measured\n {2}no engine thread reported/);
  });
});
