/**
 * `npm run engine:llama -- --port 8080 [--model-size tiny|125m] [--parallel 4] [--ctx-size 4096]
 *   [--threads 1] [--kv-unified] [--config-out config.json]`
 *
 * A real serving engine on this machine's CPU, for trying infergauge against something nobody
 * here wrote: builds llama.cpp's llama-server if the cache has none, writes a generated model
 * (random weights, no download), and serves it in the foreground on loopback until Ctrl-C.
 */
import { parseArgs } from 'node:util';
import { ensureLlamaServer } from './build.js';
import { writeLlamaModelConfig } from './calibration.js';
import {
  CONTENT_ONLY_CHAT_TEMPLATE,
  cachedLlamaModel,
  LLAMA_PRESETS,
  type LlamaPreset,
} from './model.js';
import { startLlamaServer } from './server.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8080' },
    'model-size': { type: 'string', default: 'tiny' },
    parallel: { type: 'string', default: '4' },
    'ctx-size': { type: 'string', default: '4096' },
    threads: { type: 'string', default: '1' },
    // One KV buffer for all slots, as llama-server runs with no --parallel (and as calibrated).
    'kv-unified': { type: 'boolean', default: false },
    // The served model's shape as a Hugging Face config.json, for `--model` of calibrate / sim.
    'config-out': { type: 'string' },
  },
});

const preset = values['model-size'] as LlamaPreset;
if (!(preset in LLAMA_PRESETS)) {
  process.stderr.write(`--model-size must be one of ${Object.keys(LLAMA_PRESETS).join(', ')}\n`);
  process.exit(2);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  process.stderr.write('--port must be a port number, e.g. --port 8080\n');
  process.exit(2);
}

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
  parallel: Number(values.parallel),
  ctxSize: Number(values['ctx-size']),
  threads: Number(values.threads),
  ...(values['kv-unified'] ? { extraArgs: ['--kv-unified'] } : {}),
});
if (values['config-out']) writeLlamaModelConfig(values['config-out'], preset);
process.stdout.write(
  `llama-server (${preset} model, ${values.parallel} slots) at ${server.url}; Ctrl-C stops it.\n` +
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
