/**
 * The simulated engine against published serving measurements (issue 17): each point is set up
 * as a user would set up the simulator for it (model, GPU, TP/DP, dtypes, the engine and the
 * settings the source states, the workload and the load), run in virtual time, and compared
 * metric by metric. Points live in test/fixtures/sim-validation/points.json with their sources;
 * `role` splits them into the fit set (may inform a free constant) and the validation set (never
 * used for fitting). bench/sim-validation.ts prints the table; test/unit/sim/
 * simulator-validation.test.ts holds the targets.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RequestSpec } from '../src/backends/types.js';
import type { LoadSpec } from '../src/load.js';
import { parseWeightFormat, type WeightFormat } from '../src/memory/dtype.js';
import { EngineStartError, planVllmMemory } from '../src/memory/footprint.js';
import { findGpuPreset } from '../src/memory/hardware.js';
import { readHfConfig } from '../src/memory/hfConfig.js';
import { findModelPreset, type ModelSpec } from '../src/memory/model.js';
import { type RunSummary, summarize } from '../src/metrics/summary.js';
import type { RequestRecord } from '../src/record.js';
import {
  EngineModel,
  type EngineModelOptions,
  resolveEngineConfig,
} from '../src/sim/engineModel.js';
import {
  CLIENT_PATHS,
  type ClientPath,
  isPersonalityId,
  parseEngineVersion,
} from '../src/sim/personality.js';
import type { Efficiency } from '../src/sim/roofline.js';
import { simulateRun } from '../src/sim/virtual.js';
import {
  type LengthDistribution,
  parseLengthDistribution,
  sampleLength,
  streamSeed,
} from '../src/workload/distributions.js';
import { findScenario, type Scenario } from '../src/workload/scenarios.js';
import { WORDS } from '../src/workload/synthetic.js';
import { REPO } from '../tools/repo.js';

type Stat = { mean?: number | null; median?: number | null; p99?: number | null };

export interface ValidationPoint {
  id: string;
  role: 'fit' | 'validation';
  /** Why a point may miss by more than 50 %, stated before the comparison. */
  knownMiss?: string;
  /** Why the point cannot be simulated (a fact the source lacks), stated before the comparison. */
  skip?: string;
  source: {
    title: string;
    repo?: string | null;
    path?: string | null;
    url?: string | null;
    /** The source's own words: its command line says which endpoint the client used. */
    quote?: string | null;
  };
  engine: {
    name: string;
    version?: string | null;
    personality: string;
    settings?: Record<string, unknown>;
    /**
     * Who sent the requests, where it was not an HTTP client: the engine's own entry point, in
     * the source's words (round three's points: `LLM.generate ... token ids given`,
     * `AsyncLLMEngine.generate`, `trtllm-bench`, TensorRT-LLM's `ModelRunner.generate`).
     */
    entryPoint?: string;
  };
  hardware: { gpu: string; tp: number; dp?: number };
  model: { id: string; preset: string | null; weights: string; kvCache?: string | null };
  workload: {
    dataset?: string | null;
    inputTokens: { kind: string; value: number };
    outputTokens: { kind: string; value: number };
    requests?: number | null;
    /** `sharegpt`: the source gives no lengths, only the data set; use the `sharegpt` preset. */
    lengths?: 'sharegpt';
    /**
     * A spread the source states around its lengths ("~20k input tokens (±15% variance)"):
     * each length uniform over [floor(value (1 - r)), ceil(value (1 + r))], as `vllm bench serve
     * --random-range-ratio` draws them (`vllm/benchmarks/datasets.py` RandomDataset
     * get_sampling_params). Without it the stated lengths are fixed.
     */
    rangeRatio?: number | null;
    /**
     * How many times the source sends its `requests`, in the same order, to one running engine
     * (AccelMark's loadgen: each of a suite's `num_runs` runs resends the same prompts). With
     * prefix caching on, every pass after the first finds each prompt's blocks cached. Absent: 1.
     */
    passes?: number | null;
  };
  load: {
    /** `startup`: what the engine printed when it started (its KV pool), no load. */
    kind: 'batch1' | 'concurrency' | 'rate' | 'offline' | 'startup';
    value?: number | null;
    /** The client's arrival process where the source states one (default: Poisson). */
    arrival?: 'poisson' | 'constant';
  };
  measured: {
    ttftMs?: Stat;
    tpotMs?: Stat;
    itlMs?: Stat;
    e2eMs?: Stat;
    outputTokensPerS?: number | null;
    requestsPerS?: number | null;
    /** A start-up log's KV pool: GiB, tokens, or blocks of `blockSizeTokens`. */
    kvPool?: {
      gib?: number | null;
      tokens?: number | null;
      gpuBlocks?: number | null;
      blockSizeTokens?: number | null;
      maxConcurrency?: { tokensPerRequest: number; x: number } | null;
    };
  };
  notes?: string;
}

