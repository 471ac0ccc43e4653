/**
 * A host CPU described as the simulator's device (a GpuSpec of family `cpu`), so that the
 * roofline applies to llama.cpp's CPU backend: the weights stream from DRAM at every forward
 * pass, and prompt processing runs at the cores' vector peak. Pure: tools/llama/cpu-spec.ts
 * reads /proc/cpuinfo and /proc/meminfo and measures the bandwidth, then writes the result as a
 * `--gpu-spec` file (cpuSpecFile).
 *
 * The peaks are NOMINAL, from the instruction set /proc/cpuinfo lists and its clock: two vector
 * pipes issuing a fused multiply-add (fp32) or a dot-product instruction (int8) every cycle, at
 * the widest width the flags name. A core that splits 512-bit instructions in two (AMD Zen 4) or
 * has one such pipe reaches half; which one the flags do not say. Only peak x share enters a
 * prediction, and calibrate fits the share, so a nominal peak costs nothing but the share's
 * meaning. The bandwidth is what one measurement of memcpy moved (bytes read + written per s).
 */
import type { GpuSpec } from './hardware.js';

/** What a CPU description is made of. */
export interface CpuDescription {
  /** /proc/cpuinfo `model name`. */
  name: string;
  /** Cores the engine computes on (llama.cpp `--threads`). */
  threads: number;
  /** Clock, GHz (/proc/cpuinfo `cpu MHz`: the current clock, often the base one in a VM). */
  ghz: number;
  /** /proc/cpuinfo `flags` (x86) or `Features` (Arm). */
  flags: readonly string[];
  /** Host memory, bytes (/proc/meminfo MemTotal). */
  memoryBytes: number;
  /** Measured memory bandwidth with `threads` threads, bytes/s. */
  bandwidthBytesPerS: number;
}

/** Per-core vector peaks per cycle, and the instructions they assume. */
export interface CorePeaks {
  fp32FlopsPerCycle: number;
  /** Absent where the flags name no int8 dot-product instruction. */
  int8OpsPerCycle?: number;
  /** e.g. "AVX-512 FMA, AVX-512 VNNI". */
  isa: string;
}

/** Two pipes x lanes x 2 (multiply and add). */
const PIPES = 2;

/**
 * The widest fp32 FMA and int8 dot product the flags name. x86: avx512f (16 fp32 lanes),
 * fma + avx2 (8), avx (8, no FMA: one op each); avx512_vnni (vpdpbusd on 64 bytes), avx_vnni
 * (32 bytes), avx2 (vpmaddubsw + vpmaddwd: 32 bytes in two instructions). Arm: asimd (4 fp32
 * lanes), asimddp (sdot on 16 bytes), i8mm (smmla: twice sdot's work).
 */
export function corePeaks(flags: readonly string[]): CorePeaks {
  const has = (f: string) => flags.includes(f);
  if (has('asimd') || has('neon')) {
    const int8 = has('i8mm') ? 128 : has('asimddp') ? 64 : undefined;
    return {
      fp32FlopsPerCycle: PIPES * 4 * 2,
      ...(int8 !== undefined ? { int8OpsPerCycle: int8 } : {}),
      isa: `NEON FMA${has('i8mm') ? ', I8MM' : has('asimddp') ? ', dot product' : ''}`,
    };
  }
  const fp32 = has('avx512f')
    ? { lanes: 16, name: 'AVX-512 FMA', fma: true }
    : has('avx2') && has('fma')
      ? { lanes: 8, name: 'AVX2 FMA', fma: true }
      : has('avx')
        ? { lanes: 8, name: 'AVX', fma: false }
        : { lanes: 4, name: 'SSE', fma: false };
  const int8 = has('avx512_vnni')
    ? { ops: PIPES * 64 * 2, name: 'AVX-512 VNNI' }
    : has('avx_vnni')
      ? { ops: PIPES * 32 * 2, name: 'AVX-VNNI' }
      : has('avx2')
        ? { ops: (PIPES * 32 * 2) / 2, name: 'AVX2 int8' }
        : undefined;
  return {
    fp32FlopsPerCycle: PIPES * fp32.lanes * (fp32.fma ? 2 : 1),
    ...(int8 ? { int8OpsPerCycle: int8.ops } : {}),
    isa: [fp32.name, int8?.name].filter(Boolean).join(', '),
  };
}

