/**
 * The one reading of a number given as an option (command line or plan file). Stricter than
 * `Number()`: an empty or blank value is no number (not 0), nor are Infinity, NaN, hex or
 * binary forms; the problem says what is allowed.
 */
export interface NumberRule {
  /** Smallest allowed value. */
  min?: number;
  /** Values must be above this (not equal to it). */
  above?: number;
  max?: number;
  integer?: boolean;
}

/** The simulator's --time-scale: real seconds per simulated second. */
export const TIME_SCALE: NumberRule = { min: 1e-6 };

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/** The number, or a problem like `must be a whole number >= 1 (got 0)` (without the flag's name). */
export function parseFlagNumber(
  value: unknown,
  rule: NumberRule = {},
): { value: number } | { problem: string } {
  const n = typeof value === 'number' ? value : parseDecimal(value);
  const kind = rule.integer ? 'a whole number' : 'a number';
  const bounds = [
    rule.min !== undefined ? `>= ${rule.min}` : '',
    rule.above !== undefined ? `above ${rule.above}` : '',
    rule.max !== undefined ? `<= ${rule.max}` : '',
  ]
    .filter(Boolean)
    .join(' and ');
  const ok =
    n !== undefined &&
    Number.isFinite(n) &&
    (!rule.integer || Number.isInteger(n)) &&
    (rule.min === undefined || n >= rule.min) &&
    (rule.above === undefined || n > rule.above) &&
    (rule.max === undefined || n <= rule.max);
  if (ok) return { value: n };
  if (typeof value === 'string' && value.trim() === '') {
    return { problem: 'must be a number, not an empty value (an empty value is not 0)' };
  }
  if (n === undefined || !Number.isFinite(n)) return { problem: 'must be a number' };
  return { problem: `must be ${kind}${bounds ? ` ${bounds}` : ''} (got ${n})` };
}

function parseDecimal(value: unknown): number | undefined {
  if (typeof value !== 'string' || !DECIMAL.test(value.trim())) return undefined;
  return Number(value);
}
