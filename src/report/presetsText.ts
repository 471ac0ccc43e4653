import { createRequire } from 'node:module';
import { formatWeightFormat } from '../memory/dtype.js';
import { GPU_PRESETS } from '../memory/hardware.js';
import { MODEL_PRESETS, paramCounts } from '../memory/model.js';

/** `infergauge sim --list`: the model and GPU presets, and the weight formats. */
export function renderPresets(): string {
  // Required at first use (it is CommonJS), as report/table.ts does.
  const Table = createRequire(import.meta.url)('cli-table3') as typeof import('cli-table3');
  // No colour codes (cli-table3's default red heads and grey borders), even on a terminal.
  const style = { head: [], border: [] };
  const models = new Table({
    head: ['model', 'name', 'params', 'layers', 'hidden', 'heads q/kv', 'context', 'notes'],
    style,
  });
  for (const m of MODEL_PRESETS) {
    const p = paramCounts(m);
    const notes = [
      m.moe ? `MoE ${m.moe.experts}x top-${m.moe.topK}` : '',
      m.mla ? `MLA ${m.mla.kvLoraRank}+${m.mla.ropeHeadDim}` : '',
      m.slidingWindow ? `window ${m.slidingWindow}` : '',
    ]
      .filter(Boolean)
      .join(', ');
    models.push([
      m.id,
      m.name,
      `${(p.total / 1e9).toFixed(2)}B`,
      m.layers,
      m.hiddenSize,
      `${m.queryHeads}/${m.kvHeads}`,
      m.maxContext,
      notes,
    ]);
  }
  const gpus = new Table({
    head: ['gpu', 'name', 'memory', 'bandwidth', 'bf16', 'fp8', 'family', 'GPU link'],
    style,
  });
  for (const g of GPU_PRESETS) {
    gpus.push([
      g.id,
      g.name,
      `${g.memoryGB} GB`,
      `${(g.bandwidthBytesPerS / 1e12).toFixed(3)} TB/s`,
      `${(g.peakFlops.bf16 / 1e12).toFixed(1)} TF/s`,
      g.peakFlops.fp8 ? `${(g.peakFlops.fp8 / 1e12).toFixed(1)} TF/s` : '-',
      g.family ?? '-',
      g.interconnect.name,
    ]);
  }
  return `Models (--model; or a path to a Hugging Face config.json)\n${models.toString()}\n\nGPUs (--gpu)\n${gpus.toString()}\n\nWeight formats (--dtype): bf16, fp16, fp8, int8, ${formatWeightFormat({ dtype: 'int4' })} (awq/gptq; int4-g64 sets the group size)`;
}
