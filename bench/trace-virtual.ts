/**
 * "An hour of a Mooncake trace in virtual time in under a minute" (issue 55): a Mooncake JSONL
 * trace replayed whole through the simulated engine with its prefix sharing from `hash_ids`
 * (sim/traceKeys.ts), as `run --simulate --trace` and `size --trace` replay it. Prints the wall
 * time, the engine time covered and the prefix-cache hit rate the simulator measured beside the
 * rate an unbounded cache would reach.
 *
 * The published conversation trace (kvcache-ai/Mooncake FAST25-release/traces/
 * conversation_trace.jsonl: 12,031 requests over 59 minutes, 3 MB) is not in this repository:
 * give its path. Without one, an hour with its statistics is generated.
 *
 *   npm run bench:trace-virtual -- [path/to/conversation_trace.jsonl] [--model llama-3.1-8b]
 *                                  [--gpu h100] [--dp 2] [--speed 1] [--block-tokens 512]
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { findGpuPreset, type GpuSpec } from '../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../src/memory/model.js';
import { createRng } from '../src/rng.js';
import { replayTraceVirtual } from '../src/session/sizeTrace.js';
import { EngineCluster } from '../src/sim/cluster.js';
import { IMPLIED_ENGINE_BLOCK_TOKENS, traceImpliedHitRate } from '../src/workload/blockPrompts.js';
import { readTrace, type TraceEntry } from '../src/workload/trace.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: 'string', default: 'llama-3.1-8b' },
    gpu: { type: 'string', default: 'h100' },
    dp: { type: 'string', default: '2' },
    speed: { type: 'string', default: '1' },
    'block-tokens': { type: 'string', default: '512' },
  },
});
const blockTokens = Number(values['block-tokens']);

/**
 * An hour shaped like the conversation trace: 12,031 requests (Poisson), prompts of about 12k
 * tokens whose blocks are a chat history grown turn by turn (a new turn re-sends its
 * conversation's blocks and adds its own), every prompt opening with one shared block, answers
 * of about 340 tokens: about a third of the prompt blocks repeat, as in the published trace.
 */
function generate(): TraceEntry[] {
  const rng = createRng(55);
  const entries: TraceEntry[] = [];
  const chats: number[][] = [];
  let nextId = 1;
  let atMs = 0;
  for (let i = 0; i < 12031; i++) {
    atMs += rng.exponential(3600_000 / 12031);
    let ids: number[];
    if (chats.length > 0 && rng.next() < 0.4) {
      const c = rng.int(chats.length);
      ids = [...chats[c], ...Array.from({ length: 1 + rng.int(6) }, () => nextId++)];
      chats[c] = ids;
    } else {
      ids = [0, ...Array.from({ length: 4 + rng.int(40) }, () => nextId++)];
      chats.push(ids);
      if (chats.length > 2000) chats.shift();
    }
    const inputTokens = (ids.length - 1) * blockTokens + 1 + rng.int(blockTokens);
    entries.push({
      atMs: Math.round(atMs),
      inputTokens,
      outputTokens: 1 + Math.round(rng.exponential(340)),
      hashIds: ids,
    });
  }
  return entries;
}

const path = positionals[0];
const entries = path ? readTrace(path, 'mooncake', undefined, blockTokens) : generate();
const model = findModelPreset(values.model) as ModelSpec;
const gpu = findGpuPreset(values.gpu) as GpuSpec;
const dp = Number(values.dp);
const speed = Number(values.speed);
const engine = new EngineCluster({ model, gpu, dp, prefixCaching: true });
let records = 0;
let failed = 0;
const started = performance.now();
const result = replayTraceVirtual(engine, {
  entries,
  speed,
  blockTokens,
  onRecord: (r) => {
    records++;
    if (r.error) failed++;
  },
});
const wallS = (performance.now() - started) / 1000;
const spanS = entries[entries.length - 1].atMs / 1000 / speed;
console.log(
  `trace in virtual time: ${path ?? 'generated (the conversation trace statistics)'}; ${entries.length} requests over ${(spanS / 60).toFixed(1)} min at ${speed}x; ${model.name} on ${dp} x ${gpu.name}, prefix caching`,
);
console.log(
  `  ${wallS.toFixed(2)} s wall for ${result.simulatedS.toFixed(0)} simulated s: ${records} records (${failed} failed), ${result.steps} steps`,
);
console.log(
  `  prefix-cache hit rate: ${((result.prefixCacheHitRate ?? 0) * 100).toFixed(1)} % measured by the simulator, ${(traceImpliedHitRate(entries, { blockTokens, engineBlockTokens: IMPLIED_ENGINE_BLOCK_TOKENS }) * 100).toFixed(1)} % implied by the ids (a cache that never evicts, as run and size say it)`,
);
