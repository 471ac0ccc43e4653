/**
 * A trace replayed against the simulator: each request goes out at its trace time over the
 * speed-up, and virtual time schedules the same trace the same way. Sends are judged to the
 * millisecond, so npm test runs this file alone (test/helpers/alone.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RequestSpec } from '../../src/backends/types.js';
import { findGpuPreset, type GpuSpec } from '../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../src/memory/model.js';
import type { RequestRecord } from '../../src/record.js';
import { describeLoad } from '../../src/report/terminal.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { EngineModel } from '../../src/sim/engineModel.js';
import { simulateRun } from '../../src/sim/virtual.js';
import { createSyntheticWorkload } from '../../src/workload/synthetic.js';
import { type TraceEntry, traceLengths, traceLoad } from '../../src/workload/trace.js';
import { runAlone } from '../helpers/alone.js';
import { runAgainst } from '../helpers/run.js';
import { startSim } from '../helpers/sim.js';

await runAlone(import.meta.url);

describe('trace replay end to end', () => {
  // Whole ms, replayed at 2x: every scheduled time is a multiple of 0.5 ms, exact in µs.
  const times = [0, 0, 13, 40, 41, 77, 120, 120, 150, 199, 230, 260, 261, 300, 333, 350, 390];
  const entries: TraceEntry[] = times.map((atMs, i) => ({
    atMs,
    inputTokens: 8 + (i % 5),
    outputTokens: 2 + (i % 4),
  }));
  const load = traceLoad(entries, { speed: 2, source: 'inline' });
  const lengths = traceLengths(entries);
  /** The lengths of trace entry `id` reach request `id`. */
  const nextRequest = (id: number): RequestSpec => {
    const e = lengths(id);
    if (!e) throw new Error(`request ${id} is past the trace`);
    return createSyntheticWorkload({ ...e, seed: 7 })(id);
  };
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ engine: 'scripted', 'itl-ms': 2 });
  });
  after(() => sim.stop());

  test('against the simulator: scheduledAt is the trace time / speed, sends on time, stops at the end', async () => {
    const { records, result, summary } = await runAgainst(sim.url, {
      load,
      requests: 100,
      engine: { nextRequest },
    });
    assert.equal(records.length, times.length, 'nothing is sent after the last entry');
    assert.equal(result.stoppedBy, 'plan');
    const start = records[0].scheduledAt;
    const slips: number[] = [];
    for (const [i, r] of records.entries()) {
      assert.ok(Math.abs(r.scheduledAt - start - times[i] / 2) < 1e-6, `request ${i}`);
      assert.equal(r.requestedInputTokens, entries[i].inputTokens);
      assert.equal(r.requestedOutputTokens, entries[i].outputTokens);
      assert.equal(r.error, undefined);
      slips.push(r.sentAt - r.scheduledAt);
      assert.ok(
        r.sentAt - r.scheduledAt < 250,
        `request ${i} sent ${r.sentAt - r.scheduledAt} ms late`,
      );
    }
    // Timer lateness on a loaded 2-core VM is about a millisecond a wake-up; beside a CPU-bound
    // job a few of 17 sends come tens of ms late, which moves a mean but not the median.
    slips.sort((a, b) => a - b);
    const median = slips[slips.length >> 1];
    assert.ok(slips[0] >= 0 && median < 10, `median send slip ${median} ms`);
    assert.match(describeLoad(summary), /^trace replay at 2x \(17 requests\)/);
  });

  test('in virtual time: the same trace gives the same scheduled times', () => {
    const engine = new EngineModel({
      model: findModelPreset('llama-3-8b') as ModelSpec,
      gpu: findGpuPreset('h100') as GpuSpec,
    });
    const records: RequestRecord[] = [];
    const run = simulateRun({
      engine,
      load,
      requests: 100,
      warmupRequests: 0,
      seed: 7,
      endpoint: 'completions',
      nextRequest,
      onRecord: (r) => records.push(r),
    });
    records.sort((a, b) => a.id - b.id);
    assert.equal(records.length, times.length);
    assert.deepEqual(
      records.map((r) => r.scheduledAt),
      times.map((t) => t / 2),
    );
    assert.ok(run.simulatedS < 10, 'the run ends after the last request, not at infinity');
  });
});
