import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * How the tests start `infergauge`: as they themselves run. Compiled by `npm test` (into
 * .test-build/, see tools/test/suite.ts), they start the command line compiled beside them, as
 * users run dist/; a file run from source (`node --import tsx --test <file>`) starts the source
 * through tsx.
 */
const compiled = import.meta.url.endsWith('.js');
const MAIN = fileURLToPath(
  new URL(`../../src/cli/main.${compiled ? 'js' : 'ts'}`, import.meta.url),
);
export const CLI: readonly string[] = compiled ? [MAIN] : ['--import', 'tsx', MAIN];

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Starts `infergauge ...args` as users do. */
export function spawnCli(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; detached?: boolean } = {},
): ChildProcess {
  return spawn(process.execPath, [...CLI, ...args], {
    env: { ...process.env, OPENAI_API_KEY: undefined, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
}

export function collect(child: ChildProcess): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

export function runCli(args: string[], env?: NodeJS.ProcessEnv): Promise<CliResult> {
  return collect(spawnCli(args, env ? { env } : {}));
}

/** A fresh temporary directory, removed when the test process exits. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
