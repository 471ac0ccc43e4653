/**
 * The sweep profile: each scenario at fixed load levels (concurrency or rate, repeated and
 * averaged), then, with find-max, a search for the largest load meeting percentile SLOs.
 */
import { join } from 'node:path';
import {
  type AggregateSlo,
  averageRepeats,
  checkSlos,
  DEFAULT_TRIANGLE,
  findCliff,
  findKnee,
  maxLoadInterval,
  parseAggregateSlos,
  recommend,
  type SweepPoint,
  searchMaxLoad,
  sweepPoint,
  type TriangleThresholds,
} from '../../analysis/sweep.js';
import { thresholdProblems } from '../../analysis/thresholds.js';
import { prefillWarning, targetContextWarning } from '../../analysis/traps.js';
import { EXIT, UsageError } from '../../errors.js';
import {
  checkedFlagNumber,
  type NumberRule,
  parseFlagList,
  parseFlagNumber,
} from '../../flagNumber.js';
import { concurrencyBoundProblem, type LoadSpec, MAX_CONCURRENCY } from '../../load.js';
import { planVllmMemory } from '../../memory/footprint.js';
import type { RunSummary, Warning } from '../../metrics/summary.js';
import { measuredCount, type RunPlan } from '../../plan/runPlan.js';
import { errorKindLines, nothingSucceeded } from '../../report/failures.js';
import type { ScenarioSweep } from '../../report/sweepText.js';
import { writeResult } from '../../results/layout.js';
import { resolveEngineConfig } from '../../sim/engineModel.js';
import { isSessionScenario, type Scenario } from '../../workload/scenarios.js';
import type { SessionEvents } from '../events.js';
import { createPointRunner, type Point, type PointResult } from '../point.js';
import { prepareRun, type RunOptions } from '../prepare.js';
import { fromPlan, inSession, resultsRoot, type SessionHooks, sessionOutputs } from '../session.js';
import { type PreparedRun, randomPromptSalt } from '../target.js';
import { DEFAULT_LEVELS } from './defaults.js';
import { type Profile, runProfile, searchSteps } from './profile.js';

export interface SweepSettings {
  mode: 'concurrency' | 'rate';
  levels: number[];
  repeats: number;
  findMax: boolean;
  maxLevel: number;
  cliffFactor: number;
  slos: AggregateSlo[];
  triangle: TriangleThresholds;
  targetContext?: number;
  requestsGiven: boolean;
  warmupGiven: boolean;
}

/** Options of the sweep itself (and its command's outputs); the rest are run options, for every point. */
const SWEEP_KEYS = [
  'levels',
  'rates',
  'repeats',
  'findMax',
  'maxLevel',
  'cliffFactor',
  'latencyTtftP99',
  'latencyItlP99',
  'throughputItlP99',
  'memoryThroughputShare',
  'targetContext',
  'threshold',
  'html',
] as const;

/**
 * `--concurrency 1,4,16` (as GuideLLM and vLLM users write a sweep) means the levels: the same as
 * `--levels 1,4,16`. A single number stays a run option.
 */
function levelsFromConcurrency(
  raw: Record<string, unknown>,
  problems: string[],
): Record<string, unknown> {
  const concurrency = raw.concurrency;
  if (typeof concurrency !== 'string' || !concurrency.includes(',')) return raw;
  if (raw.levels !== undefined) {
    problems.push(
      `--concurrency ${concurrency} and --levels ${String(raw.levels)} both give the levels: keep --levels`,
    );
  }
  const { concurrency: _, ...rest } = raw;
  return { ...rest, levels: raw.levels ?? concurrency };
}

/**
 * A sweep's options split into its settings and the run every point makes, both validated:
 * percentile SLOs (`ttft.p99<500`) are the sweep's, per-request ones each point's goodput.
 */
