/**
 * Where each personality's figures were checked against published measurements: the GPU
 * families, releases and model sizes of its compared points, read off the validation sets
 * (test/fixtures/sim-validation/points.json and points-round2.json, docs/simulator-validation.md;
 * llamacpp's from docs/llamacpp-personality.md). test/unit/sim/validated-range.test.ts derives
 * them from those files again, so a point added there must be added here. A simulation outside
 * them is an extrapolation, and says so once (`outsideValidation`): old releases and other
 * hardware can be far off (issue 57: vLLM 0.6 on ROCm and llama.cpp's 2024 CUDA kernels read
 * 72-80 % fast in TTFT on points the simulator never saw).
 */
import type { GpuFamily, GpuSpec } from '../memory/hardware.js';
import { type ModelSpec, paramCounts } from '../memory/model.js';
import { atLeast, type PersonalityId, parseEngineVersion } from './personality.js';

export interface ValidatedRange {
  /** GPU families with a compared point; empty: none. */
  families: readonly GpuFamily[];
  /** The GPUs themselves (preset ids), for the message. */
  gpus: readonly string[];
  /** The releases the points ran, in words. */
  releases: string;
  /**
   * Per GPU family, the lowest and highest release its points ran, where the personality takes
   * a release (`--engine-version`: vllm-v1, vllm-v0, sglang): a run naming one outside its family's
   * span is outside. Releases differ by platform (vLLM on ROCm before its 2025 kernels is far
   * slower than on CUDA), so a span seen on one family says nothing of another's.
   */
  releaseSpans?: Partial<Record<GpuFamily, readonly [string, string]>>;
  /** Total parameters of the smallest and largest model compared, billions; absent: none. */
  paramsB?: readonly [number, number];
  /** Whether any compared model was a mixture of experts. */
  moe: boolean;
}

/** The stable code of the notice. */
export const OUTSIDE_VALIDATION_CODE = 'simulator_outside_validation';

export const VALIDATED_RANGES: Record<PersonalityId, ValidatedRange> = {
  'vllm-v1': {
    families: ['hopper', 'ampere', 'ada', 'blackwell', 'cdna3'],
    gpus: ['h100', 'h100-nvl', 'a100-80', 'rtx4090', 'b200', 'mi300x'],
    releases: 'vLLM 0.8.5 to 0.19.1',
    releaseSpans: {
      hopper: ['0.8.5', '0.19.1'],
      ampere: ['0.11.0', '0.11.0'],
      ada: ['0.19.0', '0.19.0'],
      blackwell: ['0.19.1', '0.19.1'],
      cdna3: ['0.9.1', '0.9.1'],
    },
    paramsB: [7.6, 405.9],
    moe: false,
  },
  'vllm-v0': {
    families: ['hopper', 'ampere', 'cdna3'],
    gpus: ['h100', 'a100-80', 'a100-40', 'a6000', 'rtx3090', 'mi300x'],
    releases: 'vLLM 0.2.5 to 0.9.0 (V0 engine)',
    // Only the points that name a release: on ROCm, vLLM 0.4.3 (MLPerf) and 0.6.2 (AMD's blog).
    releaseSpans: {
      hopper: ['0.6.0', '0.9.0'],
      ampere: ['0.6.0', '0.6.0'],
      cdna3: ['0.4.3', '0.6.2'],
    },
    paramsB: [6.7, 405.9],
    moe: false,
  },
  'vllm-v0.5': { families: [], gpus: [], releases: 'none', moe: false },
  sglang: {
    families: ['hopper', 'ampere'],
    gpus: ['h100', 'a100-80'],
    releases: 'SGLang 0.3.0 to 0.5.5',
    releaseSpans: {
      hopper: ['0.3.0', '0.5.5'],
      ampere: ['0.3.0', '0.5.5'],
    },
    paramsB: [8.0, 405.9],
    moe: false,
  },
  trtllm: {
    families: ['hopper', 'ampere', 'ada'],
    gpus: ['h100', 'h100-nvl', 'h200', 'a100-80', 'a100-pcie-80', 'l40s'],
    releases: 'TensorRT-LLM 0.9.0 to 1.2.0rc1',
    paramsB: [6.7, 70.6],
    moe: false,
  },
  tgi: {
    families: ['ampere'],
    gpus: ['a100-80'],
    releases: 'TGI 2.1',
    paramsB: [8.0, 70.6],
    moe: false,
  },
  // docs/llamacpp-personality.md: one AMD EPYC thread, llama.cpp 80fb11a, a 125M q8_0 model.
  llamacpp: {
    families: ['cpu'],
    gpus: ['an AMD EPYC (Zen 5) thread'],
    releases: 'llama.cpp 80fb11a (node-llama-cpp 3.21.1)',
    paramsB: [0.1, 0.2],
    moe: false,
  },
};

