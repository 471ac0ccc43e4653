import assert from 'node:assert/strict';
import type { RequestRecord } from '../../src/record.js';

export interface Gaps {
  /** Mean and median absolute TTFT difference per request, ms. */
  ttftGapMs: number;
  medianTtftGapMs: number;
  /** Mean and median absolute E2E difference per request, ms. */
  e2eGapMs: number;
  medianE2eGapMs: number;
  /** Mean E2E in virtual time, ms. */
  meanE2eMs: number;
}

/**
 * How far the HTTP simulator's records are from virtual time's for the same seeded workload
 * (both sorted by id), after checking that each request has the same token counts in both.
 * Medians stand against a busy machine's occasional late timer better than means.
 */
export function perRequestGaps(real: RequestRecord[], virtual: RequestRecord[]): Gaps {
  assert.equal(real.length, virtual.length);
  const ttft: number[] = [];
  const e2e: number[] = [];
  real.forEach((r, i) => {
    const v = virtual[i];
    assert.equal(r.outputTokens, v.outputTokens);
    assert.equal(r.inputTokens, v.inputTokens);
    ttft.push(
      Math.abs((r.firstTokenAt as number) - r.sentAt - ((v.firstTokenAt as number) - v.sentAt)),
    );
    e2e.push(Math.abs(r.endAt - r.sentAt - (v.endAt - v.sentAt)));
  });
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  const median = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  };
  return {
    ttftGapMs: mean(ttft),
    medianTtftGapMs: median(ttft),
    e2eGapMs: mean(e2e),
    medianE2eGapMs: median(e2e),
    meanE2eMs: mean(virtual.map((r) => r.endAt - r.sentAt)),
  };
}
