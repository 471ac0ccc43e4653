/**
 * Issue 53, the history output in whole runs (the in-process simulator as ground truth): a run
 * is indexed into the history of the folder that holds its directory as it finishes, with the
 * id, metrics and directory its files have; a run stopped mid-way (Ctrl-C) is indexed as
 * interrupted; a session that saves nothing writes no history.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { parseRunPlan } from '../../../src/plan/runPlan.js';
import {
  allEntries,
  HISTORY_FILE,
  LOCK_FILE,
  readHistory,
} from '../../../src/results/history/store.js';
import type { Output, PointFinished, SessionInfo } from '../../../src/session/events.js';
import { historyOutput } from '../../../src/session/historyOutput.js';
import { benchmark } from '../../../src/session/run.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import { night, writeRun } from '../results/historyFixtures.js';

const root = mkdtempSync(join(tmpdir(), 'ig-history-output-'));
let sim: RunningSimulator;
before(async () => {
  sim = await startSimulator({ port: 0, host: '127.0.0.1' });
});
after(async () => {
  await sim.stop();
  rmSync(root, { recursive: true, force: true });
});

const plan = (name: string, more: Record<string, unknown> = {}) =>
  parseRunPlan({
    url: sim.url,
    requests: '40',
    concurrency: '4',
    inputTokens: '16',
    outputTokens: '8',
    workers: '0',
    out: join(root, name),
    ...more,
  });

async function historyRows() {
  const db = await readHistory(root, () => {});
  try {
    return allEntries(db);
  } finally {
    db.close();
  }
}

describe('the history output', () => {
  test('indexes a finished run into <folder of --out>/history.db', async () => {
    const notices: string[] = [];
    const p = plan('one');
    await benchmark(p, { html: false, onNotice: (m) => notices.push(m) });
    assert.ok(existsSync(join(root, HISTORY_FILE)));
    const manifest = JSON.parse(readFileSync(join(root, 'one', 'manifest.json'), 'utf8')) as {
      id: string;
    };
    const summary = JSON.parse(
      readFileSync(join(root, 'one', 'summary.json'), 'utf8'),
    ) as RunSummary;
    const [row] = (await historyRows()).filter((r) => r.dir === 'one');
    assert.equal(row.id, manifest.id);
    assert.equal(row.interrupted, false);
    assert.equal(row.completed, 40);
    assert.equal(row.url, sim.url);
    assert.equal(row.metrics['ttft.p99'], summary.latency.ttftMs.p99);
    assert.equal(row.hasRecords, true);
    assert.deepEqual(
      notices.filter((m) => /history/.test(m)),
      [],
    );
  });

  test('a run saved into any folder (--out /tmp/x) indexes itself without reading the rest of it', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'ig-history-any-'));
    try {
      // Someone else's results in the same folder: not this run's to read.
      writeRun(folder, 'theirs', { id: 'theirs-1', startedAt: night(1), seed: 1, requests: 20 });
      await benchmark(plan('x', { out: join(folder, 'mine') }), { html: false });
      const db = await readHistory(folder, () => {});
      try {
        assert.deepEqual(
          allEntries(db).map((r) => r.dir),
          ['mine'],
        );
      } finally {
        db.close();
      }
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  test('a run stopped mid-way is indexed as interrupted', async () => {
    const stop = new AbortController();
    let seen = 0;
    const stopper: Output = {
      name: 'stopper',
      records(e) {
        seen += e.count;
        if (seen >= 8) stop.abort();
      },
    };
    await benchmark(plan('stopped', { requests: '400' }), {
      html: false,
      outputs: [stopper],
      stop: stop.signal,
    });
    const [row] = (await historyRows()).filter((r) => r.dir === 'stopped');
    assert.equal(row.interrupted, true);
    assert.ok((row.completed ?? 0) < 400);
  });

  test('a session that saves nothing writes no history', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ig-history-nosave-'));
    try {
      await benchmark(
        parseRunPlan({ url: sim.url, requests: '4', workers: '0', out: join(dir, 'x') }),
        { save: false },
      );
      assert.equal(existsSync(join(dir, HISTORY_FILE)), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a held lock never fails or holds the run: said once, the points indexed at the end', async () => {
    const results = mkdtempSync(join(tmpdir(), 'ig-history-held-'));
    try {
      const sessionRoot = join(results, 'sweep');
      mkdirSync(sessionRoot);
      const dirs = [1, 2].map((i) =>
        writeRun(sessionRoot, `p${i}`, {
          id: `s-${i}`,
          startedAt: night(i),
          seed: i,
          requests: 20,
        }),
      );
      // Another process holds the lock (this one: alive, and fresh).
      const lock = join(results, LOCK_FILE);
      writeFileSync(lock, JSON.stringify({ pid: process.pid, at: '', token: 'other' }));
      const notices: string[] = [];
      const output = historyOutput((m) => notices.push(m), { pointMs: 50, sessionMs: 2000 });
      const session = { id: 's', root: sessionRoot } as SessionInfo;
      for (const dir of dirs) {
        const t0 = performance.now();
        await output.pointFinished?.({ session, point: { dir } } as PointFinished);
        assert.ok(performance.now() - t0 < 1500, 'the wait is bounded');
      }
      assert.equal(notices.length, 1, notices.join('\n'));
      assert.match(notices[0], /not indexed .*held by another process.*--reindex/);
      rmSync(lock);
      await output.sessionFinished?.({ session, code: 0, endedAt: '' });
      const db = await readHistory(results, () => {});
      assert.deepEqual(
        allEntries(db).map((r) => r.id),
        ['s-1', 's-2'],
      );
      db.close();
    } finally {
      rmSync(results, { recursive: true, force: true });
    }
  });
});
