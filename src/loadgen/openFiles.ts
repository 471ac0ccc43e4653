/**
 * Whether a load fits in the files this process may open. Each request in flight holds a socket,
 * and a socket is a file: past the limit (`ulimit -n`; Node raises the soft limit to the hard
 * one as it starts) connects fail with EMFILE, or time out while the event loop works through
 * the refusals, and a run of 20,000 requests in flight against a limit of 20,000 failed every
 * one of them with nothing said about why. A built-in simulator is a process of its own with the
 * same limit, and holds as many.
 */
import { readFileSync } from 'node:fs';
import type { LoadSpec } from '../load.js';
import type { ShardPart } from './shard.js';

/** Files the process holds besides the load's sockets: stdio, records, telemetry, workers, epoll. */
const OTHER_FILES = 256;

/** The most files this process may hold open (Linux's /proc/self/limits), or undefined. */
export function openFilesLimit(
  limitsText: () => string = () => readFileSync('/proc/self/limits', 'utf8'),
): number | undefined {
  let text: string;
  try {
    text = limitsText();
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\d+|unlimited)\s/m.exec(text)?.[1];
  return soft === undefined || soft === 'unlimited' ? undefined : Number(soft);
}

/** The most requests `part` holds in flight, where its load bounds them (an open loop may not). */
export function inFlightBound(
  part: Pick<ShardPart, 'load' | 'warmup' | 'measured'>,
): number | undefined {
  const load: LoadSpec = part.load;
  if (load.mode === 'closed') return load.concurrency;
  if (load.maxConcurrency !== undefined) return load.maxConcurrency;
  if (load.rate !== Number.POSITIVE_INFINITY || part.measured.count === undefined) return undefined;
  // --rate inf sends the whole part at once.
  return (part.warmup.count ?? 0) + part.measured.count;
}

/** A notice when `part`'s requests in flight need more files than `limit` allows, else undefined. */
export function openFilesNotice(
  part: Pick<ShardPart, 'load' | 'warmup' | 'measured'>,
  limit: number | undefined,
): string | undefined {
  const inFlight = inFlightBound(part);
  if (limit === undefined || inFlight === undefined || inFlight + OTHER_FILES <= limit) {
    return undefined;
  }
  const n = (x: number) => x.toLocaleString('en-US');
  return `${n(inFlight)} requests in flight need a socket each, and this process may open ${n(limit)} files (ulimit -n): connects past it fail (EMFILE). Raise the limit (ulimit -n ${2 ** Math.ceil(Math.log2(inFlight + OTHER_FILES))}; a built-in simulator needs as many), or split the load over clients (--shard)`;
}
