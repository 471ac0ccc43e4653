/**
 * The cost/latency front of `size` is over one unit: dollars once any deployment is priced
 * (unpriced ones listed but off the front), GPUs when none is. README's case: l40s priced,
 * h100 not.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { markPareto, type SizedDeployment } from '../../../src/session/size.js';

function row(gpu: string, gpus: number, ttftP99Ms: number, costPerHour?: number): SizedDeployment {
  return {
    gpu,
    gpuName: gpu,
    tp: 1,
    dp: gpus,
    gpus,
    dtype: 'bf16',
    kvCacheDtype: 'auto',
    maxNumSeqs: 256,
    personality: 'vllm-v1',
    feasible: true,
    at: { ttftP99Ms } as SizedDeployment['at'],
    ...(costPerHour !== undefined ? { costPerHour } : {}),
  };
}

test('with some GPUs priced, the front holds priced deployments only, the cheapest among them', () => {
  // Unpriced h100 rows use fewer GPUs than the l40s rows cost dollars: the old mixed axis put them
  // on the front and no priced row.
  const rows = [
    row('h100', 1, 80),
    row('h100', 2, 60),
    row('l40s', 2, 120, 1.98),
    row('l40s', 3, 90, 2.97),
    row('l40s', 4, 95, 3.96),
  ];
  markPareto(rows);
  assert.deepEqual(
    rows.map((r) => r.pareto),
    [false, false, true, true, false],
  );
});

test('with no price at all, the front is over GPUs', () => {
  const rows = [row('h100', 1, 80), row('h100', 2, 60), row('l40s', 2, 120)];
  markPareto(rows);
  assert.deepEqual(
    rows.map((r) => r.pareto),
    [true, true, false],
  );
});

test('an infeasible deployment is never on the front', () => {
  const rows = [{ ...row('l4', 1, 10, 0.5), feasible: false }, row('l40s', 2, 120, 1.98)];
  markPareto(rows);
  assert.notEqual(rows[0].pareto, true);
  assert.equal(rows[1].pareto, true);
});
