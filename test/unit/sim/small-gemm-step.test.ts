import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { resolveEngineConfig } from '../../../src/sim/engineModel.js';
import { gemmHalfTokens, StepCostModel } from '../../../src/sim/roofline.js';

const gpu = (id: string) => findGpuPreset(id) as GpuSpec;
const llama8b = findModelPreset('llama-3.1-8b') as ModelSpec;

const cost = (gpuId: string) => {
  const config = resolveEngineConfig({ model: llama8b, gpu: gpu(gpuId), personality: 'vllm-v1' });
  return { config, cost: new StepCostModel(config) };
};

/** A decode step of `batch` sequences at 500 tokens of context each. */
const decode = (batch: number) => ({
  tokens: batch,
  sampledRows: batch,
  sequences: batch,
  attentionPairs: batch * 500,
  kvTokensTouched: batch * 500,
});

describe('small-GEMM steps', () => {
  test("h follows the dispatch's M tile up to 64 rows, then stays the 128-row tile's", () => {
    // Ampere: 16-row MMA tiles, then 32 and 64; past 64 rows, the large tile's h.
    const ampere = [16, 32, 64];
    assert.deepEqual(
      [1, 16, 17, 32, 33, 64, 65, 128, 2048].map((t) => gemmHalfTokens(128, ampere, t)),
      [16, 16, 32, 32, 64, 64, 128, 128, 128],
    );
    // Hopper's swapped-AB fp8 dispatch: 16, then 64.
    assert.deepEqual(
      [1, 16, 17, 64, 65].map((t) => gemmHalfTokens(128, [16, 64], t)),
      [16, 16, 64, 64, 128],
    );
    // A user's h is the large tile's: the small tiles keep their share of it.
    assert.equal(gemmHalfTokens(256, ampere, 1), 32);
    // No tiles read (a CPU, CDNA3, Blackwell): the measured ramp at every size.
    assert.equal(gemmHalfTokens(6, undefined, 1), 6);
  });

  test('the compute a step is charged never falls as its rows grow', () => {
    for (const tiles of [[16, 32, 64], [16, 64], undefined]) {
      let last = 0;
      for (let t = 1; t <= 4096; t++) {
        const rows = t + gemmHalfTokens(128, tiles, t);
        assert.ok(rows >= last, `tiles ${tiles}: ${t} rows charged ${rows} after ${last}`);
        last = rows;
      }
    }
  });

  test('an A10G or RTX 3090 decode of 1 and 8 rows streams the weights', () => {
    for (const id of ['a10g', 'rtx3090']) {
      const { config, cost: c } = cost(id);
      const streamS =
        c.weightBytesPerDecodeStep / (config.gpu.bandwidthBytesPerS * config.efficiency.mbu);
      for (const batch of [1, 8]) {
        const s = c.stepTime(decode(batch));
        assert.equal(s.gemmComputeBound, false, `${id} ${batch} rows`);
        assert.ok(Math.abs(s.gemmS / streamS - 1) < 0.01, `${id} ${batch}: ${s.gemmS} ${streamS}`);
      }
      // About 16 GB over 480 or 749 GB/s: 33 or 21 ms, where the 128-row ramp charged 45.
      assert.ok(streamS > 0.015 && streamS < 0.04, `${id}: ${streamS}`);
    }
  });

  test('a step just past a tile pays the next one; past 64 rows, the large tile', () => {
    const { config, cost: c } = cost('a10g');
    const mfuMax = config.efficiency.mfuMax16;
    const near = (a: number, b: number) => Math.abs(a / b - 1) < 1e-12;
    assert.ok(near(c.mfu(16), (mfuMax * 16) / (16 + 16)));
    assert.ok(near(c.mfu(17), (mfuMax * 17) / (17 + 32)));
    assert.ok(near(c.mfu(65), (mfuMax * 65) / (65 + 128)));
    // At 65 rows the A10G's GEMMs are compute-bound, as the 128-row ramp had them.
    assert.equal(c.stepTime(decode(65)).gemmComputeBound, true);
  });

  test('an H100 prefill of 2,048 tokens keeps the ramp of 128-row tiles', () => {
    const { config, cost: c } = cost('h100');
    const mfuMax = config.efficiency.mfuMax16;
    assert.ok(Math.abs(c.mfu(2048) / ((mfuMax * 2048) / (2048 + 128)) - 1) < 1e-12);
    const s = c.stepTime({
      tokens: 2048,
      sampledRows: 1,
      sequences: 1,
      attentionPairs: (2048 * 2048) / 2,
      kvTokensTouched: 2048,
    });
    assert.equal(s.gemmComputeBound, true);
  });
});
