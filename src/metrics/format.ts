/**
 * The one number formatter of every output (terminal, reports, threshold and comparison
 * messages). Two digit rules, kept
 * apart because outputs already print both: fixed digits (`fmtNumber`: 1,234.5 with exactly
 * `digits` decimals, or at most `digits` with `fmtUpTo`) and about three significant digits
 * (`fmtSig`: 107.9, 7.33, 1,847). A value that is not finite prints as `-`.
 */

/** Grouped (en-US) with exactly `digits` decimals; `grouped: false` prints like toFixed. */
export function fmtNumber(value: number, digits = 0, grouped = true): string {
  if (!Number.isFinite(value)) return '-';
  if (!grouped) return value.toFixed(digits);
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** A number with about three significant digits, no trailing zeros (107.9, 7.33, 1,847, 64). */
export function fmtSig(value: number): string {
  if (!Number.isFinite(value)) return '-';
  const a = Math.abs(value);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : a >= 0.01 ? 3 : 4;
  return value.toLocaleString('en-US', { maximumFractionDigits: digits });
}

/** Grouped (en-US) with at most `digits` decimals, trailing zeros dropped (2.5, 16, 1,000). */
export function fmtUpTo(value: number, digits = 2): string {
  if (!Number.isFinite(value)) return '-';
  return value.toLocaleString('en-US', { maximumFractionDigits: digits });
}
