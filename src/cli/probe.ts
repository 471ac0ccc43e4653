import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import Table from 'cli-table3';
import pc from 'picocolors';
import {
  type DecodeMeasurement,
  type DecodeModel,
  type DecodeRow,
  decodeMeasurement,
  decodeRows,
  doublingLengths,
  fitDecode,
  fitPrefill,
  type PrefillMeasurement,
  type PrefillModel,
  type PrefillRow,
  pointRequests,
  prefillMeasurement,
  prefillRows,
  QUADRATIC_SHARE,
} from '../analysis/probe.js';
import type { RequestSpec } from '../backends/types.js';
import { EXIT } from '../errors.js';
import type { RunSummary, Warning } from '../metrics/summary.js';
import { createPointRunner, type PointRunner } from '../session/point.js';
import { type PreparedRun, utcStamp } from '../session/target.js';
import { resolveEngineConfig } from '../sim/engineModel.js';
import { VERSION } from '../version.js';
import { streamSeed } from '../workload/distributions.js';
import { createPromptFactory, type PromptFactory } from '../workload/prompts.js';
import type { Scenario } from '../workload/scenarios.js';
import { addRunOptions, prepareRun, type RunOptions, withPlanFile } from './run.js';

type ProbeKind = 'prefill' | 'decode';

const DEFAULTS = {
  minInput: 128,
  maxInput: 8192,
  batches: [1, 4, 16],
  input: 64,
  output: 256,
  levels: [1, 2, 4, 8, 16, 32, 64],
  requestsPerPoint: 5,
} as const;

const PROBE_KEYS: Record<ProbeKind, readonly string[]> = {
  prefill: ['minInput', 'maxInput', 'batches', 'requestsPerPoint'],
  decode: ['input', 'output', 'levels', 'requestsPerPoint'],
};

/** Run options a probe sets itself at every point: given on the command line, they are errors. */
const SET_BY_PROBE: Record<string, string> = {
  concurrency: '--concurrency',
  rate: '--rate',
  arrival: '--arrival',
  burstiness: '--burstiness',
  rampUp: '--ramp-up',
  maxConcurrency: '--max-concurrency',
  trace: '--trace',
  traceSpeed: '--trace-speed',
  dataset: '--dataset',
  requests: '--requests',
  duration: '--duration',
  scenario: '--scenario',
  inputTokens: '--input-tokens',
  outputTokens: '--output-tokens',
  sharedPrefix: '--shared-prefix',
};

const INSTEAD: Record<ProbeKind, string> = {
  prefill: '--min-input, --max-input, --batches and --requests-per-point',
  decode: '--input, --output, --levels and --requests-per-point',
};

/** `infergauge probe prefill|decode`: TGI-benchmark-like probes over plain HTTP. */
export function probeCommand(): Command {
  return new Command('probe')
    .description(
      'Prefill and decode probes: TTFT against input length with a fitted prefill rate (probe prefill), per-step decode cost, ITL and decode tokens/s against concurrency (probe decode).',
    )
    .addCommand(prefillCommand())
    .addCommand(decodeCommand())
    .showHelpAfterError();
}

function prefillCommand(): Command {
  const command = addRunOptions(
    new Command('prefill').description(
      `TTFT against input length (max_tokens 1; inputs doubling from --min-input to --max-input) at batch 1 and a few batch sizes, with TTFT ~ a + n / rate fitted on batch 1: the fixed latency and the prefill tokens/s. Takes every option of run. Results: <out>/prefill/n<N>-b<B>/ and <out>/probe.json.`,
    ),
  )
    .option('--min-input <n>', `shortest input in tokens (default: ${DEFAULTS.minInput})`)
    .option(
      '--max-input <n>',
      `longest input, reached by doubling (default: ${DEFAULTS.maxInput}; the built-in simulator's max_model_len - 1 when shorter)`,
    )
    .option(
      '--batches <list>',
      `concurrent requests per point, e.g. 1,4,16 (default: ${DEFAULTS.batches.join(',')})`,
    )
    .option(
      '--requests-per-point <n>',
      `requests at each point; at batch B at least 2 x B, in whole batches (default: ${DEFAULTS.requestsPerPoint})`,
    );
  return command.action(async (options, cmd) => {
    process.exitCode = await probe('prefill', options as Record<string, unknown>, cmd);
  });
}

