import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { WeightFormat } from '../../../src/memory/dtype.js';
import { planVllmMemory, weightBytes } from '../../../src/memory/footprint.js';
import { findGpuPreset } from '../../../src/memory/hardware.js';
import { modelSpecFromHfConfig } from '../../../src/memory/hfConfig.js';
import { paramCounts } from '../../../src/memory/model.js';
import { ignoreMatcher } from '../../../src/memory/quantIgnore.js';
import { DEFAULT_EFFICIENCY, StepCostModel } from '../../../src/sim/roofline.js';
import { REPO } from '../../../tools/repo.js';

/**
 * Fixtures written to the published schemas:
 * - llama-3.1-405b-instruct-fp8-fbgemm.json: meta-llama/Llama-3.1-405B-Instruct-FP8's layout
 *   (quant_method fbgemm_fp8, activation_scale_ub, modules_to_not_convert). Its module list
 *   follows Meta's recipe as transformers' FBGEMM conversion script states it (the first and
 *   last layers, every self_attn, lm_head unquantised), spelled out per projection as vLLM's
 *   exact-name rule reads it.
 * - llama-3.1-405b-fp8-compressed-tensors.json: the same recipe as a compressed-tensors
 *   FP8-dynamic config (llm-compressor's `ignore`, with `re:` patterns).
 */
const fixture = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(join(REPO, 'test/fixtures/hf-configs', name), 'utf8'));

const read = (config: Record<string, unknown>, id = 'config.json') =>
  modelSpecFromHfConfig(config, id);

/** Llama-3.1-405B by hand: hidden 16384, 128 query and 8 KV heads of 128, MLP 53248, 126 layers. */
const D = 16384;
const ATTENTION = D * 128 * 128 * 2 + D * 8 * 128 * 2; // q, o; k, v
const MLP = 3 * D * 53248;
const KEPT_405B = 126 * ATTENTION + 2 * MLP;

const h100 = findGpuPreset('h100');
assert.ok(h100);

