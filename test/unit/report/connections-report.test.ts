import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { connectionsLine } from '../../../src/report/connectionsText.js';
import { requestsCsvHeader, requestsCsvRow } from '../../../src/report/csv.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import { markdownSummary } from '../../../src/report/markdown.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';
import { loadReportInput } from '../../../src/results/load.js';
import { REPO } from '../../../tools/repo.js';
import { openFile, startBrowser } from '../../helpers/browser.js';

function record(id: number, o: Partial<RequestRecord>): RequestRecord {
  return {
    id,
    phase: 'measure',
    scheduledAt: 0,
    sentAt: 0,
    firstTokenAt: 40,
    lastTokenAt: 41,
    endAt: 41,
    requestedInputTokens: 1,
    requestedOutputTokens: 2,
    outputTokens: 2,
    outputTokensSource: 'events',
    events: { dtUs: [40_000, 1000], tokens: [1, 1], contentChars: [1, 1] },
    ...o,
  };
}

const opened = { setupMs: 3.5, waitedMs: 3.5, dnsMs: 0.5, tcpMs: 1, tlsMs: 2 };
/** Two requests that opened a TLS connection, two that waited 8 ms for a free one. */
const phased = [
  record(0, { sentAt: 3.5, firstTokenAt: 43.5, backlogMs: 0, poolWaitMs: 0, connection: opened }),
  record(1, { sentAt: 3.5, firstTokenAt: 43.5, backlogMs: 0, poolWaitMs: 0, connection: opened }),
  record(2, { sentAt: 8, firstTokenAt: 48, backlogMs: 0, poolWaitMs: 8 }),
  record(3, { sentAt: 8, firstTokenAt: 48, backlogMs: 0, poolWaitMs: 8 }),
];
const load = { mode: 'closed', concurrency: 4 } as const;

describe('connection phases in the terminal', () => {
  test('one line when requests opened connections or waited for one', () => {
    const summary = summarize(phased, { load });
    const line = connectionsLine(summary);
    assert.match(line ?? '', /^Connections: 2 opened by measured requests, set-up p50 3\.50 ms/);
    assert.match(line ?? '', /DNS 0\.50, TCP 1\.00, TLS 2\.00 ms at p50/);
    assert.match(line ?? '', /pool wait p50 4\.00 ms p99 ~8\.00 ms beside TTFT p50 40\.0 ms/);
    assert.ok(renderTerminalSummary(summary, { color: false }).includes(line ?? '-'));
  });

  test('a warmed pool with no wait prints nothing; older records have no section at all', () => {
    const warm = phased.map((r) => ({ ...r, connection: undefined, poolWaitMs: 0, sentAt: 0 }));
    const summary = summarize(warm, { load });
    assert.equal(summary.connections?.newConnections, 0);
    assert.equal(connectionsLine(summary), undefined);
    assert.doesNotMatch(renderTerminalSummary(summary, { color: false }), /Connections:/);
    const older = phased.map(({ backlogMs, poolWaitMs, connection, ...r }) => r);
    assert.equal(summarize(older, { load }).connections, undefined);
  });
});

