/**
 * The simulator as a program describes it: one typed options object (the engine, its timing,
 * faults, answers, where it listens), and the one reading of `infergauge sim`'s flags into it.
 * The command line, the child process that `infergauge run` starts and a program calling
 * `startSimulator` all go from these options to an engine the same way.
 */
import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { parseFlagNumber, TIME_SCALE } from '../flagNumber.js';
import { nearest } from '../nearest.js';
import { type AnswerOptions, DEFAULT_ANSWER_OPTIONS } from './answer.js';
import { DEFAULT_SCRIPTED_TIMING, type ScriptedTiming } from './engine.js';
import { SIMULATOR_LIMITS } from './engineLimits.js';
import {
  ENGINE_FLAGS,
  engineSettingsFromFlags,
  type FlagSpec,
  flagName,
  isNegation,
  type SimEngineSettings,
} from './options.js';

/** The engines the simulator runs: a modelled GPU, or fixed timing (for client-accuracy tests). */
export const SIM_ENGINE_KINDS = ['physical', 'scripted'] as const;
export type SimEngineKind = (typeof SIM_ENGINE_KINDS)[number];

/**
 * Everything `infergauge sim` takes, with typed values. The engine settings (model, GPU, TP,
 * DP, dtype, personality, max-num-seqs, ...) are SimEngineSettings'; unset values take the
 * command line's defaults, except `port`: 0 (a free one).
 */
export interface SimulatorOptions extends SimEngineSettings {
  /** 'physical' (default): the modelled GPU; 'scripted': fixed timing (`timing`). */
  engine?: SimEngineKind;
  /** The scripted engine's timing (defaults: DEFAULT_SCRIPTED_TIMING). */
  timing?: Partial<ScriptedTiming>;
  /** Real seconds per simulated second (0.1 runs 10x faster than the modelled GPU; default 1). */
  timeScale?: number;
  /** The model id served at /v1/models (default: sim-<model id>). */
  servedModelName?: string;
  /** Seeded fault injection, e.g. '429=0.05,reset=0.01@10' (docs/cli.md, Faults). */
  faults?: string;
  /** Seed of the fault draws (default 1). */
  faultSeed?: number;
  /** Address to bind (default 127.0.0.1). */
  host?: string;
  /** Port to listen on (default 0: a free one). */
  port?: number;
  /** Ground-truth records kept for GET /debug/truth (default 10,000). */
  truthLimit?: number;
  /** Tokens a chat template adds to every chat prompt (default 0). */
  chatTemplateTokens?: number;
  /** Reasoning and tool-call answers (defaults: DEFAULT_ANSWER_OPTIONS). */
  answers?: Partial<AnswerOptions>;
}

/**
 * One of `infergauge sim`'s own flags: `key` is its place in SimulatorOptions (`timing.itlMs`);
 * `choices` the values a string flag accepts; `default` the value it has when not given.
 */
export interface SimFlagSpec extends Omit<FlagSpec, 'native'> {
  choices?: readonly string[];
  default?: string | number;
}

const d = DEFAULT_SCRIPTED_TIMING;
const a = DEFAULT_ANSWER_OPTIONS;

