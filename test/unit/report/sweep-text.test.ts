/** The sweep's conclusion claims only what its points measured. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SweepPoint } from '../../../src/analysis/sweep.js';
import { renderSweep } from '../../../src/report/sweepText.js';

function point(level: number, completed: number, outputTokensPerS: number): SweepPoint {
  const ms = completed > 0 ? 10 : Number.NaN;
  return {
    scenario: 'default',
    level,
    repeat: 0,
    meanConcurrency: 1,
    outputTokensPerS,
    requestsPerS: outputTokensPerS / 100,
    perUserTokensPerS: outputTokensPerS,
    ttftP50Ms: ms,
    ttftP99Ms: ms,
    itlP50Ms: ms,
    itlP99Ms: ms,
    tpotP50Ms: ms,
    e2eP50Ms: ms,
    e2eP99Ms: ms,
    completed,
    failed: completed > 0 ? 0 : 20,
    meanInputTokens: 32,
    meanOutputTokens: 100,
  };
}

const saturation = (points: SweepPoint[]) =>
  renderSweep(
    'http://x',
    'rate',
    [{ scenario: 'default', points, recommendations: [], warnings: [] }],
    false,
  )
    .split('\n')
    .find((l) => l.startsWith('Saturation'));

test('a load where nothing succeeded is no evidence that throughput still grows', () => {
  assert.match(
    saturation([point(1, 20, 136), point(4, 20, 500), point(10_000_000, 0, 0)]) ?? '',
    /not found: throughput grows up to rate 4\.00; at 10,000,000\.00 no request succeeded/,
  );
  assert.equal(
    saturation([point(1, 0, 0), point(4, 0, 0)]),
    'Saturation: not measured: no request succeeded at any load.',
  );
  assert.equal(
    saturation([point(1, 20, 136), point(4, 20, 500)]),
    'Saturation: not reached in this range: throughput still grows with load.',
  );
});
