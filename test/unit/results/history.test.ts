/**
 * Issue 53, the history database: rows made from run directories (fixture runs written as a run
 * writes them), filters, series and trends, regression verdicts (compare's bootstrap where
 * records exist, the summary rule where not), `--reindex` equal to the live index, a damaged or
 * missing database rebuilt with a warning, a killed run indexed as interrupted, the lock.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs, {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { DEFAULT_BOOTSTRAP } from '../../../src/analysis/compare.js';
import { runHistory, runTag } from '../../../src/cli/history.js';
import { EXIT } from '../../../src/errors.js';
import { entryOf } from '../../../src/results/history/entry.js';
import { indexDirs } from '../../../src/results/history/indexer.js';
import { findRuns, seriesOf, trendOf } from '../../../src/results/history/query.js';
import { DEFAULT_REGRESS_METRICS, regressSeries } from '../../../src/results/history/regress.js';
import {
  allEntries,
  changeHistory,
  HISTORY_FILE,
  LOCK_FILE,
  readHistory,
  withLock,
} from '../../../src/results/history/store.js';
import { readSummary } from '../../../src/results/reader.js';
import { REPO } from '../../../tools/repo.js';
import { type FixtureRun, night, writeRun } from './historyFixtures.js';

const tmp = mkdtempSync(join(tmpdir(), 'ig-history-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const freshRoot = () => mkdtempSync(join(tmp, `root-${n++}-`));

/** Writes runs under a new root and indexes each as the output does; returns the root. */
async function rootWith(runs: (FixtureRun & { name: string })[], notices: string[] = []) {
  const root = freshRoot();
  for (const r of runs) {
    const dir = writeRun(root, r.name, r);
    await indexDirs(root, [dir], { onNotice: (m) => notices.push(m), session: r.id });
  }
  return root;
}

/** Every row, as read back. */
async function rows(root: string, notices: string[] = []) {
  const db = await readHistory(root, (m) => notices.push(m));
  try {
    return allEntries(db);
  } finally {
    db.close();
  }
}

/** What a command prints (given its `out`), and its exit code. */
async function captured(
  body: (out: (text: string) => void) => Promise<number>,
): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await body((text) => {
    out += text;
  });
  return { code, out };
}
const quietly = async <T>(body: () => Promise<T>): Promise<T> => {
  const write = process.stderr.write;
  process.stderr.write = (() => true) as typeof process.stderr.write;
  try {
    return await body();
  } finally {
    process.stderr.write = write;
  }
};

const nightly = (day: number, over: Partial<FixtureRun> = {}) => ({
  name: `n${day}`,
  id: `night${day}`,
  startedAt: night(day),
  seed: day,
  tags: ['nightly'],
  ...over,
});

