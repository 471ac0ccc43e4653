import type { RequestRecord } from '../record.js';

/** Per-request latency metrics of docs/metrics.md, "Per-request metrics" (undefined where a formula does not apply). */
export interface RequestMetrics {
  ttftMs?: number;
  ttfcMs?: number;
  /** Time to the first tool call (`firstToolCallAt - sentAt`). */
  ttftcMs?: number;
  /** From the first reasoning token to the first answer text (or tool call). */
  thinkingMs?: number;
  /** Answer tokens (output less reasoning) over the time from the first answer text to the end. */
  visibleOutputSpeedTokS?: number;
  ttfbMs?: number;
  e2eMs: number;
  tpotMs?: number;
  queueDelayMs: number;
  userTtftMs?: number;
  userE2eMs: number;
  maxStallMs?: number;
  outputSpeedTokS?: number;
  prefillSpeedTokS?: number;
  /** Events that carried at least one output token. */
  tokenEvents: number;
}

export function requestMetrics(record: RequestRecord): RequestMetrics {
  const { sentAt, scheduledAt, firstTokenAt, lastTokenAt, outputTokens } = record;
  const metrics: RequestMetrics = {
    e2eMs: record.endAt - sentAt,
    queueDelayMs: sentAt - scheduledAt,
    userE2eMs: record.endAt - scheduledAt,
    tokenEvents: 0,
  };
  if (record.headersAt !== undefined) metrics.ttfbMs = record.headersAt - sentAt;
  if (record.firstContentAt !== undefined) metrics.ttfcMs = record.firstContentAt - sentAt;
  if (record.firstToolCallAt !== undefined) metrics.ttftcMs = record.firstToolCallAt - sentAt;
  const answerAt = record.firstContentAt ?? record.firstToolCallAt;
  if (record.firstReasoningAt !== undefined && answerAt !== undefined) {
    metrics.thinkingMs = answerAt - record.firstReasoningAt;
  }
  if (record.firstContentAt !== undefined && record.endAt > record.firstContentAt) {
    const answerTokens = outputTokens - (record.reasoningTokens ?? 0);
    metrics.visibleOutputSpeedTokS = (answerTokens / (record.endAt - record.firstContentAt)) * 1000;
  }
  if (firstTokenAt !== undefined) {
    metrics.ttftMs = firstTokenAt - sentAt;
    metrics.userTtftMs = firstTokenAt - scheduledAt;
    if (record.inputTokens !== undefined && metrics.ttftMs > 0) {
      metrics.prefillSpeedTokS = (record.inputTokens / metrics.ttftMs) * 1000;
    }
  }
  if (firstTokenAt !== undefined && lastTokenAt !== undefined && outputTokens > 1) {
    const decodeMs = lastTokenAt - firstTokenAt;
    metrics.tpotMs = decodeMs / (outputTokens - 1);
    if (decodeMs > 0) metrics.outputSpeedTokS = ((outputTokens - 1) / decodeMs) * 1000;
  }
  let maxStall: number | undefined;
  forEachTokenGap(record, (gapMs) => {
    if (maxStall === undefined || gapMs > maxStall) maxStall = gapMs;
  });
  if (maxStall !== undefined) metrics.maxStallMs = maxStall;
  const tokens = record.events.tokens;
  for (let i = 0; i < tokens.length; i++) if (tokens[i] > 0) metrics.tokenEvents++;
  return metrics;
}

/**
 * Visits each token event after the first with its raw gap to the previous token event
 * (`chunkGap`) and the tokens it carries; per-token `itl` is `tokens` samples of `gapMs / tokens`.
 * Gaps are computed from the integer microsecond deltas, so they sum to exactly
 * `lastTokenAt - firstTokenAt`.
 */
export function forEachTokenGap(
  record: RequestRecord,
  visit: (gapMs: number, tokens: number) => void,
): void {
  const { dtUs, tokens } = record.events;
  let atUs = 0;
  let previousTokenUs = -1;
  for (let i = 0; i < dtUs.length; i++) {
    atUs += dtUs[i];
    const k = tokens[i];
    if (k <= 0) continue;
    if (previousTokenUs >= 0) visit((atUs - previousTokenUs) / 1000, k);
    previousTokenUs = atUs;
  }
}
