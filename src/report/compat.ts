import { percentileOfSorted } from '../metrics/distribution.js';
import { forEachTokenGap } from '../metrics/requestMetrics.js';
import type { RunSummary } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';

/**
 * vLLM `bench serve` result JSON from infergauge's raw records (docs/metrics.md): the same
 * field names and formulas (np.mean / np.median / population np.std / np.percentile), so that
 * dashboards and scripts written for vLLM keep working. Differences from infergauge's own view,
 * kept on purpose: ITL here is per stream chunk (vLLM's), not per token; TPOT is per request
 * from end-to-end latency; failed requests are excluded and counted in `failed`.
 */
export interface VllmBenchResult {
  date: string;
  backend: string;
  model_id: string;
  tokenizer_id: string;
  num_prompts: number;
  request_rate: number | 'inf';
  burstiness: number;
  max_concurrency: number | null;
  duration: number;
  completed: number;
  failed: number;
  total_input_tokens: number;
  total_output_tokens: number;
  request_throughput: number;
  request_goodput: number | null;
  output_throughput: number;
  total_token_throughput: number;
  input_lens: number[];
  output_lens: number[];
  ttfts: number[];
  itls: number[][];
  errors: string[];
  [metric: string]: unknown;
}

const mean = (xs: number[]) => (xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const std = (xs: number[]) => {
  if (xs.length === 0) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / xs.length);
};

export function vllmBenchResult(
  records: RequestRecord[],
  summary: RunSummary,
  context: {
    model: string;
    backend: string;
    tokenizer: string;
    date: string;
    percentiles?: number[];
  },
): VllmBenchResult {
  const measured = records.filter((r) => r.phase === 'measure');
  const ok = measured.filter((r) => !r.error && r.firstTokenAt !== undefined);
  const ttfts: number[] = [];
  const tpots: number[] = [];
  const itls: number[][] = [];
  const e2els: number[] = [];
  for (const r of ok) {
    const ttft = (r.firstTokenAt as number) - r.sentAt;
    const latency = r.endAt - r.sentAt;
    ttfts.push(ttft / 1000);
    e2els.push(latency);
    // vLLM: tpot = (latency - ttft) / (output_len - 1), per request with more than one token.
    if (r.outputTokens > 1) tpots.push((latency - ttft) / (r.outputTokens - 1));
    const gaps: number[] = [];
    forEachTokenGap(r, (gapMs) => gaps.push(gapMs / 1000));
    itls.push(gaps);
  }
  // The per-request arrays hold every request, as vLLM's serve.py writes them
  // (`[output.ttft for output in outputs]`): a failed one with its defaults, ttft 0.0, itl [] and
  // an output length of 0, so that index i of every array is request i.
  const succeeded = new Set(ok);
  let next = 0;
  const perRequest = measured.map((r) => {
    if (!succeeded.has(r)) return { ttft: 0, itl: [] as number[], outputLen: 0 };
    const i = next++;
    return { ttft: ttfts[i], itl: itls[i], outputLen: r.outputTokens };
  });
  const load = summary.load;
  const durationS = summary.durationS;
  const inputTokens = ok.reduce((a, r) => a + (r.inputTokens ?? r.requestedInputTokens), 0);
  const outputTokens = ok.reduce((a, r) => a + r.outputTokens, 0);
  const result: VllmBenchResult = {
    date: context.date,
    backend: context.backend,
    model_id: context.model,
    tokenizer_id: context.tokenizer,
    num_prompts: measured.length,
    request_rate: load.mode === 'open' ? load.rate : 'inf',
    burstiness: load.mode === 'open' ? (load.burstiness ?? 1) : 1,
    max_concurrency: load.mode === 'closed' ? load.concurrency : (load.maxConcurrency ?? null),
    duration: durationS,
    completed: ok.length,
    failed: measured.length - ok.length,
    total_input_tokens: inputTokens,
    total_output_tokens: outputTokens,
    request_throughput: durationS > 0 ? ok.length / durationS : 0,
    request_goodput: summary.goodput ? summary.goodput.requestsPerS : null,
    output_throughput: durationS > 0 ? outputTokens / durationS : 0,
    total_token_throughput: durationS > 0 ? (inputTokens + outputTokens) / durationS : 0,
    input_lens: measured.map((r) => r.inputTokens ?? r.requestedInputTokens),
    output_lens: perRequest.map((p) => p.outputLen),
    ttfts: perRequest.map((p) => p.ttft),
    itls: perRequest.map((p) => p.itl),
    errors: measured.map((r) => (r.error ? `${r.error.kind}: ${r.error.message}` : '')),
  };
  const allItls = itls.flat();
  const percentiles = context.percentiles ?? [99];
  for (const [name, values, scale] of [
    ['ttft', ttfts, 1000],
    ['tpot', tpots, 1],
    ['itl', allItls, 1000],
    ['e2el', e2els, 1],
  ] as const) {
    const ms = values.map((v) => v * scale);
    const sorted = Float64Array.from(ms).sort();
    result[`mean_${name}_ms`] = mean(ms);
    result[`median_${name}_ms`] = sorted.length > 0 ? percentileOfSorted(sorted, 50) : 0;
    result[`std_${name}_ms`] = std(ms);
    for (const p of percentiles) {
      result[`p${p}_${name}_ms`] = sorted.length > 0 ? percentileOfSorted(sorted, p) : 0;
    }
  }
  return result;
}