/** The metrics compared, each published figure against the same statistic simulated. */
export type Metric =
  | 'ttftMs.mean'
  | 'ttftMs.median'
  | 'ttftMs.p99'
  | 'tpotMs.mean'
  | 'tpotMs.median'
  | 'itlMs.mean'
  | 'itlMs.median'
  | 'e2eMs.mean'
  | 'outputTokensPerS'
  | 'requestsPerS'
  | 'kvPoolGib'
  | 'kvPoolTokens';

export interface Comparison {
  metric: Metric;
  published: number;
  simulated: number;
  /** (simulated - published) / published. */
  error: number;
}

type Readers = [
  (m: ValidationPoint['measured']) => number | null | undefined,
  (s: RunSummary) => number,
];

/** Each metric: where a point publishes it, and the same statistic of the simulated run. */
const METRICS: Record<Exclude<Metric, 'kvPoolGib' | 'kvPoolTokens'>, Readers> = {
  'ttftMs.mean': [(m) => m.ttftMs?.mean, (s) => s.latency.ttftMs.mean],
  'ttftMs.median': [(m) => m.ttftMs?.median, (s) => s.latency.ttftMs.p50],
  'ttftMs.p99': [(m) => m.ttftMs?.p99, (s) => s.latency.ttftMs.p99],
  'tpotMs.mean': [(m) => m.tpotMs?.mean, (s) => s.latency.tpotMs.mean],
  'tpotMs.median': [(m) => m.tpotMs?.median, (s) => s.latency.tpotMs.p50],
  // Published ITLs (benchmark_serving, bench_serving, genai-perf) are gaps between streamed
  // chunks: our per-event gaps (equal to per-token ones unless a server bunches tokens).
  'itlMs.mean': [(m) => m.itlMs?.mean, (s) => s.latency.chunkGapMs.mean],
  'itlMs.median': [(m) => m.itlMs?.median, (s) => s.latency.chunkGapMs.p50],
  'e2eMs.mean': [(m) => m.e2eMs?.mean, (s) => s.latency.e2eMs.mean],
  outputTokensPerS: [(m) => m.outputTokensPerS, (s) => s.throughput.outputTokensPerS],
  requestsPerS: [(m) => m.requestsPerS, (s) => s.throughput.requestsPerS],
};

/** The groups the issues' targets speak of, one error per point and group. */
export type Group = 'ttft' | 'tpot' | 'throughput' | 'kvPool';

export interface PointResult {
  point: ValidationPoint;
  comparisons: Comparison[];
  /**
   * The point's error per group: the mean statistic where published, else the median; TPOT
   * else ITL; output tokens/s else requests/s.
   */
  groups: Partial<Record<Group, number>>;
  /** TTFT's target covers light and mid load only (see ttftTargeted). */
  ttftTargeted: boolean;
  /** Why the point could not be simulated, if it could not. */
  skipped?: string;
  /** The simulated engine refused to start (EngineStartError), with its message. */
  refused?: string;
}

export function loadPoints(path: string): ValidationPoint[] {
  return JSON.parse(readFileSync(path, 'utf8')) as ValidationPoint[];
}

/** What a point's engine settings set, in the simulator's option names. */
const SETTINGS: Record<string, keyof EngineModelOptions> = {
  maxNumSeqs: 'maxNumSeqs',
  maxNumBatchedTokens: 'maxNumBatchedTokens',
  chunkedPrefill: 'chunkedPrefill',
  numSchedulerSteps: 'numSchedulerSteps',
  gpuMemoryUtilization: 'gpuMemoryUtilization',
  prefixCaching: 'prefixCaching',
  maxModelLen: 'maxModelLen',
  blockSize: 'blockSize',
};

