import pc from 'picocolors';
import { cacheStatePhrase, readCacheState } from '../analysis/prefixCache.js';
import {
  CLIENT_HEALTH_LIMITS,
  type ClientHealth,
  clientHealthVerdict,
} from '../metrics/clientHealth.js';
import type { Distribution } from '../metrics/distribution.js';
import { fmtNumber, fmtUpTo } from '../metrics/format.js';
import type { RunSummary } from '../metrics/summary.js';
import type { WarmupTransient } from '../metrics/transient.js';
import type { UntilOutcome } from '../metrics/until.js';
import { type Validity, validityOf, verdictPhrase } from '../metrics/validity.js';
import { severityOf } from '../metrics/warnings.js';
import { seriesName } from '../telemetry/prometheus.js';
import type { ServerMemorySummary, ServerMetricsSummary } from '../telemetry/summary.js';
import { connectionsLine, streamsLine } from './connectionsText.js';
import { errorKindCounts, errorKindLines, nothingSucceeded } from './failures.js';
import { metricLabel, terminalSafe } from './format.js';
import { describeReasoning, sessionFacts, TURN_COLUMNS } from './sessionsText.js';
import { type Column, terminalTable } from './table.js';

export interface TerminalOptions {
  color: boolean;
  /** Extra facts for the headline (model, endpoint). */
  model?: string;
  endpoint?: string;
  /** Where the results were written. */
  outDir?: string;
  /** Server-side numbers scraped during the run. */
  serverMetrics?: ServerMetricsSummary;
  /** What served the run when it was the built-in simulator (model, GPU, KV cache). */
  simulator?: string;
}

/**
 * Server metrics worth a line in the terminal, by metric name: gauges by their maximum,
 * counters by their rate. Series with labels (vLLM's model_name) are combined. KV cache,
 * preemptions and memory have their own line (memoryLine); `covers` marks a highlight that
 * already shows a common field, which that line then leaves out.
 */
const SERVER_HIGHLIGHTS: {
  name: string;
  label: string;
  kind: 'max' | 'perS';
  covers?: 'running' | 'waiting';
}[] = [
  {
    name: 'llamacpp:requests_processing',
    label: 'processing max',
    kind: 'max',
    covers: 'running',
  },
  { name: 'llamacpp:requests_deferred', label: 'deferred max', kind: 'max', covers: 'waiting' },
  { name: 'llamacpp_slots:processing', label: 'busy slots max', kind: 'max' },
  { name: 'llamacpp:prompt_tokens_total', label: 'prompt tok/s', kind: 'perS' },
  { name: 'llamacpp:tokens_predicted_total', label: 'predicted tok/s', kind: 'perS' },
  { name: 'vllm:num_requests_running', label: 'running max', kind: 'max', covers: 'running' },
  { name: 'vllm:num_requests_waiting', label: 'waiting max', kind: 'max', covers: 'waiting' },
  { name: 'vllm:prompt_tokens_total', label: 'prompt tok/s', kind: 'perS' },
  { name: 'vllm:generation_tokens_total', label: 'generation tok/s', kind: 'perS' },
  { name: 'sglang:num_running_reqs', label: 'running max', kind: 'max', covers: 'running' },
  { name: 'sglang:num_queue_reqs', label: 'queued max', kind: 'max', covers: 'waiting' },
  { name: 'sglang:prompt_tokens_total', label: 'prompt tok/s', kind: 'perS' },
  { name: 'sglang:generation_tokens_total', label: 'generation tok/s', kind: 'perS' },
  { name: 'tgi_queue_size', label: 'queue max', kind: 'max', covers: 'waiting' },
  { name: 'tgi_batch_current_size', label: 'batch max', kind: 'max', covers: 'running' },
  { name: 'trtllm_num_requests_running', label: 'running max', kind: 'max', covers: 'running' },
  { name: 'trtllm_num_requests_waiting', label: 'waiting max', kind: 'max', covers: 'waiting' },
  { name: 'trtllm_prompt_tokens_total', label: 'prompt tok/s', kind: 'perS' },
  { name: 'trtllm_generation_tokens_total', label: 'generation tok/s', kind: 'perS' },
];

