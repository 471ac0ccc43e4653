/**
 * `infergauge merge` prints what `run` prints: the server-metrics line its summary holds; it
 * refuses shards whose records are damaged unless forced, and then carries the count.
 */
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readFileSync, symlinkSync } from 'node:fs';
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

test('merge keeps every complete record of damaged shards, says each damage once with its file, and carries the count; a dangling or second link is said and read once', async () => {
  const dir = tempDir('ig-merge-damaged-');
  for (const i of [0, 1]) {
    const shard = await runCli([
      'run',
      '--url',
      sim.url,
      '--requests',
      '16',
      '--concurrency',
      '2',
      '--output-tokens',
      '4',
      '--shard',
      `${i}/2`,
      ...(i === 1 ? ['--records-format', 'jsonl.gz'] : []),
      '--no-html',
      '--out',
      join(dir, `shard-${i}`),
    ]);
    assert.equal(shard.code, 0, shard.stderr);
  }
  // A torn plain last line, and garbage after the gzip stream.
  appendFileSync(join(dir, 'shard-0', 'records.jsonl'), '{"id":99,"sched');
  appendFileSync(join(dir, 'shard-1', 'records.jsonl.gz'), Buffer.from('\u0000garbage\u00ff'));
  // A link to nothing and a second name for a shard: said, and each shard read once.
  symlinkSync(join(dir, 'nowhere'), join(dir, 'shard-dangling'));
  symlinkSync(join(dir, 'shard-0'), join(dir, 'shard-again'));
  const out = join(dir, 'merged');
  const merged = await runCli(['merge', '--no-html', '--json', '--out', out, dir]);
  assert.equal(merged.code, 0, merged.stderr);
  assert.match(merged.stderr, /shard-0\/records\.jsonl: line 9 is not whole JSON \(.*\): skipped/);
  assert.match(
    merged.stderr,
    /shard-1\/records\.jsonl\.gz: [\d,]+ damaged bytes of the gzip stream from byte [\d,]+ \(bytes that are no gzip member\): skipped to the end/,
  );
  assert.match(merged.stderr, /shard-dangling: a link to nothing .*: skipped/);
  assert.match(merged.stderr, /shard-again is .* again/);
  assert.ok(!existsSync(join(out, 'records.jsonl.partial')));
  const summary = JSON.parse(merged.stdout);
  assert.equal(summary.requests.completed, 16);
  assert.ok(summary.warnings.some((w: { code: string }) => w.code === 'records_damaged'));
  const lines = readFileSync(join(out, 'records.jsonl'), 'utf8').trim().split('\n');
  assert.equal(lines.length, 16);
  const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
  assert.deepEqual(
    manifest.merged.map((m: { damaged?: unknown }) => m.damaged),
    [
      { lines: 1, gzipStretches: 0 },
      { lines: 0, gzipStretches: 1 },
    ],
  );
});
