/**
 * The warning catalogue: every warning a run, a sweep point or a merge attaches to its summary,
 * with its stable code, its severity and the one place its words are built. A terminal message
 * is one sentence that states the cause, its figures and the remedy once, in at most
 * WARNING_MESSAGE_MAX_CHARS characters; what takes longer to explain goes to `detail`, which
 * the reports (HTML, Markdown) and summary.json carry and the terminal does not print.
 * docs/metrics.md ("Warnings") lists the codes; tools filter on them, so a code keeps its meaning.
 */
import { enUsNumber } from './format.js';

/**
 * - `info`: context for reading a number; the numbers stand as printed.
 * - `warning`: some numbers are off or mean less than they seem; read them with the cause named.
 * - `error`: the run did not measure what was asked (the client, a failure or a stop decided
 *   the numbers); do not use them as the server's.
 */
export type WarningSeverity = 'info' | 'warning' | 'error';

export const WARNING_SEVERITIES: readonly WarningSeverity[] = ['info', 'warning', 'error'];

/** The longest terminal message, in characters: one line a reader takes in at once. */
export const WARNING_MESSAGE_MAX_CHARS = 200;

export interface Warning {
  /** Stable code, for tools that filter warnings. */
  code: string;
  /** Absent in summaries written before severities existed: read those as `warning`. */
  severity?: WarningSeverity;
  /** One sentence: cause, figures, remedy (the terminal prints this). */
  message: string;
  /** The longer explanation, for the reports and summary.json only. */
  detail?: string;
  /**
   * The measured figure that raised it and the limit it crossed, in the same unit (a share as
   * 0-1, ms, a count): the validity verdict's reasons carry them (src/metrics/validity.ts).
   */
  figure?: number;
  threshold?: number;
}

interface Text {
  message: string;
  detail?: string;
  figure?: number;
  threshold?: number;
  /** Where the figures decide it: the severity this occurrence has instead of the code's. */
  severity?: WarningSeverity;
}

interface Entry<F> {
  severity: WarningSeverity;
  build: (f: F) => Text;
}

const entry = <F>(severity: WarningSeverity, build: (f: F) => Text): Entry<F> => ({
  severity,
  build,
});

const pct = (share: number) => `${(share * 100).toFixed(1)}%`;
const n = (x: number) => enUsNumber(Math.round(x), 0, 0);
const rate = (x: number) => `${x.toFixed(2)} req/s`;
const plural = (k: number, word: string) => `${n(k)} ${word}${k === 1 ? '' : 's'}`;
/** Server or system text inside a sentence: its first `max` characters, whole in `detail`. */
const clip = (text: string, max: number) =>
  text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`;
/** Milliseconds or seconds, whichever reads. */
const duration = (ms: number) => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${n(ms)} ms`);

/**
 * Share of failed requests past which a run is invalid rather than to be read with caution: the
 * successes are then a selection of the load (those the server could serve), not the load.
 */
export const FAILED_INVALID_SHARE = 0.1;

/** Figures of a client-limited run (ClientHealth's own words for each cause). */
export interface ClientLimitedFigures {
  /** One sentence per limit crossed (ClientHealth.reasons). */
  reasons: readonly string[];
  /** Each reason's figure against its limit (ClientHealth.causes; absent in older results). */
  causes?: readonly string[];
  /** What to do, fitted to the run (ClientHealth.advice; absent in older results). */
  advice?: string;
}

/** Figures of a prefill-dominated run (analysis/traps.ts prefillWarning). */
export interface PrefillFigures {
  /** Share of E2E spent before the first token (queueing set aside where `queued`). */
  share: number;
  queued: boolean;
  prefillMs: number;
  meanTtftMs: number;
  streamMs: number;
  inputTokens: number;
  outputTokens: number;
  /** TTFT is most of the wait. */
  slowFirstToken: boolean;
  /** Prompts are many times the answers and carry much of the server's time. */
  longPrompts: boolean;
}