describe('quantization_config ignore lists: weights kept unquantised', () => {
  test('Meta 405B FP8 (fbgemm_fp8 modules_to_not_convert): attention and two MLPs in bf16, 16 % more than all-fp8', () => {
    const m = read(fixture('llama-3.1-405b-instruct-fp8-fbgemm.json'));
    assert.equal(m.weights?.dtype, 'fp8');
    const kept = m.weights?.unquantised;
    assert.ok(kept);
    assert.equal(kept.dtype, 'bf16');
    assert.equal(kept.modules, 126 * 4 + 2 * 3);
    assert.equal(kept.denseParams, KEPT_405B);
    assert.equal(kept.expertParams, 0);
    assert.ok(
      m.warnings.some((w) => w.includes('modules_to_not_convert keeps 510 linear module(s)')),
    );

    const allFp8 = weightBytes(m.spec, { dtype: 'fp8' }).total;
    const withKept = weightBytes(m.spec, m.weights as WeightFormat).total;
    // Each kept parameter takes 2 bytes instead of 1.
    assert.equal(withKept - allFp8, KEPT_405B);
    const light = 1 - allFp8 / withKept;
    assert.ok(light > 0.15 && light < 0.17, `all-fp8 reads ${(light * 100).toFixed(1)} % light`);
  });

  test('the KV pool beside them shrinks by the extra weight bytes per GPU (TP 8 on H100)', () => {
    const m = read(fixture('llama-3.1-405b-instruct-fp8-fbgemm.json'));
    const plan = (weights: WeightFormat) =>
      planVllmMemory({
        model: m.spec,
        gpu: h100,
        weights,
        kvDtype: 'bf16',
        tp: 8,
        gpuMemoryUtilization: 0.9,
        blockSize: 16,
        maxNumBatchedTokens: 8192,
        maxNumSeqs: 256,
        maxModelLen: 8192,
      });
    const before = plan({ dtype: 'fp8' });
    const after = plan(m.weights as WeightFormat);
    assert.equal(after.weightBytes - before.weightBytes, KEPT_405B / 8);
    // vLLM: blocks = floor(floor(available / per-layer page) / layers).
    const available = (p: typeof before) => p.budgetBytes - p.nonKvBytes;
    assert.equal(available(before) - available(after), KEPT_405B / 8);
    const perLayerPage = after.blockBytes / 126;
    assert.equal(after.numGpuBlocks, Math.floor(Math.floor(available(after) / perLayerPage) / 126));
    const ratio = before.kvPoolBytes / after.kvPoolBytes;
    assert.ok(ratio > 1.5, `all-fp8 pool ${ratio.toFixed(2)}x the real one`);
  });

  test('compressed-tensors `ignore` with re: patterns keeps the same modules', () => {
    const m = read(fixture('llama-3.1-405b-fp8-compressed-tensors.json'));
    assert.equal(m.weights?.dtype, 'fp8');
    assert.deepEqual(m.weights?.unquantised, {
      dtype: 'bf16',
      denseParams: KEPT_405B,
      expertParams: 0,
      modules: 510,
    });
  });

  test('ignore of lm_head alone changes nothing (lm_head is counted in 16 bit anyway)', () => {
    const c = fixture('llama-3.1-405b-fp8-compressed-tensors.json');
    (c.quantization_config as Record<string, unknown>).ignore = ['lm_head'];
    const m = read(c);
    assert.deepEqual(m.weights, { dtype: 'fp8' });
  });

  test('the decode step reads the kept bytes: its weight time grows by them over the bandwidth', () => {
    const m = read(fixture('llama-3.1-405b-instruct-fp8-fbgemm.json'));
    const step = (weights: WeightFormat) =>
      new StepCostModel({
        model: m.spec,
        gpu: h100,
        weights,
        kvDtype: 'bf16',
        tp: 8,
        efficiency: DEFAULT_EFFICIENCY,
      }).stepTime({
        tokens: 1,
        sampledRows: 1,
        sequences: 1,
        attentionPairs: 1000,
        kvTokensTouched: 1000,
      });
    const before = step({ dtype: 'fp8' });
    const after = step(m.weights as WeightFormat);
    assert.equal(before.gemmComputeBound, false);
    const expected = KEPT_405B / 8 / (h100.bandwidthBytesPerS * DEFAULT_EFFICIENCY.mbu);
    assert.ok(Math.abs(after.gemmS - before.gemmS - expected) < expected * 1e-9);
    // A large prefill is compute bound: the kept layers' 16-bit GEMMs make it slower too.
    const prefill = (weights: WeightFormat) =>
      new StepCostModel({
        model: m.spec,
        gpu: h100,
        weights,
        kvDtype: 'bf16',
        tp: 8,
        efficiency: DEFAULT_EFFICIENCY,
      }).stepTime({
        tokens: 8192,
        sampledRows: 1,
        sequences: 1,
        attentionPairs: 8192 * 4096,
        kvTokensTouched: 8192,
      }).gemmS;
    assert.ok(prefill(m.weights as WeightFormat) > prefill({ dtype: 'fp8' }) * 1.05);
  });
});

describe('MoE checkpoints: routers unquantised, experts kept by layer', () => {
  const mixtral = () => fixture('mixtral-8x7b-v0.1.json');
  const E = 8;
  const EXPERT = 3 * 4096 * 14336;
  const ROUTER = 32 * 4096 * E;

  test('compressed-tensors FP8 ignoring the gates: routers counted in bf16, nothing else kept', () => {
    const c = mixtral();
    c.quantization_config = {
      quant_method: 'compressed-tensors',
      format: 'float-quantized',
      config_groups: {
        group_0: {
          targets: ['Linear'],
          weights: { num_bits: 8, type: 'float', strategy: 'channel', symmetric: true },
        },
      },
      ignore: ['lm_head', 're:.*block_sparse_moe.gate$'],
    };
    const m = read(c);
    assert.deepEqual(m.weights, { dtype: 'fp8' });
    const p = paramCounts(m.spec);
    assert.equal(p.router, ROUTER);
    const w = weightBytes(m.spec, m.weights as WeightFormat);
    assert.equal(w.body, (p.body - ROUTER) * 1 + ROUTER * 2);
    assert.equal(w.experts, 32 * E * EXPERT);
    // A 16-bit checkpoint is all 16 bit, the routers with it.
    assert.equal(weightBytes(m.spec, { dtype: 'bf16' }).body, p.body * 2);
  });

  test('fp8 ignored_layers naming one expert keeps that layer’s experts (vLLM fuses them)', () => {
    const c = mixtral();
    c.quantization_config = {
      quant_method: 'fp8',
      activation_scheme: 'dynamic',
      ignored_layers: [
        'model.layers.0.block_sparse_moe.experts.0.w1',
        'model.layers.0.block_sparse_moe.experts.0.w2',
        'model.layers.0.block_sparse_moe.experts.0.w3',
        'model.layers.31.self_attn.q_proj',
      ],
    };
    const m = read(c);
    assert.deepEqual(m.weights?.unquantised, {
      dtype: 'bf16',
      denseParams: 4096 * 4096,
      expertParams: E * EXPERT,
      modules: 2,
    });
    const p = paramCounts(m.spec);
    const w = weightBytes(m.spec, m.weights as WeightFormat);
    assert.equal(w.experts, 31 * E * EXPERT + E * EXPERT * 2);
    assert.equal(
      w.body,
      w.experts + (p.body - 32 * E * EXPERT - ROUTER - 4096 * 4096) + (ROUTER + 4096 * 4096) * 2,
    );
  });

  test('AWQ modules_to_not_convert ["gate"] (substring): Mixtral’s router only, its w1/w3 are not "gate"', () => {
    const c = mixtral();
    c.quantization_config = {
      quant_method: 'awq',
      bits: 4,
      group_size: 128,
      zero_point: true,
      version: 'gemm',
      modules_to_not_convert: ['gate'],
    };
    const m = read(c);
    assert.deepEqual(m.weights, { dtype: 'int4', groupSize: 128 });
  });

  test('DeepSeek-V3 (fp8, no ignore list): no module kept', () => {
    const m = read(fixture('deepseek-v3.json'));
    assert.deepEqual(m.weights, { dtype: 'fp8' });
  });
});

