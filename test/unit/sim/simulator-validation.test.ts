/**
 * The simulated engine against published measurements (REFERENCE-memory-and-simulator.md
 * section 4). Tolerances are the issue's, fixed before the model was run; the achieved errors
 * are printed and listed in the README's simulator section.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  groupErrors,
  loadPoints,
  medianAbs,
  POINT_LIMIT,
  signedMedian,
  simulatePoint,
  TARGETS,
} from '../../../bench/simValidation.js';
import type { LoadSpec } from '../../../src/load.js';
import { weightBytes } from '../../../src/memory/footprint.js';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { EngineModel, type EngineModelOptions } from '../../../src/sim/engineModel.js';
import { simulateRun } from '../../../src/sim/virtual.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';

const preset = (id: string): ModelSpec => findModelPreset(id) as ModelSpec;
const gpu = (id: string): GpuSpec => findGpuPreset(id) as GpuSpec;
const relError = (got: number, want: number) => (got - want) / want;
const pct = (e: number) => `${(e * 100).toFixed(1)}%`;

/** Runs one request alone and returns its token times (ms of engine time). */
function single(options: EngineModelOptions, promptTokens: number, maxTokens: number): number[] {
  const engine = new EngineModel(options);
  const times: number[] = [];
  engine.add({ arrivalNs: 0, promptTokens, maxTokens }, { onToken: (at) => times.push(at / 1e6) });
  while (engine.step()) {}
  return times;
}

function virtualRun(
  options: EngineModelOptions,
  load: LoadSpec,
  shape: { input: number; output: number; durationS?: number; requests?: number; seed?: number },
): { records: RequestRecord[]; engine: EngineModel } {
  const engine = new EngineModel(options);
  const records: RequestRecord[] = [];
  simulateRun({
    engine,
    load,
    ...(shape.durationS !== undefined ? { durationS: shape.durationS } : {}),
    ...(shape.requests !== undefined ? { requests: shape.requests } : {}),
    warmupRequests: 0,
    seed: shape.seed ?? 1,
    endpoint: 'completions',
    nextRequest: createSyntheticWorkload({
      inputTokens: shape.input,
      outputTokens: shape.output,
      seed: shape.seed ?? 1,
    }),
    onRecord: (r) => records.push(r),
  });
  records.sort((a, b) => a.id - b.id);
  return { records, engine };
}

describe('simulated engine: closed forms', () => {
  test('batch-1 decode time per token = (weights / TP + KV read) / (bandwidth x MBU) + overhead, exactly', () => {
    for (const [modelId, gpuId, tp] of [
      ['llama-3-8b', 'h100', 1],
      ['qwen2.5-7b', 'l40s', 1],
      ['llama-2-7b', 'a100-80', 1],
      ['llama-3-70b', 'h100', 2],
    ] as const) {
      const model = preset(modelId);
      const g = gpu(gpuId);
      const options: EngineModelOptions = { model, gpu: g, tp, maxModelLen: 4096 };
      const engine = new EngineModel(options);
      const e = engine.config.efficiency;
      const prompt = 100;
      const times = single(options, prompt, 6);
      const w = weightBytes(model, { dtype: 'bf16' });
      // The input embedding is a row lookup, not a read of the table; lm_head is read.
      const weightsRead = (w.total - w.embedding / 2) / tp;
      const kvPerToken = engine.memory.kvBytesPerToken;
      for (let i = 1; i < times.length; i++) {
        // The decode that samples token i reads the KV of the prompt and i - 1 tokens, writes 1.
        const kvTokens = prompt + i;
        // Two all-reduces per layer of one token's hidden state; at TP 2 vLLM's one-shot custom
        // all-reduce: 4 us plus the peer's bytes read at 60 GB/s (or the link's, if slower).
        const comm =
          tp > 1
            ? 2 *
              model.layers *
              (4e-6 +
                ((tp - 1) * model.hiddenSize * 2) / Math.min(60e9, g.interconnect.busBytesPerS))
            : 0;
        const expectedMs =
          ((weightsRead + kvPerToken * kvTokens) / (g.bandwidthBytesPerS * e.mbu) +
            e.stepOverheadS +
            e.perSeqOverheadS +
            comm) *
          1e3;
        // Engine time is kept in whole nanoseconds.
        assert.ok(
          Math.abs(times[i] - times[i - 1] - expectedMs) < 2e-6,
          `${modelId} on ${tp}x ${gpuId}: token ${i} took ${times[i] - times[i - 1]} ms, expected ${expectedMs}`,
        );
      }
    }
  });

  test('TTFT at batch 1 against the TensorRT-LLM v0.5 table: within 25 %', () => {
    // NVIDIA/TensorRT-LLM docs/source/performance.md: engine time, no HTTP front end.
    const table = [
      { gpu: 'a100-80', dtype: 'fp16', input: 128, ms: 16 },
      { gpu: 'a100-80', dtype: 'fp16', input: 2048, ms: 133 },
      { gpu: 'h100', dtype: 'fp8', input: 128, ms: 7 },
      { gpu: 'h100', dtype: 'fp8', input: 2048, ms: 36 },
    ] as const;
    for (const row of table) {
      const ttft = single(
        {
          model: preset('llama-2-7b'),
          gpu: gpu(row.gpu),
          weights: { dtype: row.dtype },
          kvDtype: row.dtype === 'fp8' ? 'fp8' : 'fp16',
          efficiency: { frontendLatencyS: 0 },
        },
        row.input,
        1,
      )[0];
      const error = relError(ttft, row.ms);
      console.log(
        `  LLaMA-7B ${row.dtype} ${row.gpu} ${row.input} tokens: TTFT ${ttft.toFixed(3)} ms vs ${row.ms} ms (${pct(error)})`,
      );
      assert.ok(Math.abs(error) <= 0.25, `${row.gpu} ${row.input}: ${pct(error)}`);
    }
  });
});

