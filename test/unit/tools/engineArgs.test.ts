/**
 * `npm run engine:llama`'s arguments: --help prints the usage and exits 0, a bad argument exits 2
 * naming it, neither builds llama-server nor prints a stack.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { parseEngineArgs } from '../../../tools/llama/engineArgs.js';
import { REPO } from '../../../tools/repo.js';

test('the defaults, and each option read', () => {
  assert.deepEqual(parseEngineArgs([]), {
    options: {
      port: 8080,
      preset: 'tiny',
      parallel: 4,
      ctxSize: 4096,
      threads: 1,
      kvUnified: false,
    },
  });
  assert.deepEqual(
    parseEngineArgs([
      '--port',
      '9000',
      '--parallel',
      '2',
      '--kv-unified',
      '--config-out',
      'c.json',
    ]),
    {
      options: {
        port: 9000,
        preset: 'tiny',
        parallel: 2,
        ctxSize: 4096,
        threads: 1,
        kvUnified: true,
        configOut: 'c.json',
      },
    },
  );
  assert.deepEqual(parseEngineArgs(['--help']), { help: true });
  assert.deepEqual(parseEngineArgs(['-h']), { help: true });
});

test('each bad argument is named, none thrown', () => {
  const bad = parseEngineArgs(['--port', '70000', '--model-size', 'huge', '--threads', '1.5']);
  assert.ok('problems' in bad);
  assert.equal(bad.problems.length, 3);
  assert.match(bad.problems.join('\n'), /--port .*70000/);
  assert.match(bad.problems.join('\n'), /--model-size must be one of tiny.*huge/);
  assert.match(bad.problems.join('\n'), /--threads .*1\.5/);
  const unknown = parseEngineArgs(['--prot', '1']);
  assert.ok('problems' in unknown);
  assert.match(unknown.problems[0], /--prot/);
});

test('the script: --help exits 0 with the usage, a bad argument exits 2 without a stack', () => {
  const run = (args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'tools/llama/engine.ts', ...args], {
      cwd: REPO,
      encoding: 'utf8',
      // A build would take minutes: the limit fails the test long before one could finish.
      timeout: 30_000,
    });
  const help = run(['--help']);
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^Usage: npm run engine:llama -- \[options\]/);
  assert.equal(help.stderr, '');
  const bad = run(['--bogus']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /engine:llama: Unknown option '--bogus'/);
  assert.doesNotMatch(bad.stderr, /\n\s+at /);
});
