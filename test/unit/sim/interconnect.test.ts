/**
 * Tensor-parallel all-reduce cost (src/sim/interconnect.ts) and its share of a step: latency
 * for small messages, bus bandwidth for large ones, vLLM's choice of algorithm, PCIe against
 * NVLink, and TP 4 against TP 2.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findGpuPreset, type GpuSpec, type Interconnect } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { resolveEngineConfig } from '../../../src/sim/engineModel.js';
import { allReduce, allReduceAlgorithm, ringAllReduceS } from '../../../src/sim/interconnect.js';
import { StepCostModel } from '../../../src/sim/roofline.js';

const gpu = (id: string): GpuSpec => findGpuPreset(id) as GpuSpec;
const link = (id: string): Interconnect => gpu(id).interconnect;
const KiB = 1024;
const MiB = 1024 * KiB;
/** The ring's model, without a measurement: latency plus bytes over busBw. */
const ringModelS = (l: Interconnect, ranks: number, bytes: number): number =>
  ringAllReduceS({ ...l, measuredAllReduce: undefined }, ranks, bytes);
const near = (actual: number, expected: number): void =>
  assert.ok(Math.abs(actual / expected - 1) < 1e-12, `${actual} against ${expected}`);

describe('all-reduce cost', () => {
  test('a small message costs latency, not bandwidth, and more of it at more ranks', () => {
    // One token of Llama-3-70B: 8192 x 2 bytes.
    const bytes = 16 * KiB;
    for (const id of ['h100', 'l40s', 'mi300x']) {
      const l = link(id);
      let previous = 0;
      for (const tp of [2, 4, 8]) {
        const seconds = allReduce(l, tp, bytes).seconds;
        const tiny = allReduce(l, tp, 16).seconds;
        assert.ok(seconds > previous, `${id}: TP ${tp} (${seconds}) above TP ${tp / 2}`);
        // Latency-bound: 16 KiB costs less than twice a 16-byte message.
        assert.ok(seconds < 2 * tiny, `${id} TP ${tp}: ${seconds} s vs ${tiny} s for 16 bytes`);
        previous = seconds;
      }
    }
  });

  test('a large message approaches 2 (p-1)/p x bytes / bus bandwidth (NCCL ring)', () => {
    const bytes = 1024 * MiB;
    for (const id of ['h100', 'a100-80', 'h100-pcie', 'mi300x']) {
      const l = link(id);
      for (const tp of [2, 4, 8]) {
        if (l.measuredAllReduce?.ranks === tp) continue; // the measurement's, below
        const cost = allReduce(l, tp, bytes);
        assert.equal(cost.algorithm, 'ring');
        const bandwidthS = ((2 * (tp - 1)) / tp) * (bytes / l.busBytesPerS);
        assert.ok(cost.seconds >= bandwidthS, `${id} TP ${tp}`);
        assert.ok(
          cost.seconds < bandwidthS * 1.01,
          `${id} TP ${tp}: ${cost.seconds} s vs ${bandwidthS} s`,
        );
      }
    }
  });

  test('PCIe is slower than NVLink at the same TP and message', () => {
    for (const tp of [2, 4, 8]) {
      for (const bytes of [16 * KiB, 1 * MiB, 64 * MiB]) {
        const nvlink = allReduce(link('h100'), tp, bytes).seconds;
        const pcie = allReduce(link('h100-pcie'), tp, bytes).seconds;
        assert.ok(pcie > nvlink, `TP ${tp}, ${bytes} B: PCIe ${pcie} s, NVLink ${nvlink} s`);
      }
    }
  });

  test('where the ring was measured at these ranks, its time is the measurement', () => {
    const nv = link('h100');
    const model = (bytes: number) => ringModelS(nv, 8, bytes);
    // nccl-tests on 8 H100s: 83.04 us at 8 MiB, twice latency plus the plateau's busBw.
    near(allReduce(nv, 8, 8 * MiB).seconds, 83.04e-6);
    assert.ok(83.04e-6 > 1.9 * model(8 * MiB), `${model(8 * MiB)} s from the bus bandwidth`);
    // Between two measured sizes: between their times, and rising with size.
    let previous = allReduce(nv, 8, 8 * MiB).seconds;
    for (const mib of [9, 10, 12, 15, 16]) {
      const s = allReduce(nv, 8, mib * MiB).seconds;
      assert.ok(s > previous && s <= 123.8e-6 + 1e-15, `${mib} MiB: ${s} s`);
      previous = s;
    }
    // Past the largest measured size, time in proportion to size (the plateau).
    const last = 62648e-6;
    near(allReduce(nv, 8, 32 * 1024 * MiB).seconds, 2 * last);
    // Below the smallest measured size, and at other ranks, the ring's model.
    assert.equal(ringAllReduceS(nv, 8, 512 * KiB), model(512 * KiB));
    assert.equal(ringAllReduceS(nv, 4, 64 * MiB), ringModelS(nv, 4, 64 * MiB));
    // RCCL on 8 MI300X plateaus at a lower busBw than NCCL on 8 H100s: 800 against 586 us at 128 MiB.
    near(allReduce(link('mi300x'), 8, 128 * MiB).seconds, 800.3e-6);
    near(allReduce(nv, 8, 128 * MiB).seconds, 586.4e-6);
  });

  test("vLLM's choice: custom one-shot/two-shot by world size, size and link; NCCL otherwise", () => {
    const nv = link('h100');
    const pcie = link('l40s');
    const geforce = link('rtx4090');
    assert.equal(allReduceAlgorithm(nv, 2, 4 * MiB), 'one-shot');
    assert.equal(allReduceAlgorithm(nv, 4, 511 * KiB), 'one-shot');
    assert.equal(allReduceAlgorithm(nv, 4, 512 * KiB), 'two-shot');
    assert.equal(allReduceAlgorithm(nv, 8, 255 * KiB), 'one-shot');
    assert.equal(allReduceAlgorithm(nv, 8, 256 * KiB), 'two-shot');
    assert.equal(allReduceAlgorithm(nv, 8, 8 * MiB), 'ring', 'max_size is 8 MiB');
    assert.equal(allReduceAlgorithm(nv, 3, 16 * KiB), 'ring', 'world size 3 is unsupported');
    assert.equal(allReduceAlgorithm(pcie, 2, 16 * KiB), 'one-shot');
    assert.equal(allReduceAlgorithm(pcie, 4, 16 * KiB), 'ring', 'PCIe beyond 2 GPUs');
    assert.equal(allReduceAlgorithm(geforce, 2, 16 * KiB), 'ring', 'no peer access');
    // H100 NVL: NVLink-bridged pairs; TP 4 crosses PCIe between them.
    const nvl = link('h100-nvl');
    assert.equal(allReduce(nvl, 2, 16 * KiB).algorithm, 'one-shot');
    assert.equal(allReduceAlgorithm(nvl, 4, 16 * KiB), 'ring');
    assert.deepEqual(allReduce(nvl, 4, 16 * KiB), allReduce(link('h100-pcie'), 4, 16 * KiB));
    assert.equal(allReduce(nv, 1, MiB).seconds, 0);
    assert.equal(ringAllReduceS(nv, 1, MiB), 0);
  });
});