function decodeCommand(): Command {
  const command = addRunOptions(
    new Command('decode').description(
      'Decode speed against concurrency (short input, long output; closed loops at each level): ITL, TPOT, per-user and system decode tokens/s, with TPOT ~ a + b x concurrency fitted: a the per-step cost at batch 1. Takes every option of run. Results: <out>/decode/c<C>/ and <out>/probe.json.',
    ),
  )
    .option('--input <n>', `input tokens per request (default: ${DEFAULTS.input})`)
    .option('--output <n>', `output tokens per request, max_tokens (default: ${DEFAULTS.output})`)
    .option(
      '--levels <list>',
      `concurrency levels, e.g. 1,8,64 (default: ${DEFAULTS.levels.join(',')})`,
    )
    .option(
      '--requests-per-point <n>',
      `requests at each level; at level C at least 2 x C, in whole waves (default: ${DEFAULTS.requestsPerPoint})`,
    );
  return command.action(async (options, cmd) => {
    process.exitCode = await probe('decode', options as Record<string, unknown>, cmd);
  });
}

interface PrefillSettings {
  kind: 'prefill';
  lengths: number[];
  batches: number[];
  requestsPerPoint: number;
}

interface DecodeSettings {
  kind: 'decode';
  inputTokens: number;
  outputTokens: number;
  levels: number[];
  requestsPerPoint: number;
}

type Settings = PrefillSettings | DecodeSettings;

function parseSettings(
  kind: ProbeKind,
  o: Record<string, unknown>,
  maxModelLen: number | undefined,
  problems: string[],
): Settings {
  const whole = (flag: string, value: unknown, fallback: number, min = 1) => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) {
      problems.push(`${flag} must be a whole number >= ${min} (got "${String(value)}")`);
      return fallback;
    }
    return n;
  };
  const list = (flag: string, value: unknown, fallback: readonly number[]) => {
    if (value === undefined) return [...fallback];
    const items = String(value)
      .split(',')
      .map((v) => Number(v.trim()));
    if (items.some((n) => !Number.isInteger(n) || n < 1)) {
      problems.push(
        `${flag} must be whole numbers >= 1 separated by commas (got "${String(value)}")`,
      );
      return [...fallback];
    }
    return [...new Set(items)].sort((a, b) => a - b);
  };
  const requestsPerPoint = whole(
    '--requests-per-point',
    o.requestsPerPoint,
    DEFAULTS.requestsPerPoint,
  );
  const simulator =
    maxModelLen !== undefined ? `the simulator's max_model_len (${maxModelLen})` : '';
  if (kind === 'prefill') {
    const minInput = whole('--min-input', o.minInput, DEFAULTS.minInput);
    const longest = maxModelLen !== undefined ? maxModelLen - 1 : undefined;
    const maxInput = whole(
      '--max-input',
      o.maxInput,
      longest !== undefined ? Math.min(DEFAULTS.maxInput, longest) : DEFAULTS.maxInput,
    );
    if (maxInput < minInput) {
      problems.push(`--max-input (${maxInput}) is shorter than --min-input (${minInput})`);
    }
    if (longest !== undefined && maxInput > longest) {
      problems.push(
        `--max-input ${maxInput} and the one output token exceed ${simulator}: at most ${longest}, or raise --max-model-len`,
      );
    }
    return {
      kind,
      lengths: doublingLengths(minInput, Math.max(minInput, maxInput)),
      batches: list('--batches', o.batches, DEFAULTS.batches),
      requestsPerPoint,
    };
  }
  const inputTokens = whole('--input', o.input, DEFAULTS.input);
  const outputTokens = whole('--output', o.output, DEFAULTS.output, 2);
  if (maxModelLen !== undefined && inputTokens + outputTokens > maxModelLen) {
    problems.push(
      `--input ${inputTokens} + --output ${outputTokens} exceed ${simulator}: shorten them or raise --max-model-len`,
    );
  }
  return {
    kind,
    inputTokens,
    outputTokens,
    levels: list('--levels', o.levels, DEFAULTS.levels),
    requestsPerPoint,
  };
}

