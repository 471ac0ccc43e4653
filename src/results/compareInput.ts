/**
 * What `compare` reads: a run, a multi-scenario run or a sweep directory as units of requests
 * (analysis/compare.ts RunUnit), each with the summaries of the runs behind it. Records are
 * read through the read model (results/runView.ts): one streaming pass per run folder into the
 * unit's comparison sample (typed arrays, bounded per request) and, for a run without
 * summary.json, its summary.
 */

import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  type RunConditions,
  type RunEnvironment,
  RunSampleBuilder,
  type RunUnit,
  type WorkloadFacts,
} from '../analysis/compare.js';
import { readCacheState } from '../analysis/prefixCache.js';
import { EXIT, InfergaugeError } from '../errors.js';
import type { LoadSpec } from '../load.js';
import type { SloCondition } from '../metrics/slo.js';
import type { RunSummary } from '../metrics/summary.js';
import { VERDICT_RANK, validityOf } from '../metrics/validity.js';
import { factsOf, factText } from '../telemetry/environment.js';
import type { PrefixCacheSummary } from '../telemetry/summary.js';
import { FOREIGN_FORMAT_NAMES, type ForeignRun, readForeign } from './foreign/index.js';
import {
  hasResult,
  RESULT_FILES,
  ResultFileError,
  recordsPath as recordsPathOf,
} from './layout.js';
import {
  isRunDir,
  readManifest,
  readScenariosTable,
  readSummary,
  readTable,
  savedLoad,
  scenarioNames,
} from './reader.js';
import { ReadMemoryError, RunViewBuilder, streamRecords } from './runView.js';
import type { Manifest } from './schemas.js';

/** A directory that is not what compare reads (exit 2). */
export class CompareInputError extends InfergaugeError {
  constructor(message: string) {
    super(message, 'IG_COMPARE_INPUT', EXIT.invalidOptions);
  }
}
/** A directory or file that cannot be read (exit 1). */
export class UnreadableError extends InfergaugeError {
  constructor(message: string) {
    super(message, 'IG_UNREADABLE', EXIT.failure);
  }
}

export interface LoadedUnit extends RunUnit {
  /** The run summary of each run behind the unit (several for pooled sweep repeats). */
  summaries: { name: string; summary: RunSummary }[];
}

export interface CompareTarget {
  dir: string;
  label: string;
  /** `foreign`: another tool's result file (src/results/foreign/), one unit per run it holds. */
  kind: 'run' | 'scenarios' | 'sweep' | 'foreign';
  units: LoadedUnit[];
  warnings: string[];
}

/** A results file read, or UnreadableError saying which and why. */
function readOrFail<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof ResultFileError) {
      throw new UnreadableError(`cannot read ${err.path}: ${err.reason}`);
    }
    throw err;
  }
}

const str = (x: unknown) => (typeof x === 'string' ? x : undefined);

function workloadFacts(manifest: Manifest | undefined): {
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
  // A session run's load counts sessions (manifest windows.unit).
  if ((manifest.windows as { unit?: unknown } | undefined)?.unit === 'sessions') {
    facts.sessions = true;
  }
  return {
    facts,
    ...(described && colon >= 0 ? { scenario: described.slice(0, colon) } : {}),
    ...(Array.isArray(plan.slo) ? { slo: plan.slo as SloCondition[] } : {}),
  };
}

const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : undefined);

/** What the manifest says beside the workload: the seed, the salt, the server's kind. */
function manifestConditions(manifest: Manifest | undefined): RunConditions {
  if (!manifest) return {};
  const plan = (manifest.plan ?? {}) as Record<string, unknown>;
  const workload = (manifest.workload ?? {}) as Record<string, unknown>;
  const server = (manifest.server ?? {}) as Record<string, unknown>;
  const out: RunConditions = {};
  const seed = num(plan.seed);
  if (seed !== undefined) out.seed = seed;
  // The point's own salt (a session's points each have one), else the plan's.
  const salt = num(workload.promptSalt) ?? num(plan.promptSalt);
  if (salt !== undefined) out.promptSalt = salt;
  // A server given by --url outlives the run; one the run started (or virtual time) does not.
  if (typeof server.url === 'string' && server.builtInSimulator !== true) {
    out.persistentServer = true;
  }
  const format = (plan.dataset as { data?: { format?: unknown } } | undefined)?.data?.format;
  if (typeof format === 'string' && format !== 'text') out.datasetPrompts = true;
  if (Array.isArray(server.simulatorArgs)) {
    out.simulatorArgs = server.simulatorArgs.filter((x): x is string => typeof x === 'string');
  }
  const environment = manifestEnvironment(server, plan);
  if (Object.keys(environment).length > 0) out.environment = environment;
  const cacheState = readCacheState(manifest.cacheState);
  if (cacheState) out.cacheState = cacheState;
  return out;
}

