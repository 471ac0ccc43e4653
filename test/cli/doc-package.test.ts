/**
 * The docs hold for a user of the published package, not only of this repository: the project is
 * compiled and packed with `npm pack` (package.json's `files` decide what ships; its scripts do
 * not run, the build being done), the tarball is unpacked into an empty directory's node_modules
 * beside its declared dependencies only (linked from this repository's node_modules: npm's cache
 * need not hold them, and no registry is reached), and every library block of the docs
 * (`<!-- library -->`, tools/docs/blocks.ts) runs there as an .mjs file importing 'infergauge';
 * the docs' `http://127.0.0.1:8000` names a simulator started here. Every relative link of the
 * packaged README.md and docs must lead to a packaged file.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { docPages, readBlocks } from '../../tools/docs/blocks.js';
import { REPO } from '../../tools/repo.js';
import { BUILD } from '../../tools/test/suite.js';
import { tempDir } from '../helpers/cli.js';
import { startSim } from '../helpers/sim.js';

const exec = promisify(execFile);
const DOCS_URL = 'http://127.0.0.1:8000';

interface Packed {
  /** The unpacked package: node_modules/infergauge of an otherwise empty project. */
  project: string;
  /** Every file in the tarball, relative to the package's root. */
  files: string[];
}

/**
 * Packs the repository as `npm publish` would. The compiled sources come from `npm test`'s
 * build when this file runs compiled (tools/test/suite.ts), else from tsc, into a copy of the
 * repository's files, so that nothing is written into the repository itself.
 */
async function pack(): Promise<Packed> {
  const root = tempDir('ig-doc-package-');
  const stage = join(root, 'stage');
  const { stdout: listed } = await exec(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    { cwd: REPO, maxBuffer: 16 << 20 },
  );
  for (const file of listed.split('\0').filter((f) => f !== '' && existsSync(join(REPO, f)))) {
    mkdirSync(dirname(join(stage, file)), { recursive: true });
    cpSync(join(REPO, file), join(stage, file));
  }
  if (import.meta.url.endsWith('.js') && existsSync(join(BUILD, 'src')))
    cpSync(join(BUILD, 'src'), join(stage, 'dist'), { recursive: true });
  else
    await exec(process.execPath, [
      join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'),
      ...['-p', join(REPO, 'tsconfig.json'), '--outDir', join(stage, 'dist')],
    ]);
  const { stdout } = await exec(
    'npm',
    ['pack', '--json', '--ignore-scripts', '--pack-destination', root],
    {
      cwd: stage,
      maxBuffer: 16 << 20,
    },
  );
  const [info] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  assert.ok(info, 'npm pack made a tarball');
  const project = join(root, 'project');
  const installed = join(project, 'node_modules', 'infergauge');
  mkdirSync(installed, { recursive: true });
  writeFileSync(join(project, 'package.json'), '{ "private": true }\n');
  await exec('tar', ['-xzf', join(root, info.filename), '-C', installed, '--strip-components=1']);
  // What `npm install` would fetch: the package's declared dependencies, and nothing else.
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
  };
  for (const dep of Object.keys(manifest.dependencies ?? {})) {
    const link = join(project, 'node_modules', dep);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(REPO, 'node_modules', dep), link, 'dir');
  }
  return { project, files: info.files.map((f) => f.path) };
}

let packed: Promise<Packed>;
let sim: SimulatorProcess;

before(async () => {
  packed = pack();
  packed.catch(() => {});
  sim = await startSim({ 'time-scale': 0.1 });
});

after(async () => {
  await sim?.stop();
});

test('every relative link of the packaged README.md and docs leads to a file in the package', async () => {
  const { files } = await packed;
  const shipped = new Set(files);
  const broken: string[] = [];
  for (const page of files.filter((f) => f === 'README.md' || /^docs\/[^/]+\.md$/.test(f))) {
    const markdown = readFileSync(join(REPO, page), 'utf8');
    for (const [, target] of markdown.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target as string) || (target as string).startsWith('#')) continue;
      const file = posix.normalize(
        posix.join(posix.dirname(page), (target as string).split('#')[0] as string),
      );
      if (!shipped.has(file) && !files.some((f) => f.startsWith(`${file}/`)))
        broken.push(`${page}: ${target} (${file} is not in the package)`);
    }
  }
  assert.deepEqual(
    [...new Set(broken)],
    [],
    `links that break once installed:\n  ${broken.join('\n  ')}`,
  );
});

const libraryBlocks = docPages(REPO).flatMap((page) =>
  readBlocks(REPO, page).filter((b) => b.mark.kind === 'library'),
);

test('the docs have library blocks to run', () => {
  assert.ok(libraryBlocks.some((b) => b.page === 'README.md'));
  assert.ok(libraryBlocks.some((b) => b.page === 'docs/library.md'));
});

for (const block of libraryBlocks) {
  test(`${block.page}:${block.line} runs as an .mjs file against the installed package`, async () => {
    const { project } = await packed;
    const name = `${block.page.replace(/\W/g, '-')}-${block.line}`;
    const file = join(project, `${name}.mjs`);
    writeFileSync(file, block.code.replaceAll(DOCS_URL, sim.url));
    // Its own empty directory: what a block writes (results directories) stays apart.
    const cwd = join(project, name);
    mkdirSync(cwd);
    try {
      await exec(process.execPath, [file], {
        cwd,
        timeout: 120_000,
        env: { ...process.env, NO_COLOR: '1', OPENAI_API_KEY: undefined },
      });
    } catch (error) {
      const e = error as { code?: number; stderr?: string; stdout?: string };
      const firstLines = (s = '') => s.trim().split('\n').slice(0, 12).join('\n    ');
      assert.fail(
        `${block.page}:${block.line}: the block exited ${e.code}\n  stderr:\n    ${firstLines(e.stderr)}\n  stdout:\n    ${firstLines(e.stdout)}`,
      );
    }
  });
}
