/**
 * `infergauge history`: the runs kept in `<root>/history.db` (listed, filtered), a metric's
 * trend along each series, regression verdicts for CI (exit 3), tags added afterwards, and a
 * rebuild from the directories. The database and its reader load only when the command runs.
 */

import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { tagsField } from '../plan/annotations.js';
import type { HistoryEntry } from '../results/history/entry.js';
import {
  type HistoryOptions,
  type HistorySettings,
  historySettings,
} from '../results/history/options.js';
import { DEFAULT_RESULTS_ROOT } from '../results/layout.js';
import { collect, printNotice, printProblems, runAction, writeOutput } from './common.js';

export function historyCommand() {
  const tag = new Command('tag')
    .description(
      "Add tags to runs after they ran (or remove them with --untag): kept in each run's tags.json and in the database. RUN is a run's id, a session's id (all its points) or a results directory.",
    )
    .argument('<run>', 'run id, session id, or results directory')
    .argument('<tags...>', 'tags to add (or remove)')
    .option('--untag', 'remove the tags instead')
    .action(async (run: string, tags: string[], _o, command) => {
      // --root is history's own option, given before or after `tag`.
      const o = command.optsWithGlobals() as { root?: string; untag?: boolean };
      await runAction('history tag', () => runTag(run, tags, o));
    });
  return new Command('history')
    .description(
      'Every run kept in <root>/history.db (indexed as runs finish): list and filter them, follow a metric over time, flag regressions of the latest runs (exit 3).',
    )
    .option('--root <dir>', `results root holding history.db (default: ./${DEFAULT_RESULTS_ROOT})`)
    .option('--model <glob>', 'model (a glob: * and ? match)')
    .option('--url <glob>', "server URL ('builtin-simulator', 'virtual' for the simulator's)")
    .option('--engine <glob>', 'serving engine (vllm, sglang, ...)')
    .option('--engine-version <glob>', 'engine version')
    .option('--gpu <glob>', 'GPU type')
    .option('--label <glob>', 'run label')
    .addOption(
      new Option('--tag <tag>', 'tag, repeatable: every one must be on the run').argParser(collect),
    )
    .option('--since <date>', 'runs started on or after (2026-12-01, or a time)')
    .option('--until <date>', 'runs started before the end of (2026-12-31, or before a time)')
    .option('--scenario <glob>', 'scenario name')
    .option('--load <glob>', "load: 'closed:8', 'open:20/s', 'closed:*'")
    .option(
      '--kind <glob>',
      'run, sweep-point, probe-point, capacity-step, or the session: sweep, probe, capacity',
    )
    .option('--limit <n>', 'at most this many runs listed (newest first)')
    .addOption(
      new Option(
        '--metric <name>',
        "metric to follow, repeatable: 'ttft.p99', 'itl.p50', 'outputThroughput' (the names of --threshold)",
      ).argParser(collect),
    )
    .option('--html <file>', 'with --metric: also write the trend as an HTML chart')
    .option('--json', 'print JSON instead of tables')
    .option(
      '--regress',
      "judge each series' latest run against its baseline window (exit 3 on a regression)",
    )
    .option(
      '--run <id>',
      "with --regress: judge this run (in its series) instead of each series' latest",
    )
    .option(
      '--baseline <n>',
      'with --regress: the baseline is the previous N runs of the series (default: 5)',
    )
    .option(
      '--baseline-since <date>',
      'with --regress: the baseline is the runs of the series since this date',
    )
    .option(
      '--confidence <level>',
      'with --regress: confidence level of the intervals (default: 0.95)',
    )
    .option('--resamples <n>', 'with --regress: bootstrap resamples (default: 2000)')
    .option('--seed <n>', 'with --regress: bootstrap seed (default: 42)')
    .option(
      '--min-effect <pct>',
      'with --regress: smallest relative change that can be a verdict, in % (default: 1)',
    )
    .option(
      '--summary-margin <pct>',
      "with --regress, runs without per-request records: worse when beyond the baseline's worst run by more than this, in % (default: 5)",
    )
    .option('--reindex', 'rebuild history.db from the results directories')
    .option(
      '--import <files...>',
      "index other tools' result files as runs (vLLM bench serve JSON, GuideLLM benchmarks.json/.yaml, AIPerf profile export): each written as a run directory under <root>/imported/; --tag tags them",
    )
    .addHelpText(
      'after',
      '\nA series is the runs with the same tag, otherwise the same model and URL; within it, the same scenario and load.\nExit codes: 0 done, 1 the root cannot be read, 2 invalid options, 3 a regression (--regress).',
    )
    .addCommand(tag)
    .action(async (o: HistoryOptions) => {
      await runAction('history', () => (o.import ? runImport(o.import, o) : runHistory(o)));
    });
}

