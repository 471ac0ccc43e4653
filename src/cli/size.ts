import { availableParallelism } from 'node:os';
import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import {
  listenForInterrupts,
  printNotice,
  printProblems,
  printWarnings,
  runAction,
} from './common.js';

export function sizeCommand(): Command {
  const command = new Command('size')
    .description(
      "Which deployments serve a traffic within SLOs, and at what cost: every GPU x TP x weight and KV dtype x max-num-seqs x engine personality is tried with the simulator (calibrated with --calibration, or not), each replica's capacity found under the SLOs, the replicas the traffic needs counted, and the deployments ranked by cost with the cost/latency Pareto front marked.",
    )
    .option('--model <preset|config.json>', 'the model to serve')
    .option(
      '--rate <r>',
      'traffic: requests per second (Poisson arrivals); sessions per second for a session scenario',
    )
    .option(
      '--users <n>',
      'traffic: concurrent users, each sending its next request when answered (a session scenario: concurrent sessions)',
    )
    .option(
      '--trace <file>',
      'traffic: a trace (Mooncake JSONL with hash_ids, Azure or BurstGPT CSV, JSONL), replayed whole with its lengths and prefix sharing; the fewest replicas that serve it are found',
    )
    .option('--trace-speed <x>', 'replay the trace x times faster (default: 1)')
    .option('--trace-block-tokens <n>', 'tokens per hash_ids block of the trace (default: 512)')
    .option(
      '--trace-window <start:end>',
      "size only the trace's arrivals in [START, END) seconds from its first",
    )
    .option('--trace-max-gap-s <s>', 'cap every idle gap between arrivals to S seconds')
    .option(
      '--scenario <name>',
      'prompt and output lengths from a preset (default: chat); multi-turn and agent size sessions',
    )
    .option('--input-tokens <dist>', 'prompt tokens: N, uniform:MIN:MAX, normal:MEAN:SD, ...')
    .option('--output-tokens <dist>', 'output tokens, in the same forms')
    .option(
      '--slo <rules>',
      "run-level SLOs: 'ttft.p99<500,itl.p99<50' (and 'sloAttainment>=0.9' with --request-slo)",
    )
    .option('--request-slo <rules>', "per-request SLO for goodput: 'ttft<500,tpot<50'")
    .option('--gpu <list>', 'GPU presets to try, e.g. h100,h200,l40s (see infergauge sim --list)')
    .option('--gpu-spec <files>', 'GPUs described in YAML or JSON files, comma-separated')
    .option('--tp <list>', 'tensor-parallel sizes (default: 1,2,4,8)')
    .option(
      '--dtype <list>',
      "weight formats: auto (the model's), bf16, fp8, int8, int4 (default: auto,fp8)",
    )
    .option('--kv-cache-dtype <list>', 'KV cache formats: auto, fp8 (default: auto,fp8)')
    .option(
      '--max-num-seqs <list>',
      "most running sequences: default (the engine's) or numbers (default: default)",
    )
    .option(
      '--engine-personality <list>',
      'engines: vllm-v1, vllm-v0, sglang, trtllm (default: vllm-v1)',
    )
    .option(
      '--engine-version <x.y.z>',
      "vllm-v1's release, where its start-up memory differs (default: the latest)",
    )
    .option(
      '--max-model-len <n>',
      "context length every engine is started with (default: the model's)",
    )
    .option(
      '--prices <file>',
      'YAML or JSON: GPU id -> price per GPU-hour (your own; none is built in)',
    )
    .option(
      '--enable-prefix-caching',
      "every engine reuses KV blocks of identical prompt prefixes (sessions' history; default: each engine's own, on for vllm-v1 and sglang)",
    )
    .option('--no-enable-prefix-caching', 'no engine caches prompt prefixes')
    .option('--calibration <file>', 'calibration.json from infergauge calibrate')
    .option(
      '--prediction-draws <n>',
      'with --calibration: draws of its fitted values run at each predicted deployment (default: 32; 0: no intervals)',
    )
    .option(
      '--interval-rows <n>',
      'with --calibration: the best deployments given intervals beside the Pareto front (default: 5)',
    )
    .option(
      '--confidence <c>',
      'with --calibration, 0.5 to 0.99: add replicas until every SLO holds with this chance, and rank at that cost',
    )
    .option('--requests <n>', 'requests per virtual run (default: 300)')
    .option('--max-dp <n>', 'most data-parallel replicas (default: 64)')
    .option('--threads <n>', 'worker threads (default: the cores, at most 4)')
    .option('--seed <n>', 'seed of lengths and arrivals (default: 42)')
    .option('--top <n>', 'deployments shown (default: 15)')
    .option(
      '--verify <url>',
      'after the search, measure one replica of the recommendation (or the nearest deployment the server runs) on this server at its share of the traffic and compare it with the calibrated prediction; the check is added to the calibration (refitted when contradicted); needs --calibration and --out',
    )
    .option('--verify-requests <n>', 'requests measured by --verify (default: 300)')
    .option('--verify-model <name>', "the served model's name (default: the server's /v1/models)")
    .option('--verify-no-refit', 'record a contradicting check with a warning instead of refitting')
    .option('--out <dir>', 'also write size.json and report.html here')
    .option('--json', 'print size.json to stdout instead of the table');
  return command.action((o) => runAction('size', () => sizeAction(o))) as unknown as Command;
}

