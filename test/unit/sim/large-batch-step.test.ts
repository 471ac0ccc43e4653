import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { resolveEngineConfig } from '../../../src/sim/engineModel.js';
import { ringAllGatherS, ringAllReduceS } from '../../../src/sim/interconnect.js';
import type { PersonalityId } from '../../../src/sim/personality.js';
import {
  DEFAULT_EFFICIENCY,
  familyEfficiency,
  heldToGemmCeiling,
  SAMPLER_BYTES_PER_LOGIT,
  StepCostModel,
} from '../../../src/sim/roofline.js';

const gpu = (id: string) => findGpuPreset(id) as GpuSpec;
const llama8b = findModelPreset('llama-3.1-8b') as ModelSpec;
const llama70b = findModelPreset('llama-3.1-70b') as ModelSpec;

/** A decode step of `batch` sequences at 1,000 tokens of context each. */
const decode = (batch: number) => ({
  tokens: batch,
  sampledRows: batch,
  sequences: batch,
  attentionPairs: batch * 1000,
  kvTokensTouched: batch * 1000,
});

const engine = (personality: PersonalityId, gpuId: string, model: ModelSpec, tp = 1) => {
  const config = resolveEngineConfig({ model, gpu: gpu(gpuId), personality, tp });
  return { config, cost: new StepCostModel(config) };
};

describe("a large batch's step pays for its logits", () => {
  test('vLLM V1 on one H100: 512 rows of 128,256 logits, 12 bytes each through memory', () => {
    const { config, cost } = engine('vllm-v1', 'h100', llama8b);
    const s = cost.stepTime(decode(512));
    // By hand: lm_head's 16-bit write (2), the fp32 cast (2 + 4), the greedy argmax (4).
    const bytes = 512 * 128_256 * (2 + 6 + 4);
    const expected = bytes / (config.gpu.bandwidthBytesPerS * config.efficiency.mbu);
    assert.equal(config.efficiency.samplerBytesPerLogit, 12);
    assert.ok(Math.abs(s.logitsS - expected) < expected * 1e-12, `${s.logitsS} ${expected}`);
    // About 0.3 ms at 2.68 TB/s: a few per cent of the step, which the sum includes.
    assert.ok(s.logitsS > 2e-4 && s.logitsS < 4e-4, `${s.logitsS}`);
    assert.ok(
      Math.abs(s.totalS - (s.gemmS + s.attentionS + s.commS + s.logitsS + s.overheadS)) < 1e-15,
    );
    // Linear in the rows: one row costs a 512th, invisible beside its step.
    const one = cost.stepTime(decode(1));
    assert.ok(Math.abs(one.logitsS * 512 - s.logitsS) < s.logitsS * 1e-12);
    assert.ok(one.logitsS < one.totalS * 0.001);
  });

  test("vLLM V0's sampler (softmax and log-softmax on every row) moves 52 bytes to V1's 12", () => {
    assert.equal(SAMPLER_BYTES_PER_LOGIT.vllmV0, 52);
    assert.equal(SAMPLER_BYTES_PER_LOGIT.sglang03, 36);
    const v0 = engine('vllm-v0', 'h100', llama8b).cost.stepTime(decode(256)).logitsS;
    const v1 = engine('vllm-v1', 'h100', llama8b).cost.stepTime(decode(256)).logitsS;
    assert.ok(Math.abs(v0 / v1 - 52 / 12) < 1e-9, `${v0 / v1}`);
    const sglang = engine('sglang', 'h100', llama8b).cost.stepTime(decode(256)).logitsS;
    assert.ok(Math.abs(sglang / v1 - 36 / 12) < 1e-9);
  });

  test("under TP the vocab shards' 16-bit logits are all-gathered first; each rank samples whole rows", () => {
    const { config, cost } = engine('vllm-v1', 'h100', llama70b, 4);
    const rows = 256;
    const gather = ringAllGatherS(config.gpu.interconnect, 4, rows * 128_256 * 2);
    const sampler = (rows * 128_256 * 12) / (config.gpu.bandwidthBytesPerS * config.efficiency.mbu);
    const s = cost.stepTime(decode(rows));
    assert.ok(Math.abs(s.logitsS - (gather + sampler)) < 1e-15, `${s.logitsS}`);
    assert.ok(gather > 0);
  });

  test('a ring all-gather moves (p-1)/p of the message in p-1 steps: half a ring all-reduce', () => {
    const link = gpu('h100').interconnect;
    const bytes = 64 * 1024 * 1024;
    const byHand = 3.6e-6 + 3 * link.latencyS + ((3 / 4) * bytes) / link.busBytesPerS;
    assert.ok(Math.abs(ringAllGatherS(link, 4, bytes) - byHand) < 1e-15);
    const reduce = ringAllReduceS(link, 4, bytes);
    assert.ok(Math.abs(reduce - 3.6e-6 - 2 * (ringAllGatherS(link, 4, bytes) - 3.6e-6)) < 1e-12);
    assert.equal(ringAllGatherS(link, 1, bytes), 0);
  });
});