/** `infergauge sim`'s flags besides the engine's (ENGINE_FLAGS), in the order of its --help. */
export const SIM_FLAGS: readonly SimFlagSpec[] = [
  {
    flag: '--port <port>',
    key: 'port',
    kind: 'number',
    min: 0,
    max: 65_535,
    integer: true,
    help: 'port to listen on (0 picks a free one)',
  },
  {
    flag: '--host <host>',
    key: 'host',
    kind: 'string',
    default: '127.0.0.1',
    help: 'address to bind',
  },
  {
    flag: '--model <preset|config.json>',
    key: 'model',
    kind: 'string',
    help: 'model preset (see --list) or a Hugging Face config.json (file or directory)',
  },
  {
    flag: '--served-model-name <name>',
    key: 'servedModelName',
    kind: 'string',
    help: 'model id it serves (default: sim-<model>)',
  },
  {
    flag: '--time-scale <x>',
    key: 'timeScale',
    kind: 'number',
    ...TIME_SCALE,
    default: 1,
    help: 'real seconds per simulated second (0.1 runs 10x faster than the modelled GPU)',
  },
  {
    flag: '--faults <spec>',
    key: 'faults',
    kind: 'string',
    help: "inject faults, e.g. '429=0.05,500=0.01,reset=0.01@10,stall=0.02:1500@3,malformed=0.01@2,slow-start=0.1:2000'",
  },
  {
    flag: '--fault-seed <n>',
    key: 'faultSeed',
    kind: 'number',
    min: 0,
    integer: true,
    default: 1,
    help: 'seed of the fault draws',
  },
  {
    flag: '--chat-template-tokens <n>',
    key: 'chatTemplateTokens',
    kind: 'number',
    ...SIMULATOR_LIMITS.chatTemplateTokens,
    integer: true,
    default: 0,
    help: 'tokens a chat template adds to every chat prompt (counted in usage and processed)',
  },
  {
    flag: '--reasoning <when>',
    key: 'answers.reasoning',
    kind: 'string',
    choices: ['request', 'always'],
    default: a.reasoning,
    help: 'chat answers reason first: when the request asks (enable_thinking, reasoning_effort), or always',
  },
  {
    flag: '--reasoning-share <f>',
    key: 'answers.reasoningShare',
    kind: 'number',
    min: 0,
    max: 1,
    default: a.reasoningShare,
    help: "share of a reasoning answer's tokens that are reasoning (a knob, not a model)",
  },
  {
    flag: '--tool-call-share <f>',
    key: 'answers.toolCallShare',
    kind: 'number',
    min: 0,
    max: 1,
    default: a.toolCallShare,
    help: "share of tool_choice 'auto' requests with tools answered with tool calls (seeded draw)",
  },
  {
    flag: '--parallel-tool-calls <n>',
    key: 'answers.parallelToolCalls',
    kind: 'number',
    ...SIMULATOR_LIMITS.parallelToolCalls,
    integer: true,
    default: a.parallelToolCalls,
    help: 'tool calls per answer when the request allows parallel calls',
  },
  {
    flag: '--answer-seed <n>',
    key: 'answers.seed',
    kind: 'number',
    min: 0,
    integer: true,
    default: a.seed,
    help: 'seed of the tool-call draws',
  },
  {
    flag: '--truth-limit <n>',
    key: 'truthLimit',
    kind: 'number',
    min: 0,
    integer: true,
    default: 10_000,
    help: 'ground-truth records kept for /debug/truth',
  },
  {
    flag: '--engine <kind>',
    key: 'engine',
    kind: 'string',
    choices: SIM_ENGINE_KINDS,
    default: 'physical',
    help: 'physical (modelled GPU) or scripted (fixed timing, for tests)',
  },
  {
    flag: '--ttft-base-ms <ms>',
    key: 'timing.ttftBaseMs',
    kind: 'number',
    ...SIMULATOR_LIMITS.ttftBaseMs,
    default: d.ttftBaseMs,
    help: 'scripted: TTFT = base + per-input-token x input tokens',
  },
  {
    flag: '--ttft-per-input-token-ms <ms>',
    key: 'timing.ttftPerInputTokenMs',
    kind: 'number',
    ...SIMULATOR_LIMITS.ttftPerInputTokenMs,
    default: d.ttftPerInputTokenMs,
    help: 'scripted: prefill time per input token',
  },
  {
    flag: '--itl-ms <ms>',
    key: 'timing.itlMs',
    kind: 'number',
    ...SIMULATOR_LIMITS.itlMs,
    default: d.itlMs,
    help: 'scripted: time per output token after the first',
  },
  {
    flag: '--tokens-per-event <n>',
    key: 'timing.tokensPerEvent',
    kind: 'number',
    ...SIMULATOR_LIMITS.tokensPerEvent,
    integer: true,
    default: d.tokensPerEvent,
    help: 'scripted: tokens per stream event after the first',
  },
  {
    flag: '--max-concurrency <n>',
    key: 'timing.maxConcurrency',
    kind: 'number',
    min: 1,
    integer: true,
    default: d.maxConcurrency,
    help: 'scripted: requests generating at once; the rest queue (FIFO)',
  },
];

