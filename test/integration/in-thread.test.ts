import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { LoadSpec } from '../../src/load.js';
import { summarize } from '../../src/metrics/summary.js';
import type { ClientHealthMeasurements, RequestRecord } from '../../src/record.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { createArrivalSchedule } from '../../src/workload/arrivals.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { startSim } from '../helpers/sim.js';

/** `run --workers 0`: the load sent from the main thread, with no worker thread. */
describe('run --workers 0 (in-thread)', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ engine: 'scripted', 'itl-ms': 2, 'max-concurrency': 64 });
  });
  after(() => sim.stop());

  const readJson = (dir: string, file: string) => JSON.parse(readFileSync(join(dir, file), 'utf8'));
  /** The run's records, by id. */
  const readAll = (dir: string): RequestRecord[] =>
    readFileSync(join(dir, 'records.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as RequestRecord)
      .sort((a, b) => a.id - b.id);
  const common = ['--no-server-metrics', '--no-html', '--seed', '3'];

  test('closed loop: every request once, the same workload as workers, one thread judged', async () => {
    const dir = tempDir('ig-in-thread-');
    const args = (workers: string, out: string) => [
      'run',
      '--url',
      sim.url,
      '--concurrency',
      '5',
      '--requests',
      '40',
      '--warmup',
      '2',
      '--input-tokens',
      'uniform:8:64',
      '--output-tokens',
      'uniform:2:12',
      ...common,
      '--workers',
      workers,
      '--out',
      join(dir, out),
      '--json',
    ];
    const result = await runCli(args('0', 'in-thread'));
    assert.equal(result.code, 0, result.stderr);
    const out = join(dir, 'in-thread');
    const printed = JSON.parse(result.stdout);
    const records = readAll(out);
    assert.deepEqual(
      records.map((r) => r.id),
      Array.from({ length: 42 }, (_, i) => i),
    );
    assert.deepEqual(
      records.filter((r) => r.phase === 'warmup').map((r) => r.id),
      [0, 1],
    );
    const load: LoadSpec = { mode: 'closed', concurrency: 5 };
    const again = summarize(records, { load });
    for (const key of ['requests', 'tokens', 'throughput', 'latency'] as const) {
      assert.deepEqual(printed[key], JSON.parse(JSON.stringify(again[key])), key);
    }
    assert.equal(readJson(out, 'manifest.json').execution.workers, 0);
    // One engine thread, this process's, with the cores it may use.
    const threads: ClientHealthMeasurements[] = readJson(out, 'client-health.json').threads;
    assert.equal(threads.length, 1);
    assert.equal(threads[0].usableCores, availableParallelism());
    // One token per event from this simulator: every record's tokens, the warm-up's too.
    const tokens = records.reduce((n, r) => n + r.outputTokens, 0);
    assert.equal(threads[0].tokenEvents, tokens);
    assert.equal(printed.clientHealth.workers, undefined);
    assert.equal(typeof printed.clientHealth.clientLimited, 'boolean');

    // Request `id` asks for the same lengths in this thread as on worker threads.
    const workers = await runCli(args('2', 'workers'));
    assert.equal(workers.code, 0, workers.stderr);
    const lengths = (rs: RequestRecord[]) =>
      rs.map((r) => [r.id, r.requestedInputTokens, r.requestedOutputTokens]);
    assert.deepEqual(lengths(records), lengths(readAll(join(dir, 'workers'))));
    assert.equal(readJson(join(dir, 'workers'), 'manifest.json').execution.workers, 2);
  });

  test('open loop: the seeded schedule, and the verdict printed with its figures', async () => {
    const out = join(tempDir('ig-in-thread-open-'), 'run');
    const rate = 40;
    const flags = `--rate ${rate} --requests 30 --output-tokens 6 --workers 0`.split(' ');
    const result = await runCli(['run', '--url', sim.url, ...flags, ...common, '--out', out]);
    assert.equal(result.code, 0, result.stderr);
    const records = readAll(out);
    // Without --start-at the schedule starts when this thread is ready to send, after the
    // clock's origin: the offsets from the first arrival are the seeded schedule's.
    const schedule = createArrivalSchedule(rate, 'poisson', 3);
    const startMs = records[0].scheduledAt - schedule();
    for (const r of records.slice(1)) {
      const dueMs = startMs + schedule();
      assert.ok(
        Math.abs(r.scheduledAt - dueMs) < 0.002,
        `request ${r.id}: ${r.scheduledAt} vs ${dueMs}`,
      );
    }
    assert.equal(records.length, 30);
    assert.match(
      result.stdout,
      /Client health: .*CPU \d+% of one core \((busiest thread|process), limit 90%\), event-loop delay p99 [\d.]+ ms \(limit 10 ms\).*: (ok|ok, near a limit|client-limited)\n/,
    );
    const summary = readJson(out, 'summary.json');
    assert.equal(summary.requests.completed, 30);
    assert.ok(summary.clientHealth.achievedRatePerS > 0);
  });
});
