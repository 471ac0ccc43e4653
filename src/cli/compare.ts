import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import Table from 'cli-table3';
import pc from 'picocolors';
import {
  type BootstrapOptions,
  compareUnits,
  DEFAULT_BOOTSTRAP,
  type MetricComparison,
  type MetricUnit,
  type PairComparison,
  pairUnits,
  RunSampleBuilder,
  type RunUnit,
  VERDICT_TEXT,
  type Verdict,
  type WorkloadFacts,
} from '../analysis/compare.js';
import {
  evaluateThresholdsOnPoints,
  parseThresholds,
  type SweepThresholdEvaluation,
  THRESHOLD_EXIT_CODE,
  type Threshold,
  ThresholdError,
} from '../analysis/thresholds.js';
import type { LoadSpec } from '../load.js';
import type { SloCondition } from '../metrics/slo.js';
import { type RunSummary, SummaryBuilder } from '../metrics/summary.js';
import { readRecords } from '../results/jsonl.js';

/** Exit codes of `infergauge compare`. */
export const COMPARE_EXIT = {
  ok: 0,
  /** A directory (or a file in it) cannot be read. */
  unreadable: 1,
  /** Invalid options, a directory that is not a run or sweep, runs that are not comparable. */
  invalid: 2,
  threshold: THRESHOLD_EXIT_CODE,
} as const;

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
  color: process.stdout.isTTY === true,
  exit: (code) => {
    process.exitCode = code;
  },
});

export interface CompareCliOptions {
  force?: boolean;
  md?: string;
  html?: string;
  json?: boolean;
  threshold?: string[];
  confidence?: string;
  resamples?: string;
  seed?: string;
  minEffect?: string;
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
      ).argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]),
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

// ---------------------------------------------------------------------------------------------
// Reading run and sweep directories.
// ---------------------------------------------------------------------------------------------

/** A directory that is not what compare reads (exit 2). */
class InputError extends Error {}
/** A directory or file that cannot be read (exit 1). */
class UnreadableError extends Error {}

interface LoadedUnit extends RunUnit {
  /** The run summary of each run behind the unit (several for pooled sweep repeats). */
  summaries: { name: string; summary: RunSummary }[];
}

export interface CompareTarget {
  dir: string;
  label: string;
  kind: 'run' | 'scenarios' | 'sweep';
  units: LoadedUnit[];
  warnings: string[];
}

