import { parseFlagNumber } from '../flagNumber.js';
import { KV_DTYPES, type KvDtype, parseWeightFormat, type WeightFormat } from '../memory/dtype.js';
import { loadGpuSpec } from '../memory/gpuSpec.js';
import { findGpuPreset, GPU_PRESETS, type GpuSpec } from '../memory/hardware.js';
import { type HfModel, resolveModel } from '../memory/hfConfig.js';
import type { ModelSpec } from '../memory/model.js';
import {
  type CalibrationFile,
  calibratedValues,
  FIT_KEYS,
  type FitKey,
  measuredStepsOf,
  readCalibrationFile,
  stepsMismatch,
  transferNotes,
} from './calibrationFile.js';
import { type CalibrationWarning, calibrationFileNotices } from './calibrationWarnings.js';
import { ENGINE_LIMITS } from './engineLimits.js';
import type { EngineModelOptions } from './engineModel.js';
import {
  CLIENT_PATHS,
  type ClientPath,
  DEFAULT_PERSONALITY,
  engineVersionProblem,
  isPersonalityId,
  LOAD_BALANCERS,
  type LoadBalancer,
  PERSONALITY_IDS,
  type PersonalityId,
  VLLM_0110_CHAT_TEMPLATE_S,
} from './personality.js';
import { DEFAULT_EFFICIENCY, STEP_OVERHEAD_PER_LAYER_S } from './roofline.js';
import { type OutsideValidation, outsideValidation } from './validatedRange.js';

/**
 * The simulated engine's options, shared by `infergauge sim` and `infergauge run` (which starts
 * the simulator when it has no --url, or runs in virtual time with --simulate), and their
 * validation into EngineModelOptions. Names follow vLLM's engine arguments where vLLM has one;
 * the command line turns this table into its flags.
 */
export interface FlagSpec {
  flag: string;
  key: string;
  help: string;
  kind: 'number' | 'string' | 'boolean';
  min?: number;
  max?: number;
  integer?: boolean;
  /**
   * An engine's own name for a shared setting (SGLang's `--mem-fraction-static` for the memory
   * fraction, ...): valid only with these personalities, it sets `sets`.
   */
  native?: { personalities: readonly PersonalityId[]; sets: string; off?: true };
}

/** A switch named `--no-...` sets its key false (commander's negation). */
export const isNegation = (f: FlagSpec): boolean => f.flag.startsWith('--no-');

/** Whether a switch was given: a negation when its key is false, any other when true. */
const switchGiven = (f: FlagSpec, value: unknown): boolean =>
  isNegation(f) ? value === false : value === true;

const e = DEFAULT_EFFICIENCY;
export const DEFAULT_SIM_GPU = 'h100';
export const DEFAULT_SIM_MODEL_PRESET = 'llama-3-8b';

