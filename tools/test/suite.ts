/**
 * What tools/test/run.ts (`npm test`) and tools/test/profile.ts share: the test files, and the
 * one build that compiles them with everything they import.
 *
 * The files run compiled, not through tsx: tsx's loader runs beside each process's main thread
 * and every module a process loads goes through it, which costs a test file about a second of
 * CPU (three quarters of a small file's whole cost) and each command line or simulator it
 * starts as much again. tsc compiles src/, test/, tools/ and bench/ into BUILD, a mirror of
 * the tree, where the tests start the compiled command line as users start dist/. Paths to
 * fixtures, docs and sources go through tools/repo.ts, which finds the same root from both.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { REPO } from '../repo.js';

export { REPO };

/** The compiled mirror of the tree (git-ignored). */
export const BUILD = join(REPO, '.test-build');

/** test/*.test.ts, test/<folder>/*.test.ts and test/unit/<folder>/*.test.ts, each sorted. */
export function testFiles(): string[] {
  const tests = (dir: string) =>
    readdirSync(join(REPO, dir))
      .filter((name) => name.endsWith('.test.ts'))
      .sort()
      .map((name) => join(REPO, dir, name));
  const folders = (dir: string) =>
    readdirSync(join(REPO, dir), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(dir, entry.name))
      .sort();
  return [
    ...tests('test'),
    ...folders('test').flatMap(tests),
    ...folders(join('test', 'unit')).flatMap(tests),
  ];
}

/** Where a source file's compiled copy is. */
export function compiledPath(source: string): string {
  return join(BUILD, relative(REPO, source)).replace(/\.ts$/, '.js');
}

/** The source a compiled copy came from. */
export function sourcePath(compiled: string): string {
  return join(REPO, relative(BUILD, compiled)).replace(/\.js$/, '.ts');
}

/**
 * Compiles the tree into BUILD (incrementally: with nothing changed, a few seconds), so that no
 * test runs a stale build. Only files that exist now are ever run: a deleted test's stale copy
 * is never listed (testFiles() reads the sources).
 */
export async function buildTests(): Promise<void> {
  const tsc = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
  const args = ['-p', join(REPO, 'tsconfig.test.json'), '--noEmit', 'false'];
  args.push('--outDir', BUILD, '--declaration', 'false');
  args.push('--incremental', '--tsBuildInfoFile', join(BUILD, '.tsbuildinfo'));
  try {
    await promisify(execFile)(process.execPath, [tsc, ...args], { cwd: REPO });
  } catch (err) {
    const {
      code,
      stdout = '',
      stderr = '',
    } = err as {
      code?: number;
      stdout?: string;
      stderr?: string;
    };
    // 2: type errors, but everything was emitted. The tests run, as they did through tsx, which
    // never checked types; `npm run typecheck` (and CI) is where types are judged.
    if (code !== 2) throw new Error(`the build (tsc) failed, so no test ran:\n${stdout}${stderr}`);
    process.stderr.write(
      `type errors (the tests run anyway; npm run typecheck lists them):\n${stdout}`,
    );
  }
  // src/version.ts reads the package.json above it, as dist/version.js does.
  copyFileSync(join(REPO, 'package.json'), join(BUILD, 'package.json'));
}

/** One line of tools/test/reporter.mjs: a finished test file, or a top-level test in one. */
export interface TimingLine {
  /** 'file' for a whole test file (its process included), 'test' for a top-level test in it. */
  kind: 'file' | 'test';
  file: string;
  name: string;
  durationS: number;
  /** When it finished (ms since 1970), as the reporter saw it. */
  endedAtMs: number;
  passed: boolean;
}

/** The JSON lines of a file (the timing reporter's, a profile's trace); none if it is missing. */
export function readJsonLines<T>(path: string): T[] {
  try {
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as T);
  } catch {
    return [];
  }
}
