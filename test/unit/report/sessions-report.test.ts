import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type RunSummary, summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { parseCsv, requestsCsv } from '../../../src/report/csv.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import { markdownSummary } from '../../../src/report/markdown.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';
import type { RunReportInput } from '../../../src/results/load.js';
import type { ServerMetricsSummary } from '../../../src/telemetry/summary.js';
import { sessionRecords } from '../../helpers/sessionRecords.js';

const context = { load: { mode: 'closed' as const, concurrency: 5 } };

/** The session run's records (see test/helpers/sessionRecords.ts for the numbers). */
const records = sessionRecords();
const summary = summarize(records, context);
/** The same requests as a plain run: no session fields. */
const plainRecords = records.map(({ sessionId, turn, call, sessionDone, ...rest }) => rest);
const plain = summarize(plainRecords, context);

const server: ServerMetricsSummary = {
  scrapes: 2,
  failedScrapes: 0,
  windowS: 1,
  counters: {},
  gauges: {},
  warnings: [],
  prefixCache: {
    hitRate: 0.5,
    from: 'vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total',
    hitTokens: 300,
    queriedTokens: 600,
  },
};

/** Every request answers after 2 reasoning tokens in a reasoning-only event. */
function reasoningRecords(): RequestRecord[] {
  return plainRecords
    .filter((r) => !r.error)
    .map((r) => ({
      ...r,
      firstReasoningAt: r.firstTokenAt,
      firstContentAt: (r.firstTokenAt as number) + 1,
      reasoningTokens: 2,
      reasoningTokensSource: 'events' as const,
      events: {
        dtUs: [...r.events.dtUs],
        tokens: [2, 8, 0],
        contentChars: [0, 40, 0],
        reasoningChars: [9, 0, 0],
      },
    }));
}

const html = (s: RunSummary, recs: RequestRecord[], serverMetrics?: ServerMetricsSummary) => {
  const input: RunReportInput = {
    kind: 'run',
    dir: '/tmp/run',
    summary: serverMetrics ? { ...s, serverMetrics } : s,
    manifest: {},
    records: recs,
    telemetry: [],
  };
  return renderHtmlReport(input);
};
const sectionsOf = (page: string) => [...page.matchAll(/data-section="([^"]+)"/g)].map((m) => m[1]);
const chartsOf = (page: string) => [...page.matchAll(/data-chart="([^"]+)"/g)].map((m) => m[1]);
const tipsOf = (page: string): Record<string, { l: string[] }> =>
  JSON.parse(
    (/<script type="application\/json" id="ig-tips">([\s\S]*?)<\/script>/.exec(page) ?? [])[1] ??
      '{}',
  );

/** Cells of the terminal table row whose first cell is `first`. */
function terminalRow(text: string, first: string): string[] | undefined {
  for (const line of text.split('\n')) {
    const cells = line
      .split('│')
      .map((c) => c.trim())
      .filter((c) => c !== '');
    if (cells[0] === first && cells.length === 6) return cells;
  }
  return undefined;
}

describe('terminal', () => {
  const text = renderTerminalSummary(summary, { color: false, serverMetrics: server });

  test('the session line, the agent-task line and the per-turn table', () => {
    assert.match(
      text,
      /Sessions: 5 started, 3 completed, 1 failed, 1 cut; session p50 6,100\.0 ms, p99 ~6,198\.0 ms; 3\.8 requests per session; 2\.9 sessions open on average \(1\.2 requests in flight\)/,
    );
    assert.match(
      text,
      /Agent tasks: 1 of 1 completed, task p50 ~1,400\.0 ms, p99 ~1,400\.0 ms, 3 steps per task, fan-out per step mean 1\.33, max 2/,
    );
    // turn, requests, failed, TTFT p50, TTFT p99 (5 samples: too few), E2E p50.
    assert.deepEqual(terminalRow(text, '1'), ['1', '5', '0', '100.0', '~196.0', '500.0']);
    assert.deepEqual(terminalRow(text, '2'), ['2', '6', '1', '40.0', '~40.0', '400.0']);
    assert.deepEqual(terminalRow(text, '5'), ['5', '2', '0', '40.0', '~40.0', '400.0']);
    assert.match(
      text,
      /Server prefix-cache hit rate 50\.0% \(vllm:prefix_cache_hits_total \/ vllm:prefix_cache_queries_total\)/,
    );
  });

  test('the reasoning split, when requests reasoned', () => {
    const reasoned = summarize(reasoningRecords(), context);
    const out = renderTerminalSummary(reasoned, { color: false });
    // 17 requests, 2 of their 10 tokens each in reasoning.
    assert.match(
      out,
      /Reasoning: 17 requests reasoned; 34 reasoning \/ 136 answer tokens \(20\.0% reasoning\), 17 counted from the events; thinking p50 1\.0 ms/,
    );
    assert.doesNotMatch(out, /Sessions:/);
  });

  test('a plain run prints nothing new, with or without a prefix cache on the server', () => {
    for (const out of [
      renderTerminalSummary(plain, { color: false }),
      renderTerminalSummary(plain, { color: false, serverMetrics: server }),
    ]) {
      assert.doesNotMatch(out, /Sessions|Agent tasks|turn|prefix-cache|Reasoning/);
    }
  });
});