export const ENGINE_FLAGS: readonly FlagSpec[] = [
  {
    flag: '--gpu <id>',
    key: 'gpu',
    kind: 'string',
    help: `GPU preset (default: ${DEFAULT_SIM_GPU}; see sim --list)`,
  },
  {
    flag: '--gpu-spec <file>',
    key: 'gpuSpec',
    kind: 'string',
    help: 'a GPU the presets lack, described in a YAML or JSON file (instead of --gpu)',
  },
  {
    flag: '--engine-personality <id>',
    key: 'enginePersonality',
    kind: 'string',
    help: `whose defaults, memory rule, scheduler and costs: ${PERSONALITY_IDS.join(', ')} (default: ${DEFAULT_PERSONALITY})`,
  },
  {
    flag: '--engine-version <x.y.z>',
    key: 'engineVersion',
    kind: 'string',
    help: "vllm-v1: the vLLM release, where start-up memory differs (the profiling sampler: FlashInfer's to 0.11.0, PyTorch's sort 0.11.1-0.16, fused again from 0.17; CUDA graphs and a 0.92 default memory share from 0.21); vllm-v0: the release, for the validated range only; sglang: the release (the overlap scheduler, whose first token waits for the next step, from 0.3.6) (default: the latest)",
  },
  {
    flag: '--tp <n>',
    key: 'tp',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'tensor-parallel GPUs (default: 1)',
  },
  {
    flag: '--dp <n>',
    key: 'dp',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'data-parallel replicas, each on its own --tp GPUs, behind one front end (default: 1)',
  },
  {
    flag: '--load-balancer <policy>',
    key: 'loadBalancer',
    kind: 'string',
    help: `how the front end picks a replica: ${LOAD_BALANCERS.join(', ')} (default: round-robin)`,
  },
  {
    flag: '--dtype <fmt>',
    key: 'dtype',
    kind: 'string',
    help: "weight format: bf16, fp16, fp8, int8, int4 (= awq, gptq; -g64 sets the group size) (default: the config's, else bf16)",
  },
  {
    flag: '--kv-cache-dtype <fmt>',
    key: 'kvCacheDtype',
    kind: 'string',
    help: `KV cache format: ${KV_DTYPES.join(', ')} (default: bf16)`,
  },
  {
    flag: '--gpu-memory-utilization <f>',
    key: 'gpuMemoryUtilization',
    kind: 'number',
    min: 0.05,
    max: 1,
    help: 'share of GPU memory vLLM may use (default: 0.92 from vLLM 0.21, 0.9 before)',
  },
  {
    flag: '--max-model-len <n>',
    key: 'maxModelLen',
    kind: 'number',
    integer: true,
    min: 1,
    help: "longest prompt + output (default: the model's context)",
  },
  {
    flag: '--max-num-seqs <n>',
    key: 'maxNumSeqs',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'most sequences per step (default: 1024 on >= 70 GiB GPUs, else 256)',
  },
  {
    flag: '--max-num-batched-tokens <n>',
    key: 'maxNumBatchedTokens',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'token budget per step (default: 8192 on >= 70 GiB GPUs, else 2048)',
  },
  {
    flag: '--block-size <n>',
    key: 'blockSize',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'KV block size in tokens (default: 16)',
  },
  {
    flag: '--no-chunked-prefill',
    key: 'chunkedPrefill',
    kind: 'boolean',
    help: 'prefill whole prompts in one step',
  },
  {
    flag: '--enable-prefix-caching',
    key: 'enablePrefixCaching',
    kind: 'boolean',
    help: "reuse KV blocks of identical prompt prefixes (default: the engine's: on for vllm-v1, sglang and llamacpp's per-slot cache)",
  },
  {
    flag: '--no-enable-prefix-caching',
    key: 'enablePrefixCaching',
    kind: 'boolean',
    help: 'turn the prefix cache off (vLLM V1, SGLang and llama.cpp have it on)',
  },
  {
    flag: '--num-gpu-blocks-override <n>',
    key: 'numGpuBlocksOverride',
    kind: 'number',
    integer: true,
    min: 1,
    help: "KV blocks, instead of the memory plan's",
  },
  {
    flag: '--non-kv-overhead-gb <gb>',
    key: 'nonKvOverheadGb',
    kind: 'number',
    ...ENGINE_LIMITS.nonKvOverheadGb,
    help: 'measured activations + non-torch + CUDA graphs, GB (default: modelled)',
  },
  {
    flag: '--calibration <file>',
    key: 'calibration',
    kind: 'string',
    help: 'calibration.json from `infergauge calibrate`: the fitted efficiencies and overheads (flags given beside it win)',
  },
  {
    flag: '--mbu <f>',
    key: 'mbu',
    kind: 'number',
    ...ENGINE_LIMITS.mbu,
    help: `achieved share of memory bandwidth (default: ${e.mbu})`,
  },
  {
    flag: '--mfu <f>',
    key: 'mfu',
    kind: 'number',
    ...ENGINE_LIMITS.mfu,
    help: `best share of the 16-bit tensor peak (default: ${e.mfuMax16})`,
  },
  {
    flag: '--mfu-8bit <f>',
    key: 'mfu8bit',
    kind: 'number',
    ...ENGINE_LIMITS.mfu8bit,
    help: `best share of the fp8/int8 peak (default: ${e.mfuMax8})`,
  },
  {
    flag: '--mfu-half-tokens <n>',
    key: 'mfuHalfTokens',
    kind: 'number',
    ...ENGINE_LIMITS.mfuHalfTokens,
    help: `tokens per step at half the best MFU, for 128-row GEMM tiles (default: ${e.mfuHalfTokens})`,
  },
  {
    flag: '--step-overhead-ms <ms>',
    key: 'stepOverheadMs',
    kind: 'number',
    ...ENGINE_LIMITS.stepOverheadMs,
    help: `fixed time per engine step (default: ${(STEP_OVERHEAD_PER_LAYER_S * 1e6).toFixed(0)} us per layer, ${e.stepOverheadS * 1e3} for 32 layers)`,
  },
  {
    flag: '--per-seq-overhead-us <us>',
    key: 'perSeqOverheadUs',
    kind: 'number',
    ...ENGINE_LIMITS.perSeqOverheadUs,
    help: `time per sequence per step (default: ${e.perSeqOverheadS * 1e6})`,
  },
  {
    flag: '--frontend-latency-ms <ms>',
    key: 'frontendLatencyMs',
    kind: 'number',
    ...ENGINE_LIMITS.frontendLatencyMs,
    help: `the request path's fixed part, the API server's and the engine's per-request CPU (default: the personality's, ${(e.frontendLatencyS * 1e3).toFixed(2)} for vLLM); given, the whole request path, arrival to scheduler (--engine-hop-ms and --tokenize-us-per-token then 0 unless given)`,
  },
  {
    flag: '--engine-hop-ms <ms>',
    key: 'engineHopMs',
    kind: 'number',
    ...ENGINE_LIMITS.engineHopMs,
    help: `the request's hops to the engine's process and its first output back, on the --client-path taken (default: the personality's, ${(e.engineHopS * 1e3).toFixed(2)} for vLLM V1)`,
  },
  {
    flag: '--tokenize-us-per-token <us>',
    key: 'tokenizeUsPerToken',
    kind: 'number',
    ...ENGINE_LIMITS.tokenizeUsPerToken,
    help: `tokenising the prompt, per prompt token (default: ${e.tokenizeSPerPromptToken * 1e6})`,
  },
  {
    flag: '--client-path <path>',
    key: 'clientPath',
    kind: 'string',
    help: `who sends the requests: ${CLIENT_PATHS.join(', ')} (http: the OpenAI API; engine: the engine's own Python entry point, with its own hops; none: token ids to the scheduler) (default: http)`,
  },
  {
    flag: '--frontend-chat-cpu-ms <ms>',
    key: 'frontendChatCpuMs',
    kind: 'number',
    ...ENGINE_LIMITS.frontendChatCpuMs,
    help: `CPU time per chat request on the API server's one loop, one at a time (default: 0; ${VLLM_0110_CHAT_TEMPLATE_S * 1e3} for vllm-v1 0.11.0)`,
  },
  {
    flag: '--num-scheduler-steps <n>',
    key: 'numSchedulerSteps',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'vllm-v0 multi-step scheduling: decode steps per schedule (default: 1)',
    native: { personalities: ['vllm-v0'], sets: 'numSchedulerSteps' },
  },
  {
    flag: '--mem-fraction-static <f>',
    key: 'memFractionStatic',
    kind: 'number',
    min: 0.05,
    max: 1,
    help: "sglang: share of GPU memory for weights and KV pool (default: SGLang's by GPU size)",
    native: { personalities: ['sglang'], sets: 'gpuMemoryUtilization' },
  },
  {
    flag: '--chunked-prefill-size <n>',
    key: 'chunkedPrefillSize',
    kind: 'number',
    integer: true,
    min: 1,
    help: "sglang: prefill tokens per step (default: SGLang's by GPU size)",
    native: { personalities: ['sglang'], sets: 'maxNumBatchedTokens' },
  },
  {
    flag: '--disable-radix-cache',
    key: 'disableRadixCache',
    kind: 'boolean',
    help: 'sglang: no radix (prefix) cache (default: on)',
    native: { personalities: ['sglang'], sets: 'prefixCaching', off: true },
  },
  {
    flag: '--max-running-requests <n>',
    key: 'maxRunningRequests',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'sglang: most running requests (default: from the KV pool)',
    native: { personalities: ['sglang'], sets: 'maxNumSeqs' },
  },
  {
    flag: '--kv-cache-free-gpu-mem-fraction <f>',
    key: 'kvCacheFreeGpuMemFraction',
    kind: 'number',
    min: 0.01,
    max: 1,
    help: 'trtllm: share of the memory free after loading that the KV pool takes (default: 0.9)',
    native: { personalities: ['trtllm'], sets: 'gpuMemoryUtilization' },
  },
  {
    flag: '--max-batch-size <n>',
    key: 'maxBatchSize',
    kind: 'number',
    integer: true,
    min: 1,
    help: "trtllm: most requests in a batch (default: the engine's)",
    native: { personalities: ['trtllm'], sets: 'maxNumSeqs' },
  },
  {
    flag: '--max-num-tokens <n>',
    key: 'maxNumTokens',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'trtllm: most tokens per step (default: 8192)',
    native: { personalities: ['trtllm'], sets: 'maxNumBatchedTokens' },
  },
  {
    flag: '--enable-chunked-context',
    key: 'enableChunkedContext',
    kind: 'boolean',
    help: 'trtllm: split long contexts over steps (default: whole contexts)',
    native: { personalities: ['trtllm'], sets: 'chunkedPrefill' },
  },
  {
    flag: '--parallel <n>',
    key: 'parallel',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'llamacpp: server slots, each a sequence (default: 4 sharing one KV buffer)',
    native: { personalities: ['llamacpp'], sets: 'maxNumSeqs' },
  },
  {
    flag: '--ctx-size <n>',
    key: 'ctxSize',
    kind: 'number',
    integer: true,
    min: 1,
    help: "llamacpp: KV cells in all, split evenly over the slots (default: the model's context)",
    native: { personalities: ['llamacpp'], sets: 'ctxTokens' },
  },
  {
    flag: '--batch-size <n>',
    key: 'batchSize',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'llamacpp: tokens per iteration, n_batch (default: 2048)',
    native: { personalities: ['llamacpp'], sets: 'maxNumBatchedTokens' },
  },
  {
    flag: '--ubatch-size <n>',
    key: 'ubatchSize',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'llamacpp: tokens per forward pass, n_ubatch (default: 512)',
    native: { personalities: ['llamacpp'], sets: 'ubatchSize' },
  },
  {
    flag: '--cache-ram <MiB>',
    key: 'cacheRam',
    kind: 'number',
    integer: true,
    min: -1,
    help: 'llamacpp: host-memory prompt cache in MiB, 0 none, -1 no limit (default: 8192)',
    native: { personalities: ['llamacpp'], sets: 'cacheRamMiB' },
  },
  {
    flag: '--kv-unified',
    key: 'kvUnified',
    kind: 'boolean',
    help: 'llamacpp: one KV buffer for all slots (default: on without --parallel, else one per slot)',
    native: { personalities: ['llamacpp'], sets: 'kvUnified' },
  },
];

