/**
 * Outputs chosen on the command line (`--output NAME[=ARG]`, repeatable; `--export` is its old
 * name): a built-in by name, or a module of the user's own (a path ending in .js, .mjs, .cjs or
 * .ts) whose default export makes one from ARG. A new output is one entry here; no command
 * changes. Built-ins other than `points` are imported when named, so a plain run loads none.
 */
import { appendFileSync, existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from '../errors.js';
import {
  builtInOutput,
  EXPORT_TIMEOUT_S,
  type Output,
  type OutputContext,
  type PointFinished,
} from './events.js';
import type { Notify } from './target.js';

/** Makes an output from the text after `=` (undefined when there was none). */
export type OutputFactory = (
  arg: string | undefined,
  context: OutputContext,
) => Output | Promise<Output>;

/** The built-in outputs besides the results directory, the HTML report and the progress line. */
export const BUILT_IN_OUTPUTS: Record<string, { about: string; make: OutputFactory }> = {
  points: {
    about: 'points=FILE: one JSON line per finished point (id, directory, load, headline metrics)',
    make: (file) => {
      if (!file) throw new UsageError(['--output points needs a file: --output points=FILE']);
      return pointsOutput(file);
    },
  },
  otlp: {
    about:
      'otlp[=URL]: live metrics pushed over OTLP/HTTP to URL/v1/metrics every 5 s (no URL: the OTEL_EXPORTER_OTLP_* variables)',
    // Imported here, when named: a plain run never loads the OpenTelemetry SDK.
    make: async (url, context) => (await import('./outputs/otlp.js')).otlpOutput(url, context),
  },
  prometheus: {
    about:
      'prometheus[=PORT]: live metrics at http://127.0.0.1:PORT/metrics (default 9464; 0 picks a free port)',
    make: async (port, context) =>
      (await import('./outputs/prometheus.js')).prometheusOutput(port, context),
  },
  ui: {
    about:
      'ui[=[HOST:]PORT]: a live dashboard in the browser (loopback, a free port by default; another HOST needs the printed token)',
    // Imported when named: a plain run loads no server and no page.
    make: async (arg, context) => (await import('./outputs/ui.js')).uiOutput(arg, context),
  },
};

const MODULE = /\.(m?js|cjs|ts)$/;

export interface LoadOptions {
  /** Seconds a module may take to load and make its output (default EXPORT_TIMEOUT_S). */
  exportTimeoutS?: number;
  /** Told when a module's output is dropped for taking too long. */
  onNotice?: Notify;
  /** Ctrl-C while a module loads: it is left out at once (the command then stops). */
  stop?: AbortSignal;
  /** Given to every output's factory (OutputContext.requestStop). */
  requestStop?: () => void;
}

/**
 * The outputs `specs` name; bad usage throws a UsageError naming the spec and the fix. A module
 * that does not load and make its output within exportTimeoutS is left out with a notice (its
 * import or factory may never settle): the run goes on without it.
 */
export async function loadOutputs(
  specs: readonly string[] | undefined,
  o: LoadOptions = {},
): Promise<Output[]> {
  const outputs: Output[] = [];
  const timeoutS = o.exportTimeoutS ?? EXPORT_TIMEOUT_S;
  const context: OutputContext = {
    notice: o.onNotice ?? (() => {}),
    ...(o.requestStop ? { requestStop: o.requestStop } : {}),
  };
  for (const spec of specs ?? []) {
    const at = spec.indexOf('=');
    const name = at < 0 ? spec : spec.slice(0, at);
    const arg = at < 0 ? undefined : spec.slice(at + 1);
    if (!MODULE.test(name)) {
      outputs.push(await builtIn(name, arg, context));
      continue;
    }
    const made = await withinS(fromModule(name, arg, context), timeoutS, o.stop);
    if (made) outputs.push(made);
    else if (o.stop?.aborted) o.onNotice?.(`output ${name} was still loading when stopped`);
    else {
      o.onNotice?.(
        `output ${name} was not made within ${timeoutS} s (--export-timeout-s); running without it`,
      );
    }
  }
  return outputs;
}

/** `--export-timeout-s` as seconds, or the problem with it. */
export function parseExportTimeoutS(value: unknown): { seconds?: number; problem?: string } {
  if (value === undefined) return {};
  const seconds = Number(value);
  // A week is longer than any run waits for an output; Infinity and NaN are no deadline.
  if (
    String(value).trim() === '' ||
    !Number.isFinite(seconds) ||
    seconds <= 0 ||
    seconds > 604_800
  ) {
    return {
      problem: `--export-timeout-s must be a number of seconds above 0 (at most 604800), got ${String(value)}`,
    };
  }
  return { seconds };
}

/**
 * `promise`'s value, or undefined when it has not settled after `seconds` or by `stop` (a
 * rejection is thrown).
 */
async function withinS<T>(
  promise: Promise<T>,
  seconds: number,
  stop: AbortSignal | undefined,
): Promise<T | undefined> {
  if (stop?.aborted) return undefined;
  let timer: NodeJS.Timeout | undefined;
  let onStop: (() => void) | undefined;
  // A held timer: an import that never settles must not let the process end with nothing said.
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), seconds * 1000);
    onStop = () => resolve(undefined);
    stop?.addEventListener('abort', onStop, { once: true });
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
    if (onStop) stop?.removeEventListener('abort', onStop);
  }
}

