import { Command, InvalidArgumentError, Option } from '@commander-js/extra-typings';
import { type NumberRule, parseFlagNumber, TIME_SCALE } from '../flagNumber.js';
import { renderPresets } from '../report/presetsText.js';
import type { SimMessage } from '../session/simulator.js';
import { DEFAULT_ANSWER_OPTIONS } from '../sim/answer.js';
import { DEFAULT_SCRIPTED_TIMING } from '../sim/engine.js';
import { printWarnings } from './common.js';
import { addEngineFlags } from './engineFlags.js';

/** A numeric option's parser: commander reports a bad value as bad usage (exit 2). */
function number(rule: NumberRule) {
  return (value: string): number => {
    const parsed = parseFlagNumber(value, rule);
    if ('problem' in parsed) throw new InvalidArgumentError(`It ${parsed.problem}.`);
    return parsed.value;
  };
}

export function simCommand(): Command {
  const d = DEFAULT_SCRIPTED_TIMING;
  const a = DEFAULT_ANSWER_OPTIONS;
  const command = new Command('sim')
    .description(
      'Run the built-in simulated OpenAI-compatible server: a vLLM-like engine on a modelled GPU (ground truth at GET /debug/truth, Prometheus at GET /metrics).',
    )
    .option('--list', 'list model and GPU presets and exit')
    .option(
      '--port <port>',
      'port to listen on (0 picks a free one)',
      number({ min: 0, max: 65_535, integer: true }),
      8000,
    )
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option(
      '--model <preset|config.json>',
      'model preset (see --list) or a Hugging Face config.json (file or directory)',
    )
    .option('--served-model-name <name>', 'model id it serves (default: sim-<model>)')
    .option(
      '--time-scale <x>',
      'real seconds per simulated second (0.1 runs 10x faster than the modelled GPU)',
      number(TIME_SCALE),
      1,
    )
    .option(
      '--faults <spec>',
      "inject faults, e.g. '429=0.05,500=0.01,reset=0.01@10,stall=0.02:1500@3,malformed=0.01@2,slow-start=0.1:2000'",
    )
    .option('--fault-seed <n>', 'seed of the fault draws', number({ min: 0, integer: true }), 1)
    .option(
      '--chat-template-tokens <n>',
      'tokens a chat template adds to every chat prompt (counted in usage and processed)',
      number({ min: 0, integer: true }),
      0,
    )
    .addOption(
      new Option(
        '--reasoning <when>',
        'chat answers reason first: when the request asks (enable_thinking, reasoning_effort), or always',
      )
        .choices(['request', 'always'] as const)
        .default(a.reasoning),
    )
    .option(
      '--reasoning-share <f>',
      "share of a reasoning answer's tokens that are reasoning (a knob, not a model)",
      number({ min: 0, max: 1 }),
      a.reasoningShare,
    )
    .option(
      '--tool-call-share <f>',
      "share of tool_choice 'auto' requests with tools answered with tool calls (seeded draw)",
      number({ min: 0, max: 1 }),
      a.toolCallShare,
    )
    .option(
      '--parallel-tool-calls <n>',
      'tool calls per answer when the request allows parallel calls',
      number({ min: 1, integer: true }),
      a.parallelToolCalls,
    )
    .option(
      '--answer-seed <n>',
      'seed of the tool-call draws',
      number({ min: 0, integer: true }),
      a.seed,
    )
    .option(
      '--truth-limit <n>',
      'ground-truth records kept for /debug/truth',
      number({ min: 0, integer: true }),
      10_000,
    )
    .addOption(
      new Option('--engine <kind>', 'physical (modelled GPU) or scripted (fixed timing, for tests)')
        .choices(['physical', 'scripted'] as const)
        .default('physical' as const),
    )
    .option(
      '--ttft-base-ms <ms>',
      'scripted: TTFT = base + per-input-token x input tokens',
      number({ min: 0 }),
      d.ttftBaseMs,
    )
    .option(
      '--ttft-per-input-token-ms <ms>',
      'scripted: prefill time per input token',
      number({ min: 0 }),
      d.ttftPerInputTokenMs,
    )
    .option(
      '--itl-ms <ms>',
      'scripted: time per output token after the first',
      number({ min: 0 }),
      d.itlMs,
    )
    .option(
      '--tokens-per-event <n>',
      'scripted: tokens per stream event after the first',
      number({ min: 1, integer: true }),
      d.tokensPerEvent,
    )
    .option(
      '--max-concurrency <n>',
      'scripted: requests generating at once; the rest queue (FIFO)',
      number({ min: 1, integer: true }),
      d.maxConcurrency,
    );
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>);
  return command.action(async (o) => {
    if (o.list) {
      process.stdout.write(`${renderPresets()}\n`);
      return;
    }
    // Loaded when the command is chosen, so that other commands start without it.
    const { serveSimulator } = await import('../session/simulator.js');
    const child = process.send !== undefined;
    const fail = (message: string) => {
      // A parent (`infergauge run`) reports the message itself.
      if (child) process.send?.({ type: 'failed', message } satisfies SimMessage);
      else process.stderr.write(`infergauge sim: ${message}\n`);
      process.exitCode = 2;
    };
    let served: Awaited<ReturnType<typeof serveSimulator>>;
    try {
      served = await serveSimulator({
        engine:
          o.engine === 'scripted'
            ? {
                kind: 'scripted',
                timing: {
                  ttftBaseMs: o.ttftBaseMs,
                  ttftPerInputTokenMs: o.ttftPerInputTokenMs,
                  itlMs: o.itlMs,
                  tokensPerEvent: o.tokensPerEvent,
                  maxConcurrency: o.maxConcurrency,
                },
              }
            : {
                kind: 'physical',
                ...(o.model !== undefined ? { model: o.model } : {}),
                flags: o as Record<string, unknown>,
                timeScale: o.timeScale,
              },
        ...(o.servedModelName !== undefined ? { servedModelName: o.servedModelName } : {}),
        ...(o.faults !== undefined ? { faults: o.faults } : {}),
        faultSeed: o.faultSeed,
        host: o.host,
        port: o.port,
        truthLimit: o.truthLimit,
        chatTemplateTokens: o.chatTemplateTokens,
        answers: {
          reasoning: o.reasoning,
          reasoningShare: o.reasoningShare,
          toolCallShare: o.toolCallShare,
          parallelToolCalls: o.parallelToolCalls,
          seed: o.answerSeed,
        },
      });
    } catch (err) {
      return fail((err as Error).message);
    }
    const { server, sim } = served;
    printWarnings('sim', served.warnings);
    const stop = () => {
      void server.close().then(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    if (child) {
      // Started by `infergauge run`: the parent owns Ctrl-C and our lifetime.
      process.on('SIGINT', () => {});
      process.on('disconnect', stop);
      process.send?.({
        type: 'listening',
        url: server.url,
        banner: sim.banner,
      } satisfies SimMessage);
    } else {
      process.on('SIGINT', stop);
      process.stdout.write(
        `infergauge sim: serving ${sim.servedName} at ${server.url}: ${sim.banner}\n`,
      );
    }
  });
}