/** The name commander gives a flag's value: `--itl-ms` is `itlMs`. */
export function flagAttribute(f: { flag: string }): string {
  return flagName(f)
    .replace(/^--/, '')
    .replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function getPath(o: object, path: string): unknown {
  let at: unknown = o;
  for (const part of path.split('.')) at = (at as Record<string, unknown> | undefined)?.[part];
  return at;
}

function setPath(o: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let at = o;
  for (const part of parts.slice(0, -1)) {
    at[part] ??= {};
    at = at[part] as Record<string, unknown>;
  }
  at[parts[parts.length - 1] as string] = value;
}

/** The problem with one of the simulator's own values, naming its flag; undefined when fine. */
function simFlagProblem(f: SimFlagSpec, value: unknown): string | undefined {
  if (f.kind === 'number') {
    const n = parseFlagNumber(value, f);
    return 'problem' in n ? `${flagName(f)} ${n.problem}` : undefined;
  }
  // A model may also be given as a spec.
  if (f.key === 'model' && typeof value === 'object' && value !== null) return undefined;
  if (typeof value !== 'string') return `${flagName(f)} must be text`;
  if (f.choices && !f.choices.includes(value)) {
    return `${flagName(f)} ${value} is not one; choose ${f.choices.join(' or ')}`;
  }
  return undefined;
}

/**
 * Reads `infergauge sim`'s flags, keyed as commander names them (`itlMs`, `tp`; the engine's as
 * ENGINE_FLAGS keys them) with string or already-read values, into SimulatorOptions, with a
 * problem naming each flag that holds no value it accepts (that flag is left unset).
 */
export function simulatorOptionsFromFlags(flags: Record<string, unknown>): {
  options: SimulatorOptions;
  problems: string[];
} {
  const { settings, problems } = engineSettingsFromFlags(flags);
  const options: Record<string, unknown> = { ...settings };
  for (const f of SIM_FLAGS) {
    const given = flags[flagAttribute(f)];
    if (given === undefined) continue;
    const value = f.kind === 'number' ? given : String(given);
    const problem = simFlagProblem(f, value);
    if (problem) problems.push(problem);
    else setPath(options, f.key, f.kind === 'number' ? parseNumber(f, value) : value);
  }
  return { options: options as SimulatorOptions, problems };
}

function parseNumber(f: SimFlagSpec, value: unknown): number {
  return (parseFlagNumber(value, f) as { value: number }).value;
}

/**
 * Reads a command line of `infergauge sim` flags (`['--model', 'llama-3-70b', '--tp', '2']`)
 * into SimulatorOptions: the same reading as simulatorOptionsFromFlags, for callers that hold
 * flags as words (the engine flags `infergauge run` passes on, tests).
 */
export function parseSimulatorArgs(args: readonly string[]): {
  options: SimulatorOptions;
  problems: string[];
} {
  const specs = [...ENGINE_FLAGS, ...SIM_FLAGS];
  const valued = new Set(specs.filter((f) => f.kind !== 'boolean').map((f) => flagName(f)));
  // A flag's value is the next word, whatever it starts with (`--itl-ms -1`), as commander reads it.
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as string;
    if (valued.has(word) && i + 1 < args.length) words.push(`${word}=${args[++i]}`);
    else words.push(word);
  }
  const parsed = (() => {
    try {
      return parseArgs({
        args: words,
        strict: true,
        allowPositionals: false,
        options: Object.fromEntries(
          specs.map((f) => [
            flagName(f).slice(2),
            { type: f.kind === 'boolean' ? ('boolean' as const) : ('string' as const) },
          ]),
        ),
      }).values;
    } catch (err) {
      return (err as Error).message;
    }
  })();
  if (typeof parsed === 'string') return { options: {}, problems: [parsed] };
  const flags: Record<string, unknown> = {};
  for (const f of ENGINE_FLAGS) {
    const value = parsed[flagName(f).slice(2)];
    // `--no-chunked-prefill` is chunkedPrefill false, as commander reads it.
    if (value !== undefined) flags[f.key] = isNegation(f) ? false : value;
  }
  for (const f of SIM_FLAGS) {
    const value = parsed[flagName(f).slice(2)];
    if (value !== undefined) flags[flagAttribute(f)] = value;
  }
  return simulatorOptionsFromFlags(flags);
}

