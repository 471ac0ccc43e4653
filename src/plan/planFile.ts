import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { z as Zod } from 'zod';
import { UsageError } from '../errors.js';
import { didYouMean, nearest } from '../nearest.js';
import { resolveTlsPaths } from '../tls.js';
import { SCENARIO_PRESETS } from '../workload/scenarios.js';
import type { PlanScenario } from './planScenario.js';

// `run` reads a plan's scenarios without loading YAML or zod; the tests read them from here too.
export { type PlanScenario, scenarioFromPlan } from './planScenario.js';

const require = createRequire(import.meta.url);

/**
 * A plan file (`--plan plan.yaml`): every `infergauge run` option under its flag's name without
 * the dashes (`concurrency: 16`, `input-tokens: uniform:128:512`, `gpu: h200`), plus
 * `scenarios:`, a list of custom or preset workloads. Flags on the command line override it.
 */

/** What a YAML value is, for a message that says what was given instead. */
function kindOf(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'a mapping';
  return `the ${typeof value} ${JSON.stringify(value)}`;
}

/** A union's one message: what is allowed and what was given (zod says only "Invalid input"). */
const allowed = (what: string) => ({
  error: (issue: { input?: unknown }) => `must be ${what}, not ${kindOf(issue.input)}`,
});

const PRESET_NAMES = SCENARIO_PRESETS.map((s) => s.name) as [string, ...string[]];

/** Every option `run` accepts from a file, by its flag name. */
export const PLAN_KEYS = [
  'url',
  'model',
  'backend',
  'endpoint',
  'concurrency',
  'rate',
  'arrival',
  'burstiness',
  'ramp-up',
  'trace',
  'trace-speed',
  'trace-window',
  'trace-max-gap-s',
  'trace-block-tokens',
  'tool-wait-cap-s',
  'dataset',
  'max-concurrency',
  'requests',
  'sessions',
  'turns',
  'think-time',
  'history',
  'system-prompt',
  'reasoning-effort',
  'thinking',
  'duration',
  'until',
  'warmup',
  'input-tokens',
  'output-tokens',
  'scenario',
  'tokenizer',
  'shared-prefix',
  'ignore-eos',
  'reset-cache',
  'prefix-hit-rate',
  'continuous-usage-stats',
  'max-answer-mb',
  'temperature',
  'timeout',
  'http2',
  'grace',
  'slo',
  'seed',
  'prompt-salt',
  'api-key-env',
  'ca-cert',
  'client-cert',
  'client-key',
  'client-key-passphrase-env',
  'insecure',
  'tls-servername',
  'header',
  'proxy',
  'extra-body',
  'out',
  'records-format',
  'label',
  'tags',
  'note',
  'server-info',
  'server-metrics',
  'metrics-url',
  'slots',
  'dcgm-url',
  'gpu-memory',
  'server-pid',
  'scrape-interval',
  'simulate',
  'time-scale',
  'gpu',
  'gpu-spec',
  'engine-personality',
  'engine-version',
  'tp',
  'dp',
  'load-balancer',
  'dtype',
  'kv-cache-dtype',
  'gpu-memory-utilization',
  'max-model-len',
  'max-num-seqs',
  'max-num-batched-tokens',
  'block-size',
  'chunked-prefill',
  'enable-prefix-caching',
  'num-gpu-blocks-override',
  'non-kv-overhead-gb',
  'mbu',
  'mfu',
  'mfu-8bit',
  'mfu-half-tokens',
  'step-overhead-ms',
  'per-seq-overhead-us',
  'frontend-latency-ms',
  'engine-hop-ms',
  'tokenize-us-per-token',
  'client-path',
  'frontend-chat-cpu-ms',
  'num-scheduler-steps',
  'mem-fraction-static',
  'chunked-prefill-size',
  'max-running-requests',
  'kv-cache-free-gpu-mem-fraction',
  'max-batch-size',
  'max-num-tokens',
  'enable-chunked-context',
  'disable-radix-cache',
  'parallel',
  'ctx-size',
  'batch-size',
  'ubatch-size',
  'kv-unified',
  'calibration',
  'prediction-draws',
  'threshold',
  'outputs',
  'export',
  'export-timeout-s',
  'html',
  'workers',
] as const;

/**
 * The plan file's schemas, built at first use: zod and YAML are required only when a plan file
 * is read (both ship CommonJS), so that `run` without --plan loads neither.
 */
