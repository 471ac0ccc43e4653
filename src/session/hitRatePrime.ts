/**
 * `--prefix-hit-rate`'s two phases around a point: the scenario its measured requests are built
 * from (workload/hitRate.ts), and the prime phase that sends each shared prefix once before the
 * clock starts, against a server or into the engine model of virtual time. The achieved rate is
 * then read over the measured phase only: the server's prefix-cache counters move from the
 * first scrape, which the schedule's start takes, after the prime; virtual time's engine counts
 * nothing for its prime.
 */
import { EXIT, InfergaugeError } from '../errors.js';
import { runLoadgen } from '../loadgen/run.js';
import type { RunSummary } from '../metrics/summary.js';
import type { Warning } from '../metrics/warnings.js';
import { warning } from '../metrics/warnings.js';
import type { RequestRecord } from '../record.js';
import type { EngineCluster } from '../sim/cluster.js';
import { promptBlockHashes } from '../sim/physical.js';
import { seriesName } from '../telemetry/prometheus.js';
import type { ServerMetricsSummary } from '../telemetry/summary.js';
import {
  engineBlockTokens,
  type HitRateOutcome,
  type HitRatePlan,
  hitRateOutcome,
  hitRatePlan,
  PRIME_FIRST_ID,
} from '../workload/hitRate.js';
import type { Scenario } from '../workload/scenarios.js';
import { splitWords } from '../workload/words.js';
import type { LoadedWorkload } from '../workload/workload.js';
import type { LiveTarget } from './target.js';

/** Stable code of a hit-rate point that cannot be set up or primed. */
export const HIT_RATE_ERROR = 'IG_PREFIX_HIT_RATE';

/** A point's hit-rate experiment: how it is built, and the scenario its prompts come from. */
export interface HitRateSetup {
  plan: HitRatePlan;
  scenario: Scenario;
}

/**
 * The scenario of a point at `rate`, its prompts starting with one of the shared prefixes; the
 * block size is the engine's (`blockTokens` in virtual time, else the one the server's engine
 * is known to use).
 */
export function hitRateSetup(
  rate: number,
  scenario: Scenario,
  o: { blockTokens: number; overheadTokens: number },
): HitRateSetup {
  // The plan refused drawn lengths and sessions (runPlan.ts hitRateProblems).
  const input = scenario.input.kind === 'fixed' ? scenario.input.value : Number.NaN;
  const plan = hitRatePlan({
    rate,
    inputTokens: input,
    blockTokens: o.blockTokens,
    overheadTokens: o.overheadTokens,
  });
  if ('problem' in plan)
    throw new InfergaugeError(plan.problem, HIT_RATE_ERROR, EXIT.invalidOptions);
  return {
    plan,
    scenario:
      plan.prefixTokens > 0
        ? { ...scenario, sharedPrefixTokens: plan.prefixTokens, sharedPrefixes: plan.prefixes }
        : scenario,
  };
}

/** The block size a live server's prefixes are rounded to. */
export function liveBlockTokens(
  target: Pick<LiveTarget, 'environment' | 'simulatorBlockTokens'>,
): number {
  return target.simulatorBlockTokens ?? engineBlockTokens(target.environment.engine);
}

/** The prime phase's requests: one per prefix, each with text of its own after it, one token out. */
function primeRequest(workload: LoadedWorkload, k: number) {
  if (!('nextRequest' in workload)) throw new Error('a hit-rate workload has single requests');
  return { ...workload.nextRequest(PRIME_FIRST_ID + k), requestedOutputTokens: 1 };
}

/**
 * Sends each prefix once and waits for every answer, so the measured phase finds them cached.
 * A prime request that fails stops the point: its prefix would miss, and the rate with it.
 */
export async function primeServer(
  target: LiveTarget,
  setup: HitRateSetup,
  workload: LoadedWorkload,
): Promise<void> {
  if (setup.plan.prefixTokens === 0) return;
  const records: RequestRecord[] = [];
  await runLoadgen({
    target: { ...target.config, ignoreEos: false },
    load: { mode: 'closed', concurrency: setup.plan.prefixes },
    requests: setup.plan.prefixes,
    warmupRequests: 0,
    seed: target.plan.seed,
    nextRequest: (id) => primeRequest(workload, id),
    onRecord: (r) => records.push(r),
  });
  const failed = records.filter((r) => r.error !== undefined);
  if (failed.length > 0 || records.length < setup.plan.prefixes) {
    const first = failed[0]?.error?.message;
    throw new InfergaugeError(
      `--prefix-hit-rate: ${failed.length || setup.plan.prefixes - records.length} of the ${setup.plan.prefixes} prime requests failed${first ? ` (${first})` : ''}; nothing was measured`,
      HIT_RATE_ERROR,
    );
  }
}

