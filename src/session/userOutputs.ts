/**
 * Outputs chosen on the command line (`--export NAME[=ARG]`, repeatable): a built-in by name,
 * or a module of the user's own (a path ending in .js, .mjs, .cjs or .ts) whose default export
 * makes one from ARG. A new output is one file; no command changes.
 */
import { appendFileSync, existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from '../errors.js';
import type { Output, PointFinished } from './events.js';

/** Makes an output from the text after `=` (undefined when there was none). */
export type OutputFactory = (arg: string | undefined) => Output | Promise<Output>;

/** The built-in outputs besides the results directory, the HTML report and the progress line. */
export const BUILT_IN_OUTPUTS: Record<string, { about: string; make: OutputFactory }> = {
  points: {
    about: 'points=FILE: one JSON line per finished point (id, directory, load, headline metrics)',
    make: (file) => {
      if (!file) throw new UsageError(['--export points needs a file: --export points=FILE']);
      return pointsOutput(file);
    },
  },
};

const MODULE = /\.(m?js|cjs|ts)$/;

/** The outputs `specs` name; bad usage throws a UsageError naming the spec and the fix. */
export async function loadOutputs(specs: readonly string[] | undefined): Promise<Output[]> {
  const outputs: Output[] = [];
  for (const spec of specs ?? []) {
    const at = spec.indexOf('=');
    const name = at < 0 ? spec : spec.slice(0, at);
    const arg = at < 0 ? undefined : spec.slice(at + 1);
    outputs.push(await (MODULE.test(name) ? fromModule(name, arg) : builtIn(name, arg)));
  }
  return outputs;
}

function builtIn(name: string, arg: string | undefined): Output | Promise<Output> {
  const known = Object.hasOwn(BUILT_IN_OUTPUTS, name) ? BUILT_IN_OUTPUTS[name] : undefined;
  if (!known) {
    throw new UsageError([
      `--export ${name}: no such output; choose ${Object.keys(BUILT_IN_OUTPUTS).join(', ')}, or give a module path (./my-output.js[=ARG]) whose default export makes one`,
    ]);
  }
  return known.make(arg);
}

async function fromModule(path: string, arg: string | undefined): Promise<Output> {
  const file = resolve(path);
  if (!existsSync(file)) throw new UsageError([`--export ${path}: no such file`]);
  const mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
  if (typeof mod.default !== 'function') {
    throw new UsageError([
      `--export ${path}: the module's default export must be a function (arg) => Output (see docs/library.md, "Outputs")`,
    ]);
  }
  const output = (await (mod.default as OutputFactory)(arg)) as Partial<Output> | undefined;
  if (!output || typeof output.name !== 'string') {
    throw new UsageError([`--export ${path}: its default export returned no output with a name`]);
  }
  return output as Output;
}

/** One JSON line per finished point, appended as it finishes (a dashboard or CI can tail it). */
export function pointsOutput(file: string): Output {
  return {
    name: 'points',
    pointFinished(e: PointFinished) {
      appendFileSync(file, `${JSON.stringify(pointLine(e))}\n`);
    },
  };
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