/**
 * The manifest's environment as text: what the server said (engine, version, GPUs) and what
 * the user stated (--server-info, in `server.info`, else the plan's). A manifest is read as
 * untrusted text, as the server's answers were: one line each, capped.
 */
function manifestEnvironment(
  server: Record<string, unknown>,
  plan: Record<string, unknown>,
): RunEnvironment {
  const out: RunEnvironment = {};
  const text = (x: unknown) => (typeof x === 'string' ? factText(x) : undefined);
  const engine = text(server.engine);
  if (engine !== undefined) out.engine = engine;
  const version = text(server.engineVersion);
  if (version !== undefined) out.engineVersion = version;
  const gpu = server.gpu as { type?: unknown; count?: unknown } | undefined;
  const type = text(gpu?.type);
  if (type !== undefined) out.gpu = `${num(gpu?.count) ?? 1}x ${type}`;
  const info = server.info ?? plan.serverInfo;
  if (typeof info === 'object' && info !== null && !Array.isArray(info)) {
    const facts = factsOf(
      Object.entries(info).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
    if (facts) out.serverInfo = facts;
  }
  return out;
}

/**
 * The server's prefix-cache hit rate over the runs of a unit: pooled token counts where every
 * run has them, else the mean of the rates; undefined when no run's server told one.
 */
function pooledHitRate(caches: readonly PrefixCacheSummary[]): number | undefined {
  if (caches.length === 0) return undefined;
  const queried = caches.reduce((n, c) => n + (c.queriedTokens ?? Number.NaN), 0);
  if (queried > 0) return caches.reduce((n, c) => n + (c.hitTokens ?? 0), 0) / queried;
  return caches.reduce((n, c) => n + c.hitRate, 0) / caches.length;
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
  let conditions: RunConditions = {};
  const caches: PrefixCacheSummary[] = [];
  let scenario = scenarioHint;
  for (const [index, folder] of folders.entries()) {
    const recordsPath = recordsPathOf(folder);
    if (!hasResult(folder, 'records')) {
      throw new CompareInputError(`${folder}: no ${RESULT_FILES.records}`);
    }
    const savedSummary = readOrFail(() => readSummary(folder));
    const manifest = readOrFail(() => readManifest(folder));
    const folderLoad = savedLoad(savedSummary, manifest);
    const cache = savedSummary?.serverMetrics?.prefixCache;
    if (cache) caches.push(cache);
    if (!folderLoad) {
      throw new CompareInputError(
        `${recordsPath} is there, but no ${RESULT_FILES.summary} or ${RESULT_FILES.manifest} says what load produced it`,
      );
    }
    load ??= folderLoad;
    const w = workloadFacts(manifest);
    if (index === 0) {
      facts = w.facts;
      conditions = manifestConditions(manifest);
      scenario ??= w.scenario;
    }
    if (index > 0) builder.segment();
    const view = new RunViewBuilder({
      sample: builder,
      ...(savedSummary ? {} : { summary: { load: folderLoad, ...(w.slo ? { slo: w.slo } : {}) } }),
    });
    try {
      // What is skipped as damaged is said once, naming the file read.
      await streamRecords(recordsPath, view, (message) => warnings.push(message));
    } catch (err) {
      if (err instanceof ReadMemoryError) throw err;
      throw new UnreadableError(`cannot read ${recordsPath}: ${(err as Error).message}`);
    }
    summaries.push({
      name: folders.length > 1 ? `${label} #${index + 1}` : label,
      summary: savedSummary ?? (view.summary() as RunSummary),
    });
  }
  const hitRate = pooledHitRate(caches);
  if (hitRate !== undefined) conditions.prefixCacheHitRate = hitRate;
  if (summaries.some((s) => s.summary.clientHealth?.clientLimited)) conditions.clientLimited = true;
  const judged = summaries.map((s) => validityOf(s.summary.warnings));
  if (judged.length > 0) {
    conditions.validity = {
      verdict: judged
        .map((v) => v.verdict)
        .reduce((a, b) => (VERDICT_RANK[b] < VERDICT_RANK[a] ? b : a)),
      codes: [...new Set(judged.flatMap((v) => v.reasons.map((r) => r.code)))],
    };
  }
  return {
    label,
    scenario: scenario ?? 'run',
    load: load as LoadSpec,
    workload: { ...extra, ...facts },
    sample: builder.build(),
    conditions,
    summaries,
  };
}

/**
 * Another tool's run as a unit: its rebuilt records pass through the same sample builder as a
 * run folder's, so the paired bootstrap treats both sides alike. A run the file has only
 * statistics for cannot be paired request by request, and compare says so instead of
 * comparing percentiles as if they were samples.
 */
function foreignUnit(run: ForeignRun, label: string, warnings: string[]): LoadedUnit {
  const format = FOREIGN_FORMAT_NAMES[run.format];
  if (!run.perRequest || !run.records || !run.load) {
    throw new CompareInputError(
      `${run.source}: ${format} with statistics only, no per-request figures: compare pairs runs request by request (the paired bootstrap) and has nothing to pair; ${run.format === 'vllm-bench' ? 'save the vLLM run with --save-detailed, or ' : ''}read its statistics with infergauge report ${run.source}`,
    );
  }
  const builder = new RunSampleBuilder();
  for (const record of run.records) builder.add(record);
  const facts: WorkloadFacts = {};
  if (run.model !== undefined) facts.model = run.model;
  if (run.url !== undefined) facts.server = run.url;
  // What does not translate is said beside the comparison, as the inputs' other warnings are.
  for (const note of run.notes) warnings.push(`${label} (${format}, per request): ${note}`);
  return {
    label,
    scenario: 'run',
    load: run.load,
    workload: facts,
    sample: builder.build(),
    conditions: {},
    summaries: [{ name: label, summary: run.summary }],
  };
}

async function readForeignTarget(path: string, label: string): Promise<CompareTarget> {
  const runs = await readForeign(path);
  const warnings: string[] = [];
  const units = runs.map((run, i) =>
    foreignUnit(run, runs.length > 1 ? `${label}#${i + 1}` : label, warnings),
  );
  return { dir: path, label, kind: 'foreign', units, warnings };
}

const POINT_FOLDER = /^([cr])(\d+(?:\.\d+)?)(?:-r(\d+))?$/;

/** Reads a run, a multi-scenario run or a sweep directory, or another tool's result file. */
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
  if (!isDir) return readForeignTarget(dir, label);
  const warnings: string[] = [];
  const list = (d: string) => {
    try {
      return readdirSync(d).sort();
    } catch (err) {
      throw new UnreadableError(`cannot read ${d}: ${(err as Error).message}`);
    }
  };
  list(dir); // unreadable (permissions) fails here, before anything else
  const sweep = readOrFail(() => readTable(dir, 'sweep')) as { target?: string } | undefined;
  if (sweep) {
    const described = scenarioNames(sweep);
    const target = str(sweep.target);
    const units: LoadedUnit[] = [];
    for (const scenario of described) {
      const sdir = join(dir, scenario);
      if (!existsSync(sdir)) {
        warnings.push(`${sdir}: missing (scenario ${scenario} of ${RESULT_FILES.sweep})`);
        continue;
      }
      const byTag = new Map<
        string,
        { level: number; folders: { repeat: number; path: string }[] }
      >();
      for (const entry of list(sdir)) {
        const m = POINT_FOLDER.exec(entry);
        if (!m || !isRunDir(join(sdir, entry))) continue;
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
      throw new CompareInputError(
        `${dir}: ${RESULT_FILES.sweep}, but no point folders with ${RESULT_FILES.records} (<scenario>/c<level>/ or r<rate>/)`,
      );
    }
    return { dir, label, kind: 'sweep', units, warnings };
  }
  const scenarios = readOrFail(() => readScenariosTable(dir));
  if (scenarios && !isRunDir(dir)) {
    const names = scenarioNames(scenarios);
    const units: LoadedUnit[] = [];
    for (const name of names) {
      const sdir = join(dir, name);
      if (!isRunDir(sdir)) {
        throw new CompareInputError(
          `${sdir}: no ${RESULT_FILES.records} (scenario ${name} of ${RESULT_FILES.scenarios})`,
        );
      }
      units.push(await readRunFolders([sdir], `${label}/${name}`, name, {}, warnings));
    }
    if (units.length === 0)
      throw new CompareInputError(`${dir}: ${RESULT_FILES.scenarios} lists no scenario`);
    return { dir, label, kind: 'scenarios', units, warnings };
  }
  if (!isRunDir(dir)) {
    throw new CompareInputError(
      `${dir}: not a run or sweep directory: it has no ${RESULT_FILES.records}, ${RESULT_FILES.scenarios} or ${RESULT_FILES.sweep}`,
    );
  }
  const unit = await readRunFolders([dir], label, undefined, {}, warnings);
  return { dir, label, kind: 'run', units: [unit], warnings };
}
