/**
 * The probe profiles: prefill (TTFT against input length, at a few batch sizes) and decode
 * (ITL and TPOT against concurrency). Every request is shaped by the probe itself, with a
 * prompt id of its own across the probe.
 */
import { join } from 'node:path';
import {
  decodeMeasurement,
  decodeRows,
  doublingLengths,
  fitDecode,
  fitPrefill,
  pointRequests,
  prefillMeasurement,
  prefillRows,
} from '../../analysis/probe.js';
import type { RequestSpec } from '../../backends/types.js';
import { EXIT } from '../../errors.js';
import { checkedFlagNumber, parseFlagList } from '../../flagNumber.js';
import { concurrencyBoundProblem, MAX_CONCURRENCY } from '../../load.js';
import type { RunSummary, Warning } from '../../metrics/summary.js';
import type { RunPlan } from '../../plan/runPlan.js';
import { errorKindLines } from '../../report/failures.js';
import type { DecodePoint, PrefillPoint } from '../../report/probeText.js';
import { hasResult, writeResult } from '../../results/layout.js';
import { resolveEngineConfig } from '../../sim/engineModel.js';
import { VERSION } from '../../version.js';
import { promptStreamSeed } from '../../workload/promptSalt.js';
import { createPromptFactory, type PromptFactory } from '../../workload/prompts.js';
import type { SessionEvents } from '../events.js';
import { createPointRunner, type Point } from '../point.js';
import { prepareRun, type RunOptions } from '../prepare.js';
import { fromPlan, inSession, resultsRoot, type SessionHooks, sessionOutputs } from '../session.js';
import { type PreparedRun, randomPromptSalt } from '../target.js';
import { PROBE_DEFAULTS } from './defaults.js';
import { fixedScenario, type Profile, runProfile } from './profile.js';

export type ProbeKind = 'prefill' | 'decode';

export interface PrefillSettings {
  kind: 'prefill';
  lengths: number[];
  batches: number[];
  requestsPerPoint: number;
}

export interface DecodeSettings {
  kind: 'decode';
  inputTokens: number;
  outputTokens: number;
  levels: number[];
  requestsPerPoint: number;
}

export type ProbeSettings = PrefillSettings | DecodeSettings;

/** Options of the probe itself; the rest are run options. */
const PROBE_KEYS: Record<ProbeKind, readonly string[]> = {
  prefill: ['minInput', 'maxInput', 'batches', 'requestsPerPoint'],
  decode: ['inputTokens', 'outputTokens', 'input', 'output', 'levels', 'requestsPerPoint'],
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
  traceWindow: '--trace-window',
  traceMaxGapS: '--trace-max-gap-s',
  traceBlockTokens: '--trace-block-tokens',
  dataset: '--dataset',
  requests: '--requests',
  duration: '--duration',
  scenario: '--scenario',
  inputTokens: '--input-tokens',
  outputTokens: '--output-tokens',
  sharedPrefix: '--shared-prefix',
  prefixHitRate: '--prefix-hit-rate',
};

const INSTEAD: Record<ProbeKind, string> = {
  prefill: '--min-input, --max-input, --batches and --requests-per-point',
  decode: '--input-tokens, --output-tokens, --levels and --requests-per-point',
};

/**
 * A probe's settings and the run's plan from the command's options (a plan file's under the
 * command line's): the probe's own options, run options it sets itself refused when given on
 * the command line (`fromCli`) and ignored with a warning from a plan file, the rest a run's.
 */
