/** Issue 15: weighted samples answer as the expanded ones; CSV cells and terminal text are safe. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  percentileOf,
  percentileOfSorted,
  weightedSamples,
} from '../../../src/metrics/distribution.js';
import { cdfPoints } from '../../../src/report/charts.js';
import { csvField, terminalSafe } from '../../../src/report/format.js';
import { createRng } from '../../../src/rng.js';

describe('weighted samples (per-token ITL without expanding it)', () => {
  test('percentiles and the CDF equal those of the expanded samples, on random data', () => {
    const rng = createRng(15);
    for (let trial = 0; trial < 200; trial++) {
      const pairs = 1 + rng.int(40);
      const values: number[] = [];
      const weights: number[] = [];
      const expanded: number[] = [];
      for (let i = 0; i < pairs; i++) {
        // Ties are common (equal gaps spread over tokens): draw from a few values.
        const v = rng.int(8) / 4;
        const k = 1 + rng.int(6);
        values.push(v);
        weights.push(k);
        for (let j = 0; j < k; j++) expanded.push(v);
      }
      const sorted = Float64Array.from(expanded).sort();
      const weighted = weightedSamples(values, weights);
      assert.equal(weighted.count, sorted.length);
      for (const q of [0, 1, 25, 50, 90, 95, 99, 99.9, 100, rng.next() * 100]) {
        assert.equal(percentileOf(weighted, q), percentileOfSorted(sorted, q), `q ${q}`);
      }
      assert.deepEqual(cdfPoints(weighted, 7), cdfPoints(sorted, 7));
    }
  });

  test('a weight of 1e17 costs one entry', () => {
    const w = weightedSamples([2, 1e-16], [1, 1e17]);
    assert.equal(w.count, 1e17 + 1);
    assert.equal(percentileOf(w, 50), 1e-16);
    assert.equal(percentileOf(w, 100), 2);
  });
});

describe('csvField neutralises formulas in strings, not our numbers', () => {
  test('cells starting with = + - @ tab or CR get a quote prefix and are quoted', () => {
    assert.equal(csvField("=cmd|' /C calc'!A0"), `"'=cmd|' /C calc'!A0"`);
    for (const lead of ['=', '+', '-', '@', '\t', '\r']) {
      assert.equal(csvField(`${lead}1`), `"'${lead}1"`);
    }
    assert.equal(csvField('a "b"'), '"a ""b"""');
    assert.equal(csvField('stop'), 'stop');
  });

  test('numbers stay numbers, negative ones included; missing is empty', () => {
    assert.equal(csvField(-3.5), '-3.5');
    assert.equal(csvField(0), '0');
    assert.equal(csvField(Number.NaN), '');
    assert.equal(csvField(undefined), '');
  });
});

describe('terminalSafe', () => {
  test('strips OSC, CSI, C1 and lone controls; keeps text, tab and line feed', () => {
    const evil = 'evil\u001b]0;pwned\u0007\u001b[2Jmodel';
    assert.equal(terminalSafe(evil), 'evilmodel');
    assert.equal(terminalSafe('a\u001b[31mred\u001b[0m\u009b2Jb'), 'aredb');
    assert.equal(terminalSafe('x\u001b]8;;http://e\u001b\\link\u001b]8;;\u001b\\y'), 'xlinky');
    assert.equal(terminalSafe('over\rwrite\u0000\u007f\u0085'), 'overwrite');
    assert.equal(terminalSafe('tab\there\nnext é 日本'), 'tab\there\nnext é 日本');
    assert.equal(terminalSafe(undefined), '');
  });
});
