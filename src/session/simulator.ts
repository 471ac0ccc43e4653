import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AnswerOptions } from '../sim/answer.js';
import { EngineCluster } from '../sim/cluster.js';
import { describeEngine, perReplica, servedModelName } from '../sim/describe.js';
import { ScriptedEngine, type ScriptedTiming, type ServingEngine } from '../sim/engine.js';
import type { EngineModelOptions } from '../sim/engineModel.js';
import { parseFaults } from '../sim/faults.js';
import { SimMetrics } from '../sim/metrics.js';
import { engineFromFlags } from '../sim/options.js';
import { PhysicalEngine } from '../sim/physical.js';
import { type RunningSimServer, startSimServer } from '../sim/server.js';

export interface SimulatorProcess {
  url: string;
  /** The child process (to pin it to cores in benchmarks). */
  pid: number;
  /** What the simulator models, in one line. */
  banner: string;
  stop(): Promise<void>;
}

/** Messages the simulator sends its parent: it listens, or it could not start (and why). */
export type SimMessage =
  | { type: 'listening'; url: string; banner: string }
  | { type: 'failed'; message: string };

/**
 * Starts the built-in simulator in a child process on a free loopback port, so that its work
 * never shares the client's event loop or CPU readings. The child ignores Ctrl-C (the parent
 * decides when to stop) and exits when the parent goes away.
 */
export function spawnSimulator(args: string[] = []): Promise<SimulatorProcess> {
  // The simulator's process is the command line's `sim` (a path, not an import: the session
  // never imports the command line).
  const self = fileURLToPath(import.meta.url);
  const main = self.replace(/session[/\\]simulator\.(ts|js)$/, 'cli/main.$1');
  const child = fork(main, ['sim', '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let failure: string | undefined;
    const onExit = (code: number | null) =>
      reject(new Error(failure ?? `the built-in simulator exited before listening (code ${code})`));
    child.once('exit', onExit);
    child.once('error', reject);
    child.on('message', (message: SimMessage) => {
      if (message?.type === 'failed')
        failure = `the built-in simulator cannot start: ${message.message}`;
      if (message?.type !== 'listening') return;
      child.off('exit', onExit);
      resolve({
        url: message.url,
        pid: child.pid as number,
        banner: message.banner,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
  });
}

/** The simulated server's engine: a modelled GPU (physical) or fixed timing (scripted). */
export type SimEngineChoice =
  | { kind: 'physical'; engine: EngineModelOptions; timeScale: number }
  | { kind: 'scripted'; timing: ScriptedTiming };

export interface SimEngine {
  engine: ServingEngine;
  /** The model id it serves, unless --served-model-name says otherwise. */
  servedName: string;
  maxModelLen?: number;
  /** What the simulator models, in one line. */
  banner: string;
}

/**
 * Builds the engine behind `infergauge sim` (and the child that `run` starts), with its
 * vLLM-style metrics. Throws when the modelled deployment cannot start (e.g. the weights do
 * not fit).
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
      (choice.timeScale !== 1 ? `, time scale ${choice.timeScale}` : ''),
  };
}

/** What `infergauge sim` serves: its engine, faults and answers, and where it listens. */
export interface ServeSimulatorOptions {
  /** The physical engine from `--model` and the engine flags, or fixed timing. */
  engine:
    | { kind: 'physical'; model?: string; flags: Record<string, unknown>; timeScale: number }
    | { kind: 'scripted'; timing: ScriptedTiming };
  servedModelName?: string;
  /** `--faults` as written, and the seed of its draws. */
  faults?: string;
  faultSeed: number;
  host: string;
  port: number;
  truthLimit: number;
  chatTemplateTokens: number;
  answers: AnswerOptions;
}

/**
 * Builds the simulated engine and serves it. Throws an Error whose message says what is wrong
 * with the options (engine flags, a deployment that cannot start, a fault spec) or the socket.
 */
export async function serveSimulator(
  o: ServeSimulatorOptions,
): Promise<{ server: RunningSimServer; sim: SimEngine; warnings: string[] }> {
  let choice: SimEngineChoice;
  let warnings: string[] = [];
  if (o.engine.kind === 'scripted') choice = o.engine;
  else {
    const built = engineFromFlags(o.engine.model, o.engine.flags);
    if (!built.engine) throw new Error(`invalid options\n  - ${built.problems.join('\n  - ')}`);
    choice = { kind: 'physical', engine: built.engine, timeScale: o.engine.timeScale };
    warnings = built.warnings;
  }
  const sim = buildSimEngine(choice, {
    ...(o.engine.kind === 'physical' && o.engine.model !== undefined
      ? { model: o.engine.model }
      : {}),
    ...(o.servedModelName !== undefined ? { servedModelName: o.servedModelName } : {}),
  });
  const faults = o.faults !== undefined ? parseFaults(o.faults, o.faultSeed) : undefined;
  const server = await startSimServer({
    model: sim.servedName,
    engine: sim.engine,
    truthLimit: o.truthLimit,
    host: o.host,
    port: o.port,
    ...(faults ? { faults } : {}),
    ...(sim.maxModelLen !== undefined ? { maxModelLen: sim.maxModelLen } : {}),
    chatTemplateTokens: o.chatTemplateTokens,
    answers: o.answers,
  });
  return { server, sim, warnings };
}
