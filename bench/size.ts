/**
 * How long `infergauge size` takes over a search of 500+ deployments (issue 30: at least 500
 * candidates in under 2 minutes on 2 cores): 6 GPUs x TP 1, 2, 4, 8 x weights auto, fp8 x KV
 * auto, fp8 x max-num-seqs default, 128 x 3 engine personalities = 576 candidates, for
 * Llama-3.1-8B at 20 req/s of chat (256 in / 256 out) under p99 TTFT < 500 ms and p99 ITL < 50
 * ms. Prints candidates, virtual runs, wall time and the best few, with the load on the machine
 * beside (a busy machine reads slower).
 *
 *   npm run bench:size -- [--threads 2] [--rate 20] [--requests 300]
 */
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { sizeInParallel } from '../src/session/size.js';
import { findScenario, type Scenario } from '../src/workload/scenarios.js';

const { values } = parseArgs({
  options: {
    threads: { type: 'string', default: String(Math.min(4, availableParallelism())) },
    rate: { type: 'string', default: '20' },
    requests: { type: 'string', default: '300' },
  },
});
const started = performance.now();
const result = await sizeInParallel(
  {
    model: 'llama-3.1-8b',
    traffic: { mode: 'rate', rate: Number(values.rate) },
    scenario: { ...(findScenario('chat') as Scenario) },
    slo: 'ttft.p99<500,itl.p99<50',
    engine: { maxModelLen: 8192 },
    requests: Number(values.requests),
    space: {
      gpus: ['h100', 'h200', 'a100-80', 'l40s', 'l4', 'mi300x'].map((gpu) => ({ gpu })),
      tps: [1, 2, 4, 8],
      dtypes: [undefined, 'fp8'],
      kvCacheDtypes: [undefined, 'fp8'],
      maxNumSeqs: [undefined, 128],
      personalities: ['vllm-v1', 'sglang', 'trtllm'],
    },
    prices: { h100: 2.49, h200: 3.59, 'a100-80': 1.79, l40s: 0.99, l4: 0.49, mi300x: 2.99 },
  },
  Number(values.threads),
);
const wallS = (performance.now() - started) / 1000;
const feasible = result.deployments.filter((d) => d.feasible);
console.log(
  `${result.candidates} candidates, ${feasible.length} feasible, ${result.simulations} virtual runs, ${wallS.toFixed(1)} s on ${values.threads} threads (${((wallS / result.candidates) * 1000).toFixed(0)} ms a candidate); load average before/after: ${loadavg()[2].toFixed(2)} (15 min)`,
);
for (const d of feasible.slice(0, 5)) {
  console.log(
    `  ${d.gpu} TP${d.tp} DP${d.dp} ${d.dtype}/${d.kvCacheDtype} ${d.personality} max-seqs ${d.maxNumSeqs}: $${d.costPerHour?.toFixed(2)}/h, $${d.costPerMillionOutputTokens?.toFixed(3)}/M, p99 TTFT ${d.at?.ttftP99Ms?.toFixed(0)} ms, ITL ${d.at?.itlP99Ms?.toFixed(1)} ms`,
  );
}
