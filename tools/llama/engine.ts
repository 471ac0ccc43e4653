/**
 * `npm run engine:llama -- --port 8080 [--model-size tiny|125m] [--parallel 4] [--ctx-size 4096]
 *   [--threads 1] [--kv-unified] [--config-out config.json]`
 *
 * A real serving engine on this machine's CPU, for trying infergauge against something nobody
 * here wrote: builds llama.cpp's llama-server if the cache has none, writes a generated model
 * (random weights, no download), and serves it in the foreground on loopback until Ctrl-C.
 */
import { ENGINE_USAGE, parseEngineArgs } from './engineArgs.js';

const args = parseEngineArgs(process.argv.slice(2));
if (args.help) {
  process.stdout.write(ENGINE_USAGE);
  process.exit(0);
}
if ('problems' in args) {
  for (const p of args.problems) process.stderr.write(`engine:llama: ${p}\n`);
  process.stderr.write('engine:llama: see npm run engine:llama -- --help\n');
  process.exit(2);
}
const { options } = args;
const preset = options.preset;
const port = options.port;

// Loaded only once the arguments are good: the help and a bad argument need no build.
const [
  { ensureLlamaServer },
  { writeLlamaModelConfig },
  { CONTENT_ONLY_CHAT_TEMPLATE, cachedLlamaModel },
  { startLlamaServer },
] = await Promise.all([
  import('./build.js'),
  import('./calibration.js'),
  import('./model.js'),
  import('./server.js'),
]);

const binary = await ensureLlamaServer();
// Chat prompts then count like completions (one token per word), not with ChatML markers that
// this vocabulary would spell out character by character.
const modelPath = await cachedLlamaModel({
  preset,
  seed: 1,
  chatTemplate: CONTENT_ONLY_CHAT_TEMPLATE,
});
const server = await startLlamaServer({
  binary,
  modelPath,
  port,
  parallel: options.parallel,
  ctxSize: options.ctxSize,
  threads: options.threads,
  ...(options.kvUnified ? { extraArgs: ['--kv-unified'] } : {}),
});
if (options.configOut) writeLlamaModelConfig(options.configOut, preset);
process.stdout.write(
  `llama-server (${preset} model, ${options.parallel} slots) at ${server.url}; Ctrl-C stops it.\n` +
    `Try: node dist/cli/main.js run --url ${server.url} --concurrency 4 --requests 40 --ignore-eos --server-metrics --slots\n` +
    `  or: node dist/cli/main.js run --url ${server.url} --backend llamacpp --concurrency 4 --requests 40 --ignore-eos\n`,
);
const stop = () => {
  void server.stop().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
server.child.once('exit', (code) => {
  process.stderr.write(`llama-server exited (${code}):\n${server.output().slice(-2000)}\n`);
  process.exit(1);
});