/**
 * Checkpoints whose config.json the repository holds (test/fixtures/hf-configs), by model id in
 * lower case. A point served from one is simulated from its config, as a user would pass it with
 * `--model`, so that what its quantization_config keeps unquantised (src/memory/quantIgnore.ts)
 * is counted: read as all-fp8, Meta's FP8 405B comes out 16 % light and the KV pool beside it
 * about twice too large. Meta made its base FP8 release by the same recipe as the instruct one
 * (the Llama 3 paper, "FP8 quantization": the feed-forward layers but the first and last
 * layers' quantised, self-attention not), so both ids read the one config.
 */
const CHECKPOINT_CONFIGS: Record<string, string> = {
  'meta-llama/llama-3.1-405b-instruct-fp8': 'llama-3.1-405b-instruct-fp8-fbgemm.json',
  'meta-llama/llama-3.1-405b-fp8': 'llama-3.1-405b-instruct-fp8-fbgemm.json',
};

/** The model and weights a point's checkpoint config gives, where the repository holds it. */
function checkpointModel(
  p: ValidationPoint,
): { model: ModelSpec; weights?: WeightFormat } | undefined {
  const file = CHECKPOINT_CONFIGS[p.model.id.toLowerCase()];
  if (!file) return undefined;
  const read = readHfConfig(join(REPO, 'test/fixtures/hf-configs', file));
  return { model: read.spec, weights: read.weights };
}

/** The engine a user would start for the point, or why it cannot be. */
export function engineOptions(p: ValidationPoint): EngineModelOptions | string {
  const checkpoint = checkpointModel(p);
  const model = checkpoint?.model ?? (p.model.preset ? findModelPreset(p.model.preset) : undefined);
  if (!model) return `no model preset for ${p.model.id}`;
  const gpu = findGpuPreset(p.hardware.gpu);
  if (!gpu) return `no GPU preset ${p.hardware.gpu}`;
  if (!isPersonalityId(p.engine.personality)) return `no personality ${p.engine.personality}`;
  const stated = parseWeightFormat(p.model.weights);
  if (!stated) return `weights ${p.model.weights}`;
  // The checkpoint's own format where it is the one the point states.
  const weights = checkpoint?.weights?.dtype === stated.dtype ? checkpoint.weights : stated;
  const kv = p.model.kvCache ?? (weights.dtype === 'fp16' ? 'fp16' : 'bf16');
  const options: Record<string, unknown> = {
    model,
    gpu,
    personality: p.engine.personality,
    weights,
    kvDtype: kv === 'fp8' ? 'fp8' : kv === 'fp16' ? 'fp16' : 'bf16',
    tp: p.hardware.tp,
    dp: p.hardware.dp ?? 1,
  };
  for (const [key, option] of Object.entries(SETTINGS)) {
    const value = p.engine.settings?.[key];
    if (value !== null && value !== undefined) options[option] = value;
  }
  // vLLM V1 releases differ in start-up memory (`vllmRelease`), SGLang's in its scheduler loop
  // (`sglangOverlap`), and both vLLM personalities' validated ranges are per release: the
  // stated release, as a user would give it with --engine-version.
  const version = p.engine.version ? parseEngineVersion(p.engine.version) : undefined;
  const versioned = ['vllm-v1', 'vllm-v0', 'sglang'].includes(p.engine.personality);
  if (versioned && version) options.engineVersion = version.join('.');
  // Who sent the requests (`clientPathOf`); a front end the point states is its whole path.
  options.clientPath = clientPathOf(p);
  const frontendMs = p.engine.settings?.frontendLatencyMs;
  if (typeof frontendMs === 'number') options.efficiency = { frontendLatencyS: frontendMs / 1e3 };
  // An entry point handed token ids tokenises nothing; its hops to the engine's process stay:
  // what a point's entry point says (round three), and vLLM's benchmark_latency.py, whose
  // prompts are random token ids (`dummy_prompt_token_ids`).
  else if (
    /token ids given|token-id prompts/.test(p.engine.entryPoint ?? '') ||
    /benchmark_latency/.test(`${p.engine.name} ${p.source.quote ?? ''}`)
  ) {
    options.efficiency = { tokenizeSPerPromptToken: 0 };
  }
  // A user sets max_model_len to fit the workload where the model's context is longer; a
  // start-up log without one had the model's.
  if (options.maxModelLen === undefined && p.load.kind === 'startup') {
    options.maxModelLen = model.maxContext;
  }
  if (options.maxModelLen === undefined) {
    const longest = maxLength(p);
    options.maxModelLen = Math.min(model.maxContext, Math.max(4096, longest));
  }
  return options as unknown as EngineModelOptions;
}