const notice = (m: string) => printNotice('history', m);

/** The results root, checked: exit 1 with a sentence when it is not a folder. */
function rootOf(o: { root?: string }): string | undefined {
  const root = resolve(o.root ?? DEFAULT_RESULTS_ROOT);
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    notice(
      `${o.root ?? DEFAULT_RESULTS_ROOT} is not a results root (no such folder): runs save under ./${DEFAULT_RESULTS_ROOT} by default, and under the folder that holds --out DIR; give it with --root`,
    );
    return undefined;
  }
  return root;
}

/** Where the command prints its tables and JSON; tests pass their own. */
export type Out = (text: string) => void;
const stdout: Out = (text) => process.stdout.write(text);

/** `infergauge history`: the exit code. */
export async function runHistory(o: HistoryOptions, out: Out = stdout): Promise<number> {
  const { settings, problems } = historySettings(o);
  if (problems.length > 0) return printProblems('history', problems);
  const root = rootOf(o);
  if (root === undefined) return EXIT.failure;
  const [{ changeHistory, readHistory }, { findRuns, seriesOf }] = await Promise.all([
    import('../results/history/store.js'),
    import('../results/history/query.js'),
  ]);
  if (o.reindex) {
    const rows = await changeHistory(
      root,
      (db) => Number(db.exec('SELECT count(*) FROM runs')[0]?.values[0]?.[0]),
      {
        onNotice: notice,
        rebuild: true,
      },
    );
    notice(`reindexed ${root}/history.db: ${rows} measured point${rows === 1 ? '' : 's'}`);
  }
  const db = await readHistory(root, notice);
  let runs: HistoryEntry[];
  try {
    runs = findRuns(
      db,
      settings.filter,
      o.regress || settings.metrics.length > 0 ? undefined : settings.limit,
    );
  } finally {
    db.close();
  }
  const report = await import('../report/history.js');
  if (o.regress) return regress(root, runs, settings, o, seriesOf, out);
  if (settings.metrics.length > 0) {
    const names = settings.metrics.map((m) => m.name);
    // Trends leave out runs cut short: a partial run is no point of a trend.
    let series = seriesOf(
      runs.filter((r) => !r.interrupted),
      o.tag?.[0],
    );
    if (settings.limit !== undefined)
      series = series.map((s) => ({ ...s, runs: s.runs.slice(-(settings.limit as number)) }));
    if (o.html) {
      const units = Object.fromEntries(
        settings.metrics.map((m) => [m.name, m.unit === 'fraction' ? '' : m.unit]),
      );
      writeOutput(o.html, report.renderTrendHtml(series, names, units));
    }
    if (o.json) {
      out(
        `${JSON.stringify(
          {
            schemaVersion: 1,
            root,
            metrics: names,
            series: series.map((s) => ({
              name: s.name,
              ...(s.tag ? { tag: s.tag } : {}),
              points: s.runs.map((r) => ({
                id: r.id,
                startedAt: r.startedAt,
                dir: r.dir,
                values: Object.fromEntries(names.map((m) => [m, r.metrics[m] ?? null])),
                engine: r.engine,
                engineVersion: r.engineVersion,
              })),
            })),
          },
          null,
          2,
        )}\n`,
      );
    } else out(report.renderTrend(series, names));
    return EXIT.ok;
  }
  if (o.json) out(`${JSON.stringify({ schemaVersion: 1, root, runs }, null, 2)}\n`);
  else out(report.renderRunList(runs, root));
  return EXIT.ok;
}

