/**
 * llm-d's Benchmark Report (versions 0.2 and 0.2.1, YAML or JSON; schema and provenance in
 * test/fixtures/llm-d/README.md) read as a run. The report holds aggregate statistics only, so
 * the run is summary-only: no per-request records, no paired bootstrap.
 */
import { parse } from 'yaml';
import { z } from 'zod';
import { EXIT, InfergaugeError } from '../../errors.js';
import type { LoadSpec } from '../../load.js';
import { type Distribution, emptyDistribution } from '../../metrics/distribution.js';
import {
  type AdjustedPercentiles,
  type LatencySummary,
  type RunSummary,
  SUMMARY_SCHEMA_VERSION,
} from '../../metrics/summary.js';
import type { ForeignRun } from './types.js';

/** A report is a few kB to a few MB (time series included); anything larger is refused unread. */
export const MAX_LLMD_REPORT_BYTES = 32 * 1024 * 1024;

/**
 * A report nests about ten levels. The YAML parser recurses per level: thousands of levels
 * overflow its stack, and V8 has been seen to abort the process (out of memory compiling a
 * RegExp) after such overflows, so deeper documents are refused before parsing.
 */
export const MAX_LLMD_REPORT_DEPTH = 100;

/** The versions read: 0.2.1 is an additive superset of 0.2 (llm-d's README says so). */
const VERSIONS = ['0.2', '0.2.1'] as const;

/** Malformed, hostile or unsupported report: exit 2 (bad input), the reason and where. */
/**
 * The file's own text quoted in a message, cut short: a report's text is untrusted, shown where
 * it is shown with its control characters stripped (as the command line prints every error).
 */
const quoted = (text: string, max = 60) => (text.length > max ? `${text.slice(0, max)}...` : text);

export class LlmdReportError extends InfergaugeError {
  constructor(source: string, reason: string, code = 'IG_LLMD_REPORT_INVALID') {
    super(`${source}: not a readable llm-d Benchmark Report: ${reason}`, code, EXIT.invalidOptions);
  }
}

/** A number, or YAML's `.inf` (pydantic writes it; llm-d's examples say `concurrency: .inf`). */
const numberOrInfinity = z.union([
  z.number(),
  z.custom<number>((v) => v === Number.POSITIVE_INFINITY, 'expected a number or .inf'),
]);

const statistics = z.looseObject({
  units: z.string(),
  mean: z.number(),
  stddev: z.number().nullish(),
  min: z.number().nullish(),
  p50: z.number().nullish(),
  p90: z.number().nullish(),
  p95: z.number().nullish(),
  p99: z.number().nullish(),
  p99p9: z.number().nullish(),
  max: z.number().nullish(),
});
type Statistics = z.infer<typeof statistics>;

/** What is read of a report; the rest (observability, profiling, the stack's details) is not. */
const reportSchema = z.looseObject({
  version: z.enum(VERSIONS),
  run: z.looseObject({
    uid: z.string(),
    time: z
      .looseObject({
        start: z.string().nullish(),
        end: z.string().nullish(),
        duration: z.string().nullish(),
      })
      .nullish(),
  }),
  scenario: z
    .looseObject({
      stack: z
        .array(
          z.looseObject({
            standardized: z
              .looseObject({ model: z.looseObject({ name: z.string() }).nullish() })
              .nullish(),
          }),
        )
        .nullish(),
      load: z
        .looseObject({
          standardized: z
            .looseObject({
              tool: z.string(),
              tool_version: z.string(),
              stage: z.number().int().nullish(),
              rate_qps: numberOrInfinity.nullish(),
              concurrency: numberOrInfinity.nullish(),
            })
            .nullish(),
        })
        .nullish(),
    })
    .nullish(),
  results: z.looseObject({
    request_performance: z
      .looseObject({
        aggregate: z
          .looseObject({
            requests: z
              .looseObject({
                total: z.number().int().nonnegative(),
                failures: z.number().int().nonnegative().nullish(),
                incomplete: z.number().int().nonnegative().nullish(),
                input_length: statistics.nullish(),
                output_length: statistics.nullish(),
              })
              .nullish(),
            latency: z
              .looseObject({
                time_to_first_token: statistics.nullish(),
                normalized_time_per_output_token: statistics.nullish(),
                time_per_output_token: statistics.nullish(),
                inter_token_latency: statistics.nullish(),
                request_latency: statistics.nullish(),
              })
              .nullish(),
            throughput: z
              .looseObject({
                input_token_rate: statistics.nullish(),
                output_token_rate: statistics.nullish(),
                total_token_rate: statistics.nullish(),
                request_rate: statistics.nullish(),
              })
              .nullish(),
          })
          .nullish(),
      })
      .nullish(),
  }),
});
type Report = z.infer<typeof reportSchema>;

