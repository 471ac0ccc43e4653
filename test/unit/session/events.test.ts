/**
 * Issue 48, user outputs: an output of the user's own that throws, rejects, never settles, is
 * slow or changes what it is given, on every event of the seam. It is told once and dropped (or
 * awaited, when it finishes in time); it never ends the session, holds it past its deadline, or
 * changes what the session and its built-in outputs see.
 */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LiveView } from '../../../src/metrics/live.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import {
  builtInOutput,
  type Output,
  type PointInfo,
  SessionEvents,
  type SessionInfo,
} from '../../../src/session/events.js';

const info: SessionInfo = {
  id: 'abc',
  command: 'run',
  kind: 'run',
  root: '/nowhere',
  rootIsPoint: true,
  startedAt: '2026-01-01T00:00:00.000Z',
  plan: { requests: 20, headers: { a: 'b' } },
};

const EVENTS = [
  'sessionStarted',
  'pointStarted',
  'records',
  'telemetry',
  'snapshot',
  'pointFinished',
  'sessionFinished',
] as const;
type EventName = (typeof EVENTS)[number];
/** The events the session awaits; the others are told and left. */
const AWAITED = new Set<EventName>(['pointFinished', 'sessionFinished']);

const record = (): RequestRecord =>
  ({
    id: 1,
    phase: 'measure',
    startUs: 0,
    endUs: 1000,
    outputTokens: 4,
    events: { dtUs: [100, 200], tokens: [1, 3] },
  }) as unknown as RequestRecord;

const summary = (): RunSummary =>
  ({
    requests: { completed: 20, failed: 0 },
    latency: { ttftMs: { p50: 5, p99: 9 } },
    warnings: [],
  }) as unknown as RunSummary;

/** Assigns to every property it can reach, as a careless output would; never throws. */
function scribble(value: unknown, depth = 0): void {
  if (value === null || typeof value !== 'object' || depth > 4) return;
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    if (typeof v === 'function') continue;
    scribble(v, depth + 1);
    try {
      (value as Record<string, unknown>)[key] = typeof v === 'number' ? -1 : 'scribbled';
    } catch {}
  }
  try {
    if (Array.isArray(value)) value.length = 0;
  } catch {}
}

/**
 * One session's events, every one of them, to `outputs`; returns what the session's own objects
 * held at the end, for a built-in output's view and the core's.
 */
async function tellEvery(events: SessionEvents) {
  const rec = record();
  const sum = summary();
  const progress = { sent: 3, finished: 2, failed: 0, inFlight: 1 };
  const point: PointInfo = events.nextPoint({
    load: { mode: 'closed', concurrency: 2 },
    scenario: 's',
  });
  events.sessionStarted();
  events.pointStarted({
    point,
    manifest: { startedAt: 'x', plan: { a: 1 } },
    progress,
    nowUs: () => 7,
  });
  events.record(point, rec);
  events.lines(point, `${JSON.stringify(record())}\n`, 1);
  events.telemetry({ point, snapshot: { tUs: 1, metrics: { a: 1 } } as never });
  events.snapshot({ point, counts: progress, atS: 1, live: new LiveView().snapshot(1, progress) });
  await events.pointFinished({ point, summary: sum, saveServerMetrics: false });
  await events.sessionFinished(0);
  return { rec, sum, progress, point };
}

/** A trusted output that keeps what it saw, as the results directory does. */
function witness() {
  const seen: string[] = [];
  const output = builtInOutput<Output>({
    name: 'witness',
    sessionStarted: (s) => seen.push(`sessionStarted ${s.id}`),
    pointStarted: (e) => seen.push(`pointStarted ${e.point.id} ${e.progress?.sent}`),
    records: (e) => seen.push(`records ${e.records()[0].outputTokens}`),
    telemetry: () => seen.push('telemetry'),
    snapshot: (e) => seen.push(`snapshot ${e.counts.sent}`),
    pointFinished: (e) => {
      seen.push(`pointFinished ${e.summary.requests.completed}`);
    },
    sessionFinished: (e) => {
      seen.push(`sessionFinished ${e.code}`);
    },
  });
  return { output, seen };
}

const EXPECTED = [
  'sessionStarted abc',
  'pointStarted abc 3',
  'records 4',
  'records 4',
  'telemetry',
  'snapshot 3',
  'pointFinished 20',
  'sessionFinished 0',
];

type Behaviour = 'throw' | 'reject' | 'never' | 'slow' | 'mutate';
const BEHAVIOURS: Behaviour[] = ['throw', 'reject', 'never', 'slow', 'mutate'];

function misbehaving(event: EventName, how: Behaviour, done: string[]): Output {
  const handler = (e: unknown) => {
    switch (how) {
      case 'throw':
        throw new Error('boom');
      case 'reject':
        return Promise.reject(new Error('boom'));
      case 'never':
        return new Promise<void>(() => {});
      case 'slow':
        return new Promise<void>((r) => setTimeout(r, 20)).then(() => {
          done.push(event);
        });
      case 'mutate':
        scribble(e);
        // What it was given is its own to read: records() too.
        if (event === 'records') scribble((e as { records(): unknown }).records());
        return undefined;
    }
  };
  return { name: 'mine', [event]: handler } as Output;
}

