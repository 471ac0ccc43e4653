import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { evaluateThreshold, parseThresholds } from '../../../src/analysis/thresholds.js';
import { SummaryBuilder, summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { snapshotValues, type TelemetrySnapshot } from '../../../src/telemetry/snapshot.js';
import { summarizeTelemetry } from '../../../src/telemetry/summary.js';
import { REPO } from '../../../tools/repo.js';
import { sessionRecord, sessionRecords } from '../../helpers/sessionRecords.js';

const context = { load: { mode: 'closed' as const, concurrency: 5 } };

const close = (actual: number | undefined, expected: number, what: string) =>
  assert.ok(
    actual !== undefined && Math.abs(actual - expected) <= 1e-9,
    `${what}: ${actual} != ${expected}`,
  );

describe('sessions summary', () => {
  const summary = summarize(sessionRecords(), context);
  const s = summary.sessions;

  test('counts sessions by how they ended: completed, failed, cut by the run', () => {
    assert.ok(s);
    assert.equal(s.started, 5);
    assert.equal(s.completed, 3, 'sessions 1, 2 and the agent task ran to their end');
    assert.equal(s.failed, 1, 'session 3 stopped at a 500');
    assert.equal(s.cut, 1, 'session 4 was cancelled by the run: not a failure');
    // 5, 5, 3, 2 and 4 requests; 5, 5, 2, 1 and 3 turns without a failure.
    close(s.requestsPerSession.mean, 19 / 5, 'requests per session');
    assert.equal(s.requestsPerSession.max, 5);
    close(s.turnsCompleted.mean, 16 / 5, 'turns completed');
  });

  test('sessionMs: first send to last byte of each completed session, think times included', () => {
    assert.ok(s);
    assert.equal(s.sessionMs.count, 3);
    assert.equal(s.sessionMs.min, 1400);
    assert.equal(s.sessionMs.p50, 6100);
    assert.equal(s.sessionMs.max, 6200);
    close(s.sessionMs.mean, (1400 + 6100 + 6200) / 3, 'mean');
  });

  test('mean sessions open beside the mean requests in flight', () => {
    assert.ok(s);
    // Spans 6,100 + 6,200 + 2,950 + 1,700 + 1,400 over the window 0..6,300.
    close(s.meanOpenSessions, 18_350 / 6300, 'sessions open');
    // Request durations: 2,100 + 2,200 + 950 + 700 + 1,400.
    close(summary.load.meanConcurrency, 7350 / 6300, 'requests in flight');
  });

  test('per turn index: requests, failures, TTFT and E2E distributions', () => {
    assert.ok(s);
    assert.deepEqual(
      s.turns.map((t) => [t.turn, t.requests, t.failed, t.ttftMs.count]),
      [
        [1, 5, 0, 5],
        [2, 6, 1, 5],
        [3, 4, 1, 3],
        [4, 2, 0, 2],
        [5, 2, 0, 2],
      ],
    );
    const [one, two, three] = s.turns;
    // Turn 1 TTFT: 50, 100, 100, 100, 200 (numpy: p90 160, p99 196).
    close(one.ttftMs.mean, 110, 'turn 1 mean');
    assert.equal(one.ttftMs.p50, 100);
    close(one.ttftMs.p90, 160, 'turn 1 p90');
    close(one.ttftMs.p99, 196, 'turn 1 p99');
    // Turn 1 E2E: 300, 500, 500, 500, 600.
    assert.equal(one.e2eMs.p50, 500);
    close(one.e2eMs.mean, 480, 'turn 1 e2e mean');
    // Turn 2: the cached history answers sooner (30, 30, 40, 40, 40); the cancelled one is out.
    close(two.ttftMs.mean, 36, 'turn 2 mean');
    assert.equal(two.ttftMs.p50, 40);
    assert.equal(two.e2eMs.p50, 400);
    // Turn 3: 40, 40 and the agent's final answer at 80; the 500 only counts as failed.
    close(three.ttftMs.mean, 160 / 3, 'turn 3 mean');
  });

  test('agent task: taskMs is the sum of its steps and tool latencies; steps and fan-out', () => {
    assert.ok(s?.agent);
    const a = s.agent;
    assert.equal(a.tasks, 1, 'only the session with tool calls and a fan-out is a task');
    assert.equal(a.completed, 1);
    // Step 1 300 ms + tool 200 + step 2 (slower call) 400 + tool 100 + step 3 400.
    assert.equal(a.taskMs.p50, 300 + 200 + 400 + 100 + 400);
    assert.equal(a.stepsPerTask.p50, 3);
    assert.deepEqual([a.fanOutPerStep.count, a.fanOutPerStep.max], [3, 2]);
    close(a.fanOutPerStep.mean, 4 / 3, 'fan-out mean');
  });

  test('CI thresholds read session and task times (the catalogue names sessionMs, taskMs)', () => {
    const [session, task, plainTtft] = parseThresholds([
      'sessionMs.max<6200,task.p50<=1.4s,ttft.p99<1e9',
    ]);
    assert.deepEqual(
      [session, task].map((t) => [
        evaluateThreshold(summary, t).value,
        evaluateThreshold(summary, t).ok,
      ]),
      [
        [6200, false],
        [1400, true],
      ],
    );
    const plain = summarize(
      sessionRecords().map(({ sessionId: _s, turn: _t, call: _c, sessionDone: _d, ...r }) => r),
      context,
    );
    const missing = evaluateThreshold(plain, session);
    assert.equal(missing.ok, false);
    assert.match(missing.message, /no session ran to its end/);
    assert.equal(evaluateThreshold(plain, plainTtft).ok, true);
  });

  test('warm-up records of a session are not counted', () => {
    const warm = sessionRecord({ sessionId: 9, index: 0, turn: 1, sentAt: 0, ttft: 5, e2e: 10 });
    warm.phase = 'warmup';
    const again = summarize([warm, ...sessionRecords()], context);
    assert.deepEqual(again.sessions, s);
  });

  test('a plain run has neither a sessions nor a reasoning section', () => {
    const plain = sessionRecords()
      .filter((r) => !r.error)
      .map(({ sessionId, turn, call, sessionDone, ...rest }) => rest);
    const built = summarize(plain, context);
    assert.equal(built.sessions, undefined);
    assert.equal(built.reasoning, undefined);
    assert.ok(!('sessions' in JSON.parse(JSON.stringify(built))));
  });
});

describe('merging builder states', () => {
  const json = (value: unknown) => JSON.stringify(value);

  test('two builders (sessions split between them, states cloned as between threads) equal one', () => {
    const records = sessionRecords();
    const one = summarize(records, context);
    const a = new SummaryBuilder(context);
    const b = new SummaryBuilder(context);
    // Every other record: each session's records land in both builders, the hardest case.
    records.forEach((r, i) => {
      (i % 2 === 0 ? a : b).add(r);
    });
    a.merge(structuredClone(b.state()));
    assert.equal(json(a.build()), json(one));
    // Merged the other way round, and from records in reverse order: the same summary.
    const c = new SummaryBuilder(context);
    const d = new SummaryBuilder(context);
    [...records].reverse().forEach((r, i) => {
      (i % 3 === 0 ? c : d).add(r);
    });
    d.merge(structuredClone(c.state()));
    assert.equal(json(d.build().sessions), json(one.sessions));
  });

  test('a builder without sessions merges one that has them', () => {
    const records = sessionRecords();
    const plain = new SummaryBuilder(context);
    const withSessions = new SummaryBuilder(context);
    for (const r of records) withSessions.add(r);
    plain.merge(withSessions.state());
    assert.equal(json(plain.build()), json(summarize(records, context)));
  });
});

describe('reasoning split', () => {
  test('reasoning vs answer tokens over the completed requests; inferred counts said', () => {
    const base = sessionRecords().filter((r) => !r.error);
    const reasoned: RequestRecord[] = base.map((r, i) => {
      if (i === 0) return { ...r, reasoningTokens: 6, reasoningTokensSource: 'server' };
      if (i === 1) {
        return {
          ...r,
          firstReasoningAt: r.sentAt + 1,
          reasoningTokens: 3,
          reasoningTokensSource: 'events',
        };
      }
      return r;
    });
    const summary = summarize(reasoned, context);
    assert.deepEqual(summary.reasoning, {
      requests: 2,
      reasoningTokens: 9,
      answerTokens: base.length * 10 - 9,
      inferredRequests: 1,
    });
  });
});

describe('server prefix-cache hit rate', () => {
  const scrape = (at: number, values: Record<string, number>): TelemetrySnapshot => ({
    at,
    source: 'prometheus',
    values,
  });

  test("vLLM's token counters: hits grown over queries grown in the window, engines summed", () => {
    const m = summarizeTelemetry([
      scrape(0, {
        'vllm:prefix_cache_hits_total{engine="0"}': 100,
        'vllm:prefix_cache_queries_total{engine="0"}': 400,
        'vllm:prefix_cache_hits_total{engine="1"}': 0,
        'vllm:prefix_cache_queries_total{engine="1"}': 0,
        // The deprecated names, exported alongside: never added in.
        'vllm:gpu_prefix_cache_hits_total': 5,
        'vllm:gpu_prefix_cache_queries_total': 5,
      }),
      scrape(1000, {
        'vllm:prefix_cache_hits_total{engine="0"}': 400,
        'vllm:prefix_cache_queries_total{engine="0"}': 900,
        'vllm:prefix_cache_hits_total{engine="1"}': 100,
        'vllm:prefix_cache_queries_total{engine="1"}': 100,
        'vllm:gpu_prefix_cache_hits_total': 5,
        'vllm:gpu_prefix_cache_queries_total': 1005,
      }),
    ]);
    assert.deepEqual(m.prefixCache, {
      hitRate: 400 / 600,
      from: 'vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total',
      hitTokens: 400,
      queriedTokens: 600,
    });
  });

  test('the deprecated counters when only they are there; no lookups, no rate', () => {
    const old = summarizeTelemetry([
      scrape(0, {
        'vllm:gpu_prefix_cache_hits_total': 0,
        'vllm:gpu_prefix_cache_queries_total': 0,
      }),
      scrape(1000, {
        'vllm:gpu_prefix_cache_hits_total': 30,
        'vllm:gpu_prefix_cache_queries_total': 120,
      }),
    ]);
    assert.equal(old.prefixCache?.hitRate, 0.25);
    const idle = summarizeTelemetry([
      scrape(0, { 'vllm:prefix_cache_hits_total': 7, 'vllm:prefix_cache_queries_total': 9 }),
      scrape(1000, { 'vllm:prefix_cache_hits_total': 7, 'vllm:prefix_cache_queries_total': 9 }),
    ]);
    assert.equal(idle.prefixCache, undefined);
  });

  test("SGLang's own rate gauge, averaged over the scrapes (recorded /metrics text)", () => {
    const text = readFileSync(join(REPO, 'test/fixtures/sglang-metrics.txt'), 'utf8');
    const m = summarizeTelemetry([
      { at: 0, source: 'prometheus', values: snapshotValues('prometheus', text) },
    ]);
    assert.deepEqual(m.prefixCache, { hitRate: 0.0123, from: 'sglang:cache_hit_rate (mean)' });
    const v0 = summarizeTelemetry([
      scrape(0, { 'vllm:gpu_prefix_cache_hit_rate': 0.2 }),
      scrape(1000, { 'vllm:gpu_prefix_cache_hit_rate': 0.6 }),
    ]);
    close(v0.prefixCache?.hitRate, 0.4, 'vLLM v0 gauge mean');
  });

  test('a server without prefix-cache numbers has none', () => {
    const m = summarizeTelemetry([scrape(0, { 'vllm:num_requests_running': 3 })]);
    assert.equal(m.prefixCache, undefined);
  });
});
