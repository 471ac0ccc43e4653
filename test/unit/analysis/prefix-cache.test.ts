/**
 * `prefix_cache_hits`: prompts the server served from its cache though the workload asked for
 * no sharing, read from the requests' own answers (usage's cached tokens, llama.cpp's prompt
 * tokens processed) and, failing those, from the server's prefix-cache counters.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  PREFIX_CACHE_WARN_SHARE,
  prefixCacheWarning,
  workloadSharesPrefixes,
} from '../../../src/analysis/prefixCache.js';
import { summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { findScenario } from '../../../src/workload/scenarios.js';

/** A completed 200-token request; `cached` from usage, `processed` from llama.cpp's timings. */
function record(id: number, o: { cached?: number; processed?: number }): RequestRecord {
  const sentAt = id * 100;
  return {
    id,
    phase: 'measure',
    scheduledAt: sentAt,
    sentAt,
    firstTokenAt: sentAt + 20,
    lastTokenAt: sentAt + 50,
    endAt: sentAt + 51,
    status: 200,
    requestedInputTokens: 200,
    requestedOutputTokens: 4,
    inputTokens: 200,
    inputTokensSource: 'server',
    outputTokens: 4,
    outputTokensSource: 'server',
    events: { dtUs: [20_000, 10_000, 10_000, 10_000], tokens: [1, 1, 1, 1] },
    ...(o.cached !== undefined ? { cachedInputTokens: o.cached } : {}),
    ...(o.processed !== undefined ? { serverTiming: { prefillTokens: o.processed } } : {}),
  } as RequestRecord;
}

const run = (records: RequestRecord[]) =>
  summarize(records, { load: { mode: 'closed', concurrency: 1 } });

describe('prefix_cache_hits', () => {
  test("llama.cpp's prompt tokens processed: half the requests read 1 of 200 tokens", () => {
    // Issue 47's llama-server run: half its requests prefilled 1 prompt token, half 136 of 201.
    const records = Array.from({ length: 20 }, (_, i) =>
      record(i, { processed: i % 2 === 0 ? 1 : 136 }),
    );
    const s = run(records);
    assert.deepEqual(s.tokens.cachedInput, {
      cached: 10 * 199 + 10 * 64,
      ofInput: 4000,
      requests: 20,
      source: 'prefill',
    });
    const w = prefixCacheWarning(s, undefined, false);
    assert.ok(w);
    assert.equal(w.code, 'prefix_cache_hits');
    assert.equal(w.severity, 'warning');
    assert.match(
      w.message,
      /^prefix cache uncontrolled: the server served 65\.8% of prompt tokens from its prefix cache/,
    );
    assert.match(w.message, /TTFT is not a cold prefill's; send fresh prompts or reset its cache$/);
    assert.match(
      w.detail ?? '',
      /llama\.cpp's prompt tokens processed per request: 2,630 of 4,000/,
    );
  });

  test("usage's cached_tokens come first, and a cold run says nothing", () => {
    const warm = run(
      Array.from({ length: 10 }, (_, i) => record(i, { cached: 192, processed: 200 })),
    );
    assert.equal(warm.tokens.cachedInput?.source, 'usage');
    assert.match(prefixCacheWarning(warm, undefined, false)?.message ?? '', / 96\.0% of prompt/);
    const cold = run(Array.from({ length: 10 }, (_, i) => record(i, { cached: 16 })));
    assert.ok((cold.tokens.cachedInput?.cached ?? 0) / 2000 < PREFIX_CACHE_WARN_SHARE);
    assert.equal(prefixCacheWarning(cold, undefined, false), undefined);
    // Nothing told: no figure, no warning.
    const silent = run([record(0, {})]);
    assert.equal(silent.tokens.cachedInput, undefined);
    assert.equal(prefixCacheWarning(silent, undefined, false), undefined);
  });

  test("the server's counters when the requests told nothing: README's repeated run", () => {
    const s = run([record(0, {})]);
    const server = {
      prefixCache: {
        hitRate: 51_000 / 51_200,
        from: 'vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total',
        hitTokens: 51_000,
        queriedTokens: 51_200,
      },
    };
    const w = prefixCacheWarning(s, server, false);
    assert.match(w?.message ?? '', /served 99\.6% of prompt tokens/);
    assert.match(w?.detail ?? '', /prefix-cache counters: 51,000 of 51,200/);
    // SGLang tells only its rate.
    const rate = prefixCacheWarning(s, { prefixCache: { hitRate: 0.5, from: 'x' } }, false);
    assert.match(rate?.message ?? '', /served 50\.0%/);
    assert.equal(
      prefixCacheWarning(s, { prefixCache: { hitRate: 0.1, from: 'x' } }, false),
      undefined,
    );
  });

  test('a workload that asks for sharing is not warned of its own cache hits', () => {
    const s = run(Array.from({ length: 10 }, (_, i) => record(i, { cached: 192 })));
    assert.equal(prefixCacheWarning(s, undefined, true), undefined);
    const chat = findScenario('chat');
    assert.ok(chat);
    assert.equal(workloadSharesPrefixes(chat, {}), false);
    assert.equal(workloadSharesPrefixes({ ...chat, sharedPrefixTokens: 128 }, {}), true);
    assert.equal(workloadSharesPrefixes(chat, { dataset: true }), true);
    for (const name of ['multi-turn', 'agent']) {
      const scenario = findScenario(name);
      assert.ok(scenario, name);
      assert.equal(workloadSharesPrefixes(scenario, {}), true, name);
    }
  });
});
