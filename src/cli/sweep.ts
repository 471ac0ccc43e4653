import { Command } from '@commander-js/extra-typings';
import { DEFAULT_TRIANGLE } from '../analysis/sweep.js';
import { EXIT } from '../errors.js';
import { failedToRun } from '../report/failures.js';
import type { RunOptions } from '../session/prepare.js';
import { DEFAULT_LEVELS } from '../session/profiles/defaults.js';
import {
  listenForInterrupts,
  printNotice,
  printProblems,
  printWarnings,
  runAction,
  useColor,
} from './common.js';
import { progressOutputs } from './progress.js';
import { gate } from './report.js';
import { addRunOptions, exportLimits, exportTimeout, withPlanFile } from './run.js';

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
    runAction('sweep', async () => {
      const merged = await withPlanFile(options, cmd, 'sweep');
      return merged ? sweep(merged) : EXIT.invalidOptions;
    }),
  );
}

async function sweep(options: RunOptions): Promise<number> {
  // Loaded when the command is chosen, so that other commands start without them.
  const [{ prepareSweep, runSweep }, { loadOutputs }] = await Promise.all([
    import('../session/profiles/sweep.js'),
    import('../session/userOutputs.js'),
  ]);
  const { settings, prepared, problems } = prepareSweep(options as Record<string, unknown>);
  if (problems.length > 0 || !prepared.plan) return printProblems('sweep', problems);
  printWarnings('sweep', prepared.warnings);
  for (const n of prepared.notices) printNotice('sweep', n);
  const plan = prepared.plan;
  const interrupts = listenForInterrupts(() =>
    process.stderr.write('\ninfergauge sweep: stopping after the requests in flight\n'),
  );
  try {
    const exported = await loadOutputs(options.output, exportLimits('sweep', options, interrupts));
    // Ctrl-C while a module loaded: nothing has started, nothing is opened.
    if (interrupts.stop.aborted) return EXIT.interrupted;
    const outcome = await runSweep({ ...prepared, plan }, settings, {
      stop: interrupts.stop,
      say: (l) => process.stderr.write(l),
      html: options.html !== false,
      outputs: [
        // Each point has its line already (say): off a terminal, the heartbeat alone.
        ...progressOutputs(process.stderr, { live: false, pointLines: false }),
        ...exported,
      ],
      ...exportTimeout(options),
    });
    if (prepared.json) process.stdout.write(`${JSON.stringify(outcome.saved, null, 2)}\n`);
    else {
      // Loaded when the command is chosen, so that other commands start without it.
      const { renderSweep } = await import('../report/sweepText.js');
      const text = renderSweep(
        outcome.target,
        settings.mode,
        outcome.scenarios,
        useColor(process.stdout),
      );
      process.stdout.write(`${text}\nResults: ${outcome.root}\n`);
    }
    if (interrupts.stop.aborted) return EXIT.interrupted;
    if (outcome.code === EXIT.failure) {
      printNotice('sweep', failedToRun(outcome.summaries.map((x) => x.summary)));
      return EXIT.failure;
    }
    return gate('sweep', options.threshold, outcome.summaries);
  } finally {
    interrupts.dispose();
  }
}
