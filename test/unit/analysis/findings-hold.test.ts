/**
 * Issue 15, "also seen": a finding must hold for its own numbers. A fitted cost below zero is
 * held at zero and said so; a poor fit is no finding; the prefill warning says what its shares
 * show; the sweep headline has no stray colon.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  type DecodeMeasurement,
  fitDecode,
  fitLinearNonNegative,
  fitPrefill,
  MIN_FIT_R2,
  type PrefillMeasurement,
} from '../../../src/analysis/probe.js';
import { prefillWarning } from '../../../src/analysis/traps.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import { formatDecodeModel, formatPrefillModel } from '../../../src/report/probeText.js';
import { loadReportInput } from '../../../src/results/load.js';
import { REPO } from '../../../tools/repo.js';

const decodePoint = (concurrency: number, tpotMeanMs: number): DecodeMeasurement => ({
  concurrency,
  requests: 8,
  completed: 8,
  failed: 0,
  meanConcurrency: concurrency,
  outputTokensMean: 256,
  itlP50Ms: tpotMeanMs,
  itlP99Ms: tpotMeanMs,
  tpotMeanMs,
  tpotP50Ms: tpotMeanMs,
});

const prefillPoint = (inputTokens: number, ttftMeanMs: number): PrefillMeasurement => ({
  inputTokens,
  batch: 1,
  requests: 8,
  completed: 8,
  failed: 0,
  countedInputTokens: inputTokens,
  meanConcurrency: 1,
  inputTokensPerS: (inputTokens * 1000) / ttftMeanMs,
  ttftMeanMs,
  ttftP50Ms: ttftMeanMs,
  ttftP99Ms: ttftMeanMs,
});

describe('fits stay in their physical range', () => {
  test('decode points whose least-squares line has a negative per-step cost: held at 0, and said', () => {
    // Concurrency 1, 2, 4 as in the issue: the ordinary fit gives TPOT ~ -0.8 ms + 8.4 ms x c.
    const points = [decodePoint(1, 8), decodePoint(2, 15), decodePoint(4, 33)];
    const fit = fitDecode(points);
    assert.ok(fit);
    assert.equal(fit.stepMs, 0);
    assert.ok(fit.perSequenceMs > 0);
    assert.equal(fit.held?.term, 'stepMs');
    assert.ok((fit.held?.unconstrainedMs ?? 0) < 0);
    assert.ok(fit.reliable);
    const text = formatDecodeModel(fit);
    assert.doesNotMatch(text, /~ -/);
    assert.match(text, /per-step cost held at 0: least squares gave -\d/);
  });

  test('decode points a line explains poorly print no parameters, only that there is no reliable fit', () => {
    const fit = fitDecode([
      decodePoint(1, 10),
      decodePoint(2, 30),
      decodePoint(4, 12),
      decodePoint(8, 25),
    ]);
    assert.ok(fit);
    assert.ok(fit.r2 < MIN_FIT_R2);
    assert.equal(fit.reliable, false);
    assert.match(
      formatDecodeModel(fit),
      /^No reliable fit of TPOT against concurrency \(r2 0\.\d{4} < 0\.9/,
    );
  });

  test('flat decode points are fitted well at any r²: a reliable finding', () => {
    const fit = fitDecode([decodePoint(1, 10), decodePoint(2, 10.01), decodePoint(4, 9.99)]);
    assert.ok(fit?.reliable);
  });

  test('prefill with a negative fixed latency: held at 0, rate refitted through the origin', () => {
    const fit = fitPrefill([prefillPoint(128, 5), prefillPoint(1024, 60), prefillPoint(4096, 250)]);
    assert.ok(fit);
    assert.equal(fit.fixedMs, 0);
    assert.ok((fit.fixedMsUnconstrained ?? 0) < 0);
    assert.match(formatPrefillModel(fit)[0], /fixed latency held at 0: least squares gave -/);
  });

  test('non-negative least squares: the ordinary fit where it is feasible, the best clamped one else', () => {
    const ols = fitLinearNonNegative([1, 2, 3], [3, 5, 7]);
    assert.deepEqual([ols?.intercept, ols?.slope, ols?.held], [1, 2, undefined]);
    // Falling points: the flat line at their mean beats any line through the origin.
    const falling = fitLinearNonNegative([1, 2, 3], [9, 8, 7]);
    assert.deepEqual([falling?.intercept, falling?.slope, falling?.held?.term], [8, 0, 'slope']);
  });
});

function summary(ttftMs: number, e2eMs: number, input: number, output: number): RunSummary {
  return {
    requests: { completed: 10, failed: 0 },
    latency: { ttftMs: { mean: ttftMs }, e2eMs: { mean: e2eMs } },
    tokens: { input: input * 10, output: output * 10 },
    // One request at a time: the server's prefill share is the request's.
    throughput: { requestsPerS: 1000 / e2eMs },
  } as unknown as RunSummary;
}

describe('prefill_dominated says what its numbers show', () => {
  test('long prompts but TTFT a small share of the wait: users wait for the stream, not the first token', () => {
    const w = prefillWarning(summary(60, 1000, 2048, 128));
    assert.ok(w);
    assert.match(w.detail ?? '', /TTFT is only 6% of end-to-end latency/);
    assert.doesNotMatch(`${w.message} ${w.detail}`, /wait mostly for the first token/);
  });

  test('long prompts but a first token of a few percent of the wait: decode was the cost, no warning', () => {
    // 20 ms of 8 s (0.25 %) used to read "TTFT is only 0% of end-to-end latency".
    assert.equal(prefillWarning(summary(20, 8000, 2048, 128)), undefined);
    assert.ok(prefillWarning(summary(450, 8000, 2048, 128)), '5.6 % warns');
  });

  test('TTFT most of the wait: users wait mostly for the first token', () => {
    const w = prefillWarning(summary(700, 1000, 2048, 16));
    assert.ok(w);
    assert.match(w.message, /TTFT is 70% of end-to-end latency and prompts are 128x the answers/);
    assert.match(w.detail ?? '', /users wait mostly for the first token/);
  });
});

test('the sweep headline of a scenario without a search or a knee has no stray colon', async () => {
  const input = await loadReportInput(join(REPO, 'test/fixtures/report/sweep'));
  assert.equal(input.kind, 'sweep');
  const sweep = (input as { sweep: { scenarios: Record<string, unknown>[] } }).sweep;
  for (const s of sweep.scenarios) {
    delete s.search;
    delete s.knee;
  }
  const facts = /<p class="facts">([^<]*)<\/p>/.exec(renderHtmlReport(input))?.[1] ?? '';
  assert.match(
    facts,
    /^chat: at most [\d,]+ output tok\/s measured \(at (concurrency [\d.]+|[\d.]+ req\/s)\)/,
  );
  assert.doesNotMatch(facts, /:,/);
});
