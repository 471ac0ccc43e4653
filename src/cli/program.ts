/** The command line: every command, its options and help (parsed by main.ts). */
import { Command } from '@commander-js/extra-typings';
import { VERSION } from '../version.js';
import { capacityCommand } from './capacity.js';
import { compareCommand } from './compare.js';
import { k8sCommand } from './k8s.js';
import { memoryCommand } from './memory.js';
import { mergeCommand } from './merge.js';
import { planCommand } from './plan.js';
import { probeCommand } from './probe.js';
import { reportCommand } from './report.js';
import { runCommand } from './run.js';
import { simCommand } from './sim.js';
import { sweepCommand } from './sweep.js';

export function program(): Command {
  return new Command('infergauge')
    .description(
      'Measure LLM serving endpoints: throughput, latency (TTFT, ITL, TPOT, E2E with p95/p99) and memory.\nWithout --url, `run` benchmarks the built-in simulated server.',
    )
    .version(VERSION)
    .addCommand(runCommand())
    .addCommand(simCommand())
    .addCommand(memoryCommand())
    .addCommand(sweepCommand())
    .addCommand(probeCommand())
    .addCommand(capacityCommand())
    .addCommand(reportCommand())
    .addCommand(compareCommand())
    .addCommand(planCommand())
    .addCommand(mergeCommand())
    .addCommand(k8sCommand())
    .showHelpAfterError()
    .addHelpText(
      'after',
      "\nExamples:\n  infergauge run                                   benchmark the built-in simulator\n  infergauge run --url http://127.0.0.1:8000 --concurrency 64 --requests 1000\n  infergauge run --url http://127.0.0.1:8000 --rate 4 --duration 120 --slo 'ttft<500,tpot<50'\n  infergauge sim --port 8000                       serve the simulator for other tools\n  infergauge run --scenario chat,creative,summarize --tokenizer o200k_base\n  infergauge plan --print --plan plan.yaml        the effective plan, nothing sent\n  infergauge sweep --scenario chat,creative,summarize --find-max --slo 'ttft.p99<500,itl.p99<50'\n  infergauge probe prefill --simulate --model llama-3.1-8b --gpu h100     TTFT against input length, prefill rate\n  infergauge probe decode --url http://127.0.0.1:8000 --ignore-eos         ITL and decode tok/s against concurrency\n  infergauge memory --model llama-3-8b --gpu h100 --context 32768\n  infergauge compare results/h100 results/h200 --md compare.md --threshold 'ttft.p99<500'\n  infergauge capacity --model llama-3.1-8b --gpu rtx4090 --max-model-len 8192\n  infergauge run --url http://vllm:8000 --plan plan.yaml --shard 0/4 --start-at 2026-11-30T09:00:00Z --out res/shard-0\n  infergauge merge --out res/merged res/shard-*\n  infergauge k8s job --shards 8 --plan plan.yaml --image registry/infergauge:0.1.0 > job.yaml\n\nExit codes: 0 done, 1 failed to run, 2 invalid options, 3 a CI threshold failed, 130 interrupted (summary still written).",
    );
}