describe('connection phases in the HTML report', () => {
  test('a section with the stacked bar beside TTFT, only when they matter', async () => {
    const run = await loadReportInput(join(REPO, 'test/fixtures/report/run'));
    assert.equal(run.kind, 'run');
    if (run.kind !== 'run') return;
    const plain = renderHtmlReport(run);
    assert.doesNotMatch(plain, /data-section="connections"/);
    const { connections } = summarize(phased, { load });
    const html = renderHtmlReport({ ...run, summary: { ...run.summary, connections } });
    const section = html.match(/<section[^>]*data-section="connections"[\s\S]*?<\/section>/)?.[0];
    assert.ok(section, 'no connections section');
    assert.match(section, /<figure class="phases" data-phases>/);
    // p50 and p99 bars: pool wait, DNS, TCP, TLS, then TTFT, in that order.
    const bars = [...section.matchAll(/aria-label="([^"]*)"/g)].map((m) => m[1]);
    assert.equal(bars.length, 2);
    assert.match(bars[1], /^pool wait 8 ms, DNS 0\.5 ms, TCP 1 ms, TLS 2 ms, TTFT [\d.]+ ms$/);
    assert.equal(section.match(/class="seg"/g)?.length, 10);
    assert.match(section, /TLS handshake/);
    assert.doesNotMatch(section, /<script/);
  });

  test('in Chromium the bars are drawn: each segment as wide as its share, no error; the streams shown', async (t) => {
    const run = await loadReportInput(join(REPO, 'test/fixtures/report/run'));
    if (run.kind !== 'run') return;
    const started = await startBrowser();
    if (!started.browser) {
      t.skip(`no Chromium: ${started.reason}`);
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'ig-phases-html-'));
    try {
      const h2 = phased.map((r) => ({ ...r, connectionId: r.id < 3 ? 1 : 2 }));
      const { connections, streamsPerConnection } = summarize(h2, { load });
      const file = join(dir, 'report.html');
      writeFileSync(
        file,
        renderHtmlReport({
          ...run,
          summary: { ...run.summary, connections, streamsPerConnection },
        }),
      );
      const { page, errors } = await openFile(started.browser, file);
      assert.deepEqual(errors, []);
      // HTTP/2's streams per connection are shown in the section, above the bars.
      const streams = page.locator('[data-streams] tbody tr');
      assert.ok(await streams.isVisible());
      assert.deepEqual(await streams.locator('td').allTextContents(), ['h2', '2', '2.0', '3']);
      const bars = page.locator('.phase-bar');
      assert.equal(await bars.count(), 2);
      const barWidth = (await bars.nth(1).boundingBox())?.width ?? 0;
      const segments = bars.nth(1).locator('.seg');
      let drawn = 0;
      for (let i = 0; i < (await segments.count()); i++) {
        drawn += (await segments.nth(i).boundingBox())?.width ?? 0;
      }
      // The p99 row is the widest: its segments fill the bar (CSP allows their inline widths).
      assert.ok(barWidth > 100 && Math.abs(drawn - barWidth) < 2, `${drawn} of ${barWidth}`);
    } finally {
      await started.browser.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test('requests.csv ends with the phases, empty where a request has none', () => {
  assert.match(
    requestsCsvHeader(false),
    /,backlog_ms,pool_wait_ms,connection_waited_ms,connection_setup_ms,dns_ms,tcp_ms,tls_ms\r\n$/,
  );
  assert.match(requestsCsvRow(phased[0], false), /,0,0,3\.5,3\.5,0\.5,1,2\r\n$/);
  assert.match(requestsCsvRow(phased[2], false), /,0,8,,,,,\r\n$/);
});

describe('connection phases in the Markdown summary', () => {
  const md = (records: RequestRecord[]) =>
    markdownSummary('run', [{ name: 'run', summary: summarize(records, { load }) }]);

  test("the terminal's facts and the HTML's table, the warm-up's set-up in rows of its own", () => {
    const warmup = record(9, { phase: 'warmup', backlogMs: 0, poolWaitMs: 0, connection: opened });
    const text = md([...phased, warmup]);
    assert.match(
      text,
      /\n\*\*Connections:\*\* 2 opened by measured requests, set-up p50 3\.50 ms .* beside TTFT p50 40\.0 ms\n/,
    );
    const rows = text.split('\n').filter((l) => /^\| [a-zA-Z]/.test(l));
    const names = rows.map((l) => l.split(' | ')[0].slice(2));
    assert.deepEqual(names.slice(names.indexOf('phase (ms)')), [
      'phase (ms)',
      'backlog (until handed to the pool)',
      'pool wait',
      'connection set-up (requests that opened one)',
      'set-up: DNS',
      'set-up: TCP connect',
      'set-up: TLS handshake',
      'TTFT',
      'warm-up connection set-up (requests that opened one)',
      'warm-up set-up: DNS',
      'warm-up set-up: TCP connect',
      'warm-up set-up: TLS handshake',
    ]);
    // pool wait: p50 4, p95 and p99 8, over the 4 measured requests; the warm-up's one apart.
    assert.ok(rows.includes('| pool wait | 4.00 | 8.00 | 8.00 | 8.00 | 4 |'), rows.join('\n'));
    assert.ok(rows.includes('| warm-up set-up: TLS handshake | 2.00 | 2.00 | 2.00 | 2.00 | 1 |'));
  });

  test('nothing when they do not matter, and nothing from an older summary', () => {
    const warm = phased.map((r) => ({ ...r, connection: undefined, poolWaitMs: 0, sentAt: 0 }));
    assert.doesNotMatch(md(warm), /Connections|phase \(ms\)/);
    const older = phased.map(({ backlogMs, poolWaitMs, connection, ...r }) => r);
    assert.doesNotMatch(md(older), /Connections|phase \(ms\)|HTTP\/2/);
  });

  test('HTTP/2 streams per connection, beside the phases or alone', () => {
    const h2 = phased.map((r) => ({ ...r, connectionId: r.id < 3 ? 1 : 2 }));
    assert.match(md(h2), /\nHTTP\/2: 2 connections, 2\.0 streams each on average \(max 3\)\n/);
    const warm = h2.map((r) => ({ ...r, connection: undefined, poolWaitMs: 0, sentAt: 0 }));
    const alone = md(warm);
    assert.match(alone, /HTTP\/2: 2 connections/);
    assert.doesNotMatch(alone, /Connections:/);
  });
});

describe('HTTP/2 streams per connection in the HTML report', () => {
  const section = (html: string) =>
    html.match(/<section[^>]*data-section="connections"[\s\S]*?<\/section>/)?.[0];

  test('a table of protocol, connections, mean and max streams, with or without the phases', async () => {
    const run = await loadReportInput(join(REPO, 'test/fixtures/report/run'));
    if (run.kind !== 'run') return;
    const h2 = phased.map((r) => ({ ...r, connectionId: r.id < 3 ? 1 : 2 }));
    const { connections, streamsPerConnection } = summarize(h2, { load });
    assert.deepEqual(streamsPerConnection, { connections: 2, mean: 2, max: 3 });
    const both = section(
      renderHtmlReport({ ...run, summary: { ...run.summary, connections, streamsPerConnection } }),
    );
    assert.ok(both, 'no connections section');
    const cells = (html: string) =>
      [
        ...(html.match(/<div data-streams>[\s\S]*?<\/table>/)?.[0] ?? '').matchAll(
          /<t[hd](?: [^>]*)?>([^<]*)</g,
        ),
      ].map((m) => m[1]);
    assert.deepEqual(cells(both), [
      'protocol',
      'connections',
      'streams per connection, mean',
      'max',
      'h2',
      '2',
      '2.0',
      '3',
    ]);
    assert.match(both, /<h2>Connection phases<\/h2>/);
    assert.match(both, /data-phases/);
    // A warmed pool: the phases do not matter, the streams still stand in a section of their own.
    const alone = section(
      renderHtmlReport({ ...run, summary: { ...run.summary, streamsPerConnection } }),
    );
    assert.ok(alone, 'no section for the streams alone');
    assert.match(alone, /<h2>Connections<\/h2>/);
    assert.doesNotMatch(alone, /data-phases/);
    assert.equal(cells(alone).length, 8);
    // HTTP/1.1 and older runs: no streams, no section.
    assert.equal(run.summary.streamsPerConnection, undefined);
    assert.equal(section(renderHtmlReport(run)), undefined);
  });
});
