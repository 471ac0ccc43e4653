/**
 * `infergauge memory` (the analytic footprint and its answers) and `infergauge capacity` (the
 * batch-to-OOM curve) against the simulator, whose KV pool is known exactly.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  atModelledSpeed,
  type CapacityStep,
  capacityLimit,
  doublingBatches,
} from '../../src/memory/capacity.js';
import { findGpuPreset, type GpuSpec } from '../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../src/memory/model.js';
import { memoryReport } from '../../src/memory/report.js';
import { runCli, tempDir } from '../helpers/cli.js';

const preset = (id: string): ModelSpec => findModelPreset(id) as ModelSpec;
const gpu = (id: string): GpuSpec => findGpuPreset(id) as GpuSpec;

describe('infergauge memory', () => {
  test('Llama-3-8B on an H100 at 32k: the chapter questions in one screen', async () => {
    const result = await runCli([
      'memory',
      '--model',
      'llama-3-8b',
      '--gpu',
      'h100',
      '--context',
      '32768',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const out = result.stdout;
    assert.ok(out.trim().split('\n').length <= 30, 'one screen');
    assert.match(out, /weights\s+│\s+16\.06 GB/);
    assert.match(out, /KV cache: 1 x 32,768 tokens\s+│\s+4\.29 GB/);
    // vLLM 0.21 on: a 0.92 share with CUDA graphs taken from it.
    assert.match(out, /0.92: budget 78.26 GB, KV pool 59.54 GB = 28,391 blocks = 454,256 tokens/);
    assert.match(out, /Max concurrent sequences at 32,768 tokens: 13\./);
    assert.match(out, /KV cache overtakes the weights at 122,533 tokens/);
    assert.match(out, /Smallest fit for 1 x 32,768 tokens: one /);
    // 32k is beyond Llama-3-8B's trained 8k context: said, not hidden.
    assert.match(result.stderr, /beyond Llama-3-8B's trained context \(8192\)/);
  });

  test('JSON: per-GPU footprint with TP, MLA and sliding windows, and the smallest fit', async () => {
    const result = await runCli([
      'memory',
      '--model',
      'llama-3-70b',
      '--gpu',
      'h100',
      '--tp',
      '4',
      '--context',
      '8192',
      '--batch',
      '32',
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout);
    assert.equal(report.question.tp, 4);
    assert.equal(report.kvBytesPerTokenAllGpus, 320 * 1024);
    assert.equal(report.perGpu.kvBytesPerToken, 80 * 1024);
    assert.equal(report.perGpu.kvBytesForBatch, 32 * 8192 * 80 * 1024);
    assert.ok(report.maxSequences >= 32);
    assert.equal(
      report.smallestFit.singleGpu?.gpu,
      'mi325x',
      'only the 256 GB MI325X holds 70B bf16 + 32 x 8k',
    );

    // MLA: one latent per token, not split by TP; a 1,000-token sequence rounds up to 63 blocks.
    const mla = memoryReport({
      model: preset('deepseek-v3'),
      gpu: gpu('h200'),
      weights: { dtype: 'fp8' },
      kvDtype: 'bf16',
      tp: 8,
      contextTokens: 1000,
      batch: 1,
      gpuMemoryUtilization: 0.9,
      blockSize: 16,
      maxNumBatchedTokens: 8192,
      maxNumSeqs: 1024,
    });
    assert.equal(mla.perGpu.kvBytesPerToken, 61 * 576 * 2);
    assert.equal(mla.perGpu.kvBytesPerSequence, 63 * 16 * 61 * 576 * 2);
    assert.equal(mla.perGpu.blockWasteBytesPerSequence, 8 * 61 * 576 * 2);
    // Mistral's 4k window caps the KV of a 32k sequence.
    const window = memoryReport({
      model: preset('mistral-7b'),
      gpu: gpu('h100'),
      weights: { dtype: 'bf16' },
      kvDtype: 'bf16',
      tp: 1,
      contextTokens: 32768,
      batch: 1,
      gpuMemoryUtilization: 0.9,
      blockSize: 16,
      maxNumBatchedTokens: 8192,
      maxNumSeqs: 1024,
    });
    assert.equal(
      window.perGpu.kvBytesPerSequence,
      (Math.ceil((4095 + 8192) / 16) + 1) * 16 * 131072,
    );
  });

  test('each point of the curve is the engine started at that context (vLLM V0 sizes its step by it)', async () => {
    const json = async (context: number) => {
      const r = await runCli([
        'memory',
        ...['--model', 'llama-2-13b', '--gpu', 'rtx5090', '--engine-personality', 'vllm-v0'],
        ...['--context', String(context), '--json'],
      ]);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout);
    };
    const [at8000, at1024] = await Promise.all([json(8000), json(1024)]);
    // V0 without chunked prefill profiles an 8,000-token step at max_model_len 8,000: one
    // sequence does not fit, and the curve says so at 8,000 rather than "1" nearby.
    assert.match(at8000.vllm.error, /max seq len \(8000\)/);
    const curve = new Map(
      at8000.sequencesByContext.map((p: { contextTokens: number; maxSequences: number }) => [
        p.contextTokens,
        p.maxSequences,
      ]),
    );
    assert.equal(curve.get(8000), 0);
    assert.equal(curve.get(1024), at1024.maxSequences, 'the 1k point is the engine at 1k');
  });

  test('bad options name the flag', async () => {
    const bad = await runCli(['memory', '--model', 'gpt-9', '--batch', '0', '--gpu', 'tpu']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--batch must be a whole number >= 1/);
    assert.match(bad.stderr, /--model: .*gpt-9/);
    assert.match(bad.stderr, /--gpu tpu is not a preset/);
  });
});

describe('capacity limits (pure)', () => {
  const step = (over: Partial<CapacityStep>): CapacityStep => ({
    batch: 8,
    completed: 16,
    failed: 0,
    errorsByKind: {},
    meanConcurrency: 8,
    outputTokensPerS: 1000,
    perUserTokensPerS: 100,
    ttftP50Ms: 100,
    ttftP99Ms: 120,
    tpotMeanMs: 20,
    itlP99Ms: 30,
    ...over,
  });
  test("a step at --time-scale reads at the modelled GPU's speed, the clock's figures kept beside", () => {
    const measured = step({ kvCacheUsageMax: 0.5, preemptions: 0 });
    const modelled = atModelledSpeed(measured, 0.1);
    // Ten times faster than the GPU: its times are a tenth of the GPU's, its rates ten times.
    assert.equal(modelled.perUserTokensPerS, 10);
    assert.equal(modelled.outputTokensPerS, 100);
    assert.equal(modelled.ttftP50Ms, 1000);
    assert.equal(modelled.ttftP99Ms, 1200);
    assert.equal(modelled.tpotMeanMs, 200);
    assert.equal(modelled.itlP99Ms, 300);
    assert.deepEqual(modelled.measuredAtTimeScale, {
      outputTokensPerS: 1000,
      perUserTokensPerS: 100,
      ttftP50Ms: 100,
      ttftP99Ms: 120,
      tpotMeanMs: 20,
      itlP99Ms: 30,
    });
    // What no clock moves stays as measured.
    for (const k of [
      'batch',
      'completed',
      'meanConcurrency',
      'kvCacheUsageMax',
      'preemptions',
    ] as const)
      assert.equal(modelled[k], measured[k]);
    assert.equal(atModelledSpeed(measured, 1), measured);
  });

  test('failures, then preemptions, then a full KV cache, then a latency cliff', () => {
    assert.equal(capacityLimit(step({}), step({ batch: 4 }), 3), undefined);
    assert.equal(
      capacityLimit(step({ failed: 2, errorsByKind: { timeout: 2 }, preemptions: 3 }), undefined, 3)
        ?.reason,
      'failures',
    );
    assert.equal(capacityLimit(step({ preemptions: 3 }), undefined, 3)?.reason, 'preemptions');
    assert.equal(
      capacityLimit(step({ kvCacheUsageMax: 0.995 }), undefined, 3)?.reason,
      'kv_cache_full',
    );
    const cliff = capacityLimit(step({ ttftP99Ms: 400 }), step({ batch: 4, ttftP99Ms: 120 }), 3);
    assert.equal(cliff?.reason, 'latency_cliff');
    assert.match(cliff?.detail ?? '', /p99 TTFT jumped 3\.3x/);
    assert.deepEqual(doublingBatches(24), [1, 2, 4, 8, 16, 24]);
  });
});

describe('infergauge capacity on the simulator', () => {
  test('stops within one step of where the KV pool runs out; the measured peak matches the prediction', async () => {
    const out = join(tempDir('ig-capacity-'), 'cap');
    const result = await runCli([
      'capacity',
      '--model',
      'llama-3.1-8b',
      '--gpu',
      'rtx4090',
      '--max-model-len',
      '8192',
      '--time-scale',
      '0.1',
      '--input-tokens',
      '4096',
      '--output-tokens',
      '256',
      '--max-batch',
      '64',
      '--scrape-interval',
      '0.05',
      // The limit under test is the KV pool's. At a tenth of real time a loaded machine can
      // move one step's p99 TTFT several-fold (83 -> 405 ms at batch 2 beside four CPU hogs),
      // which the latency rule (capacityLimit's unit tests) would call a cliff.
      '--cliff-factor',
      '1000',
      '--out',
      out,
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout);
    assert.deepEqual(report, JSON.parse(readFileSync(join(out, 'capacity.json'), 'utf8')));
    // RTX 4090, Llama-3.1-8B bf16: 2,595 blocks; 4,352 tokens are 272 blocks: 9 sequences fit.
    assert.equal(report.prediction.blocksPerSequence, 272);
    assert.equal(report.prediction.maxBatch, Math.floor(report.prediction.numGpuBlocks / 272));
    const batches = report.steps.map((s: CapacityStep) => s.batch);
    assert.deepEqual(batches, [1, 2, 4, 8, 16], 'stops at the first batch past the pool');
    assert.equal(report.limit.reason, 'preemptions');
    assert.equal(report.capacity, 8);
    assert.ok(report.capacity <= report.prediction.maxBatch);
    assert.ok(report.prediction.maxBatch < 16);
    const at8 = report.steps[3] as CapacityStep;
    assert.equal(at8.preemptions, 0);
    const predicted = at8.predictedKvCacheUsage as number;
    assert.ok(
      Math.abs((at8.kvCacheUsageMax as number) - predicted) < 0.05,
      `KV peak at batch 8: measured ${at8.kvCacheUsageMax}, predicted ${predicted}`,
    );
    // KV usage rises with the batch, as the model says.
    const peaks = report.steps.slice(0, 4).map((s: CapacityStep) => s.kvCacheUsageMax as number);
    assert.deepEqual(
      [...peaks].sort((a, b) => a - b),
      peaks,
    );
    assert.ok(at8.gpuMemoryUsedMaxBytes !== undefined, 'GPU memory from the DCGM gauges');
    // At --time-scale 0.1 the figures are the modelled RTX 4090's: one user of an 8B model in
    // bf16 reads 16 GB of weights per token at about 1 TB/s, some 50 tok/s (the scaled clock
    // gave 481); the clock's own figures stay beside, ten times faster.
    const at1 = report.steps[0] as CapacityStep;
    assert.ok(
      at1.perUserTokensPerS > 20 && at1.perUserTokensPerS < 100,
      `batch 1 per user: ${at1.perUserTokensPerS} tok/s`,
    );
    for (const s of report.steps as CapacityStep[]) {
      const clock = s.measuredAtTimeScale;
      assert.ok(clock, `batch ${s.batch} keeps its measured figures`);
      assert.ok(Math.abs(s.perUserTokensPerS - clock.perUserTokensPerS * 0.1) < 1e-6);
      assert.ok(Math.abs(s.ttftP99Ms - clock.ttftP99Ms / 0.1) < 1e-6);
    }
    const text = await runCli(['report', out, '--html', join(out, 'again.html')]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      readFileSync(join(out, 'again.html'), 'utf8'),
      /times and rates are the modelled GPU&#39;s|times and rates are the modelled GPU's/,
    );
  });
});