function buildSchemas() {
  const { z } = require('zod') as { z: typeof Zod };
  const scalar = z.union(
    [z.string(), z.number(), z.boolean()],
    allowed('one value (text, a number, or true/false)'),
  );

  const LENGTH_FORMS = 'a whole number >= 1 or a distribution such as uniform:128:512';

  const lengthField = z
    .union([z.number().int().min(1), z.string()], allowed(LENGTH_FORMS))
    .optional();
  const pauseField = z
    .union([z.number().int().min(0), z.string()], allowed('milliseconds: 1000 or uniform:500:3000'))
    .optional();

  /** One scenario in a plan file: a preset, optionally reshaped, or one written from scratch. */
  const planScenarioSchema = z
    .object({
      name: z
        .string()
        .regex(/^[A-Za-z0-9._-]+$/, {
          error: 'may hold only letters, digits, dot, dash, underscore',
        })
        .optional()
        .describe('the scenario name (its results go in a folder of this name)'),
      preset: z
        .enum(PRESET_NAMES, {
          error: (issue: { input?: unknown }) =>
            `unknown preset ${JSON.stringify(issue.input)}${typeof issue.input === 'string' ? didYouMean(issue.input, PRESET_NAMES) : ''}; presets: ${PRESET_NAMES.join(', ')}`,
        })
        .optional()
        .describe('start from a preset scenario'),
      'input-tokens': z
        .union([z.number().int().min(1), z.string()], allowed(LENGTH_FORMS))
        .optional()
        .describe(
          'prompt length: 256, uniform:128:512, normal:256:64, poisson:256, lognormal:256:128',
        ),
      'output-tokens': z
        .union([z.number().int().min(1), z.string()], allowed(LENGTH_FORMS))
        .optional()
        .describe('max_tokens: the same forms as input-tokens'),
      'shared-prefix': z.number().int().min(0).optional().describe('tokens common to all prompts'),
      description: z.string().optional(),
      session: z
        .object({
          turns: lengthField.describe('turns per session: 5, uniform:3:8, ...'),
          'think-time-ms': pauseField.describe('ms between an answer and the next turn'),
          history: z
            .enum(['actual', 'reference'])
            .optional()
            .describe("the model's earlier answers as it gave them (actual) or the reference ones"),
          'system-prompt-tokens': z.number().int().min(0).optional(),
        })
        .strict()
        .optional()
        .describe('multi-turn sessions (each turn re-sends the history)'),
      agent: z
        .object({
          steps: lengthField.describe('tool-calling steps before the final answer'),
          'fan-out': z.number().int().min(1).max(64).optional().describe('parallel calls per step'),
          'system-prompt-tokens': z.number().int().min(0).optional(),
          tools: z.number().int().min(1).max(128).optional().describe('tool schemas offered'),
          'tool-latency-ms': pauseField.describe('ms a tool takes'),
          'tool-output-tokens': lengthField.describe('tokens of each tool result'),
          'answer-tokens': lengthField.describe('max_tokens of the final answer'),
        })
        .strict()
        .optional()
        .describe('agent tasks: tool calls, tool results, a final answer'),
      reasoning: z
        .object({
          effort: z.enum(['low', 'medium', 'high']).optional().describe('reasoning_effort'),
          thinking: z.boolean().optional().describe('chat_template_kwargs.enable_thinking'),
        })
        .strict()
        .optional()
        .describe('ask reasoning models to think'),
    })
    .strict() satisfies Zod.ZodType<PlanScenario>;

  const planFileSchema = z
    .object({
      ...Object.fromEntries(
        PLAN_KEYS.map((k) => [
          k,
          k === 'header' || k === 'threshold' || k === 'outputs' || k === 'export' || k === 'tags'
            ? z
                .union([z.string(), z.array(z.string())], allowed('text or a list of text'))
                .optional()
            : scalar.optional(),
        ]),
      ),
      'server-info': z
        .union(
          [
            z.string(),
            z.array(z.string()),
            z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
          ],
          allowed('KEY=VALUE text, a list of it, or a mapping of keys to values'),
        )
        .optional(),
      'extra-body': z
        .union(
          [z.string(), z.record(z.string(), z.unknown())],
          allowed('a mapping of request-body fields (or its JSON text)'),
        )
        .optional(),
      scenarios: z.array(planScenarioSchema).min(1).optional(),
    })
    .strict();
  return { z, planScenarioSchema, planFileSchema };
}
let built: ReturnType<typeof buildSchemas> | undefined;
const schemas = () => {
  built ??= buildSchemas();
  return built;
};

/** The plan file's JSON schema (published in docs/plan.schema.json). */
export function planJsonSchema(): unknown {
  const { z, planFileSchema } = schemas();
  return z.toJSONSchema(planFileSchema);
}

/** An unreadable or invalid plan file: each problem names the file, the field and the fix. */
export class PlanFileError extends UsageError {
  constructor(problems: string[]) {
    super(problems, 'IG_PLAN_FILE');
  }
}

const camel = (key: string) => key.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** The options a plan file sets, keyed like the command's parsed options (camelCase, strings). */
export interface PlanFileOptions {
  options: Record<string, unknown>;
  scenarios?: PlanScenario[];
}

/** The largest plan file read: hand-written plans are a few kilobytes. */
export const PLAN_FILE_MAX_BYTES = 1024 * 1024;
/** Problems listed for one plan file; the rest are counted. */
export const PLAN_PROBLEMS_SHOWN = 20;

