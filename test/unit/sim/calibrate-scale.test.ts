/**
 * calibrate's work grows with the runs, not their square (issue 48: 40 runs 1.5 s, 160 runs
 * 17.5 s): predicting each run from the others refitted once per run, each fit replaying all
 * the others. Past MAX_FOLDS runs they are left out in folds; the progress a fit reports
 * reaches a terminal or a log at its own pace.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { calibrateProgressOutput } from '../../../src/session/calibrateProgress.js';
import { fitCalibration, leaveOneOut, MAX_FOLDS } from '../../../src/sim/calibrate.js';
import { HIDDEN, l40sEngine, measurePerturbed } from '../../helpers/perturbed.js';

const base = l40sEngine({});
const truth = l40sEngine(HIDDEN);
const runs = (n: number) =>
  Array.from({ length: n }, (_, i) => measurePerturbed(1 + (i % 4), 3, 64 + 16 * i, 24, truth));

describe('calibrate at scale', () => {
  test('each run is predicted from the others in at most MAX_FOLDS fits: replays grow linearly', () => {
    const replays = (n: number) => {
      const points = runs(n);
      const fit = fitCalibration(base, points, { keys: ['mbu'] });
      let simulations = 0;
      const folds: number[] = [];
      const loo = leaveOneOut(base, points, fit, {
        onSimulated: () => simulations++,
        onFold: (done, of) => folds.push(done, of),
      });
      assert.equal(loo.length, n);
      assert.ok(
        loo.every((l, i) => l.label === points[i].label && Number.isFinite(l.error.tpotMs)),
      );
      return { simulations, fits: folds.length / 2, of: folds[1] };
    };
    // Up to MAX_FOLDS runs: one left out at a time, as before.
    const few = replays(6);
    assert.deepEqual([few.fits, few.of], [6, 6]);
    const some = replays(12);
    const many = replays(36);
    assert.deepEqual([some.fits, many.fits, many.of], [MAX_FOLDS, MAX_FOLDS, MAX_FOLDS]);
    // Three times the runs: about three times the replays (one fit per run made it nine).
    const ratio = many.simulations / some.simulations;
    assert.ok(ratio < 4.5, `36 runs replayed ${ratio.toFixed(1)}x as often as 12`);
  });

  test('progress: a redrawn line on a terminal at most every 250 ms, a line a heartbeat off one', () => {
    let clock = 0;
    const terminal: string[] = [];
    const tty = calibrateProgressOutput({
      redraw: true,
      write: (t) => terminal.push(t),
      now: () => clock,
    });
    const log: string[] = [];
    const plain = calibrateProgressOutput({
      redraw: false,
      write: (t) => log.push(t),
      now: () => clock,
    });
    for (let i = 1; i <= 200; i++) {
      clock += 100;
      const p = { stage: 'fitting', runs: 40, parameters: 5, simulations: i } as const;
      tty.report(p);
      plain.report(p);
    }
    tty.end();
    plain.end();
    // 20 s: a line redrawn every 300 ms (the first report past 250 ms), then cleared.
    assert.equal(terminal.length, Math.floor(20_000 / 300) + 1);
    assert.equal(
      terminal[0],
      '\r\x1b[2Kinfergauge calibrate: fitting 5 parameters to 40 runs: 3 runs replayed, 0 s',
    );
    assert.equal(terminal[terminal.length - 1], '\r\x1b[2K');
    // Off a terminal: one line at 15 s, none for a quick fit.
    assert.deepEqual(log, [
      'infergauge calibrate: fitting 5 parameters to 40 runs: 150 runs replayed, 15 s\n',
    ]);
  });
});
