/**
 * `calibrate --hold-unidentified` on three loads of one length (concurrency 1, 4, 16), where
 * the bandwidth share and the step cost trade off (each alone unidentified, together the decode
 * time): it holds one key at a time, the least known first, so that what the runs do pin down
 * is fitted, and the keys fitted beside a held guess carry its uncertainty in their intervals.
 * The "server" is the simulator with hidden constants, measured in virtual time.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { RequestRecord } from '../../../src/record.js';
import { calibrate } from '../../../src/session/calibrate.js';
import { fitBounds, fitCalibration, replayRecords } from '../../../src/sim/calibrate.js';
import type { FitKey, FittedValue } from '../../../src/sim/calibrationFile.js';
import { tempDir } from '../../helpers/cli.js';
import { HIDDEN, l40sEngine, measurePerturbed } from '../../helpers/perturbed.js';

const truth = l40sEngine(HIDDEN);
const points = [1, 4, 16].map((c) => measurePerturbed(c, Math.max(24, 3 * c), 1024, 64));

function writeRun(dir: string, records: RequestRecord[], concurrency: number): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'records.jsonl'), records.map((r) => JSON.stringify(r)).join('\n'));
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify({ plan: { load: { mode: 'closed', concurrency } } }),
  );
  return dir;
}

/** The 90 % interval of a fitted value: 1.645 standard errors on its log scale. */
function interval90(key: FitKey, v: FittedValue): [number, number] {
  const { floor } = fitBounds(key);
  const centre = Math.log(v.value + floor);
  const sd = Math.log(v.high + floor) - centre;
  return [Math.exp(centre - 1.645 * sd) - floor, Math.exp(centre + 1.645 * sd) - floor];
}

describe('calibrate --hold-unidentified', () => {
  test('holds one key at a time: the runs explain themselves and every fitted key covers the truth', async () => {
    const root = tempDir('ig-calibrate-hold-');
    const dirs = points.map((p) =>
      writeRun(
        join(root, p.label.split(' ')[0]),
        replayRecords(truth, p),
        (p.load as { concurrency: number }).concurrency,
      ),
    );
    const flags = { model: 'llama-3-8b', gpu: 'l40s' };
    const { file } = await calibrate(dirs, { flags, holdUnidentified: true });
    const held = Object.keys(file.held);
    // One of the trading pair is held, the other fitted: the decode time is the runs'.
    assert.ok(!(held.includes('mbu') && held.includes('stepOverheadMs')), held.join(', '));
    for (const p of file.points) {
      for (const [metric, e] of Object.entries(p.error)) {
        assert.ok(Math.abs(e) < 0.05, `${p.label} ${metric} ${e}`);
      }
    }
    for (const [key, v] of Object.entries(file.fitted) as [FitKey, FittedValue][]) {
      const [low, high] = interval90(key, v);
      const hidden = HIDDEN[key as keyof typeof HIDDEN];
      assert.ok(hidden >= low && hidden <= high, `${key} ${v.value} [${low}, ${high}] (${hidden})`);
    }
  });

  test("a key fitted beside a held guess carries the guess's uncertainty", () => {
    const base = l40sEngine({});
    const o = { keys: ['mbu', 'mfu'] as FitKey[], checkIdentifiable: false };
    const sure = fitCalibration(base, points, o).fitted.mbu;
    const guessed = fitCalibration(base, points, {
      ...o,
      guessed: ['stepOverheadMs', 'perSeqOverheadUs', 'frontendLatencyMs'],
    }).fitted.mbu;
    assert.ok(sure && guessed);
    // The same fit, a wider interval: the step cost held at the engine's 1.5 ms (truth 4)
    // moves the bandwidth share as far as the runs' decode time allows.
    assert.equal(guessed.value, sure.value);
    const [low, high] = interval90('mbu', guessed);
    assert.ok(guessed.stdErr > 3 * sure.stdErr, `${guessed.stdErr} vs ${sure.stdErr}`);
    assert.ok(HIDDEN.mbu >= low && HIDDEN.mbu <= high, `mbu ${guessed.value} [${low}, ${high}]`);
    const [sureLow, sureHigh] = interval90('mbu', sure);
    assert.ok(
      HIDDEN.mbu < sureLow || HIDDEN.mbu > sureHigh,
      `taken as exact: [${sureLow}, ${sureHigh}]`,
    );
  });
});