/**
 * A Benchmark Report by its content: a `version` and `run.uid` with `results` (0.2, 0.2.1,
 * later), or `scenario` with `metrics` (0.1). Any version is recognised, so that a version not
 * read is refused by name rather than taken for some other tool's file.
 */
export function isLlmdReport(value: unknown): boolean {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  if (typeof v.version !== 'string' && typeof v.version !== 'number') return false;
  const isObject = (x: unknown) => !!x && typeof x === 'object' && !Array.isArray(x);
  const run = v.run as Record<string, unknown> | undefined;
  return (
    (isObject(run) && typeof run?.uid === 'string' && isObject(v.results)) ||
    (isObject(v.scenario) && isObject(v.metrics))
  );
}

/**
 * How deep a YAML or JSON document nests, by one pass over its characters, without parsing:
 * the deepest flow bracket (`[`, `{`, outside quoted scalars) and, for block style, the widest
 * indentation in levels of two spaces. Both over-count rather than under-count for real
 * reports; an odd quote can hide brackets from it, and the parser's own error then stands.
 */
export function nestingDepth(text: string): number {
  let flow = 0;
  let deepestFlow = 0;
  let widestIndent = 0;
  let quote = '';
  let indent = 0;
  let atLineStart = true;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\n') {
      atLineStart = true;
      indent = 0;
      continue;
    }
    if (atLineStart && !quote) {
      if (c === ' ') {
        indent++;
        continue;
      }
      atLineStart = false;
      if (indent > widestIndent) widestIndent = indent;
    }
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = '';
      continue;
    }
    const before = i === 0 ? ' ' : text[i - 1];
    if ((c === '"' || c === "'") && ' \t:[{,-\n'.includes(before)) quote = c;
    else if (c === '#' && (before === ' ' || before === '\n' || i === 0)) {
      const end = text.indexOf('\n', i);
      i = end < 0 ? text.length : end - 1;
    } else if (c === '[' || c === '{') {
      flow++;
      if (flow > deepestFlow) deepestFlow = flow;
    } else if ((c === ']' || c === '}') && flow > 0) flow--;
  }
  return Math.max(deepestFlow, Math.ceil(widestIndent / 2));
}

/** What keeps a parsed document from being a report read here, in words; undefined if nothing. */
function whyNotReport(value: unknown): string | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return 'not a mapping with version, run and results';
  }
  const v = value as Record<string, unknown>;
  if (typeof v.version !== 'string' || !(VERSIONS as readonly string[]).includes(v.version)) {
    return v.version === undefined || v.version === null
      ? 'no version'
      : `version ${quoted(String(v.version))} is not read (versions ${VERSIONS.join(', ')} are)`;
  }
  const run = v.run as Record<string, unknown> | null | undefined;
  const missing = [
    ...(!run || typeof run !== 'object' || typeof run.uid !== 'string' ? ['run.uid'] : []),
    ...(!v.results || typeof v.results !== 'object' ? ['results'] : []),
  ];
  return missing.length > 0 ? `no ${missing.join(' or ')}` : undefined;
}

/** Each unit the schema allows for a metric, as a factor to infergauge's unit (ms, tokens/s, ...). */
const TIME_TO_MS: Record<string, number> = { s: 1000, ms: 1 };
const PER_TOKEN_TO_MS: Record<string, number> = { 's/token': 1000, 'ms/token': 1 };
const TOKEN_RATE: Record<string, number> = { 'tokens/s': 1 };
const REQUEST_RATE: Record<string, number> = { 'queries/s': 1 };
const QUANTITY: Record<string, number> = { count: 1 };

/** `PT1H2M3.5S` in seconds; undefined where the text is not an ISO 8601 time duration. */
export function isoDurationSeconds(text: string): number | undefined {
  const m =
    /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)S)?)?$/.exec(
      text,
    );
  if (!m || text === 'P' || text.endsWith('T')) return undefined;
  const [, d, h, min, s] = m.map((x) => (x === undefined ? 0 : Number(x)));
  return ((d as number) * 24 + (h as number)) * 3600 + (min as number) * 60 + (s as number);
}

