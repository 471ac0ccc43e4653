/**
 * `infergauge history`: the runs kept in `<root>/history.db` (listed, filtered), a metric's
 * trend along each series, regression verdicts for CI (exit 3), tags added afterwards, and a
 * rebuild from the directories. The database and its reader load only when the command runs.
 */

import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { type CompareFlags, compareSettings } from '../analysis/compare.js';
import { parseMetricName, ThresholdError } from '../analysis/thresholds.js';
import { EXIT } from '../errors.js';
import { parseFlagNumber } from '../flagNumber.js';
import { tagsField } from '../plan/annotations.js';
import type { HistoryEntry } from '../results/history/entry.js';
import type { HistoryFilter } from '../results/history/query.js';
import type { BaselineWindow, RegressMetric } from '../results/history/regress.js';
import { DEFAULT_RESULTS_ROOT } from '../results/layout.js';
import { collect, printNotice, printProblems, runAction, writeOutput } from './common.js';

export interface HistoryCliOptions extends CompareFlags {
  root?: string;
  model?: string;
  url?: string;
  engine?: string;
  engineVersion?: string;
  gpu?: string;
  label?: string;
  tag?: string[];
  since?: string;
  until?: string;
  scenario?: string;
  load?: string;
  kind?: string;
  limit?: string;
  metric?: string[];
  html?: string;
  json?: boolean;
  regress?: boolean;
  run?: string;
  baseline?: string;
  baselineSince?: string;
  summaryMargin?: string;
  reindex?: boolean;
  import?: string[];
}

/** A date (`2026-12-01`, the whole day) or a time (`2026-12-01T09:00Z`) as an ISO time. */
function isoTime(text: string, flag: string, problems: string[], end = false): string | undefined {
  const day = /^\d{4}-\d{2}-\d{2}$/.test(text);
  const ms = Date.parse(day ? `${text}T00:00:00Z` : text);
  if (!Number.isFinite(ms)) {
    problems.push(
      `${flag} takes a date or a time, e.g. 2026-12-01 or 2026-12-01T09:00:00Z (got "${text}")`,
    );
    return undefined;
  }
  // --until a day: through its end.
  return new Date(day && end ? ms + 86_400_000 : ms).toISOString();
}

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
    .action(async (o: HistoryCliOptions) => {
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

interface Settings {
  filter: HistoryFilter;
  limit?: number;
  metrics: (RegressMetric & { unit: string })[];
  baseline: BaselineWindow;
  summaryMargin: number;
  bootstrap: ReturnType<typeof compareSettings>['options'];
}

/** Every option checked; each problem named (exit 2). */
function settingsOf(o: HistoryCliOptions): { settings: Settings; problems: string[] } {
  const problems: string[] = [];
  const filter: HistoryFilter = {};
  for (const key of [
    'model',
    'url',
    'engine',
    'engineVersion',
    'gpu',
    'label',
    'scenario',
    'load',
    'kind',
  ] as const) {
    if (o[key] !== undefined) filter[key] = o[key];
  }
  // A filter takes any tag as given (a run's may come from a plan): it only matches or not.
  if (o.tag) filter.tags = o.tag;
  if (o.since !== undefined) {
    const t = isoTime(o.since, '--since', problems);
    if (t) filter.since = t;
  }
  if (o.until !== undefined) {
    const t = isoTime(o.until, '--until', problems, true);
    if (t) filter.until = t;
  }
  let limit: number | undefined;
  if (o.limit !== undefined) {
    const n = parseFlagNumber(o.limit);
    if ('value' in n && Number.isInteger(n.value) && n.value > 0) limit = n.value;
    else problems.push(`--limit must be a whole number above 0 (got "${o.limit}")`);
  }
  const metrics: Settings['metrics'] = [];
  for (const m of o.metric ?? []) {
    try {
      const p = parseMetricName(m);
      metrics.push({
        name: p.name,
        metric: p.metric,
        ...(p.stat ? { stat: p.stat } : {}),
        unit: p.unit,
      });
    } catch (err) {
      if (!(err instanceof ThresholdError)) throw err;
      problems.push(...err.problems.map((x) => `--metric ${x}`));
    }
  }
  let baseline: BaselineWindow = { runs: 5 };
  if (o.baseline !== undefined && o.baselineSince !== undefined) {
    problems.push('give --baseline N or --baseline-since DATE, not both');
  } else if (o.baseline !== undefined) {
    const n = parseFlagNumber(o.baseline);
    if ('value' in n && Number.isInteger(n.value) && n.value > 0) baseline = { runs: n.value };
    else problems.push(`--baseline must be a whole number of runs above 0 (got "${o.baseline}")`);
  } else if (o.baselineSince !== undefined) {
    const t = isoTime(o.baselineSince, '--baseline-since', problems);
    if (t) baseline = { since: t };
  }
  let summaryMargin = 0.05;
  if (o.summaryMargin !== undefined) {
    const n = parseFlagNumber(String(o.summaryMargin).replace(/%$/, ''));
    if ('value' in n && n.value >= 0 && n.value < 1000) summaryMargin = n.value / 100;
    else
      problems.push(
        `--summary-margin must be a percentage from 0, e.g. 5 (got "${o.summaryMargin}")`,
      );
  }
  // compare's own checks of its bootstrap flags (a baseline and a candidate stand for its dirs).
  const compare = compareSettings(['baseline', 'latest'], o);
  problems.push(...compare.problems);
  const regressOnly = [
    'run',
    'baseline',
    'baselineSince',
    'confidence',
    'resamples',
    'seed',
    'minEffect',
    'summaryMargin',
  ] as const;
  if (!o.regress) {
    for (const k of regressOnly) {
      if (o[k] !== undefined)
        problems.push(`--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is for --regress`);
    }
  }
  if (o.html !== undefined && metrics.length === 0)
    problems.push('--html draws a trend: name the metric with --metric');
  if (o.reindex && (o.regress || metrics.length > 0)) {
    problems.push(
      '--reindex rebuilds the database and lists it: give --metric and --regress on another call',
    );
  }
  return {
    settings: {
      filter,
      ...(limit !== undefined ? { limit } : {}),
      metrics,
      baseline,
      summaryMargin,
      bootstrap: compare.options,
    },
    problems,
  };
}

/** Where the command prints its tables and JSON; tests pass their own. */
export type Out = (text: string) => void;
const stdout: Out = (text) => process.stdout.write(text);

/** `infergauge history`: the exit code. */
export async function runHistory(o: HistoryCliOptions, out: Out = stdout): Promise<number> {
  const { settings, problems } = settingsOf(o);
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
  s: Settings,
  o: HistoryCliOptions,
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
