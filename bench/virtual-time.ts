/**
 * How fast `infergauge run --simulate` answers a "what if": an hour of traffic at 100
 * requests/s (Poisson) through the simulated vLLM engine, writing records.jsonl and the
 * summary exactly as the command does. Prints wall time for the engine alone and for the
 * whole run (engine + records to disk + summary).
 *
 *   npm run bench:virtual -- [--rate 100] [--duration 3600] [--model llama-3-8b] [--gpu h100]
 *                            [--input 256] [--output 128]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { findGpuPreset, type GpuSpec } from '../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../src/memory/model.js';
import { SummaryBuilder } from '../src/metrics/summary.js';
import type { RequestRecord } from '../src/record.js';
import { JsonlWriter } from '../src/results/jsonl.js';
import { EngineModel } from '../src/sim/engineModel.js';
import { simulateRun } from '../src/sim/virtual.js';
import { createSyntheticWorkload } from '../src/workload/synthetic.js';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '100' },
    duration: { type: 'string', default: '3600' },
    model: { type: 'string', default: 'llama-3-8b' },
    gpu: { type: 'string', default: 'h100' },
    input: { type: 'string', default: '256' },
    output: { type: 'string', default: '128' },
  },
});
const rate = Number(values.rate);
const durationS = Number(values.duration);
const model = findModelPreset(values.model) as ModelSpec;
const gpu = findGpuPreset(values.gpu) as GpuSpec;
const load = { mode: 'open' as const, rate, arrival: 'poisson' as const };

function once(writeRecords: boolean) {
  const engine = new EngineModel({ model, gpu });
  const dir = mkdtempSync(join(tmpdir(), 'ig-bench-virtual-'));
  const path = join(dir, 'records.jsonl');
  const writer = writeRecords ? new JsonlWriter<RequestRecord>(path) : undefined;
  const builder = writeRecords ? new SummaryBuilder({ load }) : undefined;
  let records = 0;
  const started = performance.now();
  const result = simulateRun({
    engine,
    load,
    durationS,
    warmupRequests: 0,
    seed: 1,
    endpoint: 'chat',
    nextRequest: createSyntheticWorkload({
      inputTokens: Number(values.input),
      outputTokens: Number(values.output),
      seed: 1,
    }),
    onRecord: (record) => {
      records++;
      writer?.write(record);
      builder?.add(record);
    },
  });
  writer?.close();
  const summary = builder?.build({});
  const wallS = (performance.now() - started) / 1000;
  const bytes = writeRecords ? statSync(path).size : 0;
  rmSync(dir, { recursive: true, force: true });
  return { wallS, records, result, engine, summary, bytes };
}

console.log(
  `virtual time: ${model.name} on ${gpu.name}, ${rate} req/s Poisson for ${durationS} s, ${values.input} in / ${values.output} out`,
);
const engineOnly = once(false);
console.log(
  `  engine only:            ${engineOnly.wallS.toFixed(2)} s wall for ${engineOnly.result.simulatedS.toFixed(0)} simulated s, ${engineOnly.records} requests, ${engineOnly.result.steps} steps (${(engineOnly.result.steps / engineOnly.wallS / 1000).toFixed(0)}k steps/s)`,
);
const full = once(true);
const s = full.summary;
console.log(
  `  with records + summary: ${full.wallS.toFixed(2)} s wall, records.jsonl ${(full.bytes / 1e6).toFixed(0)} MB, peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`,
);
if (s) {
  console.log(
    `  simulated result: TTFT p50 ${s.latency.ttftMs.p50?.toFixed(1)} ms p99 ${s.latency.ttftMs.p99?.toFixed(1)} ms, ITL p99 ${s.latency.itlMs.p99?.toFixed(1)} ms, ${s.throughput.outputTokensPerS.toFixed(0)} output tok/s, mean concurrency ${s.load.meanConcurrency.toFixed(1)}, preemptions ${full.engine.counters.preemptions}`,
  );
}
