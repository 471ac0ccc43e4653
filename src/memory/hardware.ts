/**
 * Accelerator specs (dense peaks, no sparsity) from REFERENCE-memory-and-simulator.md section 3:
 * aiconfigurator `systems/*.yaml`, llm-analysis `gpu_configs/*.json` and vendor datasheets.
 */

/** Formats with their own tensor-core peak. */
export type ComputeFormat = 'bf16' | 'fp8' | 'int8' | 'fp4';

/**
 * Chip families: each has its own achieved share of the peaks (sim/roofline familyEfficiency).
 * `cpu` is a host processor described as a device (memory/cpu.ts): llama.cpp's CPU backend.
 */
export const GPU_FAMILIES = ['ampere', 'ada', 'hopper', 'blackwell', 'cdna3', 'cpu'] as const;
export type GpuFamily = (typeof GPU_FAMILIES)[number];

export const INTERCONNECT_KINDS = ['nvlink', 'pcie', 'xgmi'] as const;
export type InterconnectKind = (typeof INTERCONNECT_KINDS)[number];

/** How one GPU talks to its tensor-parallel peers. */
export interface Interconnect {
  /**
   * `nvlink` and `xgmi` connect every GPU of the node to every other (NVSwitch, or AMD's
   * all-to-all Infinity Fabric): vLLM's custom all-reduce runs at any TP it supports. `pcie`
   * connects pairs at best: vLLM's custom all-reduce runs only at TP 2, NCCL otherwise.
   */
  kind: InterconnectKind;
  /** e.g. "NVLink 4 (900 GB/s)". */
  name: string;
  /**
   * The bus bandwidth NCCL's all-reduce reaches per GPU, bytes/s: nccl-tests' busBw (its
   * doc/PERFORMANCE.md), so that a ring all-reduce of S bytes takes 2 (p-1)/p x S / busBw.
   */
  busBytesPerS: number;
  /** Latency of one ring step (one hop between neighbours), seconds. */
  latencyS: number;
  /**
   * GPUs can map each other's memory (CUDA peer access). GeForce cards cannot, so vLLM's custom
   * all-reduce (which needs it) falls back to NCCL there. Absent means true.
   */
  peerAccess?: boolean;
  /**
   * Where this link joins GPUs in pairs only (an NVLink bridge): the link beyond a pair, which
   * TP above 2 runs over (its slowest hop).
   */
  beyondPair?: Interconnect;
  /** NCCL's (RCCL's) all-reduce as measured on this link at one rank count, where one was found. */
  measuredAllReduce?: MeasuredAllReduce;
}

/**
 * nccl-tests' (rccl-tests') `all_reduce_perf` on one node: the out-of-place time per message
 * size. A ring of S bytes does not reach the bus bandwidth until S is large: the measured time
 * at 8-128 MiB is 1.1-2x what latency plus S over the plateau's busBw gives, as NCCL splits a
 * message over channels and pipeline slices.
 */
export interface MeasuredAllReduce {
  ranks: number;
  /**
   * [bytes per rank, seconds], sizes ascending, from 1 MiB up: below it vLLM runs its own
   * kernels on these links, and nccl-tests times each call eagerly (a kernel launch each).
   */
  points: readonly (readonly [bytes: number, seconds: number])[];
}

export interface GpuSpec {
  id: string;
  name: string;
  /** Chip family, for the default GEMM efficiencies; absent keeps the generic defaults. */
  family?: GpuFamily;
  /** Nameplate memory in GB, for display. */
  memoryGB: number;
  /**
   * Memory the device reports as total, in bytes: what `gpu_memory_utilization` is a fraction of
   * (vLLM's `total_gpu_memory`, torch `mem_get_info`). Where a vLLM log prints it, that; else
   * nvidia-smi's `memory.total`, which counts about 430 MiB more (the driver's reservation: H100
   * 81,559 MiB against 79.22 GiB, RTX 3090 24,576 MiB against 23.58 GiB).
   */
  memoryBytes: number;
  /** nvidia-smi's `memory.total` in MiB where `memoryBytes` is the CUDA total (SGLang sizes its defaults from it). */
  smiMemoryMiB?: number;
  /** Peak HBM/GDDR bandwidth, bytes/s. */
  bandwidthBytesPerS: number;
  /** Dense tensor-core peak per format, FLOP/s (int8 in OP/s). */
  peakFlops: Partial<Record<ComputeFormat, number>> & { bf16: number };
  interconnect: Interconnect;
}

