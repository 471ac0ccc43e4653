/**
 * The llamacpp personality: llama-server's defaults and slot split, its refusal of prompts as
 * long as a slot, its iteration (decodes first, then prompt tokens up to n_batch) and how that
 * batch is cut into ubatches, each from llama.cpp's source (src/sim/personality.ts LLAMACPP,
 * src/sim/llamacppBatch.ts); and the CPU as a device (src/memory/cpu.ts). Virtual time only.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { corePeaks, cpuGpuSpec, cpuSpecFile, parseCpuInfo } from '../../../src/memory/cpu.js';
import { EngineStartError } from '../../../src/memory/footprint.js';
import { gpuSpecFromValue } from '../../../src/memory/gpuSpec.js';
import type { ModelSpec } from '../../../src/memory/model.js';
import type { RequestRecord } from '../../../src/record.js';
import { EngineCluster } from '../../../src/sim/cluster.js';
import {
  EngineModel,
  type EngineModelOptions,
  resolveEngineConfig,
} from '../../../src/sim/engineModel.js';
import { planUbatches } from '../../../src/sim/llamacppBatch.js';
import { resolveEngine } from '../../../src/sim/options.js';
import { llamacppContext } from '../../../src/sim/personality.js';
import { simulateRun } from '../../../src/sim/virtual.js';

/** The tests' generated llama model (tools/llama/model.ts '125m'), as a spec. */
const MODEL: ModelSpec = {
  id: 'llama-125m',
  name: 'llama-125m',
  layers: 12,
  hiddenSize: 768,
  queryHeads: 12,
  kvHeads: 4,
  headDim: 64,
  ffnSize: 3840,
  vocabSize: 730,
  tiedEmbeddings: false,
  qkvBias: false,
  maxContext: 4096,
};

/** One Zen 5 core as /proc/cpuinfo describes it, with 25 GB/s of copy bandwidth. */
const ZEN5_FLAGS = 'fpu sse sse2 avx avx2 fma avx512f avx512bw avx512vl avx_vnni avx512_vnni'.split(
  ' ',
);
const CPU = cpuGpuSpec({
  name: 'AMD EPYC',
  threads: 1,
  ghz: 2.1,
  flags: ZEN5_FLAGS,
  memoryBytes: 24e9,
  bandwidthBytesPerS: 25e9,
});

const engine = (o: Partial<EngineModelOptions> = {}): EngineModelOptions => ({
  model: MODEL,
  gpu: CPU,
  weights: { dtype: 'int8' },
  kvDtype: 'fp16',
  personality: 'llamacpp',
  ...o,
});

/** A closed-loop virtual run: each request's records. */
function run(
  options: EngineModelOptions,
  concurrency: number,
  requests: number,
  input: number,
  output: number,
): RequestRecord[] {
  const records: RequestRecord[] = [];
  simulateRun({
    engine: new EngineCluster(options),
    load: { mode: 'closed', concurrency },
    requests,
    warmupRequests: 0,
    seed: 1,
    endpoint: 'completions',
    nextRequest: () => ({
      prompt: '',
      promptWords: input,
      requestedInputTokens: input,
      requestedOutputTokens: output,
    }),
    onRecord: (r) => records.push(r),
  });
  return records;
}