function serverLine(m: ServerMetricsSummary): { line: string; covered: Set<string> } {
  const parts: string[] = [];
  const covered = new Set<string>();
  for (const h of SERVER_HIGHLIGHTS) {
    let value: number | undefined;
    const source = h.kind === 'max' ? m.gauges : m.counters;
    for (const [key, entry] of Object.entries(source)) {
      if (seriesName(key) !== h.name) continue;
      const v =
        h.kind === 'max' ? (entry as { max: number }).max : (entry as { perS: number }).perS;
      value = h.kind === 'max' ? Math.max(value ?? v, v) : (value ?? 0) + v;
    }
    // One figure per label (two servers' names in one scrape would say it twice).
    if (value !== undefined && !parts.some((p) => p.startsWith(`${h.label} `))) {
      parts.push(`${h.label} ${fmtNumber(value, Number.isInteger(value) ? 0 : 2)}`);
      if (h.covers) covered.add(h.covers);
    }
  }
  const failed =
    m.failedScrapes > 0 ? `, ${m.failedScrapes} failed (${terminalSafe(m.firstError)})` : '';
  return {
    line: `Server metrics (${m.scrapes} scrapes${failed})${parts.length > 0 ? `: ${parts.join(', ')}` : ''}`,
    covered,
  };
}

/**
 * The server's memory story in one line, e.g. `KV cache peak 87% (mean 41%), preemptions 3,
 * GPU memory peak 71.2 GiB of 79.6, server RSS max 1.2 GiB`; running and waiting too when the
 * server-metrics line did not show them under the server's own names.
 */
function memoryLine(m: ServerMemorySummary, covered: Set<string>): string | undefined {
  const parts: string[] = [];
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
  const gib = (bytes: number) => (bytes / 2 ** 30).toFixed(1);
  if (m.kvCacheUsage) {
    parts.push(`KV cache peak ${pct(m.kvCacheUsage.max)} (mean ${pct(m.kvCacheUsage.mean)})`);
  }
  if (m.running && !covered.has('running')) parts.push(`running max ${fmtNumber(m.running.max)}`);
  if (m.waiting && !covered.has('waiting')) parts.push(`waiting max ${fmtNumber(m.waiting.max)}`);
  if (m.preemptions !== undefined) parts.push(`preemptions ${fmtNumber(m.preemptions)}`);
  const g = m.gpuMemoryUsedBytes;
  if (g) {
    parts.push(
      `GPU memory peak ${gib(g.max)} GiB${g.total !== undefined ? ` of ${gib(g.total)}` : ''}`,
    );
  }
  const p = m.processRssBytes;
  if (p) {
    // A server process of a few MiB (llama.cpp on a small model) would read 0.0 GiB.
    const mem = (bytes: number) => (p.max >= 2 ** 30 ? gib(bytes) : (bytes / 2 ** 20).toFixed(0));
    const unit = p.max >= 2 ** 30 ? 'GiB' : 'MiB';
    const peak = p.peak !== undefined && p.peak > p.max ? ` (high-water ${mem(p.peak)})` : '';
    parts.push(`server RSS max ${mem(p.max)} ${unit}${peak}`);
  }
  return parts.length > 0 ? `Server memory: ${parts.join(', ')}` : undefined;
}

/**
 * "64 concurrent requests (measured 61.8)", "8.00 requests/s gamma arrivals (burstiness 0.5)",
 * "ramping 1 -> 8 requests/s over 60 s, poisson arrivals", "trace replay at 2x (1,234
 * requests)": a throughput is never shown without its load. A session run's load counts
 * sessions: "4 concurrent sessions (measured 6.2 requests in flight)".
 */
/**
 * An open-loop run's steady-state window beside its whole-run throughput (docs/metrics.md,
 * "Steady state"), or undefined for closed loops and runs without one.
 */
export function describeSteadyState(summary: Pick<RunSummary, 'steadyState'>): string | undefined {
  const w = summary.steadyState;
  if (!w) return undefined;
  return `${fmtNumber(w.outputTokensPerS, 1)} output tok/s, ${fmtNumber(w.requestsPerS, 2)} req/s over ${fmtNumber(w.windowS, 1)} s from p95 E2E after the first send to the last send (offered ${fmtNumber(w.offeredRequestsPerS, 2)} req/s; drain tail ${fmtNumber(w.drainS, 1)} s, ${fmtNumber(w.drainShare * 100, 0)}% of the run)`;
}