/**
 * Who sent a point's requests, from what its source names (its engine settings' `clientPath`
 * where a point states it): the engine's own Python entry point (vLLM's benchmark_latency.py and
 * benchmark_throughput.py run the offline LLM class, AsyncLLMEngine, sgl.Engine and SGLang's
 * bench_offline_throughput), which tokenises and hands requests to the engine's process without
 * an HTTP layer; token ids straight to the scheduler (trtllm-bench, gptSessionBenchmark and
 * gptManagerBenchmark run C++ or pre-tokenised data sets; a stated front end of 0 says the
 * same); else a client of the HTTP server.
 */
export function clientPathOf(p: ValidationPoint): ClientPath {
  const stated = p.engine.settings?.clientPath;
  if (typeof stated === 'string' && (CLIENT_PATHS as readonly string[]).includes(stated)) {
    return stated as ClientPath;
  }
  if (p.engine.settings?.frontendLatencyMs === 0) return 'none';
  const said = `${p.engine.name} ${p.engine.entryPoint ?? ''} ${p.source.quote ?? ''}`;
  // TensorRT-LLM's ModelRunner (examples/run.py) drives the C++ runtime in the caller's process
  // on token ids, with no executor or proxy between.
  if (
    /trtllm-bench|gptSessionBenchmark|gptManagerBenchmark|bench_one_batch\b|ModelRunner\.generate/.test(
      said,
    )
  ) {
    return 'none';
  }
  if (
    /benchmark_latency|benchmark_throughput|offline LLM|LLM\.generate|AsyncLLMEngine|sgl\.Engine|bench_offline_throughput/.test(
      said,
    )
  ) {
    return 'engine';
  }
  return 'http';
}

/**
 * The lengths a user would ask for: the stated ones (a mean stands for fixed lengths, except for
 * ShareGPT, whose spread matters at load: the `sharegpt` preset's shape at the stated mean), or
 * the `sharegpt` preset where the source names the data set only.
 */
function lengths(p: ValidationPoint): { input: LengthDistribution; output: LengthDistribution } {
  const w = p.workload;
  const sharegpt = findScenario('sharegpt') as Scenario;
  if (w.lengths === 'sharegpt') return { input: sharegpt.input, output: sharegpt.output };
  // Only vLLM's ShareGPT_V3 sample has the preset's shape; other ShareGPT filters differ.
  const isShareGpt = /sharegpt_v3/i.test(w.dataset ?? '');
  const of = (stated: { kind: string; value: number }, preset: LengthDistribution) =>
    isShareGpt && stated.kind === 'mean' && preset.kind === 'lognormal'
      ? parseLengthDistribution(
          `lognormal:${stated.value}:${stated.value}:${preset.min ?? 1}:${preset.max ?? ''}`,
        )
      : w.rangeRatio
        ? {
            kind: 'uniform' as const,
            min: Math.floor(stated.value * (1 - w.rangeRatio)),
            max: Math.ceil(stated.value * (1 + w.rangeRatio)),
          }
        : parseLengthDistribution(String(Math.round(stated.value)));
  return {
    input: of(w.inputTokens, sharegpt.input),
    output: of(w.outputTokens, sharegpt.output),
  };
}

function maxLength(p: ValidationPoint): number {
  const { input, output } = lengths(p);
  let longest = 0;
  for (let id = 0; id < distinctRequests(p); id++) {
    longest = Math.max(
      longest,
      sampleLength(input, streamSeed(1, 'input'), id) +
        sampleLength(output, streamSeed(1, 'output'), id),
    );
  }
  return longest;
}