/** The prime phase in virtual time: each prefix's blocks left cached in every replica. */
export function primeEngine(engine: EngineCluster, setup: HitRateSetup, workload: LoadedWorkload) {
  if (setup.plan.prefixTokens === 0) return;
  const { blockSize } = engine.config;
  for (let k = 0; k < setup.plan.prefixes; k++) {
    const hashes = promptBlockHashes(splitWords(primeRequest(workload, k).prompt), blockSize);
    for (const replica of engine.replicas) replica.warmPrefixCache(hashes);
  }
}

/**
 * The measured phase's rate beside its target in the summary, and `prefix_hit_rate_missed`
 * when it lies lies more than 3 points from the
 * target; a notice where nothing measured it (a server without prefix-cache counters).
 */
export function judgeHitRate(
  setup: HitRateSetup,
  server: Pick<ServerMetricsSummary, 'prefixCache' | 'counters'> | undefined,
  summary: Pick<RunSummary, 'warnings' | 'prefixHitRate' | 'tokens' | 'requests'>,
  onNotice?: (text: string) => void,
): void {
  // What the measured requests themselves told (usage's cached_tokens, llama.cpp's prompt
  // tokens processed) is the measured phase exactly; the counters are the next best.
  const own = summary.tokens.cachedInput;
  const measured =
    own && own.ofInput > 0
      ? {
          hitRate: own.cached / own.ofInput,
          from:
            own.source === 'usage'
              ? "usage's cached_tokens of the measured requests"
              : "llama.cpp's prompt tokens processed by the measured requests",
        }
      : (server?.prefixCache ?? llamacppHitRate(server, summary));
  const outcome = hitRateOutcome(setup.plan.rate, measured);
  summary.prefixHitRate = {
    target: outcome.target,
    ...(outcome.achieved !== undefined ? { achieved: outcome.achieved } : {}),
    ...(outcome.from !== undefined ? { from: outcome.from } : {}),
  };
  summary.warnings.push(...hitRateWarnings(outcome, onNotice));
}

/**
 * llama-server has no hit counter, but its `llamacpp:prompt_tokens_total` counts the prompt
 * tokens it processed (`n_prompt_tokens_processed_total`, tools/server/server.cpp metrics), which
 * a cached prefix skips: against the prompt tokens of the requests the client counted, the rest
 * was cached. Only without warm-up requests, which the counter holds and the client does not.
 */
function llamacppHitRate(
  server: Pick<ServerMetricsSummary, 'counters'> | undefined,
  summary: Pick<RunSummary, 'tokens' | 'requests'>,
): { hitRate: number; from: string } | undefined {
  if (!server || summary.requests.warmup > 0 || !(summary.tokens.input > 0)) return undefined;
  let processed: number | undefined;
  for (const [key, c] of Object.entries(server.counters)) {
    if (seriesName(key) === 'llamacpp:prompt_tokens_total') processed = (processed ?? 0) + c.delta;
  }
  if (processed === undefined || processed < 0) return undefined;
  return {
    hitRate: Math.max(0, 1 - processed / summary.tokens.input),
    from: "llamacpp:prompt_tokens_total (prompt tokens processed) against the measured requests' prompt tokens",
  };
}

function hitRateWarnings(outcome: HitRateOutcome, onNotice?: (text: string) => void): Warning[] {
  if (outcome.achieved === undefined) {
    onNotice?.(
      "--prefix-hit-rate: neither the server's metrics nor its answers told a prefix-cache hit rate, so the rate reached is not measured (vLLM, SGLang and TensorRT-LLM report one at /metrics; llama-server its prompt tokens processed, with --metrics)",
    );
    return [];
  }
  if (!outcome.missed) return [];
  return [
    warning('prefix_hit_rate_missed', {
      target: outcome.target,
      achieved: outcome.achieved,
      from: outcome.from ?? 'the server',
    }),
  ];
}
