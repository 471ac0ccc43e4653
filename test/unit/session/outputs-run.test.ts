/**
 * Issue 48, user outputs in a whole run (the in-process simulator as ground truth): an output
 * that changes what it is given changes neither summary.json nor the summary the command gates
 * on, and a results directory that can no longer be written (ENOSPC, EROFS) stops the run,
 * names the file, and keeps what reached disk.
 */
import assert from 'node:assert/strict';
import fs, { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { parseRunPlan, type RunPlan } from '../../../src/plan/runPlan.js';
import type { Output } from '../../../src/session/events.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { benchmark, runPlan } from '../../../src/session/run.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';

const dir = mkdtempSync(join(tmpdir(), 'ig-outputs-run-'));
let sim: RunningSimulator;
before(async () => {
  sim = await startSimulator({ port: 0, host: '127.0.0.1' });
});
after(async () => {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
});

const saved = (out: string) =>
  JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);

/** Writes into everything it is given, records and summary included, without throwing. */
const vandal: Output = {
  name: 'vandal',
  records(e) {
    for (const r of e.records()) {
      try {
        Object.assign(r, { error: { kind: 'http', message: 'x' }, outputTokens: 0 });
      } catch {}
    }
  },
  pointFinished(e) {
    try {
      Object.assign(e.summary.requests, { completed: 0, failed: 99 });
    } catch {}
  },
};

function livePlan(name: string, more: Record<string, unknown> = {}): RunPlan {
  return parseRunPlan({
    url: sim.url,
    requests: '20',
    concurrency: '4',
    inputTokens: '16',
    outputTokens: '4',
    out: join(dir, name),
    ...more,
  });
}

describe('an output that writes into what it is given', () => {
  for (const workers of ['0', '1']) {
    test(`changes nothing the run keeps (live, --workers ${workers})`, async () => {
      const plan = livePlan(`vandal-${workers}`, { workers });
      const result = await benchmark(plan, { outputs: [vandal], html: false });
      assert.equal(result.results[0].summary.requests.completed, 20);
      assert.equal(saved(plan.out as string).requests.completed, 20);
      assert.equal(saved(plan.out as string).requests.failed, 0);
    });
  }

  test('changes nothing the run keeps (virtual time)', async () => {
    const out = join(dir, 'vandal-virtual');
    const prepared = prepareRun({ simulate: true, requests: '20', outputTokens: '4', out });
    assert.deepEqual(prepared.problems, []);
    const result = await runPlan(prepared as never, { outputs: [vandal], html: false });
    assert.equal(result.results[0].summary.requests.completed, 20);
    assert.equal(saved(out).requests.completed, 20);
  });
});

test("a library caller's exportTimeoutS is checked as the flag is", async () => {
  for (const bad of [Number.NaN, 0, -1, Number.POSITIVE_INFINITY]) {
    const prepared = prepareRun({
      simulate: true,
      requests: '2',
      outputTokens: '4',
      out: join(dir, 'deadline'),
    });
    await assert.rejects(
      runPlan(prepared as never, { html: false, exportTimeoutS: bad }),
      /exportTimeoutS must be a number of seconds above 0/,
      String(bad),
    );
  }
});

/** What a virtual-time run tells (no telemetry, no snapshots: events.test.ts has those). */
const EVENTS = [
  'sessionStarted',
  'pointStarted',
  'records',
  'pointFinished',
  'sessionFinished',
] as const;

/** An output that throws, rejects, never settles or is slow on `event`. */
function misbehaving(event: string, how: 'throw' | 'reject' | 'never' | 'slow'): Output {
  const handler = () => {
    if (how === 'throw') throw new Error('boom');
    if (how === 'reject') return Promise.reject(new Error('boom'));
    if (how === 'never') return new Promise<void>(() => {});
    return new Promise<void>((r) => setTimeout(r, 20));
  };
  return { name: 'mine', [event]: handler } as Output;
}

