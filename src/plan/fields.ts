/**
 * Readers of one option's raw value (a string from the command line, or a plan file's number or
 * boolean): its value, or what is wrong with it, said after the flag's name ("must be ...").
 * Plain functions rather than a schema library, so that `run` loads no validation library
 * before its first request.
 */
import { type NumberRule, parseFlagNumber } from '../flagNumber.js';
import { parseLengthDistribution } from '../workload/distributions.js';

export type FieldResult<T> = { value: T } | { problem: string };
/** Reads one raw option value. */
export type Field<T> = (raw: unknown) => FieldResult<T>;
/** The type a field reads. */
export type FieldValue<F> = F extends Field<infer T> ? T : never;

const kindOf = (raw: unknown) => (Array.isArray(raw) ? 'a list' : `a ${typeof raw}`);

/** Any text, or with `min` 1 any non-empty text. */
export const text =
  (min = 0): Field<string> =>
  (raw) => {
    if (typeof raw !== 'string') return { problem: `must be text, not ${kindOf(raw)}` };
    return raw.length < min ? { problem: 'must not be empty' } : { value: raw };
  };

/** Text that matches `pattern`, else `problem`. */
export const matching =
  (pattern: RegExp, problem: string): Field<string> =>
  (raw) =>
    typeof raw === 'string' && pattern.test(raw) ? { value: raw } : { problem };

/** One of `choices`, else `problem`. */
export const oneOf =
  <const T extends string>(choices: readonly T[], problem: string): Field<T> =>
  (raw) =>
    choices.includes(raw as T) ? { value: raw as T } : { problem };

export const flag: Field<boolean> = (raw) =>
  typeof raw === 'boolean' ? { value: raw } : { problem: 'must be true or false' };

/** A number option, read by parseFlagNumber (an empty value is no number, Infinity none). */
export const number =
  (rule: NumberRule): Field<number> =>
  (raw) =>
    parseFlagNumber(raw, rule);
export const int = (min: number) => number({ min, integer: true });
export const positive = () => number({ above: 0 });

/** A length distribution as written ("256", "uniform:128:512", ...), kept as text. */
export const lengths = (): Field<string> => (raw) => {
  // A program's (or a plan file's) plain number is the fixed length it reads as.
  const value = typeof raw === 'number' ? String(raw) : raw;
  if (typeof value !== 'string') return { problem: `must be text, not ${kindOf(raw)}` };
  try {
    parseLengthDistribution(value);
    return { value };
  } catch (err) {
    return { problem: (err as Error).message };
  }
};

/** An http:// or https:// URL (surrounding blanks dropped). */
export const httpUrl: Field<string> = (raw) => {
  const problem = 'must be an http:// or https:// URL';
  if (typeof raw !== 'string') return { problem };
  const trimmed = raw.trim();
  try {
    const { protocol } = new URL(trimmed);
    return protocol === 'http:' || protocol === 'https:' ? { value: trimmed } : { problem };
  } catch {
    return { problem };
  }
};

/** A list each of whose items `item` reads. */
export const listOf =
  <T>(item: Field<T>): Field<T[]> =>
  (raw) => {
    if (!Array.isArray(raw)) return { problem: `must be a list, not ${kindOf(raw)}` };
    const values: T[] = [];
    for (const [i, x] of raw.entries()) {
      const r = item(x);
      if ('problem' in r) return { problem: `item ${i + 1} ${r.problem}` };
      values.push(r.value);
    }
    return { value: values };
  };

/** Whatever `a` reads, else whatever `b` does (b's problem when neither reads it). */
export const either =
  <A, B>(a: Field<A>, b: Field<B>): Field<A | B> =>
  (raw) => {
    const first = a(raw);
    return 'value' in first ? first : b(raw);
  };

/** Any value, as it is (already validated elsewhere). */
export const anything =
  <T>(): Field<T> =>
  (raw) => ({ value: raw as T });

/**
 * Reads every field of `input` that `fields` knows, in the table's order; names unknown keys.
 * `problem(key, message)` spells a problem for the user.
 */
export function readFields<F extends Record<string, Field<unknown>>>(
  fields: F,
  input: Record<string, unknown>,
  problem: (key: string, message: string) => string,
): { values: { [K in keyof F]?: FieldValue<F[K]> }; problems: string[] } {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, read] of Object.entries(fields)) {
    if (input[key] === undefined) continue;
    const r = read(input[key]);
    if ('problem' in r) problems.push(problem(key, r.problem));
    else values[key] = r.value;
  }
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(fields, key) && input[key] !== undefined) {
      problems.push(problem(key, 'is not an option of run'));
    }
  }
  return { values: values as { [K in keyof F]?: FieldValue<F[K]> }, problems };
}