describe('llamacpp personality: defaults and the slots', () => {
  test("no --parallel: 4 slots sharing the model's whole context; n_batch 2048, n_ubatch 512, no paging", () => {
    const c = resolveEngineConfig(engine());
    assert.equal(c.maxNumSeqs, 4);
    assert.equal(c.kvUnified, true);
    assert.equal(c.ctxTokens, 4096);
    assert.equal(c.maxModelLen, 4096, 'a unified buffer lets one slot use it all');
    assert.equal(c.maxNumBatchedTokens, 2048);
    assert.equal(c.ubatchSize, 512);
    assert.equal(c.blockSize, 1);
    assert.equal(c.chunkedPrefill, true);
    assert.equal(c.prefixCaching, true, "cache_prompt: each slot keeps its last request's tokens");
    assert.equal(new EngineModel(engine()).memory.numGpuBlocks, 4096, 'one cell per token');
  });

  test('--parallel: one stream per slot, n_ctx padded to 256 and split evenly, as llama_context does', () => {
    assert.deepEqual(llamacppContext({ ctxSize: 4096, slots: 4, kvUnified: false }), {
      ctxTokens: 4096,
      slotTokens: 1024,
    });
    // 1000 -> 1024; 1024 / 3 = 341 -> 512 per slot; n_ctx becomes 3 x 512.
    assert.deepEqual(llamacppContext({ ctxSize: 1000, slots: 3, kvUnified: false }), {
      ctxTokens: 1536,
      slotTokens: 512,
    });
    const c = resolveEngineConfig(engine({ maxNumSeqs: 4, ctxTokens: 4096 }));
    assert.equal(c.kvUnified, false);
    assert.equal(c.maxModelLen, 1024);
    // n_batch never exceeds n_ctx, n_ubatch never n_batch.
    const small = resolveEngineConfig(engine({ maxNumSeqs: 1, ctxTokens: 300, ubatchSize: 4096 }));
    assert.equal(small.ctxTokens, 512);
    assert.equal(small.maxNumBatchedTokens, 512);
    assert.equal(small.ubatchSize, 512);
  });

  test('the flags: llama.cpp names, for llamacpp only', () => {
    const r = resolveEngine({
      model: MODEL,
      gpu: CPU,
      enginePersonality: 'llamacpp',
      parallel: 2,
      ctxSize: 2048,
      batchSize: 256,
      ubatchSize: 64,
      kvUnified: true,
    });
    assert.deepEqual(r.problems, []);
    const c = resolveEngineConfig(r.engine as EngineModelOptions);
    assert.deepEqual(
      [c.maxNumSeqs, c.ctxTokens, c.maxModelLen, c.maxNumBatchedTokens, c.ubatchSize, c.kvUnified],
      [2, 2048, 2048, 256, 64, true],
    );
    const vllm = resolveEngine({ model: MODEL, gpu: CPU, parallel: 2 });
    assert.match(vllm.problems.join('\n'), /--parallel is llamacpp's setting/);
    const both = resolveEngine({
      model: MODEL,
      gpu: CPU,
      enginePersonality: 'llamacpp',
      parallel: 2,
      maxNumSeqs: 3,
    });
    assert.match(both.problems.join('\n'), /--parallel and --max-num-seqs set the same thing/);
  });

  test('the KV buffer is n_ctx cells whatever the memory: too large a one refuses to start', () => {
    const tiny = { ...CPU, memoryBytes: 0.3e9 };
    // Weights ~0.13 GB; 20,480 cells x 24 KiB ~0.5 GB do not fit beside them.
    assert.throws(
      () => new EngineModel(engine({ gpu: tiny, maxNumSeqs: 4, ctxTokens: 20480 })),
      (err: unknown) => err instanceof EngineStartError && /--ctx-size/.test(err.message),
    );
    assert.doesNotThrow(() => new EngineModel(engine({ gpu: tiny, ctxTokens: 4096 })));
    assert.throws(() => new EngineModel(engine({ tp: 2 })), /--tp 2 is not modelled/);
  });
});

describe('llamacpp personality: requests longer than a slot', () => {
  const four = engine({ maxNumSeqs: 4, ctxTokens: 4096 });

  test('a prompt as long as its slot is refused with llama-server words; a shorter one runs', () => {
    const e = new EngineModel(four);
    assert.equal(
      e.validate(1024, 16),
      'request (1024 tokens) exceeds the available context size (1024 tokens), try increasing it',
    );
    assert.equal(e.validate(1023, 500), undefined, 'the output is cut, not refused');
    const records = run(four, 1, 2, 1100, 8);
    assert.ok(records.every((r) => r.error !== undefined));
  });

  test('generation stops when the slot is full: prompt + output = the slot', () => {
    const records = run(four, 1, 2, 1000, 100);
    assert.deepEqual(
      records.map((r) => [r.error, r.outputTokens]),
      [
        [undefined, 24],
        [undefined, 24],
      ],
    );
  });
});

describe('llamacpp personality: one iteration', () => {
  test('decodes of every generating slot first, then prompt tokens up to n_batch', () => {
    const e = new EngineModel(engine({ maxNumSeqs: 4, ctxTokens: 16384 }));
    const sink = { onToken: () => {} };
    for (let i = 0; i < 3; i++) e.add({ arrivalNs: 0, promptTokens: 8, maxTokens: 50 }, sink);
    e.advanceTo(1e9);
    const first = e.step();
    assert.equal(first?.prefillTokens, 24, 'three prompts in one iteration');
    e.add({ arrivalNs: e.now, promptTokens: 3000, maxTokens: 4 }, sink);
    e.advanceTo(e.now + 1e9);
    const mixed = e.step();
    assert.equal(mixed?.decodeSequences, 3);
    assert.equal(mixed?.prefillTokens, 2048 - 3, 'the prompt fills the rest of n_batch');
    const next = e.step();
    assert.equal(next?.prefillTokens, 3000 - 2045);
  });

  test('split_simple: n_ubatch tokens in batch order; split_equal: consecutive slots, equal shares', () => {
    const batch = [
      { slot: 0, tokens: 1 },
      { slot: 1, tokens: 1 },
      { slot: 3, tokens: 1 },
      { slot: 2, tokens: 600 },
    ];
    const sizes = (u: ReturnType<typeof planUbatches>) =>
      u.map((b) => b.reduce((s, p) => s + p.tokens, 0));
    const simple = planUbatches(batch, { nBatch: 2048, nUbatch: 512, unified: true });
    assert.deepEqual(sizes(simple), [512, 91]);
    const equal = planUbatches(batch, { nBatch: 2048, nUbatch: 512, unified: false });
    // Slots 0 and 1, then the prompt's slot 2 is not 1 + 1 after slot 3 ... : {0, 1, 2} take one
    // token each (the decodes have one), then {3}, then the prompt alone in n_ubatch pieces.
    assert.deepEqual(
      equal.map((u) => u.map((p) => [batch[p.entry].slot, p.tokens])),
      [
        [
          [0, 1],
          [1, 1],
          [2, 1],
        ],
        [[3, 1]],
        [[2, 512]],
        [[2, 87]],
      ],
    );
    // Two prompts in consecutive slots share a ubatch half and half.
    const two = planUbatches(
      [
        { slot: 1, tokens: 400 },
        { slot: 2, tokens: 400 },
      ],
      { nBatch: 2048, nUbatch: 512, unified: false },
    );
    assert.deepEqual(sizes(two), [512, 288]);
    // Views of n_batch: 3000 prompt tokens at n_batch 2048 are two llama_decode calls.
    assert.deepEqual(
      sizes(
        planUbatches([{ slot: 0, tokens: 3000 }], { nBatch: 2048, nUbatch: 512, unified: true }),
      ),
      [512, 512, 512, 512, 512, 440],
    );
  });

  test('a one-token step is a GEMV at memory speed; from two tokens the small-GEMM ramp applies', () => {
    const e = new EngineModel(engine({ efficiency: { stepOverheadS: 0, perSeqOverheadS: 0 } }));
    const step = (tokens: number) =>
      e.cost.stepTime({
        tokens,
        sampledRows: 1,
        sequences: 1,
        attentionPairs: tokens * 16,
        kvTokensTouched: 16 + tokens,
      });
    assert.equal(step(1).gemmComputeBound, false, 'one token streams the weights');
    assert.ok(step(2).gemmComputeBound, 'two tokens pay the GEMM ramp');
    // t(T) = b (T + h) from two tokens on.
    const b = (step(258).gemmS - step(2).gemmS) / 256;
    const h = step(2).gemmS / b - 2;
    // (the lm_head row it samples adds a little to the fixed part)
    assert.ok(Math.abs(h - 6) < 0.05, `ramp ${h}`);
  });

  test('concurrency beyond the slots queues: TTFT grows by whole requests', () => {
    const inSlots = run(engine({ maxNumSeqs: 4, ctxTokens: 4096 }), 4, 8, 16, 32);
    const overSlots = run(engine({ maxNumSeqs: 4, ctxTokens: 4096 }), 8, 16, 16, 32);
    const meanTtft = (rs: RequestRecord[]) =>
      rs.reduce((s, r) => s + ((r.firstTokenAt as number) - r.sentAt), 0) / rs.length;
    const e2e = inSlots.reduce((s, r) => s + r.endAt - r.sentAt, 0) / inSlots.length;
    assert.ok(meanTtft(overSlots) > meanTtft(inSlots) + 0.25 * e2e);
  });
});

describe('a CPU as the device', () => {
  test('nominal peaks from the flags, bandwidth as measured, the host memory', () => {
    assert.deepEqual(corePeaks(ZEN5_FLAGS), {
      fp32FlopsPerCycle: 64,
      int8OpsPerCycle: 256,
      isa: 'AVX-512 FMA, AVX-512 VNNI',
    });
    assert.equal(corePeaks(['avx', 'avx2', 'fma']).int8OpsPerCycle, 64);
    assert.equal(corePeaks(['asimd', 'asimddp']).int8OpsPerCycle, 64);
    assert.equal(CPU.family, 'cpu');
    assert.equal(CPU.peakFlops.bf16, 64 * 2.1e9);
    assert.equal(CPU.peakFlops.int8, 256 * 2.1e9);
    assert.equal(CPU.bandwidthBytesPerS, 25e9);
    const info = parseCpuInfo(
      'processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2096.007\nflags\t\t: fpu avx2\nprocessor\t: 1\n',
      'MemTotal:       24683756 kB\n',
    );
    assert.deepEqual(info, {
      name: 'AMD EPYC',
      cores: 2,
      mhz: 2096.007,
      flags: ['fpu', 'avx2'],
      memoryBytes: 24683756 * 1024,
    });
  });

  test('its --gpu-spec file reads back as the same device', async () => {
    const { parse } = await import('yaml');
    const text = cpuSpecFile({
      name: 'AMD EPYC',
      threads: 2,
      ghz: 2.1,
      flags: ZEN5_FLAGS,
      memoryBytes: 24 * 2 ** 30,
      bandwidthBytesPerS: 30e9,
    });
    const spec = gpuSpecFromValue(parse(text), 'cpu.yaml');
    assert.equal(spec.family, 'cpu');
    assert.equal(spec.id, 'cpu-2t');
    assert.equal(spec.memoryBytes, 24 * 2 ** 30);
    assert.equal(spec.bandwidthBytesPerS, 30e9);
    assert.ok(Math.abs((spec.peakFlops.int8 as number) / (2 * 256 * 2.1e9) - 1) < 1e-3);
  });
});