/** The words of the warm-up transient's figures, in the order they are listed. */
const TRANSIENT_FIGURES: readonly [keyof NonNullable<WarmupTransient['steady']>, string, string][] =
  [
    ['ttftP50Ms', 'TTFT p50', 'ms'],
    ['ttftP99Ms', 'TTFT p99', 'ms'],
    ['itlP50Ms', 'ITL p50', 'ms'],
    ['itlP99Ms', 'ITL p99', 'ms'],
    ['tpotP50Ms', 'TPOT p50', 'ms'],
    ['e2eP50Ms', 'E2E p50', 'ms'],
    ['e2eP99Ms', 'E2E p99', 'ms'],
    ['outputTokensPerS', 'output', 'tok/s'],
  ];

/**
 * Where MSER-5 found the run settled and its headline over the steady window, each with how
 * far the whole run's moved from it (docs/metrics.md, "Warm-up transient"); undefined where the
 * run was too short to judge. The terminal prints the warning instead (only past its share).
 */
export function describeWarmupTransient(summary: RunSummary): string | undefined {
  const t = summary.warmupTransient;
  if (!t) return undefined;
  const cut = `${fmtNumber(t.truncatedRequests)} of ${fmtNumber(t.completions)} requests (${fmtNumber(t.truncatedS, 1)} s) cut by MSER-5 on E2E`;
  if (!t.steadyReached) return `not settled: ${cut}, past half the run (no steady state)`;
  if (t.truncatedRequests === 0) {
    return `none: MSER-5 on E2E cut none of ${fmtNumber(t.completions)} requests (steady from the first)`;
  }
  const steady = t.steady ?? {};
  const figures = TRANSIENT_FIGURES.flatMap(([key, label, unit]) => {
    const value = steady[key];
    if (value === undefined) return [];
    const by = t.shift?.[key];
    const moved =
      by === undefined ? '' : ` (whole ${by >= 0 ? '+' : ''}${fmtNumber(by * 100, 1)}%)`;
    return [`${label} ${fmtNumber(value, 1)} ${unit}${moved}`];
  });
  // A throughput is said with its load (docs/metrics.md): the window's is the run's.
  const load = steady.outputTokensPerS === undefined ? '' : ` (at ${describeLoad(summary)})`;
  return `${cut}; steady window${load} ${figures.join(', ')}`;
}

export function describeLoad(summary: RunSummary): string {
  const { load } = summary;
  const unit = summary.sessions ? 'sessions' : 'requests';
  const measured = fmt(load.meanConcurrency, 1);
  if (load.mode === 'closed') {
    return summary.sessions
      ? `${fmtNumber(load.concurrency)} concurrent sessions (measured ${measured} requests in flight)`
      : `${fmtNumber(load.concurrency)} concurrent requests (measured ${measured})`;
  }
  const cap =
    load.maxConcurrency !== undefined
      ? `, at most ${fmtNumber(load.maxConcurrency)} ${summary.sessions ? 'sessions ' : ''}in flight`
      : '';
  let what: string;
  if (load.arrival === 'trace') {
    // A summary read back from JSON holds the trace's description, not its times.
    const trace = load.trace as { timesMs?: readonly number[]; requests?: number; speed: number };
    const requests = trace?.timesMs?.length ?? trace?.requests;
    what = `trace replay at ${fmtUpTo(trace?.speed ?? 1)}x${requests !== undefined ? ` (${fmtNumber(requests)} ${unit})` : ''}`;
  } else {
    const kind =
      load.arrival === 'gamma'
        ? `gamma arrivals (burstiness ${fmtUpTo(load.burstiness ?? 1)})`
        : `${load.arrival} arrivals`;
    what = load.rampUp
      ? `ramping ${fmtUpTo(load.rampUp.fromRate)} -> ${fmtUpTo(load.rate)} ${unit}/s over ${fmtUpTo(load.rampUp.seconds)} s, ${kind}`
      : `${fmt(load.rate, 2)} ${unit}/s ${kind}`;
  }
  return `${what}${cap} (measured concurrency ${measured}${summary.sessions ? ' requests' : ''})`;
}

/**
 * The client's health figures in one line, each CPU share and the delay with its limit (worst
 * engine thread where there are several; the whole process's CPU where it was measured).
 */