export function readLlmdReport(text: string, source: string): ForeignRun {
  if (text.length > MAX_LLMD_REPORT_BYTES) {
    throw new LlmdReportError(
      source,
      `${text.length} characters, over the ${MAX_LLMD_REPORT_BYTES}-byte limit of a report`,
      'IG_LLMD_REPORT_TOO_LARGE',
    );
  }
  const depth = nestingDepth(text);
  if (depth > MAX_LLMD_REPORT_DEPTH) {
    throw new LlmdReportError(
      source,
      `nested over ${MAX_LLMD_REPORT_DEPTH} levels deep (a report has about ten)`,
      'IG_LLMD_REPORT_TOO_DEEP',
    );
  }
  let value: unknown;
  try {
    // JSON is YAML: one parser for both. Aliases are bounded (a billion-laughs file is refused).
    value = parse(text, { maxAliasCount: 1000, uniqueKeys: true });
  } catch (err) {
    throw new LlmdReportError(
      source,
      `not YAML or JSON (${quoted((err as Error).message.split('\n')[0], 160)})`,
    );
  }
  // `version: 0.2` unquoted is YAML's number 0.2: hand-edited reports say so; read it as '0.2'.
  const doc = value as { version?: unknown } | null;
  if (doc && typeof doc === 'object' && typeof doc.version === 'number') {
    doc.version = String(doc.version);
  }
  const why = whyNotReport(value);
  if (why !== undefined) throw new LlmdReportError(source, why);
  const checked = reportSchema.safeParse(value);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw new LlmdReportError(
      source,
      `${issue.path.map(String).join('.') || 'the document'}: ${issue.message}`,
    );
  }
  return toForeignRun(checked.data, source);
}