describe('simulated engine: the vLLM 0.11 H100 Llama-3.1-8B load sweep', () => {
  // kubernetes-sigs/inference-perf demos/kubecon-na-2025/vllm+batch_size: ISL ~201, OSL ~63,
  // max-num-seqs 192, no chunked prefill, no prefix caching. TPOT = (e2e - TTFT) / (OSL - 1).
  const options: EngineModelOptions = {
    model: preset('llama-3.1-8b'),
    gpu: gpu('h100'),
    maxNumSeqs: 192,
    chunkedPrefill: false,
    maxModelLen: 8192,
  };
  const points = [
    { qps: 1, ttftMs: 33, tpotMs: 7.3, outputTokS: 62 },
    { qps: 38, ttftMs: 31, tpotMs: 8.6, outputTokS: 2366 },
    { qps: 75, ttftMs: 39, tpotMs: 11.8, outputTokS: 4661 },
    { qps: 112, ttftMs: 146, tpotMs: 25.1, outputTokS: 6956 },
  ];
  for (const point of points) {
    test(`${point.qps} QPS: mean TTFT and TPOT within 25 %`, () => {
      const { records } = virtualRun(
        options,
        { mode: 'open', rate: point.qps, arrival: 'poisson' },
        { input: 201, output: 63, durationS: point.qps === 1 ? 300 : 60 },
      );
      // The first 10 s fill the system; the published figures are steady-state means.
      const steady = records.filter((r) => r.sentAt >= 10_000 && !r.error);
      const mean = (f: (r: RequestRecord) => number) =>
        steady.reduce((sum, r) => sum + f(r), 0) / steady.length;
      const ttft = mean((r) => (r.firstTokenAt as number) - r.sentAt);
      const tpot = mean((r) => (r.endAt - (r.firstTokenAt as number)) / (r.outputTokens - 1));
      const ttftError = relError(ttft, point.ttftMs);
      const tpotError = relError(tpot, point.tpotMs);
      console.log(
        `  ${point.qps} QPS: TTFT ${ttft.toFixed(1)} ms vs ${point.ttftMs} (${pct(ttftError)}), TPOT ${tpot.toFixed(2)} ms vs ${point.tpotMs} (${pct(tpotError)})`,
      );
      assert.ok(Math.abs(ttftError) <= 0.25, `TTFT ${pct(ttftError)}`);
      assert.ok(Math.abs(tpotError) <= 0.25, `TPOT ${pct(tpotError)}`);
    });
  }

  test('saturation throughput (>= 149 QPS requested, about 7,100 output tok/s) within 25 %', () => {
    const { records } = virtualRun(
      options,
      { mode: 'open', rate: 149, arrival: 'poisson' },
      { input: 201, output: 63, durationS: 60 },
    );
    const summary = summarize(records, { load: { mode: 'open', rate: 149, arrival: 'poisson' } });
    const error = relError(summary.throughput.outputTokensPerS, 7100);
    console.log(
      `  149 QPS: ${summary.throughput.outputTokensPerS.toFixed(0)} output tok/s vs ~7,100 (${pct(error)})`,
    );
    assert.ok(Math.abs(error) <= 0.25, pct(error));
  });
});

