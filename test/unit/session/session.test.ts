/**
 * The session core without a server or a child process: plan preparation, the event seam and
 * its outputs, a point's lifecycle and its results directory, interruption, and profile
 * stepping, all in virtual time (milliseconds).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { EXIT } from '../../../src/errors.js';
import type { RunPlan } from '../../../src/plan/runPlan.js';
import { resultSchemas } from '../../../src/results/schemas.js';
import { type Output, SessionEvents, type SessionInfo } from '../../../src/session/events.js';
import { measurePoint, type Point, type PointResult } from '../../../src/session/point.js';
import { prepareRun, type RunOptions } from '../../../src/session/prepare.js';
import { type Profile, runProfile } from '../../../src/session/profiles/profile.js';
import { prepareSweep, runSweep } from '../../../src/session/profiles/sweep.js';
import { runPlan } from '../../../src/session/run.js';
import { inSession } from '../../../src/session/session.js';
import { openTarget, type PreparedRun } from '../../../src/session/target.js';

const dir = mkdtempSync(join(tmpdir(), 'infergauge-session-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A run in virtual time: the engine model, no HTTP, no waiting. */
function virtual(options: RunOptions): PreparedRun & { plan: RunPlan } {
  const prepared = prepareRun({ simulate: true, inputTokens: '64', outputTokens: '8', ...options });
  assert.deepEqual(prepared.problems, []);
  return prepared as PreparedRun & { plan: RunPlan };
}

/** An output that keeps the name of every event it hears, and the records' count. */
function recorder() {
  const events: string[] = [];
  let records = 0;
  const output: Output = {
    name: 'recorder',
    sessionStarted: () => events.push('sessionStarted'),
    pointStarted: (e) => events.push(`pointStarted ${e.point.scenario}`),
    records: (e) => {
      records += e.records().length;
    },
    pointFinished: (e) => {
      events.push(`pointFinished ${e.summary.requests.completed}`);
    },
    sessionFinished: (e) => {
      events.push(`sessionFinished ${e.code}`);
    },
  };
  return { output, events, records: () => records };
}

const info: SessionInfo = {
  id: 'abc',
  command: 'run',
  kind: 'run',
  root: dir,
  rootIsPoint: true,
  startedAt: new Date().toISOString(),
  plan: {},
};

describe('plan preparation', () => {
  test('every bad option is named with its flag, and nothing runs', () => {
    const prepared = prepareRun({ concurrency: '0', requests: 'many' });
    assert.equal(prepared.plan, undefined);
    assert.ok(prepared.problems.some((p) => p.includes('--concurrency')));
    assert.ok(prepared.problems.some((p) => p.includes('--requests')));
  });

  test('an unreadable --threshold is refused before the run, by run and sweep alike', () => {
    const bad = { threshold: ['ttft.p99<500', 'bogus<<'] };
    for (const problems of [prepareRun(bad).problems, prepareSweep(bad).problems]) {
      assert.deepEqual(
        problems.filter((p) => p.startsWith('--threshold')).length,
        1,
        problems.join('; '),
      );
      assert.ok(problems.some((p) => p.includes('bogus<<')));
    }
    assert.deepEqual(prepareRun({ threshold: ['ttft.p99<500'] }).problems, []);
  });

  test('without --url, --simulate runs the engine model in virtual time', () => {
    const prepared = virtual({ requests: '4' });
    assert.equal(prepared.simulate, true);
    assert.ok(prepared.engine);
  });
});