/**
 * The simulated engine, described with typed values: what the engine flags say, as a program
 * says it. Keys are the flags' (`tp` is `--tp`, `enablePrefixCaching` is
 * `--enable-prefix-caching`); unset keys take the personality's defaults. The engine's own
 * names for shared settings (`memFractionStatic`, ...) apply only with their personality.
 */
export interface SimEngineSettings {
  /** A preset id (see MODEL_PRESETS), a Hugging Face config.json (file or directory), or a spec. */
  model?: string | ModelSpec;
  /** A GPU preset id (see GPU_PRESETS) or a spec (default: h100). */
  gpu?: string | GpuSpec;
  /** A YAML or JSON file describing the GPU (instead of `gpu`). */
  gpuSpec?: string;
  enginePersonality?: PersonalityId;
  /** vllm-v1: the vLLM release (`0.11.0`); the latest where absent. */
  engineVersion?: string;
  tp?: number;
  dp?: number;
  loadBalancer?: LoadBalancer;
  /** Weights: 'bf16', 'fp16', 'fp8', 'int8', 'int4' (= 'awq', 'gptq'; 'int4-g64'), or a format. */
  dtype?: string | WeightFormat;
  kvCacheDtype?: KvDtype;
  gpuMemoryUtilization?: number;
  maxModelLen?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  blockSize?: number;
  /** false: prefill whole prompts in one step (`--no-chunked-prefill`). */
  chunkedPrefill?: boolean;
  enablePrefixCaching?: boolean;
  numGpuBlocksOverride?: number;
  nonKvOverheadGb?: number;
  /** A calibration.json (`infergauge calibrate`): its values where the flags give none. */
  calibration?: string;
  mbu?: number;
  mfu?: number;
  mfu8bit?: number;
  mfuHalfTokens?: number;
  stepOverheadMs?: number;
  perSeqOverheadUs?: number;
  frontendLatencyMs?: number;
  engineHopMs?: number;
  tokenizeUsPerToken?: number;
  /** Who sends the requests (CLIENT_PATHS). */
  clientPath?: ClientPath;
  frontendChatCpuMs?: number;
  /** vllm-v0 */
  numSchedulerSteps?: number;
  /** sglang */
  memFractionStatic?: number;
  chunkedPrefillSize?: number;
  maxRunningRequests?: number;
  disableRadixCache?: boolean;
  /** trtllm */
  kvCacheFreeGpuMemFraction?: number;
  maxBatchSize?: number;
  maxNumTokens?: number;
  enableChunkedContext?: boolean;
  /** llamacpp */
  parallel?: number;
  ctxSize?: number;
  batchSize?: number;
  ubatchSize?: number;
  kvUnified?: boolean;
  cacheRam?: number;
}

