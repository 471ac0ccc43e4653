/**
 * Ctrl-C during `infergauge size`: the search stops within a second (its worker threads
 * ended mid-candidate), the candidates evaluated are ranked and written (size.json,
 * report.html, the terminal table), all marked partial, and the exit code is 130.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { collect, spawnCli, tempDir } from '../helpers/cli.js';

test('SIGINT during size: the ranked answer so far, marked partial, exit 130', async () => {
  const out = join(tempDir('ig-size-int-'), 'size');
  const child = spawnCli([
    'size',
    '--model',
    'llama-3-8b',
    '--rate',
    '20',
    '--slo',
    'ttft.p99<500',
    '--gpu',
    'h100,l40s,a100-80',
    '--tp',
    '1,2,4,8',
    // 48 candidates of about a second each: far from done when the signal comes.
    '--requests',
    '600',
    '--threads',
    '2',
    '--out',
    out,
  ]);
  const done = collect(child);
  // The estimate comes once each thread has evaluated a candidate.
  let stderr = '';
  await new Promise<void>((resolve) => {
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (/about .* for the 48 candidates/.test(stderr)) resolve();
    });
  });
  const signalledAt = performance.now();
  child.kill('SIGINT');
  const result = await done;
  const tookMs = performance.now() - signalledAt;
  assert.equal(result.code, 130, result.stderr);
  // The process (results written and all) ends within a second of the signal.
  assert.ok(tookMs < 1500, `exited ${tookMs.toFixed(0)} ms after SIGINT`);
  assert.match(stderr, /^infergauge size: 48 candidates on 2 threads/);
  const evaluated = Number(
    /interrupted: (\d+) of 48 candidates evaluated/.exec(result.stderr)?.[1],
  );
  assert.ok(evaluated >= 2 && evaluated < 48, result.stderr);
  assert.match(
    result.stdout,
    new RegExp(`^Partial answer \\(interrupted\\): ${evaluated} of 48 candidates evaluated\\.\\n`),
  );
  const json = JSON.parse(readFileSync(join(out, 'size.json'), 'utf8'));
  assert.equal(json.interrupted, true);
  assert.equal(json.candidates, 48);
  assert.equal(json.evaluated, evaluated);
  assert.equal(json.deployments.length, evaluated);
  assert.match(readFileSync(join(out, 'report.html'), 'utf8'), /Partial \(interrupted/);
});