describe('the event seam', () => {
  test('an optional output that fails is told once and dropped; the others go on', () => {
    const notices: string[] = [];
    const heard: string[] = [];
    const events = new SessionEvents(
      info,
      [
        {
          name: 'broken',
          sessionStarted: () => {
            throw new Error('disk full');
          },
          pointStarted: () => heard.push('broken'),
        },
        { name: 'fine', pointStarted: () => heard.push('fine') },
      ],
      (m) => notices.push(m),
    );
    events.sessionStarted();
    events.pointStarted({
      point: events.nextPoint({ load: { mode: 'closed', concurrency: 1 }, scenario: 's' }),
      manifest: { startedAt: '', plan: {} },
      nowUs: () => 0,
    });
    assert.deepEqual(heard, ['fine']);
    assert.equal(notices.length, 1);
    assert.match(notices[0], /output broken failed on sessionStarted .*disk full/);
  });

  test('a required output that fails fails the session', () => {
    const events = new SessionEvents(info, [
      {
        name: 'results',
        required: true,
        sessionStarted: () => {
          throw new Error('read-only file system');
        },
      },
    ]);
    assert.throws(() => events.sessionStarted(), /read-only/);
  });

  test('a session that fails still tells its end, with the error', async () => {
    const { output, events: heard } = recorder();
    await assert.rejects(
      inSession(
        { command: 'run', kind: 'run', root: dir, plan: {}, save: false, outputs: [output] },
        async () => {
          throw new Error('target unreachable');
        },
      ),
      /unreachable/,
    );
    assert.deepEqual(heard, ['sessionStarted', `sessionFinished ${EXIT.failure}`]);
  });

  test('only a subscribed output makes snapshots wanted', () => {
    assert.equal(new SessionEvents(info, [{ name: 'x' }]).wants('snapshot'), false);
    assert.equal(new SessionEvents(info, [{ name: 'x', snapshot() {} }]).wants('snapshot'), true);
  });

  test("a worker's batch of lines is parsed only when an output asks for records", () => {
    let parsed = 0;
    const events = new SessionEvents(info, [
      { name: 'copy', records: (e) => assert.equal(e.lines?.length, 18) },
      {
        name: 'count',
        records: (e) => {
          parsed += e.records().length;
        },
      },
    ]);
    const point = events.nextPoint({ load: { mode: 'closed', concurrency: 1 }, scenario: 's' });
    events.lines(point, '{"id":0}\n{"id":1}\n', 2);
    assert.equal(parsed, 2);
  });
});