function readJsonFile(path: string): Record<string, unknown> | undefined {
  if (!existsSync(path)) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UnreadableError(`cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value !== 'object' || value === null) throw new Error('not a JSON object');
    return value as Record<string, unknown>;
  } catch (err) {
    throw new UnreadableError(`cannot read ${path}: ${(err as Error).message}`);
  }
}

const str = (x: unknown) => (typeof x === 'string' ? x : undefined);

function workloadFacts(manifest: Record<string, unknown> | undefined): {
  facts: WorkloadFacts;
  scenario?: string;
  slo?: SloCondition[];
} {
  if (!manifest) return { facts: {} };
  const plan = (manifest.plan ?? {}) as Record<string, unknown>;
  const workload = (manifest.workload ?? {}) as Record<string, unknown>;
  const server = (manifest.server ?? {}) as Record<string, unknown>;
  const described = str(workload.scenario);
  const colon = described?.indexOf(': ') ?? -1;
  const facts: WorkloadFacts = {};
  const set = <K extends keyof WorkloadFacts>(k: K, v: WorkloadFacts[K] | undefined) => {
    if (v !== undefined) facts[k] = v;
  };
  set('endpoint', str(plan.endpoint));
  set('backend', str(plan.backend));
  set('lengths', described && colon >= 0 ? described.slice(colon + 2) : described);
  set(
    'dataset',
    str((plan.dataset as { path?: unknown } | undefined)?.path)
      ?.split(/[\\/]/)
      .pop(),
  );
  set(
    'trace',
    str((plan.trace as { path?: unknown } | undefined)?.path)
      ?.split(/[\\/]/)
      .pop(),
  );
  set('model', str(manifest.model));
  set('tokenizer', str(workload.tokenizer) ?? str(plan.tokenizer));
  if (typeof plan.ignoreEos === 'boolean') facts.ignoreEos = plan.ignoreEos;
  if (typeof plan.temperature === 'number') facts.temperature = plan.temperature;
  set('server', str(server.simulator) ?? str(server.url));
  return {
    facts,
    ...(described && colon >= 0 ? { scenario: described.slice(0, colon) } : {}),
    ...(Array.isArray(plan.slo) ? { slo: plan.slo as SloCondition[] } : {}),
  };
}

function savedLoad(
  summary: Record<string, unknown> | undefined,
  manifest: Record<string, unknown> | undefined,
): LoadSpec | undefined {
  const fromSummary = summary?.load as (LoadSpec & { meanConcurrency?: number }) | undefined;
  if (fromSummary && typeof fromSummary === 'object' && 'mode' in fromSummary) {
    const { meanConcurrency: _, ...load } = fromSummary;
    return load as LoadSpec;
  }
  const fromPlan = (manifest?.plan as { load?: LoadSpec } | undefined)?.load;
  return fromPlan && typeof fromPlan === 'object' && 'mode' in fromPlan ? fromPlan : undefined;
}

/**
 * Reads one or more run folders (several: repeats of a sweep level, pooled) into one unit.
 */
async function readRunFolders(
  folders: string[],
  label: string,
  scenarioHint: string | undefined,
  extra: WorkloadFacts,
  warnings: string[],
): Promise<LoadedUnit> {
  const builder = new RunSampleBuilder();
  const summaries: LoadedUnit['summaries'] = [];
  let load: LoadSpec | undefined;
  let facts: WorkloadFacts = {};
  let scenario = scenarioHint;
  for (const [index, folder] of folders.entries()) {
    const recordsPath = join(folder, 'records.jsonl');
    if (!existsSync(recordsPath)) throw new InputError(`${folder}: no records.jsonl`);
    const savedSummary = readJsonFile(join(folder, 'summary.json'));
    const manifest = readJsonFile(join(folder, 'manifest.json'));
    const folderLoad = savedLoad(savedSummary, manifest);
    if (!folderLoad) {
      throw new InputError(
        `${folder}: records.jsonl, but no summary.json or manifest.json says what load produced it`,
      );
    }
    load ??= folderLoad;
    const w = workloadFacts(manifest);
    if (index === 0) {
      facts = w.facts;
      scenario ??= w.scenario;
    }
    if (index > 0) builder.segment();
    const summaryBuilder = savedSummary
      ? undefined
      : new SummaryBuilder({ load: folderLoad, ...(w.slo ? { slo: w.slo } : {}) });
    let bad = 0;
    try {
      for await (const record of readRecords(recordsPath, () => {
        bad++;
      })) {
        builder.add(record);
        summaryBuilder?.add(record);
      }
    } catch (err) {
      throw new UnreadableError(`cannot read ${recordsPath}: ${(err as Error).message}`);
    }
    if (bad > 0) warnings.push(`${recordsPath}: ${bad} unreadable line(s) skipped`);
    summaries.push({
      name: folders.length > 1 ? `${label} #${index + 1}` : label,
      summary:
        (savedSummary as unknown as RunSummary | undefined) ??
        (summaryBuilder as SummaryBuilder).build(),
    });
  }
  return {
    label,
    scenario: scenario ?? 'run',
    load: load as LoadSpec,
    workload: { ...extra, ...facts },
    sample: builder.build(),
    summaries,
  };
}

const POINT_FOLDER = /^([cr])(\d+(?:\.\d+)?)(?:-r(\d+))?$/;

