import { statSync } from 'node:fs';
import { basename } from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { evaluateThresholds, parseThresholds, type Threshold } from '../analysis/thresholds.js';
import { EXIT } from '../errors.js';
import type { RunSummary } from '../metrics/summary.js';
import { resultPath } from '../results/layout.js';
import { writeSummary } from '../results/runFiles.js';
import {
  collect,
  printNotice,
  printProblems,
  printWarnings,
  runAction,
  writeOutput,
} from './common.js';

const isFile = (path: string) => {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

/** `--threshold` is repeatable. */
export function thresholdOption(): Option {
  return new Option(
    '--threshold <rule>',
    "CI gate, repeatable: 'ttft.p99<500', 'outputThroughput>1000', 'failureRate<0.01' (exit 3 when one fails)",
  ).argParser(collect);
}

/** Checks thresholds on named summaries; prints each failure; the exit code to use. */
export function gate(
  command: string,
  rules: string[] | undefined,
  runs: { name: string; summary: RunSummary }[],
): number {
  if (!rules || rules.length === 0) return EXIT.ok;
  let thresholds: Threshold[];
  try {
    thresholds = parseThresholds(rules);
  } catch (err) {
    process.stderr.write(`infergauge ${command}: invalid --threshold: ${(err as Error).message}\n`);
    return EXIT.invalidOptions;
  }
  let failed = 0;
  for (const { name, summary } of runs) {
    const result = evaluateThresholds(summary, thresholds);
    for (const r of result.results.filter((x) => !x.ok)) {
      failed++;
      process.stderr.write(
        `infergauge ${command}: threshold failed${runs.length > 1 ? ` (${name})` : ''}: ${r.message}\n`,
      );
    }
  }
  if (failed === 0) {
    process.stderr.write(`infergauge ${command}: ${thresholds.length} threshold(s) met\n`);
    return EXIT.ok;
  }
  return EXIT.thresholdFailed;
}

export function reportCommand() {
  return new Command('report')
    .description(
      "Re-render a run, sweep, probe or capacity directory from its saved raw records: HTML (default: DIR/report.html), CSV, Markdown, vLLM-compatible JSON, llm-d's Benchmark Report; check CI thresholds.",
    )
    .argument(
      '<dir>',
      "results directory of a run, sweep, probe or capacity, or another tool's result file (vLLM bench serve JSON, GuideLLM benchmarks.json/.yaml, AIPerf profile export)",
    )
    .option('--html <file>', 'write the HTML report here (default: <dir>/report.html)')
    .option(
      '--csv <dir>',
      'write requests.csv (one row per request) and runs.csv (one row per run) here',
    )
    .option('--md <file>', 'write a Markdown summary (for a CI job summary or a PR comment)')
    .option(
      '--compat <format>',
      "also write another tool's result: vllm (bench serve JSON), llm-d (Benchmark Report v0.2 YAML, one per run)",
    )
    .option(
      '--compat-out <file>',
      "where --compat writes one run's result (default: <dir>/vllm-bench-result.json, <run>/benchmark_report_v0.2,_infergauge.yaml)",
    )
    .option(
      '--out <dir>',
      "with another tool's result file: where its run directory is written (default: <file>.infergauge beside it; an earlier import of the same file there is replaced)",
    )
    .option(
      '--write-summary',
      'write summary.json for a run that was killed before it wrote one (rebuilt from its records)',
    )
    .addOption(thresholdOption())
    .action((dir, o) => runAction('report', () => report(dir, o as ReportOptions)));
}

interface ReportOptions {
  html?: string;
  csv?: string;
  md?: string;
  compat?: string;
  compatOut?: string;
  writeSummary?: boolean;
  threshold?: string[];
  out?: string;
}

/**
 * Another tool's result file made a run directory (results/foreign/materialise.ts), which the
 * report then reads as its own; what does not translate is said once, on stderr.
 */
async function importForReport(file: string, out: string | undefined): Promise<string> {
  const [{ FOREIGN_FORMAT_NAMES }, { importAsRunDirectory }] = await Promise.all([
    import('../results/foreign/index.js'),
    import('../results/foreign/materialise.js'),
  ]);
  const { dir, runs } = await importAsRunDirectory(file, out);
  for (const run of runs) {
    const how = run.perRequest
      ? 'per request'
      : 'summary-only (statistics, no per-request figures)';
    printNotice('report', `${run.source}: read as ${FOREIGN_FORMAT_NAMES[run.format]}, ${how}`);
    for (const note of run.notes) printNotice('report', `  ${note}`);
  }
  process.stdout.write(`Run directory: ${dir}\n`);
  return dir;
}

async function report(dir: string, o: ReportOptions): Promise<number> {
  // Loaded when the command is chosen (charts, schemas), so that other commands start without them.
  const [
    { vllmBenchResult },
    { llmdBenchmarkReport, llmdReportYaml },
    { requestsCsvFile, runsCsv },
    { renderHtmlReport },
    { markdownSummary },
    { loadReportInput },
    { findRunDirs, isDirectory, loadSavedRuns, readRunRecords },
    { resultKind },
  ] = await Promise.all([
    import('../report/compat.js'),
    import('../report/llmd.js'),
    import('../report/csv.js'),
    import('../report/html.js'),
    import('../report/markdown.js'),
    import('../results/load.js'),
    import('../results/reader.js'),
    import('../results/layout.js'),
  ]);
  // Everything that can be refused is refused before anything is written: a bad --threshold or
  // --compat once left a fresh report.html behind an exit 2.
  if (isFile(dir)) dir = await importForReport(dir, o.out);
  if (!isDirectory(dir)) return printProblems('report', [`${dir} is not a directory`]);
  const problems: string[] = [];
  if (o.compat !== undefined && o.compat !== 'vllm' && o.compat !== 'llm-d') {
    problems.push(`--compat ${o.compat} is not known; use --compat vllm or --compat llm-d`);
  }
  if (o.compat === 'llm-d' && o.compatOut !== undefined && findRunDirs(dir).length !== 1) {
    // llm-d's format is one report per run (a stage): each lands in its own run folder.
    problems.push(
      `--compat-out names one report; ${dir} holds several runs: leave it out to write each run's report in its folder`,
    );
  }
  if (o.compat === 'vllm') {
    const held = findRunDirs(dir).length;
    if (held !== 1)
      problems.push(
        `--compat vllm writes one run's result; ${dir} holds ${held}: pass one of its run folders`,
      );
  }
  try {
    if (o.threshold?.length) parseThresholds(o.threshold);
  } catch (err) {
    problems.push(`invalid --threshold: ${(err as Error).message}`);
  }
  if (problems.length > 0) return printProblems('report', problems);
  // A killed run (no summary, a torn last line) is reported from its records, with a warning.
  const said = new Set<string>();
  const warn = (message: string) => {
    if (!said.has(message)) printWarnings('report', [message]);
    said.add(message);
  };
  // One streaming pass over each run's records: its summary again, its chart data (a run or
  // the scenarios of one: a sweep's or a probe's report draws from its table) and its rows of
  // requests.csv, written as they pass.
  const kind = resultKind(dir);
  const csv = o.csv !== undefined ? resultPath(o.csv, 'requestsCsv') : undefined;
  if (o.csv !== undefined) writeOutput(o.csv);
  const csvFile = csv ? requestsCsvFile(csv) : undefined;
  let runs: Awaited<ReturnType<typeof loadSavedRuns>>;
  try {
    runs = await loadSavedRuns(dir, warn, {
      // The HTML draws the saved summaries: only the tables and the gate need them again.
      summarize:
        o.csv !== undefined ||
        o.md !== undefined ||
        o.compat !== undefined ||
        (o.threshold?.length ?? 0) > 0,
      charts: kind === undefined || kind === 'run' || kind === 'scenarios',
      ...(csvFile ? { sink: csvFile.sink } : {}),
    });
  } finally {
    csvFile?.close();
  }
  if (o.writeSummary) {
    for (const r of runs.filter((run) => run.unfinished)) {
      writeSummary(r.dir, r.summary, undefined);
      process.stdout.write(`Summary: ${resultPath(r.dir, 'summary')} (rebuilt)\n`);
    }
  }
  const html = o.html ?? resultPath(dir, 'report');
  writeOutput(html, renderHtmlReport(await loadReportInput(dir, warn, { runs })));
  process.stdout.write(`HTML report: ${html}\n`);
  if (o.csv !== undefined) {
    const table = resultPath(o.csv, 'runsCsv');
    writeOutput(table, runsCsv(runs));
    process.stdout.write(`CSV: ${csv}, ${table}\n`);
  }
  if (o.md !== undefined) {
    writeOutput(o.md, markdownSummary(`infergauge: ${basename(dir)}`, runs));
    process.stdout.write(`Markdown: ${o.md}\n`);
  }
  if (o.compat === 'vllm') {
    const [{ summary, manifest: m }] = runs;
    const out = o.compatOut ?? resultPath(dir, 'vllmBench');
    const backend = m.plan?.backend as string | undefined;
    // vLLM's result lists every request's token gaps: it needs the records whole.
    const records = await readRunRecords(runs[0].dir);
    const result = vllmBenchResult(records, summary, {
      model: m.model ?? 'unknown',
      backend: backend === 'openai' ? 'openai-chat' : (backend ?? 'openai'),
      tokenizer: (m.plan?.tokenizer as string | undefined) ?? 'words',
      date: (m.startedAt ?? new Date().toISOString()).replace(/\.\d+Z$/, ''),
    });
    writeOutput(out, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`vLLM bench result: ${out}\n`);
  }
  if (o.compat === 'llm-d') {
    for (const [index, run] of runs.entries()) {
      const out = o.compatOut ?? resultPath(run.dir, 'llmdReport');
      const records = await readRunRecords(run.dir);
      const report = llmdBenchmarkReport({
        summary: run.summary,
        manifest: run.manifest,
        records,
        name: run.name,
        ...(runs.length > 1 ? { stage: index } : {}),
      });
      writeOutput(out, llmdReportYaml(report));
      process.stdout.write(`llm-d benchmark report: ${out}\n`);
    }
  }
  return gate('report', o.threshold, runs);
}
