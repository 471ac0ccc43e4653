/**
 * `size --prices FILE`: the user's price per GPU-hour by GPU id (none is built in). Read into a
 * table with no prototype and looked up by own keys only, so that a GPU whose id is
 * `constructor` or `__proto__` finds its own price or none, never Object.prototype's.
 */
import { readFileSync, statSync } from 'node:fs';
import { parse } from 'yaml';

/**
 * The dearest price per GPU-hour taken. Rental runs about 1 to 10 dollars (a GB200 near the
 * top); a million leaves room for any currency (10 dollars is some 250,000 dong) while a typo
 * of an exponent, or YAML's `.inf`, is named rather than ranked.
 */
export const MAX_PRICE_PER_GPU_HOUR = 1_000_000;

/** The largest price file read: a table of every GPU on the market is a few KiB. */
const PRICE_FILE_MAX_BYTES = 1024 * 1024;

/** Prices per GPU-hour by GPU id: own keys only (see priceOf). */
export type PriceTable = Readonly<Record<string, number>>;

/** Why `value` is no price per GPU-hour for `gpu`, or undefined where it is one. */
export function priceProblem(gpu: string, value: unknown): string | undefined {
  if (typeof value === 'number' && Number.isFinite(value) && value > 0) {
    if (value <= MAX_PRICE_PER_GPU_HOUR) return undefined;
    return `${gpu}: a price per GPU-hour of ${value} is over ${MAX_PRICE_PER_GPU_HOUR.toLocaleString('en-US')}; give the price of one GPU for one hour, e.g. "${gpu}: 2.49"`;
  }
  const shown = typeof value === 'number' ? String(value) : JSON.stringify(value);
  return `${gpu} must be a price per GPU-hour, a finite number > 0 (got ${shown ?? String(value)}); e.g. "${gpu}: 2.49"`;
}

/** Every problem of a price table a library caller passes (the file reader's checks). */
export function pricesProblems(prices: unknown): string[] {
  if (typeof prices !== 'object' || prices === null || Array.isArray(prices)) {
    return ['prices must map GPU ids to prices per GPU-hour, e.g. { h100: 2.49 }'];
  }
  return Object.entries(prices).flatMap(([gpu, value]) => priceProblem(gpu, value) ?? []);
}

/** The price of the first of `ids` the table has as its own key. */
export function priceOf(prices: PriceTable | undefined, ...ids: string[]): number | undefined {
  if (!prices) return undefined;
  for (const id of ids) if (Object.hasOwn(prices, id)) return prices[id];
  return undefined;
}

/** A parsed price file as a table (pure: tests call it with values); throws naming each bad price. */
export function pricesFromValue(value: unknown, path: string): PriceTable {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`${path} must map GPU ids to prices per GPU-hour, e.g. "h100: 2.49"`);
  }
  const problems: string[] = [];
  const prices: Record<string, number> = Object.create(null);
  for (const [gpu, price] of Object.entries(value)) {
    const problem = priceProblem(gpu, price);
    if (problem) problems.push(problem);
    else prices[gpu] = price as number;
  }
  if (problems.length > 0) throw new Error(`${path}: ${problems.join('; ')}`);
  return prices;
}

/** A price table in YAML or JSON; throws naming the file and each bad price. */
export function readPriceFile(path: string): PriceTable {
  let data: unknown;
  try {
    if (statSync(path).size > PRICE_FILE_MAX_BYTES) {
      throw new Error('too large for a price table (at most 1 MiB); is it the right file?');
    }
    data = parse(readFileSync(path, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code !== undefined
          ? `cannot read it (${code})`
          : (err as Error).message.split('\n')[0];
    throw new Error(`cannot read ${path}: ${why}`);
  }
  return pricesFromValue(data, path);
}