/** The entries of `from` named in `keys` that are set. */
function pick(from: Record<string, number | boolean>, keys: readonly string[]) {
  const out: Record<string, number | boolean> = {};
  for (const k of keys) if (from[k] !== undefined) out[k] = from[k];
  return out as Partial<EngineModelOptions>;
}

/** The engine flags present in parsed options, as they were given (for the manifest and child). */
export function engineFlagArgs(options: Record<string, unknown>): string[] {
  const args: string[] = [];
  for (const f of ENGINE_FLAGS) {
    const value = options[f.key];
    const name = flagName(f);
    if (f.kind === 'boolean') {
      if (switchGiven(f, value)) args.push(name);
    } else if (value !== undefined) args.push(name, String(value));
  }
  return args;
}

/** Whether an option key is one of the engine flags (`gpu`, `tp`, ...). */
export function isEngineFlag(key: string): boolean {
  return ENGINE_FLAGS.some((f) => f.key === key);
}

/** A flag's name without its value (`--tp`). */
export const flagName = (f: { flag: string }): string => f.flag.split(' ')[0] as string;

/**
 * Reads the engine flags as the command line parsed them (strings; booleans for the switches)
 * into typed settings, with a problem naming each flag whose value is no number in its range.
 * Flags left out or refused are not set; `resolveEngine` checks the rest.
 */
