/**
 * Runs a page's shell blocks as a reader would: in order, in one empty directory, with
 * `infergauge` on the PATH and `$URL` naming a server (the docs' own `http://127.0.0.1:8000`,
 * where `infergauge sim --port 8000` would serve, becomes that server's address too, and
 * `node dist/cli/main.js`, which docs/cli.md says is `infergauge`, becomes `infergauge`). A file
 * block is written there for the blocks after it. The output of every command that a sample
 * block quotes (`<!-- output of: CMD -->`) is captured for tools/docs/samples.ts and the drift
 * test.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DocBlock, logicalLines, splitComment } from './blocks.js';

export interface PageRunOptions {
  /** An empty directory: the blocks run in `work/` under it, `infergauge` lives in `bin/`. */
  dir: string;
  /** How to start the command line: the node arguments before its own (`[main.js]`). */
  cliArgs: readonly string[];
  /** The server `$URL` and `http://127.0.0.1:8000` stand for. */
  url: string;
  /** Per block. */
  timeoutMs?: number;
}

export interface BlockOutcome {
  block: DocBlock;
  /** What the block promised to exit with. */
  expected: number;
  exitCode: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface PageRun {
  outcomes: BlockOutcome[];
  /** The stdout of each quoted command, by the command as the sample's mark names it. */
  captured: Map<string, string>;
}

const DOCS_URL = 'http://127.0.0.1:8000';
/** docs/cli.md's spelling of the command line before it is on the PATH (as that page says). */
const BUILT_CLI = /\bnode dist\/cli\/main\.js\b/g;

/** A block's text as it runs here: the docs' server is ours, the built command `infergauge`. */
export function localise(code: string, url: string): string {
  return code.replaceAll(DOCS_URL, url).replace(BUILT_CLI, 'infergauge');
}

/** Blank-insensitive, so that a mark may quote a command as written across lines. */
export function sameCommand(a: string, b: string): boolean {
  return a.replace(/\s+/g, ' ').trim() === b.replace(/\s+/g, ' ').trim();
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

function runShell(
  script: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ exitCode: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', script], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    // The whole process group: a block's commands and the simulators they start.
    const timer = setTimeout(() => {
      stderr += `\n(timed out after ${timeoutMs} ms)`;
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, timeoutMs);
    child.on('close', (exitCode) => {
      clearTimeout(timer);
      resolve({ exitCode, stdout, stderr });
    });
  });
}

export async function runPage(blocks: DocBlock[], options: PageRunOptions): Promise<PageRun> {
  const work = join(options.dir, 'work');
  const bin = join(options.dir, 'bin');
  const captures = join(options.dir, 'captured');
  for (const d of [work, bin, captures]) mkdirSync(d, { recursive: true });
  const wrapper = join(bin, 'infergauge');
  // `--import tsx` resolves from the working directory, which is not the repository's.
  const args = options.cliArgs.map((a, i) =>
    a === 'tsx' && options.cliArgs[i - 1] === '--import' ? import.meta.resolve('tsx') : a,
  );
  writeFileSync(
    wrapper,
    `#!/bin/sh\nexec ${[process.execPath, ...args].map(shellQuote).join(' ')} "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    OPENAI_API_KEY: undefined,
    NO_COLOR: '1',
    FORCE_COLOR: undefined,
    URL: options.url,
    PATH: `${bin}:${process.env.PATH ?? ''}`,
  };
  const quoted = blocks.flatMap((b) => (b.mark.kind === 'output' ? [b.mark.command] : []));
  const capturedFiles = new Map<string, string>();
  const outcomes: BlockOutcome[] = [];
  for (const block of blocks) {
    const { mark } = block;
    const code = localise(block.code, options.url);
    if (mark.kind === 'file') {
      writeFileSync(join(work, mark.name), `${code}\n`);
      if (mark.check === undefined) continue;
    }
    if (mark.kind !== 'run' && mark.kind !== 'file') continue;
    const script =
      mark.kind === 'file'
        ? (mark.check as string)
        : logicalLines(code)
            .map((line) => {
              const { command, comment } = splitComment(line);
              const k = quoted.findIndex((q) => sameCommand(localise(q, options.url), command));
              if (k < 0 || command === '') return line;
              const file = join(captures, `${k}.txt`);
              capturedFiles.set(quoted[k] as string, file);
              return `${command} > ${shellQuote(file)} ${comment}`;
            })
            .join('\n');
    const started = performance.now();
    const result = await runShell(script, work, env, options.timeoutMs ?? 180_000);
    outcomes.push({
      block,
      expected: mark.kind === 'run' ? mark.exitCode : 0,
      ...result,
      ms: performance.now() - started,
    });
  }
  const captured = new Map<string, string>();
  for (const [command, file] of capturedFiles) {
    try {
      captured.set(command, readFileSync(file, 'utf8'));
    } catch {
      // The block stopped before the command ran: its outcome says why.
    }
  }
  return { outcomes, captured };
}

/** One failed block, as a reader of the page would want to find it. */
export function describeFailure(o: BlockOutcome): string {
  const tail = (s: string) => s.trim().split('\n').slice(-15).join('\n    ');
  return [
    `${o.block.page}:${o.block.line}: exited ${o.exitCode}, the docs say ${o.expected}`,
    `  block:\n    ${o.block.code.split('\n').join('\n    ')}`,
    `  stderr:\n    ${tail(o.stderr)}`,
    `  stdout:\n    ${tail(o.stdout)}`,
  ].join('\n');
}
