/**
 * Engine personalities against EngineModel directly: each one's defaults and memory plan (by
 * hand from its engine's rule), and the scheduler rules that set them apart.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  activationPeakBytes,
  CUDA_CONTEXT_BYTES,
  defaultOverhead,
  kvBytesPerToken,
  weightBytes,
} from '../../../src/memory/footprint.js';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import {
  EngineModel,
  type EngineModelOptions,
  resolveEngineConfig,
  type SequenceInput,
  type StepResult,
} from '../../../src/sim/engineModel.js';
import { VLLM_0110_CHAT_TEMPLATE_S } from '../../../src/sim/personality.js';
import { promptBlockHashes } from '../../../src/sim/physical.js';

const h100 = findGpuPreset('h100') as GpuSpec;
const llama3 = findModelPreset('llama-3-8b') as ModelSpec;
const llama31 = findModelPreset('llama-3.1-8b') as ModelSpec;
const base: EngineModelOptions = { model: llama3, gpu: h100 };
const MS = 1e6;

/** Runs the engine until every request finished; token times per request and every step. */
function drive(engine: EngineModel, inputs: SequenceInput[]) {
  const tokens: number[][] = inputs.map(() => []);
  const steps: StepResult[] = [];
  const seqs = inputs.map((input, i) => engine.add(input, { onToken: (at) => tokens[i].push(at) }));
  for (let guard = 0; guard < 100_000; guard++) {
    const next = engine.nextWorkNs();
    if (next === undefined) break;
    engine.advanceTo(next);
    const r = engine.step();
    if (r) steps.push(r);
    else engine.advanceTo(engine.now + MS);
  }
  assert.ok(
    seqs.every((s) => s.done),
    'every request finished',
  );
  return { tokens, steps, seqs };
}

const request = (arrivalMs: number, promptTokens: number, maxTokens: number): SequenceInput => ({
  arrivalNs: arrivalMs * MS,
  promptTokens,
  maxTokens,
});

describe('personality defaults', () => {
  test('each engine fills its own defaults where the user gave none', () => {
    const v1 = resolveEngineConfig(base);
    assert.deepEqual(
      [v1.gpuMemoryUtilization, v1.blockSize, v1.maxNumSeqs, v1.maxNumBatchedTokens],
      [0.92, 16, 1024, 8192],
    );
    // Before 0.21 the default share was 0.9 and CUDA graphs stayed out of the budget.
    const v0110 = resolveEngineConfig({ ...base, engineVersion: '0.11.0' });
    assert.equal(v0110.gpuMemoryUtilization, 0.9);
    assert.equal(v0110.cudaGraphsInBudget, false);
    assert.equal(v1.cudaGraphsInBudget, true);
    assert.equal(v1.chunkedPrefill, true);
    assert.equal(v1.prefixCaching, true);

    const v0 = resolveEngineConfig({ ...base, personality: 'vllm-v0' });
    assert.deepEqual(
      [v0.gpuMemoryUtilization, v0.blockSize, v0.maxNumSeqs, v0.maxNumBatchedTokens],
      [0.9, 16, 256, 8192],
    );
    assert.equal(v0.chunkedPrefill, false, 'V0: chunked prefill off at 8K context');
    const v0Long = resolveEngineConfig({ ...base, model: llama31, personality: 'vllm-v0' });
    assert.equal(v0Long.chunkedPrefill, true, 'V0: on by itself above 32K max_model_len');
    assert.equal(v0Long.maxNumBatchedTokens, 512);
    assert.equal(
      resolveEngineConfig({ ...base, personality: 'vllm-v0', maxModelLen: 1024 })
        .maxNumBatchedTokens,
      2048,
      'max(max_model_len, 2048)',
    );
    assert.ok(v0.efficiency.scheduleOverheadS > 0 && v1.efficiency.scheduleOverheadS === 0);

    const sg = resolveEngineConfig({ ...base, personality: 'sglang' });
    // H100: 81,559 MiB; reserved 512 + 1.5 x 8192 + 2 x 256 + 128 = 13,440 MiB at TP 1:
    // round(68,119 / 81,559, 3). At TP 4 the graphs go to 512: 512 + 12,288 + 1,024 + 512.
    assert.equal(sg.gpuMemoryUtilization, 0.835);
    assert.equal(
      resolveEngineConfig({ ...base, personality: 'sglang', tp: 4 }).gpuMemoryUtilization,
      Math.round(((81559 - 14336) / 81559) * 1000) / 1000,
    );
    assert.deepEqual([sg.blockSize, sg.maxNumBatchedTokens], [1, 8192]);
    assert.deepEqual([sg.chunkedPrefill, sg.prefixCaching], [true, true]);
    const l4 = findGpuPreset('l4') as GpuSpec;
    const sgL4 = resolveEngineConfig({ ...base, gpu: l4, personality: 'sglang' });
    assert.equal(sgL4.maxNumBatchedTokens, 2048, 'chunked_prefill_size below 35 GiB');
    // max_running_requests: min(pool // 2, min(max(pool / context x 512, 2048), 4096)).
    const sgPool = new EngineModel({ ...base, personality: 'sglang' }).memory.kvTokens;
    assert.equal(
      sg.maxNumSeqs,
      Math.min(
        Math.floor(sgPool / 2),
        Math.min(Math.max(Math.floor((sgPool / 8192) * 512), 2048), 4096),
      ),
    );

    const trt = resolveEngineConfig({ ...base, personality: 'trtllm' });
    assert.deepEqual(
      [trt.gpuMemoryUtilization, trt.blockSize, trt.maxNumSeqs, trt.maxNumBatchedTokens],
      [0.9, 64, 2048, 8192],
    );
    assert.deepEqual([trt.chunkedPrefill, trt.prefixCaching], [false, false]);
    // User settings win over the personality's.
    const given = resolveEngineConfig({
      ...base,
      personality: 'sglang',
      maxNumSeqs: 7,
      gpuMemoryUtilization: 0.5,
      prefixCaching: false,
    });
    assert.deepEqual(
      [given.maxNumSeqs, given.gpuMemoryUtilization, given.prefixCaching],
      [7, 0.5, false],
    );
  });
});