describe('a point and its session', () => {
  test('a run in virtual time tells every event in order to an output of its own', async () => {
    const { output, events, records } = recorder();
    const done = await runPlan(virtual({ requests: '12', out: join(dir, 'run') }), {
      outputs: [output],
      html: false,
    });
    assert.equal(done.code, EXIT.ok);
    assert.deepEqual(events, [
      'sessionStarted',
      'pointStarted default',
      'pointFinished 12',
      `sessionFinished ${EXIT.ok}`,
    ]);
    assert.equal(records(), 12);
    // The results directory is an output too: the same run, on disk.
    const manifest = JSON.parse(readFileSync(join(dir, 'run', 'manifest.json'), 'utf8'));
    assert.equal(manifest.schemaVersion, 2);
    assert.ok(resultSchemas().manifestSchema.safeParse(manifest).success);
    assert.equal(manifest.kind, 'run');
    assert.equal(manifest.command, 'run');
    assert.equal(typeof manifest.endedAt, 'string');
    assert.equal(manifest.parent, undefined);
    assert.equal(
      readFileSync(join(dir, 'run', 'records.jsonl'), 'utf8')
        .trim()
        .split('\n').length,
      12,
    );
  });

  test('a session that saves nothing writes no file and still measures', async () => {
    const out = join(dir, 'not-saved');
    const { output, records } = recorder();
    const done = await runPlan(virtual({ requests: '5', out }), {
      outputs: [output],
      save: false,
    });
    assert.equal(done.results[0].summary.requests.completed, 5);
    assert.equal(done.results[0].dir, undefined);
    assert.equal(records(), 5);
    assert.equal(existsSync(out), false);
  });

  test('a point measured on its own, without a directory, leaves nothing behind', async () => {
    const prepared = virtual({ requests: '3' });
    const target = await openTarget(prepared, { onNotice: () => {} });
    try {
      const before = readdirSync(dir).length;
      const point: Point = {
        load: { mode: 'closed', concurrency: 2 },
        scenario: prepared.plan.scenarios[0],
        requests: 3,
      };
      const measured = await measurePoint(target, point);
      assert.equal(measured.summary.requests.completed, 3);
      assert.equal(readdirSync(dir).length, before);
    } finally {
      await target.close();
    }
  });

  test('a run stopped before it began measures nothing and says interrupted', async () => {
    const stop = new AbortController();
    stop.abort();
    const { output, events } = recorder();
    const done = await runPlan(virtual({ requests: '5', out: join(dir, 'stopped') }), {
      stop: stop.signal,
      outputs: [output],
    });
    assert.equal(done.code, EXIT.interrupted);
    assert.equal(done.results.length, 0);
    assert.deepEqual(events, ['sessionStarted', `sessionFinished ${EXIT.interrupted}`]);
  });

  test("a sweep's root and every point have a manifest, each point naming its parent", async () => {
    const root = join(dir, 'sweep');
    const { settings, prepared, problems } = prepareSweep({
      simulate: true,
      levels: '1,2',
      requests: '6',
      inputTokens: '64',
      outputTokens: '8',
      out: root,
    });
    assert.deepEqual(problems, []);
    const outcome = await runSweep(prepared as PreparedRun & { plan: RunPlan }, settings, {
      stop: new AbortController().signal,
      say: () => {},
      html: false,
    });
    assert.equal(outcome.root, root);
    const top = JSON.parse(readFileSync(join(root, 'manifest.json'), 'utf8'));
    assert.equal(top.kind, 'sweep');
    assert.equal(top.points.length, 2);
    // The sweep's prompt salt, drawn as it starts; each point its own (issue 47).
    assert.ok(Number.isInteger(top.plan.promptSalt) && top.plan.promptSalt > 0);
    const salts = new Set<number>();
    for (const p of top.points) {
      const m = JSON.parse(readFileSync(join(root, p.dir, 'manifest.json'), 'utf8'));
      assert.equal(m.plan.promptSalt, top.plan.promptSalt);
      salts.add(m.workload.promptSalt);
      assert.equal(m.kind, 'sweep-point');
      assert.equal(m.parent.id, top.id);
      assert.equal(m.id, p.id);
      assert.equal(join(root, p.dir, m.parent.dir), root);
      assert.deepEqual(m.load, { mode: 'closed', concurrency: p.dir.endsWith('c1') ? 1 : 2 });
    }
    assert.equal(salts.size, 2, 'every point its own prompt salt');
    assert.ok(salts.has(top.plan.promptSalt), 'the first point keeps the sweep salt');
  });
});

test("a sweep never writes over another session's results", async () => {
  const root = join(dir, 'sweep');
  const { settings, prepared } = prepareSweep({ simulate: true, levels: '1', out: root });
  const before = readFileSync(join(root, 'manifest.json'), 'utf8');
  await assert.rejects(
    runSweep(prepared as PreparedRun & { plan: RunPlan }, settings, {
      stop: new AbortController().signal,
      say: () => {},
    }),
    /already holds results \(manifest.json\); choose another --out/,
  );
  assert.equal(readFileSync(join(root, 'manifest.json'), 'utf8'), before);
});

describe('profile stepping', () => {
  async function* twoPoints(): Profile<(PointResult | undefined)[]> {
    const seen: (PointResult | undefined)[] = [];
    const point = { load: { mode: 'closed', concurrency: 1 }, scenario: { name: 'p' } } as Point;
    seen.push(yield point);
    seen.push(yield point);
    return seen;
  }
  const ok = { summary: { requests: { completed: 1 } } } as unknown as PointResult;

  test('each point is measured and its result handed back', async () => {
    let runs = 0;
    const seen = await runProfile(
      twoPoints(),
      {
        run: async () => {
          runs++;
          return ok;
        },
      },
      new AbortController().signal,
    );
    assert.equal(runs, 2);
    assert.deepEqual(seen, [ok, ok]);
  });

  test('after the stop no further point runs: the profile gets undefined and wraps up', async () => {
    const stop = new AbortController();
    let runs = 0;
    const seen = await runProfile(
      twoPoints(),
      {
        run: async () => {
          runs++;
          stop.abort();
          return ok;
        },
      },
      stop.signal,
    );
    // The point the stop cut short still hands back what it measured.
    assert.equal(runs, 1);
    assert.deepEqual(seen, [ok, undefined]);
  });
});