describe('an output of the user own, misbehaving on each event', () => {
  for (const event of EVENTS) {
    for (const how of BEHAVIOURS) {
      test(`${how} on ${event}`, async () => {
        const notices: string[] = [];
        const done: string[] = [];
        const { output, seen } = witness();
        const events = new SessionEvents(
          info,
          [misbehaving(event, how, done), output],
          (m) => notices.push(m),
          true,
          { exportTimeoutS: 0.1 },
        );
        const started = performance.now();
        const core = await tellEvery(events);
        const tookMs = performance.now() - started;
        // Rejections of handlers that are not awaited arrive as they come.
        await new Promise((r) => setTimeout(r, 30));
        // The session and its built-in outputs saw every event, unchanged.
        assert.deepEqual(seen, EXPECTED);
        assert.deepEqual(core.rec, record());
        // The verdict is the session's own addition, judged before any output hears the point.
        assert.deepEqual(core.sum, { ...summary(), validity: { verdict: 'valid', reasons: [] } });
        assert.deepEqual(core.progress, { sent: 3, finished: 2, failed: 0, inFlight: 1 });
        assert.equal(core.point.id, 'abc');
        assert.deepEqual(info.plan, { requests: 20, headers: { a: 'b' } });
        assert.equal(events.failure, undefined);
        if (how === 'throw' || how === 'reject') {
          assert.equal(notices.length, 1, notices.join('\n'));
          assert.match(notices[0], new RegExp(`output mine failed on ${event} .*boom`));
        } else if (how === 'never' && AWAITED.has(event)) {
          assert.equal(notices.length, 1, notices.join('\n'));
          assert.match(notices[0], new RegExp(`did not finish ${event} within 0.1 s`));
          assert.ok(tookMs < 1000, `${tookMs} ms`);
        } else if (how === 'mutate') {
          // Frozen: a strict-mode output that writes fails, and is told so; nothing changed.
          assert.ok(notices.length <= 1, notices.join('\n'));
        } else assert.deepEqual(notices, []);
        if (how === 'slow') {
          // Awaited ones finished before the session went on; the others were not waited for.
          if (AWAITED.has(event)) assert.deepEqual(done, [event]);
        }
        if (how === 'never' && !AWAITED.has(event)) assert.ok(tookMs < 80, `${tookMs} ms`);
      });
    }
  }
});

describe('outputs and the session', () => {
  test("an output's records are its own: what it changes reaches no one else", () => {
    const seen: number[] = [];
    const changer: Output = {
      name: 'changer',
      records: (e) => {
        (e.records()[0] as { outputTokens: number }).outputTokens = 0;
      },
    };
    const reader: Output = {
      name: 'reader',
      records: (e) => {
        seen.push(e.records()[0].outputTokens);
      },
    };
    const events = new SessionEvents(info, [changer, reader]);
    const point = events.nextPoint({ load: { mode: 'closed', concurrency: 1 }, scenario: 's' });
    const rec = record();
    events.record(point, rec);
    events.lines(point, `${JSON.stringify(record())}\n`, 1);
    assert.equal(rec.outputTokens, 4);
    assert.deepEqual(seen, [4, 4]);
  });

  test('a thenable whose then throws is a failure like any other, on every event', async () => {
    for (const event of EVENTS) {
      const notices: string[] = [];
      const { output, seen } = witness();
      const hostile = {
        name: 'thenable',
        [event]: () => ({
          // biome-ignore lint/suspicious/noThenProperty: the hostile case itself
          then() {
            throw new Error('boom');
          },
        }),
      } as unknown as Output;
      const events = new SessionEvents(info, [hostile, output], (m) => notices.push(m));
      await tellEvery(events);
      await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(seen, EXPECTED, event);
      assert.equal(notices.length, 1, `${event}: ${notices.join('\n')}`);
      assert.match(notices[0], /boom/);
    }
  });

  test('after a stop, an output that never settles holds the session half a second at most', async () => {
    const stop = new AbortController();
    const notices: string[] = [];
    const events = new SessionEvents(
      info,
      [{ name: 'stuck', pointFinished: () => new Promise(() => {}) }],
      (m) => notices.push(m),
      true,
      { exportTimeoutS: 60, stop: stop.signal },
    );
    const point = events.nextPoint({ load: { mode: 'closed', concurrency: 1 }, scenario: 's' });
    setTimeout(() => stop.abort(), 50);
    const started = performance.now();
    await events.pointFinished({ point, summary: summary(), saveServerMetrics: false });
    const tookMs = performance.now() - started;
    // 50 ms to the stop, then half a second; a loaded machine's timers may run late.
    assert.ok(tookMs >= 500 && tookMs < 1500, `${tookMs} ms`);
    assert.match(
      notices[0] ?? '',
      /output stuck was still busy with pointFinished when the session stopped/,
    );
  });

  test('a required output that fails once the session runs halts it, with its error', async () => {
    const events = new SessionEvents(info, [
      {
        name: 'results',
        required: true,
        records: () => {
          throw new Error('cannot write records.jsonl: ENOSPC: no space left on device');
        },
      },
    ]);
    const point = events.nextPoint({ load: { mode: 'closed', concurrency: 1 }, scenario: 's' });
    // The measuring thread is not thrown at: the halt tells the load to stop sending.
    events.record(point, record());
    assert.equal(events.halt.aborted, true);
    assert.match(events.failure?.message ?? '', /ENOSPC/);
  });
});
