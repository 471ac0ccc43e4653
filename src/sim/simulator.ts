/**
 * The simulator in this process: SimulatorOptions to an engine (a modelled GPU or fixed
 * timing) with vLLM-style metrics, served on a port. `infergauge sim`, the child process that
 * `infergauge run` starts and programs all start it here.
 */
import { DEFAULT_ANSWER_OPTIONS } from './answer.js';
import { EngineCluster } from './cluster.js';
import { describeEngine, perReplica, servedModelName } from './describe.js';
import {
  DEFAULT_SCRIPTED_TIMING,
  ScriptedEngine,
  type ScriptedTiming,
  type ServingEngine,
} from './engine.js';
import type { EngineModelOptions } from './engineModel.js';
import { parseFaults } from './faults.js';
import { SimMetrics } from './metrics.js';
import { resolveEngine } from './options.js';
import { PhysicalEngine } from './physical.js';
import { type RunningSimServer, startSimServer } from './server.js';
import {
  type SimulatorOptions,
  SimulatorOptionsError,
  simulatorOptionProblems,
} from './simulatorOptions.js';

/** The simulated server's engine: a modelled GPU (physical) or fixed timing (scripted). */
export type SimEngineChoice =
  | { kind: 'physical'; engine: EngineModelOptions; timeScale: number }
  | { kind: 'scripted'; timing: ScriptedTiming };

export interface SimEngine {
  engine: ServingEngine;
  /** The model id it serves, unless a served model name says otherwise. */
  servedName: string;
  maxModelLen?: number;
  /** What the simulator models, in one line. */
  banner: string;
}

/** A simulator serving in this process. */
export interface RunningSimulator {
  /** Its base URL, e.g. http://127.0.0.1:41234 (the OpenAI API is under /v1). */
  url: string;
  port: number;
  /** The model id it serves (at /v1/models; requests must name it). */
  model: string;
  /** What the simulator models, in one line (model, GPUs, KV cache, concurrency at max length). */
  banner: string;
  /** What the user should know about the options (e.g. a config.json field read approximately). */
  warnings: string[];
  /** Closes the socket and its connections. */
  stop(): Promise<void>;
}

/**
 * Builds the engine behind the simulator, with its vLLM-style metrics. Throws when the
 * modelled deployment cannot start (e.g. the weights do not fit).
 */
export function buildSimEngine(
  choice: SimEngineChoice,
  names: { model?: string; servedModelName?: string },
): SimEngine {
  if (choice.kind === 'scripted') {
    return {
      engine: new ScriptedEngine(choice.timing),
      servedName: names.servedModelName ?? `sim-${names.model ?? 'llama-3-8b'}`,
      banner: 'scripted timing',
    };
  }
  const cluster = new EngineCluster(choice.engine);
  const c = cluster.config;
  const servedName = names.servedModelName ?? servedModelName(c.model.id);
  const metrics = new SimMetrics({
    modelName: servedName,
    gpuName: c.gpu.name,
    maxTokenBucket: c.maxModelLen,
    cacheConfig: {
      block_size: c.blockSize,
      num_gpu_blocks: cluster.memory.numGpuBlocks,
      gpu_memory_utilization: c.gpuMemoryUtilization,
      cache_dtype: c.kvDtype,
      enable_prefix_caching: c.prefixCaching,
    },
    engines: cluster.dp,
  });
  const m = cluster.memory;
  const x = perReplica(choice.engine);
  return {
    engine: new PhysicalEngine(cluster, { timeScale: choice.timeScale, metrics }),
    servedName,
    maxModelLen: c.maxModelLen,
    banner:
      `${describeEngine(choice.engine)}, KV cache ${x}${m.numGpuBlocks} blocks (${x}${m.kvTokens} tokens, ${(m.kvPoolBytes / 2 ** 30).toFixed(2)} GiB per GPU), ` +
      `max concurrency at max_model_len ${c.maxModelLen}: ${x}${m.maxConcurrencyAtMaxLen.toFixed(2)}x` +
      (m.servedMaxModelLen !== undefined
        ? ` (lowered to what the KV pool holds, as ${c.personality} does at start-up)`
        : '') +
      (choice.timeScale !== 1 ? `, time scale ${choice.timeScale}` : ''),
  };
}

/**
 * The engine the options describe, or throws an Error listing every problem with them (each
 * naming the flag that sets the same thing).
 */
export function simEngineChoice(o: SimulatorOptions): {
  choice: SimEngineChoice;
  warnings: string[];
} {
  const problems = simulatorOptionProblems(o);
  // Not options at all (parseSimulatorArgs' answer, a string): nothing more can be read from it.
  if (typeof o !== 'object' || o === null || ('options' in o && 'problems' in o))
    throw invalid(problems);
  if (o.engine === 'scripted') {
    if (problems.length > 0) throw invalid(problems);
    return {
      choice: { kind: 'scripted', timing: { ...DEFAULT_SCRIPTED_TIMING, ...o.timing } },
      warnings: [],
    };
  }
  const resolved = resolveEngine(o);
  problems.push(...resolved.problems);
  if (problems.length > 0 || !resolved.engine) throw invalid(problems);
  return {
    choice: { kind: 'physical', engine: resolved.engine, timeScale: o.timeScale ?? 1 },
    warnings: resolved.warnings,
  };
}

const invalid = (problems: string[]) => new SimulatorOptionsError(problems);

/**
 * Starts the simulated OpenAI-compatible server in this process, on a loopback port of its own
 * unless `host` and `port` say otherwise. Options that cannot start an engine (an unknown key,
 * engine settings, a deployment that cannot start, a fault spec) throw a SimulatorOptionsError
 * (a UsageError) listing every problem; the socket's failure throws as Node reports it.
 *
 * The simulator then shares this process's event loop: to measure a client's own timing, start
 * it in a process of its own (`infergauge run` does, through spawnSimulator).
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  const { choice, warnings } = simEngineChoice(options);
  const model = typeof options.model === 'object' ? options.model.id : (options.model ?? undefined);
  const sim = buildSimEngine(choice, {
    ...(model !== undefined ? { model } : {}),
    ...(options.servedModelName !== undefined ? { servedModelName: options.servedModelName } : {}),
  });
  let faults: ReturnType<typeof parseFaults> | undefined;
  try {
    faults =
      options.faults !== undefined
        ? parseFaults(options.faults, options.faultSeed ?? 1)
        : undefined;
  } catch (err) {
    throw invalid([(err as Error).message]);
  }
  const server: RunningSimServer = await startSimServer({
    model: sim.servedName,
    engine: sim.engine,
    truthLimit: options.truthLimit ?? 10_000,
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 0,
    ...(faults ? { faults } : {}),
    ...(sim.maxModelLen !== undefined ? { maxModelLen: sim.maxModelLen } : {}),
    chatTemplateTokens: options.chatTemplateTokens ?? 0,
    answers: { ...DEFAULT_ANSWER_OPTIONS, ...options.answers },
  });
  return {
    url: server.url,
    port: server.port,
    model: sim.servedName,
    banner: sim.banner,
    warnings,
    stop: () => server.close(),
  };
}
