/**
 * `--rate inf` (issue 31): vLLM's offline mode, every request at once, the one number option
 * that takes Infinity. It becomes a closed loop of the whole run (or of --max-concurrency).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseRunPlan } from '../../../src/plan/runPlan.js';
import { planProblems } from '../../helpers/plan.js';

const problems = planProblems;

test('--rate inf sends every request at once: a closed loop of them all, or of --max-concurrency', () => {
  assert.deepEqual(parseRunPlan({ rate: 'inf', requests: '300' }).load, {
    mode: 'closed',
    concurrency: 300,
  });
  assert.deepEqual(parseRunPlan({ rate: 'Infinity', requests: '300', maxConcurrency: '8' }).load, {
    mode: 'closed',
    concurrency: 8,
  });
  // A plan file's YAML .inf arrives as the number.
  assert.equal(
    parseRunPlan({ rate: Number.POSITIVE_INFINITY, scenario: 'multi-turn', sessions: '12' }).load
      .mode,
    'closed',
  );
  assert.deepEqual(parseRunPlan({ rate: 'inf', scenario: 'multi-turn', sessions: '12' }).load, {
    mode: 'closed',
    concurrency: 12,
  });
});

test('--rate inf refuses what shapes a finite rate, and a duration', () => {
  assert.match(problems({ rate: 'inf', duration: '60' }).join('\n'), /--requests N .*--duration/);
  assert.match(problems({ rate: 'inf', arrival: 'constant' }).join('\n'), /--arrival .*finite/);
  assert.match(
    problems({ rate: 'infinite' }).join('\n'),
    /--rate must be a number above 0, or inf/,
  );
  // Every other number option still refuses Infinity.
  assert.match(problems({ concurrency: 'inf' }).join('\n'), /--concurrency/);
});
