/**
 * Outputs as a newcomer adds one (issue 28): one new file whose default export makes an output,
 * named with --output (--export, its old name, still read); no command changes. The process is
 * what is tested: the CLI loads it.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli, tempDir } from '../helpers/cli.js';

const dir = tempDir('infergauge-outputs-');

test("a user's output in one file hears every finished point of a sweep", async () => {
  const module = join(dir, 'points-log.mjs');
  // A line per finished point to a file: the whole output.
  writeFileSync(
    module,
    `import { appendFileSync } from 'node:fs';
export default (file) => ({
  name: 'points-log',
  pointFinished: (e) =>
    appendFileSync(file, \`\${e.point.kind} \${e.point.load.concurrency} \${e.summary.requests.completed}\\n\`),
});
`,
  );
  const log = join(dir, 'points.log');
  const points = join(dir, 'points.jsonl');
  const r = await runCli([
    'sweep',
    '--simulate',
    '--levels',
    '1,2',
    '--requests',
    '6',
    '--output-tokens',
    '8',
    '--no-html',
    '--out',
    join(dir, 'sweep'),
    '--output',
    `${module}=${log}`,
    '--export',
    `points=${points}`,
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(readFileSync(log, 'utf8'), 'sweep-point 1 6\nsweep-point 2 6\n');
  const lines = readFileSync(points, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => [l.command, l.kind, l.completed]),
    [
      ['sweep', 'sweep-point', 6],
      ['sweep', 'sweep-point', 6],
    ],
  );
  assert.equal(lines[0].session, lines[1].session);
});

test('an unknown output or a module without a factory exits 2 naming the fix', async () => {
  const unknown = await runCli(['run', '--simulate', '--requests', '2', '--output', 'nope']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /--output nope: no such output; choose .*points/);
  // probe decode's --output N once meant output tokens.
  const tokens = await runCli(['probe', 'decode', '--simulate', '--output', '64']);
  assert.equal(tokens.code, 2);
  assert.match(
    tokens.stderr,
    /--output 64: no such output \(for output tokens: --output-tokens N\)/,
  );
  const bad = join(dir, 'bad.mjs');
  writeFileSync(bad, 'export const x = 1;\n');
  const r = await runCli(['run', '--simulate', '--requests', '2', '--export', bad]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /default export must be a function/);
});

/** A module whose output hangs on `event` (its promise never settles), or whose factory does. */
function hanging(event: 'pointFinished' | 'sessionFinished' | 'factory'): string {
  const module = join(dir, `hang-${event}.mjs`);
  writeFileSync(
    module,
    event === 'factory'
      ? 'export default () => new Promise(() => {});\n'
      : `export default () => ({ name: 'hang', ${event}: () => new Promise(() => {}) });\n`,
  );
  return module;
}

test('an output that never settles is dropped after --export-timeout-s; the gate still fails with 3', async () => {
  for (const event of ['pointFinished', 'sessionFinished', 'factory'] as const) {
    const r = await runCli([
      'run',
      '--simulate',
      '--requests',
      '4',
      '--output-tokens',
      '4',
      '--no-html',
      '--out',
      join(dir, `gate-${event}`),
      '--export',
      hanging(event),
      '--export-timeout-s',
      '0.5',
      '--threshold',
      'ttft.p99<0.001',
    ]);
    assert.equal(r.code, 3, `${event}: ${r.stderr}`);
    assert.match(r.stderr, /within 0\.5 s \(--export-timeout-s\)/, event);
    assert.match(r.stdout, /Requests/, event);
  }
});

test('--export-timeout-s that is no number of seconds is refused with exit 2', async () => {
  const r = await runCli([
    'run',
    '--simulate',
    '--requests',
    '2',
    '--export-timeout-s',
    'Infinity',
  ]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--export-timeout-s must be a number of seconds above 0/);
});

test('a full disk mid-run: the run stops, prints its summary, names the file and why, exits 1', async () => {
  // Loaded before the command line: writes to records.jsonl fail with ENOSPC after the fifth.
  const stub = join(dir, 'full-disk.mjs');
  writeFileSync(
    stub,
    `import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
const { openSync, writeSync } = fs;
const fds = new Set();
let writes = 0;
fs.openSync = (path, ...rest) => {
  const fd = openSync(path, ...rest);
  if (String(path).endsWith('records.jsonl')) fds.add(fd);
  return fd;
};
fs.writeSync = (fd, ...rest) => {
  if (fds.has(fd) && ++writes > 5) {
    throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
  }
  return writeSync(fd, ...rest);
};
syncBuiltinESMExports();
`,
  );
  const out = join(dir, 'full');
  const started = Date.now();
  const r = await runCli(
    [
      'run',
      '--requests',
      '100000',
      '--concurrency',
      '4',
      '--output-tokens',
      '32',
      '--no-html',
      '--out',
      out,
    ],
    { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${stub}` },
  );
  assert.equal(r.code, 1, r.stderr);
  assert.ok(Date.now() - started < 30_000);
  assert.match(r.stderr, /cannot write .*full\/records\.jsonl: ENOSPC: no space left on device/);
  assert.match(r.stdout, /Interrupted/);
  const kept = readFileSync(join(out, 'records.jsonl'), 'utf8').trim().split('\n');
  // Five writes reached disk (a worker's batch is one write), every line of them whole.
  assert.ok(kept.length >= 5 && kept.length < 1000, `${kept.length} records`);
  for (const line of kept) JSON.parse(line);
});