const MiB = 1024 * 1024;
const T = 1e12;
const G = 1e9;

/*
 * Interconnects. Bus bandwidths: the reference busBw that nccl-tests all_reduce_perf reaches at
 * large sizes on one node (docs.alayanew.com "NCCL-tests in practice", 2026-05: 8x H100 SXM
 * 460-480 GB/s, 8x A100 SXM 230-250, 8x H100 PCIe 35-45, H100 PCIe pairs on an NVLink bridge
 * 200-230; NCCL's own tuning model caps sm80 rings at 235 GB/s, src/graph/tuning.cc), the low
 * end of each range. Where no measurement was found the nominal per-direction rate is scaled by
 * the measured/nominal ratio of the same kind of link, and the comment says so.
 * Latencies per ring step: NCCL's tuning model (src/graph/tuning.cc hwLat, ring, LL protocol,
 * which NCCL picks for the small messages where latency matters): NVLink 0.47 us, PCI 1.0 us.
 */
const NVLINK_STEP_S = 0.47e-6;
const PCIE_STEP_S = 1.0e-6;
/** H100 SXM: 460 GB/s measured against 450 GB/s nominal per direction. */
const NVLINK_MEASURED_SHARE = 460 / 450;
/** 8x H100 PCIe Gen5: 40 GB/s measured (35-45) against 64 GB/s nominal per direction. */
const PCIE_MEASURED_SHARE = 40 / 64;

/** A link from its kind, name, bus bandwidth (GB/s) and ring step latency. */
const link = (
  kind: InterconnectKind,
  name: string,
  busGBps: number,
  latencyS: number,
): Interconnect => ({ kind, name, busBytesPerS: busGBps * G, latencyS });
/** An NVLink generation from its nominal per-direction rate (GB/s). */
const nvlink = (name: string, perDirectionGBps: number): Interconnect =>
  link('nvlink', name, perDirectionGBps * NVLINK_MEASURED_SHARE, NVLINK_STEP_S);
// No nccl-tests figure found for Gen4: nominal 32 GB/s x the Gen5 measured share.
const PCIE4 = link('pcie', 'PCIe 4.0 x16 (32 GB/s)', 32 * PCIE_MEASURED_SHARE, PCIE_STEP_S);
const PCIE5 = link('pcie', 'PCIe 5.0 x16 (64 GB/s)', 40, PCIE_STEP_S);
/** GeForce cards: no peer access (NVIDIA disables P2P on them), so NCCL goes through the host. */
const geforce = (l: Interconnect): Interconnect => ({
  ...l,
  name: `${l.name}, no peer access`,
  peerAccess: false,
});
/** A measured curve from sizes in bytes and times in microseconds. */
const measured = (
  ranks: number,
  points: readonly (readonly [bytes: number, us: number])[],
): MeasuredAllReduce => ({
  ranks,
  points: points.map(([bytes, us]) => [bytes, us * 1e-6] as const),
});

/**
 * NVLink 4 through NVSwitch (HGX H100 and H200 boards, 18 links a GPU). All-reduce over 8 GPUs
 * measured by NVIDIA: the sample all_reduce_perf output of NVIDIA/exemplar-performance
 * microbenchmarks/nccl/README.md (b4ac983; 8x H100 80GB HBM3 on one node, graph 0). At 8 MiB
 * it takes 83 us where latency plus the plateau's busBw gives 42; at 128 MiB 586 against 521.
 */