/** One measured point, with where its run went and what its summary warned about. */
interface PointRecord<M> {
  measurement: M;
  dir: string;
  warnings: Warning[];
}

async function probe(
  kind: ProbeKind,
  options: Record<string, unknown>,
  cmd: { getOptionValueSource(key: string): string | undefined },
): Promise<number> {
  const name = `probe ${kind}`;
  const merged = withPlanFile(options, cmd, name);
  if (!merged) return EXIT.invalidOptions;
  const problems: string[] = [];
  const warnings: string[] = [];
  const probeOptions: Record<string, unknown> = {};
  const runOptions: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(merged)) {
    if (PROBE_KEYS[kind].includes(key)) probeOptions[key] = value;
    else if (key in SET_BY_PROBE || key === 'planScenarios') {
      if (value === undefined) continue;
      if (cmd.getOptionValueSource(key) === 'cli') {
        problems.push(
          `${SET_BY_PROBE[key]} does not apply to probe ${kind}: it sets lengths and loads itself (${INSTEAD[kind]})`,
        );
      } else {
        warnings.push(
          `the plan file's ${key === 'planScenarios' ? 'scenarios' : SET_BY_PROBE[key]} ${key === 'planScenarios' ? 'are' : 'is'} ignored: probe ${kind} sets lengths and loads itself`,
        );
      }
    } else runOptions[key] = value;
  }
  const prepared = prepareRun(runOptions as RunOptions, 'probe');
  problems.push(...prepared.problems);
  const maxModelLen =
    prepared.engine && prepared.problems.length === 0
      ? resolveEngineConfig(prepared.engine).maxModelLen
      : undefined;
  const settings = parseSettings(kind, probeOptions, maxModelLen, problems);
  if (problems.length > 0 || !prepared.plan) {
    process.stderr.write(
      `infergauge ${name}: invalid options\n${problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return EXIT.invalidOptions;
  }
  for (const w of [...prepared.warnings, ...warnings]) {
    process.stderr.write(`infergauge ${name}: warning: ${w}\n`);
  }
  const plan = prepared.plan;
  const label = merged.label !== undefined ? String(merged.label) : `probe-${kind}`;
  const out = plan.out ?? join('infergauge-results', `${utcStamp()}-${label}`);
  if (existsSync(join(out, 'probe.json'))) {
    process.stderr.write(
      `infergauge ${name}: ${out} already holds a probe (probe.json); choose another --out\n`,
    );
    return EXIT.failure;
  }

  const stop = new AbortController();
  const onSignal = () => {
    if (!stop.signal.aborted) {
      process.stderr.write(`\ninfergauge ${name}: stopping after the requests in flight\n`);
    }
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let runner: PointRunner | undefined;
  try {
    mkdirSync(out, { recursive: true });
    const startedAt = new Date().toISOString();
    runner = await createPointRunner({ ...prepared, plan }, stop.signal);
    const prompts = await createPromptFactory(runner.tokenizer, {
      seed: streamSeed(plan.seed, 'probe-prompts'),
    });
    const overhead = prepared.simulate
      ? { tokens: 0 }
      : await promptOverhead(runner, prompts, join(out, 'calibration'), name);
    const requests = requestMaker(prompts, overhead.tokens, prepared.simulate);
    const context: ProbeContext = {
      name,
      runner,
      plan,
      out,
      requests,
      stop: stop.signal,
      progress: process.stderr.isTTY === true && !prepared.json,
    };
    const result =
      settings.kind === 'prefill'
        ? await prefillProbe(context, settings)
        : await decodeProbe(context, settings);
    const saved = {
      schemaVersion: 1,
      tool: { name: 'infergauge', version: VERSION },
      probe: kind,
      startedAt,
      server: {
        target: runner.description,
        model: runner.model,
        url: plan.url ?? 'built-in simulator',
        virtualTime: prepared.simulate,
        ...(prepared.timeScale !== undefined ? { timeScale: Number(prepared.timeScale) } : {}),
      },
      endpoint: plan.endpoint,
      tokenizer: runner.tokenizer.name,
      promptOverheadTokens: overhead.tokens,
      ...(overhead.note ? { promptOverheadNote: overhead.note } : {}),
      settings: settingsForJson(settings),
      points: result.points,
      fit: result.fit ?? null,
      interrupted: stop.signal.aborted,
    };
    writeFileSync(join(out, 'probe.json'), `${JSON.stringify(saved, null, 2)}\n`);
    printWarnings(name, result.points);
    if (prepared.json) process.stdout.write(`${JSON.stringify(saved, null, 2)}\n`);
    else {
      const color = process.stdout.isTTY === true;
      const text =
        result.kind === 'prefill'
          ? renderPrefill(result.points, result.fit, { runner, prepared, color })
          : renderDecode(result.points, result.fit, { runner, prepared, color });
      process.stdout.write(`${text}\nResults: ${out}\n`);
    }
    if (stop.signal.aborted) return EXIT.interrupted;
    if (!result.points.some((p) => p.completed > 0)) {
      process.stderr.write(`infergauge ${name}: no request completed; see ${out}\n`);
      return EXIT.failure;
    }
    return EXIT.ok;
  } catch (err) {
    process.stderr.write(`infergauge ${name}: ${(err as Error).message}\n`);
    return EXIT.failure;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await runner?.close();
  }
}

function settingsForJson(s: Settings): Record<string, unknown> {
  if (s.kind === 'prefill') {
    return {
      inputTokens: s.lengths,
      batches: s.batches,
      outputTokens: 1,
      requestsPerPoint: s.requestsPerPoint,
      requestsAtBatch: Object.fromEntries(
        s.batches.map((b) => [b, pointRequests(s.requestsPerPoint, b)]),
      ),
    };
  }
  return {
    inputTokens: s.inputTokens,
    outputTokens: s.outputTokens,
    levels: s.levels,
    requestsPerPoint: s.requestsPerPoint,
    requestsAtLevel: Object.fromEntries(
      s.levels.map((c) => [c, pointRequests(s.requestsPerPoint, c)]),
    ),
  };
}

type MakeRequest = (promptId: number, inputTokens: number, outputTokens: number) => RequestSpec;

/**
 * Requests of exactly `inputTokens` as the server counts them (its own overhead taken off the
 * content) and `outputTokens` max_tokens. Every prompt has an id of its own across the probe,
 * so a server's prefix cache never serves one prompt from another.
 */
function requestMaker(prompts: PromptFactory, overhead: number, virtual: boolean): MakeRequest {
  return (promptId, inputTokens, outputTokens) => {
    const content = Math.max(1, inputTokens - overhead);
    let text: string | undefined;
    return {
      get prompt(): string {
        text ??= prompts.make(promptId, content);
        return text;
      },
      // Virtual time counts one token per word: the count is known without building the text.
      ...(virtual ? { promptWords: content } : {}),
      requestedInputTokens: inputTokens,
      requestedOutputTokens: outputTokens,
    };
  };
}

/**
 * Tokens the server adds to every prompt (BOS, chat template): one 32-token request with
 * max_tokens 1, its usage against what was sent. 0 where the tokenizer is approximate or the
 * server reports no usage.
 */
async function promptOverhead(
  runner: PointRunner,
  prompts: PromptFactory,
  dir: string,
  name: string,
): Promise<{ tokens: number; note?: string }> {
  if (!runner.tokenizer.exact) return { tokens: 0, note: 'not measured: approximate tokenizer' };
  const probeTokens = 32;
  const { summary } = await runner.run({
    load: { mode: 'closed', concurrency: 1 },
    scenario: pointScenario('calibration', probeTokens, 1),
    requests: 1,
    dir,
    nextRequest: () => ({
      prompt: prompts.make(-1, probeTokens),
      requestedInputTokens: probeTokens,
      requestedOutputTokens: 1,
    }),
  });
  if (summary.requests.completed === 0) {
    return { tokens: 0, note: 'not measured: the calibration request failed' };
  }
  const tokens = Math.max(0, Math.round(summary.tokens.input - probeTokens));
  if (tokens > 0) {
    process.stderr.write(
      `infergauge ${name}: the server adds ${tokens} tokens to every prompt (BOS, template); prompts are shortened by as much\n`,
    );
  }
  return { tokens };
}

/** The scenario a point stands for (its requests come from the probe's own nextRequest). */
function pointScenario(name: string, input: number, output: number): Scenario {
  return {
    name,
    input: { kind: 'fixed', value: input },
    output: { kind: 'fixed', value: output },
  };
}

interface ProbeContext {
  name: string;
  runner: PointRunner;
  plan: NonNullable<PreparedRun['plan']>;
  out: string;
  requests: MakeRequest;
  stop: AbortSignal;
  progress: boolean;
}

type PrefillPoint = PrefillRow & { dir: string; warnings: Warning[] };
type DecodePoint = DecodeRow & { dir: string; warnings: Warning[] };

type ProbeResult =
  | { kind: 'prefill'; points: PrefillPoint[]; fit: PrefillModel | undefined }
  | { kind: 'decode'; points: DecodePoint[]; fit: DecodeModel | undefined };

/** Runs one closed-loop point and returns its summary; prompt ids continue across points. */
async function runPoint(
  c: ProbeContext,
  o: {
    concurrency: number;
    requests: number;
    input: number;
    output: number;
    dir: string;
    label: string;
  },
  nextPromptId: { value: number },
): Promise<RunSummary> {
  if (c.progress) process.stderr.write(`${o.label} (${o.requests} requests)...\n`);
  const base = nextPromptId.value;
  nextPromptId.value += o.requests + c.plan.warmupRequests;
  const { summary } = await c.runner.run({
    load: { mode: 'closed', concurrency: o.concurrency },
    scenario: pointScenario(o.label, o.input, o.output),
    requests: o.requests,
    warmupRequests: c.plan.warmupRequests,
    dir: join(c.out, o.dir),
    nextRequest: (id) => c.requests(base + id, o.input, o.output),
  });
  return summary;
}

function failureNote(summary: RunSummary): string {
  const kinds = Object.entries(summary.requests.errorsByKind)
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  return kinds || 'no response';
}

async function prefillProbe(c: ProbeContext, s: PrefillSettings): Promise<ProbeResult> {
  const records: PointRecord<PrefillMeasurement>[] = [];
  const promptId = { value: 0 };
  outer: for (const batch of s.batches) {
    for (const n of s.lengths) {
      if (c.stop.aborted) break outer;
      const dir = join('prefill', `n${n}-b${batch}`);
      const summary = await runPoint(
        c,
        {
          concurrency: batch,
          requests: pointRequests(s.requestsPerPoint, batch),
          input: n,
          output: 1,
          dir,
          label: `prefill: ${n} input tokens at batch ${batch}`,
        },
        promptId,
      );
      records.push({
        measurement: prefillMeasurement(summary, n, batch),
        dir,
        warnings: summary.warnings,
      });
      if (summary.requests.completed === 0 && !summary.interrupted && !c.stop.aborted) {
        const longer = s.lengths.filter((l) => l > n);
        process.stderr.write(
          `infergauge ${c.name}: every request of ${n} input tokens at batch ${batch} failed (${failureNote(summary)})${longer.length > 0 ? `; longer inputs skipped at this batch (is --max-input above the server's max_model_len - 1?)` : ''}\n`,
        );
        break;
      }
    }
  }
  const measurements = records.map((r) => r.measurement);
  const points = prefillRows(measurements).map((row) => {
    const r = records.find(
      (x) => x.measurement.inputTokens === row.inputTokens && x.measurement.batch === row.batch,
    ) as PointRecord<PrefillMeasurement>;
    return { ...row, dir: r.dir, warnings: r.warnings };
  });
  return { kind: 'prefill', points, fit: fitPrefill(measurements) };
}

async function decodeProbe(c: ProbeContext, s: DecodeSettings): Promise<ProbeResult> {
  const records: PointRecord<DecodeMeasurement>[] = [];
  const promptId = { value: 0 };
  for (const level of s.levels) {
    if (c.stop.aborted) break;
    const dir = join('decode', `c${level}`);
    const summary = await runPoint(
      c,
      {
        concurrency: level,
        requests: pointRequests(s.requestsPerPoint, level),
        input: s.inputTokens,
        output: s.outputTokens,
        dir,
        label: `decode: concurrency ${level}`,
      },
      promptId,
    );
    records.push({
      measurement: decodeMeasurement(summary, level),
      dir,
      warnings: summary.warnings,
    });
    if (summary.requests.completed === 0 && !summary.interrupted && !c.stop.aborted) {
      process.stderr.write(
        `infergauge ${c.name}: every request at concurrency ${level} failed (${failureNote(summary)}); higher levels skipped\n`,
      );
      break;
    }
  }
  const measurements = records.map((r) => r.measurement);
  const points = decodeRows(measurements).map((row) => {
    const r = records.find(
      (x) => x.measurement.concurrency === row.concurrency,
    ) as PointRecord<DecodeMeasurement>;
    return { ...row, dir: r.dir, warnings: r.warnings };
  });
  return { kind: 'decode', points, fit: fitDecode(measurements) };
}

/** Each kind of warning once, with the first point that raised it. */
function printWarnings(name: string, points: { dir: string; warnings: Warning[] }[]): void {
  const seen = new Map<string, { dir: string; message: string; count: number }>();
  for (const p of points) {
    for (const w of p.warnings) {
      // A few requests per point is the design: p99 over them is their slowest (in probe.json).
      if (w.code === 'low_sample') continue;
      const first = seen.get(w.code);
      if (first) first.count++;
      else seen.set(w.code, { dir: p.dir, message: w.message, count: 1 });
    }
  }
  for (const { dir, message, count } of seen.values()) {
    const more = count > 1 ? ` (and ${count - 1} more point${count > 2 ? 's' : ''})` : '';
    process.stderr.write(`infergauge ${name}: warning: ${dir}: ${message}${more}\n`);
  }
}

// ---- rendering ----

const num = (n: number | undefined, digits = 0) =>
  n === undefined || !Number.isFinite(n)
    ? '-'
    : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** Three significant digits with thousands separators: 24,300 tok/s. */
const sig3 = (n: number) =>
  Number.isFinite(n) ? Number(n.toPrecision(3)).toLocaleString('en-US') : '-';

/** Milliseconds: one decimal from 1 ms up, three significant digits below. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  return Math.abs(ms) >= 1 ? ms.toFixed(1) : Number(ms.toPrecision(3)).toString();
}

/** "TTFT ~ 31.2 ms + n / 24,300 tok/s (r2 0.9981, batch 1, 128-8,191 tokens)", and the parabola. */
export function formatPrefillModel(m: PrefillModel): string[] {
  const n = m.batch === 1 ? 'n' : `n x ${m.batch}`;
  const n2 = m.batch === 1 ? 'n²' : `(n x ${m.batch})²`;
  const range = `${num(m.tokens.min)}-${num(m.tokens.max)} tokens${m.batch === 1 ? '' : ' per batch'}`;
  const lines = [
    `TTFT ~ ${formatMs(m.fixedMs)} ms + ${n} / ${sig3(m.tokensPerS)} tok/s (r2 ${m.r2.toFixed(4)}, batch ${m.batch}, ${range}): fixed latency ${formatMs(m.fixedMs)} ms, prefill ${sig3(m.tokensPerS)} tok/s`,
  ];
  const q = m.quadratic;
  if (q) {
    const share = `${(q.shareAtMax * 100).toFixed(1)}% of TTFT at ${num(m.tokens.max)} tokens`;
    lines.push(
      `TTFT ~ ${formatMs(q.fixedMs)} ms + ${n} x ${q.msPerToken.toPrecision(3)} ms + ${n2} x ${q.msPerToken2.toPrecision(3)} ms (r2 ${q.r2.toFixed(4)}): ${
        q.matters
          ? `the quadratic term (attention) matters, ${share}; the linear rate averages over the range`
          : q.msPerToken2 <= 0 || q.msPerToken <= 0
            ? 'no clear quadratic term (a coefficient is not positive: noise, or no attention cost to see)'
            : q.shareAtMax < QUADRATIC_SHARE
              ? `the quadratic term is negligible (${share})`
              : `no clear quadratic term (${share}, but the parabola fits little better than the line)`
      }`,
    );
  }
  return lines;
}

/** "TPOT ~ 7.1 ms + 0.021 ms x concurrency (r2 0.9990, concurrency 1-64)". */
export function formatDecodeModel(m: DecodeModel): string {
  return `TPOT ~ ${formatMs(m.stepMs)} ms + ${formatMs(m.perSequenceMs)} ms x concurrency (r2 ${m.r2.toFixed(4)}, concurrency ${m.concurrency.min}-${m.concurrency.max}): per-step cost at batch 1 ${formatMs(m.stepMs)} ms, each further sequence adds ${formatMs(m.perSequenceMs)} ms`;
}

interface RenderContext {
  runner: PointRunner;
  prepared: PreparedRun;
  color: boolean;
}

const TABLE_STYLE = {
  style: { head: [], border: [] },
  chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
};

function timeScaleNote(prepared: PreparedRun): string {
  const x = prepared.timeScale;
  return x !== undefined
    ? `; the simulator ran at time scale ${x}, so times are ${x}x its modelled ones and rates 1/${x} of them`
    : '';
}

export function renderPrefill(
  points: PrefillPoint[],
  fit: PrefillModel | undefined,
  r: RenderContext,
): string {
  const c = r.color ? pc : pc.createColors(false);
  const counted = points.some((p) => Math.abs(p.countedInputTokens - p.inputTokens) >= 0.5);
  const head = [
    'input',
    ...(counted ? ['counted'] : []),
    'batch',
    'measured',
    'TTFT p50',
    'TTFT p99',
    'TTFT mean',
    'prefill tok/s',
    'failed',
  ];
  const table = new Table({ head, colAligns: Array(head.length).fill('right'), ...TABLE_STYLE });
  for (const p of points) {
    table.push([
      num(p.inputTokens),
      ...(counted ? [num(p.countedInputTokens, 1)] : []),
      p.batch,
      num(p.meanConcurrency, 1),
      num(p.ttftP50Ms, 1),
      num(p.ttftP99Ms, 1),
      num(p.ttftMeanMs, 1),
      num(p.prefillTokensPerS),
      p.failed > 0 ? c.red(String(p.failed)) : '0',
    ]);
  }
  const lines = [
    c.bold(`Prefill probe (max_tokens 1, ${r.prepared.plan?.endpoint}): ${r.runner.description}`),
    '',
    table.toString(),
    `(input tokens per request; latency in ms, p99 of a few requests is about their slowest; prefill tok/s: input tokens per second at that batch (its measured concurrency beside it), input x batch / mean TTFT when a batch runs in lockstep; TTFT includes the fixed latency of HTTP and the server's front end${timeScaleNote(r.prepared)})`,
    '',
  ];
  if (fit) lines.push(...formatPrefillModel(fit).map((l, i) => (i === 0 ? c.bold(l) : l)));
  else lines.push(c.yellow('No fit: it needs two input lengths with completed requests.'));
  return lines.join('\n');
}

export function renderDecode(
  points: DecodePoint[],
  fit: DecodeModel | undefined,
  r: RenderContext,
): string {
  const c = r.color ? pc : pc.createColors(false);
  const head = [
    'concurrency',
    'measured',
    'ITL p50',
    'ITL p99',
    'TPOT mean',
    'per-user tok/s',
    'system tok/s',
    'out tokens',
    'failed',
  ];
  const table = new Table({ head, colAligns: Array(head.length).fill('right'), ...TABLE_STYLE });
  for (const p of points) {
    table.push([
      p.concurrency,
      num(p.meanConcurrency, 1),
      num(p.itlP50Ms, 2),
      num(p.itlP99Ms, 2),
      num(p.tpotMeanMs, 2),
      num(p.perUserTokensPerS, 1),
      num(p.systemTokensPerS),
      num(p.outputTokensMean, 1),
      p.failed > 0 ? c.red(String(p.failed)) : '0',
    ]);
  }
  const lines = [
    c.bold(`Decode probe (closed loops, ${r.prepared.plan?.endpoint}): ${r.runner.description}`),
    '',
    table.toString(),
    `(latency in ms, p99 of a few requests is about their slowest; per-user tok/s = 1000 / mean TPOT; system decode tok/s = measured concurrency x per-user tok/s; out tokens: mean per request${timeScaleNote(r.prepared)})`,
    '',
  ];
  if (fit) lines.push(c.bold(formatDecodeModel(fit)));
  else lines.push(c.yellow('No fit: it needs two concurrency levels with completed requests.'));
  return lines.join('\n');
}
