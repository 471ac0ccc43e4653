/**
 * `infergauge size`'s flags read into SizeOptions, with every problem named (bad usage, exit 2):
 * the command line only parses, calls and prints. Numbers go through parseFlagNumber, the one
 * reading of a number option.
 */
import { parseFlagNumber } from '../flagNumber.js';
import { PlanError, parseRunPlan, shapedTrace } from '../plan/runPlan.js';
import { readCalibrationFile } from '../sim/calibrationFile.js';
import { calibrationFileNotices } from '../sim/calibrationWarnings.js';
import { engineVersionProblem } from '../sim/personality.js';
import { readAgentTraceIfAny } from '../workload/agentTrace.js';
import { isSessionScenario, parseScenarioList, withLengths } from '../workload/scenarios.js';
import { parseTraceWindow, TRACE_BLOCK_TOKENS, type TraceEntry } from '../workload/trace.js';
import type { SizeOptions } from './size.js';
import { readPriceFile } from './sizePrices.js';
import type { SizeVerifyOptions } from './sizeVerify.js';

/** The flags that shape a trace, which need --trace. */
const TRACE_FLAGS = ['traceSpeed', 'traceBlockTokens', 'traceWindow', 'traceMaxGapS'];

/** What the command line gives: option values as typed (strings), switches as booleans. */
export type SizeFlags = Record<string, string | boolean | undefined>;

export interface PreparedSize {
  options?: Omit<SizeOptions, 'onCandidate'>;
  /** Worker threads asked for (undefined: the caller's default). */
  threads?: number;
  /** Rows to show (default 15). */
  top: number;
  problems: string[];
  /** What reading the trace did to it (sorted, shifted), to tell the user. */
  notes?: string[];
  /** `--verify URL`: the recommendation measured on the server after the search. */
  verify?: Omit<SizeVerifyOptions, 'env' | 'onNotice'>;
}

/** The flags that shape a verification, which need --verify. */
const VERIFY_FLAGS = ['verifyRequests', 'verifyModel', 'verifyNoRefit'];

const flagOf = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