/** `--regress`: each series' verdict; exit 3 when one regressed. */
async function regress(
  root: string,
  runs: HistoryEntry[],
  s: HistorySettings,
  o: HistoryOptions,
  seriesOf: typeof import('../results/history/query.js').seriesOf,
  out: Out,
): Promise<number> {
  const [{ DEFAULT_REGRESS_METRICS, regressSeries }, report] = await Promise.all([
    import('../results/history/regress.js'),
    import('../report/history.js'),
  ]);
  let series = seriesOf(runs, o.tag?.[0]);
  let candidate: HistoryEntry | undefined;
  if (o.run !== undefined) {
    const want = o.run;
    const matches = runs.filter((r) => r.id === want || r.id.startsWith(want) || r.dir === want);
    const exact = matches.filter((r) => r.id === want || r.dir === want);
    const chosen = exact.length === 1 ? exact : matches;
    if (chosen.length !== 1) {
      notice(
        chosen.length === 0
          ? `--run ${want}: no such run among those the filters select (give its id, as history lists it)`
          : `--run ${want}: ${chosen.length} runs match; give more of the id`,
      );
      return EXIT.invalidOptions;
    }
    candidate = chosen[0];
    series = series.filter((x) => x.runs.includes(candidate as HistoryEntry));
  }
  const options = {
    baseline: s.baseline,
    metrics: s.metrics.length > 0 ? s.metrics : DEFAULT_REGRESS_METRICS,
    bootstrap: s.bootstrap,
    summaryMargin: s.summaryMargin,
  };
  const verdicts = [];
  for (const x of series) {
    // A series' latest run that was cut short is judged on what it measured, and said so.
    verdicts.push(await regressSeries(root, x, options, notice, candidate));
  }
  const regression = verdicts.some((v) => v.regression);
  if (o.json) {
    out(
      `${JSON.stringify(
        {
          schemaVersion: 1,
          root,
          baseline: s.baseline,
          confidence: s.bootstrap.confidence,
          summaryMargin: s.summaryMargin,
          regression,
          verdicts,
        },
        null,
        2,
      )}\n`,
    );
  } else out(report.renderVerdicts(verdicts));
  for (const v of verdicts) {
    for (const m of v.metrics.filter((x) => x.verdict === 'worse')) {
      notice(`regression: ${v.series}: ${m.name} ${report.evidenceText(m)} (${v.candidate.id})`);
    }
  }
  return regression ? EXIT.thresholdFailed : EXIT.ok;
}

/**
 * `history --import FILE...`: each file read as another tool's runs, written as run directories
 * under `<root>/imported/` and indexed as infergauge's own (results/history/changes.ts); `--tag`
 * goes into each one's tags.json. A file that cannot be read is named and the others are still
 * imported (exit 1).
 */
export async function runImport(
  files: string[],
  o: { root?: string; tag?: string[] },
  out: Out = stdout,
): Promise<number> {
  const tags = checkedTags(o.tag ?? [], 'history --import');
  if (tags === undefined) return EXIT.invalidOptions;
  const root = resolve(o.root ?? DEFAULT_RESULTS_ROOT);
  const { importFiles } = await import('../results/history/changes.js');
  const { imported, failed } = await importFiles(root, files, { tags, onNotice: notice });
  for (const { entry, readAs } of imported) out(`${entry.id} ${entry.dir}: ${readAs}\n`);
  return failed > 0 ? EXIT.failure : EXIT.ok;
}

/** `infergauge history tag RUN TAG...`: the exit code. */
export async function runTag(
  run: string,
  tags: string[],
  o: { root?: string; untag?: boolean },
  out: Out = stdout,
): Promise<number> {
  if (checkedTags(tags, 'history tag') === undefined) return EXIT.invalidOptions;
  const root = rootOf(o);
  if (root === undefined) return EXIT.failure;
  const { tagRun } = await import('../results/history/changes.js');
  const entries = await tagRun(root, run, tags, {
    ...(o.untag ? { untag: true } : {}),
    onNotice: notice,
  });
  if (!Array.isArray(entries)) {
    notice(entries.problem);
    return entries.usage ? EXIT.invalidOptions : EXIT.failure;
  }
  for (const e of entries) {
    out(`${e.id} ${e.dir}: ${e.tags.length > 0 ? e.tags.join(', ') : '(no tags)'}\n`);
  }
  return EXIT.ok;
}

/** Tags by the rule `--tag` follows everywhere (plan/annotations.ts); problems printed (exit 2). */
function checkedTags(tags: string[], command: string): string[] | undefined {
  const checked = tagsField(tags);
  if ('value' in checked) return checked.value;
  printProblems(command, [`--tag ${checked.problem}`]);
  return undefined;
}