/**
 * The CPU as a device: memory the host's, bandwidth the measured, the 16-bit peak key holding
 * the fp32 FMA peak (ggml's attention and f16/f32 matmuls run at it) and int8 the dot-product
 * peak (Q8_0 and Q4_0 weights multiply against int8-quantised activations). The interconnect is
 * a placeholder: tensor parallelism is not modelled on a CPU (the llamacpp personality refuses
 * --tp above 1).
 */
export function cpuGpuSpec(d: CpuDescription): GpuSpec {
  const peaks = corePeaks(d.flags);
  const perS = d.ghz * 1e9 * d.threads;
  return {
    id: `cpu-${d.threads}t`,
    name: `${d.name} (${d.threads} thread${d.threads === 1 ? '' : 's'})`,
    family: 'cpu',
    memoryGB: Math.round(d.memoryBytes / 1e9),
    memoryBytes: d.memoryBytes,
    bandwidthBytesPerS: d.bandwidthBytesPerS,
    peakFlops: {
      bf16: peaks.fp32FlopsPerCycle * perS,
      ...(peaks.int8OpsPerCycle !== undefined ? { int8: peaks.int8OpsPerCycle * perS } : {}),
    },
    interconnect: {
      kind: 'pcie',
      name: 'none: one CPU, no tensor parallelism',
      busBytesPerS: d.bandwidthBytesPerS,
      latencyS: 1e-6,
    },
  };
}

/** The fields of /proc/cpuinfo and /proc/meminfo a description needs. */
export function parseCpuInfo(
  cpuinfo: string,
  meminfo = '',
): { name: string; cores: number; mhz: number; flags: string[]; memoryBytes: number } {
  const field = (name: string) =>
    new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(cpuinfo)?.[1]?.trim();
  const processors = cpuinfo.match(/^processor\s*:/gm)?.length ?? 1;
  const flags = (field('flags') ?? field('Features') ?? '').split(/\s+/).filter(Boolean);
  const memKb = Number(/^MemTotal:\s*(\d+)\s*kB/m.exec(meminfo)?.[1] ?? Number.NaN);
  return {
    name: field('model name') ?? field('Hardware') ?? field('CPU part') ?? 'CPU',
    cores: processors,
    mhz: Number(field('cpu MHz') ?? Number.NaN),
    flags,
    memoryBytes: memKb * 1024,
  };
}

/**
 * The description as a `--gpu-spec` file (YAML; gpuSpec.ts reads it), with the figures it was
 * made from as comments.
 */
export function cpuSpecFile(d: CpuDescription): string {
  const spec = cpuGpuSpec(d);
  const peaks = corePeaks(d.flags);
  const tera = (x: number) => Number((x / 1e12).toPrecision(4));
  const lines = [
    `# A CPU as infergauge's device (docs/llamacpp-personality.md), written by`,
    `# tools/llama/cpu-spec.ts: ${d.threads} thread(s) at ${d.ghz.toFixed(3)} GHz (/proc/cpuinfo),`,
    `# nominal peaks per core and cycle from its flags (${peaks.isa}): fp32 ${peaks.fp32FlopsPerCycle},`,
    `# int8 ${peaks.int8OpsPerCycle ?? 'none'}; bandwidth measured (memcpy, bytes read + written).`,
    `name: ${JSON.stringify(spec.name)}`,
    `id: ${spec.id}`,
    'family: cpu',
    `memoryGiB: ${Number((d.memoryBytes / 2 ** 30).toFixed(3))}`,
    `bandwidthTBps: ${Number((d.bandwidthBytesPerS / 1e12).toPrecision(4))}`,
    `peakTflops: { bf16: ${tera(spec.peakFlops.bf16)}${spec.peakFlops.int8 !== undefined ? `, int8: ${tera(spec.peakFlops.int8)}` : ''} }`,
    `interconnect: { kind: pcie, name: "${spec.interconnect.name}", busGBps: ${Number((d.bandwidthBytesPerS / 1e9).toPrecision(4))}, latencyUs: 1 }`,
  ];
  return `${lines.join('\n')}\n`;
}