/** Requests a point sends: each pass of its distinct requests. */
function requestCount(p: ValidationPoint): number {
  return distinctRequests(p) * (p.workload.passes ?? 1);
}

/** Distinct requests: the source's count, else enough for the load to settle. */
function distinctRequests(p: ValidationPoint): number {
  if (p.workload.requests) return p.workload.requests;
  switch (p.load.kind) {
    case 'batch1':
      return 20;
    case 'concurrency':
      return Math.max(200, 10 * (p.load.value ?? 1));
    default:
      return 1000;
  }
}

function loadOf(p: ValidationPoint): LoadSpec {
  switch (p.load.kind) {
    case 'batch1':
      return { mode: 'closed', concurrency: 1 };
    case 'concurrency':
      return { mode: 'closed', concurrency: p.load.value ?? 1 };
    case 'rate':
      return { mode: 'open', rate: p.load.value ?? 1, arrival: p.load.arrival ?? 'poisson' };
    case 'offline':
      // Every request at once, as trtllm-bench and MLPerf offline submit them.
      return { mode: 'closed', concurrency: distinctRequests(p) };
    case 'startup':
      throw new Error(`${p.id}: a start-up point has no load`);
  }
}

/**
 * Variable-length synthetic requests with distinct prompts (no shared prefixes); where the source
 * sends them in several passes, a later pass repeats the first's prompts and lengths.
 */
function workload(p: ValidationPoint): (id: number) => RequestSpec {
  const { input, output } = lengths(p);
  const distinct = distinctRequests(p);
  const repeated = (p.workload.passes ?? 1) > 1;
  return (id) => {
    const k = id % distinct;
    const inputTokens = sampleLength(input, streamSeed(1, 'input'), k);
    let prompt: string | undefined;
    return {
      get prompt(): string {
        if (prompt === undefined) {
          prompt = `r${k}`;
          for (let i = 1; i < inputTokens; i++) prompt += ` ${WORDS[(k * 7919 + i * 31) % 97]}`;
        }
        return prompt;
      },
      promptWords: inputTokens,
      // "r<k>" leads every prompt: none shares a block with another, but its own repeats do.
      ...(repeated ? {} : { distinctPrefixTokens: 1 }),
      requestedInputTokens: inputTokens,
      requestedOutputTokens: sampleLength(output, streamSeed(1, 'output'), k),
    };
  };
}

/** The source's client sent chat requests (`vllm bench serve --backend openai-chat`). */
function chatEndpoint(p: ValidationPoint): boolean {
  return /--backend openai-chat|\/v1\/chat\/completions/.test(p.source.quote ?? '');
}

/** TTFT is targeted at light and mid load: batch-1, or a published TTFT under a second. */
function ttftTargeted(p: ValidationPoint): boolean {
  if (p.load.kind === 'batch1') return true;
  if (p.load.kind === 'offline') return false;
  const t = p.measured.ttftMs;
  const ttft = t?.mean ?? t?.median;
  return ttft !== null && ttft !== undefined && ttft < 1000;
}