/** The source a prefix-cache hit share was read from (telemetry, llama.cpp timings, usage). */
export type PrefixCacheSource = 'counters' | 'rate' | 'prefill' | 'usage';

const PREFIX_CACHE_SOURCES: Record<PrefixCacheSource, string> = {
  counters: "the server's prefix-cache counters",
  rate: "the server's own prefix-cache hit rate, averaged over the scrapes",
  prefill: "llama.cpp's prompt tokens processed per request",
  usage: "usage's cached_tokens per request",
};

/** Shared words of the drain and shortfall messages. */
const steadyWindow = (windowS: number) =>
  `${windowS.toFixed(1)} s from p95 E2E after the first send to the last send`;

/** Figures of a run's warm-up transient (summary.warmupTransient). */
export interface TransientFigures {
  truncated: number;
  completions: number;
  truncatedS: number;
}

/** The headline figures' words, as the shift names them. */
const TRANSIENT_LABELS: Record<string, string> = {
  ttftP50Ms: 'TTFT p50',
  ttftP99Ms: 'TTFT p99',
  itlP50Ms: 'ITL p50',
  itlP99Ms: 'ITL p99',
  tpotP50Ms: 'TPOT p50',
  e2eP50Ms: 'E2E p50',
  e2eP99Ms: 'E2E p99',
  outputTokensPerS: 'output tok/s',
};

const signedPct = (share: number) => `${share >= 0 ? '+' : ''}${(share * 100).toFixed(0)}%`;