const HGX_NVLINK4: Interconnect = {
  ...nvlink('NVLink 4 (900 GB/s)', 450),
  measuredAllReduce: measured(8, [
    [1 * MiB, 27.37],
    [2 * MiB, 42.21],
    [4 * MiB, 54.19],
    [8 * MiB, 83.04],
    [16 * MiB, 123.8],
    [32 * MiB, 199.3],
    [64 * MiB, 324.7],
    [128 * MiB, 586.4],
    [256 * MiB, 1112.5],
    [512 * MiB, 2151.0],
    [1024 * MiB, 4029.4],
    [2048 * MiB, 7939.1],
    [4096 * MiB, 15749],
    [8192 * MiB, 31307],
    [16384 * MiB, 62648],
  ]),
};

/**
 * AMD Infinity Fabric (xGMI) on MI300X/MI325X: 7 links of 64 GB/s per direction to the 7 peers
 * (AMD Instinct MI300X datasheet: 896 GB/s aggregate bidirectional), about 48 GB/s usable each
 * after CRC and protocol overhead (AMD ROCm blog "Understanding RCCL Bandwidth and xGMI
 * Performance on AMD Instinct MI300X", 2025-03-02). rccl-tests all_reduce_perf on one node of
 * 8 MI300X (hisohara/ai-scripts training/01_rccl-smoketest/README.md at 3ae89cf, cluster AAC8,
 * rccl-tests develop a7809b3, graph 0) plateaus at a busBw of 315 GB/s (313.7 at 1 GB, 315.7
 * at 8 GB; 8 MI325X on AAC11 316.9-319.1 at 4-16 GB). RCCL keeps NCCL's tuning tables, so the
 * NVLink step latency.
 */
const XGMI: Interconnect = {
  ...link('xgmi', 'Infinity Fabric xGMI (448 GB/s)', 315, NVLINK_STEP_S),
  measuredAllReduce: measured(8, [
    [1 * MiB, 28.39],
    [2 * MiB, 36.68],
    [4 * MiB, 52.96],
    [8 * MiB, 84.78],
    [16 * MiB, 149.9],
    [32 * MiB, 246.3],
    [64 * MiB, 432.5],
    [128 * MiB, 800.3],
    [256 * MiB, 1540.4],
    [512 * MiB, 3027.1],
    [1024 * MiB, 5990.7],
    [2048 * MiB, 11940],
    [4096 * MiB, 23841],
    [8192 * MiB, 47617],
  ]),
};