export function readPlanFile(path: string): PlanFileOptions {
  let text: string;
  try {
    const bytes = statSync(path).size;
    if (bytes > PLAN_FILE_MAX_BYTES) {
      throw new PlanFileError([
        `${path}: ${bytes.toLocaleString('en-US')} bytes is too large for a plan (at most ${PLAN_FILE_MAX_BYTES.toLocaleString('en-US')}, 1 MiB); is it the right file?`,
      ]);
    }
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (err instanceof PlanFileError) throw err;
    throw new PlanFileError([`${path}: cannot read the plan (${(err as Error).message})`]);
  }
  const file = planFileOptions(parsePlanText(text, path), path);
  // A plan names its certificates as they lie beside it, wherever it is run from.
  resolveTlsPaths(file.options, path);
  return file;
}

/**
 * The plan's YAML (or JSON) value. Duplicate keys are found here in one pass: the yaml
 * package's own check compares every key with every other (minutes for 100,000 keys).
 */
function parsePlanText(text: string, path: string): unknown {
  const { isScalar, LineCounter, parseDocument, visit } = require('yaml') as typeof import('yaml');
  const lines = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: false, lineCounter: lines });
  if (doc.errors.length > 0) {
    throw new PlanFileError([`${path}: not valid YAML: ${doc.errors[0].message}`]);
  }
  const duplicates: (() => string)[] = [];
  visit(doc, {
    Map(_, map) {
      const seen = new Set<string>();
      for (const { key } of map.items) {
        const name = isScalar(key) ? String(key.value) : String(key);
        if (!seen.has(name)) {
          seen.add(name);
          continue;
        }
        const at = isScalar(key) && key.range ? ` (line ${lines.linePos(key.range[0]).line})` : '';
        duplicates.push(() => `${path}: the key "${name}" is given twice${at}: keep one`);
      }
    },
  });
  if (duplicates.length > 0) throw new PlanFileError(capped(duplicates));
  try {
    return doc.toJS() ?? {};
  } catch (err) {
    throw new PlanFileError([`${path}: not valid YAML: ${(err as Error).message}`]);
  }
}

/**
 * The first PLAN_PROBLEMS_SHOWN problems, and how many more there are; each is worded only when
 * shown (a plan may hold thousands).
 */
function capped(problems: readonly (() => string)[]): string[] {
  const shown = problems.slice(0, PLAN_PROBLEMS_SHOWN).map((say) => say());
  const more = problems.length - shown.length;
  return more > 0 ? [...shown, `... and ${more.toLocaleString('en-US')} more problems`] : shown;
}

/** Validates a parsed plan document (pure: tests call it with objects). */
export function planFileOptions(value: unknown, path: string): PlanFileOptions {
  const { planScenarioSchema, planFileSchema } = schemas();
  const parsed = planFileSchema.safeParse(value);
  if (!parsed.success) {
    // One problem per unknown key.
    const problems = parsed.error.issues.flatMap((issue) => {
      const field = issue.path
        .map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i > 0 ? '.' : ''}${String(p)}`))
        .join('');
      if (issue.code !== 'unrecognized_keys') {
        return [() => `${path}: ${field || '(top level)'}: ${issue.message}`];
      }
      return issue.keys.map((k) => () => {
        const near = nearest(k, [
          ...PLAN_KEYS,
          'scenarios',
          ...Object.keys(planScenarioSchema.shape),
        ]);
        return `${path}: unknown field "${field ? `${field}.${k}` : k}"${near ? ` (did you mean "${near}"?)` : ''}`;
      });
    });
    throw new PlanFileError(capped(problems));
  }
  const options: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(parsed.data)) {
    if (key === 'scenarios' || v === undefined) continue;
    if (key === 'outputs' || key === 'export') {
      // `export:` is `outputs:`'s old name: both are --output's list, in the file's order.
      const list = Array.isArray(v) ? v : [v];
      options.output = [...((options.output as string[] | undefined) ?? []), ...list];
    } else if (key === 'tags') {
      // --tag's list: the flag is singular, one tag each time.
      options.tag = Array.isArray(v) ? v : [v];
    } else if (key === 'server-info') {
      options.serverInfo =
        typeof v === 'string'
          ? [v]
          : Array.isArray(v)
            ? v
            : Object.entries(v as Record<string, unknown>).map(([k, x]) => `${k}=${String(x)}`);
    } else if (key === 'header' || key === 'threshold') {
      options[key] = Array.isArray(v) ? v : [v];
    } else if (key === 'extra-body')
      options.extraBody = typeof v === 'string' ? v : JSON.stringify(v);
    // Commander's --no-chunked-prefill lands as chunkedPrefill: false.
    else if (typeof v === 'boolean') options[camel(key)] = v;
    else options[camel(key)] = String(v);
  }
  const scenarios = parsed.data.scenarios as PlanScenario[] | undefined;
  return { options, ...(scenarios ? { scenarios } : {}) };
}
