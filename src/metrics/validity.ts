import { severityOf, type Warning } from './warnings.js';

/**
 * The validity verdict of a run or a point (docs/metrics.md, "Validity"): one judgement of its
 * warnings, so that no second system decides what the catalogue already says. A warning of
 * severity `error` (the client, a failure or a stop decided the numbers) makes the run
 * `invalid`; one of severity `warning` (some numbers mean less than they seem) makes it
 * `caution`; `info` (context for reading a number, such as a low-sample tail's `~`) leaves it
 * `valid`. The reasons are those warnings, with their codes, figures and limits.
 */
export type Verdict = 'valid' | 'caution' | 'invalid';

export const VERDICTS: readonly Verdict[] = ['valid', 'caution', 'invalid'];

export interface ValidityReason {
  /** The warning's stable code (docs/metrics.md, "Warnings"). */
  code: string;
  verdict: Exclude<Verdict, 'valid'>;
  /** The measured figure and the limit it crossed, where the warning has one number. */
  figure?: number;
  threshold?: number;
  /** The warning's sentence. */
  text: string;
}

export interface Validity {
  verdict: Verdict;
  /** Invalid reasons first, then caution, each in the order the run raised them. */
  reasons: ValidityReason[];
}

/** How good a verdict is: valid 2, caution 1, invalid 0 (a threshold compares these). */
export const VERDICT_RANK: Record<Verdict, number> = { valid: 2, caution: 1, invalid: 0 };

/** The verdict of a run with these warnings (a saved summary's too: older ones have no severity). */
export function validityOf(warnings: readonly Warning[]): Validity {
  const reasons: ValidityReason[] = [];
  for (const w of warnings) {
    const severity = severityOf(w);
    if (severity === 'info') continue;
    reasons.push({
      code: w.code,
      verdict: severity === 'error' ? 'invalid' : 'caution',
      ...(w.figure !== undefined ? { figure: w.figure } : {}),
      ...(w.threshold !== undefined ? { threshold: w.threshold } : {}),
      text: w.message,
    });
  }
  // Stable: within each verdict, the order the run raised them.
  reasons.sort((a, b) => VERDICT_RANK[a.verdict] - VERDICT_RANK[b.verdict]);
  const verdict: Verdict =
    reasons.length === 0 ? 'valid' : reasons[0].verdict === 'invalid' ? 'invalid' : 'caution';
  return { verdict, reasons };
}

/** `VALID`, `CAUTION (2 reasons: client_limited, output_short)`: the verdict in one phrase. */
export function verdictPhrase(v: Validity): string {
  if (v.reasons.length === 0) return 'VALID';
  const codes = [...new Set(v.reasons.map((r) => r.code))];
  const shown = codes.slice(0, 3).join(', ');
  const more = codes.length > 3 ? `, +${codes.length - 3} more` : '';
  return `${v.verdict.toUpperCase()} (${shown}${more})`;
}
