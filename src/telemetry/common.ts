import { MIB, NVIDIA_SMI_TOTAL, NVIDIA_SMI_USED } from './gpu.js';
import { PROCESS_PEAK_RSS, PROCESS_RSS } from './process.js';
import { seriesName } from './prometheus.js';

/**
 * What every server tells in its own words, in common ones. One snapshot's worth; a field a
 * snapshot does not carry is absent (never 0).
 */
export interface CommonTelemetry {
  /** Share of the KV cache in use, 0..1. */
  kvCacheUsage?: number;
  /** Requests in the running batch. */
  running?: number;
  /** Requests queued for a place in the batch. */
  waiting?: number;
  /** Cumulative: requests preempted (vLLM) or retracted (SGLang) since the server started. */
  preemptions?: number;
  /** Cumulative prompt (prefill) tokens since the server started. */
  promptTokens?: number;
  /** Cumulative generated tokens since the server started. */
  generationTokens?: number;
  /** GPU memory in use, summed over the GPUs reported. */
  gpuMemoryUsedBytes?: number;
  /** GPU memory in all, summed over the GPUs reported. */
  gpuMemoryTotalBytes?: number;
  /** Resident set size of the local server process (`--server-pid`). */
  processRssBytes?: number;
  /** Its high-water mark since the process started (`VmHWM`). */
  processPeakRssBytes?: number;
}

/**
 * Where each common field comes from, per server, in order of preference (the first name a
 * snapshot carries wins). Several series of one name (label sets: vLLM's `engine`, SGLang's
 * ranks, Triton's `model`, one per GPU) are combined: counts, counters and bytes are summed
 * (two engines each running 8 requests run 16; two GPUs each using 70 GiB use 140 GiB), usage
 * ratios take the highest (one full KV cache is a full cache, whatever the others hold).
 *
 * | field | vLLM | SGLang | TGI | Triton + TRT-LLM | trtllm-serve | llama.cpp |
 * |---|---|---|---|---|---|---|
 * | kvCacheUsage | `vllm:kv_cache_usage_perc`, deprecated `vllm:gpu_cache_usage_perc` | `sglang:token_usage`, else `num_used_tokens / max_total_num_tokens` | - | `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}`, else `used / max` | `trtllm_kv_cache_utilization` | `llamacpp:kv_cache_usage_ratio` |
 * | running | `vllm:num_requests_running` | `sglang:num_running_reqs` | `tgi_batch_current_size` | `nv_trt_llm_request_metrics{request_type="scheduled"}` | `trtllm_num_requests_running` | `llamacpp:requests_processing` |
 * | waiting | `vllm:num_requests_waiting` | `sglang:num_queue_reqs` | `tgi_queue_size` | `nv_trt_llm_request_metrics{request_type="waiting"}` | `trtllm_num_requests_waiting` | `llamacpp:requests_deferred` |
 * | preemptions | `vllm:num_preemptions_total` | `sglang:num_retracted_requests_total`, else `sglang:num_retractions_sum` | - | - | - | - |
 * | promptTokens | `vllm:prompt_tokens_total` | `sglang:prompt_tokens_total` | `tgi_request_input_length_sum` | - | `trtllm_prompt_tokens_total` | `llamacpp:prompt_tokens_total` |
 * | generationTokens | `vllm:generation_tokens_total` | `sglang:generation_tokens_total` | `tgi_request_generated_tokens_sum` | - | `trtllm_generation_tokens_total` | `llamacpp:tokens_predicted_total` |
 *
 * GPU memory: dcgm-exporter's `DCGM_FI_DEV_FB_USED` (MiB; total = used + free + reserved, as
 * `DCGM_FI_DEV_FB_FREE` and `DCGM_FI_DEV_FB_RESERVED` report them), else Triton's
 * `nv_gpu_memory_used_bytes` / `nv_gpu_memory_total_bytes`, else the nvidia-smi source's
 * `nvidia_smi:memory_used_bytes` / `memory_total_bytes`; summed over GPUs. TensorRT-LLM's own
 * `runtime_memory_metrics{memory_type="gpu"}` and `trtllm_gpu_memory_usage_bytes` count only
 * the runtime's buffers, not the weights or the KV pool, so they are not GPU memory here.
 * Process memory: the process source's `process:rss_bytes` and `process:peak_rss_bytes`.
 * TGI's token counts are the sums of its per-request histograms, so they grow as requests
 * finish, not token by token.
 */