describe('each engine rule', () => {
  const llama8b = () => fixture('llama-3.1-8b-instruct-awq-int4.json');
  const LAYER = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336;

  test('AWQ substring: "self_attn" keeps every attention projection in fp16', () => {
    const c = llama8b();
    (c.quantization_config as Record<string, unknown>).modules_to_not_convert = ['self_attn'];
    const kept = read(c).weights?.unquantised;
    assert.deepEqual(kept, {
      dtype: 'fp16',
      denseParams: 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2),
      expertParams: 0,
      modules: 128,
    });
  });

  test('bitsandbytes llm_int8_skip_modules: a leading path keeps the whole layer', () => {
    const c = llama8b();
    c.quantization_config = {
      quant_method: 'bitsandbytes',
      load_in_8bit: true,
      llm_int8_skip_modules: ['lm_head', 'model.layers.0'],
    };
    assert.deepEqual(read(c).weights?.unquantised, {
      dtype: 'fp16',
      denseParams: LAYER,
      expertParams: 0,
      modules: 7,
    });
  });

  test('GPTQ dynamic: a -: pattern skips; an earlier +: match keeps it quantised', () => {
    const c = llama8b();
    c.quantization_config = {
      quant_method: 'gptq',
      bits: 4,
      group_size: 128,
      dynamic: { '+:.*layers\\.1\\.': { bits: 8 }, '-:.*layers\\.[01]\\.': {} },
    };
    assert.equal(read(c).weights?.unquantised?.denseParams, LAYER);
  });

  test('modelopt ignore (config.json) and exclude_modules (hf_quant_config.json): fnmatch wildcards', () => {
    const c = llama8b();
    c.quantization_config = {
      quant_method: 'modelopt',
      quant_algo: 'FP8',
      ignore: ['lm_head', 'model.layers.3*'],
    };
    // model.layers.3 and model.layers.30, .31.
    assert.equal(read(c).weights?.unquantised?.denseParams, 3 * LAYER);
    c.quantization_config = {
      quant_method: 'modelopt',
      quantization: { quant_algo: 'FP8', exclude_modules: ['lm_head', 'model.layers.3*'] },
    };
    assert.equal(read(c).weights?.unquantised?.denseParams, 3 * LAYER);
  });

  test('a pattern JavaScript cannot read is named in a warning, not silently dropped', () => {
    const c = fixture('llama-3.1-405b-fp8-compressed-tensors.json');
    (c.quantization_config as Record<string, unknown>).ignore = ['lm_head', 're:(?P<x>foo)'];
    const m = read(c);
    assert.ok(m.warnings.some((w) => w.includes('quantization_config.ignore: the pattern')));
    assert.equal(m.weights?.unquantised, undefined);
  });

  test('compressed-tensors re: is anchored at the start only (re.match), plain names are exact', () => {
    const { matches } = ignoreMatcher({
      key: 'ignore',
      entries: ['re:.*mlp', 'model.layers.0.self_attn'],
      rule: 'regex',
    });
    assert.equal(matches('model.layers.2.mlp.down_proj'), true);
    assert.equal(matches('model.layers.0.self_attn.q_proj'), false);
    assert.equal(matches('model.layers.0.self_attn'), true);
  });
});
