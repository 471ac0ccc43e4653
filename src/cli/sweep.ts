import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import Table from 'cli-table3';
import pc from 'picocolors';
import {
  type AggregateSlo,
  averageRepeats,
  checkSlos,
  DEFAULT_TRIANGLE,
  findCliff,
  findKnee,
  type MaxLoadSearch,
  parseAggregateSlos,
  recommend,
  type SweepPoint,
  searchMaxLoad,
  sweepPoint,
  type TriangleThresholds,
} from '../analysis/sweep.js';
import { prefillWarning, targetContextWarning } from '../analysis/traps.js';
import { EXIT } from '../errors.js';
import type { LoadSpec } from '../load.js';
import { planVllmMemory } from '../memory/footprint.js';
import type { RunSummary, Warning } from '../metrics/summary.js';
import type { RunPlan } from '../plan/runPlan.js';
import { createPointRunner, type PointRunner } from '../session/point.js';
import { utcStamp } from '../session/target.js';
import { resolveEngineConfig } from '../sim/engineModel.js';
import type { Scenario } from '../workload/scenarios.js';
import { gate } from './report.js';
import {
  addRunOptions,
  prepareRun,
  type RunOptions,
  withPlanFile,
  writeHtmlReport,
} from './run.js';

const DEFAULT_LEVELS = [1, 4, 16, 64, 128];
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

export function sweepCommand(): Command {
  const command = addRunOptions(
    new Command('sweep').description(
      'Step the load (concurrency 1, 4, 16, 64, 128 by default, or rates) for each scenario: where throughput saturates and latency jumps, the largest load meeting SLOs (--find-max), and an operating point per priority.',
    ),
  )
    .option('--levels <list>', `concurrency levels (default: ${DEFAULT_LEVELS.join(',')})`)
    .option('--rates <list>', 'open-loop rates in requests/s to step through instead of --levels')
    .option('--repeats <n>', 'runs per level, averaged (default: 1)')
    .option(
      '--find-max',
      "search the largest concurrency (or rate with --rates) meeting --slo's percentile SLOs, e.g. --slo 'ttft.p99<500,itl.p99<50'",
    )
    .option(
      '--max-level <n>',
      'upper bound of the --find-max search (default: 1024, or 1,000 req/s)',
    )
    .option(
      '--cliff-factor <x>',
      'a jump of p99 TTFT or ITL by this factor is a cliff (default: 3)',
    )
    .option(
      '--latency-ttft-p99 <ms>',
      `latency-first: p99 TTFT under (default: ${DEFAULT_TRIANGLE.latencyTtftP99Ms})`,
    )
    .option(
      '--latency-itl-p99 <ms>',
      `latency-first: p99 ITL under (default: ${DEFAULT_TRIANGLE.latencyItlP99Ms})`,
    )
    .option(
      '--memory-throughput-share <x>',
      `memory-first: the smallest footprint reaching this share of the best throughput (default: ${DEFAULT_TRIANGLE.memoryThroughputShare})`,
    )
    .option(
      '--throughput-itl-p99 <ms>',
      `throughput-first: p99 ITL at most (default: ${DEFAULT_TRIANGLE.throughputItlP99Ms})`,
    )
    .option(
      '--target-context <tokens>',
      'the longest prompt + output you plan for: warns when longer than measured',
    );
  return command.action(async (options, cmd) => {
    const merged = withPlanFile(options, cmd, 'sweep');
    process.exitCode = merged ? await sweep(merged) : EXIT.invalidOptions;
  });
}