export function engineSettingsFromFlags(flags: Record<string, unknown>): {
  settings: SimEngineSettings;
  problems: string[];
} {
  const settings: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const f of ENGINE_FLAGS) {
    const value = flags[f.key];
    if (value === undefined) continue;
    if (f.kind === 'boolean') settings[f.key] = value === true || value === 'true';
    else if (f.kind === 'string') settings[f.key] = String(value);
    else {
      const n = numberProblem(f, value);
      if (typeof n === 'number') settings[f.key] = n;
      else problems.push(n.problem);
    }
  }
  return { settings: settings as SimEngineSettings, problems };
}

/** The flag's number, or a problem naming the flag and what it accepts. */
function numberProblem(f: FlagSpec, value: unknown): number | { problem: string } {
  const text = String(value);
  const inRange = parseFlagNumber(value, f);
  if ('value' in inRange) return inRange.value;
  if ('problem' in parseFlagNumber(value, { integer: f.integer })) {
    return {
      problem: `${flagName(f)} must be a ${f.integer ? 'whole number' : 'number'} (got "${text}")`,
    };
  }
  return {
    problem: `${flagName(f)} must be between ${f.min ?? '-inf'} and ${f.max ?? 'inf'} (got ${text})`,
  };
}

/**
 * Builds the engine options from `--model` and the engine flags (strings, as the command line
 * parsed them), or returns every problem, each naming the flag and what it accepts: the flags
 * read by `engineSettingsFromFlags`, then checked and resolved by `resolveEngine`.
 */
export function engineFromFlags(
  model: string | undefined,
  flags: Record<string, unknown>,
): {
  engine?: EngineModelOptions;
  problems: string[];
  warnings: string[];
  calibration?: ReturnType<typeof resolveEngine>['calibration'];
  outsideValidation?: OutsideValidation;
  calibrated?: EngineCalibration;
} {
  const read = engineSettingsFromFlags(flags);
  const resolved = resolveEngine({
    ...read.settings,
    ...(model !== undefined ? { model } : {}),
  });
  const problems = [...read.problems, ...resolved.problems];
  return {
    ...(problems.length === 0 && resolved.engine ? { engine: resolved.engine } : {}),
    problems,
    warnings: resolved.warnings,
    ...(resolved.outsideValidation ? { outsideValidation: resolved.outsideValidation } : {}),
    ...(resolved.calibration ? { calibration: resolved.calibration } : {}),
    ...(resolved.calibrated ? { calibrated: resolved.calibrated } : {}),
  };
}