describe('simulated engine: published measurements it was not fitted to (issue 17)', () => {
  // Targets fixed by the issue before any comparison: on the validation set, the median absolute
  // error is at most 15 % for TPOT/ITL and output throughput and 25 % for TTFT at light and mid
  // load (batch 1, or a published TTFT under a second); no point misses a targeted figure by more
  // than 50 % unless its `knownMiss` says why. bench/sim-validation.ts prints every point.
  const results = loadPoints('test/fixtures/sim-validation/points.json').map((p) =>
    simulatePoint(p),
  );
  // The targets were fixed over the personalities issue 17 validated; TGI's points (simulated
  // since issue 31 gave it a personality) are reported beside them, not inside them.
  const validation = results.filter(
    (r) => r.point.role === 'validation' && !r.skipped && r.point.engine.personality !== 'tgi',
  );

  test('the sets: at most a third for fitting; at least 20 validation points over 4 GPUs, 3 engines, batch 1 and load', () => {
    const fit = results.filter((r) => r.point.role === 'fit');
    assert.ok(
      fit.length * 3 <= results.length,
      `${fit.length} of ${results.length} in the fit set`,
    );
    assert.ok(validation.length >= 20, `${validation.length} validation points`);
    assert.ok(new Set(validation.map((r) => r.point.hardware.gpu)).size >= 4);
    assert.ok(new Set(validation.map((r) => r.point.engine.personality)).size >= 3);
    assert.ok(validation.some((r) => r.point.load.kind === 'batch1'));
    assert.ok(validation.some((r) => r.point.load.kind !== 'batch1'));
    for (const r of results) {
      if (r.skipped) assert.ok(r.point.skip, `${r.point.id} was not simulated: ${r.skipped}`);
    }
  });

  for (const group of ['ttft', 'tpot', 'throughput'] as const) {
    test(`validation set: median |error| of ${group} within ${TARGETS[group] * 100} %`, () => {
      const errors = groupErrors(validation, group);
      const median = medianAbs(errors) as number;
      console.log(`  ${group}: median |error| ${pct(median)} over ${errors.length} points`);
      assert.ok(errors.length >= 5, `${errors.length} points`);
      assert.ok(median <= TARGETS[group], pct(median));
    });
  }

  test('no targeted figure beyond 50 % without a stated reason', () => {
    const misses: string[] = [];
    for (const r of validation) {
      for (const [group, error] of Object.entries(r.groups)) {
        if (group === 'ttft' && !r.ttftTargeted) continue;
        if (Math.abs(error) > POINT_LIMIT && !r.point.knownMiss) {
          misses.push(`${r.point.id} ${group} ${pct(error)}`);
        }
      }
    }
    assert.deepEqual(misses, []);
  });
});

describe('simulated engine, round two (issue 31): published points it was not fitted to', () => {
  const results = loadPoints('test/fixtures/sim-validation/points-round2.json').map((p) =>
    simulatePoint(p),
  );

  test('at least 20 new validation points, none used to fit; every one simulated or skipped for a stated reason', () => {
    assert.ok(results.length >= 20, `${results.length} points`);
    for (const r of results) {
      assert.equal(r.point.role, 'validation', r.point.id);
      if (r.skipped) assert.ok(r.point.skip, `${r.point.id} was not simulated: ${r.skipped}`);
    }
  });

  test('no false refusal: every configuration that served starts in the simulator', () => {
    const refused = results
      .filter((r) => r.refused && r.point.load.kind !== 'startup')
      .map((r) => `${r.point.id}: ${r.refused}`);
    assert.deepEqual(refused, []);
    // A start-up log whose engine refused (the pool held 0.82 of one 29,000-token request):
    // the simulator refuses too.
    const short = results.find((r) => r.point.id.endsWith('rtx3090-llama31-8b-v0-mml29000'));
    assert.ok(short?.refused, 'vLLM V0 refused at 29,000 and so does the simulator');
  });

  test("issue 31's met targets hold: TTFT at light and mid load, KV pool, throughput bias, MI300X", () => {
    const ttft = medianAbs(groupErrors(results, 'ttft')) ?? 1;
    assert.ok(ttft <= 0.2, `TTFT median |error| ${(ttft * 100).toFixed(1)} %`);
    const kv = medianAbs(groupErrors(results, 'kvPool')) ?? 1;
    assert.ok(kv <= 0.05, `KV pool median |error| ${(kv * 100).toFixed(1)} %`);
    const bias = signedMedian(groupErrors(results, 'throughput')) ?? 1;
    assert.ok(Math.abs(bias) <= 0.05, `throughput signed median ${(bias * 100).toFixed(1)} %`);
    const mi300x = results.filter((r) => r.point.hardware.gpu === 'mi300x');
    assert.ok(mi300x.length >= 5);
    for (const r of mi300x) {
      const e = r.groups.throughput;
      if (e !== undefined)
        assert.ok(Math.abs(e) <= 0.25, `${r.point.id}: ${(e * 100).toFixed(1)} %`);
    }
  });
});