interface SweepSettings {
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

function parseSweep(o: Record<string, unknown>, problems: string[]): SweepSettings {
  const num = (flag: string, value: unknown, fallback: number, min: number, integer = false) => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
      problems.push(
        `${flag} must be a ${integer ? 'whole number' : 'number'} >= ${min} (got "${String(value)}")`,
      );
      return fallback;
    }
    return n;
  };
  const list = (flag: string, value: unknown, integer: boolean) => {
    const items = String(value)
      .split(',')
      .map((v) => Number(v.trim()));
    if (items.length === 0 || items.some((n) => !(n > 0) || (integer && !Number.isInteger(n)))) {
      problems.push(
        `${flag} must be ${integer ? 'whole numbers' : 'numbers'} above 0 separated by commas (got "${String(value)}")`,
      );
      return [];
    }
    return [...new Set(items)].sort((a, b) => a - b);
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
  return {
    mode,
    levels,
    repeats: num('--repeats', o.repeats, 1, 1, true),
    findMax: o.findMax === true,
    maxLevel: num(
      '--max-level',
      o.maxLevel,
      mode === 'rate' ? 1000 : 1024,
      1,
      mode === 'concurrency',
    ),
    cliffFactor: num('--cliff-factor', o.cliffFactor, 3, 1.01),
    slos,
    triangle: {
      latencyTtftP99Ms: num(
        '--latency-ttft-p99',
        o.latencyTtftP99,
        DEFAULT_TRIANGLE.latencyTtftP99Ms,
        0,
      ),
      latencyItlP99Ms: num(
        '--latency-itl-p99',
        o.latencyItlP99,
        DEFAULT_TRIANGLE.latencyItlP99Ms,
        0,
      ),
      throughputItlP99Ms: num(
        '--throughput-itl-p99',
        o.throughputItlP99,
        DEFAULT_TRIANGLE.throughputItlP99Ms,
        0,
      ),
      memoryThroughputShare: num(
        '--memory-throughput-share',
        o.memoryThroughputShare,
        DEFAULT_TRIANGLE.memoryThroughputShare,
        0,
      ),
    },
    ...(o.targetContext !== undefined
      ? { targetContext: num('--target-context', o.targetContext, 0, 1, true) }
      : {}),
    requestsGiven: o.requests !== undefined || o.duration !== undefined,
    warmupGiven: o.warmup !== undefined,
  };
}

/** The scenario results of a sweep, as saved in sweep.json. */
interface ScenarioSweep {
  /** Every point's run summary, for --threshold (not saved in sweep.json). */
  summaries?: { name: string; summary: RunSummary }[];
  scenario: string;
  points: SweepPoint[];
  knee?: ReturnType<typeof findKnee>;
  cliff?: ReturnType<typeof findCliff>;
  search?: MaxLoadSearch & { slos: string[]; binding?: string };
  recommendations: ReturnType<typeof recommend>;
  warnings: Warning[];
}