describe('communication in a step', () => {
  const model = findModelPreset('llama-3-70b') as ModelSpec;
  const step = (gpuId: string, tp: number, tokens: number) =>
    new StepCostModel({
      model,
      gpu: gpu(gpuId),
      weights: { dtype: 'bf16' },
      kvDtype: 'bf16',
      tp,
      efficiency: resolveEngineConfig({ model, gpu: gpu(gpuId) }).efficiency,
    }).stepTime({
      tokens,
      sampledRows: tokens,
      sequences: tokens,
      attentionPairs: tokens * 1000,
      kvTokensTouched: tokens * 1000,
    });

  test('a TP 4 decode step spends more on all-reduces than a TP 2 one, and PCIe more than NVLink', () => {
    for (const batch of [1, 32, 256]) {
      const tp2 = step('h100', 2, batch).commS;
      const tp4 = step('h100', 4, batch).commS;
      assert.ok(tp4 > tp2, `batch ${batch}: TP 4 ${tp4} s, TP 2 ${tp2} s`);
      assert.ok(step('h100-pcie', 4, batch).commS > tp4, `batch ${batch}: PCIe TP 4`);
    }
    // Two all-reduces per layer of the batch's hidden states, each vLLM's one-shot at TP 2.
    const expected =
      2 * model.layers * allReduce(link('h100'), 2, 32 * model.hiddenSize * 2).seconds;
    assert.equal(step('h100', 2, 32).commS, expected);
    assert.equal(step('h100', 1, 32).commS, 0);
  });
});

