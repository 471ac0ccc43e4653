/**
 * Warnings that say only what the run shows: `prefill_dominated` where prefill is the cost, not
 * where TTFT is queueing; and an open-loop run's shortfall under the offered rate explained as
 * the drain tail (with the steady-state window beside it) or as a server that could not keep up.
 * The simulator in virtual time is the ground truth.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { prefillWarning } from '../../../src/analysis/traps.js';
import type { LoadSpec } from '../../../src/load.js';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { type RunSummary, summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { markdownSummary } from '../../../src/report/markdown.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';
import { EngineModel, type EngineModelOptions } from '../../../src/sim/engineModel.js';
import { simulateRun } from '../../../src/sim/virtual.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';

const options: EngineModelOptions = {
  model: findModelPreset('llama-3-8b') as ModelSpec,
  gpu: findGpuPreset('h100') as GpuSpec,
  tp: 1,
  maxModelLen: 16_384,
};

function run(
  load: LoadSpec,
  shape: { input: number; output: number; requests?: number; durationS?: number; seed?: number },
): RunSummary {
  const records: RequestRecord[] = [];
  simulateRun({
    engine: new EngineModel(options),
    load,
    ...(shape.requests !== undefined ? { requests: shape.requests } : {}),
    ...(shape.durationS !== undefined ? { durationS: shape.durationS } : {}),
    warmupRequests: 0,
    seed: shape.seed ?? 1,
    endpoint: 'completions',
    nextRequest: createSyntheticWorkload({
      inputTokens: shape.input,
      outputTokens: shape.output,
      seed: 1,
    }),
    onRecord: (r) => records.push(r),
  });
  return summarize(records, { load });
}

const codes = (s: RunSummary) => s.warnings.map((w) => w.code);

describe('prefill_dominated only where prefill is the cost', () => {
  test('128 in / 128 out, queue-bound at saturation: TTFT is queueing, no warning', () => {
    for (const load of [
      { mode: 'closed', concurrency: 4096 },
      { mode: 'open', rate: 10_000, arrival: 'constant' },
    ] as LoadSpec[]) {
      const s = run(load, { input: 128, output: 128, requests: 4000 });
      // The old test (mean TTFT over mean E2E) reads this run as prefill-bound: it queued.
      const naiveShare = s.latency.ttftMs.mean / s.latency.e2eMs.mean;
      assert.ok(naiveShare >= 0.5, `${load.mode}: mean TTFT share ${naiveShare.toFixed(2)}`);
      assert.equal(prefillWarning(s), undefined, `${load.mode}: ${prefillWarning(s)?.message}`);
    }
  });

  test('8k in / 64 out at light load: the warning, with what it measured', () => {
    const s = run(
      { mode: 'open', rate: 0.5, arrival: 'constant' },
      { input: 8192, output: 64, requests: 40 },
    );
    const w = prefillWarning(s);
    assert.ok(w);
    assert.equal(w.code, 'prefill_dominated');
    assert.match(w.message, /prompts are 128x the answers \(8,192 vs 64 tokens\)/);
    assert.match(w.detail ?? '', /TTFT is (only )?\d+% of end-to-end latency/);
  });

  test('TTFT set apart from queueing: a long-prompt run that queued says how much', () => {
    const s = run({ mode: 'closed', concurrency: 64 }, { input: 4096, output: 256, requests: 400 });
    const w = prefillWarning(s);
    assert.ok(w, 'prompts 16x the answers');
    assert.match(
      w.detail ?? '',
      /with queueing set aside: the fastest first token took [\d,]+ ms, the mean [\d,]+ ms/,
    );
  });
});

describe('open-loop throughput against the offered rate', () => {
  test('below saturation: the steady-state window keeps up, the whole run reads low, drain_tail says why', () => {
    const s = run(
      { mode: 'open', rate: 4, arrival: 'constant' },
      { input: 128, output: 1024, durationS: 40 },
    );
    const steady = s.steadyState;
    assert.ok(steady);
    assert.ok(
      Math.abs(steady.requestsPerS / steady.offeredRequestsPerS - 1) < 0.05,
      `steady ${steady.requestsPerS} vs offered ${steady.offeredRequestsPerS}`,
    );
    // Tokens while arrivals were open: the offered rate times the answer length.
    const offeredTokens = steady.offeredRequestsPerS * 1024;
    assert.ok(
      Math.abs(steady.outputTokensPerS / offeredTokens - 1) < 0.05,
      `steady ${steady.outputTokensPerS} tok/s vs ${offeredTokens}`,
    );
    assert.ok(
      s.throughput.requestsPerS < steady.offeredRequestsPerS * 0.9,
      `whole run ${s.throughput.requestsPerS}`,
    );
    assert.ok(steady.drainS > 5 && steady.drainShare > 0.1, `drain ${steady.drainS} s`);
    const w = s.warnings.find((x) => x.code === 'drain_tail');
    assert.ok(w, codes(s).join(','));
    assert.match(w.message, /under the offered 4\.00 req\/s only for its [\d.]+ s drain tail/);
    assert.match(w.message, /the server kept up/);
    assert.equal(w.severity, 'info');
    assert.ok(!codes(s).includes('below_offered_rate'));
    // The reports show the window beside the whole-run figure.
    const terminal = renderTerminalSummary(s, { color: false });
    assert.match(
      terminal,
      /steady state +[\d,.]+ output tok\/s, [\d.]+ req\/s over [\d.]+ s from p95 E2E after the first send to the last send \(offered 4(\.00)? req\/s; drain tail/,
    );
    assert.match(
      markdownSummary('run', [{ name: 'run', summary: s }]),
      /\*\*Steady state\*\*: .*offered 4/,
    );
  });

  test('overloaded: even the steady-state window falls short, so the server could not keep up', () => {
    const s = run(
      { mode: 'open', rate: 200, arrival: 'constant' },
      { input: 128, output: 256, durationS: 30 },
    );
    // The queue grows all run: either the window finished far fewer than offered, or the
    // answers' p95 E2E outlasted the arrivals and there is no steady state at all.
    const steady = s.steadyState;
    if (steady) assert.ok(steady.requestsPerS < steady.offeredRequestsPerS * 0.8);
    const w = s.warnings.find((x) => x.code === 'below_offered_rate');
    assert.ok(w, codes(s).join(','));
    assert.match(
      w.message,
      steady
        ? /the server fell behind the offered 200\.00 req\/s/
        : /the run finished [\d.]+ req\/s of the offered 200\.00 req\/s and never reached a steady state/,
    );
    assert.ok(!codes(s).includes('drain_tail'));
  });

  test("a full --max-concurrency is named as the client's cap, not as a server that fell behind", () => {
    // Issue 47: `--rate 50 --max-concurrency 4` read "the server could not keep up with the
    // offered 63.51 req/s". Four slots hold about 4 req/s of these answers: arrivals waited in
    // the client, and the server was never offered 50 req/s.
    const s = run(
      { mode: 'open', rate: 50, arrival: 'poisson', maxConcurrency: 4 },
      { input: 256, output: 128, requests: 200 },
    );
    assert.ok(!codes(s).includes('below_offered_rate'), codes(s).join(','));
    const w = s.warnings.find((x) => x.code === 'max_concurrency_capped');
    assert.ok(w, codes(s).join(','));
    assert.equal(w.severity, 'warning');
    assert.match(
      w.message,
      /^--max-concurrency 4 held arrivals back \(queue delay p50 [\d.,]+ (ms|s)\)/,
    );
    assert.match(w.message, /of the 50\.00 req\/s asked; raise --max-concurrency/);
    assert.equal(s.steadyState?.offeredRequestsPerS, 50);
    // Uncapped, the same schedule overloads the server: that shortfall is the server's.
    const uncapped = run(
      { mode: 'open', rate: 50, arrival: 'poisson' },
      { input: 256, output: 4096, requests: 200 },
    );
    assert.ok(!codes(uncapped).includes('max_concurrency_capped'), codes(uncapped).join(','));
    assert.ok(codes(uncapped).includes('below_offered_rate'), codes(uncapped).join(','));
  });

  test('the offered rate is the rate asked, not the rate random arrivals happened to draw', () => {
    // Issue 47: `--rate 2 --duration 10` reported "offered 2.53 req/s" (26 Poisson arrivals in
    // 10 s) and a shortfall under it, though the server finished more than the 2 asked.
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const s = run(
        { mode: 'open', rate: 2, arrival: 'poisson' },
        { input: 256, output: 128, durationS: 10, seed },
      );
      const steady = s.steadyState;
      assert.ok(steady, `seed ${seed}`);
      assert.equal(steady.offeredRequestsPerS, 2);
      assert.ok(steady.scheduledRequestsPerS !== undefined && steady.scheduledRequestsPerS > 0);
      // A light load the server answers in about a second: whatever the draw, no shortfall
      // beyond the drain tail, and never one against a rate above the asked 2.
      assert.ok(!codes(s).includes('below_offered_rate'), `seed ${seed}: ${codes(s).join(',')}`);
      for (const w of s.warnings.filter((x) => x.code === 'drain_tail')) {
        const offered = Number(/under the offered ([\d.]+) req\/s/.exec(w.message)?.[1]);
        assert.ok(offered <= 2, `seed ${seed}: ${w.message}`);
      }
      assert.match(
        renderTerminalSummary(s, { color: false }),
        /\(offered 2(\.00)? req\/s; drain tail/,
        `seed ${seed}`,
      );
    }
  });

  test('closed loop: no steady-state window and no offered-rate warning', () => {
    const s = run({ mode: 'closed', concurrency: 8 }, { input: 128, output: 128, requests: 200 });
    assert.equal(s.steadyState, undefined);
    assert.ok(!codes(s).includes('drain_tail') && !codes(s).includes('below_offered_rate'));
  });
});
