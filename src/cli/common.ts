/**
 * What every command shares: how bad usage and errors are printed and mapped to the process
 * exit code (one place), Ctrl-C / SIGTERM turned into abort signals for the session, and the
 * output files a user names written.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { EXIT, type ExitCode, InfergaugeError, UsageError } from '../errors.js';
import { terminalSafe } from '../report/format.js';

/**
 * Whether to colour what goes to `stream`: never with NO_COLOR set (no-color.org), always with
 * FORCE_COLOR set (but `0` or `false`), else only on a terminal: a pipe or a file gets plain text.
 */
export function useColor(stream: { isTTY?: boolean }): boolean {
  if (process.env.NO_COLOR) return false;
  const force = process.env.FORCE_COLOR;
  if (force !== undefined) return force !== '0' && force !== 'false';
  return stream.isTTY === true;
}

/** Prints `infergauge COMMAND: invalid options` (or `what`) and each problem; returns exit code 2. */
export function printProblems(
  command: string,
  problems: readonly string[],
  what = 'invalid options',
): ExitCode {
  process.stderr.write(
    `infergauge ${command}: ${what}\n${problems.map((p) => `  - ${terminalSafe(p)}`).join('\n')}\n`,
  );
  return EXIT.invalidOptions;
}

/** Prints each warning as `infergauge COMMAND: warning: ...` on stderr. */
export function printWarnings(command: string, warnings: readonly string[]): void {
  for (const w of warnings) printNotice(command, `warning: ${w}`);
}

/**
 * Prints `infergauge COMMAND: message` on stderr. Messages may quote the server (an error, a model
 * id), so every one passes terminalSafe: a server cannot send escape sequences to the terminal.
 */
export function printNotice(command: string, message: string): void {
  process.stderr.write(`infergauge ${command}: ${terminalSafe(message)}\n`);
}

/**
 * The exit code for an error that reached the command: bad usage prints its problems (exit 2),
 * any other error its message (an InfergaugeError's own exit code, else 1).
 */
export function reportError(command: string, err: unknown): ExitCode {
  if (err instanceof UsageError) return printProblems(command, err.problems);
  printNotice(command, (err as Error).message);
  return err instanceof InfergaugeError ? err.exitCode : EXIT.failure;
}

/** Runs a command's body and sets the process exit code from its result or its error. */
export async function runAction(command: string, body: () => Promise<number> | number) {
  try {
    process.exitCode = await body();
  } catch (err) {
    process.exitCode = reportError(command, err);
  }
}

export interface Interrupts {
  /** Aborted on the first Ctrl-C or SIGTERM: send nothing more, let requests in flight finish. */
  stop: AbortSignal;
  /** Aborted on the second: cancel what is in flight too. */
  cancel: AbortSignal;
  /** What a Ctrl-C does, asked for by the program (the live page's Stop button). */
  interrupt(): void;
  /** Stops listening (call when the command is done). */
  dispose(): void;
}

/** Listens for Ctrl-C and SIGTERM for the length of one command; `onStop` says what happens. */
export function listenForInterrupts(onStop?: () => void): Interrupts {
  const stop = new AbortController();
  const cancel = new AbortController();
  const onSignal = () => {
    if (stop.signal.aborted) {
      cancel.abort();
      return;
    }
    stop.abort();
    onStop?.();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    stop: stop.signal,
    cancel: cancel.signal,
    interrupt: onSignal,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/** A repeatable option's values, in the order given (`--header A --header B`). */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/**
 * Writes an output file a user named (`--md`, `--html`, `--csv`), making its folder; a failure
 * is named by its path rather than as a bare ENOENT. `text` absent: only the folder.
 */
export function writeOutput(path: string, text?: string): void {
  try {
    if (text === undefined) mkdirSync(path, { recursive: true });
    else {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, text);
    }
  } catch (err) {
    throw new Error(`cannot write ${path}: ${(err as Error).message}`);
  }
}
