/** `infergauge memory`'s output: the question as JSON and the one-screen text report. */
import Table from 'cli-table3';
import pc from 'picocolors';
import { formatWeightFormat } from '../memory/dtype.js';
import type { MemoryRule } from '../memory/footprint.js';
import { findGpuPreset } from '../memory/hardware.js';
import type { MemoryQuestion, MemoryReport } from '../memory/report.js';

const GB = 1e9;
const GiB = 2 ** 30;
const gb = (bytes: number) => `${(bytes / GB).toFixed(2)} GB`;
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
const int = (n: number) => Math.round(n).toLocaleString('en-US');

/** Whose plan the report shows, and the name of that engine's memory fraction. */
const RULES: Record<MemoryRule, { engine: string; fraction: string }> = {
  'vllm-v1': { engine: 'vLLM', fraction: 'gpu_memory_utilization' },
  'vllm-v0': { engine: 'vLLM V0', fraction: 'gpu_memory_utilization' },
  sglang: { engine: 'SGLang', fraction: 'mem_fraction_static' },
  trtllm: { engine: 'TensorRT-LLM', fraction: 'kv_cache_free_gpu_mem_fraction' },
  tgi: { engine: 'TGI', fraction: 'cuda_memory_fraction' },
  llamacpp: { engine: 'llama.cpp', fraction: 'ctx_size' },
};

/** The question in plain values, as `memory --json` prints it. */
export function describeQuestion(q: MemoryQuestion) {
  return {
    model: q.model.id,
    gpu: q.gpu.id,
    memoryRule: q.memoryRule ?? 'vllm-v1',
    weights: formatWeightFormat(q.weights),
    kvCacheDtype: q.kvDtype,
    tp: q.tp,
    contextTokens: q.contextTokens,
    batch: q.batch,
    gpuMemoryUtilization: q.gpuMemoryUtilization,
    blockSize: q.blockSize,
    maxNumBatchedTokens: q.maxNumBatchedTokens,
    maxNumSeqs: q.maxNumSeqs,
  };
}

/** One screen: the footprint, vLLM's plan, and the answers. */
export function renderMemory(q: MemoryQuestion, r: MemoryReport, color: boolean): string {
  const c = pc.createColors(color);
  const g = r.perGpu;
  const lines: string[] = [];
  const per = q.tp > 1 ? ' per GPU' : '';
  lines.push(
    c.bold(
      `${q.model.name} (${(r.params.total / 1e9).toFixed(2)}B params${r.params.active < r.params.total * 0.9 ? `, ${(r.params.active / 1e9).toFixed(1)}B active` : ''}), ${formatWeightFormat(q.weights)} weights, ${q.kvDtype} KV cache, on ${q.tp}x ${q.gpu.name}`,
    ),
  );
  lines.push(
    `Context ${int(q.contextTokens)} tokens x batch ${q.batch}; KV cache ${kib(r.kvBytesPerTokenAllGpus)} per token${q.tp > 1 ? ` (${kib(g.kvBytesPerToken)} per GPU)` : ''}, block ${q.blockSize} tokens`,
  );
  lines.push('');
  const table = new Table({
    head: [`footprint${per}`, 'bytes', 'share'],
    colAligns: ['left', 'right', 'right'],
    style: { head: [], border: [] },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  const share = (b: number) => `${((b / g.totalBytes) * 100).toFixed(1)}%`;
  const rows: [string, number][] = [
    ['weights', g.weightBytes],
    [`KV cache: ${q.batch} x ${int(q.contextTokens)} tokens`, g.kvBytesForBatch],
    [`activations (peak, ${int(q.maxNumBatchedTokens)}-token step)`, g.activationBytes],
    ['CUDA context', g.cudaContextBytes],
    ['CUDA graphs + non-torch (cuBLAS, allocator)', g.cudaGraphBytes + g.nonTorchBytes],
  ];
  if (g.ncclBytes > 0) rows.push(['NCCL buffers', g.ncclBytes]);
  for (const [name, bytes] of rows) table.push([name, gb(bytes), share(bytes)]);
  table.push([c.bold('total'), c.bold(gb(g.totalBytes)), '']);
  table.push([
    `device (${q.gpu.name})`,
    gb(g.deviceBytes),
    g.fitsDevice ? c.green('fits') : c.red('does not fit'),
  ]);
  lines.push(table.toString());
  if (g.blockWasteBytesPerSequence > 0) {
    lines.push(
      `Paged KV: ${gb(g.kvBytesPerSequence)} per sequence in ${int(g.kvBytesPerSequence / (g.kvBytesPerToken * q.blockSize))} blocks, ${kib(g.blockWasteBytesPerSequence)} of it rounding waste in the last block${q.model.slidingWindow ? ` (sliding window ${q.model.slidingWindow} caps the blocks)` : ''}.`,
    );
  }
  lines.push('');
  const plan = r.vllm.plan;
  const rule = RULES[q.memoryRule ?? 'vllm-v1'];
  if (plan) {
    lines.push(
      `${rule.engine} at ${rule.fraction} ${q.gpuMemoryUtilization}: budget ${gb(plan.budgetBytes)}${per}, KV pool ${gb(plan.kvPoolBytes)} = ${int(plan.numGpuBlocks)} blocks = ${int(plan.kvTokens)} tokens.`,
    );
    if (plan.servedMaxModelLen !== undefined) {
      lines.push(
        c.red(
          `${rule.engine} starts anyway, its longest request lowered from ${int(q.contextTokens)} to ${int(plan.servedMaxModelLen)} tokens (the KV pool holds no more).`,
        ),
      );
    }
    lines.push(
      c.bold(
        `Max concurrent sequences at ${int(q.contextTokens)} tokens: ${int(r.maxSequences)}${r.maxSequences < q.batch ? c.red(` (fewer than the batch of ${q.batch})`) : ''}.`,
      ),
    );
  } else {
    lines.push(c.red(`${rule.engine} would not start: ${r.vllm.error}`));
  }
  lines.push(
    `KV cache overtakes the weights at ${int(r.kvOvertakesWeightsAt.oneSequence)} tokens for one sequence${q.batch > 1 ? `, at ${int(r.kvOvertakesWeightsAt.batch)} tokens per sequence for ${q.batch}` : ''}.`,
  );
  const curve = r.sequencesByContext.map(
    // 8,000 is not "7.8125k": a context off the powers of two is written out.
    (s) =>
      `${s.contextTokens % 1024 === 0 ? `${s.contextTokens / 1024}k` : int(s.contextTokens)}: ${int(s.maxSequences)}`,
  );
  if (curve.length > 0) lines.push(`Max sequences by context: ${curve.join(', ')}.`);
  const fit = (f: NonNullable<MemoryReport['smallestFit']['singleGpu']>) => {
    const spec = findGpuPreset(f.gpu);
    return `${f.tp > 1 ? `${f.tp}x ` : ''}${spec?.name ?? f.gpu} (${int(f.maxSequences)} sequence${f.maxSequences === 1 ? '' : 's'}; ${(((spec?.memoryBytes ?? 0) * f.tp) / GiB).toFixed(0)} GiB)`;
  };
  const { singleGpu, anyTp } = r.smallestFit;
  lines.push(
    `Smallest fit for ${q.batch} x ${int(q.contextTokens)} tokens: ${singleGpu ? `one ${fit(singleGpu)}` : 'no single GPU'}${anyTp && anyTp !== singleGpu && (anyTp.gpu !== singleGpu?.gpu || anyTp.tp !== singleGpu?.tp) ? `; least memory overall: ${fit(anyTp)}` : ''}.`,
  );
  return lines.join('\n');
}
