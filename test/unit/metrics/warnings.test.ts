/**
 * The warning catalogue: every code builds a terminal message of one sentence under the limit
 * with the longest figures a real run prints, carries a severity, and is built nowhere else.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  severityOf,
  WARNING_MESSAGE_MAX_CHARS,
  WARNING_SEVERITIES,
  WARNINGS,
  type WarningCode,
  type WarningFigures,
  warning,
} from '../../../src/metrics/warnings.js';
import { resultSchemas } from '../../../src/results/schemas.js';

/**
 * Realistic worst cases: the largest counts, the longest reasons and advice the builders print
 * (16 workers, five-digit counts, failure kinds of every sort). A new code must add its own:
 * the type makes a missing one a compile error.
 */
const WORST: { [C in WarningCode]: WarningFigures<C>[] } = {
  client_limited: [
    {
      reasons: ['x'.repeat(400), 'y', 'z'],
      causes: ['worker 15: stamps up to 1234.5 ms late at p99 (limit 61.7 ms)'],
      advice:
        'more --workers cannot help (16 on 16 usable cores): use another machine or shards (--shard)',
    },
    {
      reasons: ['worker 15: client CPU 100% of one core (one thread) (limit 90%): busy'],
      causes: ['worker 15: client CPU 100% of one core (one thread) (limit 90%)'],
      advice: 'use --workers 127 to spread the streams over more cores',
    },
    { reasons: ['a', 'b', 'c'] },
  ],
  coalesced_events: [{ share: 1 }],
  interrupted: [
    { unsent: 1_234_567 },
    { unsent: 0 },
    { profile: 'capacity search', missing: 'batches' },
  ],
  no_requests: [{}],
  requests_failed: [
    {
      failed: 123_456,
      counted: 123_456,
      kinds: 'http_4xx 12,345, http_5xx 12,345, timeout 12,345, connection 12,345, stream 12,345',
    },
  ],
  below_offered_rate: [
    { offeredPerS: 12_345.67, wholePerS: 1_234.56, e2eP95Ms: 1_234_567 },
    {
      offeredPerS: 12_345.67,
      wholePerS: 1_234.56,
      steady: { requestsPerS: 1_234.56, windowS: 12_345.6 },
      keptUpShare: 0.95,
    },
  ],
  max_concurrency_capped: [
    {
      cap: 10_000,
      offeredPerS: 12_345.67,
      wholePerS: 1_234.56,
      queueDelayP50Ms: 1_234_567,
      deliveredShare: 0.95,
    },
  ],
  coordinated_omission: [
    { loop: 'closed', share: 0.999, limit: 0.05, concurrency: 65_536 },
    { loop: 'open', share: 123.45, limit: 0.1, userP99Ms: 1_234_567, serviceP99Ms: 1_234_567 },
  ],
  load_not_delivered: [{ concurrency: 65_536, measured: 12_345.6, limit: 0.9 }],
  prefix_cache_uncontrolled: [{}],
  prefix_hit_rate_missed: [
    {
      target: 0.5,
      achieved: 0.0001,
      from: 'vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total',
      tolerance: 0.03,
    },
  ],
  drain_tail: [
    {
      offeredPerS: 12_345.67,
      wholePerS: 1_234.56,
      drainS: 12_345.6,
      drainShare: 0.999,
      steady: { requestsPerS: 1_234.56, outputTokensPerS: 1_234_567, windowS: 12_345.6 },
    },
  ],
  low_sample: [{ completed: 99 }],
  input_drift: [{ meanInput: 123_456.7, meanRequested: 12_345.6, limit: 0.05 }],
  output_short: [
    { short: 123_456, completed: 123_456, meanOutput: 12_345.6, meanRequested: 32_768 },
  ],
  multi_token_events: [{ tokensPerEvent: 1234.56 }],
  no_usage: [{ requests: 123_456, implausible: true }],
  resent_requests: [{ resent: 123_456, counted: 123_456 }],
  implausible_usage: [{ requests: 123_456 }],
  token_count_mismatch: [{ requests: 123_456 }],
  kv_cache_full: [{ peak: 1, mean: 0.999, limit: 0.99 }],
  preemptions: [{ preemptions: 1_234_567 }],
  prefix_cache_hits: [
    {
      cachedShare: 0.999,
      tokens: { cached: 123_456_000, prompt: 123_456_789 },
      source: 'prefill',
      limit: 0.2,
    },
    { cachedShare: 0.999, source: 'rate', limit: 0.2 },
  ],
  prefill_dominated: [
    {
      share: 0.99,
      queued: true,
      prefillMs: 123_456,
      meanTtftMs: 1_234_567,
      streamMs: 123_456,
      inputTokens: 131_072,
      outputTokens: 1,
      slowFirstToken: true,
      longPrompts: true,
    },
    {
      share: 0.01,
      queued: true,
      prefillMs: 123_456,
      meanTtftMs: 1_234_567,
      streamMs: 123_456,
      inputTokens: 131_072,
      outputTokens: 1,
      slowFirstToken: false,
      longPrompts: true,
    },
  ],
  context_extrapolation: [{ targetTokens: 1_048_576, measuredMaxTokens: 131_072 }],
  nonzero_temperature: [{ temperature: 1.2345 }],
  tls_unverified: [{}],
  deadline_passed: [{ deadlineS: 1_234_567 }],
  worker_terminated: [
    { worker: 128, workers: 128, answerS: 10, records: 123_456, missing: 12_345 },
  ],
  worker_failed: [
    { worker: 128, workers: 128, reason: `Error: ${'e'.repeat(500)}`, records: 1, missing: 12_345 },
  ],
  loadgen_failed: [{ reason: `RangeError: ${'r'.repeat(500)}`, records: 123_456 }],
  shards_not_aligned: [{ spreadS: 12_345.6 }],
  records_damaged: [{ lines: 1_234_567, stretches: 123_456, said: ['x'.repeat(500)] }],
  no_steady_state: [{ truncated: 1_234_565, completions: 1_234_565, truncatedS: 123_456.7 }],
  warmup_shift: [
    {
      truncated: 1_234_565,
      completions: 1_234_565,
      truncatedS: 123_456.7,
      moved: [
        { key: 'outputTokensPerS', by: -0.999 },
        { key: 'ttftP99Ms', by: 123.4 },
        { key: 'itlP99Ms', by: 12.3 },
        { key: 'e2eP99Ms', by: 1.2 },
        { key: 'e2eP50Ms', by: 0.5 },
      ],
    },
  ],
};