/** Reads a run, a multi-scenario run or a sweep directory. */
export async function readCompareTarget(dir: string, label = dir): Promise<CompareTarget> {
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw new UnreadableError(
      `cannot read ${dir}: ${code === 'ENOENT' ? 'no such directory' : (err as Error).message}`,
    );
  }
  if (!isDir) throw new InputError(`${dir} is a file: give a run or sweep directory`);
  const warnings: string[] = [];
  const list = (d: string) => {
    try {
      return readdirSync(d).sort();
    } catch (err) {
      throw new UnreadableError(`cannot read ${d}: ${(err as Error).message}`);
    }
  };
  list(dir); // unreadable (permissions) fails here, before anything else
  const sweep = readJsonFile(join(dir, 'sweep.json'));
  if (sweep) {
    const described = Array.isArray(sweep.scenarios)
      ? (sweep.scenarios as { scenario?: unknown }[])
          .map((s) => str(s.scenario))
          .filter((s) => s !== undefined)
      : [];
    const target = str(sweep.target);
    const units: LoadedUnit[] = [];
    for (const scenario of described) {
      const sdir = join(dir, scenario);
      if (!existsSync(sdir)) {
        warnings.push(`${sdir}: missing (scenario ${scenario} of sweep.json)`);
        continue;
      }
      const byTag = new Map<
        string,
        { level: number; folders: { repeat: number; path: string }[] }
      >();
      for (const entry of list(sdir)) {
        const m = POINT_FOLDER.exec(entry);
        if (!m || !existsSync(join(sdir, entry, 'records.jsonl'))) continue;
        const tag = `${m[1]}${m[2]}`;
        const slot = byTag.get(tag) ?? { level: Number(m[2]), folders: [] };
        slot.folders.push({ repeat: m[3] ? Number(m[3]) : 0, path: join(sdir, entry) });
        byTag.set(tag, slot);
      }
      const tags = [...byTag.entries()].sort((x, y) => x[1].level - y[1].level);
      for (const [tag, slot] of tags) {
        const folders = slot.folders.sort((x, y) => x.repeat - y.repeat).map((f) => f.path);
        units.push(
          await readRunFolders(
            folders,
            `${label}/${scenario}/${tag}`,
            scenario,
            target ? { server: target } : {},
            warnings,
          ),
        );
      }
    }
    if (units.length === 0) {
      throw new InputError(
        `${dir}: sweep.json, but no point folders with records.jsonl (<scenario>/c<level>/ or r<rate>/)`,
      );
    }
    return { dir, label, kind: 'sweep', units, warnings };
  }
  const scenarios = readJsonFile(join(dir, 'scenarios.json'));
  if (scenarios && !existsSync(join(dir, 'records.jsonl'))) {
    const names = Array.isArray(scenarios.scenarios)
      ? (scenarios.scenarios as { scenario?: unknown }[])
          .map((s) => str(s.scenario))
          .filter((s) => s !== undefined)
      : [];
    const units: LoadedUnit[] = [];
    for (const name of names) {
      const sdir = join(dir, name);
      if (!existsSync(join(sdir, 'records.jsonl'))) {
        throw new InputError(`${sdir}: no records.jsonl (scenario ${name} of scenarios.json)`);
      }
      units.push(await readRunFolders([sdir], `${label}/${name}`, name, {}, warnings));
    }
    if (units.length === 0) throw new InputError(`${dir}: scenarios.json lists no scenario`);
    return { dir, label, kind: 'scenarios', units, warnings };
  }
  if (!existsSync(join(dir, 'records.jsonl'))) {
    throw new InputError(
      `${dir}: not a run or sweep directory: it has no records.jsonl, scenarios.json or sweep.json`,
    );
  }
  const unit = await readRunFolders([dir], label, undefined, {}, warnings);
  return { dir, label, kind: 'run', units: [unit], warnings };
}

// ---------------------------------------------------------------------------------------------
// The command.
// ---------------------------------------------------------------------------------------------

export interface CandidateComparison {
  label: string;
  dir: string;
  pairs: PairComparison[];
  /** Units of one side without a match on the other (`chat c128`). */
  onlyBaseline: string[];
  onlyCandidate: string[];
  thresholds?: SweepThresholdEvaluation;
}

export interface CompareReport {
  schemaVersion: 1;
  baseline: { label: string; dir: string };
  options: BootstrapOptions & { force: boolean };
  candidates: CandidateComparison[];
  warnings: string[];
  /** The thresholds as written, when any were given. */
  thresholds?: string[];
}

