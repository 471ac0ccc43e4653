/**
 * Sweeps on the simulator in virtual time, whose saturation and latencies are known: the knee,
 * the SLO capacity search against an exhaustive sweep, the triangle and the trap warnings.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  checkSlos,
  findCliff,
  findKnee,
  parseAggregateSlos,
  recommend,
  type SweepPoint,
  searchMaxLoad,
} from '../../src/analysis/sweep.js';
import type { RunSummary } from '../../src/metrics/summary.js';
import { runCli, tempDir } from '../helpers/cli.js';

function point(level: number, over: Partial<SweepPoint> = {}): SweepPoint {
  return {
    scenario: 's',
    level,
    repeat: 0,
    meanConcurrency: level,
    outputTokensPerS: 100 * level,
    requestsPerS: level,
    perUserTokensPerS: 100,
    ttftP50Ms: 50,
    ttftP99Ms: 60,
    itlP50Ms: 10,
    itlP99Ms: 12,
    tpotP50Ms: 10,
    e2eP50Ms: 1000,
    e2eP99Ms: 1100,
    completed: 100,
    failed: 0,
    meanInputTokens: 200,
    meanOutputTokens: 100,
    ...over,
  };
}

async function sweepJson(args: string[]) {
  const out = join(tempDir('ig-sweep-'), 'sweep');
  const result = await runCli(['sweep', '--simulate', '--out', out, '--json', ...args]);
  assert.equal(result.code, 0, result.stderr);
  const saved = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8'));
  assert.deepEqual(JSON.parse(result.stdout), saved);
  return { saved, out, stderr: result.stderr };
}

describe('sweep analysis (pure)', () => {
  test('knee, cliff, percentile SLOs and the search', async () => {
    const flat = [point(1), point(2), point(4), point(8, { outputTokensPerS: 420, tpotP50Ms: 19 })];
    const knee = findKnee(flat);
    assert.equal(knee?.saturatesAt, 4);
    assert.equal(findKnee(flat.slice(0, 3)), undefined, 'no knee while throughput scales');
    const cliff = findCliff([point(1), point(2, { ttftP99Ms: 200 })], 3);
    assert.equal(cliff?.level, 2);
    assert.equal(findCliff([point(1), point(2, { ttftP99Ms: 170 })], 3), undefined);

    const slos = parseAggregateSlos('ttft.p99<500, itl.p99<50');
    assert.deepEqual(
      slos.map((s) => [s.metric, s.stat, s.limitMs]),
      [
        ['ttft', 'p99', 500],
        ['itl', 'p99', 50],
      ],
    );
    assert.throws(() => parseAggregateSlos('ttft.p95<5'), /METRIC\.STAT<MS/);
    assert.throws(() => parseAggregateSlos('tpot.p99<5'), /tpot is summarised at p50 only/);
    const check = checkSlos(point(1, { ttftP99Ms: 450, itlP99Ms: 49.5 }), slos);
    assert.equal(check.ok, true);
    assert.equal(check.binding.text, 'itl.p99<50', 'the closest to its limit binds');

    // A service that meets the SLO up to 37: doubling then bisection finds 37 exactly.
    const tried: number[] = [];
    const search = await searchMaxLoad(
      async (level) => {
        tried.push(level);
        return { ok: level <= 37, point: point(level) };
      },
      { start: 1, max: 1024, resolution: 1, integer: true },
    );
    assert.equal(search.best, 37);
    assert.equal(search.failedAt, 38);
    assert.ok(tried.length <= 14, `${tried.length} evaluations`);
  });

  test('the triangle picks a point per corner and says what it costs', () => {
    const points = [
      point(1, { outputTokensPerS: 140, ttftP99Ms: 30, itlP99Ms: 7 }),
      point(16, { outputTokensPerS: 1800, ttftP99Ms: 120, itlP99Ms: 8 }),
      point(64, { outputTokensPerS: 6000, ttftP99Ms: 380, itlP99Ms: 10 }),
      point(128, { outputTokensPerS: 8900, ttftP99Ms: 550, itlP99Ms: 15 }),
      point(256, { outputTokensPerS: 9100, ttftP99Ms: 9000, itlP99Ms: 250 }),
    ];
    const [latency, throughput, memory] = recommend(points);
    assert.equal(latency.point?.level, 16);
    assert.equal(throughput.point?.level, 128, 'p99 ITL 250 ms at 256 is over the 200 ms bar');
    assert.equal(
      memory.point?.level,
      128,
      'the smallest footprint with 90% of the best throughput',
    );
    assert.match(latency.costs, /1,800 output tok\/s \(20% of the best seen\)/);
    const none = recommend([point(1, { ttftP99Ms: 900 })]);
    assert.match(none[0].costs, /no measured point meets it/);
  });
});

describe('infergauge sweep on the simulator', () => {
  test('the knee lies where the simulator saturates (max_num_seqs 32)', async () => {
    const { saved } = await sweepJson([
      '--scenario',
      'creative',
      '--levels',
      '8,16,32,64,128',
      '--max-num-seqs',
      '32',
    ]);
    const creative = saved.scenarios[0];
    assert.equal(creative.knee.saturatesAt, 32);
    assert.equal(creative.knee.level, 64);
    // Past the knee requests wait for a sequence slot: the cliff is in TTFT.
    assert.equal(creative.cliff.metric, 'p99 TTFT');
  });

  test('--find-max equals the largest compliant concurrency of an exhaustive sweep, within one step', async () => {
    const common = ['--scenario', 'summarize', '--requests', '40', '--warmup', '4'];
    const slo = 'ttft.p99<800,itl.p99<100';
    const { saved: found } = await sweepJson([
      ...common,
      '--levels',
      '1',
      '--find-max',
      '--slo',
      slo,
    ]);
    const search = found.scenarios[0].search;
    const levels = Array.from({ length: 16 }, (_, i) => i + 1);
    const { saved: all } = await sweepJson([...common, '--levels', levels.join(',')]);
    const slos = parseAggregateSlos(slo);
    const compliant = (all.scenarios[0].points as SweepPoint[])
      .filter((p) => checkSlos(p, slos).ok)
      .map((p) => p.level);
    const truth = Math.max(...compliant);
    assert.ok(truth > 1 && truth < 16, `the SLO binds inside the range (${truth})`);
    assert.ok(Math.abs(search.best - truth) <= 1, `search ${search.best}, exhaustive ${truth}`);
    assert.ok(search.binding.startsWith('ttft') || search.binding.startsWith('itl'));
  });

  test('trap warnings fire when they should and not otherwise', async () => {
    const { saved } = await sweepJson([
      '--scenario',
      'summarize,creative',
      '--levels',
      '1,4',
      '--requests',
      '20',
      '--target-context',
      '16384',
    ]);
    const [summarize, creative] = saved.scenarios;
    const codes = (s: { warnings: { code: string }[] }) => s.warnings.map((w) => w.code).sort();
    assert.deepEqual(codes(summarize), ['context_extrapolation', 'prefill_dominated']);
    assert.deepEqual(codes(creative), ['context_extrapolation']);
    const extrapolated = summarize.warnings.find(
      (w: { code: string }) => w.code === 'context_extrapolation',
    );
    assert.match(extrapolated.message, /longer than any measured \([\d,]+\)/);
    // The KV sizing is the detail: the report's, not the terminal line's.
    assert.match(extrapolated.detail, /pool holds \d+ such sequences/);
    const within = await sweepJson([
      '--scenario',
      'creative',
      '--levels',
      '1',
      '--requests',
      '10',
      '--target-context',
      '1000',
    ]);
    assert.deepEqual(within.saved.scenarios[0].warnings, []);

    // Temperature: warned on a run, not at 0.
    const warm = await runCli([
      'run',
      '--simulate',
      '--requests',
      '10',
      '--temperature',
      '0.7',
      '--json',
      '--out',
      join(tempDir('ig-sweep-'), 't'),
    ]);
    assert.equal(warm.code, 0, warm.stderr);
    assert.ok(
      (JSON.parse(warm.stdout) as RunSummary).warnings.some(
        (w) => w.code === 'nonzero_temperature',
      ),
    );
    const cold = await runCli([
      'run',
      '--simulate',
      '--requests',
      '10',
      '--json',
      '--out',
      join(tempDir('ig-sweep-'), 'c'),
    ]);
    assert.ok(
      !(JSON.parse(cold.stdout) as RunSummary).warnings.some(
        (w) => w.code === 'nonzero_temperature',
      ),
    );
  });

  test('bad sweep options name the flag', async () => {
    const bad = await runCli(['sweep', '--levels', '1,x', '--find-max', '--concurrency', '4']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--levels must be whole numbers above 0/);
    assert.match(bad.stderr, /--find-max needs percentile SLOs/);
    assert.match(bad.stderr, /--concurrency is set per point by a sweep/);
  });
});