export function commonFields(values: Record<string, number>): CommonTelemetry {
  const series = new Map<string, { key: string; value: number }[]>();
  for (const [key, value] of Object.entries(values)) {
    if (!Number.isFinite(value)) continue;
    const name = seriesName(key);
    if (!NAMES.has(name)) continue;
    const list = series.get(name);
    if (list) list.push({ key, value });
    else series.set(name, [{ key, value }]);
  }
  const all = (name: string, where?: [string, string]) =>
    (series.get(name) ?? []).filter((s) => !where || seriesLabels(s.key)[where[0]] === where[1]);
  const sum = (name: string, where?: [string, string]) => {
    const list = all(name, where);
    return list.length > 0 ? list.reduce((a, s) => a + s.value, 0) : undefined;
  };
  const max = (name: string) => {
    const list = all(name);
    return list.length > 0 ? Math.max(...list.map((s) => s.value)) : undefined;
  };
  const first = (...candidates: (() => number | undefined)[]) => {
    for (const candidate of candidates) {
      const value = candidate();
      if (value !== undefined) return value;
    }
    return undefined;
  };

  const out: CommonTelemetry = {};
  const set = <K extends keyof CommonTelemetry>(field: K, value: number | undefined) => {
    if (value !== undefined) out[field] = value;
  };
  set(
    'kvCacheUsage',
    first(
      () => max('vllm:kv_cache_usage_perc'),
      () => max('vllm:gpu_cache_usage_perc'),
      () => max('sglang:token_usage'),
      () => ratio(sum('sglang:num_used_tokens'), sum('sglang:max_total_num_tokens')),
      () => tritonKvUsage(all('nv_trt_llm_kv_cache_block_metrics')),
      () => max('trtllm_kv_cache_utilization'),
      () => max('llamacpp:kv_cache_usage_ratio'),
    ),
  );
  set(
    'running',
    first(
      () => sum('vllm:num_requests_running'),
      () => sum('sglang:num_running_reqs'),
      () => sum('tgi_batch_current_size'),
      () => sum('nv_trt_llm_request_metrics', ['request_type', 'scheduled']),
      () => sum('trtllm_num_requests_running'),
      () => sum('llamacpp:requests_processing'),
    ),
  );
  set(
    'waiting',
    first(
      () => sum('vllm:num_requests_waiting'),
      () => sum('sglang:num_queue_reqs'),
      () => sum('tgi_queue_size'),
      () => sum('nv_trt_llm_request_metrics', ['request_type', 'waiting']),
      () => sum('trtllm_num_requests_waiting'),
      () => sum('llamacpp:requests_deferred'),
    ),
  );
  set(
    'preemptions',
    first(
      () => sum('vllm:num_preemptions_total'),
      () => sum('sglang:num_retracted_requests_total'),
      () => sum('sglang:num_retractions_sum'),
    ),
  );
  set(
    'promptTokens',
    first(
      () => sum('vllm:prompt_tokens_total'),
      () => sum('sglang:prompt_tokens_total'),
      () => sum('tgi_request_input_length_sum'),
      () => sum('trtllm_prompt_tokens_total'),
      () => sum('llamacpp:prompt_tokens_total'),
    ),
  );
  set(
    'generationTokens',
    first(
      () => sum('vllm:generation_tokens_total'),
      () => sum('sglang:generation_tokens_total'),
      () => sum('tgi_request_generated_tokens_sum'),
      () => sum('trtllm_generation_tokens_total'),
      () => sum('llamacpp:tokens_predicted_total'),
    ),
  );

  const dcgmUsed = sum('DCGM_FI_DEV_FB_USED');
  if (dcgmUsed !== undefined) {
    out.gpuMemoryUsedBytes = dcgmUsed * MIB;
    const free = sum('DCGM_FI_DEV_FB_FREE');
    if (free !== undefined) {
      out.gpuMemoryTotalBytes = (dcgmUsed + free + (sum('DCGM_FI_DEV_FB_RESERVED') ?? 0)) * MIB;
    }
  } else if (series.has('nv_gpu_memory_used_bytes')) {
    set('gpuMemoryUsedBytes', sum('nv_gpu_memory_used_bytes'));
    set('gpuMemoryTotalBytes', sum('nv_gpu_memory_total_bytes'));
  } else {
    set('gpuMemoryUsedBytes', sum(NVIDIA_SMI_USED));
    set('gpuMemoryTotalBytes', sum(NVIDIA_SMI_TOTAL));
  }
  set('processRssBytes', sum(PROCESS_RSS));
  set('processPeakRssBytes', sum(PROCESS_PEAK_RSS));
  return out;
}