/** `efficiency` overrides the model's factors (to set a free constant on the fit set). */
export function simulatePoint(p: ValidationPoint, efficiency?: Partial<Efficiency>): PointResult {
  const built = p.skip ?? engineOptions(p);
  const options =
    typeof built === 'string' || !efficiency
      ? built
      : { ...built, efficiency: { ...built.efficiency, ...efficiency } };
  if (typeof options === 'string') {
    return { point: p, comparisons: [], groups: {}, ttftTargeted: false, skipped: options };
  }
  if (p.load.kind === 'startup') return startupPoint(p, options);
  let engine: EngineModel;
  try {
    engine = new EngineModel(options);
  } catch (err) {
    if (!(err instanceof EngineStartError)) throw err;
    return { point: p, comparisons: [], groups: {}, ttftTargeted: false, refused: err.message };
  }
  const records: RequestRecord[] = [];
  const load = loadOf(p);
  simulateRun({
    engine,
    load,
    requests: requestCount(p),
    warmupRequests: 0,
    seed: 1,
    endpoint: chatEndpoint(p) ? 'chat' : 'completions',
    nextRequest: workload(p),
    onRecord: (r) => records.push(r),
  });
  const s = summarize(records, { load });
  const comparisons: Comparison[] = [];
  for (const [metric, [read, simulate]] of Object.entries(METRICS) as [Metric, Readers][]) {
    const value = read(p.measured);
    if (value === null || value === undefined || value <= 0) continue;
    const sim = simulate(s);
    comparisons.push({ metric, published: value, simulated: sim, error: (sim - value) / value });
  }
  const first = (...metrics: Metric[]) =>
    metrics.map((x) => comparisons.find((c) => c.metric === x)).find((c) => c !== undefined)?.error;
  const groups: Partial<Record<Group, number>> = {};
  const ttft = first('ttftMs.mean', 'ttftMs.median');
  const tpot = first('tpotMs.mean', 'itlMs.mean', 'tpotMs.median', 'itlMs.median');
  // Output tokens/s; where a source gives only requests/s (chart labels), that instead; where
  // it gives only end-to-end latency at a fixed batch (benchmark_latency), the rate that time
  // implies: tokens / e2e, so the error is published / simulated - 1.
  const e2e = comparisons.find((c) => c.metric === 'e2eMs.mean');
  const throughput =
    first('outputTokensPerS', 'requestsPerS') ??
    (e2e ? e2e.published / e2e.simulated - 1 : undefined);
  if (ttft !== undefined) groups.ttft = ttft;
  if (tpot !== undefined) groups.tpot = tpot;
  if (throughput !== undefined) groups.throughput = throughput;
  return { point: p, comparisons, groups, ttftTargeted: ttftTargeted(p) };
}

/**
 * A start-up log: the simulated KV pool against the printed one (GiB where printed, else
 * tokens), whether or not the engine then starts (a log may end in vLLM's refusal: the pool
 * it names is still the one compared, and `refused` says the simulator refused too).
 */
function startupPoint(p: ValidationPoint, options: EngineModelOptions): PointResult {
  const c = resolveEngineConfig(options);
  // The pool does not depend on max_model_len beyond the step budget resolved from it.
  const plan = planVllmMemory({ ...c, maxModelLen: 1 });
  let refused: string | undefined;
  try {
    new EngineModel(options);
  } catch (err) {
    if (!(err instanceof EngineStartError)) throw err;
    refused = err.message;
  }
  const kv = p.measured.kvPool ?? {};
  const comparisons: Comparison[] = [];
  const compare = (metric: Metric, published: number | null | undefined, simulated: number) => {
    if (published === null || published === undefined || published <= 0) return;
    comparisons.push({ metric, published, simulated, error: (simulated - published) / published });
  };
  compare('kvPoolGib', kv.gib, plan.kvPoolBytes / 2 ** 30);
  const tokens =
    kv.tokens ?? (kv.gpuBlocks && kv.blockSizeTokens ? kv.gpuBlocks * kv.blockSizeTokens : null);
  compare('kvPoolTokens', tokens, plan.kvTokens);
  const first = comparisons[0];
  return {
    point: p,
    comparisons,
    groups: first ? { kvPool: first.error } : {},
    ttftTargeted: false,
    ...(refused ? { refused } : {}),
  };
}

/** Median of absolute errors, or undefined for none. */
export function medianAbs(errors: readonly number[]): number | undefined {
  if (errors.length === 0) return undefined;
  const sorted = errors.map(Math.abs).sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The signed middle error, as reported beside the median absolute one (the upper middle). */
export function signedMedian(errors: readonly number[]): number | undefined {
  if (errors.length === 0) return undefined;
  return [...errors].sort((a, b) => a - b)[errors.length >> 1];
}

/** The errors of one group over a set of results (TTFT: only where it is targeted). */
export function groupErrors(results: readonly PointResult[], group: Group): number[] {
  const errors: number[] = [];
  for (const r of results) {
    const e = r.groups[group];
    if (e === undefined || (group === 'ttft' && !r.ttftTargeted)) continue;
    errors.push(e);
  }
  return errors;
}

/** The targets on the validation set: median absolute error per group. */
export const TARGETS: Record<Group, number> = {
  ttft: 0.25,
  tpot: 0.15,
  throughput: 0.15,
  kvPool: 0.05,
};
/** No point beyond this without a stated reason (`knownMiss`). */
export const POINT_LIMIT = 0.5;