describe('the warning catalogue', () => {
  const codes = Object.keys(WARNINGS) as WarningCode[];

  test('every message stays one sentence under the limit with the worst figures', () => {
    for (const code of codes) {
      const cases = WORST[code] as WarningFigures<typeof code>[];
      assert.ok(cases.length > 0, code);
      for (const figures of cases) {
        const w = warning(code, figures as never);
        assert.equal(w.code, code);
        assert.ok(
          w.message.length <= WARNING_MESSAGE_MAX_CHARS,
          `${code}: ${w.message.length} characters: ${w.message}`,
        );
        // One sentence on one line: no line breaks, and no second sentence after a full stop.
        assert.doesNotMatch(w.message, /\n|\.\s+[A-Z]/, code);
        assert.ok(WARNING_SEVERITIES.includes(w.severity ?? ('none' as never)), code);
        if (w.detail !== undefined) assert.ok(w.detail.length > 0, code);
      }
    }
  });

  test('codes are unique snake_case, and no source file but the catalogue writes one', () => {
    assert.equal(new Set(codes).size, codes.length);
    for (const code of codes) assert.match(code, /^[a-z]+(_[a-z]+)*$/);
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory()) walk(path);
        else if (path.endsWith('.ts') && !path.endsWith(join('metrics', 'warnings.ts'))) {
          const text = readFileSync(path, 'utf8');
          for (const m of text.matchAll(/code: '([a-z_]+)'/g)) {
            if ((codes as string[]).includes(m[1])) offenders.push(`${path}: ${m[1]}`);
          }
        }
      }
    };
    walk('src');
    assert.deepEqual(offenders, []);
  });

  test('older summaries: a warning without a severity loads and reads as its code says', () => {
    assert.equal(severityOf({ code: 'client_limited' }), 'error');
    assert.equal(severityOf({ code: 'drain_tail' }), 'info');
    assert.equal(severityOf({ code: 'a_code_from_elsewhere' }), 'warning');
    const w = warning('low_sample', { completed: 12 });
    const { severity: _, ...old } = w;
    for (const saved of [old, w]) {
      const parsed = resultSchemas().summarySchema.shape.warnings.parse([saved]);
      assert.deepEqual(parsed, [saved]);
    }
    const detailed = warning('resent_requests', { resent: 1, counted: 2 });
    assert.ok(detailed.detail);
    assert.deepEqual(resultSchemas().summarySchema.shape.warnings.parse([detailed]), [detailed]);
  });
});
