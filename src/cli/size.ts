import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { printNotice, printProblems, printWarnings, runAction } from './common.js';

export function sizeCommand(): Command {
  const command = new Command('size')
    .description(
      "Which deployments serve a traffic within SLOs, and at what cost: every GPU x TP x weight and KV dtype x max-num-seqs x engine personality is tried with the simulator (calibrated with --calibration, or not), each replica's capacity found under the SLOs, the replicas the traffic needs counted, and the deployments ranked by cost with the cost/latency Pareto front marked.",
    )
    .option('--model <preset|config.json>', 'the model to serve')
    .option('--rate <r>', 'traffic: requests per second (Poisson arrivals)')
    .option('--users <n>', 'traffic: concurrent users, each sending its next request when answered')
    .option('--scenario <name>', 'prompt and output lengths from a preset (default: chat)')
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
      '--max-model-len <n>',
      "context length every engine is started with (default: the model's)",
    )
    .option(
      '--prices <file>',
      'YAML or JSON: GPU id -> price per GPU-hour (your own; none is built in)',
    )
    .option('--calibration <file>', 'calibration.json from infergauge calibrate')
    .option('--requests <n>', 'requests per virtual run (default: 300)')
    .option('--max-dp <n>', 'most data-parallel replicas (default: 64)')
    .option('--threads <n>', 'worker threads (default: the cores, at most 4)')
    .option('--seed <n>', 'seed of lengths and arrivals (default: 42)')
    .option('--top <n>', 'deployments shown (default: 15)')
    .option('--out <dir>', 'also write size.json and report.html here')
    .option('--json', 'print size.json to stdout instead of the table');
  return command.action((o) => runAction('size', () => sizeAction(o))) as unknown as Command;
}

type SizeFlags = Record<string, string | boolean | undefined>;

