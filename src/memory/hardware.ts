/**
 * Accelerator specs (dense peaks, no sparsity) from REFERENCE-memory-and-simulator.md section 3:
 * aiconfigurator `systems/*.yaml`, llm-analysis `gpu_configs/*.json` and vendor datasheets.
 */

/** Formats with their own tensor-core peak. */
export type ComputeFormat = 'bf16' | 'fp8' | 'int8' | 'fp4';

export interface GpuSpec {
  id: string;
  name: string;
  /** Nameplate memory in GB, for display. */
  memoryGB: number;
  /**
   * Memory the device reports as total (nvidia-smi `memory.total`, torch `mem_get_info`), in
   * bytes: what `gpu_memory_utilization` is a fraction of. Slightly below the nameplate.
   */
  memoryBytes: number;
  /** Peak HBM/GDDR bandwidth, bytes/s. */
  bandwidthBytesPerS: number;
  /** Dense tensor-core peak per format, FLOP/s (int8 in OP/s). */
  peakFlops: Partial<Record<ComputeFormat, number>> & { bf16: number };
  /** GPU-to-GPU bandwidth per direction for tensor-parallel all-reduce, bytes/s. */
  linkBytesPerS: number;
  /** Fixed latency of one all-reduce on that link, seconds. */
  linkLatencyS: number;
}

const MiB = 1024 * 1024;
const T = 1e12;
const G = 1e9;
// NCCL small-message all-reduce latency: a few µs over NVLink, more over PCIe (assumed figures).
const NVLINK = 8e-6;
const PCIE = 15e-6;

export const GPU_PRESETS: readonly GpuSpec[] = [
  {
    id: 'h100',
    name: 'H100 SXM 80GB',
    memoryGB: 80,
    memoryBytes: 81559 * MiB,
    bandwidthBytesPerS: 3.35 * T,
    peakFlops: { bf16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    linkBytesPerS: 450 * G,
    linkLatencyS: NVLINK,
  },
  {
    id: 'h100-pcie',
    name: 'H100 PCIe 80GB',
    memoryGB: 80,
    memoryBytes: 81559 * MiB,
    bandwidthBytesPerS: 2.0 * T,
    peakFlops: { bf16: 756.5 * T, fp8: 1513 * T, int8: 1513 * T },
    linkBytesPerS: 64 * G,
    linkLatencyS: PCIE,
  },
  {
    id: 'h200',
    name: 'H200 SXM 141GB',
    memoryGB: 141,
    memoryBytes: 143771 * MiB,
    bandwidthBytesPerS: 4.8 * T,
    peakFlops: { bf16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    linkBytesPerS: 450 * G,
    linkLatencyS: NVLINK,
  },
  {
    id: 'a100-40',
    name: 'A100 SXM 40GB',
    memoryGB: 40,
    memoryBytes: 40960 * MiB,
    bandwidthBytesPerS: 1.555 * T,
    peakFlops: { bf16: 312 * T, int8: 624 * T },
    linkBytesPerS: 300 * G,
    linkLatencyS: NVLINK,
  },
  {
    id: 'a100-80',
    name: 'A100 SXM 80GB',
    memoryGB: 80,
    memoryBytes: 81920 * MiB,
    bandwidthBytesPerS: 2.039 * T,
    peakFlops: { bf16: 312 * T, int8: 624 * T },
    linkBytesPerS: 300 * G,
    linkLatencyS: NVLINK,
  },
  {
    id: 'l4',
    name: 'L4 24GB',
    memoryGB: 24,
    memoryBytes: 23034 * MiB,
    bandwidthBytesPerS: 300 * G,
    peakFlops: { bf16: 121 * T, fp8: 242 * T, int8: 242 * T },
    linkBytesPerS: 32 * G,
    linkLatencyS: PCIE,
  },
  {
    id: 'l40s',
    name: 'L40S 48GB',
    memoryGB: 48,
    memoryBytes: 46068 * MiB,
    bandwidthBytesPerS: 864 * G,
    peakFlops: { bf16: 362 * T, fp8: 733 * T, int8: 733 * T },
    linkBytesPerS: 32 * G,
    linkLatencyS: PCIE,
  },
  {
    id: 'a10g',
    name: 'A10G 24GB',
    memoryGB: 24,
    memoryBytes: 23028 * MiB,
    bandwidthBytesPerS: 600 * G,
    // NVIDIA does not publish it; llm-analysis uses about 70 TF/s.
    peakFlops: { bf16: 70 * T },
    linkBytesPerS: 32 * G,
    linkLatencyS: PCIE,
  },
  {
    id: 'rtx4090',
    name: 'GeForce RTX 4090 24GB',
    memoryGB: 24,
    // As vLLM 0.19 reported it (LLMServingSim bench/examples/RTX4090 meta.json).
    memoryBytes: 25_250_627_584,
    bandwidthBytesPerS: 1.008 * T,
    // 165 TF/s with fp32 accumulate, as PyTorch runs bf16 GEMMs; fp8 figure unverified.
    peakFlops: { bf16: 165 * T, fp8: 330 * T, int8: 660 * T },
    linkBytesPerS: 32 * G,
    linkLatencyS: PCIE,
  },
  {
    id: 'mi300x',
    name: 'Instinct MI300X 192GB',
    memoryGB: 192,
    memoryBytes: 196288 * MiB,
    bandwidthBytesPerS: 5.3 * T,
    peakFlops: { bf16: 1307.4 * T, fp8: 2614.9 * T, int8: 2614.9 * T },
    linkBytesPerS: 64 * G,
    linkLatencyS: NVLINK,
  },
  {
    id: 'b200',
    name: 'B200 180GB',
    memoryGB: 180,
    memoryBytes: 183359 * MiB,
    bandwidthBytesPerS: 7.7 * T,
    peakFlops: { bf16: 2250 * T, fp8: 4500 * T, int8: 4500 * T, fp4: 9000 * T },
    linkBytesPerS: 900 * G,
    linkLatencyS: NVLINK,
  },
];

export function findGpuPreset(id: string): GpuSpec | undefined {
  const key = id.toLowerCase().replace(/[\s_]/g, '-');
  const aliases: Record<string, string> = {
    'h100-sxm': 'h100',
    a100: 'a100-80',
    'a100-80gb': 'a100-80',
    'a100-40gb': 'a100-40',
    'rtx-4090': 'rtx4090',
    '4090': 'rtx4090',
  };
  const wanted = aliases[key] ?? key;
  return GPU_PRESETS.find((g) => g.id === wanted);
}
