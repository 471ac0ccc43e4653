import { parseFlagNumber } from '../flagNumber.js';
import { KV_DTYPES, type KvDtype, parseWeightFormat } from '../memory/dtype.js';
import { findGpuPreset, GPU_PRESETS } from '../memory/hardware.js';
import { resolveModel } from '../memory/hfConfig.js';
import type { EngineModelOptions } from './engineModel.js';
import { DEFAULT_EFFICIENCY } from './roofline.js';

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
}

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
    flag: '--tp <n>',
    key: 'tp',
    kind: 'number',
    integer: true,
    min: 1,
    help: 'tensor-parallel GPUs (default: 1)',
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
    help: 'share of GPU memory vLLM may use (default: 0.9)',
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
    help: 'reuse KV blocks of identical prompt prefixes',
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
    min: 0,
    help: 'measured activations + non-torch + CUDA graphs, GB (default: modelled)',
  },
  {
    flag: '--mbu <f>',
    key: 'mbu',
    kind: 'number',
    min: 0.01,
    max: 1,
    help: `achieved share of memory bandwidth (default: ${e.mbu})`,
  },
  {
    flag: '--mfu <f>',
    key: 'mfu',
    kind: 'number',
    min: 0.01,
    max: 1,
    help: `best share of the 16-bit tensor peak (default: ${e.mfuMax16})`,
  },
  {
    flag: '--mfu-8bit <f>',
    key: 'mfu8bit',
    kind: 'number',
    min: 0.01,
    max: 1,
    help: `best share of the fp8/int8 peak (default: ${e.mfuMax8})`,
  },
  {
    flag: '--mfu-half-tokens <n>',
    key: 'mfuHalfTokens',
    kind: 'number',
    min: 0,
    help: `tokens per step at half the best MFU (default: ${e.mfuHalfTokens})`,
  },
  {
    flag: '--step-overhead-ms <ms>',
    key: 'stepOverheadMs',
    kind: 'number',
    min: 0,
    help: `fixed time per engine step (default: ${e.stepOverheadS * 1e3})`,
  },
  {
    flag: '--per-seq-overhead-us <us>',
    key: 'perSeqOverheadUs',
    kind: 'number',
    min: 0,
    help: `time per sequence per step (default: ${e.perSeqOverheadS * 1e6})`,
  },
  {
    flag: '--frontend-latency-ms <ms>',
    key: 'frontendLatencyMs',
    kind: 'number',
    min: 0,
    help: `HTTP front end, arrival to scheduler (default: ${e.frontendLatencyS * 1e3})`,
  },
];

/** The engine flags present in parsed options, as they were given (for the manifest and child). */
export function engineFlagArgs(options: Record<string, unknown>): string[] {
  const args: string[] = [];
  for (const f of ENGINE_FLAGS) {
    const value = options[f.key];
    const name = f.flag.split(' ')[0];
    if (f.kind === 'boolean') {
      if (f.key === 'chunkedPrefill' ? value === false : value === true) args.push(name);
    } else if (value !== undefined) args.push(name, String(value));
  }
  return args;
}

/** Whether an option key is one of the engine flags (`gpu`, `tp`, ...). */
export function isEngineFlag(key: string): boolean {
  return ENGINE_FLAGS.some((f) => f.key === key);
}

/**
 * Builds the engine options from `--model` and the engine flags, or returns every problem,
 * each naming the flag and what it accepts.
 */