export function prepareSize(flags: SizeFlags): PreparedSize {
  const problems: string[] = [];
  const str = (k: string) => (typeof flags[k] === 'string' ? (flags[k] as string) : undefined);
  const list = (k: string, fallback: string) =>
    (str(k) ?? fallback)
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const number = (
    k: string,
    rule: { min?: number; above?: number; max?: number; integer?: boolean },
  ) => {
    const text = str(k);
    if (text === undefined) return undefined;
    const read = parseFlagNumber(text, rule);
    if ('value' in read) return read.value;
    problems.push(`${flagOf(k)} ${read.problem}`);
    return undefined;
  };
  const numbers = (k: string, fallback: string, keep?: string) =>
    list(k, fallback).map((v) => {
      if (v === keep) return undefined;
      const read = parseFlagNumber(v, { integer: true, min: 1 });
      if ('value' in read) return read.value;
      problems.push(`${flagOf(k)} lists "${v}": ${read.problem}${keep ? ` (or "${keep}")` : ''}`);
      return undefined;
    });

  const model = str('model');
  if (!model)
    problems.push('--model is required: a preset (infergauge sim --list) or a config.json');
  let traffic: SizeOptions['traffic'] | undefined;
  const tracePath = str('trace');
  let trace: TraceEntry[] | undefined;
  let impliedHitRate: number | undefined;
  const notes: string[] = [];
  if (tracePath !== undefined) {
    // The trace is the traffic, its lengths and its request count: nothing may set them again.
    for (const k of ['rate', 'users', 'requests', 'scenario', 'inputTokens', 'outputTokens']) {
      if (str(k) !== undefined) {
        problems.push(
          `${flagOf(k)} cannot be combined with --trace: the trace sets ${k === 'rate' || k === 'users' ? 'the traffic' : k === 'requests' ? 'the requests (all of them are replayed)' : "each request's lengths"}`,
        );
      }
    }
    const speed = number('traceSpeed', { above: 0 }) ?? 1;
    const blockTokens = number('traceBlockTokens', { integer: true, min: 1 }) ?? TRACE_BLOCK_TOKENS;
    const maxGapS = number('traceMaxGapS', { above: 0 });
    const windowText = str('traceWindow');
    const window = windowText === undefined ? undefined : parseTraceWindow(windowText);
    if (window && 'problem' in window) problems.push(`--trace-window ${window.problem}`);
    try {
      if (readAgentTraceIfAny(tracePath)) {
        throw new Error(
          `${tracePath} is an agentic trace (calls that wait for other calls): size replays single requests; run it on a deployment with \`run --simulate --trace ${tracePath}\` instead`,
        );
      }
      // Shaped as run shapes it: the window, then the gap cap (the speed divides what is left).
      const shaped = shapedTrace(tracePath, {
        traceBlockTokens: blockTokens,
        ...(window && !('problem' in window) ? { traceWindow: window } : {}),
        ...(maxGapS !== undefined ? { traceMaxGapS: maxGapS } : {}),
      });
      trace = shaped.entries;
      notes.push(...(shaped.notes ?? []), ...(shaped.notices ?? []));
      impliedHitRate = shaped.impliedHitRate;
      const spanMs = trace[trace.length - 1].atMs;
      traffic = {
        mode: 'trace',
        source: tracePath,
        speed,
        blockTokens,
        requests: trace.length,
        spanS: spanMs / 1000 / speed,
      };
    } catch (err) {
      problems.push(`--trace: ${(err as Error).message}`);
    }
  } else if (TRACE_FLAGS.some((k) => str(k) !== undefined)) {
    const k = TRACE_FLAGS.find((f) => str(f) !== undefined) as string;
    problems.push(`${flagOf(k)} applies only with --trace`);
  } else if ((str('rate') === undefined) === (str('users') === undefined)) {
    problems.push(
      'give the traffic as --rate (requests per second), --users (concurrent users) or --trace (a trace file), one of them',
    );
  } else {
    const rate = number('rate', { above: 0 });
    const users = number('users', { integer: true, min: 1 });
    if (rate !== undefined) traffic = { mode: 'rate', rate };
    if (users !== undefined) traffic = { mode: 'users', users };
  }
  const slo = str('slo');
  if (!slo) problems.push("--slo is required: e.g. --slo 'ttft.p99<500,itl.p99<50'");
  const gpus = [
    ...list('gpu', '').map((gpu) => ({ gpu })),
    ...list('gpuSpec', '').map((gpuSpec) => ({ gpuSpec })),
  ];
  if (gpus.length === 0) {
    problems.push('--gpu (or --gpu-spec) is required: the GPUs to try, e.g. --gpu h100,h200,l40s');
  }
  const tps = numbers('tp', '1,2,4,8').filter((t): t is number => t !== undefined);
  const maxNumSeqs = numbers('maxNumSeqs', 'default', 'default');
  const auto = (v: string) => (v === 'auto' ? undefined : v);
  const requests = number('requests', { integer: true, min: 20 });
  const maxDp = number('maxDp', { integer: true, min: 1 });
  const threads = number('threads', { integer: true, min: 1 });
  const seed = number('seed', { integer: true, min: 0 });
  const predictionDraws = number('predictionDraws', { integer: true, min: 0 });
  const intervalRows = number('intervalRows', { integer: true, min: 0 });
  const confidence = number('confidence', { min: 0.5, max: 0.99 });
  // Intervals come from a fit's uncertainty: without a calibration there is none to draw from.
  if (str('calibration') === undefined) {
    const named = ['predictionDraws', 'intervalRows', 'confidence'].filter(
      (k) => str(k) !== undefined,
    );
    if (named.length > 0) {
      problems.push(
        `${named.map(flagOf).join(', ')} ${named.length > 1 ? 'need' : 'needs'} --calibration FILE: intervals come from a calibration's uncertainty (infergauge calibrate)`,
      );
    }
  } else if (confidence !== undefined && predictionDraws === 0) {
    problems.push('--confidence ranks by the predictions, which --prediction-draws 0 turns off');
  }
  const top = number('top', { integer: true, min: 1 }) ?? 15;
  const maxModelLen = number('maxModelLen', { integer: true, min: 1 });
  const engineVersion = str('engineVersion');
  const versionProblem =
    engineVersion === undefined ? undefined : engineVersionProblem(engineVersion);
  if (versionProblem) problems.push(versionProblem);
  let prices: SizeOptions['prices'];
  const pricesFile = str('prices');
  if (pricesFile) {
    try {
      prices = readPriceFile(pricesFile);
    } catch (err) {
      problems.push(`--prices: ${(err as Error).message}`);
    }
  }
  let scenario: SizeOptions['scenario'] | undefined;
  try {
    const [preset] = parseScenarioList(str('scenario') ?? 'chat');
    scenario = withLengths(preset, str('inputTokens'), str('outputTokens'));
  } catch (err) {
    problems.push((err as Error).message);
  }
  const verify = verifyFlags(flags, str, number, problems);
  if (verify) {
    if (str('calibration') === undefined) {
      problems.push(
        '--verify checks a calibration against its server: give the calibration with --calibration FILE',
      );
    }
    if (verify.out === '') {
      problems.push(
        '--verify keeps its run under the results directory (the calibration takes it as a point): give --out DIR',
      );
    }
    if (tracePath !== undefined || (scenario && isSessionScenario(scenario))) {
      problems.push(
        `--verify measures one replica at its share of --rate or --users: ${tracePath !== undefined ? 'a trace is sized whole over the replicas' : "a session scenario's sessions are not"} verified`,
      );
    }
  }
  if (problems.length > 0 || !model || !traffic || !slo || !scenario) {
    return { top, problems, ...(notes.length > 0 ? { notes } : {}) };
  }
  // A session scenario's traffic counts sessions (runLoadgen's unit), and says so.
  if (isSessionScenario(scenario) && traffic.mode !== 'trace') {
    traffic = { ...traffic, sessions: true };
  }
  const requestSlo = str('requestSlo');
  const calibration = str('calibration');
  // What the calibration's fit warned of, said before the search; a file that cannot be read
  // is each candidate's problem, said in its row.
  if (calibration !== undefined) {
    try {
      const file = readCalibrationFile(calibration);
      notes.push(...calibrationFileNotices(calibration, file.warnings));
    } catch {}
  }
  return {
    options: {
      model,
      traffic,
      scenario,
      ...(trace ? { trace } : {}),
      ...(impliedHitRate !== undefined ? { traceImpliedHitRate: impliedHitRate } : {}),
      slo,
      ...(requestSlo !== undefined ? { requestSlo } : {}),
      space: {
        gpus,
        tps,
        dtypes: list('dtype', 'auto,fp8').map(auto),
        kvCacheDtypes: list('kvCacheDtype', 'auto,fp8').map(auto),
        maxNumSeqs,
        personalities: list('enginePersonality', 'vllm-v1'),
      },
      ...(prices ? { prices } : {}),
      ...(calibration !== undefined ? { calibration } : {}),
      ...(maxModelLen !== undefined ||
      engineVersion !== undefined ||
      typeof flags.enablePrefixCaching === 'boolean'
        ? {
            engine: {
              ...(maxModelLen !== undefined ? { maxModelLen } : {}),
              ...(engineVersion !== undefined ? { engineVersion } : {}),
              ...(typeof flags.enablePrefixCaching === 'boolean'
                ? { enablePrefixCaching: flags.enablePrefixCaching }
                : {}),
            },
          }
        : {}),
      ...(requests !== undefined ? { requests } : {}),
      ...(maxDp !== undefined ? { maxDp } : {}),
      ...(seed !== undefined ? { seed } : {}),
      ...(predictionDraws !== undefined ? { predictionDraws } : {}),
      ...(intervalRows !== undefined ? { intervalRows } : {}),
      ...(confidence !== undefined ? { confidence } : {}),
    },
    ...(threads !== undefined ? { threads } : {}),
    top,
    problems,
    ...(notes.length > 0 ? { notes } : {}),
    ...(verify ? { verify } : {}),
  };
}

