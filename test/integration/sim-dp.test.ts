/**
 * Data-parallel replicas (`--dp`): routing by round-robin and vLLM's least-loaded score, in
 * virtual time (exact, deterministic) and in the HTTP simulator, per-engine /metrics and truth,
 * and virtual time agreeing with the HTTP simulator per request as it does for one engine.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { RequestSpec } from '../../src/backends/types.js';
import type { LoadSpec } from '../../src/load.js';
import { findGpuPreset, type GpuSpec } from '../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../src/memory/model.js';
import type { RequestRecord } from '../../src/record.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { EngineCluster } from '../../src/sim/cluster.js';
import { describeEngine } from '../../src/sim/describe.js';
import type { EngineModelOptions } from '../../src/sim/engineModel.js';
import type { TruthRecord } from '../../src/sim/server.js';
import { simulateRun } from '../../src/sim/virtual.js';
import { parsePrometheusText, seriesKey } from '../../src/telemetry/prometheus.js';
import type { ServerMetricsSummary } from '../../src/telemetry/summary.js';
import { createSyntheticWorkload, WORDS } from '../../src/workload/synthetic.js';
import { perRequestGaps } from '../helpers/agreement.js';
import { runAlone } from '../helpers/alone.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { runAgainst } from '../helpers/run.js';
import { fetchTruth, startSim } from '../helpers/sim.js';

// Virtual time and the HTTP simulator are compared per request within timer jitter: npm test runs this file alone, after the others.
await runAlone(import.meta.url);

const BASE: EngineModelOptions = {
  model: findModelPreset('llama-3-8b') as ModelSpec,
  gpu: findGpuPreset('h100') as GpuSpec,
};

/** A request of `input` prompt words and `output` tokens. */
function request(input: number, output: number): RequestSpec {
  return {
    prompt: Array.from({ length: input }, (_, i) => WORDS[i % WORDS.length]).join(' '),
    promptWords: input,
    requestedInputTokens: input,
    requestedOutputTokens: output,
  };
}

function virtual(
  options: Partial<EngineModelOptions>,
  load: LoadSpec,
  requests: number,
  nextRequest: (id: number) => RequestSpec,
): { records: RequestRecord[]; cluster: EngineCluster; simulatedS: number } {
  const cluster = new EngineCluster({ ...BASE, ...options });
  const records: RequestRecord[] = [];
  const result = simulateRun({
    engine: cluster,
    load,
    requests,
    warmupRequests: 0,
    seed: 7,
    endpoint: 'completions',
    nextRequest,
    onRecord: (r) => records.push(r),
  });
  records.sort((a, b) => a.id - b.id);
  return { records, cluster, simulatedS: result.simulatedS };
}

/** Output tokens per second from the first send to the last token. */
function outputThroughput(records: RequestRecord[]): number {
  const start = Math.min(...records.map((r) => r.sentAt));
  const end = Math.max(...records.map((r) => r.endAt));
  return (records.reduce((n, r) => n + r.outputTokens, 0) / (end - start)) * 1000;
}

