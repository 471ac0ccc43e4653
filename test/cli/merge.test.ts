/**
 * `infergauge merge` prints what `run` prints: the server-metrics line its summary holds.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { startSim } from '../helpers/sim.js';

let sim: SimulatorProcess;
before(async () => {
  sim = await startSim({ engine: 'scripted', 'itl-ms': 1, 'max-concurrency': 64 });
});
after(() => sim.stop());

test('merge prints the server-metrics line of its summary, as run does', async () => {
  const dir = tempDir('ig-merge-metrics-');
  for (const i of [0, 1]) {
    const shard = await runCli([
      'run',
      '--url',
      sim.url,
      '--requests',
      '8',
      '--concurrency',
      '2',
      '--output-tokens',
      '4',
      '--shard',
      `${i}/2`,
      '--server-metrics',
      '--scrape-interval',
      '0.1',
      '--no-html',
      '--out',
      join(dir, `shard-${i}`),
    ]);
    assert.equal(shard.code, 0, shard.stderr);
    assert.match(shard.stdout, /^Server metrics \(\d+ scrapes/m);
  }
  const merged = await runCli(['merge', '--no-html', '--out', join(dir, 'merged'), dir]);
  assert.equal(merged.code, 0, merged.stderr);
  assert.match(merged.stdout, /^Server metrics \(\d+ scrapes/m);
});