/** Every metric name commonFields reads. */
const NAMES = new Set([
  'vllm:kv_cache_usage_perc',
  'vllm:gpu_cache_usage_perc',
  'vllm:num_requests_running',
  'vllm:num_requests_waiting',
  'vllm:num_preemptions_total',
  'vllm:prompt_tokens_total',
  'vllm:generation_tokens_total',
  'sglang:token_usage',
  'sglang:num_used_tokens',
  'sglang:max_total_num_tokens',
  'sglang:num_running_reqs',
  'sglang:num_queue_reqs',
  'sglang:num_retracted_requests_total',
  'sglang:num_retractions_sum',
  'sglang:prompt_tokens_total',
  'sglang:generation_tokens_total',
  'tgi_batch_current_size',
  'tgi_queue_size',
  'tgi_request_input_length_sum',
  'tgi_request_generated_tokens_sum',
  'nv_trt_llm_kv_cache_block_metrics',
  'nv_trt_llm_request_metrics',
  'trtllm_kv_cache_utilization',
  'trtllm_num_requests_running',
  'trtllm_num_requests_waiting',
  'trtllm_prompt_tokens_total',
  'trtllm_generation_tokens_total',
  'llamacpp:kv_cache_usage_ratio',
  'llamacpp:requests_processing',
  'llamacpp:requests_deferred',
  'llamacpp:prompt_tokens_total',
  'llamacpp:tokens_predicted_total',
  'DCGM_FI_DEV_FB_USED',
  'DCGM_FI_DEV_FB_FREE',
  'DCGM_FI_DEV_FB_RESERVED',
  'nv_gpu_memory_used_bytes',
  'nv_gpu_memory_total_bytes',
  NVIDIA_SMI_USED,
  NVIDIA_SMI_TOTAL,
  PROCESS_RSS,
  PROCESS_PEAK_RSS,
]);

function ratio(used: number | undefined, total: number | undefined): number | undefined {
  return used !== undefined && total !== undefined && total > 0 ? used / total : undefined;
}

/**
 * Triton's KV block family: one group of `kv_cache_block_type` series per model instance.
 * Each group's usage is its `fraction`, else `used / max`; the highest group counts.
 */
function tritonKvUsage(list: { key: string; value: number }[]): number | undefined {
  const groups = new Map<string, Record<string, number>>();
  for (const { key, value } of list) {
    const { kv_cache_block_type: type, ...rest } = seriesLabels(key);
    if (type === undefined) continue;
    const group = JSON.stringify(Object.entries(rest).sort());
    const entry = groups.get(group) ?? {};
    entry[type] = value;
    groups.set(group, entry);
  }
  let usage: number | undefined;
  for (const g of groups.values()) {
    const u = g.fraction ?? ratio(g.used, g.max);
    if (u !== undefined) usage = Math.max(usage ?? u, u);
  }
  return usage;
}

/** The labels of a series key as `seriesKey` writes it (`name{a="1",b="x\"y"}`). */
export function seriesLabels(key: string): Record<string, string> {
  const brace = key.indexOf('{');
  const labels: Record<string, string> = {};
  if (brace < 0) return labels;
  const pattern = /([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*")/g;
  for (const match of key.slice(brace + 1, -1).matchAll(pattern)) {
    labels[match[1]] = JSON.parse(match[2]) as string;
  }
  return labels;
}
