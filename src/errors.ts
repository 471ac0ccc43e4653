/**
 * The process exit codes, one table for every command (k6's distinct threshold code is the
 * model): 0 done, 1 failed to run, 2 invalid options or input, 3 a CI threshold failed,
 * 130 interrupted (what was measured is still written).
 */
export const EXIT = {
  ok: 0,
  failure: 1,
  invalidOptions: 2,
  thresholdFailed: 3,
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * Every error infergauge raises on purpose: a stable `code` (undici's `UND_ERR_*` is the model)
 * and the exit code the command line maps it to. Messages name the field and the fix.
 */
export class InfergaugeError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly exitCode: ExitCode = EXIT.failure,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Bad usage (options, plan, input): exit 2, each problem on a line of its own. */
export class UsageError extends InfergaugeError {
  constructor(
    readonly problems: string[],
    code = 'IG_INVALID_OPTIONS',
  ) {
    super(problems.join('\n'), code, EXIT.invalidOptions);
  }
}

/** An error as `Name: message` (`RangeError: Invalid string length`); a plain Error as its message. */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err.name && err.name !== 'Error' ? `${err.name}: ${err.message}` : err.message;
}
