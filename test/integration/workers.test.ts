import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { LoadSpec } from '../../src/load.js';
import { createRunClock } from '../../src/loadgen/clock.js';
import { type IdSequence, idAt, shardOf, splitPart, wholeRun } from '../../src/loadgen/shard.js';
import { SampleSet } from '../../src/metrics/distribution.js';
import { SummaryBuilder, summarize } from '../../src/metrics/summary.js';
import type { RequestRecord } from '../../src/record.js';
import { readRecords } from '../../src/results/jsonl.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { createArrivalSchedule } from '../../src/workload/arrivals.js';
import { collect, runCli, spawnCli, tempDir } from '../helpers/cli.js';
import { runAgainst } from '../helpers/run.js';
import { startSim } from '../helpers/sim.js';

/** The ids of a counted sequence. */
function ids(seq: IdSequence): number[] {
  const out: number[] = [];
  for (let n = 0; ; n++) {
    const id = idAt(seq, n);
    if (id === undefined) return out;
    out.push(id);
  }
}

/** The first `n` ids of an unbounded sequence. */
function firstIds(seq: IdSequence, n: number): number[] {
  return Array.from({ length: n }, (_, i) => idAt(seq, i) as number);
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

describe('splitting a load into shards', () => {
  test('closed loop: concurrency and request ids split exactly, in proportion', () => {
    const whole = wholeRun({ mode: 'closed', concurrency: 10 }, 5, 100);
    const parts = splitPart(whole, 4);
    assert.deepEqual(
      parts.map((p) => (p.load as { concurrency: number }).concurrency),
      [3, 3, 2, 2],
    );
    assert.deepEqual(sorted(parts.flatMap((p) => ids(p.warmup))), range(0, 5));
    assert.deepEqual(sorted(parts.flatMap((p) => ids(p.measured))), range(5, 105));
    // Each part's share of the requests follows its share of the users.
    assert.deepEqual(
      parts.map((p) => p.measured.count),
      [30, 30, 20, 20],
    );
    // A shard split again (a shard's workers) still tiles the whole run.
    const nested = parts.flatMap((p) => splitPart(p, 2));
    assert.deepEqual(sorted(nested.flatMap((p) => ids(p.measured))), range(5, 105));
    assert.equal(
      nested.reduce((n, p) => n + (p.load as { concurrency: number }).concurrency, 0),
      10,
    );
  });

  test('open loop: arrival k goes to part k mod N, so the parts make up the one schedule', () => {
    const whole = wholeRun({ mode: 'open', rate: 5, arrival: 'poisson', maxConcurrency: 7 }, 3, 50);
    const parts = splitPart(whole, 3);
    assert.deepEqual(sorted(parts.flatMap((p) => ids(p.warmup))), range(0, 3));
    assert.deepEqual(sorted(parts.flatMap((p) => ids(p.measured))), range(3, 53));
    for (const [i, p] of parts.entries()) {
      for (const id of ids(p.measured)) assert.equal((id - 3) % 3, i);
    }
    assert.deepEqual(
      parts.map((p) => (p.load as { maxConcurrency: number }).maxConcurrency),
      [3, 2, 2],
    );
    // Duration-only runs: unbounded sequences, still disjoint and covering.
    const timed = splitPart(wholeRun({ mode: 'closed', concurrency: 4 }, 0), 2);
    const merged = sorted([...firstIds(timed[0].measured, 50), ...firstIds(timed[1].measured, 50)]);
    assert.deepEqual(merged, range(0, 100));
  });

  test('a split that leaves a part without a request slot is refused with the reason', () => {
    assert.throws(
      () => shardOf(wholeRun({ mode: 'closed', concurrency: 2 }, 0, 10), { index: 0, count: 3 }),
      /concurrency of 2/,
    );
  });
});

describe('merging summaries', () => {
  test('a SampleSet merged from parts equals one fed every sample (exact and HDR modes)', () => {
    for (const limit of [1_000_000, 500]) {
      const whole = new SampleSet(limit);
      const parts = [new SampleSet(limit), new SampleSet(limit), new SampleSet(limit)];
      let x = 1;
      for (let i = 0; i < 2_000; i++) {
        x = (x * 48271) % 2147483647;
        const value = (x % 100_000) / 37;
        whole.add(value, 1 + (i % 3));
        parts[i % 3].add(value, 1 + (i % 3));
      }
      const merged = new SampleSet(limit);
      for (const p of parts) merged.merge(p.state());
      const a = whole.describe();
      const b = merged.describe();
      for (const key of ['count', 'min', 'p50', 'p90', 'p95', 'p99', 'p99_9', 'max'] as const) {
        assert.equal(b[key], a[key], `${key} with exact limit ${limit}`);
      }
      assert.ok(Math.abs(b.mean - a.mean) <= 1e-12 * a.mean);
      assert.equal(b.approximate, a.approximate);
    }
  });

  test('a summary built from worker states equals the single-thread summary of the records', async () => {
    const sim = await startSim({ engine: 'scripted', 'itl-ms': 1, 'max-concurrency': 64 });
    try {
      const { records } = await runAgainst(sim.url, {
        load: { mode: 'closed', concurrency: 8 },
        requests: 120,
        outputTokens: 12,
        warmupRequests: 4,
      });
      const load: LoadSpec = { mode: 'closed', concurrency: 8 };
      const slo = [{ metric: 'ttft' as const, op: '<' as const, value: 50 }];
      const single = summarize(records, { load, slo });
      const builders = [0, 1, 2].map(() => new SummaryBuilder({ load, slo }));
      for (const r of records) builders[r.id % 3].add(r);
      const merged = new SummaryBuilder({ load, slo });
      for (const b of builders) merged.merge(b.state());
      assert.deepEqual(merged.build(), single);
    } finally {
      await sim.stop();
    }
  });
});

describe('worker threads and shards', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ engine: 'scripted', 'itl-ms': 2, 'max-concurrency': 256 });
  });
  after(() => sim.stop());

  async function readAll(dir: string): Promise<RequestRecord[]> {
    const records: RequestRecord[] = [];
    for await (const r of readRecords(join(dir, 'records.jsonl'))) records.push(r);
    return records;
  }

  test('--workers 3: every request once, merged summary = summary of the records', async () => {
    const out = join(tempDir('ig-workers-'), 'run');
    const result = await runCli([
      'run',
      '--url',
      sim.url,
      '--concurrency',
      '7',
      '--requests',
      '90',
      '--warmup',
      '3',
      '--output-tokens',
      '10',
      '--workers',
      '3',
      '--slo',
      'ttft<100',
      '--no-server-metrics',
      '--no-html',
      '--out',
      out,
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const printed = JSON.parse(result.stdout);
    const records = await readAll(out);
    assert.deepEqual(
      records.map((r) => r.id).sort((a, b) => a - b),
      range(0, 93),
    );
    assert.deepEqual(
      records
        .filter((r) => r.phase === 'warmup')
        .map((r) => r.id)
        .sort(),
      [0, 1, 2],
    );
    const load: LoadSpec = { mode: 'closed', concurrency: 7 };
    const again = summarize(records, { load, slo: [{ metric: 'ttft', op: '<', value: 100 }] });
    for (const key of ['requests', 'tokens', 'throughput', 'latency', 'goodput'] as const) {
      assert.deepEqual(printed[key], JSON.parse(JSON.stringify(again[key])), key);
    }
    assert.equal(printed.clientHealth.workers.length, 3);
    const threads = JSON.parse(readFileSync(join(out, 'client-health.json'), 'utf8')).threads;
    assert.equal(threads.length, 3);
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.execution.workers, 3);
  });

  test('N local processes as shards on one --start-at, then merge: one schedule, exact metrics', async () => {
    const dir = tempDir('ig-shards-');
    const rate = 40;
    const requests = 60;
    // Time for three processes to start on a busy 2-core machine.
    const startAt = new Date(Date.now() + 12_000).toISOString();
    const shard = (i: number) =>
      collect(
        spawnCli([
          'run',
          '--url',
          sim.url,
          '--rate',
          String(rate),
          '--requests',
          String(requests),
          '--output-tokens',
          '8',
          '--seed',
          '5',
          '--shard',
          `${i}/3`,
          '--start-at',
          startAt,
          '--no-server-metrics',
          '--no-html',
          '--out',
          join(dir, `shard-${i}`),
        ]),
      );
    const results = await Promise.all([0, 1, 2].map(shard));
    for (const r of results) assert.equal(r.code, 0, r.stderr);
    const merged = await runCli(['merge', '--out', join(dir, 'merged'), '--json', dir]);
    assert.equal(merged.code, 0, merged.stderr);
    const summary = JSON.parse(merged.stdout);
    const records = (await readAll(join(dir, 'merged'))).sort((a, b) => a.id - b.id);
    assert.deepEqual(
      records.map((r) => r.id),
      range(0, requests),
    );
    // The shards kept the single schedule: request k was due at the k-th arrival time.
    const schedule = createArrivalSchedule(rate, 'poisson', 5);
    for (const r of records) {
      assert.equal(r.scheduledAt, Math.round(schedule() * 1000) / 1000, `request ${r.id}`);
    }
    const again = summarize(records, { load: { mode: 'open', rate, arrival: 'poisson' } });
    assert.deepEqual(summary.latency, JSON.parse(JSON.stringify(again.latency)));
    assert.deepEqual(summary.throughput, JSON.parse(JSON.stringify(again.throughput)));
    assert.equal(summary.load.rate, rate);
    assert.equal(summary.clientHealth.workers.length, 3);
    assert.ok(existsSync(join(dir, 'merged', 'report.html')));
    const manifest = JSON.parse(readFileSync(join(dir, 'merged', 'manifest.json'), 'utf8'));
    assert.deepEqual(
      manifest.merged.map((m: { shiftMs: number }) => m.shiftMs),
      [0, 0, 0],
    );
  });

  test('merge refuses a missing shard and says which; a late shard refuses to start', async () => {
    const dir = tempDir('ig-shards-bad-');
    const base = ['--url', sim.url, '--rate', '20', '--requests', '10', '--no-server-metrics'];
    const startAt = new Date(Date.now() + 4_000).toISOString();
    const only = await runCli([
      'run',
      ...base,
      '--shard',
      '0/2',
      '--start-at',
      startAt,
      '--no-html',
      '--out',
      join(dir, 'shard-0'),
    ]);
    assert.equal(only.code, 0, only.stderr);
    const merged = await runCli(['merge', '--out', join(dir, 'merged'), dir]);
    assert.equal(merged.code, 1);
    assert.match(merged.stderr, /missing shard 1 of 2/);
    const late = await runCli([
      'run',
      ...base,
      '--shard',
      '1/2',
      '--start-at',
      new Date(Date.now() - 5_000).toISOString(),
      '--out',
      join(dir, 'shard-1'),
    ]);
    assert.equal(late.code, 1);
    assert.match(late.stderr, /after --start-at .*choose a later --start-at/);
    const twoScenarios = await runCli(['run', ...base, '--scenario', 'chat,rag', '--shard', '0/2']);
    assert.equal(twoScenarios.code, 2);
    assert.match(twoScenarios.stderr, /run each of the 2 scenarios as its own/);
  });
});

describe('shared clocks', () => {
  test('a clock on another clock origin reads the same time', () => {
    const a = createRunClock({ startInMs: 50 });
    const b = createRunClock({ originHrNs: a.originHrNs, originIso: a.originIso });
    const ta = a.nowUs();
    const tb = b.nowUs();
    assert.ok(ta < 0 && Math.abs(tb - ta) < 200, `${ta} vs ${tb}`);
    const epoch = Date.now() + 1000;
    const c = createRunClock({ originEpochMs: epoch });
    assert.equal(c.originIso, new Date(epoch).toISOString());
    assert.ok(Math.abs(c.nowUs() + 1e6) < 5_000);
  });
});