describe('memory plans', () => {
  const total = h100.memoryBytes;
  const weights = weightBytes(llama3, { dtype: 'bf16' }).total;
  const kvToken = kvBytesPerToken(llama3, 'bf16', 1);
  const o = defaultOverhead(1);

  test('vLLM V0 does not take CUDA-graph memory from the pool: more blocks than V1', () => {
    const v1 = new EngineModel({ ...base, gpuMemoryUtilization: 0.9 }).memory;
    const v0 = new EngineModel({ ...base, personality: 'vllm-v0' }).memory;
    const act = activationPeakBytes(llama3, 8192, 256, 1, 'sort');
    const available = 0.9 * total - weights - act - o.nonTorchBytes;
    const expected = Math.floor(Math.floor(available / ((kvToken * 16) / 32)) / 32);
    assert.equal(v0.numGpuBlocks, expected);
    assert.equal(v0.rule, 'vllm-v0');
    assert.ok(v0.numGpuBlocks > v1.numGpuBlocks);
  });

  test("vLLM's profiling peak: the larger of the forward and the sampler, sort or fused by release", () => {
    const GiB = 2 ** 30;
    // vLLM PR #10511's log (V0, Llama-3-8B, 8192 tokens, 256 sequences): activation 1.26 GiB.
    // The sort over 256 x 128,256 logits (38 B each) and the held hidden states outweigh the
    // MLP's 8192 x (3 x 4096 + 3 x 14336) x 2 B; the sum of the two would read 2.0 GiB.
    const v0 = activationPeakBytes(llama3, 8192, 256, 1, 'sort');
    assert.equal(v0, 8192 * 4096 * 2 + 256 * 128_256 * 38);
    assert.ok(Math.abs(v0 / GiB - 1.26) < 0.05, `${(v0 / GiB).toFixed(2)} GiB`);
    // Long prompts: the forward wins (issue #10517's RTX 3090, 20,000 tokens: 2.07 GiB).
    const long = activationPeakBytes(llama31, 20_000, 256, 1, 'sort');
    assert.equal(long, 20_000 * (3 * 4096 + 3 * 14_336) * 2);
    // 1024 rows on an H100: sort 4.7 GiB (llm-d's 0.13/0.14 runs printed 4.76), fused 1.8.
    const at = (engineVersion?: string) =>
      resolveEngineConfig({ ...base, model: llama31, ...(engineVersion ? { engineVersion } : {}) });
    const sampler = (v?: string) => at(v).profileSampler;
    assert.deepEqual(['0.10.2', '0.11.0', '0.11.1', '0.16.0', '0.17.0', undefined].map(sampler), [
      'fused',
      'fused',
      'sort',
      'sort',
      'fused',
      'fused',
    ]);
    const sorted = new EngineModel({ ...base, model: llama31, engineVersion: '0.14.0' }).memory;
    const fused = new EngineModel({ ...base, model: llama31, engineVersion: '0.11.0' }).memory;
    assert.ok(Math.abs(sorted.activationBytes / GiB - 4.71) < 0.01);
    assert.ok(Math.abs(fused.activationBytes / GiB - 1.77) < 0.01);
    assert.equal(sorted.numGpuBlocks < fused.numGpuBlocks, true);
    // ROCm sorts whatever the release; V0 always sorts.
    const mi300x = findGpuPreset('mi300x') as GpuSpec;
    assert.equal(resolveEngineConfig({ ...base, gpu: mi300x }).profileSampler, 'sort');
    assert.equal(resolveEngineConfig({ ...base, personality: 'vllm-v0' }).profileSampler, 'sort');
    // Other engines keep no vLLM sampler term.
    assert.equal(resolveEngineConfig({ ...base, personality: 'sglang' }).profileSampler, undefined);
  });

  test('vLLM 0.21 takes CUDA graphs from the budget at a 0.92 default share; older releases do neither', () => {
    const latest = new EngineModel(base).memory;
    const old = new EngineModel({ ...base, engineVersion: '0.20.1' }).memory;
    assert.equal(latest.nonKvBytes - old.nonKvBytes, o.cudaGraphBytes);
    assert.equal(latest.budgetBytes, 0.92 * total);
    assert.equal(old.budgetBytes, 0.9 * total);
  });

  test('SGLang: total x mem_fraction_static - weights - CUDA context, token-granular', () => {
    const plan = new EngineModel({ ...base, personality: 'sglang' }).memory;
    const expected = Math.floor((0.835 * total - weights - CUDA_CONTEXT_BYTES) / kvToken);
    assert.equal(plan.kvTokens, expected);
    assert.equal(plan.numGpuBlocks, expected);
  });

  test('where the pool is short of max_model_len, SGLang and TensorRT-LLM start with it lowered; vLLM refuses', () => {
    // Qwen3-32B bf16 (61 GiB) on one H100 at its 40,960 context: both served (issue 31).
    const q32 = { ...base, model: findModelPreset('qwen3-32b') as ModelSpec };
    assert.throws(() => new EngineModel(q32), /max seq len \(40960\)/);
    const sg = new EngineModel({ ...q32, personality: 'sglang' });
    // max_req_len = min(context_len - 1, pool - 1) (tp_worker.py).
    assert.equal(sg.config.maxModelLen, sg.memory.kvTokens - 1);
    assert.ok(sg.config.maxModelLen < 40_960);
    assert.match(sg.validate(sg.config.maxModelLen, 1) ?? '', /maximum context length/);
    // KVCacheManager lowers max_seq_len to whole blocks of the pool (here a fraction of 0.5).
    const half = new EngineModel({ ...q32, personality: 'trtllm', gpuMemoryUtilization: 0.5 });
    assert.equal(half.config.maxModelLen, half.memory.kvTokens);
    assert.ok(half.memory.kvTokens < 40_960 && half.memory.kvTokens % 64 === 0);
    // TensorRT-LLM's max_num_tokens stays 8192 without chunked context: longer prompts get
    // its own 400 rather than a larger profiling step and a smaller pool.
    const trt = new EngineModel({ ...q32, personality: 'trtllm' });
    assert.equal(trt.config.maxNumBatchedTokens, 8192);
    assert.match(trt.validate(9000, 16) ?? '', /should not exceed max_num_tokens \(8192\)/);
    assert.equal(trt.validate(8000, 16), undefined);
  });

  test('TensorRT-LLM: 0.9 of the memory left free after load, in blocks of 64', () => {
    const plan = new EngineModel({ ...base, personality: 'trtllm' }).memory;
    const act = activationPeakBytes(llama3, 8192, 2048, 1);
    const free = total - CUDA_CONTEXT_BYTES - weights - act - o.nonTorchBytes;
    assert.equal(plan.numGpuBlocks, Math.floor((0.9 * free) / (kvToken * 64)));
    assert.equal(plan.kvTokens, plan.numGpuBlocks * 64);
  });
});