export function describeClientHealth(h: ClientHealth): string {
  const limits = CLIENT_HEALTH_LIMITS;
  const threads = h.workers ? `${h.workers.length} workers, worst: ` : '';
  const process = h.processCpu
    ? `client CPU ${fmt(h.processCpu.share * 100, 0)}% of ${h.processCpu.usableCores} usable core${h.processCpu.usableCores === 1 ? '' : 's'} (all threads, limit ${fmt(limits.processCpuShare.limit * 100, 0)}%), `
    : '';
  const slip = h.sendSlipMs ? `, send slip p99 ${fmt(h.sendSlipMs.p99, 2)} ms` : '';
  const rates =
    h.intendedRatePerS !== undefined
      ? `, sent ${fmt(h.achievedRatePerS ?? 0, 2)} of ${fmt(h.intendedRatePerS, 2)} requests/s intended`
      : '';
  const stamps = h.stampDelayMs
    ? `, stamps late by ~${fmt(h.stampDelayMs.p99Ms, 2)} ms at p99 (estimated)`
    : '';
  const gc = h.gcPauses
    ? `, GC pauses ${fmtNumber(h.gcPauses.count)} (${fmtNumber(h.gcPauses.over1Ms)} over 1 ms, longest ${fmt(h.gcPauses.maxMs, 1)} ms)`
    : '';
  // No thread's figures (every worker terminated or failed): none to print, the rates stand.
  if (h.unmeasured) return `no engine thread's figures${rates}`;
  return `${process}${threads}CPU ${fmt(h.cpu.utilisation * 100, 0)}% of one core (${h.cpu.threadS !== undefined ? 'busiest thread' : 'process'}, limit ${fmt(limits.cpuUtilisation.limit * 100, 0)}%), event-loop delay p99 ${fmt(h.eventLoopDelayMs.p99, 2)} ms (limit ${limits.eventLoopDelayP99Ms.limit} ms)${stamps}${gc}, coalesced events ${fmt(h.coalescedEventShare * 100, 1)}%${slip}${rates}`;
}

/** What the server counted, per request, when it differs from what was asked for. */
function servedTokens(summary: RunSummary, perRequest: (n: number) => number): string {
  const t = summary.tokens;
  const input = perRequest(t.input);
  const output = perRequest(t.output);
  if (input === perRequest(t.requestedInput) && output === perRequest(t.requestedOutput)) return '';
  return ` (server counted ${fmtNumber(input)} in / ${fmtNumber(output)} out)`;
}

