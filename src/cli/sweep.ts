import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { DEFAULT_TRIANGLE } from '../analysis/sweep.js';
import { EXIT } from '../errors.js';
import { renderSweep } from '../report/sweepText.js';
import { prepareRun, type RunOptions } from '../session/prepare.js';
import {
  DEFAULT_LEVELS,
  runSweep,
  splitSweepSlo,
  sweepSettings,
} from '../session/profiles/sweep.js';
import { utcStamp } from '../session/target.js';
import {
  listenForInterrupts,
  printProblems,
  printWarnings,
  runAction,
  useColor,
} from './common.js';
import { gate } from './report.js';
import { addRunOptions, withPlanFile, writeHtmlReport } from './run.js';

/** Options of the sweep itself; the rest are run options, for every point. */
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
    .option(
      '--levels <list>',
      `concurrency levels (default: ${DEFAULT_LEVELS.join(',')}; --concurrency 1,4,16 means the same)`,
    )
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
  return command.action((options, cmd) =>
    runAction('sweep', () => {
      const merged = withPlanFile(options, cmd, 'sweep');
      return merged ? sweep(merged) : EXIT.invalidOptions;
    }),
  );
}

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

async function sweep(options: RunOptions): Promise<number> {
  const problems: string[] = [];
  const raw = levelsFromConcurrency(options as Record<string, unknown>, problems);
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
  if (problems.length > 0 || !prepared.plan) return printProblems('sweep', problems);
  printWarnings('sweep', prepared.warnings);
  const plan = prepared.plan;
  const root = plan.out ?? join('infergauge-results', `${utcStamp()}-sweep`);
  mkdirSync(root, { recursive: true });
  const interrupts = listenForInterrupts(() =>
    process.stderr.write('\ninfergauge sweep: stopping after the requests in flight\n'),
  );
  try {
    const outcome = await runSweep({ ...prepared, plan }, settings, root, interrupts.stop, (l) =>
      process.stderr.write(l),
    );
    if (prepared.json) process.stdout.write(`${JSON.stringify(outcome.saved, null, 2)}\n`);
    else {
      const text = renderSweep(
        outcome.target,
        settings.mode,
        outcome.scenarios,
        useColor(process.stdout),
      );
      process.stdout.write(`${text}\nResults: ${root}\n`);
    }
    if (raw.html !== false) await writeHtmlReport(root);
    if (interrupts.stop.aborted) return EXIT.interrupted;
    return gate('sweep', raw.threshold as string[] | undefined, outcome.summaries);
  } finally {
    interrupts.dispose();
  }
}
