import { Command, Option } from '@commander-js/extra-typings';
import { type CompareFlags, compareSettings } from '../analysis/compare.js';
import { EXIT, InfergaugeError } from '../errors.js';
import type { CompareTarget } from '../results/compareInput.js';
import { collect, useColor, writeOutput } from './common.js';

/** Where the command writes; tests pass their own. */
export interface CompareIo {
  out(text: string): void;
  err(text: string): void;
  color: boolean;
  exit(code: number): void;
}

const processIo = (): CompareIo => ({
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  color: useColor(process.stdout),
  exit: (code) => {
    process.exitCode = code;
  },
});

export interface CompareCliOptions extends CompareFlags {
  md?: string;
  html?: string;
  json?: boolean;
}

export function compareCommand(io: CompareIo = processIo()) {
  return new Command('compare')
    .description(
      'Compare runs or sweeps with a baseline: every metric with its change, a bootstrap confidence interval and a verdict (better, worse, no significant change). A is the baseline; each later directory is compared with it.',
    )
    .argument('<dirs...>', 'run or sweep directories: the baseline first, then the candidates')
    .option(
      '--force',
      'compare runs with different loads or workloads (the differences are warned about)',
    )
    .option('--md <file>', 'also write a Markdown report (a compact table for a PR comment)')
    .option('--html <file>', 'also write a self-contained HTML page')
    .option('--json', 'print the comparison as JSON instead of tables')
    .addOption(
      new Option(
        '--threshold <rule>',
        "CI gate on every candidate, repeatable: 'ttft.p99<500', 'outputThroughput>1000', 'failureRate<1%' (exit 3 when one fails)",
      ).argParser(collect),
    )
    .option('--confidence <level>', 'confidence level of the intervals (default: 0.95)')
    .option('--resamples <n>', 'bootstrap resamples (default: 2000)')
    .option('--seed <n>', 'bootstrap seed: the same seed gives the same intervals (default: 42)')
    .option(
      '--min-effect <pct>',
      'smallest relative change that can be a verdict, in % (default: 1)',
    )
    .addHelpText(
      'after',
      '\nExit codes: 0 compared, 1 a directory cannot be read, 2 invalid options or input, or runs not comparable (without --force), 3 a threshold failed.',
    )
    .action(async (dirs: string[], options: CompareCliOptions) => {
      io.exit(await runCompare(dirs, options, io));
    });
}

/** `infergauge compare`: the exit code (0 ok, 1 unreadable, 2 invalid, 3 threshold failed). */
export async function runCompare(
  dirs: string[],
  o: CompareCliOptions,
  io: CompareIo,
): Promise<number> {
  const { options, thresholds, problems } = compareSettings(dirs, o);
  if (problems.length > 0) {
    io.err(`infergauge compare: invalid options\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
    return EXIT.invalidOptions;
  }
  // Loaded when the command is chosen, so that other commands start without them.
  const [
    { compareTargets, renderHtml, renderJson, renderMarkdown, renderTerminal },
    { readCompareTarget },
  ] = await Promise.all([import('../report/compare.js'), import('../results/compareInput.js')]);
  const targets: CompareTarget[] = [];
  for (const dir of dirs) {
    try {
      // The label: the directory as given, less a trailing slash.
      targets.push(await readCompareTarget(dir, dir.replace(/[\\/]+$/, '') || dir));
    } catch (err) {
      if (!(err instanceof InfergaugeError)) throw err;
      io.err(`infergauge compare: ${err.message}\n`);
      return err.exitCode;
    }
  }
  const report = compareTargets(targets, options, thresholds);
  try {
    if (o.md) writeOutput(o.md, renderMarkdown(report));
    if (o.html) writeOutput(o.html, renderHtml(report));
  } catch (err) {
    io.err(`infergauge compare: ${(err as Error).message}\n`);
    return EXIT.failure;
  }
  io.out(o.json ? renderJson(report) : `${renderTerminal(report, io.color)}\n`);
  if (report.candidates.some((c) => c.pairs.some((p) => p.refused))) {
    io.err(
      'infergauge compare: not compared: the runs differ in load or workload (see above); --force compares them anyway\n',
    );
    return EXIT.invalidOptions;
  }
  if (report.candidates.some((c) => c.pairs.length === 0)) {
    io.err('infergauge compare: nothing to compare: no scenario and load level in common\n');
    return EXIT.invalidOptions;
  }
  if (!report.candidates.some((c) => c.thresholds && !c.thresholds.ok)) return EXIT.ok;
  for (const c of report.candidates) {
    for (const f of c.thresholds?.failures ?? []) {
      io.err(`infergauge compare: threshold failed (${c.label}): ${f}\n`);
    }
  }
  return EXIT.thresholdFailed;
}
