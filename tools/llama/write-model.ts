import { parseArgs } from 'node:util';
import { LLAMA_PRESETS, type LlamaPreset, type WeightType, writeLlamaModel } from './model.js';

/**
 * node --import tsx tools/llama/write-model.ts --preset 125m --out /tmp/model-125m.gguf
 * Prints the model's description as JSON.
 */
const { values } = parseArgs({
  options: {
    preset: { type: 'string', default: 'tiny' },
    type: { type: 'string' },
    seed: { type: 'string', default: '1' },
    out: { type: 'string' },
  },
});

const preset = values.preset as LlamaPreset;
if (!(preset in LLAMA_PRESETS)) {
  throw new Error(`--preset must be one of ${Object.keys(LLAMA_PRESETS).join(', ')}`);
}
const type = values.type as WeightType | undefined;
if (type !== undefined && !['f32', 'f16', 'q8_0', 'q4_0'].includes(type)) {
  throw new Error('--type must be f32, f16, q8_0 or q4_0');
}
const out = values.out ?? `infergauge-${preset}-${type ?? LLAMA_PRESETS[preset].type}.gguf`;
const description = await writeLlamaModel(out, { preset, type, seed: Number(values.seed) });
console.log(JSON.stringify(description, null, 2));