function parseOptions(
  o: CompareCliOptions,
  problems: string[],
): BootstrapOptions & { force: boolean } {
  const number = (flag: string, text: string | undefined, fallback: number) => {
    if (text === undefined) return fallback;
    const n = Number(String(text).replace(/%$/, ''));
    if (!Number.isFinite(n)) problems.push(`${flag} must be a number (got "${text}")`);
    return Number.isFinite(n) ? n : fallback;
  };
  let confidence = number('--confidence', o.confidence, DEFAULT_BOOTSTRAP.confidence);
  if (o.confidence !== undefined && (String(o.confidence).endsWith('%') || confidence > 1)) {
    confidence /= 100;
  }
  if (!(confidence >= 0.5 && confidence < 1)) {
    problems.push(
      `--confidence must be between 0.5 and 1, e.g. 0.95 or 95% (got "${o.confidence}")`,
    );
  }
  const resamples = number('--resamples', o.resamples, DEFAULT_BOOTSTRAP.resamples);
  if (!Number.isInteger(resamples) || resamples < 100 || resamples > 100_000) {
    problems.push(`--resamples must be a whole number from 100 to 100,000 (got "${o.resamples}")`);
  }
  const seed = number('--seed', o.seed, DEFAULT_BOOTSTRAP.seed);
  if (!Number.isInteger(seed) || seed < 0) {
    problems.push(`--seed must be a whole number >= 0 (got "${o.seed}")`);
  }
  const minEffect = number('--min-effect', o.minEffect, DEFAULT_BOOTSTRAP.minEffect * 100) / 100;
  if (!(minEffect >= 0 && minEffect < 1)) {
    problems.push(`--min-effect must be a percentage from 0 to 100, e.g. 1 (got "${o.minEffect}")`);
  }
  return { confidence, resamples, seed, minEffect, force: o.force === true };
}