async function sizeAction(o: Record<string, string | boolean | undefined>): Promise<number> {
  const [{ prepareSize }, sizeModule, { describeScenario }, { sizeProgress }] = await Promise.all([
    import('../session/sizeOptions.js'),
    import('../session/size.js'),
    import('../workload/scenarios.js'),
    import('../session/sizeProgress.js'),
  ]);
  const prepared = prepareSize(o);
  for (const note of prepared.notes ?? []) printNotice('size', note);
  if (!prepared.options) return printProblems('size', prepared.problems);
  const { traffic, scenario } = prepared.options;
  const progress = sizeProgress({
    terminal: process.stderr.isTTY === true,
    write: (text) => process.stderr.write(text),
  });
  // Ctrl-C or SIGTERM: the search stops and what it has evaluated is ranked, written and shown.
  const interrupts = listenForInterrupts();
  let result: Awaited<ReturnType<typeof sizeModule.sizeInParallel>>;
  try {
    result = await sizeModule.sizeInParallel(
      {
        ...prepared.options,
        onStart: progress.started,
        onCandidate: progress.candidate,
        onPredictions: progress.predicting,
        signal: interrupts.stop,
      },
      prepared.threads ?? Math.min(4, availableParallelism()),
    );
  } catch (err) {
    if (err instanceof sizeModule.SizeError) return printProblems('size', err.problems);
    throw err;
  } finally {
    interrupts.dispose();
    progress.finished();
  }
  if (result.interrupted) {
    printNotice(
      'size',
      `interrupted: ${result.evaluated} of ${result.candidates} candidates evaluated; the ranking below is of those`,
    );
  }
  printWarnings('size', result.warnings);
  // The loop closed on the server, after a whole search.
  const { verification, skipped, failure } = prepared.verify
    ? await (await import('../session/sizeVerify.js')).verifyAfterSearch(prepared.options, result, {
        ...prepared.verify,
        env: process.env,
        onNotice: (message) => printNotice('size', message),
      })
    : {};
  if (skipped) printNotice('size', `--verify: ${skipped}`);
  const { sizeDocument, writeSizeResults } = await import('../session/sizeResults.js');
  const json = sizeDocument(prepared.options, result, verification);
  const out = typeof o.out === 'string' ? o.out : undefined;
  if (out) await writeSizeResults(out, json);
  if (o.json) process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  else {
    const [{ renderSize, sizeTrafficText }, { terminalSafe }] = await Promise.all([
      import('../report/sizeText.js'),
      import('../report/format.js'),
    ]);
    const trafficText = terminalSafe(sizeTrafficText(traffic));
    process.stdout.write(
      renderSize(
        result,
        prepared.top,
        traffic.mode === 'trace' ? trafficText : `${trafficText} of ${describeScenario(scenario)}`,
      ),
    );
    if (verification) {
      const { renderVerification } = await import('../report/sizeVerifyText.js');
      process.stdout.write(renderVerification(verification));
    }
    if (out) printNotice('size', `results: ${out}/size.json, ${out}/report.html`);
  }
  if (failure !== undefined) throw failure;
  if (result.interrupted || result.prediction?.interrupted) return EXIT.interrupted;
  // A server that could not be measured fails the command as it fails `run` (the size result is
  // written); a prediction the server contradicts is an answer, said, not a failure.
  if (verification?.error !== undefined) {
    // Said by renderVerification; with --json, here.
    if (o.json) printNotice('size', `--verify: ${verification.error}`);
    return EXIT.failure;
  }
  return EXIT.ok;
}