export function engineFromFlags(
  model: string | undefined,
  options: Record<string, unknown>,
): { engine?: EngineModelOptions; problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  const numbers: Record<string, number> = {};
  for (const f of ENGINE_FLAGS) {
    if (f.kind !== 'number' || options[f.key] === undefined) continue;
    const text = String(options[f.key]);
    const name = f.flag.split(' ')[0];
    const inRange = parseFlagNumber(text, f);
    if ('value' in inRange) numbers[f.key] = inRange.value;
    else if ('problem' in parseFlagNumber(text, { integer: f.integer })) {
      problems.push(`${name} must be a ${f.integer ? 'whole number' : 'number'} (got "${text}")`);
    } else {
      problems.push(
        `${name} must be between ${f.min ?? '-inf'} and ${f.max ?? 'inf'} (got ${text})`,
      );
    }
  }
  let resolved: ReturnType<typeof resolveModel> | undefined;
  try {
    resolved = resolveModel(model ?? DEFAULT_SIM_MODEL_PRESET);
    warnings.push(...resolved.warnings);
  } catch (err) {
    problems.push(`--model: ${(err as Error).message}`);
  }
  const gpuId = String(options.gpu ?? DEFAULT_SIM_GPU);
  const gpu = findGpuPreset(gpuId);
  if (!gpu) {
    problems.push(
      `--gpu ${gpuId} is not a preset; choose one of ${GPU_PRESETS.map((g) => g.id).join(', ')}`,
    );
  }
  const weights =
    options.dtype !== undefined ? parseWeightFormat(String(options.dtype)) : resolved?.weights;
  if (options.dtype !== undefined && !weights) {
    problems.push(
      `--dtype ${String(options.dtype)} is not a weight format; use bf16, fp16, fp8, int8, int4, awq, gptq or int4-g64`,
    );
  }
  const kv = options.kvCacheDtype as string | undefined;
  if (kv !== undefined && !(KV_DTYPES as readonly string[]).includes(kv)) {
    problems.push(`--kv-cache-dtype ${kv} is not one of ${KV_DTYPES.join(', ')}`);
  }
  if (problems.length > 0 || !resolved || !gpu) return { problems, warnings };
  const efficiency: Partial<typeof DEFAULT_EFFICIENCY> = {};
  if (numbers.mbu !== undefined) efficiency.mbu = numbers.mbu;
  if (numbers.mfu !== undefined) efficiency.mfuMax16 = numbers.mfu;
  if (numbers.mfu8bit !== undefined) efficiency.mfuMax8 = numbers.mfu8bit;
  if (numbers.mfuHalfTokens !== undefined) efficiency.mfuHalfTokens = numbers.mfuHalfTokens;
  if (numbers.stepOverheadMs !== undefined) efficiency.stepOverheadS = numbers.stepOverheadMs / 1e3;
  if (numbers.perSeqOverheadUs !== undefined)
    efficiency.perSeqOverheadS = numbers.perSeqOverheadUs / 1e6;
  if (numbers.frontendLatencyMs !== undefined)
    efficiency.frontendLatencyS = numbers.frontendLatencyMs / 1e3;
  const engine: EngineModelOptions = {
    model: resolved.spec,
    gpu,
    efficiency,
    ...(weights ? { weights } : {}),
    // A 16-bit model's cache follows its weights' 16-bit format, as vLLM's "auto" does.
    kvDtype: (kv as KvDtype | undefined) ?? (weights?.dtype === 'fp16' ? 'fp16' : 'bf16'),
    ...(numbers.tp !== undefined ? { tp: numbers.tp } : {}),
    ...(numbers.gpuMemoryUtilization !== undefined
      ? { gpuMemoryUtilization: numbers.gpuMemoryUtilization }
      : {}),
    ...(numbers.maxModelLen !== undefined ? { maxModelLen: numbers.maxModelLen } : {}),
    ...(numbers.maxNumSeqs !== undefined ? { maxNumSeqs: numbers.maxNumSeqs } : {}),
    ...(numbers.maxNumBatchedTokens !== undefined
      ? { maxNumBatchedTokens: numbers.maxNumBatchedTokens }
      : {}),
    ...(numbers.blockSize !== undefined ? { blockSize: numbers.blockSize } : {}),
    ...(options.chunkedPrefill === false ? { chunkedPrefill: false } : {}),
    ...(options.enablePrefixCaching === true ? { prefixCaching: true } : {}),
    ...(numbers.numGpuBlocksOverride !== undefined
      ? { numGpuBlocksOverride: numbers.numGpuBlocksOverride }
      : {}),
    ...(numbers.nonKvOverheadGb !== undefined
      ? { nonKvOverheadBytes: numbers.nonKvOverheadGb * 1e9 }
      : {}),
  };
  return { engine, problems, warnings };
}
