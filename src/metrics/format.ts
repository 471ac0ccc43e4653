/**
 * The one number formatter of every output (terminal, reports, threshold and comparison
 * messages). Two digit rules, kept
 * apart because outputs already print both: fixed digits (`fmtNumber`: 1,234.5 with exactly
 * `digits` decimals, or at most `digits` with `fmtUpTo`) and about three significant digits
 * (`fmtSig`: 107.9, 7.33, 1,847). A value that is not finite prints as `-`.
 */

/**
 * `value.toLocaleString('en-US', { minimumFractionDigits, maximumFractionDigits })` to the
 * character, without ICU: ICU's first number format costs about 13 ms of CPU, a one-request
 * run's whole summary a fraction of that (issue 51). As ICU does, it rounds the shortest decimal
 * that reads back as `value` (String(value): 1.005 is 1.01 to two decimals, where toFixed says
 * 1.00) half away from zero, and keeps the sign of a negative that rounds to 0 (`-0`). What
 * String writes with an exponent (below 1e-6, from 1e21) and what is not finite go to ICU.
 */
export function enUsNumber(value: number, minDigits: number, maxDigits: number): string {
  const text = String(Math.abs(value));
  if (!Number.isFinite(value) || text.includes('e')) {
    return value.toLocaleString('en-US', {
      minimumFractionDigits: minDigits,
      maximumFractionDigits: maxDigits,
    });
  }
  const dot = text.indexOf('.');
  let int = dot < 0 ? text : text.slice(0, dot);
  let frac = dot < 0 ? '' : text.slice(dot + 1);
  if (frac.length > maxDigits) {
    const up = frac.charCodeAt(maxDigits) >= 53; // '5' or more: half away from zero
    frac = frac.slice(0, maxDigits);
    if (up) {
      const digits = int + frac;
      let i = digits.length - 1;
      while (i >= 0 && digits[i] === '9') i--;
      const carried =
        (i < 0 ? '1' : digits.slice(0, i) + String(Number(digits[i]) + 1)) +
        '0'.repeat(digits.length - 1 - i);
      int = carried.slice(0, carried.length - maxDigits);
      frac = carried.slice(carried.length - maxDigits);
    }
  }
  let end = frac.length;
  while (end > minDigits && frac[end - 1] === '0') end--;
  frac = frac.slice(0, end).padEnd(minDigits, '0');
  const sign = value < 0 || Object.is(value, -0) ? '-' : '';
  return `${sign}${int.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}${frac ? `.${frac}` : ''}`;
}

/** Grouped (en-US) with exactly `digits` decimals; `grouped: false` prints like toFixed. */
export function fmtNumber(value: number, digits = 0, grouped = true): string {
  if (!Number.isFinite(value)) return '-';
  if (!grouped) return value.toFixed(digits);
  return enUsNumber(value, digits, digits);
}

/** A number with about three significant digits, no trailing zeros (107.9, 7.33, 1,847, 64). */
export function fmtSig(value: number): string {
  if (!Number.isFinite(value)) return '-';
  const a = Math.abs(value);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : a >= 0.01 ? 3 : 4;
  return enUsNumber(value, 0, digits);
}

/** Grouped (en-US) with at most `digits` decimals, trailing zeros dropped (2.5, 16, 1,000). */
export function fmtUpTo(value: number, digits = 2): string {
  if (!Number.isFinite(value)) return '-';
  return enUsNumber(value, 0, digits);
}
