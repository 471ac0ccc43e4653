import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withApiKey } from '../backends/request.js';
import type { RequestSpec } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import { createRunClock } from '../loadgen/clock.js';
import { type LoadgenResult, runLoadgen } from '../loadgen/run.js';
import { maxParts, wholeRun } from '../loadgen/shard.js';
import { defaultWorkers, runWorkers, WORKER_START_LEAD_MS } from '../loadgen/workers.js';
import { type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import type { RunPlan } from '../plan/runPlan.js';
import type { RequestRecord } from '../record.js';
import { JsonlWriter, writeClientHealth } from '../results/jsonl.js';
import { describeEngine, servedModelName } from '../sim/describe.js';
import { EngineModel, type EngineModelOptions } from '../sim/engineModel.js';
import { simulateRun } from '../sim/virtual.js';
import { recordTelemetry } from '../telemetry/scraper.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import { streamSeed } from '../workload/distributions.js';
import { createPromptFactory, type PromptFactory } from '../workload/prompts.js';
import type { Scenario } from '../workload/scenarios.js';
import { createTokenizer, type Tokenizer } from '../workload/tokenizer.js';
import { createWorkload } from '../workload/workload.js';
import { type SimulatorProcess, spawnSimulator } from './simulator.js';
import {
  discoverModel,
  measurePromptOverhead,
  type PreparedRun,
  targetConfig,
  telemetrySources,
  tokenizerOptions,
  workloadSource,
} from './target.js';

/** One measurement: a load and a workload, for a fixed number of requests or a duration. */
export interface Point {
  load: LoadSpec;
  scenario: Scenario;
  requests?: number;
  durationS?: number;
  warmupRequests?: number;
  /** Where records.jsonl, telemetry.jsonl and summary.json go. */
  dir: string;
  /** Replaces the scenario's workload (probes shape each request themselves). */
  nextRequest?: (id: number) => RequestSpec;
}

export interface PointResult {
  summary: RunSummary;
  serverMetrics?: ServerMetricsSummary;
}

/**
 * Runs measurement points one after another against one target: a server (`--url`), the
 * built-in simulator in its own process, or the engine model in virtual time. Sweeps, probes
 * and capacity searches are sequences of points; each point writes a run directory of its own.
 */
export interface PointRunner {
  /** What is measured, in one line (model, and the simulated deployment if any). */
  readonly description: string;
  readonly model: string;
  readonly tokenizer: Tokenizer;
  run(point: Point): Promise<PointResult>;
  close(): Promise<void>;
}

export async function createPointRunner(
  prepared: PreparedRun & { plan: RunPlan },
  stopSignal?: AbortSignal,
): Promise<PointRunner> {
  const { plan } = prepared;
  if (prepared.simulate && prepared.engine) return virtualRunner(plan, prepared.engine);
  let sim: SimulatorProcess | undefined;
  if (plan.url === undefined) {
    sim = await spawnSimulator([
      ...(prepared.simModel !== undefined ? ['--model', prepared.simModel] : []),
      ...(prepared.timeScale !== undefined ? ['--time-scale', prepared.timeScale] : []),
      ...prepared.engineFlags,
    ]);
    if (plan.telemetry?.metrics) plan.telemetry.metricsUrl ??= `${sim.url}/metrics`;
  }
  try {
    const url = sim?.url ?? (plan.url as string);
    const apiKey = plan.apiKeyEnv ? process.env[plan.apiKeyEnv] : undefined;
    const { model } = await discoverModel(plan, url, apiKey);
    const target = targetConfig(plan, url, model, apiKey);
    const tokenizer = await createTokenizer(
      plan.tokenizer,
      tokenizerOptions(plan, url, model, apiKey),
    );
    const factories = promptFactories(tokenizer, plan.seed);
    const overhead = await measurePromptOverhead(target, await factories(undefined));
    const { backend: _backend, ...targetData } = target;
    return {
      description: sim ? `${model}: ${sim.banner}` : `${model} at ${url}`,
      model,
      tokenizer,
      run: async (point) => {
        mkdirSync(point.dir, { recursive: true });
        const clock = createRunClock();
        const records = new JsonlWriter<RequestRecord>(join(point.dir, 'records.jsonl'));
        const builder = new SummaryBuilder({
          load: point.load,
          ...(plan.slo ? { slo: plan.slo } : {}),
        });
        const telemetry = plan.telemetry
          ? recordTelemetry({
              sources: telemetrySources(plan.telemetry),
              intervalMs: plan.telemetry.intervalS * 1000,
              nowMs: () => clock.nowUs() / 1000,
              headers: withApiKey(plan.headers, apiKey),
              sink: new JsonlWriter<TelemetrySnapshot>(join(point.dir, 'telemetry.jsonl')),
            })
          : undefined;
        let serverMetrics: ServerMetricsSummary | undefined;
        let results: LoadgenResult[];
        const warmupRequests = point.warmupRequests ?? 0;
        try {
          if (point.nextRequest) {
            // A probe shapes each request itself: a function, so it runs in this thread.
            const result = await runLoadgen({
              target,
              load: point.load,
              ...(point.requests !== undefined ? { requests: point.requests } : {}),
              ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
              warmupRequests,
              seed: plan.seed,
              nextRequest: point.nextRequest,
              onRecord: (r) => {
                records.write(r);
                builder.add(r);
              },
              ...(stopSignal ? { stopSignal } : {}),
              clock,
            });
            results = [result];
          } else {
            const part = wholeRun(point.load, warmupRequests, point.requests);
            const run = await runWorkers({
              workers: Math.min(plan.workers ?? defaultWorkers(part), maxParts(part)),
              part: { ...part, measureFromId: warmupRequests },
              job: {
                target: { ...targetData, backend: plan.backend },
                ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
                seed: plan.seed,
                workload: workloadSource(plan, point.scenario, {
                  url,
                  model,
                  apiKey,
                  promptOverheadTokens: overhead.tokens,
                }),
                summaryContext: { load: point.load, ...(plan.slo ? { slo: plan.slo } : {}) },
              },
              clockFor: () => ({ clock, startAtUs: clock.nowUs() + WORKER_START_LEAD_MS * 1000 }),
              onRecords: (text, count) => records.writeLines(text, count),
              progress: { sent: 0, finished: 0, failed: 0, inFlight: 0 },
              ...(stopSignal ? { stopSignal } : {}),
            });
            for (const state of run.states) builder.merge(state);
            results = run.results;
          }
        } finally {
          records.close();
          serverMetrics = await telemetry?.stop();
        }
        const health = results.map((r) => r.clientHealth);
        writeClientHealth(point.dir, health);
        const summary = builder.build({
          clientHealth: health,
          interrupted: results.some((r) => r.stoppedBy === 'signal'),
          unsentRequests: results.reduce((n, r) => n + r.unsentRequests, 0),
        });
        if (serverMetrics) summary.warnings.push(...serverMetrics.warnings);
        writeSummary(point.dir, summary, serverMetrics);
        return { summary, ...(serverMetrics ? { serverMetrics } : {}) };
      },
      close: async () => {
        await sim?.stop();
      },
    };
  } catch (err) {
    await sim?.stop();
    throw err;
  }
}

/** Prompt factories by shared-prefix length, built once each (calibration is not free). */
function promptFactories(tokenizer: Tokenizer, seed: number) {
  const made = new Map<number, Promise<PromptFactory>>();
  return (prefix: number | undefined) => {
    const key = prefix ?? 0;
    let factory = made.get(key);
    if (!factory) {
      factory = createPromptFactory(tokenizer, {
        seed: streamSeed(seed, 'prompts'),
        ...(key > 0 ? { sharedPrefixTokens: key } : {}),
      });
      made.set(key, factory);
    }
    return factory;
  };
}

/** Points in virtual time: a fresh engine model each, no HTTP, no waiting. */
async function virtualRunner(
  plan: RunPlan,
  engineOptions: EngineModelOptions,
): Promise<PointRunner> {
  const probe = new EngineModel(engineOptions);
  const model = servedModelName(probe.config.model.id);
  const tokenizer = await createTokenizer('words', { builtInSimulator: true });
  const factories = promptFactories(tokenizer, plan.seed);
  return {
    description: `${model}: ${describeEngine(engineOptions)}, KV cache ${probe.memory.numGpuBlocks} blocks; virtual time`,
    model,
    tokenizer,
    run: async (point) => {
      mkdirSync(point.dir, { recursive: true });
      const engine = new EngineModel(engineOptions);
      const records = new JsonlWriter<RequestRecord>(join(point.dir, 'records.jsonl'));
      const builder = new SummaryBuilder({
        load: point.load,
        ...(plan.slo ? { slo: plan.slo } : {}),
      });
      const nextRequest =
        point.nextRequest ??
        createWorkload({
          scenario: point.scenario,
          prompts: await factories(point.scenario.sharedPrefixTokens),
          seed: plan.seed,
          wordsAreTokens: true,
        });
      try {
        simulateRun({
          engine,
          load: point.load,
          ...(point.requests !== undefined ? { requests: point.requests } : {}),
          ...(point.durationS !== undefined ? { durationS: point.durationS } : {}),
          warmupRequests: point.warmupRequests ?? 0,
          seed: plan.seed,
          endpoint: plan.endpoint,
          nextRequest,
          onRecord: (r) => {
            records.write(r);
            builder.add(r);
          },
        });
      } finally {
        records.close();
      }
      const summary = builder.build({});
      // The engine's own state stands in for scraped metrics: peak KV and preemptions.
      const serverMetrics = engineMetrics(engine);
      writeSummary(point.dir, summary, serverMetrics);
      return { summary, serverMetrics };
    },
    close: async () => {},
  };
}

/** A virtual run's engine counters in the shape of scraped server metrics (peaks, exact). */
function engineMetrics(engine: EngineModel): ServerMetricsSummary {
  const c = engine.counters;
  const m = engine.memory;
  return {
    scrapes: 0,
    failedScrapes: 0,
    windowS: engine.now / 1e9,
    counters: {},
    gauges: {},
    memory: {
      scrapes: 0,
      // Means need samples over time; a virtual run keeps peaks, so the mean repeats the peak.
      kvCacheUsage: {
        mean: c.peakUsedBlocks / m.numGpuBlocks,
        max: c.peakUsedBlocks / m.numGpuBlocks,
      },
      running: { mean: c.peakRunning, max: c.peakRunning },
      preemptions: c.preemptions,
      promptTokens: c.promptTokens,
      generationTokens: c.generationTokens,
      gpuMemoryUsedBytes: { mean: m.deviceUsedBytes, max: m.deviceUsedBytes, total: m.totalBytes },
    },
    warnings: [],
  };
}

function writeSummary(dir: string, summary: RunSummary, serverMetrics?: ServerMetricsSummary) {
  const saved = serverMetrics ? { ...summary, serverMetrics } : summary;
  writeFileSync(join(dir, 'summary.json'), `${JSON.stringify(saved, null, 2)}\n`);
}