export function prepareSweep(options: Record<string, unknown>): {
  settings: SweepSettings;
  prepared: PreparedRun;
  problems: string[];
} {
  // --threshold is the sweep's (it judges every point), not handed to the points' run.
  const problems = thresholdProblems(options.threshold as string[] | undefined);
  const raw = levelsFromConcurrency(options, problems);
  const slo = splitSweepSlo(raw.slo);
  const settings = sweepSettings(
    { ...raw, ...(slo.percentile ? { sweepSlo: slo.percentile } : {}) },
    problems,
  );
  const runOptions: Record<string, unknown> = Object.fromEntries(
    Object.entries(raw).filter(([k]) => !(SWEEP_KEYS as readonly string[]).includes(k)),
  );
  if (slo.perRequest) runOptions.slo = slo.perRequest;
  else delete runOptions.slo;
  const prepared = prepareRun(runOptions as RunOptions, 'sweep');
  problems.push(...prepared.problems);
  return { settings, prepared, problems };
}

/**
 * A sweep's --slo in its two kinds: percentile SLOs (ttft.p99<500) judge each point's
 * distribution and are the sweep's; per-request ones (ttft<500) stay each point's goodput.
 */
function splitSweepSlo(text: unknown): { percentile?: string; perRequest?: string } {
  const parts = String(text ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const isPercentile = (p: string) => /^\w+\.p\d+/.test(p);
  const percentile = parts.filter(isPercentile).join(',');
  const perRequest = parts.filter((p) => !isPercentile(p)).join(',');
  return { ...(percentile ? { percentile } : {}), ...(perRequest ? { perRequest } : {}) };
}

/**
 * The rules of a sweep's numbers, in one place: the command line reads its flags by them, and
 * runSweep checks a program's settings by them (levels of -1, 0 and NaN ran a sweep that ended
 * with code 0).
 */
const RULES = {
  repeats: { min: 1, integer: true },
  cliffFactor: { min: 1.01 },
  triangle: { min: 0 },
  targetContext: { min: 1, integer: true },
  /** A concurrency level, and --max-level of a concurrency sweep (at most MAX_CONCURRENCY). */
  concurrency: { min: 1, integer: true },
  rate: { above: 0 },
  /** --max-level of a rate sweep. */
  maxRate: { min: 1 },
} as const satisfies Record<string, NumberRule>;

/** How a sweep's settings are named to whoever gave them: flags, or a program's fields. */
type SettingNames = Record<
  'levels' | 'repeats' | 'maxLevel' | 'cliffFactor' | 'targetContext' | keyof TriangleThresholds,
  string
>;

const FLAG_NAMES = (mode: SweepSettings['mode']): SettingNames => ({
  levels: mode === 'rate' ? '--rates' : '--levels',
  repeats: '--repeats',
  maxLevel: '--max-level',
  cliffFactor: '--cliff-factor',
  targetContext: '--target-context',
  latencyTtftP99Ms: '--latency-ttft-p99',
  latencyItlP99Ms: '--latency-itl-p99',
  throughputItlP99Ms: '--throughput-itl-p99',
  memoryThroughputShare: '--memory-throughput-share',
});

const FIELD_NAMES: SettingNames = {
  levels: 'settings.levels',
  repeats: 'settings.repeats',
  maxLevel: 'settings.maxLevel',
  cliffFactor: 'settings.cliffFactor',
  targetContext: 'settings.targetContext',
  latencyTtftP99Ms: 'settings.triangle.latencyTtftP99Ms',
  latencyItlP99Ms: 'settings.triangle.latencyItlP99Ms',
  throughputItlP99Ms: 'settings.triangle.throughputItlP99Ms',
  memoryThroughputShare: 'settings.triangle.memoryThroughputShare',
};

/**
 * What is wrong with a sweep's settings, each problem naming the flag or field: the checks
 * behind the command line's parsing (a concurrency no client can hold), and every check for a
 * program that builds its settings itself.
 */
export function sweepSettingsProblems(
  s: SweepSettings,
  names: SettingNames = FIELD_NAMES,
): string[] {
  const problems: string[] = [];
  const check = (name: string, value: unknown, rule: NumberRule, bound?: number) => {
    const n = parseFlagNumber(typeof value === 'number' ? value : Number.NaN, rule);
    if ('problem' in n) problems.push(`${name} ${n.problem}`);
    else if (bound !== undefined && n.value > bound) {
      problems.push(`${name} ${concurrencyBoundProblem(n.value)}`);
    }
  };
  if (s.mode !== 'concurrency' && s.mode !== 'rate') {
    problems.push(`settings.mode must be concurrency or rate (got ${JSON.stringify(s.mode)})`);
    return problems;
  }
  const closed = s.mode === 'concurrency';
  if (!Array.isArray(s.levels) || s.levels.length === 0) {
    problems.push(`${names.levels} must give at least one level`);
  } else {
    for (const level of s.levels) {
      check(
        names.levels,
        level,
        closed ? RULES.concurrency : RULES.rate,
        closed ? MAX_CONCURRENCY : undefined,
      );
    }
  }
  check(names.repeats, s.repeats, RULES.repeats);
  check(
    names.maxLevel,
    s.maxLevel,
    closed ? RULES.concurrency : RULES.maxRate,
    closed ? MAX_CONCURRENCY : undefined,
  );
  check(names.cliffFactor, s.cliffFactor, RULES.cliffFactor);
  for (const key of Object.keys(DEFAULT_TRIANGLE) as (keyof TriangleThresholds)[]) {
    check(names[key], s.triangle?.[key], RULES.triangle);
  }
  if (s.targetContext !== undefined)
    check(names.targetContext, s.targetContext, RULES.targetContext);
  if (!Array.isArray(s.slos)) problems.push('settings.slos must be a list (parseAggregateSlos)');
  else if (s.findMax && s.slos.length === 0) {
    problems.push("find-max needs percentile SLOs, e.g. --slo 'ttft.p99<500,itl.p99<50'");
  }
  return problems;
}

/** A sweep's settings from its options (`sweepSlo`: the percentile SLOs of --slo). */
function sweepSettings(o: Record<string, unknown>, problems: string[]): SweepSettings {
  const num = (flag: string, value: unknown, fallback: number, rule: NumberRule) =>
    checkedFlagNumber(
      value,
      rule,
      problems,
      `${flag} must be a ${rule.integer ? 'whole number' : 'number'} >= ${rule.min} (got "${String(value)}")`,
    ) ?? fallback;
  const list = (flag: string, value: unknown, integer: boolean) => {
    const items = parseFlagList(value, integer ? RULES.concurrency : RULES.rate);
    if (items) return items;
    problems.push(
      `${flag} must be ${integer ? 'whole numbers' : 'numbers'} above 0 separated by commas (got "${String(value)}")`,
    );
    // Said once: the settings go on with the default levels, which sweepSettingsProblems passes.
    return DEFAULT_LEVELS;
  };
  if (o.levels !== undefined && o.rates !== undefined) {
    problems.push('--levels (concurrency) and --rates cannot be combined: sweep one of them');
  }
  for (const flag of ['concurrency', 'rate'] as const) {
    if (o[flag] !== undefined)
      problems.push(`--${flag} is set per point by a sweep: use --levels or --rates`);
  }
  const mode = o.rates !== undefined ? 'rate' : 'concurrency';
  const levels =
    mode === 'rate'
      ? list('--rates', o.rates, false)
      : o.levels !== undefined
        ? list('--levels', o.levels, true)
        : DEFAULT_LEVELS;
  let slos: AggregateSlo[] = [];
  if (o.sweepSlo !== undefined) {
    try {
      slos = parseAggregateSlos(String(o.sweepSlo));
    } catch (err) {
      problems.push(`--slo ${(err as Error).message}`);
    }
  }
  if (o.findMax && slos.length === 0) {
    problems.push("--find-max needs percentile SLOs, e.g. --slo 'ttft.p99<500,itl.p99<50'");
  }
  const triangle = (flag: string, key: keyof TriangleThresholds, value: unknown) =>
    num(flag, value, DEFAULT_TRIANGLE[key], RULES.triangle);
  const settings: SweepSettings = {
    mode,
    levels,
    repeats: num('--repeats', o.repeats, 1, RULES.repeats),
    findMax: o.findMax === true,
    maxLevel: num(
      '--max-level',
      o.maxLevel,
      mode === 'rate' ? 1000 : 1024,
      mode === 'rate' ? RULES.maxRate : RULES.concurrency,
    ),
    cliffFactor: num('--cliff-factor', o.cliffFactor, 3, RULES.cliffFactor),
    slos,
    triangle: {
      latencyTtftP99Ms: triangle('--latency-ttft-p99', 'latencyTtftP99Ms', o.latencyTtftP99),
      latencyItlP99Ms: triangle('--latency-itl-p99', 'latencyItlP99Ms', o.latencyItlP99),
      throughputItlP99Ms: triangle(
        '--throughput-itl-p99',
        'throughputItlP99Ms',
        o.throughputItlP99,
      ),
      memoryThroughputShare: triangle(
        '--memory-throughput-share',
        'memoryThroughputShare',
        o.memoryThroughputShare,
      ),
    },
    ...(o.targetContext !== undefined
      ? { targetContext: num('--target-context', o.targetContext, 1, RULES.targetContext) }
      : {}),
    requestsGiven: o.requests !== undefined || o.sessions !== undefined || o.duration !== undefined,
    warmupGiven: o.warmup !== undefined,
  };
  // What parsing passed is checked as a program's settings are (a concurrency past the bound);
  // find-max without SLOs was said above.
  problems.push(
    ...sweepSettingsProblems({ ...settings, findMax: false }, FLAG_NAMES(settings.mode)),
  );
  return settings;
}

/** What the sweep holds the target's KV cache to (the simulator's), for --target-context. */
type KvPool = { plan: ReturnType<typeof planVllmMemory>; blockSize: number };

interface SweepContext {
  plan: RunPlan;
  settings: SweepSettings;
  root: string;
  /** Whether points are saved (each in a directory under the root). */
  saves: boolean;
  kv: KvPool | undefined;
  /** One progress line per measured point. */
  say: (line: string) => void;
}

/** A sweep's scenarios (sweep.json's) and every point's summary, for --threshold. */
export interface SweepOutcome {
  /** The results directory. */
  root: string;
  target: string;
  scenarios: ScenarioSweep[];
  summaries: { name: string; summary: RunSummary }[];
  /** sweep.json as written into `root`. */
  saved: Record<string, unknown>;
  /** EXIT.ok; EXIT.interrupted when stopped; else EXIT.failure when no point had a success. */
  code: number;
}

/**
 * Runs the sweep of every scenario of the plan against its target as one session (its points
 * and sweep.json in the plan's --out, or a new results directory).
 */
export async function runSweep(
  prepared: PreparedRun & { plan: RunPlan },
  settings: SweepSettings,
  hooks: SessionHooks & { stop: AbortSignal; say: (line: string) => void },
): Promise<SweepOutcome> {
  // A program's settings are checked as the command line's are, before anything starts.
  const problems = sweepSettingsProblems(settings);
  if (problems.length > 0) throw new UsageError(problems);
  const root = resultsRoot(prepared.plan.out, 'sweep', hooks.save !== false);
  // Drawn before the session's manifest is written, so that it records the salt too.
  prepared.plan.promptSalt ??= randomPromptSalt();
  const onNotice = (notice: string) => hooks.say(`infergauge sweep: ${notice}\n`);
  const session = {
    command: 'sweep',
    kind: 'sweep' as const,
    root,
    ...fromPlan(prepared.plan),
    ...sessionOutputs(hooks),
    onNotice,
  };
  return inSession(session, (s) => sweepSession(prepared, settings, root, s, hooks, onNotice));
}

async function sweepSession(
  prepared: PreparedRun & { plan: RunPlan },
  settings: SweepSettings,
  root: string,
  session: SessionEvents,
  { stop, say }: { stop: AbortSignal; say: (line: string) => void },
  onNotice: (notice: string) => void,
): Promise<SweepOutcome & { code: number }> {
  const runner = await createPointRunner(prepared, session, stop, onNotice);
  try {
    const engine = prepared.engine ? resolveEngineConfig(prepared.engine) : undefined;
    const kv = engine ? { plan: planVllmMemory(engine), blockSize: engine.blockSize } : undefined;
    const summaries: SweepOutcome['summaries'] = [];
    const context = { plan: prepared.plan, settings, root, saves: session.saves, kv, say };
    const scenarios = await runProfile(sweepProfile(context, summaries), runner, stop);
    const saved = {
      schemaVersion: 1,
      target: runner.description,
      mode: settings.mode,
      scenarios,
      interrupted: stop.aborted,
    };
    if (session.saves) writeResult(root, 'sweep', saved);
    // Precedence: interrupted, then no point had a success (a broken endpoint fails the sweep).
    const code = stop.aborted
      ? EXIT.interrupted
      : nothingSucceeded(summaries.map((x) => x.summary))
        ? EXIT.failure
        : EXIT.ok;
    return { root, target: runner.description, scenarios, summaries, saved, code };
  } finally {
    await runner.close();
  }
}

/** Every scenario in turn; one stopped before its first point is left out. */
async function* sweepProfile(
  c: SweepContext,
  summaries: SweepOutcome['summaries'],
): Profile<ScenarioSweep[]> {
  const results: ScenarioSweep[] = [];
  for (const scenario of c.plan.scenarios) {
    const result = yield* scenarioProfile(c, scenario, summaries);
    if (!result) break;
    results.push(result);
  }
  return results;
}

async function* scenarioProfile(
  c: SweepContext,
  scenario: Scenario,
  summaries: SweepOutcome['summaries'],
): Profile<ScenarioSweep | undefined> {
  const { plan, settings: s } = c;
  const baseLoad = plan.load;
  const loadFor = (level: number): LoadSpec =>
    s.mode === 'concurrency'
      ? { mode: 'closed', concurrency: level }
      : {
          mode: 'open',
          rate: level,
          arrival:
            baseLoad.mode === 'open' && baseLoad.arrival !== 'trace' ? baseLoad.arrival : 'poisson',
          ...(baseLoad.mode === 'open' && baseLoad.burstiness !== undefined
            ? { burstiness: baseLoad.burstiness }
            : {}),
        };
  const tag = (level: number) => (s.mode === 'concurrency' ? `c${level}` : `r${level}`);
  const pointAt = (level: number, dir: string): Point => {
    // Enough requests for several waves at every level, and one wave of warm-up; a session
    // scenario counts sessions, each several requests.
    const sessions = isSessionScenario(scenario);
    const perPoint = sessions
      ? s.mode === 'concurrency'
        ? Math.max(16, 2 * level)
        : Math.max(16, Math.ceil(10 * level))
      : s.mode === 'concurrency'
        ? Math.max(100, 4 * level)
        : Math.max(100, Math.ceil(30 * level));
    const count = measuredCount(plan, scenario);
    return {
      load: loadFor(level),
      scenario,
      ...(c.saves ? { dir } : {}),
      ...(s.requestsGiven
        ? {
            ...(count !== undefined ? { requests: count } : {}),
            ...(plan.durationS !== undefined ? { durationS: plan.durationS } : {}),
          }
        : { requests: perPoint }),
      warmupRequests: s.warmupGiven
        ? plan.warmupRequests
        : s.mode === 'concurrency'
          ? level
          : // One second of arrivals, but never more than one client can hold in flight: a
            // rate of ten million would otherwise warm up for hours before measuring.
            Math.min(Math.ceil(level), MAX_CONCURRENCY),
    };
  };
  const measured = (level: number, repeat: number, { summary, serverMetrics }: PointResult) => {
    const point = sweepPoint(scenario.name, level, repeat, summary, serverMetrics);
    summaries.push({ name: `${scenario.name} at ${s.mode} ${level}`, summary });
    const at = `  ${scenario.name} ${s.mode} ${level}${s.repeats > 1 ? ` #${repeat + 1}` : ''}`;
    c.say(
      nothingSucceeded([summary])
        ? `${at}: all ${summary.requests.failed} requests failed: ${errorKindLines(summary.requests).join('; ')}\n`
        : `${at}: ${Math.round(point.outputTokensPerS)} tok/s at measured concurrency ${point.meanConcurrency.toFixed(1)}, p99 TTFT ${point.ttftP99Ms.toFixed(0)} ms\n`,
    );
    return point;
  };
  const raw: SweepPoint[] = [];
  const warnings: Warning[] = [];
  let stopped = false;
  levels: for (const level of s.levels) {
    for (let r = 0; r < s.repeats; r++) {
      const dir = join(c.root, scenario.name, `${tag(level)}${s.repeats > 1 ? `-r${r + 1}` : ''}`);
      const result = yield pointAt(level, dir);
      if (!result) {
        stopped = true;
        break levels;
      }
      raw.push(measured(level, r, result));
      if (level === s.levels[0] && r === 0) {
        const prefill = prefillWarning(result.summary);
        if (prefill) warnings.push(prefill);
      }
    }
  }
  if (raw.length === 0) return undefined;
  const points = averageRepeats(raw);
  const result: ScenarioSweep = {
    scenario: scenario.name,
    points,
    recommendations: recommend(points, s.triangle),
    warnings,
  };
  const knee = findKnee(points);
  if (knee) result.knee = knee;
  const cliff = findCliff(points, s.cliffFactor);
  if (cliff) result.cliff = cliff;
  if (s.findMax && !stopped) {
    const searched: SweepPoint[] = [];
    const search = yield* searchSteps(
      (measure: (level: number) => Promise<PointResult>) =>
        searchMaxLoad(
          async (level) => {
            const point = measured(level, 0, await measure(level));
            searched.push(point);
            return { ok: checkSlos(point, s.slos).ok, point };
          },
          {
            start: s.mode === 'concurrency' ? 1 : s.levels[0],
            max: s.maxLevel,
            resolution: s.mode === 'concurrency' ? 1 : Math.max(0.1, s.levels[0] / 4),
            integer: s.mode === 'concurrency',
          },
        ),
      (level) => pointAt(level, join(c.root, scenario.name, `search-${tag(level)}`)),
    );
    if (search) {
      const binding = search.bestPoint
        ? checkSlos(search.bestPoint, s.slos).binding.text
        : undefined;
      // A calibrated search's answer, with the interval its points' predictions give it.
      const prediction = maxLoadInterval([...searched, ...points], s.slos, {
        best: search.best,
        integer: s.mode === 'concurrency',
      });
      result.search = {
        ...search,
        ...(prediction ? { prediction } : {}),
        slos: s.slos.map((x) => x.text),
        ...(binding ? { binding } : {}),
      };
    }
  }
  if (s.targetContext !== undefined) {
    const longest = Math.max(...points.map((p) => p.meanInputTokens + p.meanOutputTokens));
    const top = Math.max(...points.map((p) => p.meanConcurrency));
    const w = targetContextWarning(
      s.targetContext,
      Math.round(longest),
      c.kv ? { ...c.kv, concurrency: Math.round(top) } : undefined,
    );
    if (w) warnings.push(w);
  }
  return result;
}
