import type { RunSummary } from '../metrics/summary.js';
import { type Warning, type WarningFigures, warning } from '../metrics/warnings.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import type { Scenario } from '../workload/scenarios.js';

/**
 * Share of prompt tokens served from the server's cache past which a run's TTFT is no longer a
 * cold prefill's. A chat template's common head fills at most a block or two (16 tokens each in
 * vLLM) of every prompt, a few per cent of a 256-token prompt; a prompt sent before is served
 * whole from the cache (the README's repeated run read 51,000 of 51,200 tokens cached).
 */
export const PREFIX_CACHE_WARN_SHARE = 0.2;

/**
 * Whether the workload itself repeats prompt prefixes: a shared prefix, sessions (each turn
 * resends its history), agent tasks (a shared system prompt), a dataset's own prompts (their
 * repeats are the data's), or a trace's block ids (Mooncake's `hash_ids`). Then cache hits are
 * the workload's, not a leftover of earlier runs.
 */
export function workloadSharesPrefixes(
  scenario: Scenario,
  o: { dataset?: boolean; traceBlockIds?: boolean },
): boolean {
  return (
    (scenario.sharedPrefixTokens ?? 0) > 0 ||
    scenario.session !== undefined ||
    scenario.agent !== undefined ||
    o.dataset === true ||
    o.traceBlockIds === true
  );
}

/**
 * `prefix_cache_hits`: the server served a material share of the prompt tokens from its cache
 * though the workload asked for no sharing (prompts sent by an earlier run, another client, or
 * repeated by the seed). Read from what the server told, the run's own requests first: usage's
 * `cached_tokens`, then llama.cpp's prompt tokens processed per request (summary.tokens), then
 * the server's prefix-cache counters over the scrape window (which warm-up requests and other
 * clients also move).
 */
export function prefixCacheWarning(
  summary: Pick<RunSummary, 'tokens' | 'sessions'>,
  server: Pick<ServerMetricsSummary, 'prefixCache'> | undefined,
  sharingAsked: boolean,
): Warning | undefined {
  if (sharingAsked || summary.sessions) return undefined;
  const found = cachedShare(summary, server);
  if (!found || !(found.cachedShare >= PREFIX_CACHE_WARN_SHARE)) return undefined;
  return warning('prefix_cache_hits', { ...found, limit: PREFIX_CACHE_WARN_SHARE });
}

function cachedShare(
  summary: Pick<RunSummary, 'tokens'>,
  server: Pick<ServerMetricsSummary, 'prefixCache'> | undefined,
): Omit<WarningFigures<'prefix_cache_hits'>, 'limit'> | undefined {
  const own = summary.tokens.cachedInput;
  if (own && own.ofInput > 0) {
    return {
      cachedShare: own.cached / own.ofInput,
      tokens: { cached: own.cached, prompt: own.ofInput },
      source: own.source,
    };
  }
  const p = server?.prefixCache;
  if (!p) return undefined;
  if (p.hitTokens !== undefined && p.queriedTokens !== undefined && p.queriedTokens > 0) {
    return {
      cachedShare: p.hitTokens / p.queriedTokens,
      tokens: { cached: p.hitTokens, prompt: p.queriedTokens },
      source: 'counters',
    };
  }
  return { cachedShare: p.hitRate, source: 'rate' };
}

/**
 * The state of the server's prefix cache a point ran in (manifest.json and summary.json
 * `cacheState`): `flushed`, emptied before it (`--reset-cache`, or a simulator that started
 * empty: the built-in one's first point, every point in virtual time); `{ primed: R }`, filled
 * by `--prefix-hit-rate R`'s prime phase so the measured requests hit R of their prompt
 * tokens; `uncontrolled`, whatever earlier runs and other clients left (the validity verdict's
 * `prefix_cache_uncontrolled` where the workload shares prefixes).
 */
export type CacheState = 'flushed' | 'uncontrolled' | { primed: number };

/** The state a point starts in. */
export function cacheStateOf(o: {
  /** `--reset-cache` emptied it before the point. */
  reset: boolean;
  /** The simulator measured started with an empty cache (its first point, or virtual time). */
  freshSimulator: boolean;
  /** `--prefix-hit-rate`: the rate the prime phase set up. */
  primedHitRate?: number;
}): CacheState {
  if (o.primedHitRate !== undefined) return { primed: o.primedHitRate };
  return o.reset || o.freshSimulator ? 'flushed' : 'uncontrolled';
}

/** `flushed`, `primed for 50% hits`, `uncontrolled`: the state in a few words. */
export function cacheStateText(state: CacheState): string {
  if (typeof state === 'string') return state;
  return `primed for ${+(state.primed * 100).toFixed(1)}% hits`;
}

/** A saved `cacheState` read back (older results have none: undefined). */
export function readCacheState(raw: unknown): CacheState | undefined {
  if (raw === 'flushed' || raw === 'uncontrolled') return raw;
  if (typeof raw === 'object' && raw !== null) {
    const primed = (raw as { primed?: unknown }).primed;
    if (typeof primed === 'number' && primed >= 0 && primed <= 1) return { primed };
  }
  return undefined;
}

/**
 * "primed for 50% hits; 49.8% hit over the measured phase": the state with what
 * `--prefix-hit-rate` reached, read as saved results are (a number, or nothing).
 */
export function cacheStatePhrase(state: CacheState, reached?: { achieved?: unknown }): string {
  const achieved = reached?.achieved;
  const hit =
    typeof achieved === 'number' && Number.isFinite(achieved)
      ? `; ${+(achieved * 100).toFixed(1)}% hit over the measured phase`
      : '';
  return `${cacheStateText(state)}${hit}`;
}

/** A saved `prefixHitRate` read back: its numbers as numbers, its source as text, or nothing. */
export function readPrefixHitRate(
  raw: unknown,
): { target: number; achieved?: number; from?: string } | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as { target?: unknown; achieved?: unknown; from?: unknown };
  const share = (x: unknown): x is number => typeof x === 'number' && x >= 0 && x <= 1;
  if (!share(r.target)) return undefined;
  return {
    target: r.target,
    ...(share(r.achieved) ? { achieved: r.achieved } : {}),
    ...(typeof r.from === 'string' ? { from: r.from } : {}),
  };
}
