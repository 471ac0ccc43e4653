import assert from 'node:assert/strict';
import type { RequestRecord } from '../../src/record.js';

/**
 * How far the HTTP simulator's records are from virtual time's for the same seeded workload
 * (both sorted by id): the mean absolute TTFT and E2E differences per request, in ms, after
 * checking that each request has the same token counts in both.
 */
export function perRequestGaps(
  real: RequestRecord[],
  virtual: RequestRecord[],
): { ttftGapMs: number; e2eGapMs: number; meanE2eMs: number } {
  assert.equal(real.length, virtual.length);
  const n = real.length;
  let ttftGapMs = 0;
  let e2eGapMs = 0;
  for (let i = 0; i < n; i++) {
    const r = real[i];
    const v = virtual[i];
    assert.equal(r.outputTokens, v.outputTokens);
    assert.equal(r.inputTokens, v.inputTokens);
    ttftGapMs += Math.abs(
      (r.firstTokenAt as number) - r.sentAt - ((v.firstTokenAt as number) - v.sentAt),
    );
    e2eGapMs += Math.abs(r.endAt - r.sentAt - (v.endAt - v.sentAt));
  }
  const meanE2eMs = virtual.reduce((s, r) => s + r.endAt - r.sentAt, 0) / n;
  return { ttftGapMs: ttftGapMs / n, e2eGapMs: e2eGapMs / n, meanE2eMs };
}