async function sweep(options: RunOptions): Promise<number> {
  const problems: string[] = [];
  const raw = options as Record<string, unknown>;
  // Percentile SLOs (ttft.p99<500) are the sweep's; per-request ones (ttft<500) stay goodput's.
  const sloParts = String(raw.slo ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const percentileSlos = sloParts.filter((p) => /^\w+\.p\d+/.test(p));
  const goodputSlos = sloParts.filter((p) => !/^\w+\.p\d+/.test(p));
  const settings = parseSweep(
    { ...raw, ...(percentileSlos.length > 0 ? { sweepSlo: percentileSlos.join(',') } : {}) },
    problems,
  );
  const runOptions: Record<string, unknown> = Object.fromEntries(
    Object.entries(raw).filter(([k]) => !(SWEEP_KEYS as readonly string[]).includes(k)),
  );
  if (goodputSlos.length > 0) runOptions.slo = goodputSlos.join(',');
  else delete runOptions.slo;
  const prepared = prepareRun(runOptions as RunOptions, 'sweep');
  problems.push(...prepared.problems);
  if (problems.length > 0 || !prepared.plan) {
    process.stderr.write(
      `infergauge sweep: invalid options\n${problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return EXIT.invalidOptions;
  }
  for (const w of prepared.warnings) process.stderr.write(`infergauge sweep: warning: ${w}\n`);
  const plan = prepared.plan;
  const root = plan.out ?? join('infergauge-results', `${utcStamp()}-sweep`);
  mkdirSync(root, { recursive: true });
  const stop = new AbortController();
  const onSignal = () => {
    if (!stop.signal.aborted)
      process.stderr.write('\ninfergauge sweep: stopping after the requests in flight\n');
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let runner: PointRunner | undefined;
  try {
    runner = await createPointRunner({ ...prepared, plan }, stop.signal);
    const memoryPlan = prepared.engine
      ? planVllmMemory(resolveEngineConfig(prepared.engine))
      : undefined;
    const results: ScenarioSweep[] = [];
    for (const scenario of plan.scenarios) {
      if (stop.signal.aborted) break;
      results.push(
        await sweepScenario(
          plan,
          runner,
          scenario,
          settings,
          root,
          plan.load,
          stop.signal,
          memoryPlan && prepared.engine
            ? { plan: memoryPlan, blockSize: resolveEngineConfig(prepared.engine).blockSize }
            : undefined,
        ),
      );
    }
    const saved = {
      schemaVersion: 1,
      target: runner.description,
      mode: settings.mode,
      scenarios: results.map(({ summaries: _, ...r }) => r),
      interrupted: stop.signal.aborted,
    };
    writeFileSync(join(root, 'sweep.json'), `${JSON.stringify(saved, null, 2)}\n`);
    if (prepared.json) process.stdout.write(`${JSON.stringify(saved, null, 2)}\n`);
    else
      process.stdout.write(
        `${renderSweep(runner.description, settings, results, process.stdout.isTTY === true)}\nResults: ${root}\n`,
      );
    if (raw.html !== false) await writeHtmlReport(root);
    if (stop.signal.aborted) return EXIT.interrupted;
    return gate(
      'sweep',
      raw.threshold as string[] | undefined,
      results.flatMap((r) => r.summaries ?? []),
    );
  } catch (err) {
    process.stderr.write(`infergauge sweep: ${(err as Error).message}\n`);
    return EXIT.failure;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await runner?.close();
  }
}

async function sweepScenario(
  plan: RunPlan,
  runner: PointRunner,
  scenario: Scenario,
  s: SweepSettings,
  root: string,
  baseLoad: LoadSpec,
  stop: AbortSignal,
  kv: { plan: ReturnType<typeof planVllmMemory>; blockSize: number } | undefined,
): Promise<ScenarioSweep> {
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
  const measure = async (level: number, dir: string, repeat: number) => {
    // Enough requests for several waves at every level, and one wave of warm-up.
    const perPoint =
      s.mode === 'concurrency' ? Math.max(100, 4 * level) : Math.max(100, Math.ceil(30 * level));
    const { summary, serverMetrics } = await runner.run({
      load: loadFor(level),
      scenario,
      dir,
      ...(s.requestsGiven
        ? {
            ...(plan.requests !== undefined ? { requests: plan.requests } : {}),
            ...(plan.durationS !== undefined ? { durationS: plan.durationS } : {}),
          }
        : { requests: perPoint }),
      warmupRequests: s.warmupGiven
        ? plan.warmupRequests
        : s.mode === 'concurrency'
          ? level
          : Math.ceil(level),
    });
    const point = sweepPoint(scenario.name, level, repeat, summary, serverMetrics);
    summaries.push({ name: `${scenario.name} at ${s.mode} ${level}`, summary });
    process.stderr.write(
      `  ${scenario.name} ${s.mode} ${level}${s.repeats > 1 ? ` #${repeat + 1}` : ''}: ${Math.round(point.outputTokensPerS)} tok/s at measured concurrency ${point.meanConcurrency.toFixed(1)}, p99 TTFT ${point.ttftP99Ms.toFixed(0)} ms\n`,
    );
    return { point, summary };
  };
  const raw: SweepPoint[] = [];
  const warnings: Warning[] = [];
  const summaries: { name: string; summary: RunSummary }[] = [];
  for (const level of s.levels) {
    for (let r = 0; r < s.repeats; r++) {
      if (stop.aborted) break;
      const { point, summary } = await measure(
        level,
        join(root, scenario.name, `${tag(level)}${s.repeats > 1 ? `-r${r + 1}` : ''}`),
        r,
      );
      raw.push(point);
      if (level === s.levels[0] && r === 0) {
        const prefill = prefillWarning(summary);
        if (prefill) warnings.push(prefill);
      }
    }
  }
  const points = averageRepeats(raw);
  const result: ScenarioSweep = {
    summaries,
    scenario: scenario.name,
    points,
    recommendations: recommend(points, s.triangle),
    warnings,
  };
  const knee = findKnee(points);
  if (knee) result.knee = knee;
  const cliff = findCliff(points, s.cliffFactor);
  if (cliff) result.cliff = cliff;
  if (s.findMax && !stop.aborted) {
    const search = await searchMaxLoad(
      async (level) => {
        const { point } = await measure(
          level,
          join(root, scenario.name, `search-${tag(level)}`),
          0,
        );
        return { ok: checkSlos(point, s.slos).ok, point };
      },
      {
        start: s.mode === 'concurrency' ? 1 : s.levels[0],
        max: s.maxLevel,
        resolution: s.mode === 'concurrency' ? 1 : Math.max(0.1, s.levels[0] / 4),
        integer: s.mode === 'concurrency',
      },
    );
    const binding = search.bestPoint ? checkSlos(search.bestPoint, s.slos).binding.text : undefined;
    result.search = { ...search, slos: s.slos.map((x) => x.text), ...(binding ? { binding } : {}) };
  }
  if (s.targetContext !== undefined) {
    const longest = Math.max(...points.map((p) => p.meanInputTokens + p.meanOutputTokens));
    const top = Math.max(...points.map((p) => p.meanConcurrency));
    const w = targetContextWarning(
      s.targetContext,
      Math.round(longest),
      kv ? { ...kv, concurrency: Math.round(top) } : undefined,
    );
    if (w) warnings.push(w);
  }
  return result;
}

function renderSweep(
  target: string,
  s: SweepSettings,
  results: ScenarioSweep[],
  color: boolean,
): string {
  const c = color ? pc : pc.createColors(false);
  const f = (n: number | undefined, digits = 0) =>
    n === undefined || !Number.isFinite(n)
      ? '-'
      : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const lv = (n: number | undefined) => f(n, s.mode === 'rate' ? 2 : 0);
  const lines: string[] = [c.bold(`Sweep of ${target}`), ''];
  for (const r of results) {
    lines.push(c.bold(`Scenario ${r.scenario}`));
    const table = new Table({
      head: [
        s.mode === 'concurrency' ? 'concurrency' : 'rate/s',
        'measured',
        'out tok/s',
        'per user',
        'TTFT p50',
        'TTFT p99',
        'ITL p50',
        'ITL p99',
        'E2E p99',
        'KV peak',
        'failed',
      ],
      colAligns: Array(11).fill('right'),
      style: { head: [], border: [] },
      chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
    });
    for (const p of r.points) {
      table.push([
        lv(p.level),
        f(p.meanConcurrency, 1),
        f(p.outputTokensPerS),
        f(p.perUserTokensPerS, 1),
        f(p.ttftP50Ms, 1),
        f(p.ttftP99Ms, 1),
        f(p.itlP50Ms, 1),
        f(p.itlP99Ms, 1),
        f(p.e2eP99Ms),
        p.kvCacheUsageMax === undefined ? '-' : `${(p.kvCacheUsageMax * 100).toFixed(0)}%`,
        p.failed > 0 ? c.red(String(p.failed)) : '0',
      ]);
    }
    lines.push(table.toString());
    lines.push('(latency in ms; throughput in output tokens/s at the measured concurrency)');
    lines.push(
      r.knee
        ? c.yellow(`Saturation: at ${s.mode} ${lv(r.knee.saturatesAt)}: ${r.knee.why}.`)
        : 'Saturation: not reached in this range: throughput still grows with load.',
    );
    if (r.cliff)
      lines.push(c.yellow(`Latency cliff: at ${s.mode} ${lv(r.cliff.level)}: ${r.cliff.why}.`));
    if (r.search) {
      const best = r.search.bestPoint;
      lines.push(
        c.bold(
          best
            ? `Capacity under ${r.search.slos.join(', ')}: ${lv(r.search.best)} ${s.mode === 'concurrency' ? 'concurrent users' : 'requests/s'} (next tried: ${lv(r.search.failedAt)}, which fails); goodput ${f(best.goodputRequestsPerS ?? best.requestsPerS, 2)} req/s, ${f(best.outputTokensPerS)} output tok/s, ${f(best.perUserTokensPerS, 1)} tok/s per user; binding SLO: ${r.search.binding}.`
            : `Capacity under ${r.search.slos.join(', ')}: none: even ${s.mode} ${lv(r.search.tried[0]?.level)} misses them.`,
        ),
      );
    }
    lines.push('Operating points:');
    for (const rec of r.recommendations)
      lines.push(`  ${rec.profile} (${rec.rule}): ${rec.costs}.`);
    for (const w of r.warnings) lines.push(c.yellow(`  warning: ${w.message}`));
    lines.push('');
  }
  return lines.join('\n');
}