describe('indexing, filters and trends', () => {
  test('a row holds what the directory says, the headline metrics as summary.json has them', async () => {
    const root = await rootWith([
      nightly(1, { serverInfo: { 'max-num-seqs': '256' } }),
      nightly(2, { engineVersion: '0.6.2', gpu: 'H200' }),
      {
        name: 'other',
        id: 'other1',
        startedAt: night(3),
        seed: 9,
        model: 'qwen-7b',
        url: 'http://b:8000',
      },
    ]);
    const all = await rows(root);
    assert.deepEqual(
      all.map((r) => r.id),
      ['night1', 'night2', 'other1'],
    );
    const r = all[0];
    const summary = readSummary(join(root, 'n1'));
    assert.ok(summary);
    assert.equal(r.dir, 'n1');
    assert.equal(r.kind, 'run');
    assert.equal(r.interrupted, false);
    assert.equal(r.model, 'llama-3.1-8b');
    assert.equal(r.url, 'http://gpu-1:8000');
    assert.equal(r.engine, 'vllm');
    assert.equal(r.gpuType, 'H100');
    assert.equal(r.gpuCount, 1);
    assert.deepEqual(r.tags, ['nightly']);
    assert.equal(r.scenario, 'chat');
    assert.equal(r.load, 'closed:4');
    assert.equal(r.loadValue, 4);
    assert.deepEqual(r.serverInfo, { 'max-num-seqs': '256' });
    assert.equal(r.latency.ttft_p99_ms, summary.latency.ttftMs.p99);
    assert.equal(r.metrics['ttft.p99'], summary.latency.ttftMs.p99);
    assert.equal(r.metrics.outputThroughput, summary.throughput.outputTokensPerS);
    assert.equal(r.completed, 400);
    assert.equal(r.hasRecords, true);
  });

  test('filters: globs, every tag, dates, kind; newest first with a limit', async () => {
    const root = await rootWith([
      nightly(1),
      nightly(2, { tags: ['nightly', 'gpu'] }),
      nightly(3, { model: 'qwen-7b', tags: [] }),
    ]);
    const db = await readHistory(root, () => {});
    try {
      const ids = (f: Parameters<typeof findRuns>[1], limit?: number) =>
        findRuns(db, f, limit).map((r) => r.id);
      assert.deepEqual(ids({}), ['night3', 'night2', 'night1']);
      assert.deepEqual(ids({}, 1), ['night3']);
      assert.deepEqual(ids({ model: 'llama*' }), ['night2', 'night1']);
      assert.deepEqual(ids({ tags: ['nightly'] }), ['night2', 'night1']);
      assert.deepEqual(ids({ tags: ['nightly', 'gpu'] }), ['night2']);
      assert.deepEqual(ids({ since: night(2) }), ['night3', 'night2']);
      assert.deepEqual(ids({ until: night(2) }), ['night1']);
      assert.deepEqual(ids({ engine: 'vllm', gpu: 'H100', load: 'closed:*' }).length, 3);
      assert.deepEqual(ids({ kind: 'sweep-point' }), []);
    } finally {
      db.close();
    }
  });

  test('a series is the tag (model and URL may change inside it), else model and URL; scenario and load split', async () => {
    const root = await rootWith([
      nightly(1),
      nightly(2, { url: 'http://gpu-2:8000' }),
      nightly(3, { concurrency: 8 }),
      { name: 'u1', id: 'u1', startedAt: night(4), seed: 4 },
    ]);
    const db = await readHistory(root, () => {});
    const all = findRuns(db, {});
    db.close();
    const series = seriesOf(all);
    assert.deepEqual(
      series.map((s) => [s.name, s.runs.map((r) => r.id)]),
      [
        ['tag nightly · chat · closed:4', ['night1', 'night2']],
        ['tag nightly · chat · closed:8', ['night3']],
        ['llama-3.1-8b · http://gpu-1:8000 · chat · closed:4', ['u1']],
      ],
    );
    const trend = trendOf(series[0], 'ttft.p99');
    assert.deepEqual(
      trend.map((p) => p.value),
      series[0].runs.map((r) => readSummary(join(root, r.dir))?.latency.ttftMs.p99),
    );
  });

  test('`history --metric` prints the trend; an unknown metric is bad usage', async () => {
    const root = await rootWith([nightly(1), nightly(2)]);
    const { code, out } = await captured((print) =>
      runHistory({ root, tag: ['nightly'], metric: ['ttft.p99'], json: true }, print),
    );
    assert.equal(code, EXIT.ok);
    const json = JSON.parse(out) as {
      series: { name: string; points: { values: Record<string, number> }[] }[];
    };
    assert.equal(json.series.length, 1);
    assert.equal(json.series[0].points.length, 2);
    assert.ok(json.series[0].points[0].values['ttft.p99'] > 100);
    const html = join(root, 'trend.html');
    const text = await captured((print) =>
      runHistory({ root, tag: ['nightly'], metric: ['ttft.p99'], html }, print),
    );
    assert.match(text.out, /tag nightly · chat · closed:4 \(2 runs\)/);
    assert.match(readFileSync(html, 'utf8'), /ttft\.p99 over time<\/h2><svg/);
    // Server text is escaped in HTML and stripped of control characters on the terminal.
    const hostile = await rootWith([
      { ...nightly(1), model: '<script>alert(1)</script>\u001b]0;owned\u0007', tags: [] },
    ]);
    const page = join(hostile, 'trend.html');
    const shown = await captured((print) =>
      runHistory({ root: hostile, metric: ['ttft.p99'], html: page }, print),
    );
    const listed = await captured((print) => runHistory({ root: hostile }, print));
    for (const text of [shown.out, listed.out]) {
      assert.ok(!text.includes('\u001b') && !text.includes('\u0007'), 'no control character');
    }
    assert.doesNotMatch(readFileSync(page, 'utf8'), /<script>/);
    assert.match(readFileSync(page, 'utf8'), /&lt;script&gt;/);
    const bad = await quietly(() => runHistory({ root, metric: ['ttft.p42'] }));
    assert.equal(bad, EXIT.invalidOptions);
  });
});

