/**
 * Failure grouping (src/metrics/failureGroups.ts): distinct messages counted exactly in bounded
 * memory, and the rows shown are the most frequent messages, whenever they first came.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  FailureGroups,
  hashKey,
  MAX_DISTINCT_FAILURES,
  MAX_FAILURE_GROUPS,
} from '../../../src/metrics/failureGroups.js';
import type { RequestRecord } from '../../../src/record.js';
import { failuresHtml } from '../../../src/report/html.js';
import { chartsOf } from '../../../src/results/runView.js';

describe('failure groups', () => {
  test('1,000 distinct messages, then 49,000 of one: 1,001 distinct, the one first, exact', () => {
    const g = new FailureGroups();
    let id = 0;
    for (let i = 0; i < 1000; i++) g.add('http_5xx', 500, `rare failure ${i}`, id++);
    for (let i = 0; i < 49_000; i++) g.add('http_5xx', 503, 'overloaded', id++);
    const c = g.build();
    assert.equal(c.failed, 50_000);
    assert.equal(c.distinct, 1001);
    assert.equal(c.ungrouped, 0);
    assert.equal(c.groups.length, MAX_FAILURE_GROUPS);
    assert.deepEqual(c.groups[0], {
      kind: 'http_5xx',
      status: 503,
      message: 'overloaded',
      n: 49_000,
      first: 1000,
    });
    // The rest are the earlier messages, each counted once (one of them made room).
    assert.ok(c.groups.slice(1).every((x) => x.n === 1 && x.message.startsWith('rare')));
  });

  test('the kept rows are the exact top counts, whatever the order of arrival', () => {
    const g = new FailureGroups(3);
    const truth = new Map<string, number>();
    // A message i in 0..49 arrives i+1 times, interleaved, the frequent ones last.
    let id = 0;
    for (let round = 0; round < 50; round++) {
      for (let i = round; i < 50; i++) {
        g.add('timeout', undefined, `m${i}`, id++);
        truth.set(`m${i}`, (truth.get(`m${i}`) ?? 0) + 1);
      }
    }
    const c = g.build();
    assert.equal(c.distinct, 50);
    assert.deepEqual(
      c.groups.map((x) => [x.message, x.n]),
      [
        ['m49', 50],
        ['m48', 49],
        ['m47', 48],
      ],
    );
    assert.equal(c.groups[0].first, 49);
  });

  test('kind and status part the groups; a long message is grouped by its start', () => {
    const g = new FailureGroups();
    g.add('http_5xx', 500, 'x', 0);
    g.add('http_5xx', 502, 'x', 1);
    g.add('http_4xx', 500, 'x', 2);
    g.add('http_5xx', undefined, 'x', 3);
    g.add('http_5xx', 500, `${'y'.repeat(1000)}a`, 4);
    g.add('http_5xx', 500, `${'y'.repeat(1000)}b`, 5);
    const c = g.build();
    assert.equal(c.distinct, 5);
    assert.equal(c.groups.find((x) => x.message.startsWith('y'))?.n, 2);
    assert.equal(c.groups.find((x) => x.message.startsWith('y'))?.message.length, 1000);
  });

  test('a million distinct messages: each counted, 40 MiB of table at most, in seconds', () => {
    const g = new FailureGroups();
    const started = performance.now();
    for (let i = 0; i < 1_000_000; i++) g.add('http_5xx', 500, `request ${i} failed`, i);
    // The frequent one comes last of all and still shows first.
    for (let i = 0; i < 3; i++) g.add('timeout', undefined, 'request 7 failed', 1e6 + i);
    const ms = performance.now() - started;
    const c = g.build();
    assert.equal(c.distinct, 1_000_001);
    assert.equal(c.ungrouped, 0);
    assert.equal(c.groups[0].message, 'request 7 failed');
    assert.equal(c.groups[0].kind, 'timeout');
    assert.equal(c.groups[0].n, 3);
    assert.equal(c.groups.length, MAX_FAILURE_GROUPS);
    assert.ok(g.tableBytes <= 40 * 2 ** 20, `${g.tableBytes} bytes`);
    // About a second on an idle core; loose for a loaded machine.
    assert.ok(ms < 20_000, `${ms.toFixed(0)} ms`);
  });

  test('past the distinct bound, new messages are counted as failures in no group', () => {
    const g = new FailureGroups(2, 4);
    for (let i = 0; i < 6; i++) g.add('timeout', undefined, `m${i}`, i);
    g.add('timeout', undefined, 'm0', 6);
    const c = g.build();
    assert.equal(c.failed, 7);
    assert.equal(c.distinct, 4);
    assert.equal(c.ungrouped, 2);
    assert.deepEqual(c.groups[0], { kind: 'timeout', message: 'm0', n: 2, first: 0 });
    assert.ok(MAX_DISTINCT_FAILURES >= 1_000_000);
  });

  test('hashes differ by kind, status and message', () => {
    const keys = new Set<string>();
    for (const kind of ['timeout', 'http_5xx'] as const) {
      for (const status of [undefined, 0, 500]) {
        for (const message of ['', 'a', 'b', 'ab', 'ba']) {
          keys.add(hashKey(kind, status, message).join(':'));
        }
      }
    }
    assert.equal(keys.size, 2 * 3 * 5);
  });
});

describe('the report failure table', () => {
  test('shows the message behind 98 % of failures and an exact count of the rest', () => {
    const records: RequestRecord[] = [];
    const fail = (id: number, message: string): RequestRecord => ({
      id,
      phase: 'measure',
      scheduledAt: id,
      sentAt: id,
      endAt: id + 1,
      status: 503,
      requestedInputTokens: 10,
      requestedOutputTokens: 10,
      outputTokens: 0,
      outputTokensSource: 'server',
      events: { dtUs: [], tokens: [], contentChars: [] },
      error: { kind: 'http_5xx', status: 503, message },
    });
    for (let i = 0; i < 1000; i++) records.push(fail(i, `rare ${i}`));
    for (let i = 0; i < 49_000; i++) records.push(fail(1000 + i, 'the <b>dominant</b> one'));
    const charts = chartsOf(records);
    assert.equal(charts.failures.distinct, 1001);
    const html = failuresHtml(charts);
    assert.match(html, /the &lt;b&gt;dominant&lt;\/b&gt; one/);
    assert.match(html, /49,000/);
    assert.match(html, /981 more distinct messages not shown\./);
    assert.doesNotMatch(html, /49,980/);
  });
});