export const GPU_PRESETS: readonly GpuSpec[] = [
  {
    id: 'h100',
    name: 'H100 SXM 80GB',
    family: 'hopper',
    memoryGB: 80,
    // vLLM's log "total_gpu_memory (79.22GiB)" on an H100-80G (vLLM PR #12126, Jan 2025);
    // llm-d's logs read 79.18-79.19 GiB.
    memoryBytes: Math.round(79.22 * 1024) * MiB,
    smiMemoryMiB: 81559,
    bandwidthBytesPerS: 3.35 * T,
    peakFlops: { bf16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    interconnect: HGX_NVLINK4,
  },
  {
    id: 'h100-pcie',
    name: 'H100 PCIe 80GB',
    family: 'hopper',
    memoryGB: 80,
    memoryBytes: 81559 * MiB,
    bandwidthBytesPerS: 2.0 * T,
    peakFlops: { bf16: 756.5 * T, fp8: 1513 * T, int8: 1513 * T },
    interconnect: PCIE5,
  },
  {
    // NVIDIA H100 NVL datasheet: 94 GB HBM3, 3.9 TB/s, BF16 1,671 TF and FP8 3,341 TF with
    // sparsity (half dense); nvidia-smi reports 95830 MiB. NVLink bridges join pairs (600 GB/s):
    // TP 2 runs over the bridge (nccl-tests 200-230 GB/s); TP 4 and 8 cross PCIe 5.0 between
    // pairs.
    id: 'h100-nvl',
    name: 'H100 NVL 94GB',
    family: 'hopper',
    memoryGB: 94,
    memoryBytes: 95830 * MiB,
    bandwidthBytesPerS: 3.9 * T,
    peakFlops: { bf16: 835.5 * T, fp8: 1670.5 * T, int8: 1670.5 * T },
    interconnect: {
      ...link('nvlink', 'NVLink bridge (600 GB/s) in pairs', 200, NVLINK_STEP_S),
      beyondPair: PCIE5,
    },
  },
  {
    id: 'h200',
    name: 'H200 SXM 141GB',
    family: 'hopper',
    memoryGB: 141,
    memoryBytes: 143771 * MiB,
    bandwidthBytesPerS: 4.8 * T,
    peakFlops: { bf16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    interconnect: HGX_NVLINK4,
  },
  {
    // NVIDIA H20 (China export part): 96 GB HBM3, 4.0 TB/s, BF16 148 TF, FP8 296 TF dense,
    // NVLink 900 GB/s; nvidia-smi reports 97871 MiB.
    id: 'h20',
    name: 'H20 96GB',
    family: 'hopper',
    memoryGB: 96,
    memoryBytes: 97871 * MiB,
    bandwidthBytesPerS: 4.0 * T,
    peakFlops: { bf16: 148 * T, fp8: 296 * T, int8: 296 * T },
    interconnect: nvlink('NVLink 4 (900 GB/s)', 450),
  },
  {
    // NVIDIA GH200 Grace Hopper datasheet, the 96 GB HBM3 part: 4 TB/s, the H100 SXM peaks;
    // nvidia-smi reports 97871 MiB. Node-local GPUs talk over NVLink 4 (900 GB/s).
    id: 'gh200',
    name: 'GH200 96GB',
    family: 'hopper',
    memoryGB: 96,
    memoryBytes: 97871 * MiB,
    bandwidthBytesPerS: 4.0 * T,
    peakFlops: { bf16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    interconnect: nvlink('NVLink 4 (900 GB/s)', 450),
  },
  {
    id: 'a100-40',
    name: 'A100 SXM 40GB',
    family: 'ampere',
    memoryGB: 40,
    memoryBytes: 40960 * MiB,
    bandwidthBytesPerS: 1.555 * T,
    peakFlops: { bf16: 312 * T, int8: 624 * T },
    interconnect: link('nvlink', 'NVLink 3 (600 GB/s)', 230, NVLINK_STEP_S),
  },
  {
    id: 'a100-80',
    name: 'A100 SXM 80GB',
    family: 'ampere',
    memoryGB: 80,
    memoryBytes: 81920 * MiB,
    bandwidthBytesPerS: 2.039 * T,
    peakFlops: { bf16: 312 * T, int8: 624 * T },
    interconnect: link('nvlink', 'NVLink 3 (600 GB/s)', 230, NVLINK_STEP_S),
  },
  {
    // NVIDIA A100 PCIe 80GB datasheet: HBM2e 1,935 GB/s, the SXM peaks (312 TF BF16 dense).
    // Device memory as the SXM 80GB part (81920 MiB, the same HBM stacks).
    id: 'a100-pcie-80',
    name: 'A100 PCIe 80GB',
    family: 'ampere',
    memoryGB: 80,
    memoryBytes: 81920 * MiB,
    bandwidthBytesPerS: 1.935 * T,
    peakFlops: { bf16: 312 * T, int8: 624 * T },
    interconnect: PCIE4,
  },
  {
    // NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s, BF16 125 TF dense (250 sparse), INT8 250.
    // Device memory as the A10G (23028 MiB, the same board memory).
    id: 'a10',
    name: 'A10 24GB',
    family: 'ampere',
    memoryGB: 24,
    memoryBytes: 23028 * MiB,
    bandwidthBytesPerS: 600 * G,
    peakFlops: { bf16: 125 * T, int8: 250 * T },
    interconnect: PCIE4,
  },
  {
    id: 'a10g',
    name: 'A10G 24GB',
    family: 'ampere',
    memoryGB: 24,
    memoryBytes: 23028 * MiB,
    bandwidthBytesPerS: 600 * G,
    // NVIDIA does not publish it; llm-analysis uses about 70 TF/s.
    peakFlops: { bf16: 70 * T },
    interconnect: PCIE4,
  },
  {
    // NVIDIA RTX A6000 datasheet: 48 GB GDDR6, 768 GB/s, tensor 309.7 TF with sparsity (154.8
    // dense; professional cards run fp32-accumulate GEMMs at the full rate); nvidia-smi reports
    // 49140 MiB.
    id: 'a6000',
    name: 'RTX A6000 48GB',
    family: 'ampere',
    memoryGB: 48,
    memoryBytes: 49140 * MiB,
    bandwidthBytesPerS: 768 * G,
    peakFlops: { bf16: 154.8 * T, int8: 309.7 * T },
    interconnect: PCIE4,
  },
  {
    // NVIDIA Ampere GA102 whitepaper, RTX 3090: 24 GB GDDR6X, 936 GB/s; FP16 tensor 142 TF with
    // fp16 accumulate but 71 TF with fp32 accumulate (GeForce halves it), and PyTorch's bf16
    // GEMMs accumulate in fp32; INT8 284 TOPS dense. nvidia-smi reports 24576 MiB; vLLM's log
    // "total_gpu_memory (23.58GiB)" (vLLM PR #14447, 4x RTX 3090; 23.55 in issue #11550).
    id: 'rtx3090',
    name: 'GeForce RTX 3090 24GB',
    family: 'ampere',
    memoryGB: 24,
    memoryBytes: Math.round(23.58 * 1024) * MiB,
    smiMemoryMiB: 24576,
    bandwidthBytesPerS: 936 * G,
    peakFlops: { bf16: 71 * T, int8: 284 * T },
    interconnect: geforce(PCIE4),
  },
  {
    id: 'l4',
    name: 'L4 24GB',
    family: 'ada',
    memoryGB: 24,
    memoryBytes: 23034 * MiB,
    bandwidthBytesPerS: 300 * G,
    peakFlops: { bf16: 121 * T, fp8: 242 * T, int8: 242 * T },
    interconnect: PCIE4,
  },
  {
    // NVIDIA L40 datasheet: 48 GB GDDR6, 864 GB/s, BF16 181 TF and FP8 362 TF dense (half the
    // sparse figures). Device memory as the L40S (46068 MiB, the same board memory).
    id: 'l40',
    name: 'L40 48GB',
    family: 'ada',
    memoryGB: 48,
    memoryBytes: 46068 * MiB,
    bandwidthBytesPerS: 864 * G,
    peakFlops: { bf16: 181 * T, fp8: 362 * T, int8: 362 * T },
    interconnect: PCIE4,
  },
  {
    id: 'l40s',
    name: 'L40S 48GB',
    family: 'ada',
    memoryGB: 48,
    memoryBytes: 46068 * MiB,
    bandwidthBytesPerS: 864 * G,
    peakFlops: { bf16: 362 * T, fp8: 733 * T, int8: 733 * T },
    interconnect: PCIE4,
  },
  {
    id: 'rtx4090',
    name: 'GeForce RTX 4090 24GB',
    family: 'ada',
    memoryGB: 24,
    // As vLLM 0.19 reported it (LLMServingSim bench/examples/RTX4090 meta.json).
    memoryBytes: 25_250_627_584,
    bandwidthBytesPerS: 1.008 * T,
    // 165 TF/s with fp32 accumulate, as PyTorch runs bf16 GEMMs; fp8 figure unverified.
    peakFlops: { bf16: 165 * T, fp8: 330 * T, int8: 660 * T },
    interconnect: geforce(PCIE4),
  },
  {
    // NVIDIA RTX 5090 (GB202) specs: 32 GB GDDR7, 1,792 GB/s; FP16 tensor 838 TF, FP8 1,677 TF
    // and FP4 3,352 TF with sparsity, half that dense. Unlike the 4090, the fp32-accumulate
    // rate is not halved: cuBLASLt measures 254 TF/s bf16 and 774 TF/s fp8 on it
    // (xzwgit/gpu-flops-bench README), above half of either peak. nvidia-smi reports 32607 MiB.
    id: 'rtx5090',
    name: 'GeForce RTX 5090 32GB',
    family: 'blackwell',
    memoryGB: 32,
    memoryBytes: 32607 * MiB,
    bandwidthBytesPerS: 1.792 * T,
    peakFlops: { bf16: 419 * T, fp8: 838 * T, int8: 838 * T, fp4: 1676 * T },
    interconnect: geforce(PCIE5),
  },
  {
    id: 'mi300x',
    name: 'Instinct MI300X 192GB',
    family: 'cdna3',
    memoryGB: 192,
    memoryBytes: 196288 * MiB,
    bandwidthBytesPerS: 5.3 * T,
    peakFlops: { bf16: 1307.4 * T, fp8: 2614.9 * T, int8: 2614.9 * T },
    interconnect: XGMI,
  },
  {
    // AMD Instinct MI325X datasheet: 256 GB HBM3E, 6 TB/s, the MI300X compute (BF16 1,307.4 TF,
    // FP8 2,614.9 TF dense). Device memory: nameplate 256 GiB less the 2% the driver keeps on
    // the MI300X (196288 of 196608 MiB reported): no reported figure found.
    id: 'mi325x',
    name: 'Instinct MI325X 256GB',
    family: 'cdna3',
    memoryGB: 256,
    memoryBytes: Math.round(262144 * (196288 / 196608)) * MiB,
    bandwidthBytesPerS: 6.0 * T,
    peakFlops: { bf16: 1307.4 * T, fp8: 2614.9 * T, int8: 2614.9 * T },
    interconnect: XGMI,
  },
  {
    id: 'b200',
    name: 'B200 180GB',
    family: 'blackwell',
    memoryGB: 180,
    memoryBytes: 183359 * MiB,
    bandwidthBytesPerS: 7.7 * T,
    peakFlops: { bf16: 2250 * T, fp8: 4500 * T, int8: 4500 * T, fp4: 9000 * T },
    interconnect: nvlink('NVLink 5 (1.8 TB/s)', 900),
  },
  {
    // NVIDIA GB200 NVL72 datasheet, per GPU: 186 GB HBM3E (13.4 TB / 72), 8 TB/s, BF16 2.5 PF,
    // FP8 5 PF, FP4 10 PF dense (half the sparse figures), NVLink 5 1.8 TB/s. Device memory:
    // the nameplate less the B200's reported share (183359 MiB of 180 GB): none found.
    id: 'gb200',
    name: 'GB200 186GB',
    family: 'blackwell',
    memoryGB: 186,
    memoryBytes: Math.round((186 / 180) * 183359) * MiB,
    bandwidthBytesPerS: 8 * T,
    peakFlops: { bf16: 2500 * T, fp8: 5000 * T, int8: 5000 * T, fp4: 10000 * T },
    interconnect: nvlink('NVLink 5 (1.8 TB/s)', 900),
  },
];

export function findGpuPreset(id: string): GpuSpec | undefined {
  const key = id.toLowerCase().replace(/[\s_]/g, '-');
  const aliases: Record<string, string> = {
    'h100-sxm': 'h100',
    'h100-80gb': 'h100',
    'h100-94gb': 'h100-nvl',
    h100nvl: 'h100-nvl',
    'h200-sxm': 'h200',
    a100: 'a100-80',
    'a100-80gb': 'a100-80',
    'a100-40gb': 'a100-40',
    'a100-pcie': 'a100-pcie-80',
    'a100-80gb-pcie': 'a100-pcie-80',
    'rtx-a6000': 'a6000',
    rtxa6000: 'a6000',
    'a6000-48gb': 'a6000',
    'rtx-3090': 'rtx3090',
    '3090': 'rtx3090',
    'rtx-4090': 'rtx4090',
    '4090': 'rtx4090',
    'rtx-5090': 'rtx5090',
    '5090': 'rtx5090',
    'gh200-96gb': 'gh200',
    mi300: 'mi300x',
    mi325: 'mi325x',
    'gb200-nvl72': 'gb200',
  };
  // Own keys only: `constructor` is no alias (it would be Object's).
  const wanted = Object.hasOwn(aliases, key) ? aliases[key] : key;
  return GPU_PRESETS.find((g) => g.id === wanted);
}