/** The human summary of one run, as printed at its end. */
export function renderTerminalSummary(summary: RunSummary, options: TerminalOptions): string {
  const c = pc.createColors(options.color);
  const lines: string[] = [];
  const counted = summary.requests.completed + summary.requests.failed;
  // Nothing succeeded: the server's reasons are the whole story, and lead.
  const allFailed = nothingSucceeded([summary]);
  if (allFailed) {
    lines.push(
      c.red(`ALL ${fmtNumber(counted)} REQUESTS FAILED: nothing below is a measurement.`),
      ...errorKindLines(summary.requests).map((l) => c.red(`  ${l}`)),
    );
  }
  // The verdict comes first: every number below may be the client's, not the server's.
  // One line per cause, then the remedy once; the warnings below do not repeat it.
  const health = summary.clientHealth;
  if (health?.clientLimited) {
    lines.push(c.red("CLIENT-LIMITED: these numbers may be the client's, not the server's:"));
    for (const reason of health.reasons) lines.push(c.red(`  ${terminalSafe(reason)}`));
    lines.push(c.red(`  ${health.advice ?? 'use more --workers or another machine'}`));
  }
  const perRequest = (n: number) => (counted > 0 ? Math.round(n / counted) : 0);
  const facts = [
    describeLoad(summary),
    `${fmtNumber(counted)} requests`,
    // Only answered requests count tokens: with none, "0 in / 0 out" would read as a measurement.
    ...(allFailed
      ? []
      : [
          `${fmtNumber(perRequest(summary.tokens.requestedInput))} in / ${fmtNumber(perRequest(summary.tokens.requestedOutput))} out tokens${servedTokens(summary, perRequest)}`,
        ]),
  ];
  if (options.endpoint) facts.push(`${options.endpoint} endpoint`);
  // The model id, warnings and notes below may be server text: no escape sequences pass.
  if (options.model) facts.push(`model ${terminalSafe(options.model)}`);
  lines.push(c.bold(facts.join(', ')));
  if (options.simulator) lines.push(`Simulated server: ${terminalSafe(options.simulator)}`);
  const streams = streamsLine(summary);
  if (streams) lines.push(streams);
  if (summary.interrupted) lines.push(c.yellow('Interrupted: only finished requests are counted.'));
  lines.push('');

  const { latency } = summary;
  const rows: [string, Distribution][] = [
    [metricLabel('ttftMs'), latency.ttftMs],
    [metricLabel('itlMs', 'per token'), latency.itlMs],
    [metricLabel('tpotMs'), latency.tpotMs],
    [metricLabel('e2eMs'), latency.e2eMs],
  ];
  if (latency.chunkGapMs.count > 0 && summary.streaming.tokensPerEvent > 1.05) {
    rows.push([metricLabel('chunkGapMs'), latency.chunkGapMs]);
  }
  if (summary.load.mode === 'open') {
    rows.push(
      [metricLabel('queueDelayMs'), latency.queueDelayMs],
      [metricLabel('userTtftMs'), latency.userTtftMs],
    );
  }
  lines.push(terminalTable(LATENCY_COLUMNS, rows));
  const low = rows.some(([, d]) => d.lowConfidence?.includes('p99'));
  if (low) lines.push(c.dim('  ~ marks a percentile with too few samples to resolve it'));
  lines.push(...intervalLines(rows, c.dim));
  lines.push(...predictionLines(summary, rows));
  if (summary.until) lines.push(`  ${describeUntil(summary.until, summary.requests.completed)}`);
  lines.push('');

  const t = summary.throughput;
  const steady = describeSteadyState(summary);
  lines.push(
    `Throughput at ${describeLoad(summary)}, over ${fmt(summary.durationS, 1)} s:`,
    `  system       ${fmtNumber(t.outputTokensPerS, 1)} output tok/s, ${fmtNumber(t.totalTokensPerS, 1)} total tok/s, ${fmt(t.requestsPerS, 2)} req/s`,
    ...(t.prediction ? [`  predicted    ${throughputPrediction(summary)}`] : []),
    ...(steady ? [`  steady state ${steady}`] : []),
    `  per request  output speed mean ${fmtNumber(latency.outputSpeedTokS.mean, 1)} tok/s, p50 ${fmtNumber(latency.outputSpeedTokS.p50, 1)}, slowest ${fmtNumber(latency.outputSpeedTokS.min, 1)}`,
    `  input/decode input ${fmtNumber(t.inputTokensPerS, 1)} tok/s, decode ${fmtNumber(t.decodeTokensPerS, 1)} tok/s`,
  );
  const failed = summary.requests.failed;
  lines.push(
    `Requests: ${fmtNumber(summary.requests.completed)} completed, ${fmtNumber(failed)} failed${failed > 0 ? ` (${errorKindCounts(summary.requests)})` : ''}${summary.requests.warmup > 0 ? `, ${fmtNumber(summary.requests.warmup)} warm-up not counted` : ''}`,
  );
  if (failed > 0) {
    const adj = summary.latencyAdjusted.ttftMs;
    lines.push(
      `  TTFT p99 counting failures as never answered: ${adj.p99 === null ? 'infinite' : fmt(adj.p99, 1)}`,
    );
  }
  const connections = connectionsLine(summary);
  if (connections) lines.push(connections);
  if (summary.goodput) {
    const g = summary.goodput;
    lines.push(
      `Goodput (${g.slo}): ${fmt(g.requestsPerS, 2)} req/s, SLO attainment ${fmt(g.sloAttainment * 100, 1)}% (${fmtNumber(g.goodRequests)} of ${fmtNumber(counted)})`,
    );
  }
  const sessions = sessionFacts(summary, options.serverMetrics);
  if (sessions && summary.sessions) {
    lines.push(...sessions, terminalTable(TURN_COLUMNS, summary.sessions.turns));
  }
  const reasoning = describeReasoning(summary);
  if (reasoning) lines.push(`Reasoning: ${reasoning}`);
  const h = summary.clientHealth;
  if (h) {
    const verdict = clientHealthVerdict(h);
    const paint = h.clientLimited ? c.red : h.nearLimit || h.unmeasured ? c.yellow : c.green;
    lines.push(`Client health: ${describeClientHealth(h)}: ${paint(verdict)}`);
    for (const note of h.notes ?? []) lines.push(`  ${terminalSafe(note)}`);
  }
  const server = options.serverMetrics;
  if (server) {
    const { line, covered } = serverLine(server);
    // The server's token rates are throughputs too: they stand with their load.
    lines.push(line.includes('tok/s') ? `${line} (at ${describeLoad(summary)})` : line);
    const memory = server.memory && memoryLine(server.memory, covered);
    if (memory) lines.push(memory);
  }
  // Read as saved results are (a report of a hand-edited summary prints only what it knows).
  // Said when the run set it (emptied or primed); an uncontrolled cache that mattered is a
  // warning below (prefix_cache_uncontrolled, prefix_cache_hits), and one that did not is noise.
  const cacheState = readCacheState(summary.cacheState);
  if (cacheState && cacheState !== 'uncontrolled')
    lines.push(`Prefix cache at the start: ${cacheStatePhrase(cacheState, summary.prefixHitRate)}`);
  // The server's warnings join the run's (once: a caller may already have merged them).
  const warnings = [
    ...summary.warnings,
    ...(server?.warnings ?? []).filter((w) => !summary.warnings.some((s) => s.code === w.code)),
  ].filter((w) => !(w.code === 'client_limited' && health?.clientLimited));
  if (warnings.length > 0) {
    lines.push('Warnings:');
    const paint = { error: c.red, warning: c.yellow, info: (t: string) => t };
    for (const w of warnings) lines.push(paint[severityOf(w)](`  - ${terminalSafe(w.message)}`));
  }
  lines.push(validityLine(validityOf([...summary.warnings, ...(server?.warnings ?? [])]), c));
  if (options.outDir) lines.push(`Results: ${options.outDir}`);
  return lines.join('\n');
}

