/**
 * `compare` names comparisons that are not like for like (issue 47): a prefix cache that served
 * one run, identical prompts sent to a caching server, a client limit, another simulator. The
 * reasons qualify the verdicts (never refuse them) and show in every rendering.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type RunConditions,
  type RunUnit,
  sampleRecords,
  unlikeReasons,
} from '../../../src/analysis/compare.js';
import type { RequestRecord } from '../../../src/record.js';
import {
  compareTargets,
  renderHtml,
  renderJson,
  renderMarkdown,
  renderTerminal,
} from '../../../src/report/compare.js';
import type { LoadedUnit } from '../../../src/results/compareInput.js';

/** `n` requests of one TTFT and eight tokens 10 ms apart, two at a time. */
function records(ttftMs: number, n = 120): RequestRecord[] {
  return Array.from({ length: n }, (_, id) => {
    const sentAt = Math.floor(id / 2) * (ttftMs + 80);
    const dtUs = [ttftMs * 1000, ...Array.from({ length: 7 }, () => 10_000)];
    return {
      id,
      phase: 'measure' as const,
      scheduledAt: sentAt,
      sentAt,
      firstTokenAt: sentAt + ttftMs,
      firstContentAt: sentAt + ttftMs,
      lastTokenAt: sentAt + ttftMs + 70,
      endAt: sentAt + ttftMs + 70,
      requestedInputTokens: 256,
      requestedOutputTokens: 8,
      status: 200,
      outputTokens: 8,
      outputTokensSource: 'server' as const,
      events: { dtUs, tokens: dtUs.map(() => 1), contentChars: dtUs.map(() => 4) },
    };
  });
}

const live: RunConditions = { seed: 42, persistentServer: true };

function unit(conditions: RunConditions, ttftMs = 100, label = 'run'): RunUnit {
  return {
    label,
    scenario: 'chat',
    load: { mode: 'closed', concurrency: 2 },
    workload: { lengths: '256 in / 8 out tokens' },
    sample: sampleRecords(records(ttftMs)),
    conditions,
  };
}
const codes = (a: RunConditions, b: RunConditions) =>
  unlikeReasons(unit(a), unit(b)).map((r) => r.code);

