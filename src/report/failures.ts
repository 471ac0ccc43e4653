/**
 * Failed requests in words: each error kind with its count and the first message of each kind
 * (the server's own reason), and whether a command measured no success at all (which it then
 * exits 1 for: docs/cli.md, "Exit codes"). Server text is untrusted: one line, no control
 * characters, clipped.
 */
import { fmtNumber } from '../metrics/format.js';
import type { RunSummary } from '../metrics/summary.js';
import { ERROR_KINDS } from '../record.js';
import { terminalSafe } from './format.js';

type Requests = RunSummary['requests'];
/** What these functions read of a summary's requests (a capacity step holds the same). */
type Failures = Pick<Requests, 'completed' | 'failed' | 'errorsByKind' | 'firstErrorByKind'>;

/** The most characters of one server message on a summary line. */
export const ERROR_MESSAGE_CHARS = 120;

/** A server's message as one printable line: control characters out, whitespace runs one space, clipped. */
export function oneLine(text: string, max = ERROR_MESSAGE_CHARS): string {
  const flat = terminalSafe(text).replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** `http_4xx 2, timeout 1`: the kinds by count, in the stable order of ERROR_KINDS. */
export function errorKindCounts(requests: Pick<Requests, 'errorsByKind'>): string {
  return ERROR_KINDS.filter((k) => requests.errorsByKind[k])
    .map((k) => `${k} ${fmtNumber(requests.errorsByKind[k] ?? 0)}`)
    .join(', ');
}

/**
 * One line per error kind: `http_4xx 2: HTTP 404: The model 'gpt-4o' does not exist`, the first
 * message of the kind (summaries before firstErrorByKind: the count alone).
 */
export function errorKindLines(requests: Pick<Requests, 'errorsByKind' | 'firstErrorByKind'>) {
  return ERROR_KINDS.filter((k) => requests.errorsByKind[k]).map((k) => {
    const first = requests.firstErrorByKind?.[k];
    const count = `${k} ${fmtNumber(requests.errorsByKind[k] ?? 0)}`;
    return first ? `${count}: ${oneLine(first)}` : count;
  });
}

/** Whether every measured request of these summaries failed (none counted: nothing to judge). */
export function nothingSucceeded(
  summaries: readonly { requests: Pick<Requests, 'completed' | 'failed'> }[],
): boolean {
  return (
    summaries.some((s) => s.requests.failed > 0) &&
    summaries.every((s) => s.requests.completed === 0)
  );
}

/**
 * The exit-1 message of a command whose measured requests all failed: `no measured request
 * succeeded (3 failed): http_4xx 2: HTTP 404: ...; timeout 1: ...`, kinds summed over the
 * summaries and the first message of each kind from the first summary that has one.
 */
export function failedToRun(summaries: readonly { requests: Failures }[]): string {
  const errorsByKind: Requests['errorsByKind'] = {};
  const firstErrorByKind: NonNullable<Requests['firstErrorByKind']> = {};
  let failed = 0;
  for (const { requests } of summaries) {
    failed += requests.failed;
    for (const k of ERROR_KINDS) {
      const n = requests.errorsByKind[k];
      if (n) errorsByKind[k] = (errorsByKind[k] ?? 0) + n;
      const first = requests.firstErrorByKind?.[k];
      if (first !== undefined && firstErrorByKind[k] === undefined) firstErrorByKind[k] = first;
    }
  }
  const kinds = errorKindLines({ errorsByKind, firstErrorByKind }).join('; ');
  return `failed to run: no measured request succeeded (${fmtNumber(failed)} failed): ${kinds}`;
}

/** A table's failed cell: `all N` where nothing succeeded (the row's other cells measure nothing). */
export function failedCell(
  p: { completed: number; failed: number },
  red: (s: string) => string,
): string {
  if (p.failed === 0) return '0';
  return red(p.completed === 0 ? `all ${fmtNumber(p.failed)}` : fmtNumber(p.failed));
}
