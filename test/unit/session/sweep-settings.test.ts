/**
 * A sweep's settings are checked in one place (sweepSettingsProblems): the command line's flags
 * through it, and a program's settings when runSweep starts, before anything runs.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { EXIT, UsageError } from '../../../src/errors.js';
import { MAX_CONCURRENCY } from '../../../src/load.js';
import { parseRunPlan, type RunPlan } from '../../../src/plan/runPlan.js';
import { probeSettings } from '../../../src/session/profiles/probe.js';
import {
  prepareSweep,
  runSweep,
  type SweepSettings,
  sweepSettingsProblems,
} from '../../../src/session/profiles/sweep.js';
import type { PreparedRun } from '../../../src/session/target.js';

const hooks = () => ({ stop: new AbortController().signal, say: () => {}, html: false });

describe('sweep settings', () => {
  test('a level no client can hold is refused with the bound and why (exit 2)', () => {
    const { problems } = prepareSweep({ simulate: true, levels: '1,10000000' });
    assert.equal(problems.length, 1, problems.join('\n'));
    assert.match(problems[0], /^--levels must be at most 65536 \(got 10000000\)/);
    assert.match(problems[0], /connection/);
    assert.match(problems[0], /--shard/);
    assert.deepEqual(prepareSweep({ simulate: true, levels: `1,${MAX_CONCURRENCY}` }).problems, []);
  });

  test('run plans bound --concurrency, --max-concurrency and --rate inf the same way', () => {
    for (const input of [
      { concurrency: '70000' },
      { rate: '10', maxConcurrency: 70_000 },
      { rate: 'inf', requests: '70000' },
    ]) {
      assert.throws(
        () => parseRunPlan(input),
        (err: Error) => /must be at most 65536 \(got 70000\)/.test(err.message),
      );
    }
    assert.deepEqual(parseRunPlan({ rate: 'inf', requests: '70000', maxConcurrency: '64' }).load, {
      mode: 'closed',
      concurrency: 64,
    });
  });

  test("a probe's levels and batches are requests in flight too", () => {
    for (const [kind, o] of [
      ['decode', { levels: '1,100000' }],
      ['prefill', { batches: '1,100000' }],
    ] as const) {
      const problems: string[] = [];
      probeSettings(kind, o, undefined, problems);
      assert.equal(problems.length, 1, problems.join('\n'));
      assert.match(problems[0], /^--(levels|batches) must be at most 65536 \(got 100000\)/);
    }
  });

  test("runSweep refuses a program's levels of -1, 0 and NaN before it starts", async () => {
    const out = join(tmpdir(), `ig-sweep-settings-${process.pid}`);
    const { settings, prepared, problems } = prepareSweep({ simulate: true, levels: '1', out });
    assert.deepEqual(problems, []);
    const bad: SweepSettings = { ...settings, levels: [-1, 0, Number.NaN, 2.5], repeats: 0 };
    await assert.rejects(
      runSweep(prepared as PreparedRun & { plan: RunPlan }, bad, hooks()),
      (err: unknown) => {
        assert.ok(err instanceof UsageError);
        assert.equal(err.exitCode, EXIT.invalidOptions);
        assert.deepEqual(err.problems, [
          'settings.levels must be a whole number >= 1 (got -1)',
          'settings.levels must be a whole number >= 1 (got 0)',
          'settings.levels must be a number',
          'settings.levels must be a whole number >= 1 (got 2.5)',
          'settings.repeats must be a whole number >= 1 (got 0)',
        ]);
        return true;
      },
    );
    assert.equal(existsSync(out), false, 'nothing written');
  });

  test('every field: empty levels, rates, the bound, max level, cliff factor, triangle', () => {
    const { settings } = prepareSweep({ simulate: true });
    const problems = (s: Partial<SweepSettings>) => sweepSettingsProblems({ ...settings, ...s });
    assert.deepEqual(problems({}), []);
    assert.deepEqual(problems({ levels: [] }), ['settings.levels must give at least one level']);
    assert.deepEqual(problems({ mode: 'rate', levels: [0.5, 2], maxLevel: 100 }), []);
    assert.match(
      problems({ mode: 'rate', levels: [Number.POSITIVE_INFINITY] })[0],
      /must be a number/,
    );
    assert.match(problems({ levels: [MAX_CONCURRENCY + 1] })[0], /at most 65536/);
    assert.match(problems({ maxLevel: 1e7 })[0], /^settings\.maxLevel must be at most 65536/);
    assert.match(
      problems({ cliffFactor: 1 })[0],
      /^settings\.cliffFactor must be a number >= 1\.01/,
    );
    assert.match(
      problems({ triangle: { ...settings.triangle, latencyItlP99Ms: -1 } })[0],
      /^settings\.triangle\.latencyItlP99Ms/,
    );
    assert.match(problems({ findMax: true, slos: [] })[0], /find-max needs percentile SLOs/);
  });
});