/** `--verify URL` and its flags read (`out` empty when --out is missing); undefined without it. */
function verifyFlags(
  flags: SizeFlags,
  str: (k: string) => string | undefined,
  number: (k: string, rule: { min?: number; integer?: boolean }) => number | undefined,
  problems: string[],
): PreparedSize['verify'] {
  const url = str('verify');
  if (url === undefined) {
    const k = VERIFY_FLAGS.find((f) => flags[f] !== undefined && flags[f] !== false);
    if (k) problems.push(`${flagOf(k)} applies only with --verify URL`);
    return undefined;
  }
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {}
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    // Never the URL itself: it may carry credentials.
    problems.push('--verify must be the http:// or https:// base URL of the server');
  } else {
    // What `run --url` refuses (credentials in the URL, ...) is refused before the search.
    try {
      parseRunPlan({ url });
    } catch (err) {
      if (!(err instanceof PlanError)) throw err;
      problems.push(...err.problems.map((p) => `--verify: ${p.replace(/^--url /, '')}`));
    }
  }
  const requests = number('verifyRequests', { integer: true, min: 20 });
  const model = str('verifyModel');
  return {
    url,
    out: str('out') ?? '',
    ...(requests !== undefined ? { requests } : {}),
    ...(model !== undefined ? { model } : {}),
    ...(flags.verifyNoRefit === true ? { noRefit: true } : {}),
  };
}
