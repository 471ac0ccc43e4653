/**
 * Seeded fault injection for the simulated server, so reliability paths of any client can be
 * tested against known ground truth. Which request gets which fault depends only on the seed
 * and the request's id (the client's `x-request-id`), not on arrival order or timing.
 */

export const FAULT_KINDS = [
  'http429',
  'http500',
  'reset',
  'stall',
  'malformed',
  'slow-start',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultRule {
  kind: FaultKind;
  /** Share of requests that get this fault, 0..1. */
  fraction: number;
  /** reset, stall, malformed: after this many output tokens have been sent. */
  afterTokens: number;
  /** stall: how long the stream pauses; slow-start: how long before the response starts. */
  ms: number;
}

export interface FaultPlan {
  rules: FaultRule[];
  seed: number;
}

/** What the server did to one request, reported in its ground-truth record. */
export type InjectedFault = Omit<FaultRule, 'fraction'>;

const DEFAULTS: Record<FaultKind, { afterTokens: number; ms: number }> = {
  http429: { afterTokens: 0, ms: 0 },
  http500: { afterTokens: 0, ms: 0 },
  reset: { afterTokens: 5, ms: 0 },
  stall: { afterTokens: 3, ms: 2000 },
  malformed: { afterTokens: 2, ms: 0 },
  'slow-start': { afterTokens: 0, ms: 3000 },
};

const SYNTAX =
  "KIND=FRACTION[:MS][@TOKENS], comma-separated, KIND one of 429, 500, reset, stall, malformed, slow-start; e.g. '429=0.05,reset=0.01@10,stall=0.02:1500@3,slow-start=0.1:2000'";

/**
 * Parses `--faults`. Throws an Error that names the bad part and the syntax. The fractions
 * together may not exceed 1: each request gets at most one fault.
 */
export function parseFaults(text: string, seed: number): FaultPlan {
  const rules: FaultRule[] = [];
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z0-9-]+)=([0-9.]+)(?::([0-9.]+))?(?:@([0-9]+))?$/.exec(part);
    const kind = m ? (/^\d/.test(m[1]) ? `http${m[1]}` : m[1]) : undefined;
    if (!m || !(FAULT_KINDS as readonly string[]).includes(kind as string)) {
      throw new Error(`--faults: cannot read "${part}" (${SYNTAX})`);
    }
    const fraction = Number(m[2]);
    if (!(fraction >= 0 && fraction <= 1)) {
      throw new Error(`--faults: fraction of "${part}" must be between 0 and 1`);
    }
    const k = kind as FaultKind;
    rules.push({
      kind: k,
      fraction,
      ms: m[3] !== undefined ? Number(m[3]) : DEFAULTS[k].ms,
      afterTokens: m[4] !== undefined ? Number(m[4]) : DEFAULTS[k].afterTokens,
    });
  }
  const total = rules.reduce((sum, r) => sum + r.fraction, 0);
  if (total > 1 + 1e-9) {
    throw new Error(
      `--faults: fractions add up to ${Number(total.toPrecision(12))}, more than 1 (each request gets at most one fault)`,
    );
  }
  return { rules, seed };
}

/** The fault for request `requestId`, or undefined: a uniform draw from a hash of seed and id. */
export function faultFor(plan: FaultPlan, requestId: string): InjectedFault | undefined {
  if (plan.rules.length === 0) return undefined;
  let h = Math.imul(plan.seed ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
  for (let i = 0; i < requestId.length; i++) {
    h = Math.imul(h ^ requestId.charCodeAt(i), 0x01000193) >>> 0;
  }
  // Final avalanche (murmur3 fmix32) so neighbouring ids draw independent values.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  const u = (h >>> 0) / 2 ** 32;
  let edge = 0;
  for (const rule of plan.rules) {
    edge += rule.fraction;
    if (u < edge) return { kind: rule.kind, afterTokens: rule.afterTokens, ms: rule.ms };
  }
  return undefined;
}
