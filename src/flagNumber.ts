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

/**
 * The number in `value` (undefined when it is not given), or undefined after adding `problem`
 * (the command's own wording, naming the flag) to `problems`.
 */
export function checkedFlagNumber(
  value: unknown,
  rule: NumberRule,
  problems: string[],
  problem: string,
): number | undefined {
  if (value === undefined) return undefined;
  const n = parseFlagNumber(value, rule);
  if ('value' in n) return n.value;
  problems.push(problem);
  return undefined;
}

/**
 * A comma-separated list of numbers (`--levels 1,4,16`), each item read by parseFlagNumber:
 * sorted, without repeats; undefined when any item is no such number.
 */
export function parseFlagList(value: unknown, rule: NumberRule = {}): number[] | undefined {
  const items = String(value)
    .split(',')
    .map((item) => parseFlagNumber(item, rule));
  const values = items.flatMap((item) => ('value' in item ? [item.value] : []));
  if (values.length < items.length) return undefined;
  return [...new Set(values)].sort((a, b) => a - b);
}