describe("GEMM shares are held to the chip's best measured matmul", () => {
  test("TensorRT-LLM's fitted fp8 share 0.75 is held to the H100's 0.709; a user's flag is not", () => {
    const h100 = gpu('h100');
    assert.equal(heldToGemmCeiling({ mfuMax8: 0.75 }, h100).mfuMax8, 0.709);
    assert.equal(heldToGemmCeiling({ mfuMax8: 0.5 }, h100).mfuMax8, 0.5);
    assert.equal(heldToGemmCeiling({ mfuMax16: 0.9 }, h100).mfuMax16, 0.803);
    const trt = resolveEngineConfig({ model: llama8b, gpu: h100, personality: 'trtllm' });
    assert.equal(trt.efficiency.mfuMax8, 0.709);
    const h200 = resolveEngineConfig({ model: llama8b, gpu: gpu('h200'), personality: 'trtllm' });
    assert.equal(h200.efficiency.mfuMax8, 0.709);
    const flagged = resolveEngineConfig({
      model: llama8b,
      gpu: h100,
      personality: 'trtllm',
      efficiency: { mfuMax8: 0.8 },
    });
    assert.equal(flagged.efficiency.mfuMax8, 0.8);
  });

  test('a family with no measured best matmul (Ada) keeps the engine value; the default engine is not held anywhere', () => {
    const l40s = resolveEngineConfig({ model: llama8b, gpu: gpu('l40s'), personality: 'trtllm' });
    assert.equal(l40s.efficiency.mfuMax8, 0.75);
    for (const id of ['h100', 'b200', 'mi300x', 'a100-80', 'l40s']) {
      const { efficiency } = resolveEngineConfig({ model: llama8b, gpu: gpu(id) });
      const unheld = { ...DEFAULT_EFFICIENCY, ...familyEfficiency(gpu(id)) };
      assert.equal(efficiency.mfuMax16, unheld.mfuMax16, id);
      assert.equal(efficiency.mfuMax8, unheld.mfuMax8, id);
    }
  });

  test('a compute-bound fp8 step of TensorRT-LLM on an H100 is slower by 0.75 / 0.709', () => {
    const h100 = gpu('h100');
    const config = resolveEngineConfig({
      model: llama8b,
      gpu: h100,
      personality: 'trtllm',
      weights: { dtype: 'fp8' },
    });
    const held = new StepCostModel(config).stepTime(decode(2048));
    const fitted = new StepCostModel({
      ...config,
      efficiency: { ...config.efficiency, mfuMax8: 0.75 },
    }).stepTime(decode(2048));
    assert.ok(held.gemmComputeBound);
    assert.ok(Math.abs(held.gemmS / fitted.gemmS - 0.75 / 0.709) < 1e-9);
  });
});