/** `infergauge compare`: the exit code (0 ok, 1 unreadable, 2 invalid, 3 threshold failed). */
export async function runCompare(
  dirs: string[],
  o: CompareCliOptions,
  io: CompareIo,
): Promise<number> {
  const problems: string[] = [];
  const options = parseOptions(o, problems);
  let thresholds: Threshold[] | undefined;
  if (o.threshold && o.threshold.length > 0) {
    try {
      thresholds = parseThresholds(o.threshold);
    } catch (err) {
      if (!(err instanceof ThresholdError)) throw err;
      problems.push(...err.problems.map((p) => `--threshold ${p}`));
    }
  }
  if (dirs.length < 2) {
    problems.push(
      `give a baseline and at least one directory to compare with it (got ${dirs.length}): infergauge compare A B [C ...]`,
    );
  }
  if (problems.length > 0) {
    io.err(`infergauge compare: invalid options\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
    return COMPARE_EXIT.invalid;
  }
  const targets: CompareTarget[] = [];
  for (const dir of dirs) {
    try {
      targets.push(await readCompareTarget(dir, labelOf(dir)));
    } catch (err) {
      if (err instanceof InputError) {
        io.err(`infergauge compare: ${err.message}\n`);
        return COMPARE_EXIT.invalid;
      }
      if (err instanceof UnreadableError) {
        io.err(`infergauge compare: ${err.message}\n`);
        return COMPARE_EXIT.unreadable;
      }
      throw err;
    }
  }
  const [baseline, ...candidates] = targets;
  const report: CompareReport = {
    schemaVersion: 1,
    baseline: { label: baseline.label, dir: baseline.dir },
    options,
    candidates: [],
    warnings: targets.flatMap((t) => t.warnings),
    ...(thresholds ? { thresholds: thresholds.map((t) => t.text) } : {}),
  };
  for (const candidate of candidates) {
    const pairing = pairUnits(baseline.units, candidate.units);
    const pairs = pairing.pairs.map(([a, b]) => compareUnits(a, b, options));
    const entry: CandidateComparison = {
      label: candidate.label,
      dir: candidate.dir,
      pairs,
      onlyBaseline: pairing.onlyBaseline,
      onlyCandidate: pairing.onlyCandidate,
    };
    if (thresholds) {
      entry.thresholds = evaluateThresholdsOnPoints(
        candidate.units.flatMap((u) => u.summaries),
        thresholds,
      );
    }
    report.candidates.push(entry);
  }
  const refused = report.candidates.some((c) => c.pairs.some((p) => p.refused));
  const nothing = report.candidates.some((c) => c.pairs.length === 0);
  const thresholdFailed = report.candidates.some((c) => c.thresholds && !c.thresholds.ok);
  try {
    if (o.md) writeOut(o.md, renderMarkdown(report));
    if (o.html) writeOut(o.html, renderHtml(report));
  } catch (err) {
    io.err(`infergauge compare: ${(err as Error).message}\n`);
    return COMPARE_EXIT.unreadable;
  }
  if (o.json) io.out(`${JSON.stringify(report, jsonReplacer, 2)}\n`);
  else io.out(`${renderTerminal(report, io.color)}\n`);
  if (refused) {
    io.err(
      'infergauge compare: not compared: the runs differ in load or workload (see above); --force compares them anyway\n',
    );
    return COMPARE_EXIT.invalid;
  }
  if (nothing) {
    io.err('infergauge compare: nothing to compare: no scenario and load level in common\n');
    return COMPARE_EXIT.invalid;
  }
  if (thresholdFailed) {
    for (const c of report.candidates) {
      for (const f of c.thresholds?.failures ?? []) {
        io.err(`infergauge compare: threshold failed (${c.label}): ${f}\n`);
      }
    }
    return COMPARE_EXIT.threshold;
  }
  return COMPARE_EXIT.ok;
}

function labelOf(dir: string): string {
  return dir.replace(/[\\/]+$/, '') || dir;
}

function writeOut(path: string, text: string): void {
  try {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  } catch (err) {
    throw new Error(`cannot write ${path}: ${(err as Error).message}`);
  }
}

/** Infinity and NaN as strings in JSON (JSON.stringify would write null and hide which). */
function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Formatting.
// ---------------------------------------------------------------------------------------------

function digitsFor(x: number): number {
  const a = Math.abs(x);
  return a >= 100 ? 1 : a >= 10 ? 2 : a >= 1 ? 3 : 4;
}

function num(x: number, digits: number): string {
  return x.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

export function formatValue(x: number | null, unit: MetricUnit): string {
  if (x === null || !Number.isFinite(x)) return '-';
  if (unit === 'fraction') return `${num(x * 100, 2)}%`;
  return num(x, digitsFor(x));
}

/** A sign in front unless the number reads as zero at the digits shown. */
function signed(text: string, x: number): string {
  const bare = text.replace(/^-/, '');
  if (!/[1-9]/.test(bare)) return bare;
  return x > 0 ? `+${bare}` : x < 0 ? `\u2212${bare}` : bare;
}

export function formatDelta(x: number | null, unit: MetricUnit, reference?: number): string {
  if (x === null || !Number.isFinite(x)) return x === null ? '-' : String(x);
  if (unit === 'fraction') return signed(`${num(x * 100, 2)} pp`, x);
  return signed(num(x, digitsFor(reference ?? x)), x);
}

function formatRelative(r: number | null): string {
  if (r === null) return '';
  if (!Number.isFinite(r)) return r > 0 ? '+inf%' : '\u2212inf%';
  return signed(`${num(r * 100, Math.abs(r) >= 0.1 ? 0 : 1)}%`, r);
}

function deltaText(m: MetricComparison): string {
  if (m.delta === null) return '-';
  const abs = formatDelta(m.delta, m.unit, m.baseline ?? undefined);
  return m.unit === 'fraction' ? abs : `${abs} (${formatRelative(m.relative)})`;
}

function ciText(m: MetricComparison): string {
  if (!m.ci) return '-';
  const ref = m.baseline ?? undefined;
  return `[${formatDelta(m.ci.low, m.unit, ref)}, ${formatDelta(m.ci.high, m.unit, ref)}]`;
}

const UNIT_TEXT: Record<MetricUnit, string> = {
  ms: 'ms',
  'tok/s': 'tok/s',
  'req/s': 'req/s',
  fraction: '%',
};

function metricText(m: MetricComparison): string {
  return `${m.label} (${UNIT_TEXT[m.unit]})${m.lowConfidence ? '*' : ''}`;
}

function countsText(counts: Record<Verdict, number>): string {
  const parts = [
    `${counts.better} better`,
    `${counts.worse} worse`,
    `${counts.no_change} no significant change`,
  ];
  if (counts['n/a'] > 0) parts.push(`${counts['n/a']} n/a`);
  return parts.join(', ');
}

function pairTitle(p: PairComparison, kind: 'one' | 'many'): string {
  return kind === 'one' ? p.scenario : `${p.scenario} at ${p.level}`;
}

const confidenceText = (r: CompareReport) => `${num(r.options.confidence * 100, 0)} %`;

function footnotes(r: CompareReport): string[] {
  const pairs = r.candidates.flatMap((c) => c.pairs.filter((p) => !p.refused));
  const lengths = [
    ...new Set(pairs.flatMap((p) => [p.blocks.baseline.length, p.blocks.candidate.length])),
  ].sort((a, b) => a - b);
  const blocks =
    lengths.length === 0
      ? ''
      : ` in blocks of ${lengths.length === 1 ? lengths[0] : `${lengths[0]}-${lengths[lengths.length - 1]}`} consecutive requests`;
  const notes = [
    `delta = B - A; ${confidenceText(r)} CI of the delta from ${r.options.resamples.toLocaleString('en-US')} bootstrap resamples of requests${blocks} (seed ${r.options.seed}); a verdict needs the CI to exclude 0 and a change of at least ${num(r.options.minEffect * 100, r.options.minEffect * 100 < 1 ? 1 : 0)} % (failure rate: 0.1 percentage points).`,
  ];
  if (pairs.some((p) => p.metrics.some((m) => m.lowConfidence))) {
    notes.push(
      '* fewer samples than this percentile needs (p99 and p1: 100 requests or tokens), so its interval is rough.',
    );
  }
  return notes;
}

function allPairs(c: CandidateComparison): 'one' | 'many' {
  return c.pairs.length + c.onlyBaseline.length + c.onlyCandidate.length > 1 ? 'many' : 'one';
}

export function renderTerminal(r: CompareReport, color: boolean): string {
  const c = color ? pc : pc.createColors(false);
  const paint = (v: Verdict, text: string) =>
    v === 'better' ? c.green(text) : v === 'worse' ? c.red(text) : c.dim(text);
  const lines: string[] = [];
  for (const cand of r.candidates) {
    lines.push(c.bold(`A (baseline): ${r.baseline.label}   B: ${cand.label}`));
    const kind = allPairs(cand);
    for (const p of cand.pairs) {
      lines.push('');
      if (kind === 'many') lines.push(c.bold(pairTitle(p, kind)));
      lines.push(`Load: ${p.load}${p.workload ? `; workload ${p.workload}` : ''}`);
      for (const d of p.differences) {
        lines.push(p.refused ? c.red(`  not comparable: ${d}`) : c.yellow(`  warning: ${d}`));
      }
      if (p.refused) {
        lines.push(c.red('  not compared (--force compares anyway)'));
        continue;
      }
      for (const n of p.notes) lines.push(c.dim(`  note: ${n}`));
      const table = new Table({
        head: ['metric', 'A', 'B', 'delta', `${confidenceText(r)} CI`, 'verdict'],
        colAligns: ['left', 'right', 'right', 'right', 'right', 'left'],
        style: { head: [], border: [] },
        chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
      });
      for (const m of p.metrics) {
        table.push([
          metricText(m),
          formatValue(m.baseline, m.unit),
          formatValue(m.candidate, m.unit),
          deltaText(m),
          ciText(m),
          paint(m.verdict, VERDICT_TEXT[m.verdict]),
        ]);
      }
      lines.push(table.toString());
      lines.push(`Verdicts: ${countsText(p.counts)}`);
    }
    if (cand.onlyBaseline.length > 0)
      lines.push(c.yellow(`Only in A (not compared): ${cand.onlyBaseline.join(', ')}`));
    if (cand.onlyCandidate.length > 0)
      lines.push(c.yellow(`Only in B (not compared): ${cand.onlyCandidate.join(', ')}`));
    if (cand.thresholds) {
      for (const [i, l] of thresholdLines(cand, r).entries()) {
        const text = i === 0 ? l.text : `  ${l.text}`;
        lines.push(l.ok ? c.green(text) : c.red(text));
      }
    }
    lines.push('');
  }
  for (const w of r.warnings) lines.push(c.yellow(`warning: ${w}`));
  lines.push(...footnotes(r).map((f) => c.dim(f)));
  return lines.join('\n');
}

/** The threshold results of a candidate: a headline and one line per threshold and point. */
function thresholdLines(
  cand: CandidateComparison,
  r: CompareReport,
): { ok: boolean; text: string }[] {
  const t = cand.thresholds as SweepThresholdEvaluation;
  const total = t.points.reduce((n, p) => n + p.results.length, 0);
  const failed = t.points.reduce((n, p) => n + p.results.filter((x) => !x.ok).length, 0);
  const lines = [
    {
      ok: t.ok,
      text: `Thresholds on B (${r.thresholds?.join(', ')}): ${t.ok ? `all ${total} met` : `${failed} of ${total} failed`}`,
    },
  ];
  for (const p of t.points) {
    for (const x of p.results) {
      lines.push({
        ok: x.ok,
        text: `${x.ok ? 'ok' : 'FAILED'}: ${t.points.length > 1 ? `${p.name}: ` : ''}${x.message}`,
      });
    }
  }
  return lines;
}

/** Markdown-safe text: no raw HTML, no table breaks, no emphasis from a run's label. */
export function escapeMarkdown(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/[\\`*_[\]|#~!]/g, (ch) => `\\${ch}`)
    .replace(/[\r\n]+/g, ' ');
}

const MD_VERDICT: Record<Verdict, string> = {
  better: '\u2705 better',
  worse: '\u274c **worse**',
  no_change: 'no significant change',
  'n/a': 'n/a',
};

export function renderMarkdown(r: CompareReport): string {
  const e = escapeMarkdown;
  const lines: string[] = ['## infergauge compare', ''];
  for (const cand of r.candidates) {
    lines.push(`**A** (baseline): ${e(r.baseline.label)} \u00b7 **B**: ${e(cand.label)}`, '');
    const kind = allPairs(cand);
    for (const p of cand.pairs) {
      if (kind === 'many') lines.push(`#### ${e(pairTitle(p, kind))}`, '');
      lines.push(`${e(capitalise(p.load))}${p.workload ? `; ${e(p.workload)}` : ''}.`, '');
      if (p.refused) {
        lines.push(
          `**Not compared** (\`--force\` compares anyway): ${p.differences.map(e).join('; ')}.`,
          '',
        );
        continue;
      }
      for (const d of p.differences) lines.push(`> \u26a0\ufe0f ${e(d)}`);
      if (p.differences.length > 0) lines.push('');
      lines.push(`| metric | A | B | delta | ${confidenceText(r)} CI | verdict |`);
      lines.push('|---|--:|--:|--:|--:|---|');
      for (const m of p.metrics) {
        lines.push(
          // Our own labels and numbers: nothing in these cells comes from a run.
          `| ${metricText(m).replace('*', '\\*')} | ${formatValue(m.baseline, m.unit)} | ${formatValue(m.candidate, m.unit)} | ${deltaText(m)} | ${ciText(m)} | ${MD_VERDICT[m.verdict]} |`,
        );
      }
      lines.push('', `${countsText(p.counts)}.`, '');
      if (p.notes.length > 0) lines.push(...p.notes.map((n) => `- ${e(n)}`), '');
    }
    if (cand.onlyBaseline.length > 0)
      lines.push(`Only in A (not compared): ${cand.onlyBaseline.map(e).join(', ')}`, '');
    if (cand.onlyCandidate.length > 0)
      lines.push(`Only in B (not compared): ${cand.onlyCandidate.map(e).join(', ')}`, '');
    if (cand.thresholds) {
      for (const l of thresholdLines(cand, r))
        lines.push(`- ${l.ok ? e(l.text) : `**${e(l.text)}**`}`);
      lines.push('');
    }
  }
  for (const w of r.warnings) lines.push(`> ${e(w)}`, '');
  lines.push(...footnotes(r).map((f) => `<sub>${e(f)}</sub>`), '');
  return lines.join('\n');
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const CSS = `
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#1f2328;line-height:1.45}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem}h3{font-size:1rem;margin-top:1.5rem}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:right}th{background:#f6f8fa}
td:first-child,th:first-child,td:last-child,th:last-child{text-align:left}
.better{color:#1a7f37;font-weight:600}.worse{color:#cf222e;font-weight:600}.no_change,.na{color:#656d76}
.warn{color:#9a6700}.refused{color:#cf222e}.note,.foot{color:#656d76;font-size:.9em}
.ok{color:#1a7f37}.fail{color:#cf222e;font-weight:600}
`;

export function renderHtml(r: CompareReport): string {
  const h = escapeHtml;
  const body: string[] = [`<h1>infergauge compare</h1>`];
  for (const cand of r.candidates) {
    body.push(
      `<h2>B: ${h(cand.label)} <small>vs A (baseline): ${h(r.baseline.label)}</small></h2>`,
    );
    const kind = allPairs(cand);
    for (const p of cand.pairs) {
      if (kind === 'many') body.push(`<h3>${h(pairTitle(p, kind))}</h3>`);
      body.push(`<p>${h(capitalise(p.load))}${p.workload ? `; ${h(p.workload)}` : ''}.</p>`);
      for (const d of p.differences) {
        body.push(
          `<p class="${p.refused ? 'refused' : 'warn'}">${p.refused ? 'Not comparable' : 'Warning'}: ${h(d)}</p>`,
        );
      }
      if (p.refused) {
        body.push('<p class="refused">Not compared (--force compares anyway).</p>');
        continue;
      }
      body.push(
        `<table><thead><tr><th>metric</th><th>A</th><th>B</th><th>delta</th><th>${h(confidenceText(r))} CI</th><th>verdict</th></tr></thead><tbody>`,
      );
      for (const m of p.metrics) {
        const cls = m.verdict === 'n/a' ? 'na' : m.verdict;
        body.push(
          `<tr><td>${h(metricText(m))}</td><td>${h(formatValue(m.baseline, m.unit))}</td><td>${h(formatValue(m.candidate, m.unit))}</td><td>${h(deltaText(m))}</td><td>${h(ciText(m))}</td><td class="${cls}" title="${h(m.why)}">${h(VERDICT_TEXT[m.verdict])}</td></tr>`,
        );
      }
      body.push('</tbody></table>', `<p>${h(countsText(p.counts))}.</p>`);
      for (const n of p.notes) body.push(`<p class="note">Note: ${h(n)}</p>`);
    }
    if (cand.onlyBaseline.length > 0)
      body.push(`<p class="warn">Only in A (not compared): ${h(cand.onlyBaseline.join(', '))}</p>`);
    if (cand.onlyCandidate.length > 0)
      body.push(
        `<p class="warn">Only in B (not compared): ${h(cand.onlyCandidate.join(', '))}</p>`,
      );
    if (cand.thresholds) {
      body.push('<ul>');
      for (const l of thresholdLines(cand, r)) {
        body.push(`<li class="${l.ok ? 'ok' : 'fail'}">${h(l.text)}</li>`);
      }
      body.push('</ul>');
    }
  }
  for (const w of r.warnings) body.push(`<p class="warn">Warning: ${h(w)}</p>`);
  body.push(...footnotes(r).map((f) => `<p class="foot">${h(f)}</p>`));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>infergauge compare: ${h(r.candidates.map((c) => c.label).join(', '))} vs ${h(r.baseline.label)}</title>
<style>${CSS}</style>
</head>
<body>
${body.join('\n')}
</body>
</html>
`;
}