/** `Validity: CAUTION (output_short): ...`, the run's verdict, painted as it reads. */
export function validityLine(v: Validity, c: ReturnType<typeof pc.createColors>): string {
  const paint = v.verdict === 'valid' ? c.green : v.verdict === 'caution' ? c.yellow : c.red;
  const why =
    v.verdict === 'valid'
      ? 'no warning puts these numbers in doubt'
      : `the warnings above say why; ${v.verdict === 'invalid' ? "do not use these numbers as the server's" : 'read the numbers with them'}`;
  return `Validity: ${paint(terminalSafe(verdictPhrase(v)))}: ${why}`;
}

/**
 * Under the latency table, each row's p50 and p99 with their 95 % intervals, as `612 (588-641)`:
 * in the cells they would push the table past 80 columns, and so digits follow the figure's
 * size (0 from 1,000, 1 from 100, else 2). A side the samples cannot bound reads `open`; `*`
 * marks a row whose samples were correlated in time (the block bootstrap).
 */
function intervalLines(rows: [string, Distribution][], dim: (text: string) => string): string[] {
  const lines: string[] = [];
  const width = Math.max(...rows.map(([name]) => name.length));
  let bootstrap = false;
  let level = 0.95;
  for (const [name, d] of rows) {
    const shown = (['p50', 'p99'] as const).flatMap((key) => {
      const interval = d.intervals?.[key];
      if (!interval) return [];
      level = interval.level;
      const digits = Math.abs(d[key]) >= 1000 ? 0 : Math.abs(d[key]) >= 100 ? 1 : 2;
      const side = (v: number | null) => (v === null ? 'open' : fmt(v, digits));
      return [`${key} ${fmt(d[key], digits)} (${side(interval.low)}-${side(interval.high)})`];
    });
    if (shown.length === 0) continue;
    const correlated = d.intervals?.p50?.method === 'block-bootstrap';
    bootstrap ||= correlated;
    lines.push(`  ${name.padEnd(width)}  ${shown.join(', ')}${correlated ? ' *' : ''}`);
  }
  if (lines.length === 0) return [];
  return [
    `  ${fmt(level * 100, 0)}% intervals (docs/metrics.md, "Intervals"):`,
    ...lines,
    ...(bootstrap ? [dim('  * samples correlated in time: block bootstrap')] : []),
  ];
}

/**
 * Under the latency table, a calibrated simulated run's prediction intervals (metrics/runPrediction.ts)
 * as `p50 21.4 (19.8-23.3)`, the median (what the calibration fits) and p99, digits as
 * intervalLines gives them; led by what the range is and where it came from.
 */