export const WARNINGS = {
  client_limited: entry<ClientLimitedFigures>('error', (f) => {
    const first = f.causes?.[0];
    const more = f.reasons.length - 1;
    const cause = first
      ? ` (${first}${more > 0 ? `, +${n(more)} more` : ''})`
      : ` on ${plural(f.reasons.length, 'count')}`;
    return {
      message: `the client limited this run${cause}; ${f.advice ?? 'use more --workers or another machine'}`,
      detail: f.reasons.join('; '),
    };
  }),
  coalesced_events: entry<{ share: number }>('info', (f) => ({
    message: `${pct(f.share)} of token events came in one network read with the one before, so their gaps read ~0: the server or network batched them, or the client read late`,
  })),
  interrupted: entry<
    | { unsent: number }
    | { profile: 'sweep' | 'probe' | 'capacity search'; missing: 'levels' | 'points' | 'batches' }
  >('warning', (f) =>
    'profile' in f
      ? {
          message: `the ${f.profile} was interrupted: later ${f.missing} are missing; run it again to its end`,
        }
      : {
          message: `the run was interrupted: only the requests that finished are counted${f.unsent > 0 ? ` (${plural(f.unsent, 'scheduled arrival')} never sent)` : ''}; run it to its end for the whole load`,
        },
  ),
  no_requests: entry<Record<string, never>>('error', () => ({
    message:
      'no request was counted, so nothing was measured: the run stopped before its first measured request ended; run longer or with fewer warm-up requests',
  })),
  requests_failed: entry<{ failed: number; counted: number; kinds: string }>('warning', (f) => ({
    message: `${n(f.failed)} of ${n(f.counted)} requests failed (${pct(f.failed / f.counted)}: ${clip(f.kinds, 60)}); latencies cover successes only, the adjusted view counts failures`,
    ...(f.kinds.length > 60 ? { detail: `failures by kind: ${f.kinds}` } : {}),
    figure: f.failed / f.counted,
    threshold: 0,
    // Past this share the successes are a selection of the load, not the load.
    ...(f.failed / f.counted > FAILED_INVALID_SHARE ? { severity: 'error' as const } : {}),
  })),
  below_offered_rate: entry<
    | {
        offeredPerS: number;
        steady: { requestsPerS: number; windowS: number };
        wholePerS: number;
        /** The share of the offered rate under which the server fell behind. */
        keptUpShare: number;
      }
    | { offeredPerS: number; steady?: undefined; wholePerS: number; e2eP95Ms: number }
  >('warning', (f) => {
    if (!f.steady) {
      return {
        message: `the run finished ${rate(f.wholePerS)} of the offered ${rate(f.offeredPerS)} and never reached a steady state (p95 E2E ${duration(f.e2eP95Ms)} outlasted the arrivals): run longer to tell a slow server from a short run`,
        figure: f.wholePerS / f.offeredPerS,
      };
    }
    const s = f.steady;
    return {
      message: `the server fell behind the offered ${rate(f.offeredPerS)}: it finished ${rate(s.requestsPerS)} (${pct(s.requestsPerS / f.offeredPerS)}) while arrivals were open, so requests queued; lower --rate to measure a load it sustains`,
      detail: `Over the steady-state window (${steadyWindow(s.windowS)}) the server finished ${rate(s.requestsPerS)}: the run's ${rate(f.wholePerS)} is its capacity at this load, not the offered rate.`,
      figure: s.requestsPerS / f.offeredPerS,
      threshold: f.keptUpShare,
    };
  }),
  max_concurrency_capped: entry<{
    cap: number;
    offeredPerS: number;
    wholePerS: number;
    queueDelayP50Ms: number;
    /** The share of the offered rate under which the load counts as not delivered. */
    deliveredShare: number;
  }>('warning', (f) => ({
    message: `--max-concurrency ${n(f.cap)} held arrivals back (queue delay p50 ${duration(f.queueDelayP50Ms)}): ${rate(f.wholePerS)} went out of the ${rate(f.offeredPerS)} asked; raise --max-concurrency to offer the full rate`,
    figure: f.wholePerS / f.offeredPerS,
    threshold: f.deliveredShare,
    detail: `Arrivals over the client's own cap of ${n(f.cap)} requests in flight waited for a free slot (their wait is queueDelay and counts in user TTFT): the server was offered what ${n(f.cap)} requests in flight allow, not the asked ${rate(f.offeredPerS)}, so this says nothing about whether it keeps up with that rate.`,
  })),
  drain_tail: entry<{
    offeredPerS: number;
    wholePerS: number;
    drainS: number;
    drainShare: number;
    steady: { requestsPerS: number; outputTokensPerS: number; windowS: number };
  }>('info', (f) => ({
    message: `the whole run's ${rate(f.wholePerS)} is ${pct(1 - f.wholePerS / f.offeredPerS)} under the offered ${rate(f.offeredPerS)} only for its ${f.drainS.toFixed(1)} s drain tail: while arrivals were open the server kept up (steady state)`,
    detail: `The last requests finished ${f.drainS.toFixed(1)} s after the last was sent (${pct(f.drainShare)} of the run). Over the steady-state window (${steadyWindow(f.steady.windowS)}) the server finished ${rate(f.steady.requestsPerS)} and ${n(f.steady.outputTokensPerS)} output tok/s.`,
  })),
  coordinated_omission: entry<
    | {
        loop: 'closed';
        /** Share of the loop's time spent beyond its typical request (figure). */
        share: number;
        limit: number;
        concurrency: number;
      }
    | {
        loop: 'open';
        /** userTtft p99 over TTFT p99, less one (figure). */
        share: number;
        limit: number;
        userP99Ms: number;
        serviceP99Ms: number;
      }
  >('warning', (f) =>
    f.loop === 'closed'
      ? {
          message: `coordinated omission: slow requests held the closed loop's ${n(f.concurrency)} slots ${pct(f.share)} of its time in stalls, so slow stretches are under-sampled; an open loop (--rate) measures them`,
          detail:
            "Each slot of a closed loop waits for its request before sending the next: while the server is slow the loop offers less load and records fewer requests, so the stretches users would feel most weigh least (coordinated omission). The figure is the time requests spent past twice the median TTFT and twice the median TPOT (over their output tokens), over the loop's whole time.",
          figure: f.share,
          threshold: f.limit,
        }
      : {
          message: `coordinated omission: user TTFT p99 is ${duration(f.userP99Ms)}, ${pct(f.share)} over the service's ${duration(f.serviceP99Ms)}, as requests waited in the client before going out; read user TTFT for what users saw`,
          figure: f.share,
          threshold: f.limit,
        },
  ),
  load_not_delivered: entry<{
    concurrency: number;
    measured: number;
    limit: number;
    /** What the loop keeps open: requests, or sessions (their think time included). */
    unit?: 'sessions';
  }>('warning', (f) => ({
    message: `the load asked for was not delivered: ${n(f.measured)} ${f.unit ?? 'requests'} were ${f.unit ? 'open' : 'in flight'} on average of the ${n(f.concurrency)} asked (${pct(f.measured / f.concurrency)}); run more ${f.unit ?? 'requests'} (or longer) so ramp-up and drain weigh less`,
    detail:
      'A closed loop keeps its concurrency only while requests are left to send: its start and its drain tail run below it, and a run of few requests per slot is mostly those.',
    figure: f.measured / f.concurrency,
    threshold: f.limit,
  })),
  prefix_cache_uncontrolled: entry<Record<string, never>>('warning', () => ({
    message:
      "prefix cache uncontrolled: the workload shares prompt prefixes and the server's cache was not reset, so TTFT depends on what earlier runs left in it; use --reset-cache or restart the server",
    detail:
      "--reset-cache calls vLLM's POST /reset_prefix_cache (served with VLLM_SERVER_DEV_MODE=1) or SGLang's POST /flush_cache before every point; a restarted server starts cold. The built-in simulator starts empty for a session's first point, so that point carries no such warning; manifest.json's cacheState says which state each point ran in.",
  })),
  prefix_hit_rate_missed: entry<{
    target: number;
    achieved: number;
    from: string;
    /** How far off is a miss (workload/hitRate.ts HIT_RATE_TOLERANCE, which this layer does not import). */
    tolerance: number;
  }>('warning', (f) => ({
    message: `--prefix-hit-rate missed: the server hit ${pct(f.achieved)} of prompt tokens in its prefix cache over the measured phase, not the ${pct(f.target)} asked; read TTFT as at ${pct(f.achieved)}`,
    figure: Math.abs(f.achieved - f.target),
    threshold: f.tolerance,
    detail: `From ${f.from}. Below the target: cached prefixes evicted under memory pressure (see kv_cache_full), a chat template that shifts the prefix off the engine's block boundaries, an engine that caches no blocks (TensorRT-LLM without block reuse, caching turned off), llama-server with more prefixes than slots below a quarter of the prompt or without its host-memory prompt cache (--cache-ram 0), or a block size other than assumed. Above it: another client's prompts, or a --warmup whose requests are counted by the server's counters.`,
  })),
  low_sample: entry<{ completed: number }>('info', (f) => ({
    message: `only ${n(f.completed)} completed requests: p99 needs 100 and p99.9 needs 1,000 to be resolved; run more requests for the tail`,
  })),
  input_drift: entry<{ meanInput: number; meanRequested: number; limit: number }>(
    'warning',
    (f) => {
      const drift = f.meanInput / f.meanRequested - 1;
      return {
        message: `the server counted ${f.meanInput.toFixed(1)} input tokens per request, ${pct(Math.abs(drift))} ${drift > 0 ? 'more' : 'fewer'} than the ${f.meanRequested.toFixed(1)} requested (chat template or tokenizer); --tokenizer server counts as it does`,
        figure: Math.abs(drift),
        threshold: f.limit,
      };
    },
  ),
  output_short: entry<{
    short: number;
    completed: number;
    meanOutput: number;
    meanRequested: number;
  }>('warning', (f) => ({
    message: `${n(f.short)} of ${n(f.completed)} requests stopped before their requested length (mean ${f.meanOutput.toFixed(1)} of ${f.meanRequested.toFixed(1)} tokens), so TPOT compares unequal work; --ignore-eos asks vLLM and SGLang for exact lengths`,
    figure: f.short / f.completed,
    threshold: 0,
  })),
  multi_token_events: entry<{ tokensPerEvent: number }>('info', (f) => ({
    message: `the server sent ${f.tokensPerEvent.toFixed(2)} tokens per stream event on average: ITL spreads each event's gap over its tokens, chunkGap keeps the raw gaps`,
  })),
  no_usage: entry<{ requests: number; implausible: boolean }>('warning', (f) => ({
    message: `${plural(f.requests, 'request')} had no usable output count from the server (none sent${f.implausible ? ', or an impossible one' : ''}): their output tokens were counted as one per stream event`,
  })),
  resent_requests: entry<{ resent: number; counted: number }>('warning', (f) => ({
    message: `${n(f.resent)} of ${n(f.counted)} requests were sent again after the server closed their kept-alive connection unanswered; the lost time counts as queueDelay`,
    figure: f.resent / f.counted,
    threshold: 0,
    detail:
      'The server closed a kept-alive connection, which had carried an answered request, before answering the next request on it (llama-server closes after every stream). A server that resets requests it has read looks the same to a client: unless it is llama-server, read them as failures.',
  })),
  implausible_usage: entry<{ requests: number }>('warning', (f) => ({
    message: `${plural(f.requests, 'request')} had a token count or duration from the server that cannot be true; their counts fell back to what the client saw (countProblem in records.jsonl)`,
    detail:
      "A count that is not a non-negative integer, lies above the request's max tokens or below the token events seen, or a duration that cannot be true.",
  })),
  token_count_mismatch: entry<{ requests: number }>('info', (f) => ({
    message: `${plural(f.requests, 'request')} had per-event token counts that disagreed with the server's total; the events were rescaled to the total`,
  })),
  kv_cache_full: entry<{ peak: number; mean: number; limit: number }>('warning', (f) => ({
    message: `the server's KV cache was full (peak ${(f.peak * 100).toFixed(0)}%, mean ${(f.mean * 100).toFixed(0)}%): requests waited for cache blocks, and the latencies include that wait; lower the load to measure without it`,
    figure: f.peak,
    threshold: f.limit,
  })),
  preemptions: entry<{ preemptions: number }>('warning', (f) => ({
    message: `the server preempted ${plural(f.preemptions, 'request')} (KV cache exhausted): their work was redone, which shows in their latency; lower the load to measure without it`,
    figure: f.preemptions,
    threshold: 0,
  })),
  prefix_cache_hits: entry<{
    cachedShare: number;
    /** Absent where the server told only its rate. */
    tokens?: { cached: number; prompt: number };
    source: PrefixCacheSource;
    limit: number;
  }>('warning', (f) => ({
    message: `prefix cache uncontrolled: the server served ${pct(f.cachedShare)} of prompt tokens from its prefix cache though no prompt sharing was asked, so TTFT is not a cold prefill's; send fresh prompts or reset its cache`,
    figure: f.cachedShare,
    threshold: f.limit,
    detail: `From ${PREFIX_CACHE_SOURCES[f.source]}${f.tokens ? `: ${n(f.tokens.cached)} of ${n(f.tokens.prompt)} prompt tokens were not prefilled` : ''}. The workload shares no prefix, so the prompts were in the server's cache before: sent by an earlier run with the same prompts (the same seed), or by another client. Against a fresh cache TTFT includes the whole prefill.`,
  })),
  prefill_dominated: entry<PrefillFigures>('info', (f) => {
    const ms = (x: number) => `${n(x)} ms`;
    const share = `${(f.share * 100).toFixed(0)}%`;
    const prompts = `prompts are ${Math.round(f.inputTokens / f.outputTokens)}x the answers (${n(f.inputTokens)} vs ${n(f.outputTokens)} tokens)`;
    const queued = f.queued
      ? ` (with queueing set aside: the fastest first token took ${ms(f.prefillMs)}, the mean ${ms(f.meanTtftMs)}, against ${ms(f.streamMs)} to stream an answer)`
      : '';
    // Each sentence must hold for the numbers it prints: users wait mostly for the first token
    // only where TTFT is most of their wait; long prompts alone say where the server's work goes.
    return f.slowFirstToken
      ? {
          message: `prefill-dominated: TTFT is ${share} of end-to-end latency${f.longPrompts ? ` and ${prompts}` : ''}: judge it by TTFT and prefill throughput, not decode speed`,
          detail: `TTFT is ${share} of end-to-end latency${queued}, so users wait mostly for the first token. For RAG-style use (long retrieved context, short answer) judge it by TTFT and prefill throughput rather than decode speed; prefix caching, shorter contexts or chunked prefill move it most.`,
        }
      : {
          message: `prefill-dominated: ${prompts}, so most of the server's work is prompt tokens; judge prefill throughput and TTFT beside decode speed`,
          detail: `TTFT is only ${share} of end-to-end latency${queued}, and users wait mostly for the answer to stream. For RAG-style use (long retrieved context, short answer) judge prefill throughput and TTFT beside decode speed; prefix caching, shorter contexts or chunked prefill cut the prompt work most.`,
        };
  }),
  context_extrapolation: entry<{
    targetTokens: number;
    measuredMaxTokens: number;
    sizing?: string;
  }>('warning', (f) => ({
    message: `the target context of ${n(f.targetTokens)} tokens is longer than any measured (${n(f.measuredMaxTokens)}): short-context results do not carry over; measure at that length`,
    detail: f.sizing ?? 'Pass --model and --gpu to size the KV cache that length needs.',
  })),
  nonzero_temperature: entry<{ temperature: number }>('warning', (f) => ({
    message: `temperature ${f.temperature}: sampling noise moves output lengths and timings from run to run; benchmark at temperature 0`,
  })),
  tls_unverified: entry<Record<string, never>>('warning', () => ({
    message:
      "--insecure: the server's TLS certificate was not verified, so these numbers may be another server's; trust its CA with --ca-cert FILE instead",
  })),
  deadline_passed: entry<{ deadlineS: number }>('error', (f) => ({
    message: `the run passed its hard deadline of ${n(f.deadlineS)} s and was stopped: requests in flight were cancelled, later ones never sent; lower --timeout or the load, or raise --grace`,
    detail:
      "The deadline is the run's requests at the load's limit, each taking the whole --timeout, plus --grace.",
  })),
  worker_terminated: entry<{
    worker: number;
    workers: number;
    answerS: number;
    records: number;
    missing: number;
  }>('error', (f) => ({
    message: `worker ${f.worker} of ${f.workers} was stuck ${f.answerS} s after the cancel and was terminated: ${plural(f.missing, 'request')} it had sent left no record; its ${plural(f.records, 'record')} count`,
    detail: `The worker did not answer the cancel (stuck, as in a CPU loop). Its ${n(f.records)} records are counted; ${n(f.missing)} requests it had sent (by its last report) never produced a record and are missing from the run.`,
  })),
  worker_failed: entry<{
    worker: number;
    workers: number;
    reason: string;
    records: number;
    missing: number;
  }>('error', (f) => ({
    message: `worker ${f.worker} of ${f.workers} failed (${clip(f.reason, 60)}): its share was cut short, ${n(f.missing)} requests in flight lost; a bug in infergauge, please report it`,
    detail: `Failure: ${f.reason}. Its ${n(f.records)} records are counted; ${n(f.missing)} requests it had in flight never produced a record, and the rest of its share was never sent.`,
  })),
  loadgen_failed: entry<{ reason: string; records: number }>('error', (f) => ({
    message: `the load generator failed (${clip(f.reason, 60)}) and ended the run after ${plural(f.records, 'record')}; a bug in infergauge, please report it`,
    detail: `Failure: ${f.reason}. Its ${n(f.records)} records are counted, and the requests it had yet to send were never sent.`,
  })),
  shards_not_aligned: entry<{ spreadS: number }>('warning', (f) => ({
    message: `the shards started up to ${f.spreadS.toFixed(1)} s apart, so their loads overlapped only in part and the merged load is not the plan's; start them with a shared --start-at`,
  })),
  records_damaged: entry<{ lines: number; stretches: number; said: readonly string[] }>(
    'warning',
    (f) => ({
      message: `records were skipped as damaged (${[
        f.lines > 0 ? plural(f.lines, 'line') : '',
        f.stretches > 0 ? plural(f.stretches, 'damaged gzip stretch').replace(/hs$/, 'hes') : '',
      ]
        .filter(Boolean)
        .join(', ')}), so the numbers leave out the requests they held; the reader said which`,
      detail: f.said.join('\n'),
    }),
  ),
  no_steady_state: entry<TransientFigures>('warning', (f) => ({
    message: `E2E never settled: MSER-5 put the end of the warm-up at request ${n(f.truncated)} of ${n(f.completions)}, past half the run, so its numbers average a moving system; run longer or at a lower load`,
    detail: `MSER-5 truncation on the measured requests' E2E in end order (White 1997) fell in the series' second half and its second half still drifts: the run never reached a steady state, so no steady-window headline is given.`,
    figure: f.truncated / f.completions,
    threshold: 0.5,
  })),
  warmup_shift: entry<
    TransientFigures & { moved: readonly { key: string; by: number }[]; limit?: number }
  >('warning', (f) => {
    const listed = f.moved
      .slice(0, 2)
      .map((m) => `${TRANSIENT_LABELS[m.key] ?? m.key} ${signedPct(m.by)}`)
      .join(', ');
    const more = f.moved.length > 2 ? ` (+${n(f.moved.length - 2)} more)` : '';
    return {
      message: `a warm-up transient (first ${n(f.truncated)} requests, ${f.truncatedS.toFixed(1)} s; MSER-5) moved the whole run's ${listed}${more} from the steady window's; a longer --warmup removes it`,
      detail: `Whole run against the requests that ended after the transient: ${f.moved.map((m) => `${TRANSIENT_LABELS[m.key] ?? m.key} ${signedPct(m.by)}`).join(', ')}. summary.warmupTransient.steady holds the steady window's figures.`,
      figure: Math.max(...f.moved.map((m) => Math.abs(m.by))),
      ...(f.limit !== undefined ? { threshold: f.limit } : {}),
    };
  }),
} as const;

export type WarningCode = keyof typeof WARNINGS;
export type WarningFigures<C extends WarningCode> =
  (typeof WARNINGS)[C] extends Entry<infer F> ? F : never;

/** A warning from the catalogue: its code, its severity and its words from the figures. */
export function warning<C extends WarningCode>(code: C, figures: WarningFigures<C>): Warning {
  const entry = WARNINGS[code] as Entry<WarningFigures<C>>;
  const { message, detail, figure, threshold, severity } = entry.build(figures);
  return {
    code,
    severity: severity ?? entry.severity,
    message,
    ...(detail ? { detail } : {}),
    ...(figure !== undefined && Number.isFinite(figure) ? { figure } : {}),
    ...(threshold !== undefined ? { threshold } : {}),
  };
}

/** The severity a saved warning carries, or the catalogue's for its code (older summaries). */
export function severityOf(w: Pick<Warning, 'code' | 'severity'>): WarningSeverity {
  const known = Object.hasOwn(WARNINGS, w.code) ? WARNINGS[w.code as WarningCode] : undefined;
  return w.severity ?? known?.severity ?? 'warning';
}
