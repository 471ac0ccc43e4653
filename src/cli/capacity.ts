import { Command, Option } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { failedToRun } from '../report/failures.js';
import type { CapacityOptions } from '../session/profiles/capacity.js';
import {
  collect,
  listenForInterrupts,
  printNotice,
  printProblems,
  printWarnings,
  runAction,
  useColor,
} from './common.js';
import { addEngineFlags } from './engineFlags.js';
import { pointLineOutputs } from './progress.js';
import {
  addConnectionOptions,
  exportLimits,
  noteHelp,
  outputOption,
  outputsUnderOneName,
  serverInfoOption,
  tagOption,
} from './run.js';

export function capacityCommand(): Command {
  const command = new Command('capacity')
    .description(
      'The batch-to-OOM curve: raise concurrent long-context requests 1, 2, 4, ... until requests fail, the server preempts or fills its KV cache, or latency falls off a cliff; measured beside the analytic prediction.',
    )
    .option('--url <url>', 'server base URL (default: start the built-in simulator)')
    .option(
      '--model <preset|config.json>',
      'the served model, for the prediction (and the simulated model without --url)',
    )
    .option(
      '--model-name <name>',
      'model name sent in requests (default: the first the server lists)',
    )
    .option('--endpoint <kind>', 'completions or chat (default: completions, no chat template)')
    .option('--input-tokens <n>', 'prompt tokens per request (default: 4096)')
    .option('--output-tokens <n>', 'output tokens per request (default: 256)')
    .option('--max-batch <n>', 'largest batch to try (default: 256)')
    .option('--batches <list>', 'batches to try instead of doubling, e.g. 1,8,16,24,32')
    .option('--requests-per-step <n>', 'requests per batch size (default: 2 x batch, at least 4)')
    .option(
      '--cliff-factor <x>',
      'a jump of p99 TTFT or mean TPOT by this factor from one step to the next is a limit (default: 3)',
    )
    .option('--metrics-url <url>', 'Prometheus metrics of the server (default: <url>/metrics)')
    .option('--scrape-interval <s>', 'seconds between metric scrapes (default: 0.5)')
    .option(
      '--timeout <s>',
      'per-request limit in seconds, from sending to the last byte (default: 600)',
    )
    .option('--api-key-env <var>', 'environment variable holding the API key')
    .option('--ignore-eos', 'ask the server for exactly --output-tokens (vLLM, SGLang)')
    .option(
      '--reset-cache',
      "empty the server's prefix cache before every step (vLLM /reset_prefix_cache with VLLM_SERVER_DEV_MODE=1, SGLang /flush_cache)",
    )
    .option('--time-scale <x>', 'built-in simulator: real seconds per simulated second')
    .option('--seed <n>', 'seed for prompts (default: 42)')
    .option(
      '--prediction-draws <n>',
      'built-in simulator with --calibration: draws of the fitted values behind the prediction intervals (default: 32; 0: none)',
    )
    .option(
      '--prompt-salt <n>',
      "mixed into every prompt with --seed, as the search's manifest.json records it (default: a fresh one per search)",
    )
    .option('--out <dir>', 'results directory (default: infergauge-results/<UTC time>-capacity/)')
    .addOption(tagOption())
    .option('--note <text>', noteHelp)
    .addOption(serverInfoOption())
    .option('--json', 'print capacity.json to stdout instead of the table')
    .addOption(outputOption())
    .addOption(new Option('--export <name[=arg]>').argParser(collect).hideHelp())
    .option(
      '--export-timeout-s <s>',
      'seconds an --output module of your own may take to load, or to finish a step or the search, before it is dropped with a notice (default: 10)',
    );
  addConnectionOptions(command as unknown as Command);
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>);
  return command.action((options) =>
    runAction('capacity', () => capacity(options as CapacityOptions)),
  );
}

async function capacity(o: CapacityOptions): Promise<number> {
  // Loaded when the command is chosen, so that other commands start without them.
  const [
    { renderCapacity },
    { prepareCapacity, runCapacity },
    { loadOutputs, parseExportTimeoutS },
  ] = await Promise.all([
    import('../report/capacityText.js'),
    import('../session/profiles/capacity.js'),
    import('../session/userOutputs.js'),
  ]);
  outputsUnderOneName(o);
  const { output: specs, exportTimeoutS: timeout, ...rest } = o;
  const { settings, run, problems, warnings } = prepareCapacity(rest);
  const deadline = parseExportTimeoutS(timeout);
  if (deadline.problem) problems.push(deadline.problem);
  if (problems.length > 0) return printProblems('capacity', problems);
  printWarnings('capacity', warnings);
  const interrupts = listenForInterrupts(() =>
    process.stderr.write('\ninfergauge capacity: stopping after the requests in flight\n'),
  );
  try {
    const limits = exportLimits('capacity', o, interrupts);
    const exported = await loadOutputs(specs as string[] | undefined, limits);
    // Ctrl-C while a module loaded: nothing has started, nothing is opened.
    if (interrupts.stop.aborted) return EXIT.interrupted;
    const {
      report,
      root: out,
      code,
    } = await runCapacity(
      settings,
      {
        ...run,
        onNotice: (message) => printNotice('capacity', message),
        outputs: [...pointLineOutputs(process.stderr), ...exported],
        ...(deadline.seconds !== undefined ? { exportTimeoutS: deadline.seconds } : {}),
        ...(process.stderr.isTTY && !o.json
          ? { progress: (line: string) => process.stderr.write(line) }
          : {}),
      },
      interrupts.stop,
    );
    if (o.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else {
      const text = renderCapacity(report, useColor(process.stdout));
      process.stdout.write(`${text}\nResults: ${out}\n`);
    }
    if (interrupts.stop.aborted) return EXIT.interrupted;
    if (code === EXIT.failure) {
      const steps = report.steps.map((step) => ({ requests: step }));
      printNotice('capacity', `${failedToRun(steps)}; see ${out}`);
    }
    return code;
  } finally {
    interrupts.dispose();
  }
}
