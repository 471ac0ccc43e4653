/**
 * `npm run engine:llama`'s arguments, read without building or loading anything: `--help` and a
 * bad argument must answer at once, not after (or instead of) a llama-server build.
 */
import { parseArgs } from 'node:util';
import { LLAMA_PRESETS, type LlamaPreset } from './model.js';

export const ENGINE_USAGE = `Usage: npm run engine:llama -- [options]

Serves a generated llama.cpp model (random weights, no download) on this machine's CPU with
llama-server on loopback, in the foreground until Ctrl-C; builds llama-server first if the cache
has none (minutes).

Options:
  --port <n>          port to listen on (default: 8080)
  --model-size <id>   ${Object.keys(LLAMA_PRESETS).join(' or ')} (default: tiny)
  --parallel <n>      llama-server slots (default: 4)
  --ctx-size <n>      KV cells in all, split over the slots (default: 4096)
  --threads <n>       CPU threads (default: 1)
  --kv-unified        one KV buffer for all slots, as llama-server without --parallel
  --config-out <file> also write the model's shape as a Hugging Face config.json
                      (for --model of infergauge calibrate or sim)
  -h, --help          this text
`;

export interface EngineOptions {
  port: number;
  preset: LlamaPreset;
  parallel: number;
  ctxSize: number;
  threads: number;
  kvUnified: boolean;
  configOut?: string;
}

export type EngineArgs =
  | { help: true }
  | { help?: false; options: EngineOptions }
  | { help?: false; problems: string[] };

/** Reads argv (without node and the script); every problem is named, none thrown. */
export function parseEngineArgs(argv: string[]): EngineArgs {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string', default: '8080' },
        'model-size': { type: 'string', default: 'tiny' },
        parallel: { type: 'string', default: '4' },
        'ctx-size': { type: 'string', default: '4096' },
        threads: { type: 'string', default: '1' },
        'kv-unified': { type: 'boolean', default: false },
        'config-out': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (err) {
    // node:util's messages name the argument ("Unknown option '--prot'"); the stack says nothing.
    return { problems: [(err as Error).message.split('\n')[0]] };
  }
  if (values.help) return { help: true };
  const problems: string[] = [];
  const preset = values['model-size'] as string;
  if (!(preset in LLAMA_PRESETS))
    problems.push(
      `--model-size must be one of ${Object.keys(LLAMA_PRESETS).join(', ')}, not ${preset}`,
    );
  const whole = (flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const text = values[flag] as string;
    const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max)
      problems.push(
        `--${flag} must be a whole number from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ''}, not ${text}`,
      );
    return n;
  };
  const options: EngineOptions = {
    port: whole('port', 1, 65535),
    preset: preset as LlamaPreset,
    parallel: whole('parallel', 1),
    ctxSize: whole('ctx-size', 1),
    threads: whole('threads', 1),
    kvUnified: values['kv-unified'] === true,
    ...(typeof values['config-out'] === 'string' ? { configOut: values['config-out'] } : {}),
  };
  return problems.length > 0 ? { problems } : { options };
}
