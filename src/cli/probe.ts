import { Command, Option } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { failedToRun } from '../report/failures.js';
import { PROBE_DEFAULTS as DEFAULTS } from '../session/profiles/defaults.js';
import type { ProbeKind } from '../session/profiles/probe.js';
import {
  listenForInterrupts,
  printNotice,
  printProblems,
  printWarnings,
  runAction,
  useColor,
} from './common.js';
import { pointLineOutputs } from './progress.js';
import { gate } from './report.js';
import { addRunOptions, exportLimits, exportTimeout, withPlanFile } from './run.js';

/** `infergauge probe prefill|decode`: TGI-benchmark-like probes over plain HTTP. */
export function probeCommand(): Command {
  return new Command('probe')
    .description(
      'Prefill and decode probes: TTFT against input length with a fitted prefill rate (probe prefill), per-step decode cost, ITL and decode tokens/s against concurrency (probe decode).',
    )
    .addCommand(prefillCommand())
    .addCommand(decodeCommand())
    .showHelpAfterError();
}

function prefillCommand(): Command {
  const command = addRunOptions(
    new Command('prefill').description(
      `TTFT against input length (max_tokens 1; inputs doubling from --min-input to --max-input) at batch 1 and a few batch sizes, with TTFT ~ a + n / rate fitted on batch 1: the fixed latency and the prefill tokens/s. Takes every option of run. Results: <out>/prefill/n<N>-b<B>/ and <out>/probe.json.`,
    ),
  )
    .option('--min-input <n>', `shortest input in tokens (default: ${DEFAULTS.minInput})`)
    .option(
      '--max-input <n>',
      `longest input, reached by doubling (default: ${DEFAULTS.maxInput}; the built-in simulator's max_model_len - 1 when shorter)`,
    )
    .option(
      '--batches <list>',
      `concurrent requests per point, e.g. 1,4,16 (default: ${DEFAULTS.batches.join(',')})`,
    )
    .option(
      '--requests-per-point <n>',
      `requests at each point; at batch B at least 2 x B, in whole batches (default: ${DEFAULTS.requestsPerPoint})`,
    );
  return command.action((options, cmd) =>
    runAction('probe prefill', () => probe('prefill', options, cmd)),
  );
}

function decodeCommand(): Command {
  const command = addRunOptions(
    new Command('decode').description(
      'Decode speed against concurrency (short input, long output; closed loops at each level): ITL, TPOT, per-user and system decode tokens/s, with TPOT ~ a + b x concurrency fitted: a the per-step cost at batch 1. Takes every option of run. Results: <out>/decode/c<C>/ and <out>/probe.json.',
    ),
  );
  // Run's --input-tokens/--output-tokens mean one length here; --input is an old name (--output
  // was one too, and now names an output as on every command).
  const lengths = {
    '--input-tokens': ['<n>', `input tokens per request (default: ${DEFAULTS.input})`],
    '--output-tokens': [
      '<n>',
      `output tokens per request, max_tokens (default: ${DEFAULTS.output})`,
    ],
  };
  for (const option of command.options) {
    const own = lengths[option.long as keyof typeof lengths];
    if (own) {
      option.flags = `${option.long} ${own[0]}`;
      option.description = own[1];
    }
  }
  return command
    .addOption(new Option('--input <n>').hideHelp())
    .option(
      '--levels <list>',
      `concurrency levels, e.g. 1,8,64 (default: ${DEFAULTS.levels.join(',')})`,
    )
    .option(
      '--requests-per-point <n>',
      `requests at each level; at level C at least 2 x C, in whole waves (default: ${DEFAULTS.requestsPerPoint})`,
    )
    .action((options, cmd) => runAction('probe decode', () => probe('decode', options, cmd)));
}

async function probe(
  kind: ProbeKind,
  options: Record<string, unknown>,
  cmd: { getOptionValueSource(key: string): string | undefined },
): Promise<number> {
  const name = `probe ${kind}`;
  // Loaded when the command is chosen, so that other commands start without them.
  const [{ prepareProbe, runProbe }, { loadOutputs }] = await Promise.all([
    import('../session/profiles/probe.js'),
    import('../session/userOutputs.js'),
  ]);
  const merged = await withPlanFile(options, cmd, name);
  if (!merged) return EXIT.invalidOptions;
  const { settings, prepared, problems, warnings } = prepareProbe(
    kind,
    merged,
    (key) => cmd.getOptionValueSource(key) === 'cli',
  );
  if (problems.length > 0 || !prepared.plan) return printProblems(name, problems);
  printWarnings(name, warnings);
  const plan = prepared.plan;
  const label = merged.label !== undefined ? String(merged.label) : `probe-${kind}`;
  const interrupts = listenForInterrupts(() =>
    process.stderr.write(`\ninfergauge ${name}: stopping after the requests in flight\n`),
  );
  try {
    const exported = await loadOutputs(
      merged.output as string[] | undefined,
      exportLimits(name, merged, interrupts),
    );
    // Ctrl-C while a module loaded: nothing has started, nothing is opened.
    if (interrupts.stop.aborted) return EXIT.interrupted;
    const showProgress = process.stderr.isTTY === true && !prepared.json;
    const outcome = await runProbe({ ...prepared, plan }, settings, label, {
      stop: interrupts.stop,
      note: (message) => printNotice(name, message),
      ...(showProgress ? { progress: (line) => process.stderr.write(line) } : {}),
      html: merged.html !== false,
      outputs: [...pointLineOutputs(process.stderr), ...exported],
      ...exportTimeout(merged),
    });
    const { result, saved, target, root: out } = outcome;
    // Loaded when the command is chosen, so that other commands start without it.
    const { probeWarnings, renderDecode, renderPrefill } = await import('../report/probeText.js');
    printWarnings(name, probeWarnings(result.points));
    if (prepared.json) process.stdout.write(`${JSON.stringify(saved, null, 2)}\n`);
    else {
      const view = {
        description: target,
        endpoint: plan.endpoint,
        ...(prepared.timeScale !== undefined ? { timeScale: String(prepared.timeScale) } : {}),
        color: useColor(process.stdout),
      };
      const text =
        result.kind === 'prefill'
          ? renderPrefill(result.points, result.fit, view)
          : renderDecode(result.points, result.fit, view);
      process.stdout.write(`${text}\nResults: ${out}\n`);
    }
    if (interrupts.stop.aborted) return EXIT.interrupted;
    // Precedence: interrupted (above), then no point had a success, then the thresholds.
    if (!result.points.some((p) => p.completed > 0)) {
      printNotice(name, `${failedToRun(outcome.summaries.map((x) => x.summary))}; see ${out}`);
      return EXIT.failure;
    }
    return gate(name, merged.threshold as string[] | undefined, outcome.summaries);
  } finally {
    interrupts.dispose();
  }
}