function builtIn(
  name: string,
  arg: string | undefined,
  context: OutputContext,
): Output | Promise<Output> {
  const known = Object.hasOwn(BUILT_IN_OUTPUTS, name) ? BUILT_IN_OUTPUTS[name] : undefined;
  if (!known) {
    // `probe decode --output N` once meant N output tokens.
    const tokens = /^\d+$/.test(name) ? ' (for output tokens: --output-tokens N)' : '';
    throw new UsageError([
      `--output ${name}: no such output${tokens}; choose ${Object.keys(BUILT_IN_OUTPUTS).join(', ')}, or give a module path (./my-output.js[=ARG]) whose default export makes one`,
    ]);
  }
  return known.make(arg, context);
}

async function fromModule(
  path: string,
  arg: string | undefined,
  context: OutputContext,
): Promise<Output> {
  const file = resolve(path);
  if (!existsSync(file)) throw new UsageError([`--output ${path}: no such file`]);
  const mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
  if (typeof mod.default !== 'function') {
    throw new UsageError([
      `--output ${path}: the module's default export must be a function (arg) => Output (see docs/library.md, "Outputs")`,
    ]);
  }
  const output = (await (mod.default as OutputFactory)(arg, context)) as
    | Partial<Output>
    | undefined;
  if (!output || typeof output.name !== 'string') {
    throw new UsageError([`--output ${path}: its default export returned no output with a name`]);
  }
  return output as Output;
}

/** One JSON line per finished point, appended as it finishes (a dashboard or CI can tail it). */
export function pointsOutput(file: string): Output {
  return builtInOutput({
    name: 'points',
    pointFinished(e: PointFinished) {
      appendFileSync(file, `${JSON.stringify(pointLine(e))}\n`);
    },
  });
}

function pointLine({ session, point, summary, endedAt }: PointFinished) {
  const l = summary.latency;
  return {
    session: session.id,
    command: session.command,
    point: point.id,
    kind: point.kind,
    ...(point.dir !== undefined ? { dir: point.dir } : {}),
    scenario: point.scenario,
    load: point.load,
    endedAt,
    completed: summary.requests.completed,
    failed: summary.requests.failed,
    outputTokensPerS: summary.throughput.outputTokensPerS,
    requestsPerS: summary.throughput.requestsPerS,
    ttftP50Ms: l.ttftMs.p50,
    ttftP99Ms: l.ttftMs.p99,
    itlP99Ms: l.itlMs.p99,
    e2eP99Ms: l.e2eMs.p99,
    interrupted: summary.interrupted,
  };
}
