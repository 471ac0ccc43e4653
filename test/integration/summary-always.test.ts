/**
 * The summary is always written (issue 27, case 4, and its rule): a run that loses its workers
 * to the deadline, loses a worker to a crash, or (--workers 0) whose engine throws, still ends
 * with summary.json, a warning naming what happened, every record that reached disk, and the
 * documented exit code (docs/cli.md, "Every run ends").
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { benchmark, EXIT, parseRunPlan } from '../../src/index.js';
import { testOnly } from '../../src/loadgen/workers.js';
import type { RequestRecord } from '../../src/record.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { startSim } from '../helpers/sim.js';

interface Saved {
  interrupted: boolean;
  requests: { completed: number; failed: number; warmup: number };
  warnings: { code: string; message: string }[];
  clientHealth?: { unmeasured?: true; notes?: string[] };
}

describe('the summary is always written', () => {
  let sim: SimulatorProcess;
  let dir: string;
  before(async () => {
    sim = await startSim({ engine: 'scripted', 'itl-ms': 2 });
    dir = mkdtempSync(join(tmpdir(), 'ig-summary-always-'));
  });
  after(async () => {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs a plan against the simulator; returns the exit code, the summary and the records. */
  async function run(name: string, options: Record<string, unknown>, notices: string[] = []) {
    const out = join(dir, name);
    const plan = parseRunPlan({
      url: sim.url,
      serverMetrics: false,
      inputTokens: '16',
      outputTokens: '4',
      out,
      ...options,
    });
    const result = await benchmark(plan, { onNotice: (m) => notices.push(m) });
    assert.ok(existsSync(join(out, 'summary.json')), 'summary.json is written');
    const saved = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as Saved;
    const records = readFileSync(join(out, 'records.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as RequestRecord);
    return { code: result.code, saved, records };
  }
  const codes = (saved: Saved) => saved.warnings.map((w) => w.code);
  const counted = (saved: Saved) => saved.requests.completed + saved.requests.failed;

  test('issue 27 case 4: the deadline terminates the only worker; summary, deadline_passed, exit 130', async () => {
    // The worker spins after its first record, deaf to the cancel: the deadline (2 requests of
    // 1 s, one more timeout, no grace: 3 s) terminates it, after a shortened answer window.
    testOnly.spinWorker = 0;
    testOnly.answerMs = 200;
    try {
      const notices: string[] = [];
      const { code, saved, records } = await run(
        'deadline',
        { concurrency: '1', workers: '1', requests: '2', timeout: '1', grace: '0' },
        notices,
      );
      assert.equal(code, EXIT.interrupted);
      assert.ok(
        notices.some((n) => /passed its hard deadline/.test(n)),
        notices.join('\n'),
      );
      assert.ok(codes(saved).includes('deadline_passed'), codes(saved).join(', '));
      const terminated = saved.warnings.find((w) => w.code === 'worker_terminated');
      assert.match(
        terminated?.message ?? '',
        /^worker 1 of 1 was stuck 0\.2 s after the cancel and was terminated/,
      );
      assert.equal(saved.interrupted, true);
      // Whatever reached disk is what is counted (its first record was still in its batch).
      assert.equal(counted(saved), records.length);
      // No thread reported its health: the summary says so rather than "ok".
      assert.equal(saved.clientHealth?.unmeasured, true);
      assert.match(saved.clientHealth?.notes?.join('\n') ?? '', /no engine thread reported/);
    } finally {
      delete testOnly.spinWorker;
      delete testOnly.answerMs;
    }
  });

  test('a worker that crashes (an uncaught RangeError): the others run on, its records count', async () => {
    testOnly.crashWorker = 1;
    try {
      const { code, saved, records } = await run('crash', {
        concurrency: '2',
        workers: '2',
        requests: '4',
      });
      assert.equal(code, EXIT.interrupted);
      assert.equal(saved.interrupted, true);
      const failed = saved.warnings.find((w) => w.code === 'worker_failed');
      assert.match(
        failed?.message ?? '',
        /^worker 2 of 2 failed \(RangeError: Invalid string length\): its share was cut short/,
      );
      // Worker 1 sent its two requests; worker 2 its first before it crashed (flushed first).
      assert.ok(records.length >= 3, `${records.length} records`);
      assert.equal(counted(saved), records.length);
      // Worker 1 reported its health: the run is judged on it.
      assert.equal(saved.clientHealth?.unmeasured, undefined);
    } finally {
      delete testOnly.crashWorker;
    }
  });

  test('--workers 0: the engine throws while handling a request; summary, loadgen_failed, exit 130', async () => {
    // The record callback throws a RangeError after writing each record (a bug in the client,
    // as an "Invalid string length" would be): the run ends, the records stand. The user's
    // second request was already on its way when the first record was written (it goes out as
    // the first answer ends), so it ends and is recorded; no third is sent.
    testOnly.throwInThread = true;
    try {
      const { code, saved, records } = await run('in-thread', {
        concurrency: '1',
        workers: '0',
        requests: '3',
      });
      assert.equal(code, EXIT.interrupted);
      assert.equal(saved.interrupted, true);
      const failed = saved.warnings.find((w) => w.code === 'loadgen_failed');
      assert.match(
        failed?.message ?? '',
        /^the load generator failed \(RangeError: Invalid string length\) and ended the run after 2 records;/,
      );
      assert.equal(records.length, 2);
      assert.equal(saved.requests.completed, 2);
      // The thread's measurements ended with it.
      assert.equal(saved.clientHealth?.unmeasured, true);
    } finally {
      delete testOnly.throwInThread;
    }
  });
});