describe('unlike comparisons (pure)', () => {
  test('hit rates 0 % and 99 %: the cache served B, named with both rates', () => {
    const [reason] = unlikeReasons(
      unit({ ...live, promptSalt: 1, prefixCacheHitRate: 0 }),
      unit({ ...live, promptSalt: 2, prefixCacheHitRate: 0.99 }),
    );
    assert.equal(reason.code, 'prefix_cache_differs');
    assert.match(reason.text, /A 0 %, B 99 %.*more of B's prompts/);
    // Within 5 percentage points (a shared system prompt cached in both): like for like.
    assert.deepEqual(
      codes(
        { ...live, promptSalt: 1, prefixCacheHitRate: 0.5 },
        { ...live, promptSalt: 2, prefixCacheHitRate: 0.53 },
      ),
      [],
    );
  });

  test('identical prompts to a caching server: same seed and salt, or both from before salts', () => {
    const cached = { ...live, prefixCacheHitRate: 0.4 };
    assert.deepEqual(codes({ ...cached, promptSalt: 7 }, { ...cached, promptSalt: 7 }), [
      'identical_prompts',
    ]);
    assert.deepEqual(codes(cached, { ...cached, promptSalt: 0 }), ['identical_prompts']);
    // Fresh salts (the default): nothing in common to find in the cache.
    assert.deepEqual(codes({ ...cached, promptSalt: 7 }, { ...cached, promptSalt: 8 }), []);
    // The same dataset's entries are the same prompts whatever the seed.
    assert.deepEqual(
      codes(
        { ...cached, seed: 1, datasetPrompts: true },
        { ...cached, seed: 2, datasetPrompts: true },
      ),
      ['identical_prompts'],
    );
    // A server that reports no hits does not cache: nothing to name.
    assert.deepEqual(
      codes({ ...live, prefixCacheHitRate: 0 }, { ...live, prefixCacheHitRate: 0 }),
      [],
    );
    // Counters not read: the same prompts to the same server may have been cached.
    const unknown = unlikeReasons(unit(live), unit(live));
    assert.equal(unknown[0].code, 'identical_prompts');
    assert.match(unknown[0].text, /not read/);
    // A simulator each run started itself begins with an empty cache.
    assert.deepEqual(
      codes({ seed: 42, prefixCacheHitRate: 0.2 }, { seed: 42, prefixCacheHitRate: 0.2 }),
      [],
    );
  });

  test('another seed or salt alone is not a reason; a client limit and other simulator arguments are', () => {
    assert.deepEqual(
      codes({ ...live, seed: 1, promptSalt: 3 }, { ...live, seed: 2, promptSalt: 3 }),
      [],
    );
    assert.deepEqual(codes({ clientLimited: true }, {}), ['client_limited_run']);
    const [limited] = unlikeReasons(unit({ clientLimited: true }), unit({ clientLimited: true }));
    assert.match(limited.short, /client-limited A and B/);
    const [sim] = unlikeReasons(
      unit({ simulatorArgs: ['--gpu', 'h100'] }),
      unit({ simulatorArgs: ['--gpu', 'h100', '--enable-prefix-caching', 'false'] }),
    );
    assert.equal(sim.code, 'simulator_differs');
    assert.match(sim.text, /A --gpu h100, B --gpu h100 --enable-prefix-caching false/);
    assert.deepEqual(codes({ simulatorArgs: [] }, { simulatorArgs: [] }), []);
  });

  test('runs started with the prefix cache in different states are not like for like', () => {
    const [r] = unlikeReasons(
      unit({ cacheState: 'flushed' }),
      unit({ cacheState: { primed: 0.5 } }),
    );
    assert.equal(r.code, 'cache_state_differs');
    assert.match(r.text, /A flushed, B primed for 50% hits/);
    assert.deepEqual(codes({ cacheState: 'flushed' }, { cacheState: 'flushed' }), []);
    assert.deepEqual(codes({ cacheState: { primed: 0.5 } }, { cacheState: { primed: 0.5 } }), []);
    // A run saved before cache states were recorded says nothing either way.
    assert.deepEqual(codes({ cacheState: 'uncontrolled' }, {}), []);
  });

  test('every rendering names the reasons and qualifies the verdicts line; JSON carries the codes', () => {
    const loaded = (u: RunUnit): LoadedUnit => ({ ...u, summaries: [] });
    const a = unit({ ...live, promptSalt: 5, prefixCacheHitRate: 0 }, 100, 'runs/a');
    const b = unit({ ...live, promptSalt: 5, prefixCacheHitRate: 0.99 }, 35, 'runs/b');
    const report = compareTargets(
      [
        { dir: 'runs/a', label: 'runs/a', kind: 'run', units: [loaded(a)], warnings: [] },
        { dir: 'runs/b', label: 'runs/b', kind: 'run', units: [loaded(b)], warnings: [] },
      ],
      { confidence: 0.95, resamples: 300, seed: 42, minEffect: 0.01, force: false },
      undefined,
    );
    const [pair] = report.candidates[0].pairs;
    assert.equal(pair.refused, false, 'qualified, not refused');
    assert.ok(pair.counts.better > 0, 'the cached TTFT reads better');
    const terminal = renderTerminal(report, false);
    assert.match(
      terminal,
      /Verdicts: \d+ better, 0 worse, \d+ no significant change; not like for like: prefix-cache hit rate A 0 %, B 99 %; identical prompts to a server that caches prefixes/,
    );
    assert.match(terminal, /not like for like \(prefix_cache_differs\): /);
    assert.match(terminal, /not like for like \(identical_prompts\): /);
    assert.match(renderMarkdown(report), /\*\*Not like for like\*\* \(`identical_prompts`\)/);
    assert.match(renderMarkdown(report), /; not like for like: prefix-cache hit rate/);
    assert.match(
      renderHtml(report),
      /<p class="warn">Not like for like \(prefix_cache_differs\): /,
    );
    const json = JSON.parse(renderJson(report));
    assert.deepEqual(
      json.candidates[0].pairs[0].unlike.map((u: { code: string }) => u.code),
      ['prefix_cache_differs', 'identical_prompts'],
    );
  });
});