describe('markdown', () => {
  test('the per-turn table and the session lines', () => {
    const md = markdownSummary('run', [
      { name: 'run', summary: { ...summary, serverMetrics: server } as RunSummary },
    ]);
    const lines = md.split('\n');
    const head = lines.indexOf(
      '| turn | requests | failed | TTFT p50 (ms) | TTFT p99 (ms) | E2E p50 (ms) |',
    );
    assert.ok(head > 0, md);
    assert.deepEqual(lines.slice(head + 2, head + 4), [
      '| 1 | 5 | 0 | 100.0 | ~196.0 | 500.0 |',
      '| 2 | 6 | 1 | 40.0 | ~40.0 | 400.0 |',
    ]);
    assert.match(md, /Sessions: 5 started, 3 completed, 1 failed, 1 cut/);
    assert.match(md, /Agent tasks: 1 of 1 completed, task p50 ~1,400\.0 ms/);
    assert.match(md, /Server prefix-cache hit rate 50\.0%/);
  });

  test('a plain run: nothing new', () => {
    const md = markdownSummary('run', [{ name: 'run', summary: plain }]);
    assert.doesNotMatch(md, /Sessions|Agent tasks|turn|Reasoning/);
  });
});

describe('requests.csv', () => {
  test('session_id, turn and call after the id, only for a session run', () => {
    const rows = parseCsv(requestsCsv(records));
    assert.deepEqual(rows[0].slice(0, 5), ['id', 'session_id', 'turn', 'call', 'phase']);
    const byId = new Map(rows.slice(1).map((r) => [r[0], r]));
    assert.deepEqual(byId.get('50002')?.slice(0, 5), ['50002', '5', '2', '1', 'measure']);
    assert.deepEqual(byId.get('10004')?.slice(0, 5), ['10004', '1', '5', '', 'measure']);
    const plainRows = parseCsv(requestsCsv(plainRecords));
    assert.deepEqual(plainRows[0].slice(0, 3), ['id', 'phase', 'scheduled_at_ms']);
    assert.equal(plainRows[0].length, rows[0].length - 3);
  });
});

describe('HTML report', () => {
  test('a sessions section with the per-turn table and the TTFT-by-turn chart', () => {
    const page = html(summary, records, server);
    assert.deepEqual(sectionsOf(page), [
      'headline',
      'warnings',
      'latency',
      'sessions',
      'timeline',
      'summary',
      'failures',
      'manifest',
    ]);
    assert.ok(chartsOf(page).includes('turn-ttft'));
    const section = (/data-section="sessions">([\s\S]*?)<\/section>/.exec(page) ?? [])[1] ?? '';
    assert.match(section, /Sessions: 5 started, 3 completed, 1 failed, 1 cut/);
    assert.match(section, /Agent tasks: 1 of 1 completed/);
    assert.match(section, /Server prefix-cache hit rate 50\.0%/);
    assert.match(
      section,
      /<td>1<\/td><td>5<\/td><td>0<\/td><td>100\.0<\/td><td>~196\.0<\/td><td>500\.0<\/td>/,
    );
    const labels = Object.values(tipsOf(page)).flatMap((t) => t.l);
    assert.ok(labels.includes('turn 1: TTFT p50 100 ms over 5 requests'), labels.join('\n'));
    assert.ok(labels.includes('turn 2: TTFT p99 40 ms over 5 requests (too few to resolve)'));
  });

  test('the token chart splits reasoning from the answer when requests reasoned', () => {
    const recs = reasoningRecords();
    const page = html(summarize(recs, context), recs);
    const labels = Object.values(tipsOf(page)).flatMap((t) => t.l);
    assert.ok(labels.some((l) => /reasoning tok\/s, [\d,.]+ answer tok\/s around/.test(l)));
    assert.match(
      page,
      /<dt>reasoning<\/dt><dd>17 requests reasoned; 34 reasoning \/ 136 answer tokens/,
    );
    assert.ok(!sectionsOf(page).includes('sessions'));
  });

  test('a plain run: no sessions section, no turn chart, no reasoning series', () => {
    const page = html(plain, plainRecords, server);
    assert.ok(!sectionsOf(page).includes('sessions'));
    assert.ok(!chartsOf(page).includes('turn-ttft'));
    assert.doesNotMatch(page, /reasoning tok\/s|Sessions:|<dt>reasoning/);
  });
});