describe('data-parallel replicas in virtual time', () => {
  test('round-robin sends alternating requests to alternating replicas', () => {
    // One at a time, request i with 100 + i prompt tokens: each replica's prompt-token counter
    // is the sum over the ids it was sent.
    const { records, cluster } = virtual(
      { dp: 2, loadBalancer: 'round-robin' },
      { mode: 'closed', concurrency: 1 },
      10,
      (id) => request(100 + id, 4),
    );
    assert.equal(records.length, 10);
    assert.ok(records.every((r) => r.error === undefined && r.outputTokens === 4));
    const sum = (ids: number[]) => ids.reduce((n, id) => n + 100 + id, 0);
    const [r0, r1] = cluster.replicas;
    assert.equal(r0.counters.promptTokens, sum([0, 2, 4, 6, 8]));
    assert.equal(r1.counters.promptTokens, sum([1, 3, 5, 7, 9]));
    assert.equal(r0.counters.generationTokens, 20);
    assert.equal(r1.counters.generationTokens, 20);
  });

  test('at saturation two replicas give about twice the output throughput of one, exactly again on a rerun', () => {
    // max_num_seqs 64 and 256 requests in the system: every replica runs full batches.
    const run = (dp: number) =>
      virtual({ dp, maxNumSeqs: 64 }, { mode: 'closed', concurrency: 256 }, 1024, () =>
        request(128, 128),
      );
    const one = run(1);
    const two = run(2);
    const ratio = outputThroughput(two.records) / outputThroughput(one.records);
    console.log(`  dp 2 / dp 1 output throughput at saturation: ${ratio.toFixed(3)}`);
    assert.ok(ratio >= 1.8 && ratio <= 2.05, `dp 2 / dp 1 output throughput ${ratio}`);
    for (const m of two.cluster.replicas) assert.equal(m.counters.peakRunning, 64);
    // Deterministic: the same run gives the same records, token time for token time.
    assert.deepEqual(run(2).records, two.records);
  });

  test('least-loaded sends a request to the emptier replica when the other runs a long one', () => {
    // Even ids are long (1,000 tokens), odd ids short (8), two in flight at a time. Round-robin
    // puts every long request on replica 0 (request 2 goes there, where request 0 still runs);
    // vLLM's score (waiting x 4 + running) sends request 2 to the idle replica 1.
    const shape = (id: number) => request(64, id % 2 === 0 ? 1000 : 8);
    const load: LoadSpec = { mode: 'closed', concurrency: 2 };
    const rr = virtual({ dp: 2, loadBalancer: 'round-robin' }, load, 6, shape);
    const ll = virtual({ dp: 2, loadBalancer: 'least-loaded' }, load, 6, shape);
    assert.equal(rr.cluster.replicas[0].counters.generationTokens, 3 * 1000);
    assert.equal(rr.cluster.replicas[1].counters.generationTokens, 3 * 8);
    const llTokens = ll.cluster.replicas.map((m) => m.counters.generationTokens);
    assert.ok(llTokens[1] >= 1000, `least-loaded replica 1 took a long request: ${llTokens}`);
    assert.equal(llTokens[0] + llTokens[1], 3 * 1000 + 3 * 8);
    // Spreading the long requests ends the run sooner.
    assert.ok(ll.simulatedS < rr.simulatedS, `${ll.simulatedS} s vs ${rr.simulatedS} s`);
  });

  test('the deployment line names the replicas and the balancer; the KV blocks of all count', () => {
    const options = { ...BASE, dp: 2, loadBalancer: 'least-loaded' as const };
    assert.match(describeEngine(options), /on 2 x TP1 replicas \(1x .+ each\), least-loaded$/);
    assert.doesNotMatch(describeEngine(BASE), /replica/);
    const cluster = new EngineCluster(options);
    assert.equal(cluster.totalBlocks, 2 * cluster.memory.numGpuBlocks);
  });
});

test("a sweep in virtual time saves each replica's counters, whose sums are the totals", async () => {
  const out = tempDir('sim-dp-');
  const run = await runCli([
    'sweep',
    '--simulate',
    '--dp',
    '2',
    '--levels',
    '8',
    '--requests',
    '40',
    '--out',
    out,
  ]);
  assert.equal(run.code, 0, run.stderr);
  const summary = JSON.parse(readFileSync(join(out, 'default', 'c8', 'summary.json'), 'utf8')) as {
    serverMetrics: ServerMetricsSummary;
  };
  const m = summary.serverMetrics;
  const counter = (name: string, engine: string) =>
    m.counters[seriesKey(name, { engine, model_name: 'sim-llama-3-8b' })]?.delta as number;
  const generated = ['0', '1'].map((e) => counter('vllm:generation_tokens_total', e));
  assert.ok(generated[0] > 0 && generated[1] > 0, `${generated}`);
  assert.equal(generated[0] + generated[1], m.memory?.generationTokens);
  assert.equal(
    counter('vllm:prompt_tokens_total', '0') + counter('vllm:prompt_tokens_total', '1'),
    m.memory?.promptTokens,
  );
});

