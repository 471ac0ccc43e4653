import type { VllmMemoryPlan } from '../memory/footprint.js';
import type { RunSummary } from '../metrics/summary.js';
import { type Warning, warning } from '../metrics/warnings.js';

/**
 * The chapter's traps, as warnings on a run: results from short contexts extrapolated to long
 * ones, and prefill latency ignored. (Throughput without its load cannot happen: the renderers
 * always print the load; temperature, sample counts and client limits are warned elsewhere.)
 */

/**
 * Prefill is the cost when prompts are this many times the answers, or when the first token,
 * with queueing set aside, takes at least this share of a request's time.
 */
export const PREFILL_SHARE = 0.5;
export const PREFILL_INPUT_RATIO = 8;
/**
 * Long prompts count only where prefill is at least this share of a request's time or of the
 * server's: a prompt token costs a fraction of a decoded one (prefill is one compute-bound
 * pass), so a light-load run whose first token is a few percent of the wait spent its time
 * decoding, however its token counts compare (issue 31: "TTFT is only 0 %"). Under load the
 * decodes share their steps while each prompt is still processed, so the server's share is
 * taken too: one unqueued prefill per completed request, against the run's time.
 */
export const PREFILL_MIN_SHARE = 0.05;

/**
 * `prefill_dominated`, only where prefill really is the cost. A run's mean TTFT includes the
 * time requests queued in the server, which at saturation dwarfs the prefill itself (a 128-in /
 * 128-out run is not prefill-bound because it queued), so the first token's share is taken with
 * the fastest first token of the run, the one that queued least, as its prefill time: a lower
 * bound on the unqueued TTFT (of the shortest prompt), set against the mean time the answer took
 * to stream (E2E - TTFT). Long prompts alone (inputs 8x the outputs) also count: then most tokens
 * the server processes are prompt tokens, whatever the load.
 */
export function prefillWarning(s: RunSummary): Warning | undefined {
  const counted = s.requests.completed + s.requests.failed;
  if (s.requests.completed === 0 || counted === 0) return undefined;
  const ttft = s.latency.ttftMs;
  const streamMs = Math.max(0, s.latency.e2eMs.mean - ttft.mean);
  // Summaries written without a minimum (and synthetic ones) fall back to the mean.
  const prefillMs = Number.isFinite(ttft.min) ? Math.min(ttft.min, ttft.mean) : ttft.mean;
  const share = prefillMs + streamMs > 0 ? prefillMs / (prefillMs + streamMs) : 0;
  const queued = prefillMs < ttft.mean * (1 - 0.1);
  const input = s.tokens.input / counted;
  const output = Math.max(1, s.tokens.output / counted);
  const slowFirstToken = share >= PREFILL_SHARE;
  const serverShare = (prefillMs / 1000) * s.throughput.requestsPerS;
  const longPrompts =
    input / output >= PREFILL_INPUT_RATIO && Math.max(share, serverShare) >= PREFILL_MIN_SHARE;
  if (!slowFirstToken && !longPrompts) return undefined;
  return warning('prefill_dominated', {
    share,
    queued,
    prefillMs,
    meanTtftMs: ttft.mean,
    streamMs,
    inputTokens: input,
    outputTokens: output,
    slowFirstToken,
    longPrompts,
  });
}

/**
 * `--target-context`: the longest prompt + output the user plans for. Past what was measured,
 * numbers do not carry over: say so, with the KV cache that length needs (analytic).
 */
export function targetContextWarning(
  targetTokens: number,
  measuredMaxTokens: number,
  kv?: { plan: VllmMemoryPlan; blockSize: number; concurrency: number },
): Warning | undefined {
  if (targetTokens <= measuredMaxTokens) return undefined;
  let sizing: string | undefined;
  if (kv) {
    const perSequence =
      Math.ceil(targetTokens / kv.blockSize) * kv.blockSize * kv.plan.kvBytesPerToken;
    const measured =
      Math.ceil(measuredMaxTokens / kv.blockSize) * kv.blockSize * kv.plan.kvBytesPerToken;
    const fits = Math.floor(kv.plan.kvPoolBytes / perSequence);
    sizing = `Each sequence then holds ${(perSequence / 1e9).toFixed(2)} GB of KV cache instead of ${(measured / 1e9).toFixed(2)} GB (${(perSequence / measured).toFixed(1)}x), so the ${(kv.plan.kvPoolBytes / 1e9).toFixed(1)} GB pool holds ${fits} such sequences${fits < kv.concurrency ? `, fewer than the ${kv.concurrency} measured at once: expect queueing or preemption` : ''}; prefill time grows at least linearly with it.`;
  }
  return warning('context_extrapolation', {
    targetTokens,
    measuredMaxTokens,
    ...(sizing ? { sizing } : {}),
  });
}

/**
 * The warnings a run adds to its summary from what it was asked (the plan's temperature) and
 * what the summary shows (prefill-bound), in the order they are added.
 */
export function runWarnings(plan: { temperature: number }, s: RunSummary): Warning[] {
  const warnings: Warning[] = [];
  const prefill = prefillWarning(s);
  if (prefill) warnings.push(prefill);
  if (plan.temperature > 0) {
    warnings.push(warning('nonzero_temperature', { temperature: plan.temperature }));
  }
  return warnings;
}
