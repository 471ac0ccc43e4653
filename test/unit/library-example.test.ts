/**
 * docs/library.md's example runs as written: its TypeScript block, with `from 'infergauge'`
 * pointed at this repository's src/index.ts, runs in a process of its own and prints a summary.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { REPO } from '../../tools/repo.js';

const run = promisify(execFile);

/** Every ```ts block of a markdown text. */
function tsBlocks(markdown: string): string[] {
  const blocks = [...markdown.matchAll(/```ts\n([\s\S]*?)\n```/g)].map((m) => m[1] as string);
  assert.ok(blocks.length > 0, 'docs/library.md has a ```ts block');
  return blocks;
}

const index = pathToFileURL(join(REPO, 'src', 'index.ts')).href;
const blocks = tsBlocks(readFileSync(join(REPO, 'docs', 'library.md'), 'utf8'));

/** Runs one block in a process of its own, in an empty directory that must stay empty. */
async function runBlock(code: string): Promise<string> {
  assert.match(code, /from 'infergauge'/);
  const dir = mkdtempSync(join(tmpdir(), 'ig-library-example-'));
  const cwd = join(dir, 'cwd');
  mkdirSync(cwd);
  try {
    // .mts: an ES module wherever it lies (top-level await).
    const file = join(dir, 'example.mts');
    writeFileSync(file, code.replaceAll("from 'infergauge'", `from ${JSON.stringify(index)}`));
    const { stdout } = await run(
      process.execPath,
      ['--import', pathToFileURL(join(REPO, 'node_modules/tsx/dist/esm/index.mjs')).href, file],
      { cwd, timeout: 120_000, env: { ...process.env, NO_COLOR: '1' } },
    );
    // No results directory, no file: measured in memory.
    assert.deepEqual(readdirSync(cwd), []);
    return stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the first example starts the simulator in-process and measures it with no directory', async () => {
  const stdout = await runBlock(blocks[0] as string);
  assert.match(stdout, /TTFT/);
  assert.match(stdout, /Requests: 20 completed, 0 failed/);
  assert.match(stdout, /Simulated server: Llama-3-8B bf16 on 1x H100/);
  assert.match(stdout, /TTFT p50 \d+\.\d ms, p99 \d+\.\d ms/);
});

test('the virtual-time example needs no socket and no directory', async () => {
  const stdout = await runBlock(blocks[1] as string);
  assert.match(stdout, /^virtual time: \d+ output tok\/s, TTFT p99 \d+\.\d ms$/m);
});

test("the outputs example's output hears every record", async () => {
  const stdout = await runBlock(blocks[2] as string);
  assert.match(stdout, /^default: 50 requests$/m);
  assert.match(stdout, /^output tokens seen by the output: 800$/m);
});
