import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import {
  evaluateThresholds,
  parseThresholds,
  THRESHOLD_EXIT_CODE,
  type Threshold,
} from '../analysis/thresholds.js';
import { EXIT } from '../errors.js';
import type { LoadSpec } from '../load.js';
import { type RunSummary, summarize } from '../metrics/summary.js';
import { parseSlo } from '../plan/slo.js';
import type { RequestRecord } from '../record.js';
import { vllmBenchResult } from '../report/compat.js';
import { requestsCsv, runsCsv } from '../report/csv.js';
import { renderHtmlReport } from '../report/html.js';
import { loadReportInput } from '../report/load.js';
import { markdownSummary } from '../report/markdown.js';
import { readRecords } from '../results/jsonl.js';

/** A run directory (records.jsonl) found under a results directory. */
export interface SavedRun {
  name: string;
  dir: string;
  records: RequestRecord[];
  summary: RunSummary;
  manifest: Record<string, unknown>;
}

/**
 * Every run under `dir` (itself, scenario folders, sweep points, probe points), each
 * summarised again from its raw records: a report never trusts a printed table.
 */
export async function loadSavedRuns(dir: string): Promise<SavedRun[]> {
  const dirs: string[] = [];
  const walk = (d: string, depth: number) => {
    if (existsSync(join(d, 'records.jsonl'))) dirs.push(d);
    if (depth === 0) return;
    for (const entry of readdirSync(d).sort()) {
      const sub = join(d, entry);
      if (statSync(sub).isDirectory()) walk(sub, depth - 1);
    }
  };
  walk(dir, 3);
  const runs: SavedRun[] = [];
  for (const d of dirs) {
    const records: RequestRecord[] = [];
    for await (const r of readRecords(join(d, 'records.jsonl'))) records.push(r);
    const saved = readJson(join(d, 'summary.json')) as
      | (RunSummary & { load: LoadSpec & { meanConcurrency?: number } })
      | undefined;
    const manifest = (readJson(join(d, 'manifest.json')) ?? {}) as Record<string, unknown>;
    const load = savedLoad(saved, manifest);
    if (!load) throw new Error(`${d}: no summary.json or manifest.json says what load produced it`);
    const summary = summarize(records, {
      load,
      ...(saved?.goodput ? { slo: parseSlo(saved.goodput.slo) } : {}),
    });
    // Client health was measured live; everything else comes back from the records.
    if (saved?.clientHealth) summary.clientHealth = saved.clientHealth;
    if (saved?.interrupted) summary.interrupted = saved.interrupted;
    const name = relative(dir, d) || basename(d);
    runs.push({ name, dir: d, records, summary, manifest });
  }
  return runs;
}

function savedLoad(
  saved: { load: LoadSpec & { meanConcurrency?: number } } | undefined,
  manifest: Record<string, unknown>,
): LoadSpec | undefined {
  if (saved?.load) {
    const { meanConcurrency: _, ...load } = saved.load;
    return load as LoadSpec;
  }
  return (manifest.plan as { load?: LoadSpec } | undefined)?.load;
}

/** A JSON file's contents; undefined when the file does not exist. */
export function readJson(path: string): unknown {
  return existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : undefined;
}

/** `--threshold` is repeatable. */
export function thresholdOption(): Option {
  return new Option(
    '--threshold <rule>',
    "CI gate, repeatable: 'ttft.p99<500', 'outputThroughput>1000', 'failureRate<0.01' (exit 3 when one fails)",
  ).argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
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
  return THRESHOLD_EXIT_CODE;
}

export function reportCommand() {
  return new Command('report')
    .description(
      'Re-render a run, sweep, probe or capacity directory from its saved raw records: HTML (default: DIR/report.html), CSV, Markdown, vLLM-compatible JSON; check CI thresholds.',
    )
    .argument('<dir>', 'results directory of a run, sweep, probe or capacity')
    .option('--html <file>', 'write the HTML report here (default: <dir>/report.html)')
    .option(
      '--csv <dir>',
      'write requests.csv (one row per request) and runs.csv (one row per run) here',
    )
    .option('--md <file>', 'write a Markdown summary (for a CI job summary or a PR comment)')
    .option('--compat <format>', 'also write the result JSON of another tool: vllm (bench serve)')
    .option('--compat-out <file>', 'where --compat writes (default: <dir>/vllm-bench-result.json)')
    .addOption(thresholdOption())
    .action(async (dir, o) => {
      process.exitCode = await report(dir, o as ReportOptions);
    });
}

interface ReportOptions {
  html?: string;
  csv?: string;
  md?: string;
  compat?: string;
  compatOut?: string;
  threshold?: string[];
}

async function report(dir: string, o: ReportOptions): Promise<number> {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    process.stderr.write(`infergauge report: ${dir} is not a directory\n`);
    return EXIT.invalidOptions;
  }
  if (o.compat !== undefined && o.compat !== 'vllm') {
    process.stderr.write(
      `infergauge report: --compat ${o.compat} is not known; use --compat vllm\n`,
    );
    return EXIT.invalidOptions;
  }
  let runs: SavedRun[];
  try {
    runs = await loadSavedRuns(dir);
    const html = o.html ?? join(dir, 'report.html');
    writeFileSync(html, renderHtmlReport(await loadReportInput(dir)));
    process.stdout.write(`HTML report: ${html}\n`);
  } catch (err) {
    process.stderr.write(`infergauge report: ${(err as Error).message}\n`);
    return EXIT.failure;
  }
  if (o.csv !== undefined) {
    mkdirSync(o.csv, { recursive: true });
    writeFileSync(
      join(o.csv, 'requests.csv'),
      runs.length === 1
        ? requestsCsv(runs[0].records)
        : runs.map((r) => `# ${r.name}\r\n${requestsCsv(r.records)}`).join(''),
    );
    writeFileSync(join(o.csv, 'runs.csv'), runsCsv(runs));
    process.stdout.write(`CSV: ${join(o.csv, 'requests.csv')}, ${join(o.csv, 'runs.csv')}\n`);
  }
  if (o.md !== undefined) {
    writeFileSync(o.md, markdownSummary(`infergauge: ${basename(dir)}`, runs));
    process.stdout.write(`Markdown: ${o.md}\n`);
  }
  if (o.compat === 'vllm') {
    if (runs.length !== 1) {
      process.stderr.write(
        `infergauge report: --compat vllm writes one run's result; ${dir} holds ${runs.length}: pass one of its run folders\n`,
      );
      return EXIT.invalidOptions;
    }
    const run = runs[0];
    const m = run.manifest as {
      model?: string;
      startedAt?: string;
      plan?: { backend?: string; tokenizer?: string };
    };
    const out = o.compatOut ?? join(dir, 'vllm-bench-result.json');
    const result = vllmBenchResult(run.records, run.summary, {
      model: m.model ?? 'unknown',
      backend: m.plan?.backend === 'openai' ? 'openai-chat' : (m.plan?.backend ?? 'openai'),
      tokenizer: m.plan?.tokenizer ?? 'words',
      date: (m.startedAt ?? new Date().toISOString()).replace(/\.\d+Z$/, ''),
    });
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`vLLM bench result: ${out}\n`);
  }
  return gate('report', o.threshold, runs);
}