describe('data-parallel replicas in the HTTP simulator', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ dp: 2, 'truth-limit': 1000 });
  });
  after(() => sim.stop());

  test('--dp 2 serves a run: replicas alternate, /metrics has both engines, DCGM both GPUs', async () => {
    assert.match(sim.banner, /2 x TP1 replicas .*round-robin, KV cache 2 x \d+ blocks/);
    const run = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 1 },
      requests: 6,
      inputTokens: 32,
      outputTokens: 5,
    });
    assert.equal(run.records.length, 6);
    assert.ok(run.records.every((r) => r.error === undefined && r.outputTokens === 5));
    const truth = await fetchTruth(sim.url);
    const byId = new Map(truth.map((t: TruthRecord) => [t.requestId, t]));
    for (let id = 0; id < 6; id++) assert.equal(byId.get(String(id))?.replica, id % 2);

    const text = await (await fetch(`${sim.url}/metrics`)).text();
    // One HELP/TYPE per family, its series for both engines under it (Prometheus rejects a
    // family declared twice).
    const types = text.split('\n').filter((line) => line.startsWith('# TYPE '));
    assert.equal(new Set(types).size, types.length, 'no family declared twice');
    const samples = parsePrometheusText(text);
    const value = (name: string, engine: string) =>
      samples.find((s) => s.name === name && s.labels.engine === engine)?.value;
    for (const engine of ['0', '1']) {
      assert.equal(value('vllm:generation_tokens_total', engine), 15, `engine ${engine}`);
      assert.equal(value('vllm:time_to_first_token_seconds_count', engine), 3);
      assert.equal(value('vllm:num_requests_running', engine), 0);
      assert.equal(
        samples.find(
          (s) =>
            s.name === 'vllm:request_success_total' &&
            s.labels.engine === engine &&
            s.labels.finished_reason === 'length',
        )?.value,
        3,
      );
      assert.ok(
        samples.some((s) => s.name === 'vllm:cache_config_info' && s.labels.engine === engine),
      );
    }
    const gpus = samples.filter((s) => s.name === 'DCGM_FI_DEV_FB_USED').map((s) => s.labels.gpu);
    assert.deepEqual(gpus, ['0', '1']);

    const engine = (
      (await (await fetch(`${sim.url}/debug/truth`)).json()) as {
        engine: {
          dp: number;
          counters: { generationTokens: number };
          memory: { numGpuBlocks: number };
          replicas: { replica: number; counters: { generationTokens: number } }[];
        };
      }
    ).engine;
    assert.equal(engine.dp, 2);
    assert.equal(engine.counters.generationTokens, 30);
    assert.deepEqual(
      engine.replicas.map((r) => [r.replica, r.counters.generationTokens]),
      [
        [0, 15],
        [1, 15],
      ],
    );
  });

  test('virtual time and the HTTP simulator agree per request (same seeded open-loop workload)', async () => {
    const load: LoadSpec = { mode: 'open', rate: 8, arrival: 'poisson' };
    const shape = { inputTokens: 256, outputTokens: 48 };
    // Warm the processes first (JIT, connections), as a real run would with --warmup; the
    // round-robin pointer is back at replica 0 after an even number of requests.
    await runAgainst(sim.url, { load, requests: 10, ...shape });
    const real = await runAgainst(sim.url, { load, requests: 30, ...shape });
    const same = virtual(
      { dp: 2, loadBalancer: 'round-robin' },
      load,
      30,
      createSyntheticWorkload({ ...shape, seed: 7 }),
    ).records;
    assert.equal(same.length, 30);
    const gaps = perRequestGaps(real.records, same);
    const ms = (x: number) => x.toFixed(2);
    console.log(
      `  real vs virtual (dp 2): |TTFT gap| mean ${ms(gaps.ttftGapMs)} median ${ms(gaps.medianTtftGapMs)} ms, |E2E gap| mean ${ms(gaps.e2eGapMs)} median ${ms(gaps.medianE2eGapMs)} ms of ${gaps.meanE2eMs.toFixed(0)} ms`,
    );
    // Timer lateness (about 1 ms per wake-up, up to ~5 ms on a busy 2-core machine) and the
    // client's own send slip; medians, as such a machine delays a few timers by much more. A
    // modelled cost missing on one side (the 20 ms front end, a prefill) would exceed this.
    assert.ok(gaps.medianTtftGapMs < 8, `TTFT gap ${gaps.medianTtftGapMs} ms`);
    assert.ok(
      gaps.medianE2eGapMs < 10 + 0.02 * gaps.meanE2eMs,
      `E2E gap ${gaps.medianE2eGapMs} ms`,
    );
  });
});