/** An engine built on a calibration: the file, and the fitted values that flags replaced. */
export interface EngineCalibration {
  path: string;
  file: CalibrationFile;
  /** Fit keys given as flags beside --calibration: theirs win, taken as exact in predictions. */
  flagKeys: FitKey[];
}

/** The efficiency flags' values (`mbu`, `stepOverheadMs`, ...) in the engine's units (seconds). */
export function efficiencyOf(values: {
  mbu?: number;
  mfu?: number;
  mfu8bit?: number;
  mfuHalfTokens?: number;
  stepOverheadMs?: number;
  perSeqOverheadUs?: number;
  frontendLatencyMs?: number;
  engineHopMs?: number;
  tokenizeUsPerToken?: number;
  frontendChatCpuMs?: number;
}): Partial<typeof DEFAULT_EFFICIENCY> {
  const e: Partial<typeof DEFAULT_EFFICIENCY> = {};
  if (values.mbu !== undefined) e.mbu = values.mbu;
  if (values.mfu !== undefined) e.mfuMax16 = values.mfu;
  if (values.mfu8bit !== undefined) e.mfuMax8 = values.mfu8bit;
  if (values.mfuHalfTokens !== undefined) e.mfuHalfTokens = values.mfuHalfTokens;
  if (values.stepOverheadMs !== undefined) e.stepOverheadS = values.stepOverheadMs / 1e3;
  if (values.perSeqOverheadUs !== undefined) e.perSeqOverheadS = values.perSeqOverheadUs / 1e6;
  if (values.frontendLatencyMs !== undefined) e.frontendLatencyS = values.frontendLatencyMs / 1e3;
  // The hops of whichever client path the engine is given (`--client-path`).
  if (values.engineHopMs !== undefined) {
    e.engineHopS = values.engineHopMs / 1e3;
    e.entryPointHopS = values.engineHopMs / 1e3;
  }
  if (values.tokenizeUsPerToken !== undefined) {
    e.tokenizeSPerPromptToken = values.tokenizeUsPerToken / 1e6;
  }
  if (values.frontendChatCpuMs !== undefined) e.frontendChatCpuS = values.frontendChatCpuMs / 1e3;
  return e;
}

/**
 * The settings with a calibration under them: the engine it was fitted on (model, GPU, TP,
 * personality, ...) and its fitted values, where the settings give none. A setting given beside
 * `--calibration` is a what-if (another GPU, TP, max-num-seqs); transferNotes says what of the
 * fit does not carry over to it.
 */
function calibratedSettings(file: CalibrationFile, given: SimEngineSettings): SimEngineSettings {
  const recorded: Record<string, unknown> = { ...engineSettingsFromArgs(file.engine.args) };
  if (given.gpu !== undefined || given.gpuSpec !== undefined) {
    delete recorded.gpu;
    delete recorded.gpuSpec;
  }
  const set = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  return { ...recorded, ...calibratedValues(file), ...set } as SimEngineSettings;
}

/** Engine flags as a list (`--model x --gpu y --no-chunked-prefill`, as a manifest records them) read as settings. */
export function engineSettingsFromArgs(args: readonly string[]): SimEngineSettings {
  const flags: Record<string, unknown> = {};
  for (let i = 0; i < args.length; i++) {
    const name = args[i];
    if (name === '--model') flags.model = args[++i];
    else {
      const f = ENGINE_FLAGS.find((g) => flagName(g) === name);
      if (f) flags[f.key] = f.kind === 'boolean' ? !isNegation(f) : args[++i];
    }
  }
  const { settings } = engineSettingsFromFlags(flags);
  return { ...settings, ...(flags.model !== undefined ? { model: String(flags.model) } : {}) };
}

/**
 * The engine the settings describe: the model resolved (preset, config.json or spec), the GPU
 * (preset, spec or spec file), the personality's own names mapped to the shared settings and
 * the efficiency factors; or every problem, each naming the flag it comes from.
 */
