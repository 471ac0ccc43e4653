/**
 * What the history database costs (docs/cli.md, "infergauge history"): sql.js's import and
 * start, 10,000 synthetic runs written in one transaction, indexing one more run the way the
 * output does (read the 10,000-run file under its lock, insert, write it back atomically), a
 * tagged series' trend and the list of every series, on this machine.
 *
 *   node --import tsx bench/history.ts [--runs 10000] [--repeats 20]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { HistoryEntry } from '../src/results/history/entry.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '10000' },
    repeats: { type: 'string', default: '20' },
    verdicts: { type: 'string', default: '0' },
  },
});
const runs = Number(values.runs);
const repeats = Number(values.repeats);

const t0 = performance.now();
const store = await import('../src/results/history/store.js');
await store.loadSqlJs();
const initMs = performance.now() - t0;
const { findRuns, seriesOf, trendOf } = await import('../src/results/history/query.js');

const entry = (i: number): HistoryEntry => {
  const latency: Record<string, number> = {};
  for (const m of ['ttft', 'itl', 'tpot', 'e2e']) {
    for (const s of ['mean', 'p50', 'p90', 'p95', 'p99']) latency[`${m}_${s}_ms`] = 10 + (i % 97);
  }
  return {
    id: `run-${i}`,
    sessionId: `s-${i}`,
    sessionKind: 'run',
    kind: 'run',
    command: 'run',
    dir: `2026-run-${i}`,
    startedAt: new Date(Date.UTC(2026, 0, 1) + i * 3_600_000).toISOString(),
    endedAt: null,
    interrupted: false,
    model: `model-${i % 5}`,
    url: `http://gpu-${i % 3}:8000`,
    engine: 'vllm',
    engineVersion: `0.6.${i % 4}`,
    gpuType: 'H100',
    gpuCount: 1,
    label: 'run',
    tags: i % 3 === 0 ? ['nightly'] : ['pr'],
    note: null,
    scenario: 'chat',
    load: `closed:${1 << (i % 7)}`,
    loadMode: 'closed',
    loadValue: 1 << (i % 7),
    serverInfo: { 'max-num-seqs': '256' },
    toolVersion: '0.1.0',
    latency,
    outputTokPerS: 1000 + i,
    requestsPerS: 10,
    completed: 1000,
    failed: 0,
    validity: 'valid',
    clientHealth: 'ok',
    hasRecords: true,
    metrics: Object.fromEntries(
      ['ttft', 'itl', 'tpot', 'e2e'].flatMap((m) =>
        ['p50', 'p90', 'p95', 'p99', 'p99.9', 'mean', 'min', 'max'].map((s) => [
          `${m}.${s}`,
          i % 101,
        ]),
      ),
    ),
  };
};

const root = mkdtempSync(join(tmpdir(), 'ig-bench-history-'));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
try {
  // The database of `runs` runs, written as the store writes it.
  let t = performance.now();
  await store.changeHistory(
    root,
    (d) =>
      store.putEntries(
        d,
        Array.from({ length: runs }, (_, i) => entry(i)),
      ),
    { onNotice: () => {}, rebuild: true },
  );
  const bulkMs = performance.now() - t;
  const size = statSync(join(root, store.HISTORY_FILE)).size;
  const one: number[] = [];
  for (let k = 0; k < repeats; k++) {
    const e = entry(runs + k);
    t = performance.now();
    await store.changeHistory(root, (d) => store.putEntries(d, [e]), { onNotice: () => {} });
    one.push(performance.now() - t);
  }
  const read: number[] = [];
  const trend: number[] = [];
  const list: number[] = [];
  for (let k = 0; k < repeats; k++) {
    t = performance.now();
    const d = await store.readHistory(root, () => {});
    read.push(performance.now() - t);
    t = performance.now();
    const tagged = findRuns(d, { tags: ['nightly'], model: 'model-2', load: 'closed:4' });
    for (const s of seriesOf(tagged, 'nightly')) trendOf(s, 'ttft.p99');
    trend.push(performance.now() - t);
    t = performance.now();
    const all = findRuns(d, {});
    seriesOf(all);
    list.push(performance.now() - t);
    d.close();
  }
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  console.log(`sql.js import + start: ${ms(initMs)}`);
  console.log(
    `${runs.toLocaleString('en-US')} runs in one transaction, written atomically: ${ms(bulkMs)} (${(size / 1e6).toFixed(1)} MB file)`,
  );
  console.log(
    `index one run into the ${runs.toLocaleString('en-US')}-run file (lock, read, insert, write, rename): median ${ms(median(one))}`,
  );
  console.log(`open the file to read: median ${ms(median(read))}`);
  console.log(`a tagged series' trend (filter in SQL, series, trend): median ${ms(median(trend))}`);
  console.log(`every run and its series: median ${ms(median(list))}`);
} finally {
  rmSync(root, { recursive: true, force: true });
}

const trials = Number(values.verdicts);
if (trials > 0) {
  const { DEFAULT_BOOTSTRAP } = await import('../src/analysis/compare.js');
  const { indexDirs } = await import('../src/results/history/indexer.js');
  const { DEFAULT_REGRESS_METRICS, regressSeries } = await import(
    '../src/results/history/regress.js'
  );
  const { night, writeRun } = await import('../test/unit/results/historyFixtures.js');
  const options = {
    baseline: { runs: 5 },
    metrics: DEFAULT_REGRESS_METRICS,
    bootstrap: DEFAULT_BOOTSTRAP,
    summaryMargin: 0.05,
  };
  let falseAlarms = 0;
  let detected = 0;
  const byMetric: Record<string, number> = {};
  const dir = mkdtempSync(join(tmpdir(), 'ig-bench-verdicts-'));
  try {
    for (let t = 0; t < trials; t++) {
      for (const slower of [false, true]) {
        const r = mkdtempSync(join(dir, 'series-'));
        const dirs = [1, 2, 3, 4, 5, 6].map((d) =>
          writeRun(r, `n${d}`, {
            id: `n${d}`,
            startedAt: night(d),
            seed: 1000 * t + d + (slower ? 500 : 0),
            tags: ['nightly'],
            ...(slower && d === 6 ? { ttftMs: 130 } : {}),
          }),
        );
        await indexDirs(r, dirs, { onNotice: () => {} });
        const d = await store.readHistory(r, () => {});
        const [series] = seriesOf(findRuns(d, {}), 'nightly');
        d.close();
        const v = await regressSeries(r, series, options, () => {});
        if (slower) {
          if (v.metrics.some((m) => m.name === 'ttft.p99' && m.verdict === 'worse')) detected++;
          continue;
        }
        if (v.regression) falseAlarms++;
        for (const m of v.metrics) {
          if (m.verdict === 'worse') byMetric[m.name] = (byMetric[m.name] ?? 0) + 1;
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `--regress on ${trials} series of one distribution: ${falseAlarms} flagged (${JSON.stringify(byMetric)}); with TTFT 30 % slower: ${detected} of ${trials} flagged on ttft.p99`,
  );
}