describe('schedulers', () => {
  // Staggered arrivals: later requests arrive while earlier ones decode.
  const staggered = Array.from({ length: 12 }, (_, i) => request(i * 15, 600, 40));
  const mixes = (steps: StepResult[]) =>
    steps.some((s) => s.prefillTokens > 0 && s.decodeSequences > 0);

  test('vLLM V0 without chunked prefill never mixes prefill and decode in a step', () => {
    const v0 = drive(new EngineModel({ ...base, personality: 'vllm-v0' }), staggered);
    assert.equal(mixes(v0.steps), false);
    assert.ok(v0.steps.some((s) => s.prefillTokens > 0));
    const v1 = drive(new EngineModel(base), staggered);
    assert.equal(mixes(v1.steps), true, 'V1 mixes them (the test can fail)');
  });

  test('SGLang runs prefill and decode batches apart too', () => {
    const sg = drive(new EngineModel({ ...base, personality: 'sglang' }), staggered);
    assert.equal(mixes(sg.steps), false);
  });

  test('multi-step: a new request waits for the window to end; tokens come in bunches', () => {
    const options = {
      ...base,
      personality: 'vllm-v0' as const,
      efficiency: { frontendLatencyS: 0 },
    };
    const inputs = [request(0, 100, 64), request(15, 100, 8)];
    const single = drive(new EngineModel(options), inputs);
    const multi = drive(new EngineModel({ ...options, numSchedulerSteps: 16 }), inputs);
    // One step: the second request starts at the next step, within a few ms of arriving.
    const start = (run: ReturnType<typeof drive>) => run.seqs[1].scheduledNs as number;
    assert.ok(start(single) - 15 * MS < 20 * MS);
    // Sixteen: it waits for the window that was running when it arrived.
    const windowEnd = multi.steps[1].endNs;
    assert.equal(start(multi), windowEnd);
    assert.ok(start(multi) > start(single));
    // The first request's 63 decode tokens arrive in bunches of (at most) 16 at one time.
    const distinct = (ts: number[]) => new Set(ts).size;
    assert.equal(distinct(single.tokens[0]), 64);
    assert.ok(distinct(multi.tokens[0]) <= 1 + Math.ceil(63 / 16) + 1);
    const bunch = multi.tokens[0].filter((t) => t === multi.tokens[0][5]).length;
    assert.ok(bunch > 1, 'several tokens share one time');
  });

  test('multi-step pays the schedule cost once per window: more throughput', () => {
    const batch = Array.from({ length: 32 }, () => request(0, 200, 256));
    const end = (n: number) => {
      const run = drive(
        new EngineModel({ ...base, personality: 'vllm-v0', numSchedulerSteps: n }),
        batch,
      );
      return Math.max(...run.seqs.map((s) => s.finishedNs as number));
    };
    assert.ok(end(8) < end(1) * 0.9);
  });

  test('TensorRT-LLM GUARANTEED_NO_EVICT never preempts and admits fewer when outputs are long', () => {
    const tight = { ...base, maxModelLen: 3200, numGpuBlocksOverride: 400 };
    const load = (maxTokens: number) =>
      Array.from({ length: 40 }, (_, i) => request(i, 1000, maxTokens));
    const v1 = new EngineModel(tight);
    drive(v1, load(2000));
    assert.ok(v1.counters.preemptions > 0, 'vLLM admits greedily and must preempt');
    const trtLong = new EngineModel({ ...tight, personality: 'trtllm', numGpuBlocksOverride: 100 });
    drive(trtLong, load(2000));
    assert.equal(trtLong.counters.preemptions, 0);
    const trtShort = new EngineModel({
      ...tight,
      personality: 'trtllm',
      numGpuBlocksOverride: 100,
    });
    drive(trtShort, load(100));
    assert.equal(trtShort.counters.preemptions, 0);
    // 100 blocks of 64: 2 requests of 1,000 + 2,000 tokens (47 blocks each), 5 of 1,100 (18).
    assert.equal(trtLong.counters.peakRunning, 2);
    assert.equal(trtShort.counters.peakRunning, 5);
  });

  test('TensorRT-LLM schedules a whole context in one step unless chunked context is on', () => {
    const long = [request(0, 7000, 4)];
    const whole = drive(new EngineModel({ ...base, personality: 'trtllm' }), long);
    assert.equal(whole.steps[0].prefillTokens, 7000);
    const chunked = drive(
      new EngineModel({
        ...base,
        personality: 'trtllm',
        chunkedPrefill: true,
        maxNumBatchedTokens: 2048,
      }),
      long,
    );
    assert.equal(chunked.steps[0].prefillTokens, 2048);
    assert.ok(chunked.tokens[0][0] > whole.tokens[0][0]);
  });

  test('SGLang hits its radix cache by default and its front end is shorter', () => {
    const words = Array.from({ length: 400 }, (_, i) => `w${i % 97}`);
    const withHashes = (arrivalMs: number, tail: string): SequenceInput => {
      const prompt = [...words, tail];
      return {
        ...request(arrivalMs, prompt.length, 4),
        blockHashes: promptBlockHashes(prompt, 1),
      };
    };
    const sg = new EngineModel({ ...base, personality: 'sglang' });
    const run = drive(sg, [withHashes(0, 'a'), withHashes(500, 'b')]);
    assert.equal(sg.counters.prefixHitTokens, 400, 'the second request reuses 400 tokens');
    const v1 = new EngineModel(base);
    const runV1 = drive(v1, [withHashes(0, 'a'), withHashes(500, 'b')]);
    assert.equal(v1.counters.prefixHitTokens, 400, 'vLLM V1 caches prefixes by default too');
    for (const personality of ['vllm-v1', 'sglang'] as const) {
      // --no-enable-prefix-caching, --disable-radix-cache
      const off = new EngineModel({ ...base, personality, prefixCaching: false });
      drive(off, [withHashes(0, 'a'), withHashes(500, 'b')]);
      assert.equal(off.counters.prefixHitTokens, 0, `${personality} with the cache off`);
    }
    const frontend = (r: ReturnType<typeof drive>) => r.seqs[0].readyNs - r.seqs[0].input.arrivalNs;
    assert.ok(frontend(run) < frontend(runV1) / 2);
    assert.ok(run.tokens[0][0] < runV1.tokens[0][0], 'first token sooner at batch 1');
  });

  test('vLLM 0.11.0 parses the chat template per chat request on its one loop: a burst reaches the scheduler together, n x 12.7 ms on', () => {
    const burst = (engineVersion: string, chat: boolean) =>
      drive(
        new EngineModel({ ...base, engineVersion }),
        Array.from({ length: 40 }, () => ({ ...request(0, 128, 4), chat })),
      ).seqs.map((s) => (s.readyNs - s.input.arrivalNs) / MS);
    // The rest of the request path for these 128-token prompts (REQUEST_PATH).
    const frontendMs = new EngineModel(base).requestPathNs({ promptTokens: 128 }) / MS;
    const parseMs = VLLM_0110_CHAT_TEMPLATE_S * 1e3;
    // Each continuation queues behind every part: all 40 leave at 40 x 12.7 ms, none sooner.
    for (const waited of burst('0.11.0', true)) {
      assert.ok(Math.abs(waited - (40 * parseMs + frontendMs)) < 1e-3, `${waited} ms`);
    }
    // Completions render no template; 0.11.1 caches the parse (PR #26227).
    for (const waited of [...burst('0.11.0', false), ...burst('0.11.1', true)]) {
      assert.ok(Math.abs(waited - frontendMs) < 1e-6, `${waited} ms`);
    }
    // One chat request alone pays the parse once.
    const alone = drive(new EngineModel({ ...base, engineVersion: '0.11.0' }), [
      { ...request(0, 128, 4), chat: true },
    ]).seqs[0];
    assert.ok(
      Math.abs((alone.readyNs - alone.input.arrivalNs) / MS - (parseMs + frontendMs)) < 1e-3,
    );
  });

  test('vLLM 0.5 processes outputs in step with the GPU: 2 ms more per step than 0.6, and 0.1 ms per sequence', () => {
    const decodeGap = (personality: 'vllm-v0' | 'vllm-v0.5') => {
      const run = drive(
        new EngineModel({ ...base, personality }),
        Array.from({ length: 32 }, () => request(0, 64, 64)),
      );
      // A late decode step, all 32 running: the gap between two of one request's tokens.
      const t = run.tokens[0];
      return (t[40] - t[39]) / MS;
    };
    const extra = decodeGap('vllm-v0.5') - decodeGap('vllm-v0');
    // (3.8 - 1.8) ms per schedule + 32 x (3.4 - 0.2) / 31 ms of output processing.
    assert.ok(Math.abs(extra - (2.0 + (32 * 3.2) / 31)) < 0.05, `${extra.toFixed(3)} ms`);
    const v05 = resolveEngineConfig({ ...base, personality: 'vllm-v0.5' });
    assert.equal(v05.memoryRule, 'vllm-v0');
    assert.equal(v05.maxNumSeqs, 256);
  });

  test("TGI's router: a lone new request waits for 3 of 10 running or 20 decode steps, then prefills alone", () => {
    const tgi = new EngineModel({ ...base, personality: 'tgi' });
    assert.deepEqual(
      [tgi.config.maxModelLen, tgi.config.maxNumBatchedTokens, tgi.config.blockSize],
      [4096, 4096 - 1 + 50, 16],
      'max_total_tokens min(context, 4096), max_batch_prefill_tokens max_input + 50, blocks of 16',
    );
    assert.equal(tgi.memory.rule, 'tgi');
    const inputs = [...Array.from({ length: 10 }, () => request(0, 64, 400)), request(100, 64, 8)];
    const run = drive(tgi, inputs);
    const late = run.seqs[10];
    const before = (from: number) =>
      run.steps.filter((r) => r.startNs >= from && r.startNs < (late.scheduledNs as number));
    // It waited past its arrival, until max_waiting_tokens decode steps since the first batch
    // (1 queued < floor(10 x 0.3)).
    assert.ok(before(late.input.arrivalNs).length > 0);
    const decodes = before(0).filter((r) => r.prefillTokens === 0).length;
    assert.equal(decodes, 19, 'waiting_tokens is 1 after a prefill, 20 after 19 decodes');
    // vLLM V0 (also prefill-first) takes it at the next step.
    const v0 = drive(new EngineModel({ ...base, personality: 'vllm-v0' }), inputs);
    const v0late = v0.seqs[10];
    assert.ok((v0late.scheduledNs as number) - v0late.input.arrivalNs < 40 * MS);
    // Its prefill ran alone: no running request got a token at that step's end.
    const prefillEnd = run.tokens[10][0];
    assert.ok(run.tokens.slice(0, 10).every((t) => !t.includes(prefillEnd)));
  });

  test('SGLang retracts when its optimistic reservation runs out, and never overfills', () => {
    const sg = new EngineModel({ ...base, personality: 'sglang', numGpuBlocksOverride: 20_000 });
    const run = drive(
      sg,
      Array.from({ length: 30 }, (_, i) => request(i, 500, 1500)),
    );
    assert.ok(sg.counters.preemptions > 0, 'new_token_ratio 0.7 under-reserves: retraction');
    assert.ok(sg.counters.peakUsedBlocks <= 20_000);
    assert.ok(run.tokens.every((t) => t.length === 1500));
  });
});
