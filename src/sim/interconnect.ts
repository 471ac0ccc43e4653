import type { Interconnect, MeasuredAllReduce } from '../memory/hardware.js';

/**
 * Time of one tensor-parallel all-reduce, as vLLM runs it: its custom all-reduce where that
 * applies, NCCL's ring otherwise.
 *
 * vLLM's rules (vllm/distributed/device_communicators/custom_all_reduce.py and
 * csrc/custom_all_reduce.cuh): the custom kernels serve world sizes 2, 4, 6 and 8 on one node,
 * messages under `max_size` (8 MiB), and need peer access; beyond 2 GPUs they need every GPU
 * linked to every other (NVLink/NVSwitch, xGMI), so PCIe gets them at TP 2 only. Of the two
 * kernels, one-shot (each rank reads all peers' inputs and reduces) runs at TP 2 always and on
 * full links under 512 KiB up to TP 4, under 256 KiB up to TP 8; two-shot (reduce-scatter then
 * all-gather) otherwise.
 */

/** vLLM's custom all-reduce world sizes and buffer (CustomAllreduce._SUPPORTED_WORLD_SIZES, max_size). */
const CUSTOM_AR_WORLD_SIZES = [2, 4, 6, 8];
const CUSTOM_AR_MAX_BYTES = 8192 * 1024;

/**
 * NCCL's fixed ring latency per call (src/graph/tuning.cc baseLat, ring, LL protocol: 3.6 us),
 * to which each of the 2 (p-1) steps adds the link's step latency.
 */
const NCCL_RING_BASE_S = 3.6e-6;

/**
 * The custom kernels' cost, read off sglang PR #2904's H100 microbenchmark (tp 2/4/8, 512 B to
 * 1 MiB, no CUDA graph). vLLM's kernels there copy the input into their registered buffer on
 * every call: 8.7-10.1 us at 512 B; the TensorRT-LLM-derived kernels beside them, without that
 * copy (as vLLM runs under CUDA graphs, where its buffers are registered), 3.7-5.9 us: about
 * 4 us per stage. Both read about 60 GB/s per rank at 256 KiB-1 MiB (vLLM's TP 2: 12.9 us at
 * 256 KiB, 26.6 us at 1 MiB): the kernels run on 36 blocks (their block limit), well under the
 * link's rate; a slower link caps it. Messages above 1 MiB are extrapolated.
 */
const CUSTOM_AR_STAGE_S = 4e-6;
const CUSTOM_AR_READ_BYTES_PER_S = 60e9;

export type AllReduceAlgorithm = 'one-shot' | 'two-shot' | 'ring';

export interface AllReduceCost {
  seconds: number;
  algorithm: AllReduceAlgorithm;
}

/** An NCCL ring of `steps` steps over `ranks`: a latency each, steps/p of the message over the bus. */
function ringS(link: Interconnect, ranks: number, steps: number, bytes: number): number {
  return NCCL_RING_BASE_S + steps * link.latencyS + ((steps / ranks) * bytes) / link.busBytesPerS;
}

/**
 * NCCL ring: 2 (p-1) steps of latency, 2 (p-1)/p of the message over the bus bandwidth; or,
 * where the link's all-reduce was measured at these ranks, the measurement.
 */
export function ringAllReduceS(link: Interconnect, ranks: number, bytes: number): number {
  if (ranks <= 1) return 0;
  const curve = link.measuredAllReduce;
  const measuredS =
    curve !== undefined && curve.ranks === ranks ? measuredAllReduceS(curve, bytes) : undefined;
  return measuredS ?? ringS(link, ranks, 2 * (ranks - 1), bytes);
}

/**
 * The measured time at `bytes`: log-log between the two sizes around it (time grows as a power
 * of size between neighbouring sizes), proportional to size past the largest (the plateau).
 * Undefined below the smallest.
 */
function measuredAllReduceS(curve: MeasuredAllReduce, bytes: number): number | undefined {
  const { points } = curve;
  const first = points[0];
  if (first === undefined || bytes < first[0]) return undefined;
  for (let i = 1; i < points.length; i++) {
    const [b1, t1] = points[i] as readonly [number, number];
    if (bytes > b1) continue;
    const [b0, t0] = points[i - 1] as readonly [number, number];
    return t0 * (bytes / b0) ** (Math.log(t1 / t0) / Math.log(b1 / b0));
  }
  const [bLast, tLast] = points[points.length - 1] as readonly [number, number];
  return (tLast * bytes) / bLast;
}

/**
 * NCCL ring all-gather of `bytes` in all (each rank holding 1/p of them): p-1 steps of latency,
 * (p-1)/p of the message over the bus bandwidth, half a ring all-reduce's traffic. The logits'
 * gather over the vocab shards is one (vLLM's `LogitsProcessor._gather_logits`: NCCL all-gather,
 * or a gather to rank 0, which moves the same bytes into that rank).
 */
export function ringAllGatherS(paired: Interconnect, ranks: number, bytes: number): number {
  return ranks <= 1 ? 0 : ringS(linkFor(paired, ranks), ranks, ranks - 1, bytes);
}

/** The link `ranks` GPUs all-reduce over: beyond a pair, a paired link's slower one. */
function linkFor(link: Interconnect, ranks: number): Interconnect {
  return ranks > 2 && link.beyondPair ? link.beyondPair : link;
}

/** Which algorithm vLLM uses for `bytes` per rank over `ranks` GPUs on this link. */
export function allReduceAlgorithm(
  paired: Interconnect,
  ranks: number,
  bytes: number,
): AllReduceAlgorithm {
  const link = linkFor(paired, ranks);
  const fullyConnected = link.kind !== 'pcie';
  const custom =
    CUSTOM_AR_WORLD_SIZES.includes(ranks) &&
    bytes < CUSTOM_AR_MAX_BYTES &&
    link.peerAccess !== false &&
    (ranks === 2 || fullyConnected);
  if (!custom) return 'ring';
  if (ranks === 2) return 'one-shot';
  return (ranks <= 4 && bytes < 512 * 1024) || (ranks <= 8 && bytes < 256 * 1024)
    ? 'one-shot'
    : 'two-shot';
}

/** Seconds of one all-reduce of `bytes` per rank over `ranks` GPUs (0 for one GPU). */
export function allReduce(paired: Interconnect, ranks: number, bytes: number): AllReduceCost {
  if (ranks <= 1) return { seconds: 0, algorithm: 'ring' };
  const link = linkFor(paired, ranks);
  const algorithm = allReduceAlgorithm(link, ranks, bytes);
  const readBytesPerS = Math.min(CUSTOM_AR_READ_BYTES_PER_S, link.busBytesPerS);
  switch (algorithm) {
    case 'one-shot':
      // Every rank reads the other ranks' whole inputs.
      return {
        algorithm,
        seconds: CUSTOM_AR_STAGE_S + ((ranks - 1) * bytes) / readBytesPerS,
      };
    case 'two-shot':
      // Reduce-scatter then all-gather: (p-1)/p of the message read in each.
      return {
        algorithm,
        seconds: 2 * CUSTOM_AR_STAGE_S + ((2 * (ranks - 1)) / ranks) * (bytes / readBytesPerS),
      };
    default:
      return { algorithm, seconds: ringAllReduceS(link, ranks, bytes) };
  }
}