export function resolveEngine(given: SimEngineSettings): {
  engine?: EngineModelOptions;
  problems: string[];
  warnings: string[];
  /**
   * The calibration file's own warnings (what its fit could not explain), for the results to
   * record; their notice lines lead `warnings`.
   */
  calibration?: { path: string; warnings: CalibrationWarning[]; notices: string[] };
  /** The setup lies outside the personality's validated range (validatedRange.ts); its line is in `warnings`. */
  outsideValidation?: OutsideValidation;
  /** The --calibration file read, for the runs that predict with it (their intervals). */
  calibrated?: EngineCalibration;
} {
  const problems: string[] = [];
  const warnings: string[] = [];
  let calibration: CalibrationFile | undefined;
  let carried: { path: string; warnings: CalibrationWarning[]; notices: string[] } | undefined;
  if (given.calibration !== undefined) {
    const path = String(given.calibration);
    try {
      calibration = readCalibrationFile(path);
    } catch (err) {
      problems.push(`--calibration: ${(err as Error).message}`);
    }
    // No silent calibration: what its fit warned of is said again wherever it is used, first.
    if (calibration?.warnings?.length) {
      const notices = calibrationFileNotices(path, calibration.warnings);
      warnings.push(...notices);
      carried = { path, warnings: calibration.warnings, notices };
    }
  }
  const s = calibration ? calibratedSettings(calibration, given) : given;
  // A file the calibration names (its engine.args) is said to come from there.
  const namedBy = (key: 'model' | 'gpuSpec') =>
    calibration && given[key] === undefined && s[key] !== undefined
      ? ` (named by ${String(given.calibration)}'s engine.args)`
      : '';
  const options = s as Record<string, unknown>;
  const numbers: Record<string, number> = {};
  for (const f of ENGINE_FLAGS) {
    if (f.kind !== 'number' || options[f.key] === undefined) continue;
    const n = numberProblem(f, options[f.key]);
    if (typeof n === 'number') numbers[f.key] = n;
    else problems.push(n.problem);
  }
  let resolved: HfModel | undefined;
  if (typeof s.model === 'object') resolved = { spec: structuredClone(s.model), warnings: [] };
  else {
    try {
      resolved = resolveModel(s.model ?? DEFAULT_SIM_MODEL_PRESET);
      warnings.push(...resolved.warnings);
    } catch (err) {
      problems.push(`--model${namedBy('model')}: ${(err as Error).message}`);
    }
  }
  const personalityText = String(s.enginePersonality ?? DEFAULT_PERSONALITY);
  const personality = isPersonalityId(personalityText) ? personalityText : undefined;
  if (!personality) {
    problems.push(
      `--engine-personality ${personalityText} is not one; choose one of ${PERSONALITY_IDS.join(', ')}`,
    );
  }
  const engineVersion = s.engineVersion === undefined ? undefined : String(s.engineVersion);
  if (engineVersion !== undefined) {
    if (
      personality &&
      personality !== 'vllm-v1' &&
      personality !== 'vllm-v0' &&
      personality !== 'sglang'
    ) {
      problems.push(
        `--engine-version is vllm-v1's, vllm-v0's and sglang's setting; vLLM 0.5 is its own personality (vllm-v0.5), the other engines have none`,
      );
    } else {
      const problem = engineVersionProblem(engineVersion);
      if (problem) problems.push(problem);
    }
  }
  const clientPath = s.clientPath === undefined ? undefined : (String(s.clientPath) as ClientPath);
  if (clientPath !== undefined && !CLIENT_PATHS.includes(clientPath)) {
    problems.push(`--client-path ${clientPath} is not one; choose ${CLIENT_PATHS.join(', ')}`);
  }
  const loadBalancer = String(s.loadBalancer ?? 'round-robin') as LoadBalancer;
  if (!LOAD_BALANCERS.includes(loadBalancer)) {
    problems.push(
      `--load-balancer ${loadBalancer} is not one; choose ${LOAD_BALANCERS.join(' or ')}`,
    );
  }
  // Engine-native names set the shared setting, and only for their own engine.
  const settings: Record<string, number | boolean> = { ...numbers };
  if (s.chunkedPrefill === false) settings.chunkedPrefill = false;
  if (typeof s.enablePrefixCaching === 'boolean') settings.prefixCaching = s.enablePrefixCaching;
  for (const f of ENGINE_FLAGS) {
    const given = f.kind === 'boolean' ? options[f.key] === true : numbers[f.key] !== undefined;
    if (!f.native || !given) continue;
    const name = flagName(f);
    if (personality && !f.native.personalities.includes(personality)) {
      problems.push(
        `${name} is ${f.native.personalities.join(' and ')}'s setting; add --engine-personality ${f.native.personalities[0]}, or use the ${personality} equivalent`,
      );
    } else if (f.native.sets !== f.key && settings[f.native.sets] !== undefined) {
      const shared = ENGINE_FLAGS.find((g) => g.key === f.native?.sets);
      problems.push(
        `${name} and ${shared ? flagName(shared) : f.native.sets} set the same thing; give one`,
      );
    } else {
      settings[f.native.sets] = f.kind === 'boolean' ? !f.native.off : (numbers[f.key] as number);
    }
  }
  let gpu: GpuSpec | undefined;
  if (s.gpuSpec !== undefined) {
    if (s.gpu !== undefined) problems.push('--gpu and --gpu-spec both name the GPU; give one');
    try {
      gpu = loadGpuSpec(String(s.gpuSpec));
    } catch (err) {
      problems.push(`--gpu-spec${namedBy('gpuSpec')}: ${(err as Error).message}`);
    }
  } else if (typeof s.gpu === 'object') {
    gpu = s.gpu;
  } else {
    const gpuId = String(s.gpu ?? DEFAULT_SIM_GPU);
    gpu = findGpuPreset(gpuId);
    if (!gpu) {
      problems.push(
        `--gpu ${gpuId} is not a preset; choose one of ${GPU_PRESETS.map((g) => g.id).join(', ')}, or describe it with --gpu-spec FILE`,
      );
    }
  }
  const weights =
    s.dtype === undefined
      ? resolved?.weights
      : typeof s.dtype === 'object'
        ? s.dtype
        : parseWeightFormat(String(s.dtype));
  if (s.dtype !== undefined && !weights) {
    problems.push(
      `--dtype ${String(s.dtype)} is not a weight format; use bf16, fp16, fp8, int8, int4, awq, gptq or int4-g64`,
    );
  }
  const kv = s.kvCacheDtype as string | undefined;
  if (kv !== undefined && !(KV_DTYPES as readonly string[]).includes(kv)) {
    problems.push(`--kv-cache-dtype ${kv} is not one of ${KV_DTYPES.join(', ')}`);
  }
  if (problems.length > 0 || !resolved || !gpu || !personality) {
    return { problems, warnings, ...(carried ? { calibration: carried } : {}) };
  }
  const efficiency = efficiencyOf(numbers);
  const engine: EngineModelOptions = {
    model: resolved.spec,
    gpu,
    efficiency,
    ...(weights ? { weights } : {}),
    // A 16-bit model's cache follows its weights' 16-bit format, as vLLM's "auto" does.
    kvDtype: (kv as KvDtype | undefined) ?? (weights?.dtype === 'fp16' ? 'fp16' : 'bf16'),
    personality,
    ...(engineVersion !== undefined ? { engineVersion } : {}),
    ...(clientPath !== undefined ? { clientPath } : {}),
    loadBalancer,
    ...(numbers.tp !== undefined ? { tp: numbers.tp } : {}),
    ...(numbers.dp !== undefined ? { dp: numbers.dp } : {}),
    ...pick(settings, [
      'gpuMemoryUtilization',
      'maxModelLen',
      'maxNumSeqs',
      'maxNumBatchedTokens',
      'blockSize',
      'chunkedPrefill',
      'prefixCaching',
      'numSchedulerSteps',
      'numGpuBlocksOverride',
      // llamacpp's own (set through its native flags only)
      'ctxTokens',
      'ubatchSize',
      'kvUnified',
      'cacheRamMiB',
    ]),
    ...(numbers.nonKvOverheadGb !== undefined
      ? { nonKvOverheadBytes: numbers.nonKvOverheadGb * 1e9 }
      : {}),
  };
  if (calibration) {
    for (const note of transferNotes(calibration, engine)) {
      warnings.push(`--calibration: ${note}`);
    }
    if (calibration.steps) {
      const mismatch = stepsMismatch(calibration, engine);
      const steps = measuredStepsOf(calibration.steps);
      if (mismatch) warnings.push(`--calibration: ${mismatch}`);
      else if (steps) engine.measuredSteps = steps;
    }
  }
  // A calibration fitted on the user's own server is that setup's validation; without one, a
  // setup the published points never covered says so.
  const outside = calibration ? undefined : outsideValidation(engine);
  if (outside) warnings.push(outside.message);
  return {
    engine,
    problems,
    warnings,
    ...(outside ? { outsideValidation: outside } : {}),
    ...(carried ? { calibration: carried } : {}),
    ...(calibration
      ? {
          calibrated: {
            path: String(given.calibration),
            file: calibration,
            flagKeys: FIT_KEYS.filter((k) => given[k] !== undefined),
          },
        }
      : {}),
  };
}
