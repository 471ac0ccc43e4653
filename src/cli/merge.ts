import { resolve } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { checkedFlagNumber } from '../flagNumber.js';
import { failedToRun, nothingSucceeded } from '../report/failures.js';
import { RESULT_FILES } from '../results/layout.js';
import { printNotice, printProblems, runAction, useColor } from './common.js';
import { gate, thresholdOption } from './report.js';
import { writeHtmlReport } from './run.js';

/** `infergauge merge`: shard runs joined into one run (src/results/merge.ts). */
export function mergeCommand() {
  return new Command('merge')
    .description(
      'Join shard runs (run --shard i/N) into one run: records on one timeline, metrics from all the raw records',
    )
    .argument(
      '<dirs...>',
      'shard run directories, or one directory holding them (e.g. results/shard-0 results/shard-1, or results)',
    )
    .option('--out <dir>', 'where the merged run goes (default: <first dir>-merged)')
    .option('--shards <n>', 'the number of shards to expect (default: the count the shards record)')
    .option(
      '--wait <s>',
      'wait up to this many seconds for every shard to finish (its summary.json), e.g. in a follow-up Kubernetes Job',
    )
    .option('--force', 'merge even when shards are missing or their plans differ')
    .option('--json', 'print the merged summary JSON instead of the table')
    .option('--no-html', 'do not write report.html')
    .addOption(thresholdOption())
    .action((dirs, o) => runAction('merge', () => merge(dirs, o)));
}

type MergeOptions = { out?: string; shards?: string; wait?: string; force?: true; json?: true };

async function merge(
  dirs: string[],
  o: MergeOptions & { html: boolean; threshold?: string[] },
): Promise<number> {
  const problems: string[] = [];
  const expected = checkedFlagNumber(
    o.shards,
    { min: 1, integer: true },
    problems,
    `--shards must be a whole number >= 1 (got "${o.shards}")`,
  );
  const waitS =
    checkedFlagNumber(
      o.wait,
      { min: 0 },
      problems,
      `--wait must be a number of seconds >= 0 (got "${o.wait}")`,
    ) ?? 0;
  if (problems.length > 0) return printProblems('merge', problems);
  // Loaded when the command is chosen, so that other commands start without them.
  const [
    { renderTerminalSummary },
    { checkShards, mergeShards, prepareMergeDir, readShard, waitForShards },
  ] = await Promise.all([import('../report/terminal.js'), import('../results/merge.js')]);
  const out = o.out ?? `${dirs[0].replace(/\/+$/, '')}-merged`;
  const { finished, unfinished, skipped } = await waitForShards(
    dirs,
    expected,
    waitS,
    resolve(out),
  );
  for (const message of skipped) printNotice('merge', message);
  if (unfinished.length > 0) {
    process.stderr.write(
      `infergauge merge: not finished (no ${RESULT_FILES.summary}), left out: ${unfinished.join(', ')}\n`,
    );
  }
  const shards = finished.map(readShard);
  const found = checkShards(shards, expected);
  if (found.length > 0) {
    const lead = o.force ? 'warning' : 'cannot merge';
    process.stderr.write(`infergauge merge: ${lead}:\n  - ${found.join('\n  - ')}\n`);
    if (!o.force) {
      process.stderr.write('  (--force merges what there is)\n');
      return EXIT.failure;
    }
  }
  prepareMergeDir(out);
  const summary = await mergeShards(shards, out, {
    onProblem: (message) => printNotice('merge', `warning: ${message}`),
  });
  if (o.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else {
    const first = shards[0].manifest;
    process.stdout.write(
      `${renderTerminalSummary(summary, {
        color: useColor(process.stdout),
        model: first.model ?? '',
        endpoint: String(first.plan.endpoint ?? ''),
        outDir: out,
        // The server's own numbers, as `run` prints them (the summary keeps a shard's scrape).
        ...(summary.serverMetrics ? { serverMetrics: summary.serverMetrics } : {}),
      })}\nMerged ${shards.length} shards: ${shards.map((s) => s.dir).join(', ')}\n`,
    );
  }
  if (o.html) await writeHtmlReport(out);
  // As for `run`: nothing succeeded (1) before a threshold (3).
  if (nothingSucceeded([summary])) {
    printNotice('merge', failedToRun([summary]));
    return EXIT.failure;
  }
  return gate('merge', o.threshold, [{ name: out, summary }]);
}