/**
 * The problems with the simulator's own typed values (engine settings are resolveEngine's),
 * each naming the flag that sets the same thing.
 */
export function simulatorOptionProblems(options: SimulatorOptions): string[] {
  const problems: string[] = [];
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    return [`the simulator's options must be an object (SimulatorOptions), not ${kindOf(options)}`];
  // parseSimulatorArgs' answer passed whole: its keys are not options, and ignoring them
  // started the default model without a word.
  if ('options' in options && 'problems' in options) {
    return [
      "got parseSimulatorArgs' { options, problems }: check problems, then pass its options: const { options, problems } = parseSimulatorArgs(args); if (problems.length === 0) await startSimulator(options)",
    ];
  }
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(SIMULATOR_OPTION_KEYS, key)) {
      const near = nearest(key, Object.keys(SIMULATOR_OPTION_KEYS));
      problems.push(
        `${JSON.stringify(key)} is not a simulator option${near ? ` (did you mean "${near}"?)` : ''}; the options are SimulatorOptions' (docs/library.md, "The simulator's options")`,
      );
    }
  }
  for (const f of SIM_FLAGS) {
    const value = getPath(options, f.key);
    if (value === undefined) continue;
    const problem = simFlagProblem(f, value);
    if (problem) problems.push(problem);
  }
  return problems;
}

/**
 * Every key of SimulatorOptions: the compiler holds this table to the interface (a key missing
 * here or one the interface lacks fails to build), and startSimulator refuses any other key.
 */
const SIMULATOR_OPTION_KEYS = {
  model: true,
  gpu: true,
  gpuSpec: true,
  enginePersonality: true,
  engineVersion: true,
  tp: true,
  dp: true,
  loadBalancer: true,
  dtype: true,
  kvCacheDtype: true,
  gpuMemoryUtilization: true,
  maxModelLen: true,
  maxNumSeqs: true,
  maxNumBatchedTokens: true,
  blockSize: true,
  chunkedPrefill: true,
  enablePrefixCaching: true,
  numGpuBlocksOverride: true,
  nonKvOverheadGb: true,
  calibration: true,
  mbu: true,
  mfu: true,
  mfu8bit: true,
  mfuHalfTokens: true,
  stepOverheadMs: true,
  perSeqOverheadUs: true,
  frontendLatencyMs: true,
  engineHopMs: true,
  tokenizeUsPerToken: true,
  clientPath: true,
  frontendChatCpuMs: true,
  numSchedulerSteps: true,
  memFractionStatic: true,
  chunkedPrefillSize: true,
  maxRunningRequests: true,
  disableRadixCache: true,
  kvCacheFreeGpuMemFraction: true,
  maxBatchSize: true,
  maxNumTokens: true,
  enableChunkedContext: true,
  parallel: true,
  ctxSize: true,
  batchSize: true,
  ubatchSize: true,
  kvUnified: true,
  cacheRam: true,
  engine: true,
  timing: true,
  timeScale: true,
  servedModelName: true,
  faults: true,
  faultSeed: true,
  host: true,
  port: true,
  truthLimit: true,
  chatTemplateTokens: true,
  answers: true,
} as const satisfies Record<keyof SimulatorOptions, true>;

/** What a value is, for a message that says what was given instead of options. */
function kindOf(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  return `a ${typeof value}`;
}

/**
 * Simulator options that cannot start an engine: a UsageError (exit 2 on the command line),
 * every problem listed, each naming the flag of the same meaning.
 */
export class SimulatorOptionsError extends UsageError {
  constructor(problems: string[]) {
    super(problems, 'IG_SIM_OPTIONS');
    this.message = `invalid options\n  - ${problems.join('\n  - ')}`;
  }
}
