/** The command line: every command, its options and help (parsed by main.ts). */
import { Command, CommanderError, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { VERSION } from '../version.js';

/**
 * Each command, in the order help lists them, loaded when it is built: a command's module brings
 * its whole implementation (the simulator, the sizing search, Kubernetes, the readers), so
 * `infergauge run` loads only run's (issue 51: a one-request run's start-up CPU).
 */
const COMMANDS: readonly (readonly [string, () => Promise<CommandUnknownOpts>])[] = [
  ['run', async () => (await import('./run.js')).runCommand()],
  ['sim', async () => (await import('./sim.js')).simCommand()],
  ['memory', async () => (await import('./memory.js')).memoryCommand()],
  ['sweep', async () => (await import('./sweep.js')).sweepCommand()],
  ['probe', async () => (await import('./probe.js')).probeCommand()],
  ['capacity', async () => (await import('./capacity.js')).capacityCommand()],
  ['calibrate', async () => (await import('./calibrate.js')).calibrateCommand()],
  ['size', async () => (await import('./size.js')).sizeCommand()],
  ['report', async () => (await import('./report.js')).reportCommand()],
  ['ui', async () => (await import('./ui.js')).uiCommand()],
  ['compare', async () => (await import('./compare.js')).compareCommand()],
  ['history', async () => (await import('./history.js')).historyCommand()],
  ['plan', async () => (await import('./plan.js')).planCommand()],
  ['merge', async () => (await import('./merge.js')).mergeCommand()],
  ['k8s', async () => (await import('./k8s.js')).k8sCommand()],
];

/**
 * The command line. Given the command a command line names (`run` in `infergauge run ...`), only
 * that command is built: it parses and runs as it would among all the others; given --version,
 * none. Otherwise (help, a mistyped name, which help answers with every command) all are built.
 */
export async function program(named?: string): Promise<Command> {
  const chosen = COMMANDS.filter(([name]) => name === named);
  // `--version` first answers before any command is looked at.
  const none = named === '--version' || named === '-V';
  const commands = none
    ? []
    : await Promise.all((chosen.length > 0 ? chosen : COMMANDS).map(([, build]) => build()));
  const root = new Command('infergauge')
    .description(
      'Measure LLM serving endpoints: throughput, latency (TTFT, ITL, TPOT, E2E with p95/p99) and memory.\nWithout --url, `run` benchmarks the built-in simulated server.',
    )
    .version(VERSION)
    .showHelpAfterError()
    .addHelpText(
      'after',
      "\nExamples:\n  infergauge run                                   benchmark the built-in simulator\n  infergauge run --url http://127.0.0.1:8000 --concurrency 64 --requests 1000\n  infergauge run --url http://127.0.0.1:8000 --rate 4 --duration 120 --slo 'ttft<500,tpot<50'\n  infergauge sim --port 8000                       serve the simulator for other tools\n  infergauge run --scenario chat,creative,summarize --tokenizer o200k_base\n  infergauge plan --print --plan plan.yaml        the effective plan, nothing sent\n  infergauge sweep --scenario chat,creative,summarize --find-max --slo 'ttft.p99<500,itl.p99<50'\n  infergauge probe prefill --simulate --model llama-3.1-8b --gpu h100     TTFT against input length, prefill rate\n  infergauge probe decode --url http://127.0.0.1:8000 --ignore-eos         ITL and decode tok/s against concurrency\n  infergauge memory --model llama-3-8b --gpu h100 --context 32768\n  infergauge run --output ui                       watch it live in the browser (Stop button included)\n  infergauge ui infergauge-results                 finished results in the browser\n  infergauge compare results/h100 results/h200 --md compare.md --threshold 'ttft.p99<500'\n  infergauge history --tag nightly --metric ttft.p99        a series' trend; --regress exits 3 on a regression\n  infergauge capacity --model llama-3.1-8b --gpu rtx4090 --max-model-len 8192\n  infergauge calibrate results/sweep results/probe --model llama-3.1-8b --gpu l40s --out calibration.json\n  infergauge sweep --simulate --calibration calibration.json --levels 1,16,64,256     predict loads not measured\n  infergauge size --model llama-3.1-8b --rate 20 --slo 'ttft.p99<500,itl.p99<50' --gpu h100,l40s --prices prices.yaml\n  infergauge run --url http://vllm:8000 --plan plan.yaml --shard 0/4 --start-at 2026-11-30T09:00:00Z --out res/shard-0\n  infergauge merge --out res/merged res/shard-*\n  infergauge k8s job --shards 8 --plan plan.yaml --image registry/infergauge:0.1.0 > job.yaml\n\nExit codes (the first that applies wins):\n  130  interrupted (what was measured is still written)\n  1    failed to run: unreachable server, --out taken, or no measured request succeeded\n  3    a --threshold failed (a failure share is one: 'failureRate<0.01')\n  2    invalid options\n  0    done",
    )
    .hook('preAction', (_root, action) => refuseEmptyValues(action));
  for (const command of commands) root.addCommand(command);
  forEachCommand(root, (c) => c.exitOverride(usageExit));
  return root;
}

/** `command` and every command under it (addCommand does not pass settings down). */
function forEachCommand(command: CommandUnknownOpts, f: (c: CommandUnknownOpts) => void): void {
  f(command);
  for (const sub of command.commands) forEachCommand(sub, f);
}

/**
 * Commander's own usage errors (unknown option or command, missing value, extra argument) keep
 * their message but exit 2 as every other invalid option does; help and --version exit 0.
 */
function usageExit(err: CommanderError): never {
  throw new CommanderError(
    err.exitCode === 0 ? EXIT.ok : EXIT.invalidOptions,
    err.code,
    err.message,
  );
}

/**
 * An option given an empty value (`--seed ''`) is bad usage for every command: read as a number
 * it would silently become 0, and no name, path or URL is empty.
 */
function refuseEmptyValues(command: CommandUnknownOpts): void {
  for (const option of command.options) {
    const key = option.attributeName();
    if (command.getOptionValueSource(key) !== 'cli') continue;
    const value: unknown = command.getOptionValue(key);
    const values = Array.isArray(value) ? value : [value];
    if (values.some((v) => typeof v === 'string' && v.trim() === '')) {
      command.error(
        `error: ${option.long ?? option.flags} was given an empty value (an empty string is not 0): give a value or leave the option out`,
        { exitCode: EXIT.invalidOptions, code: 'infergauge.emptyValue' },
      );
    }
  }
}