const list = (text: string | undefined, fallback: string): string[] =>
  (text ?? fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

async function sizeAction(o: SizeFlags): Promise<number> {
  const problems: string[] = [];
  const str = (k: string) => (typeof o[k] === 'string' ? (o[k] as string) : undefined);
  const whole = (k: string, min: number): number | undefined => {
    const text = str(k);
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) {
      problems.push(
        `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must be a whole number >= ${min} (got "${text}")`,
      );
      return undefined;
    }
    return n;
  };
  const model = str('model');
  if (!model)
    problems.push('--model is required: a preset (infergauge sim --list) or a config.json');
  const rateText = str('rate');
  const usersText = str('users');
  let traffic: { mode: 'rate'; rate: number } | { mode: 'users'; users: number } | undefined;
  if ((rateText === undefined) === (usersText === undefined)) {
    problems.push(
      'give the traffic as --rate (requests per second) or --users (concurrent users), one of them',
    );
  } else if (rateText !== undefined) {
    const rate = Number(rateText);
    if (!(Number.isFinite(rate) && rate > 0))
      problems.push(`--rate must be a number > 0 (got "${rateText}")`);
    else traffic = { mode: 'rate', rate };
  } else {
    const users = whole('users', 1);
    if (users !== undefined) traffic = { mode: 'users', users };
  }
  const slo = str('slo');
  if (!slo) problems.push("--slo is required: e.g. --slo 'ttft.p99<500,itl.p99<50'");
  const gpus = [
    ...list(str('gpu'), '').map((gpu) => ({ gpu })),
    ...list(str('gpuSpec'), '').map((gpuSpec) => ({ gpuSpec })),
  ];
  if (gpus.length === 0)
    problems.push('--gpu (or --gpu-spec) is required: the GPUs to try, e.g. --gpu h100,h200,l40s');
  const tps = list(str('tp'), '1,2,4,8').map(Number);
  if (tps.some((t) => !Number.isInteger(t) || t < 1))
    problems.push(`--tp must list whole numbers >= 1 (got "${str('tp')}")`);
  const maxNumSeqs = list(str('maxNumSeqs'), 'default').map((v) =>
    v === 'default' ? undefined : Number(v),
  );
  if (maxNumSeqs.some((v) => v !== undefined && !(Number.isInteger(v) && v >= 1))) {
    problems.push(
      `--max-num-seqs must list "default" or whole numbers >= 1 (got "${str('maxNumSeqs')}")`,
    );
  }
  const auto = (v: string) => (v === 'auto' ? undefined : v);
  const requests = whole('requests', 20);
  const maxDp = whole('maxDp', 1);
  const threads = whole('threads', 1);
  const seed = whole('seed', 0);
  const top = whole('top', 1) ?? 15;
  const maxModelLen = whole('maxModelLen', 1);
  let prices: Record<string, number> | undefined;
  const pricesFile = str('prices');
  if (pricesFile) {
    try {
      prices = await readPrices(pricesFile);
    } catch (err) {
      problems.push(`--prices: ${(err as Error).message}`);
    }
  }
  const [{ parseScenarioList, withLengths, describeScenario }, sizeModule] = await Promise.all([
    import('../workload/scenarios.js'),
    import('../session/size.js'),
  ]);
  let scenario: ReturnType<typeof withLengths> | undefined;
  try {
    const [preset] = parseScenarioList(str('scenario') ?? 'chat');
    scenario = withLengths(preset, str('inputTokens'), str('outputTokens'));
    if (scenario.session || scenario.agent) {
      problems.push(
        `--scenario ${scenario.name}: sessions and agents are not sized yet; use a single-request scenario or lengths`,
      );
    }
  } catch (err) {
    problems.push((err as Error).message);
  }
  if (problems.length > 0 || !model || !traffic || !slo || !scenario)
    return printProblems('size', problems);
  const options = {
    model,
    traffic,
    scenario,
    slo,
    ...(str('requestSlo') !== undefined ? { requestSlo: str('requestSlo') as string } : {}),
    space: {
      gpus,
      tps,
      dtypes: list(str('dtype'), 'auto,fp8').map(auto),
      kvCacheDtypes: list(str('kvCacheDtype'), 'auto,fp8').map(auto),
      maxNumSeqs,
      personalities: list(str('enginePersonality'), 'vllm-v1'),
    },
    ...(prices ? { prices } : {}),
    ...(str('calibration') !== undefined ? { calibration: str('calibration') as string } : {}),
    ...(maxModelLen !== undefined ? { engine: { maxModelLen } } : {}),
    ...(requests !== undefined ? { requests } : {}),
    ...(maxDp !== undefined ? { maxDp } : {}),
    ...(seed !== undefined ? { seed } : {}),
    ...(process.stderr.isTTY && !o.json
      ? {
          onCandidate: (done: number, total: number) =>
            process.stderr.write(`\rinfergauge size: ${done}/${total} deployments tried`),
        }
      : {}),
  };
  let result: Awaited<ReturnType<typeof sizeModule.sizeInParallel>>;
  try {
    result = await sizeModule.sizeInParallel(
      options,
      threads ?? Math.min(4, availableParallelism()),
    );
  } catch (err) {
    if (err instanceof sizeModule.SizeError) return printProblems('size', err.problems);
    throw err;
  } finally {
    if (process.stderr.isTTY && !o.json) process.stderr.write('\n');
  }
  printWarnings('size', result.warnings);
  const json = { traffic, scenario: describeScenario(scenario), slo, ...result };
  const out = str('out');
  if (out) {
    const { writeSizeResults } = await import('../session/sizeResults.js');
    await writeSizeResults(out, json);
  }
  if (o.json) process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  else {
    const { renderSize } = await import('../report/sizeText.js');
    const trafficText =
      traffic.mode === 'rate' ? `${traffic.rate} req/s` : `${traffic.users} users`;
    process.stdout.write(
      renderSize(result, top, `${trafficText} of ${describeScenario(scenario)}`),
    );
    if (out) printNotice('size', `results: ${out}/size.json, ${out}/report.html`);
  }
  return EXIT.ok;
}

/** A price table: GPU id -> price per GPU-hour, in YAML or JSON; every price a number > 0. */
async function readPrices(path: string): Promise<Record<string, number>> {
  const { parse } = await import('yaml');
  let data: unknown;
  try {
    data = parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new Error(`${path} must map GPU ids to prices per GPU-hour, e.g. "h100: 2.49"`);
  }
  const prices: Record<string, number> = {};
  for (const [gpu, value] of Object.entries(data)) {
    if (typeof value !== 'number' || !(value > 0)) {
      throw new Error(
        `${path}: ${gpu} must be a price per GPU-hour > 0 (got ${JSON.stringify(value)})`,
      );
    }
    prices[gpu] = value;
  }
  return prices;
}
