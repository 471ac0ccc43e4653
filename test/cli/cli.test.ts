import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { RunSummary } from '../../src/metrics/summary.js';
import { runCli, tempDir } from '../helpers/cli.js';

const RUN_FLAGS = [
  '--url',
  '--model',
  '--endpoint',
  '--concurrency',
  '--rate',
  '--arrival',
  '--max-concurrency',
  '--requests',
  '--duration',
  '--warmup',
  '--input-tokens',
  '--output-tokens',
  '--ignore-eos',
  '--continuous-usage-stats',
  '--temperature',
  '--timeout',
  '--grace',
  '--slo',
  '--seed',
  '--api-key-env',
  '--header',
  '--extra-body',
  '--out',
  '--label',
  '--json',
  '--simulate',
  '--time-scale',
  '--gpu',
  '--tp',
  '--dtype',
  '--kv-cache-dtype',
  '--gpu-memory-utilization',
  '--max-model-len',
  '--max-num-seqs',
  '--max-num-batched-tokens',
  '--enable-prefix-caching',
  '--no-chunked-prefill',
];

describe('command line', () => {
  test('--help documents every command and every run option', async () => {
    const top = await runCli(['--help']);
    assert.equal(top.code, 0);
    assert.match(top.stdout, /run \[options\]/);
    assert.match(top.stdout, /sim \[options\]/);
    const run = await runCli(['run', '--help']);
    assert.equal(run.code, 0);
    for (const flag of RUN_FLAGS) assert.ok(run.stdout.includes(flag), `run --help lacks ${flag}`);
    const sim = await runCli(['sim', '--help']);
    for (const flag of [
      '--port',
      '--list',
      '--model',
      '--gpu',
      '--faults',
      '--time-scale',
      '--mbu',
      '--frontend-latency-ms',
      '--engine',
      '--itl-ms',
      '--tokens-per-event',
      '--max-concurrency',
    ]) {
      assert.ok(sim.stdout.includes(flag), `sim --help lacks ${flag}`);
    }
  });

  test('invalid options name the flag and the fix, and exit 2', async () => {
    const bad = await runCli([
      'run',
      '--concurrency',
      'abc',
      '--slo',
      'ttfx<5',
      '--extra-body',
      '[1]',
      '--endpoint',
      'grpc',
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--concurrency must be a number \(for example --concurrency 16\)/);
    assert.match(bad.stderr, /--endpoint must be chat or completions/);
    assert.match(bad.stderr, /unknown SLO metric "ttfx"/);
    assert.match(bad.stderr, /--extra-body must be a JSON object/);
    const both = await runCli(['run', '--concurrency', '4', '--rate', '2']);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--concurrency and --rate cannot be combined/);
    const key = await runCli(['run', '--api-key-env', 'NOT_SET_ANYWHERE']);
    assert.equal(key.code, 2);
    assert.match(key.stderr, /NOT_SET_ANYWHERE, which is not set/);
  });

  test('a run against the built-in simulator: summary on stdout, files on disk, key never written', async () => {
    const out = join(tempDir('ig-cli-'), 'run');
    const secret = 'sk-test-do-not-leak-4242';
    const result = await runCli(
      [
        'run',
        '--requests',
        '20',
        '--concurrency',
        '4',
        '--input-tokens',
        '32',
        '--output-tokens',
        '16',
        '--header',
        'X-Api-Key: also-secret',
        '--out',
        out,
        '--json',
      ],
      { OPENAI_API_KEY: secret },
    );
    assert.equal(result.code, 0, result.stderr);
    const printed = JSON.parse(result.stdout) as RunSummary;
    const saved = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
    assert.deepEqual(printed, saved);
    assert.equal(saved.requests.completed, 20);
    assert.equal(saved.tokens.output, 20 * 16);
    assert.equal(saved.tokens.input, 20 * 32, 'the simulator counts one token per prompt word');
    const lines = readFileSync(join(out, 'records.jsonl'), 'utf8').trim().split('\n');
    assert.equal(lines.length, 20);
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.plan.apiKeyEnv, 'OPENAI_API_KEY');
    assert.equal(manifest.plan.headers['x-api-key'], '<redacted>');
    assert.equal(manifest.server.builtInSimulator, true);
    assert.equal(manifest.model, 'sim-llama-3-8b');
    assert.equal(manifest.server.models.data[0].id, 'sim-llama-3-8b');
    for (const file of readdirSync(out)) {
      const text = readFileSync(join(out, file), 'utf8');
      assert.ok(!text.includes(secret) && !text.includes('also-secret'), `${file} leaks a key`);
    }
    assert.ok(!result.stdout.includes(secret) && !result.stderr.includes(secret));
  });

  test('the terminal summary states the load first', async () => {
    const out = join(tempDir('ig-cli-'), 'run');
    const result = await runCli([
      'run',
      '--requests',
      '12',
      '--concurrency',
      '3',
      '--input-tokens',
      '20',
      '--output-tokens',
      '8',
      '--slo',
      'ttft<5000',
      '--out',
      out,
    ]);
    assert.equal(result.code, 0, result.stderr);
    // The load comes first, after the client's own verdict when a loaded machine limited it (as
    // the README says: its lines, one per cause and the advice indented under it, then come
    // before everything).
    const lines = result.stdout.split('\n');
    const verdict = lines[0].startsWith('CLIENT-LIMITED: ');
    const first = verdict ? lines.find((l, i) => i > 0 && !l.startsWith('  ')) : lines[0];
    assert.match(
      first ?? '',
      /^3 concurrent requests \(measured \d+\.\d\), 12 requests, 20 in \/ 8 out tokens/,
    );
    assert.match(result.stdout, /TTFT/);
    assert.match(result.stdout, /ITL \(per token\)/);
    assert.match(result.stdout, /Throughput at 3 concurrent requests \(measured/);
    assert.match(result.stdout, /Goodput \(ttft<5000\): [\d.]+ req\/s, SLO attainment 100\.0%/);
    assert.match(result.stdout, /Client health:/);
    assert.equal(result.stderr, '', 'no progress output when stderr is not a terminal');
  });

  test('a server that cannot be reached and no --model: a clear error, exit 1', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const result = await runCli(['run', '--url', `http://127.0.0.1:${port}`, '--requests', '1']);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /could not learn the model .*ECONNREFUSED.*pass --model NAME/);
  });

  test('simulator options: --simulate writes a run in virtual time; bad engine options name the flag', async () => {
    const out = join(tempDir('ig-cli-'), 'virtual');
    const result = await runCli([
      'run',
      '--simulate',
      '--model',
      'llama-3-70b',
      '--gpu',
      'h200',
      '--tp',
      '2',
      '--rate',
      '20',
      '--duration',
      '30',
      '--out',
      out,
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const summary = JSON.parse(result.stdout) as RunSummary;
    assert.ok(summary.requests.completed > 500, `${summary.requests.completed} requests`);
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.server.virtualTime, true);
    assert.match(manifest.server.simulator, /Llama-3-70B bf16 on 2x H200/);
    assert.ok(manifest.server.memory.numGpuBlocks > 0);
    const lines = readFileSync(join(out, 'records.jsonl'), 'utf8').trim().split('\n');
    assert.equal(lines.length, summary.requests.completed + summary.requests.failed);

    const bad = await runCli(['run', '--gpu', 'h900', '--tp', '0', '--dtype', 'int3']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--gpu h900 is not a preset; choose one of h100/);
    assert.match(bad.stderr, /--tp must be between 1/);
    assert.match(bad.stderr, /--dtype int3 is not a weight format/);
    const withUrl = await runCli(['run', '--url', 'http://127.0.0.1:9', '--gpu', 'h100']);
    assert.equal(withUrl.code, 2);
    assert.match(withUrl.stderr, /--gpu apply only to the built-in simulator/);
    const tooBig = await runCli(['run', '--model', 'llama-3-70b', '--requests', '1']);
    assert.equal(tooBig.code, 1);
    assert.match(tooBig.stderr, /cannot start: No available memory for the cache blocks/);
    const list = await runCli(['sim', '--list']);
    assert.equal(list.code, 0);
    for (const id of ['llama-3-8b', 'deepseek-v3', 'mixtral-8x7b', 'h100', 'mi300x', 'b200']) {
      assert.ok(list.stdout.includes(id), `sim --list lacks ${id}`);
    }
  });
});
