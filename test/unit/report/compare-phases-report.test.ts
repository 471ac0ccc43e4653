/**
 * `compare`'s renderings of the connection phases' rows (issue 49): terminal, Markdown, HTML and
 * JSON, with the footnote that tells their rules; a baseline from before the phases reads n/a.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type RunUnit, sampleRecords } from '../../../src/analysis/compare.js';
import type { RequestRecord } from '../../../src/record.js';
import {
  type CompareReport,
  compareTargets,
  renderHtml,
  renderJson,
  renderMarkdown,
  renderTerminal,
} from '../../../src/report/compare.js';
import type { LoadedUnit } from '../../../src/results/compareInput.js';
import { phasedRecords } from '../../helpers/phasedRecords.js';

function report(a: RequestRecord[], b: RequestRecord[]): CompareReport {
  const loaded = (records: RequestRecord[], label: string): LoadedUnit => {
    const unit: RunUnit = {
      label,
      scenario: 'chat',
      load: { mode: 'closed', concurrency: 4 },
      workload: { lengths: '256 in / 8 out tokens' },
      sample: sampleRecords(records),
    };
    return { ...unit, summaries: [] };
  };
  return compareTargets(
    [
      { dir: 'runs/a', label: 'runs/a', kind: 'run', units: [loaded(a, 'runs/a')], warnings: [] },
      { dir: 'runs/b', label: 'runs/b', kind: 'run', units: [loaded(b, 'runs/b')], warnings: [] },
    ],
    { confidence: 0.95, resamples: 300, seed: 42, minEffect: 0.01, force: false },
    undefined,
  );
}

const RULES = /pool wait and TLS handshake: also 1 ms/;
/** The terminal's table without its borders, one space between cells. */
const flat = (text: string) => text.replace(/[\u2502]/g, ' ').replace(/ +/g, ' ');

test('the phases in every rendering: pool wait, new connections, TLS; the floor in the footnote', () => {
  const r = report(
    phasedRecords(1, { poolWaitMedianMs: 2 }),
    phasedRecords(2, { poolWaitMedianMs: 20, openShare: 0.1, tlsMs: 8 }),
  );
  const terminal = flat(renderTerminal(r, false));
  assert.match(
    terminal,
    /pool wait p50 \(ms\) 1\.\d+ 2\d\.\d+ \+\d+\.\d+ \(\+\d+%\) \[\+[\d.]+, \+[\d.]+\] worse/,
  );
  assert.match(terminal, /pool wait p99 \(ms\) .* worse/);
  assert.match(
    terminal,
    /new connections per request \(%\) 0\.00% \d+\.\d\d% \+\d+\.\d\d pp .* worse/,
  );
  assert.match(terminal, /TLS handshake p50 \(ms\) - \d\.\d+ - - n\/a/);
  assert.match(terminal, RULES);
  const md = renderMarkdown(r);
  assert.match(
    md,
    /\| pool wait p50 \(ms\) \| 1\.\d+ \| 2\d\.\d+ \| .* \| \u274c \*\*worse\*\* \|/,
  );
  assert.match(md, /\| TLS handshake p50 \(ms\) \| - \| \d\.\d+ \| - \| - \| n\/a \|/);
  assert.match(md, RULES);
  const html = renderHtml(r);
  assert.match(
    html,
    /<tr><td>new connections per request \(%\)<\/td><td>0\.00%<\/td><td>[\d.]+%<\/td>.*<td class="worse" title="[^"]*">worse<\/td><\/tr>/,
  );
  assert.match(html, /<td class="na" title="the baseline has no TLS handshake p50">n\/a<\/td>/);
  const json = JSON.parse(renderJson(r));
  const ids = json.candidates[0].pairs[0].metrics.map((m: { id: string }) => m.id);
  assert.deepEqual(ids.slice(-4), ['poolWait.p50', 'poolWait.p99', 'newConnections', 'tls.p50']);
});

test('a baseline from before the phases: its rows n/a; two such runs: no rows, the old footnote', () => {
  const old = phasedRecords(3, { old: true });
  const mixed = flat(renderTerminal(report(old, phasedRecords(4, { poolWaitMedianMs: 5 })), false));
  assert.match(mixed, /pool wait p50 \(ms\) - \d\.\d+ - - n\/a/);
  assert.match(mixed, /new connections per request \(%\) - 0\.00% - - n\/a/);
  assert.match(mixed, /Verdicts: .*, 3 n\/a/);
  const none = report(old, phasedRecords(5, { old: true }));
  for (const text of [renderTerminal(none, false), renderMarkdown(none), renderHtml(none)]) {
    assert.doesNotMatch(text, /pool wait|new connections|TLS/);
    assert.match(text, /\(failure rate: 0\.1 percentage points\)/);
  }
});