function toForeignRun(report: Report, source: string): ForeignRun {
  const where = (path: string, s: Statistics | null | undefined, units: Record<string, number>) => {
    if (!s) return undefined;
    // Own keys only: `units: constructor` must not find Object.prototype's.
    const factor = Object.hasOwn(units, s.units) ? units[s.units] : undefined;
    if (factor === undefined) {
      throw new LlmdReportError(
        source,
        `${path}: units ${quoted(s.units)} are not ${Object.keys(units).join(' or ')}`,
      );
    }
    return { s, factor };
  };
  const aggregate = report.results.request_performance?.aggregate;
  const requests = aggregate?.requests;
  const total = requests?.total ?? 0;
  const failed = (requests?.failures ?? 0) + (requests?.incomplete ?? 0);
  const completed = Math.max(0, total - failed);
  const base = 'results.request_performance.aggregate';
  const distribution = (
    path: string,
    s: Statistics | null | undefined,
    units: Record<string, number>,
  ): Distribution => {
    const read = where(`${base}.${path}`, s, units);
    if (!read) return emptyDistribution();
    const f = read.factor;
    const x = (v: number | null | undefined) => (typeof v === 'number' ? v * f : Number.NaN);
    return {
      count: completed,
      mean: read.s.mean * f,
      stddev: x(read.s.stddev),
      min: x(read.s.min),
      p50: x(read.s.p50),
      p90: x(read.s.p90),
      p95: x(read.s.p95),
      p99: x(read.s.p99),
      p99_9: x(read.s.p99p9),
      max: x(read.s.max),
    };
  };
  const lat = aggregate?.latency;
  const latency: LatencySummary = {
    ttftMs: distribution('latency.time_to_first_token', lat?.time_to_first_token, TIME_TO_MS),
    ttfcMs: emptyDistribution(),
    ttftcMs: emptyDistribution(),
    thinkingMs: emptyDistribution(),
    ttfbMs: emptyDistribution(),
    tpotMs: distribution(
      'latency.time_per_output_token',
      lat?.time_per_output_token,
      PER_TOKEN_TO_MS,
    ),
    itlMs: distribution('latency.inter_token_latency', lat?.inter_token_latency, PER_TOKEN_TO_MS),
    chunkGapMs: emptyDistribution(),
    e2eMs: distribution('latency.request_latency', lat?.request_latency, TIME_TO_MS),
    queueDelayMs: emptyDistribution(),
    userTtftMs: emptyDistribution(),
    userE2eMs: emptyDistribution(),
    maxStallMs: emptyDistribution(),
    outputSpeedTokS: emptyDistribution(),
    visibleOutputSpeedTokS: emptyDistribution(),
    prefillSpeedTokS: emptyDistribution(),
  };
  // Validated for its units even though the summary has no place for it.
  where(
    `${base}.latency.normalized_time_per_output_token`,
    lat?.normalized_time_per_output_token,
    PER_TOKEN_TO_MS,
  );
  const tp = aggregate?.throughput;
  const mean = (path: string, s: Statistics | null | undefined, units: Record<string, number>) => {
    const read = where(`${base}.throughput.${path}`, s, units);
    return read ? read.s.mean * read.factor : Number.NaN;
  };
  const inputLength = where(`${base}.requests.input_length`, requests?.input_length, QUANTITY);
  const outputLength = where(`${base}.requests.output_length`, requests?.output_length, QUANTITY);
  // The report keeps mean lengths, not totals: the totals are mean x completed, rounded.
  const inputTokens = inputLength ? Math.round(inputLength.s.mean * completed) : 0;
  const outputTokens = outputLength ? Math.round(outputLength.s.mean * completed) : 0;
  const requestsPerS = mean('request_rate', tp?.request_rate, REQUEST_RATE);
  const time = report.run.time;
  let durationS = time?.duration ? isoDurationSeconds(time.duration) : undefined;
  if (durationS === undefined && time?.start && time.end) {
    const span = (Date.parse(time.end) - Date.parse(time.start)) / 1000;
    if (Number.isFinite(span) && span >= 0) durationS = span;
  }
  if (durationS === undefined && requestsPerS > 0) durationS = completed / requestsPerS;
  const loadStd = report.scenario?.load?.standardized;
  const load = loadOf(loadStd?.rate_qps, loadStd?.concurrency);
  const none: AdjustedPercentiles = { p50: null, p90: null, p95: null, p99: null, p99_9: null };
  const summary: RunSummary = {
    schemaVersion: SUMMARY_SCHEMA_VERSION,
    load: { ...(load ?? { mode: 'closed', concurrency: Number.NaN }), meanConcurrency: Number.NaN },
    requests: { completed, failed, warmup: 0, errorsByKind: {} },
    durationS: durationS ?? Number.NaN,
    tokens: {
      input: inputTokens,
      output: outputTokens,
      requestedInput: inputTokens,
      requestedOutput: outputTokens,
    },
    throughput: {
      requestsPerS,
      outputTokensPerS: mean('output_token_rate', tp?.output_token_rate, TOKEN_RATE),
      inputTokensPerS: mean('input_token_rate', tp?.input_token_rate, TOKEN_RATE),
      totalTokensPerS: mean('total_token_rate', tp?.total_token_rate, TOKEN_RATE),
      // Output after each request's first token: the report does not say.
      decodeTokensPerS: Number.NaN,
    },
    latency,
    latencyAdjusted: { ttftMs: none, e2eMs: none },
    streaming: {
      tokensPerEvent: Number.NaN,
      outputTokensSource: {},
      tokenCountMismatches: 0,
      resentRequests: 0,
    },
    interrupted: false,
    warnings: [],
  };
  const tool = loadStd ? `${quoted(loadStd.tool)} ${quoted(loadStd.tool_version)}` : undefined;
  const notes = [
    'llm-d Benchmark Report: summary statistics only (no per-request data), so no paired bootstrap and no confidence intervals.',
    `Percentile definition, warm-up handling and whether failed requests are in the latencies are ${tool ? `${tool}'s` : "the load generator's"}, not stated in the report.`,
    "TPOT and ITL are as the load generator defines them (llm-d's schema says they may differ by tool).",
  ];
  if (load?.mode === 'open')
    notes.push('Arrival process not stated in the report: shown as Poisson.');
  if (requests?.incomplete)
    notes.push(`${requests.incomplete} incomplete requests counted as failed.`);
  if (!inputLength || !outputLength)
    notes.push('Token totals unknown: the report has no input or output lengths.');
  else notes.push('Token totals are mean length x completed requests, rounded.');
  if (loadStd?.stage !== undefined && loadStd.stage !== null)
    notes.push(`Stage ${loadStd.stage} of its run.`);
  const model = report.scenario?.stack
    ?.map((c) => c.standardized?.model?.name)
    .find((name): name is string => typeof name === 'string');
  const run: ForeignRun = {
    format: 'llm-d',
    formatVersion: report.version,
    source,
    summary,
    perRequest: false,
    notes,
  };
  if (model !== undefined) run.model = model;
  if (load) run.load = load;
  if (time?.start) run.startedAt = time.start;
  return run;
}

/** The load as the report states it: a rate is open loop, a concurrency alone closed loop. */
function loadOf(
  rate: number | null | undefined,
  concurrency: number | null | undefined,
): LoadSpec | undefined {
  const bounded =
    typeof concurrency === 'number' && Number.isFinite(concurrency) && concurrency >= 1;
  if (typeof rate === 'number' && Number.isFinite(rate) && rate > 0) {
    // The report's standardized load has no arrival process; LoadSpec needs one (a note says so).
    return {
      mode: 'open',
      rate,
      arrival: 'poisson',
      ...(bounded ? { maxConcurrency: concurrency } : {}),
    };
  }
  return bounded ? { mode: 'closed', concurrency } : undefined;
}