function predictionLines(summary: RunSummary, rows: [string, Distribution][]): string[] {
  const p = summary.prediction;
  if (!p) return [];
  const width = Math.max(...rows.map(([name]) => name.length));
  const lines: string[] = [];
  for (const [name, d] of rows) {
    const range = d.prediction;
    if (!range || d.count === 0) continue;
    const shown = [`p50 ${predictedFigure(d.p50, range)}`];
    const p99 = range.statistics?.p99;
    if (p99) shown.push(`p99 ${predictedFigure(d.p99, p99)}`);
    lines.push(`  ${name.padEnd(width)}  ${shown.join(', ')}`);
  }
  if (lines.length === 0) return [];
  return [
    `  ${fmt(p.level * 100, 0)}% prediction intervals (calibration ${terminalSafe(p.calibration)}, ${fmtNumber(p.draws)} draws; p99 takes the median's scatter; docs/metrics.md, "Prediction intervals"):`,
    ...lines,
  ];
}

/** `21.4 (19.8-23.3)`: a predicted figure and its range, digits by its size. */
export function predictedFigure(value: number, range: { low: number; high: number }): string {
  const digits = Math.abs(value) >= 1000 ? 0 : Math.abs(value) >= 100 ? 1 : 2;
  return `${fmt(value, digits)} (${fmt(range.low, digits)}-${fmt(range.high, digits)})`;
}

/** The throughput line's prediction: output tok/s and req/s with their ranges, and the level. */
function throughputPrediction(summary: RunSummary): string {
  const t = summary.throughput;
  const p = t.prediction;
  if (!p) return '';
  const parts: string[] = [];
  if (p.outputTokensPerS) {
    parts.push(`${predictedFigure(t.outputTokensPerS, p.outputTokensPerS)} output tok/s`);
  }
  if (p.requestsPerS) parts.push(`${predictedFigure(t.requestsPerS, p.requestsPerS)} req/s`);
  return `${parts.join(', ')}: ${fmt(p.level * 100, 0)}% prediction intervals`;
}

/**
 * What `--until` came to: the target met (and whether it, not a cap, ended the run), or the cap
 * first, with the half-width reached. The target is the user's own text, printed back.
 */
export function describeUntil(u: UntilOutcome, completed: number): string {
  const reached =
    u.halfWidthMs === null
      ? 'an open interval (too few samples to bound it)'
      : `±${fmt(u.halfWidthMs, 2)} ms${u.relativeHalfWidth === null ? '' : ` (±${fmt(u.relativeHalfWidth * 100, 1)}%)`}`;
  const target = terminalSafe(u.target);
  if (u.stoppedAtRequests !== null) {
    return `until ${target}: met at ${fmtNumber(u.stoppedAtRequests)} requests, stopped sending; ${reached} over all ${fmtNumber(completed)}`;
  }
  return u.met
    ? `until ${target}: met only at the cap, ${reached} at ${fmtNumber(completed)} requests`
    : `until ${target}: NOT met, the cap came first: ${reached} at ${fmtNumber(completed)} requests`;
}

/** A latency row: its mean, percentiles (`~` where too few samples resolve them) and count. */
const stat = (
  label: string,
  key: 'mean' | 'p50' | 'p90' | 'p95' | 'p99' | 'max',
): Column<[string, Distribution]> => ({
  label,
  align: 'right',
  value: ([, d]) => {
    if (d.count === 0) return '-';
    const mark = key !== 'mean' && key !== 'p50' && key !== 'max' && d.lowConfidence?.includes(key);
    return `${mark ? '~' : ''}${fmt(d[key], 2)}`;
  },
});

const LATENCY_COLUMNS: Column<[string, Distribution]>[] = [
  { label: 'latency (ms)', align: 'left', value: ([name]) => name },
  stat('mean', 'mean'),
  stat('p50', 'p50'),
  stat('p90', 'p90'),
  stat('p95', 'p95'),
  stat('p99', 'p99'),
  stat('max', 'max'),
  { label: 'n', align: 'right', value: ([, d]) => fmtNumber(d.count) },
];

/** The terminal's latency cells: fixed digits, not grouped. */
function fmt(value: number, digits: number): string {
  return fmtNumber(value, digits, false);
}