export function prepareProbe(
  kind: ProbeKind,
  options: Record<string, unknown>,
  fromCli: (key: string) => boolean,
): { settings: ProbeSettings; prepared: PreparedRun; problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  const probeOptions: Record<string, unknown> = {};
  const runOptions: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    const given = fromCli(key);
    // A plan file's lengths are a run's (distributions): the probe sets its own.
    if (PROBE_KEYS[kind].includes(key) && (given || !(key in SET_BY_PROBE))) {
      probeOptions[key] = value;
    } else if (key in SET_BY_PROBE || key === 'planScenarios') {
      if (value === undefined) continue;
      if (given) {
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
  const settings = probeSettings(kind, probeOptions, maxModelLen, problems);
  return { settings, prepared, problems, warnings: [...prepared.warnings, ...warnings] };
}

/**
 * A probe's settings from its options. Decode lengths are `inputTokens`/`outputTokens`, or
 * their old names `input`/`output`; problems name the flag that was given.
 */
export function probeSettings(
  kind: ProbeKind,
  o: Record<string, unknown>,
  maxModelLen: number | undefined,
  problems: string[],
): ProbeSettings {
  const whole = (flag: string, value: unknown, fallback: number, min = 1) =>
    checkedFlagNumber(
      value,
      { min, integer: true },
      problems,
      `${flag} must be a whole number >= ${min} (got "${String(value)}")`,
    ) ?? fallback;
  const list = (flag: string, value: unknown, fallback: readonly number[]) => {
    if (value === undefined) return [...fallback];
    const items = parseFlagList(value, { min: 1, integer: true });
    // Both lists are requests in flight: one client holds no more than MAX_CONCURRENCY.
    const over = items?.find((n) => n > MAX_CONCURRENCY);
    if (over !== undefined) problems.push(`${flag} ${concurrencyBoundProblem(over)}`);
    if (items) return items;
    problems.push(
      `${flag} must be whole numbers >= 1 separated by commas (got "${String(value)}")`,
    );
    return [...fallback];
  };
  const requestsPerPoint = whole(
    '--requests-per-point',
    o.requestsPerPoint,
    PROBE_DEFAULTS.requestsPerPoint,
  );
  const simulator =
    maxModelLen !== undefined ? `the simulator's max_model_len (${maxModelLen})` : '';
  if (kind === 'prefill') {
    const minInput = whole('--min-input', o.minInput, PROBE_DEFAULTS.minInput);
    const longest = maxModelLen !== undefined ? maxModelLen - 1 : undefined;
    const maxInput = whole(
      '--max-input',
      o.maxInput,
      longest !== undefined ? Math.min(PROBE_DEFAULTS.maxInput, longest) : PROBE_DEFAULTS.maxInput,
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
      batches: list('--batches', o.batches, PROBE_DEFAULTS.batches),
      requestsPerPoint,
    };
  }
  const inputFlag =
    o.inputTokens === undefined && o.input !== undefined ? '--input' : '--input-tokens';
  const outputFlag = '--output-tokens';
  const inputTokens = whole(inputFlag, o.inputTokens ?? o.input, PROBE_DEFAULTS.input);
  const outputTokens = whole(outputFlag, o.outputTokens, PROBE_DEFAULTS.output, 2);
  if (maxModelLen !== undefined && inputTokens + outputTokens > maxModelLen) {
    problems.push(
      `${inputFlag} ${inputTokens} + ${outputFlag} ${outputTokens} exceed ${simulator}: shorten them or raise --max-model-len`,
    );
  }
  return {
    kind,
    inputTokens,
    outputTokens,
    levels: list('--levels', o.levels, PROBE_DEFAULTS.levels),
    requestsPerPoint,
  };
}

/** probe.json's `settings`: what each point was asked for. */
function settingsForJson(s: ProbeSettings): Record<string, unknown> {
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

export type ProbeResult =
  | { kind: 'prefill'; points: PrefillPoint[]; fit: ReturnType<typeof fitPrefill> }
  | { kind: 'decode'; points: DecodePoint[]; fit: ReturnType<typeof fitDecode> };

export interface ProbeHooks {
  /** A line before each point runs (for a terminal watching it). */
  progress?: (line: string) => void;
  /** Notes for the user: the prompt overhead, points where every request failed. */
  note: (message: string) => void;
}

export interface ProbeOutcome {
  /** The results directory. */
  root: string;
  result: ProbeResult;
  /** probe.json as written into `root`. */
  saved: Record<string, unknown>;
  target: string;
  /** Every point's summary, for --threshold. */
  summaries: { name: string; summary: RunSummary }[];
  code: number;
}

/**
 * Runs a probe against the plan's target as one session: its points and probe.json in the
 * plan's --out (which must not hold a probe yet), or a new results directory named `label`.
 */
export async function runProbe(
  prepared: PreparedRun & { plan: RunPlan },
  settings: ProbeSettings,
  label: string,
  hooks: ProbeHooks & SessionHooks & { stop: AbortSignal },
): Promise<ProbeOutcome> {
  const { plan } = prepared;
  // Drawn before the session's manifest is written, so that it records the salt too.
  plan.promptSalt ??= randomPromptSalt();
  const out = resultsRoot(plan.out, label, hooks.save !== false);
  if (hasResult(out, 'probe')) {
    throw new Error(`${out} already holds a probe (probe.json); choose another --out`);
  }
  const session = {
    command: `probe ${settings.kind}`,
    kind: 'probe' as const,
    root: out,
    ...fromPlan(plan),
    ...sessionOutputs(hooks),
    onNotice: hooks.note,
  };
  return inSession(session, (s) => probeSession(prepared, settings, out, s, hooks));
}

async function probeSession(
  prepared: PreparedRun & { plan: RunPlan },
  settings: ProbeSettings,
  out: string,
  session: SessionEvents,
  hooks: ProbeHooks & { stop: AbortSignal },
): Promise<ProbeOutcome> {
  const { plan } = prepared;
  const { stop } = hooks;
  const startedAt = new Date().toISOString();
  const runner = await createPointRunner(prepared, session, stop, hooks.note);
  const summaries: ProbeOutcome['summaries'] = [];
  const measure: Pick<typeof runner, 'run'> = {
    run: async (point) => {
      const measured = await runner.run(point);
      // The calibration request is not a point of the probe: thresholds judge the probe's own.
      if (point.scenario.name !== 'calibration') {
        summaries.push({ name: point.scenario.name, summary: measured.summary });
      }
      return measured;
    },
  };
  try {
    // The salt was drawn as the target opened (createPointRunner); every probe prompt has an id
    // of its own, so one salted stream serves all its points.
    const prompts = await createPromptFactory(runner.tokenizer, {
      seed: promptStreamSeed(plan.seed, plan.promptSalt ?? 0, 'probe-prompts'),
    });
    const context: ProbeContext = { plan, out, prompts, virtual: prepared.simulate, stop, hooks };
    const { result, overhead } = await runProfile(probeProfile(context, settings), measure, stop);
    const saved = {
      schemaVersion: 1,
      tool: { name: 'infergauge', version: VERSION },
      probe: settings.kind,
      startedAt,
      server: {
        target: runner.description,
        model: runner.model,
        url: plan.url ?? 'built-in simulator',
        virtualTime: prepared.simulate,
        ...(prepared.timeScale !== undefined ? { timeScale: prepared.timeScale } : {}),
      },
      endpoint: plan.endpoint,
      tokenizer: runner.tokenizer.name,
      promptOverheadTokens: overhead.tokens,
      ...(overhead.note ? { promptOverheadNote: overhead.note } : {}),
      settings: settingsForJson(settings),
      points: result.points,
      fit: result.fit ?? null,
      interrupted: stop.aborted,
    };
    writeResult(out, 'probe', saved);
    const code = stop.aborted ? EXIT.interrupted : EXIT.ok;
    return { root: out, result, saved, target: runner.description, summaries, code };
  } finally {
    await runner.close();
  }
}

interface ProbeContext {
  plan: RunPlan;
  out: string;
  prompts: PromptFactory;
  /** Virtual time: no prompt overhead to measure, prompts counted in words. */
  virtual: boolean;
  /** Only to tell a point cut short by the stop from one that failed. */
  stop: AbortSignal;
  hooks: ProbeHooks;
}

/** The prompt overhead (once, on the first point), then the probe's own points. */
async function* probeProfile(
  c: ProbeContext,
  s: ProbeSettings,
): Profile<{ result: ProbeResult; overhead: PromptOverhead }> {
  const overhead = c.virtual ? { tokens: 0 } : yield* calibration(c);
  const requests = requestMaker(c.prompts, overhead.tokens, c.virtual);
  const result =
    s.kind === 'prefill'
      ? yield* prefillProfile(c, s, requests)
      : yield* decodeProfile(c, s, requests);
  return { result, overhead };
}

type PromptOverhead = { tokens: number; note?: string };

/**
 * Tokens the server adds to every prompt (BOS, chat template): one 32-token request with
 * max_tokens 1, its usage against what was sent, in `<out>/calibration`. 0 where the tokenizer
 * is approximate or the server reports no usage.
 */
async function* calibration(c: ProbeContext): Profile<PromptOverhead> {
  if (!c.prompts.tokenizer.exact) return { tokens: 0, note: 'not measured: approximate tokenizer' };
  const probeTokens = 32;
  const result = yield {
    load: { mode: 'closed', concurrency: 1 },
    scenario: fixedScenario('calibration', probeTokens, 1),
    requests: 1,
    dir: join(c.out, 'calibration'),
    nextRequest: () => ({
      prompt: c.prompts.make(-1, probeTokens),
      requestedInputTokens: probeTokens,
      requestedOutputTokens: 1,
    }),
  };
  if (!result || result.summary.requests.completed === 0) {
    return { tokens: 0, note: 'not measured: the calibration request failed' };
  }
  const tokens = Math.max(0, Math.round(result.summary.tokens.input - probeTokens));
  if (tokens > 0) {
    c.hooks.note(
      `the server adds ${tokens} tokens to every prompt (BOS, template); prompts are shortened by as much`,
    );
  }
  return { tokens };
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

/** Closed-loop points whose prompt ids continue from one point to the next. */
function pointMaker(c: ProbeContext, requests: MakeRequest) {
  let nextPromptId = 0;
  return (o: {
    concurrency: number;
    requests: number;
    input: number;
    output: number;
    dir: string;
    label: string;
  }): Point => {
    // The stop is seen here before the driver does: no line for a point that will not run.
    if (!c.stop.aborted) c.hooks.progress?.(`${o.label} (${o.requests} requests)...\n`);
    const base = nextPromptId;
    nextPromptId += o.requests + c.plan.warmupRequests;
    return {
      load: { mode: 'closed', concurrency: o.concurrency },
      scenario: fixedScenario(o.label, o.input, o.output),
      requests: o.requests,
      warmupRequests: c.plan.warmupRequests,
      dir: join(c.out, o.dir),
      nextRequest: (id) => requests(base + id, o.input, o.output),
    };
  };
}

/** One measured point, with where its run went and what its summary warned about. */
type Measured<M> = { measurement: M; dir: string; warnings: Warning[] };

/** Every request failed, and not because the probe was stopped. */
function allFailed(c: ProbeContext, summary: RunSummary): boolean {
  return summary.requests.completed === 0 && !summary.interrupted && !c.stop.aborted;
}

function failureNote(summary: RunSummary): string {
  return errorKindLines(summary.requests).join('; ') || 'no response';
}

/** Each batch size over the input lengths; a length where every request fails ends the batch. */
async function* prefillProfile(
  c: ProbeContext,
  s: PrefillSettings,
  requests: MakeRequest,
): Profile<ProbeResult> {
  const pointAt = pointMaker(c, requests);
  const measured: Measured<ReturnType<typeof prefillMeasurement>>[] = [];
  outer: for (const batch of s.batches) {
    for (const n of s.lengths) {
      const dir = join('prefill', `n${n}-b${batch}`);
      const result = yield pointAt({
        concurrency: batch,
        requests: pointRequests(s.requestsPerPoint, batch),
        input: n,
        output: 1,
        dir,
        label: `prefill: ${n} input tokens at batch ${batch}`,
      });
      if (!result) break outer;
      const { summary } = result;
      measured.push({
        measurement: prefillMeasurement(summary, n, batch),
        dir,
        warnings: summary.warnings,
      });
      if (allFailed(c, summary)) {
        const longer = s.lengths.filter((l) => l > n);
        c.hooks.note(
          `every request of ${n} input tokens at batch ${batch} failed (${failureNote(summary)})${longer.length > 0 ? `; longer inputs skipped at this batch (is --max-input above the server's max_model_len - 1?)` : ''}`,
        );
        break;
      }
    }
  }
  const measurements = measured.map((r) => r.measurement);
  const points = prefillRows(measurements).map((row) => {
    const { dir, warnings } = measured.find(
      (x) => x.measurement.inputTokens === row.inputTokens && x.measurement.batch === row.batch,
    ) as (typeof measured)[number];
    return { ...row, dir, warnings };
  });
  return { kind: 'prefill', points, fit: fitPrefill(measurements) };
}

/** Each concurrency level; a level where every request fails ends the probe. */
async function* decodeProfile(
  c: ProbeContext,
  s: DecodeSettings,
  requests: MakeRequest,
): Profile<ProbeResult> {
  const pointAt = pointMaker(c, requests);
  const measured: Measured<ReturnType<typeof decodeMeasurement>>[] = [];
  for (const level of s.levels) {
    const dir = join('decode', `c${level}`);
    const result = yield pointAt({
      concurrency: level,
      requests: pointRequests(s.requestsPerPoint, level),
      input: s.inputTokens,
      output: s.outputTokens,
      dir,
      label: `decode: concurrency ${level}`,
    });
    if (!result) break;
    const { summary } = result;
    measured.push({
      measurement: decodeMeasurement(summary, level),
      dir,
      warnings: summary.warnings,
    });
    if (allFailed(c, summary)) {
      c.hooks.note(
        `every request at concurrency ${level} failed (${failureNote(summary)}); higher levels skipped`,
      );
      break;
    }
  }
  const measurements = measured.map((r) => r.measurement);
  const points = decodeRows(measurements).map((row) => {
    const { dir, warnings } = measured.find(
      (x) => x.measurement.concurrency === row.concurrency,
    ) as (typeof measured)[number];
    return { ...row, dir, warnings };
  });
  return { kind: 'decode', points, fit: fitDecode(measurements) };
}
