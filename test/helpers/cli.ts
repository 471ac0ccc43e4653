import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Starts `infergauge ...args` as users do (through tsx, as in `npm test`). */
export function spawnCli(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; detached?: boolean } = {},
): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
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