describe('attention in a step', () => {
  const model = findModelPreset('llama-3.1-8b') as ModelSpec;
  const cost = (kvDtype: 'bf16' | 'fp8') =>
    new StepCostModel({
      model,
      gpu: gpu('h100'),
      weights: { dtype: 'bf16' },
      kvDtype,
      tp: 1,
      efficiency: resolveEngineConfig({ model, gpu: gpu('h100') }).efficiency,
    });
  const decode = (kvDtype: 'bf16' | 'fp8', sequences: number, context: number) =>
    cost(kvDtype).stepTime({
      tokens: sequences,
      sampledRows: sequences,
      sequences,
      attentionPairs: sequences * context,
      kvTokensTouched: sequences * context,
    }).attentionS;

  test('a decode reads its KV at memory speed: fp8 KV halves it, and a batch adds KV, not rows', () => {
    // One sequence over 65,536 tokens: 32 layers x 8 KV heads x 128 x 2 x 2 bytes a token.
    const bytes = 65_536 * 131_072;
    const e = resolveEngineConfig({ model, gpu: gpu('h100') }).efficiency;
    const readS = bytes / (gpu('h100').bandwidthBytesPerS * e.mbu);
    assert.ok(Math.abs(decode('bf16', 1, 65_536) / readS - 1) < 1e-9);
    // fp8 halves the read; its FLOPs (4 query rows of an MMA's 16) stay well under it.
    const fp8 = decode('fp8', 1, 65_536) / decode('bf16', 1, 65_536);
    assert.ok(Math.abs(fp8 - 0.5) < 1e-9, `fp8 KV at ${fp8} of bf16's time`);
    // 64 sequences of 1,024 tokens read what one of 65,536 reads.
    assert.ok(Math.abs(decode('bf16', 64, 1024) / decode('bf16', 1, 65_536) - 1) < 1e-9);
  });

  test("a long prompt's attention is bound by its FLOPs, not its KV", () => {
    const n = 8192;
    const prefill = cost('bf16').stepTime({
      tokens: n,
      sampledRows: 1,
      sequences: 1,
      attentionPairs: (n * n) / 2,
      kvTokensTouched: n,
    }).attentionS;
    const e = resolveEngineConfig({ model, gpu: gpu('h100') }).efficiency;
    const readS = (n * 131_072) / (gpu('h100').bandwidthBytesPerS * e.mbu);
    assert.ok(prefill > 10 * readS, `${prefill} s against a ${readS} s read`);
  });
});

describe('chip families', () => {
  const model = findModelPreset('llama-3-8b') as ModelSpec;
  test('a family scales the defaults by its matmul share; Ampere and Hopper keep them; flags win', () => {
    const efficiency = (id: string, flags = {}) =>
      resolveEngineConfig({ model, gpu: gpu(id), efficiency: flags }).efficiency;
    const a100 = efficiency('a100-80');
    assert.deepEqual(efficiency('h100'), a100);
    // B200: 77.6 % of its bf16 peak against the H100's 80.3 %; fp8 76.3 % against 70.9 %.
    assert.ok(Math.abs(efficiency('b200').mfuMax16 - (a100.mfuMax16 * 0.776) / 0.803) < 1e-12);
    assert.ok(Math.abs(efficiency('b200').mfuMax8 - (a100.mfuMax8 * 0.763) / 0.709) < 1e-12);
    assert.ok(efficiency('mi300x').mfuMax16 < 0.45, 'MI300X reaches 51.4 % of its bf16 peak');
    // MI300X against the H100 in one harness (Azure): fp8 GEMM 44 % against 70 %, HBM 77 %
    // against 89 % of peak.
    const mi = efficiency('mi300x');
    assert.ok(Math.abs(mi.mfuMax8 - (a100.mfuMax8 * (1159.5 / 2615)) / (1382.2 / 1979)) < 1e-12);
    assert.ok(Math.abs(mi.mbu - (a100.mbu * (4.09 / 5.3)) / (2.97 / 3.35)) < 1e-12);
    assert.deepEqual(efficiency('l40s'), a100, 'no Ada measurement');
    assert.equal(efficiency('b200', { mfuMax16: 0.5 }).mfuMax16, 0.5);
    const { family: _, ...noFamily } = gpu('b200');
    assert.deepEqual(resolveEngineConfig({ model, gpu: noFamily }).efficiency, a100);
  });
});
