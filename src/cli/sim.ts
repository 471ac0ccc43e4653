import { Command } from '@commander-js/extra-typings';
import { DEFAULT_SCRIPTED_TIMING, ScriptedEngine } from '../sim/engine.js';
import { startSimServer } from '../sim/server.js';
import type { SimListening } from './simProcess.js';

export const DEFAULT_SIM_MODEL = 'sim-llama-3-8b';

function number(name: string, min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min) {
      throw new Error(`${name} must be a number >= ${min} (got "${value}")`);
    }
    return n;
  };
}

export function simCommand(): Command {
  const d = DEFAULT_SCRIPTED_TIMING;
  return new Command('sim')
    .description(
      'Run the built-in simulated OpenAI-compatible streaming server (ground truth at GET /debug/truth).',
    )
    .option('--port <port>', 'port to listen on (0 picks a free one)', number('--port', 0), 8000)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--model <name>', 'model id it serves', DEFAULT_SIM_MODEL)
    .option(
      '--ttft-base-ms <ms>',
      'TTFT = base + per-input-token x input tokens',
      number('--ttft-base-ms', 0),
      d.ttftBaseMs,
    )
    .option(
      '--ttft-per-input-token-ms <ms>',
      'prefill time per input token',
      number('--ttft-per-input-token-ms', 0),
      d.ttftPerInputTokenMs,
    )
    .option(
      '--itl-ms <ms>',
      'time per output token after the first',
      number('--itl-ms', 0),
      d.itlMs,
    )
    .option(
      '--tokens-per-event <n>',
      'tokens per stream event after the first',
      number('--tokens-per-event', 1),
      d.tokensPerEvent,
    )
    .option(
      '--max-concurrency <n>',
      'requests generating at once; the rest queue (FIFO)',
      number('--max-concurrency', 1),
      d.maxConcurrency,
    )
    .option(
      '--truth-limit <n>',
      'ground-truth records kept for /debug/truth',
      number('--truth-limit', 0),
      10_000,
    )
    .action(async (o) => {
      const engine = new ScriptedEngine({
        ttftBaseMs: o.ttftBaseMs,
        ttftPerInputTokenMs: o.ttftPerInputTokenMs,
        itlMs: o.itlMs,
        tokensPerEvent: Math.floor(o.tokensPerEvent),
        maxConcurrency: Math.floor(o.maxConcurrency),
      });
      const server = await startSimServer({
        model: o.model,
        engine,
        truthLimit: Math.floor(o.truthLimit),
        host: o.host,
        port: Math.floor(o.port),
      });
      const stop = () => {
        void server.close().then(() => process.exit(0));
      };
      process.on('SIGTERM', stop);
      if (process.send) {
        // Started by `infergauge run`: the parent owns Ctrl-C and our lifetime.
        process.on('SIGINT', () => {});
        process.on('disconnect', stop);
        process.send({ type: 'listening', url: server.url } satisfies SimListening);
      } else {
        process.on('SIGINT', stop);
        process.stdout.write(`infergauge sim: serving ${o.model} at ${server.url}\n`);
      }
    });
}