describe('a whole run with an output that misbehaves on each event (virtual time)', () => {
  for (const how of ['throw', 'reject', 'never', 'slow'] as const) {
    test(`${how}: the run ends, its files and summary whole`, async () => {
      for (const event of EVENTS) {
        const out = join(dir, `${how}-${event}`);
        const prepared = prepareRun({ simulate: true, requests: '20', outputTokens: '4', out });
        const notices: string[] = [];
        const result = await runPlan(prepared as never, {
          outputs: [misbehaving(event, how)],
          html: false,
          exportTimeoutS: 0.2,
          onNotice: (m) => notices.push(m),
        });
        // A rejection of a handler not awaited is told when it comes.
        await new Promise((r) => setTimeout(r, 10));
        assert.equal(result.code, 0, `${how} ${event}`);
        assert.equal(result.results[0].summary.requests.completed, 20);
        assert.equal(saved(out).requests.completed, 20);
        assert.equal(lines(join(out, 'records.jsonl')).length, 20);
        const told = notices.filter((n) => n.includes('output mine'));
        const expected =
          how === 'throw' || how === 'reject' || (how === 'never' && event.endsWith('Finished'));
        assert.equal(told.length, expected ? 1 : 0, `${how} ${event}: ${told.join('; ')}`);
      }
    });
  }
});

/**
 * Makes writes to the records file fail with `code` after `okWrites` of them, as a full or
 * read-only disk does; `restore` puts fs back.
 */
function failRecordWrites(code: 'ENOSPC' | 'EROFS', okWrites: number) {
  const { openSync, writeSync } = fs;
  const fds = new Set<number>();
  let writes = 0;
  fs.openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    const fd = (openSync as (...a: unknown[]) => number)(path, ...rest);
    if (String(path).endsWith('records.jsonl')) fds.add(fd);
    return fd;
  }) as typeof fs.openSync;
  fs.writeSync = ((fd: number, ...rest: unknown[]) => {
    if (fds.has(fd) && ++writes > okWrites) {
      throw Object.assign(new Error(`${code}: simulated, write`), { code });
    }
    return (writeSync as (...a: unknown[]) => number)(fd, ...rest);
  }) as typeof fs.writeSync;
  syncBuiltinESMExports();
  return () => {
    fs.openSync = openSync;
    fs.writeSync = writeSync;
    syncBuiltinESMExports();
  };
}

describe('a results directory that can no longer be written', () => {
  for (const [code, workers] of [
    ['ENOSPC', '0'],
    ['EROFS', '1'],
  ] as const) {
    test(`${code} (--workers ${workers}): the run stops sending, names the file, keeps what reached disk`, async () => {
      const out = join(dir, `${code}-${workers}`);
      // Long enough that finishing it would take many seconds.
      const plan = livePlan(`${code}-${workers}`, {
        requests: '100000',
        concurrency: '4',
        outputTokens: '64',
        workers,
      });
      let printed: RunSummary | undefined;
      const restore = failRecordWrites(code, 5);
      const started = performance.now();
      try {
        await assert.rejects(
          benchmark(plan, {
            html: false,
            onScenario: (r) => {
              printed = r.summary;
            },
          }),
          (err: Error & { code?: string }) => {
            assert.match(err.message, new RegExp(`cannot write .*records\\.jsonl: ${code}`));
            assert.equal(err.code, code);
            return true;
          },
        );
      } finally {
        restore();
      }
      assert.ok(performance.now() - started < 10_000);
      // What reached disk is whole; the summary was still told (the terminal prints it).
      const kept = lines(join(out, 'records.jsonl'));
      assert.ok(kept.length >= 1 && kept.length < 1000, `${kept.length} records`);
      for (const l of kept) JSON.parse(l);
      assert.ok(printed, 'the summary was told');
      assert.equal(printed.interrupted, true);
      assert.ok(printed.requests.completed + printed.requests.failed < 1000);
    });
  }
});