describe('regression verdicts', () => {
  const options = {
    baseline: { runs: 5 },
    metrics: DEFAULT_REGRESS_METRICS,
    bootstrap: DEFAULT_BOOTSTRAP,
    summaryMargin: 0.05,
  };
  const baseline = [1, 2, 3, 4, 5].map((d) => nightly(d));

  test('a seeded slower run in a tagged series is flagged with the interval; exit 3', async () => {
    const root = await rootWith([...baseline, nightly(6, { ttftMs: 130, engineVersion: '0.6.2' })]);
    const db = await readHistory(root, () => {});
    const [series] = seriesOf(findRuns(db, { tags: ['nightly'] }), 'nightly');
    db.close();
    const v = await regressSeries(root, series, options, () => {});
    assert.equal(v.candidate.id, 'night6');
    assert.equal(v.baseline.length, 5);
    assert.equal(v.regression, true);
    const ttft = v.metrics.find((m) => m.name === 'ttft.p99');
    assert.equal(ttft?.verdict, 'worse');
    assert.equal(ttft?.method, 'bootstrap');
    assert.ok(ttft?.ci && ttft.ci.relativeLow > 0, 'the interval excludes 0');
    // The engine changed inside the series: named beside the verdict, not split on.
    assert.ok(v.differences.some((d) => /engine version 0\.6\.2, baseline 0\.6\.1/.test(d)));
    const { code, out } = await quietly(() =>
      captured((print) => runHistory({ root, tag: ['nightly'], regress: true }, print)),
    );
    assert.equal(code, EXIT.thresholdFailed);
    assert.match(out, /REGRESSION/);
    assert.match(out, /95 % CI of the change \[\+/);
  });

  test('a run of the same distribution is not flagged; exit 0', async () => {
    const root = await rootWith([...baseline, nightly(6)]);
    const { code, out } = await captured((print) =>
      runHistory({ root, tag: ['nightly'], regress: true, json: true }, print),
    );
    const json = JSON.parse(out) as {
      regression: boolean;
      verdicts: { metrics: { verdict: string }[] }[];
    };
    assert.equal(code, EXIT.ok);
    assert.equal(json.regression, false);
    assert.ok(json.verdicts[0].metrics.every((m) => m.verdict !== 'worse'));
  });

  test('--run judges a chosen run against the runs before it', async () => {
    const root = await rootWith([...baseline, nightly(6, { ttftMs: 130 }), nightly(7)]);
    const latest = await captured((print) =>
      runHistory({ root, regress: true, json: true }, print),
    );
    assert.equal(latest.code, EXIT.ok, 'the latest run is like its baseline');
    const chosen = await quietly(() =>
      captured((print) => runHistory({ root, regress: true, run: 'night6', json: true }, print)),
    );
    assert.equal(chosen.code, EXIT.thresholdFailed);
  });

  test('runs without per-request records are judged by the summary rule, which says it is one', async () => {
    const summaryOnly = { summaryOnly: true };
    const root = await rootWith([
      ...baseline.map((r) => ({ ...r, ...summaryOnly })),
      nightly(6, { ttftMs: 150, ...summaryOnly }),
    ]);
    const db = await readHistory(root, () => {});
    const [series] = seriesOf(findRuns(db, {}));
    db.close();
    const v = await regressSeries(root, series, options, () => {});
    const ttft = v.metrics.find((m) => m.name === 'ttft.p99');
    assert.equal(ttft?.method, 'summary rule');
    assert.equal(ttft?.verdict, 'worse');
    assert.ok(ttft?.range && ttft.candidate !== null && ttft.candidate > ttft.range.max * 1.05);
    assert.match(ttft?.why ?? '', /summary rule \(a run without per-request records\)/);
  });

  test('--baseline N and --baseline-since choose the window; both at once is bad usage', async () => {
    const root = await rootWith([...baseline, nightly(6)]);
    const window = async (o: { baseline?: string; baselineSince?: string }) => {
      const { out } = await captured((print) =>
        runHistory({ root, regress: true, json: true, ...o }, print),
      );
      const json = JSON.parse(out) as { verdicts: { baseline: { id: string }[] }[] };
      return json.verdicts[0].baseline.map((b) => b.id);
    };
    assert.deepEqual(await window({ baseline: '2' }), ['night4', 'night5']);
    assert.deepEqual(await window({ baselineSince: '2026-11-03' }), ['night3', 'night4', 'night5']);
    const both = await quietly(() =>
      runHistory({ root, regress: true, baseline: '2', baselineSince: '2026-11-03' }),
    );
    assert.equal(both, EXIT.invalidOptions);
    const notRegress = await quietly(() => runHistory({ root, baseline: '2' }));
    assert.equal(notRegress, EXIT.invalidOptions);
  });

  test('a series with one run has nothing to compare with', async () => {
    const root = await rootWith([nightly(1)]);
    const { code, out } = await captured((print) => runHistory({ root, regress: true }, print));
    assert.equal(code, EXIT.ok);
    assert.match(out, /not judged: no earlier run/);
  });
});

describe('the directories are the source of truth', () => {
  test('--reindex equals the live index', async () => {
    const root = await rootWith([nightly(1), nightly(2), { ...nightly(3), killed: true }]);
    const live = await rows(root);
    await quietly(() => captured((print) => runHistory({ root, reindex: true }, print)));
    assert.deepEqual(await rows(root), live);
  });

  test('a truncated database is rebuilt with a warning, no run lost', async () => {
    const root = await rootWith([nightly(1), nightly(2)]);
    const before = await rows(root);
    const path = join(root, HISTORY_FILE);
    truncateSync(path, 1000);
    const notices: string[] = [];
    assert.deepEqual(await rows(root, notices), before);
    assert.ok(
      notices.some((m) => /history\.db is rebuilt from the results directories/.test(m)),
      notices.join('\n'),
    );
    writeFileSync(path, 'not a database at all');
    const more: string[] = [];
    await indexDirs(root, [writeRun(root, 'n3', nightly(3))], { onNotice: (m) => more.push(m) });
    assert.deepEqual(
      (await rows(root)).map((r) => r.id),
      ['night1', 'night2', 'night3'],
    );
    assert.ok(more.some((m) => /rebuilt/.test(m)));
  });

  test('a missing database is rebuilt from the directories, said when it held other runs', async () => {
    const root = await rootWith([nightly(1), nightly(2)]);
    rmSync(join(root, HISTORY_FILE));
    const notices: string[] = [];
    await indexDirs(root, [writeRun(root, 'n3', nightly(3))], {
      onNotice: (m) => notices.push(m),
      session: 'night3',
    });
    assert.equal((await rows(root)).length, 3);
    assert.ok(notices.some((m) => /was missing: rebuilt from the 2 measured points/.test(m)));
  });

  test('a run killed mid-way (no summary, no end time) is indexed as interrupted, from its records', async () => {
    const root = freshRoot();
    const dir = writeRun(root, 'killed', { ...nightly(1), killed: true });
    const e = await entryOf(root, dir);
    assert.equal(e.interrupted, true);
    assert.equal(e.completed, 400);
    assert.ok((e.metrics['ttft.p99'] ?? 0) > 0);
    // A killed sweep point is summarised at its own level, not the sweep plan's load.
    const point = writeRun(root, 'point', {
      ...nightly(5),
      id: 'point5',
      killed: true,
      pointConcurrency: 8,
    });
    const p = await entryOf(root, point);
    assert.equal(p.load, 'closed:8');
    assert.equal(p.interrupted, true);
    // Trends leave it out.
    await indexDirs(root, [dir, writeRun(root, 'ok', nightly(2))], { onNotice: () => {} });
    const { out } = await captured((print) =>
      runHistory({ root, metric: ['ttft.p99'], json: true }, print),
    );
    const json = JSON.parse(out) as { series: { points: { id: string }[] }[] };
    assert.deepEqual(
      json.series.flatMap((s) => s.points.map((p) => p.id)),
      ['night2'],
    );
  });

  test('history tag adds and removes tags in the directory and the database', async () => {
    const root = await rootWith([{ ...nightly(1), tags: ['nightly'] }]);
    await captured((print) => runTag('night1', ['gpu', 'weekly'], { root }, print));
    assert.deepEqual((await rows(root))[0].tags, ['nightly', 'gpu', 'weekly']);
    await captured((print) => runTag(join(root, 'n1'), ['nightly'], { root, untag: true }, print));
    assert.deepEqual((await rows(root))[0].tags, ['gpu', 'weekly']);
    assert.deepEqual(JSON.parse(readFileSync(join(root, 'n1', 'tags.json'), 'utf8')), {
      add: ['gpu', 'weekly'],
      remove: ['nightly'],
    });
    // The sidecar is the truth: a rebuild keeps the tags.
    await quietly(() => captured((print) => runHistory({ root, reindex: true }, print)));
    assert.deepEqual((await rows(root))[0].tags, ['gpu', 'weekly']);
  });
});

describe('the lock', () => {
  test('a stale lock (its holder gone) is broken with a notice', async () => {
    const root = freshRoot();
    writeFileSync(join(root, LOCK_FILE), JSON.stringify({ pid: 2 ** 22 + 17, at: '', token: 'x' }));
    const notices: string[] = [];
    const got = await withLock(
      root,
      () => 'held',
      (m) => notices.push(m),
      2000,
    );
    assert.equal(got, 'held');
    assert.ok(notices.some((m) => /broke a stale lock/.test(m)));
    assert.equal(existsSync(join(root, LOCK_FILE)), false, 'released');
  });

  test('a lock that cannot be written (a failing disk) is not left behind to hold others off', async () => {
    const root = freshRoot();
    const { openSync, writeSync } = fs;
    let lockFd: number | undefined;
    fs.openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
      const fd = (openSync as (...a: unknown[]) => number)(path, ...rest);
      if (String(path).endsWith(LOCK_FILE)) lockFd = fd;
      return fd;
    }) as typeof fs.openSync;
    fs.writeSync = ((fd: number, ...rest: unknown[]) => {
      if (fd === lockFd) throw Object.assign(new Error('EIO: simulated, write'), { code: 'EIO' });
      return (writeSync as (...a: unknown[]) => number)(fd, ...rest);
    }) as typeof fs.writeSync;
    syncBuiltinESMExports();
    try {
      await assert.rejects(
        withLock(
          root,
          () => 1,
          () => {},
        ),
        /EIO/,
      );
    } finally {
      fs.openSync = openSync;
      fs.writeSync = writeSync;
      syncBuiltinESMExports();
    }
    assert.equal(existsSync(join(root, LOCK_FILE)), false);
    // The next writer takes it at once.
    assert.equal(
      await withLock(
        root,
        () => 2,
        () => {},
        100,
      ),
      2,
    );
  });

  test('a live lock is waited for, then given up on with an error (bounded)', async () => {
    const root = freshRoot();
    writeFileSync(join(root, LOCK_FILE), JSON.stringify({ pid: process.pid, at: '', token: 'x' }));
    const t0 = performance.now();
    await assert.rejects(
      changeHistory(root, () => undefined, { onNotice: () => {}, waitMs: 200 }),
      /held by another process/,
    );
    assert.ok(performance.now() - t0 < 5000);
  });

  test('two processes indexing at once lose no row and leave a readable database', async () => {
    const root = freshRoot();
    // The database exists before the runs do: each row must come from a writer, none from a rebuild.
    await changeHistory(root, () => undefined, { onNotice: () => {} });
    const dirs = (prefix: string) =>
      Array.from({ length: 12 }, (_, i) =>
        writeRun(root, `${prefix}${i}`, {
          id: `${prefix}${i}`,
          startedAt: night(1 + (i % 20)),
          seed: i,
          requests: 20,
        }),
      );
    const a = dirs('a');
    const b = dirs('b');
    const script = `
      const { indexDirs } = await import(${JSON.stringify(pathToFileURL(join(REPO, 'src/results/history/indexer.ts')).href)});
      const [root, ...dirs] = process.argv.slice(1);
      for (const d of dirs) await indexDirs(root, [d], { onNotice: (m) => console.error(m), waitMs: 20000 });
    `;
    const child = (list: string[]) =>
      new Promise<number>((resolve, reject) => {
        const p = spawn(
          process.execPath,
          ['--import', 'tsx', '--input-type=module', '-e', script, root, ...list],
          { stdio: ['ignore', 'ignore', 'inherit'] },
        );
        p.on('error', reject);
        p.on('exit', (code) => resolve(code ?? -1));
      });
    const codes = await Promise.all([child(a), child(b)]);
    assert.deepEqual(codes, [0, 0]);
    const ids = (await rows(root)).map((r) => r.id).sort();
    assert.deepEqual(ids, [...a, ...b].map((d) => d.split('/').pop()).sort());
    assert.equal(existsSync(join(root, LOCK_FILE)), false);
  });
});