/** What a simulation runs: the parts of its engine options that the validated range covers. */
export interface SimulatedSetup {
  personality?: PersonalityId;
  gpu: GpuSpec;
  model: ModelSpec;
  engineVersion?: string;
}

/** The notice: its code, one sentence for the terminal, and the whole range for the reports. */
export interface OutsideValidation {
  code: typeof OUTSIDE_VALIDATION_CODE;
  severity: 'info';
  message: string;
  detail: string;
}

const size = (b: number) => `${b < 10 ? b.toFixed(1) : b.toFixed(0)}B`;

/**
 * The notice for a simulation outside its personality's validated range (GPU family, release,
 * model size, MoE), naming what is outside and what was validated; undefined inside it.
 */
export function outsideValidation(s: SimulatedSetup): OutsideValidation | undefined {
  const personality = s.personality ?? 'vllm-v1';
  const range = VALIDATED_RANGES[personality];
  const outside: string[] = [];
  if (range.families.length === 0) {
    outside.push('no published point');
  } else if (!s.gpu.family || !range.families.includes(s.gpu.family)) {
    outside.push(`GPU ${s.gpu.id} (${s.gpu.family ?? 'no family stated'})`);
  }
  const family = s.gpu.family;
  if (range.releaseSpans && s.engineVersion !== undefined && family) {
    const span = range.releaseSpans[family];
    const v = parseEngineVersion(s.engineVersion);
    const lo = span && parseEngineVersion(span[0]);
    const hi = span && parseEngineVersion(span[1]);
    if (span && v && lo && hi && (!atLeast(v, lo) || !atLeast(hi, v))) {
      const there = span[0] === span[1] ? span[0] : `${span[0]} to ${span[1]}`;
      outside.push(`release ${s.engineVersion} on ${family} (validated there: ${there})`);
    }
  }
  if (range.families.length > 0) {
    const b = paramCounts(s.model).total / 1e9;
    if (range.paramsB && (b < range.paramsB[0] || b > range.paramsB[1])) {
      outside.push(`a ${size(b)} model`);
    }
    if (s.model.moe && !range.moe) outside.push('a mixture-of-experts model');
  }
  if (outside.length === 0) return undefined;
  const families = range.families.length > 0 ? range.families.join(', ') : 'nothing';
  const sizes = range.paramsB
    ? `, dense models of ${size(range.paramsB[0])} to ${size(range.paramsB[1])}`
    : '';
  const validated = `${families}${range.families.length > 0 ? `; ${range.releases}${sizes}` : ''}`;
  return {
    code: OUTSIDE_VALIDATION_CODE,
    severity: 'info',
    message: `simulator outside its validation: ${personality} with ${outside.join(', ')}; validated on ${validated}`,
    detail:
      `The ${personality} personality's figures were compared with published measurements on ` +
      `${range.gpus.length > 0 ? range.gpus.join(', ') : 'no hardware'} (${range.releases}${sizes}): ` +
      'docs/simulator-validation.md. Outside that range its timings and memory are an ' +
      'extrapolation of the same rules; calibrate it on the real server (infergauge calibrate) ' +
      'before trusting its figures.',
  };
}
