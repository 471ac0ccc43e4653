/**
 * docs/library.md's examples run as written: each JavaScript block, with `from 'infergauge'`
 * pointed at this repository's src/index.ts, runs as an .mjs in a process of its own.
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

/** Every code block of a markdown text, with its language. */
function codeBlocks(markdown: string): { lang: string; code: string }[] {
  return [...markdown.matchAll(/```(\w*)\n([\s\S]*?)\n```/g)].map((m) => ({
    lang: m[1] as string,
    code: m[2] as string,
  }));
}

const index = pathToFileURL(join(REPO, 'src', 'index.ts')).href;
const pageBlocks = codeBlocks(readFileSync(join(REPO, 'docs', 'library.md'), 'utf8'));
const blocks = pageBlocks.map((b) => b.code);

test('every block of docs/library.md is plain JavaScript', () => {
  assert.ok(pageBlocks.length > 0);
  assert.deepEqual(
    pageBlocks.map((b) => b.lang).filter((lang) => lang !== 'js'),
    [],
    'a block is not ```js: the page promises JavaScript that runs as .mjs',
  );
});

/** Runs one block in a process of its own, in an empty directory that must stay empty. */
async function runBlock(code: string): Promise<string> {
  assert.match(code, /from 'infergauge'/);
  const dir = mkdtempSync(join(tmpdir(), 'ig-library-example-'));
  const cwd = join(dir, 'cwd');
  mkdirSync(cwd);
  try {
    // .mjs: an ES module wherever it lies (top-level await), and no TypeScript: tsx only
    // resolves the import of src/index.ts, the package's source here.
    const file = join(dir, 'example.mjs');
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

test('parseSimulatorArgs gives options to check, and a misspelt option is refused', async () => {
  const stdout = await runBlock(blocks[3] as string);
  assert.match(stdout, /^Llama-3-70B bf16 on 2x H100/m);
  assert.match(
    stdout,
    /^IG_SIM_OPTIONS: "modle" is not a simulator option \(did you mean "model"\?\)/m,
  );
});

test('a saved run summarised again from its records gives the same numbers', async () => {
  const stdout = await runBlock(blocks[4] as string);
  const m = /^TTFT p50 ([\d.]+) ms, again ([\d.]+) ms$/m.exec(stdout);
  assert.ok(m, stdout);
  assert.equal(m[1], m[2]);
});
