/**
 * Plans: the YAML plan file, scenarios, `infergauge plan --print`, multi-scenario runs and the
 * measured prompt-overhead correction.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import type { RunSummary } from '../../src/metrics/summary.js';
import { PlanFileError, planFileOptions, planJsonSchema } from '../../src/plan/planFile.js';
import { parseRunPlan } from '../../src/plan/runPlan.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { REPO } from '../../tools/repo.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { startSim } from '../helpers/sim.js';

function planProblems(value: unknown): string[] {
  try {
    planFileOptions(value, 'plan.yaml');
    return [];
  } catch (err) {
    assert.ok(err instanceof PlanFileError);
    return err.problems;
  }
}

describe('plan files', () => {
  test('options by flag name and scenarios; problems name the field and the fix', () => {
    const ok = planFileOptions(
      {
        concurrency: 8,
        'input-tokens': 'uniform:100:200',
        'ignore-eos': true,
        header: 'X-A: 1',
        'extra-body': { top_p: 1 },
        gpu: 'h200',
        scenarios: [
          { preset: 'chat' },
          { name: 'long', 'input-tokens': 2048, 'output-tokens': 64 },
        ],
      },
      'plan.yaml',
    );
    assert.deepEqual(ok.options, {
      concurrency: '8',
      inputTokens: 'uniform:100:200',
      ignoreEos: true,
      header: ['X-A: 1'],
      extraBody: '{"top_p":1}',
      gpu: 'h200',
    });
    assert.equal(ok.scenarios?.length, 2);

    assert.match(
      planProblems({ concurency: 8 })[0],
      /unknown field "concurency" \(did you mean "concurrency"\?\)/,
    );
    assert.match(
      planProblems({ scenarios: [{ name: 'x', inputs: 5 }] })[0],
      /scenarios\[0\]\.inputs/,
    );
    assert.match(planProblems({ concurrency: [1, 2] })[0], /plan\.yaml: concurrency:/);
    assert.match(planProblems({ scenarios: [{ preset: 'poetry' }] })[0], /scenarios\[0\]\.preset/);
  });

  test('scenario lengths and presets are validated through the run plan', () => {
    const bad = () =>
      parseRunPlan({
        planScenarios: [{ name: 'x', 'input-tokens': 'gauss:3', 'output-tokens': 8 }],
      });
    assert.throws(bad, /scenarios\[0\] \("x"\)\.input-tokens/);
    assert.throws(
      () => parseRunPlan({ scenario: 'chat,poetry' }),
      /unknown scenario "poetry"; presets: chat, creative, summarize, rag/,
    );
    assert.throws(
      () => parseRunPlan({ scenario: 'chat', sharedPrefix: '512', inputTokens: '256' }),
      /shared-prefix 512 is longer than its longest prompt/,
    );
    const plan = parseRunPlan({ scenario: 'chat,summarize', outputTokens: 'poisson:64' });
    assert.deepEqual(
      plan.scenarios.map((s) => [s.name, s.input, s.output]),
      [
        ['chat', { kind: 'fixed', value: 256 }, { kind: 'poisson', mean: 64 }],
        ['summarize', { kind: 'fixed', value: 4096 }, { kind: 'poisson', mean: 64 }],
      ],
    );
  });

  test('plan --print merges flags over the file; --schema matches docs/plan.schema.json', async () => {
    const dir = tempDir('ig-plan-');
    const file = join(dir, 'plan.yaml');
    writeFileSync(
      file,
      [
        'concurrency: 4',
        'requests: 50',
        'temperature: 0.7',
        'gpu: h200',
        'scenarios:',
        '  - preset: creative',
        '  - name: rag-lite',
        '    input-tokens: normal:2048:256',
        '    output-tokens: 128',
        '    shared-prefix: 512',
      ].join('\n'),
    );
    const result = await runCli(['plan', '--print', '--plan', file, '--concurrency', '32']);
    assert.equal(result.code, 0, result.stderr);
    const printed = parseYaml(result.stdout);
    assert.equal(printed.concurrency, 32);
    assert.equal(printed.requests, 50);
    assert.deepEqual(
      printed.scenarios.map((s: { name: string }) => s.name),
      ['creative', 'rag-lite'],
    );
    assert.equal(printed.scenarios[1]['shared-prefix'], 512);
    assert.match(result.stdout, /^# server: the built-in simulator, .* on 1x H200/m);
    assert.match(result.stderr, /temperature 0\.7: sampling noise/);
    // The printed plan is a plan file: read back, it prints the same plan again.
    const printedFile = join(dir, 'printed.yaml');
    writeFileSync(printedFile, result.stdout);
    const again = await runCli(['plan', '--print', '--plan', printedFile]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, result.stdout);

    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'concurrency: 4\nrequests: [1\n');
    const invalid = await runCli(['plan', '--print', '--plan', bad]);
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr, /bad\.yaml: not valid YAML/);

    const schema = await runCli(['plan', '--schema']);
    assert.deepEqual(JSON.parse(schema.stdout), planJsonSchema());
    const docs = JSON.parse(readFileSync(join(REPO, 'docs/plan.schema.json'), 'utf8'));
    assert.deepEqual(
      docs,
      planJsonSchema(),
      'docs/plan.schema.json is stale: run npm run docs:schema',
    );
  });

  test('several scenarios in virtual time: a folder each, scenarios.json and one table', async () => {
    const out = join(tempDir('ig-plan-'), 'runs');
    const result = await runCli([
      'run',
      '--simulate',
      '--scenario',
      'chat,creative,summarize',
      '--requests',
      '30',
      '--concurrency',
      '8',
      '--out',
      out,
    ]);
    assert.equal(result.code, 0, result.stderr);
    for (const name of ['chat', 'creative', 'summarize']) {
      const summary = JSON.parse(
        readFileSync(join(out, name, 'summary.json'), 'utf8'),
      ) as RunSummary;
      assert.equal(summary.requests.completed, 30);
      const manifest = JSON.parse(readFileSync(join(out, name, 'manifest.json'), 'utf8'));
      assert.match(manifest.workload.scenario, new RegExp(`^${name}: `));
    }
    const table = JSON.parse(readFileSync(join(out, 'scenarios.json'), 'utf8'));
    assert.deepEqual(
      table.scenarios.map((r: { scenario: string }) => r.scenario),
      ['chat', 'creative', 'summarize'],
    );
    // Summarisation is prefill-bound: its TTFT is the longest of the three.
    const ttft = Object.fromEntries(
      table.scenarios.map((r: { scenario: string; ttftP50Ms: number }) => [
        r.scenario,
        r.ttftP50Ms,
      ]),
    );
    assert.ok(ttft.summarize > ttft.chat && ttft.summarize > ttft.creative);
    assert.match(result.stdout, /Scenarios \(latency in ms/);
    assert.ok(existsSync(join(out, 'chat', 'records.jsonl')));
  });
});

describe('workload sources from files', () => {
  test("trace replay sets every request's time and lengths; datasets and corpora give prompts", async () => {
    const dir = tempDir('ig-plan-');
    const trace = await runCli([
      'run',
      '--simulate',
      '--trace',
      'test/fixtures/workload/mooncake.jsonl',
      '--trace-speed',
      '2',
      '--out',
      join(dir, 'trace'),
      '--json',
    ]);
    assert.equal(trace.code, 0, trace.stderr);
    const records = readFileSync(join(dir, 'trace', 'records.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const entries = readFileSync('test/fixtures/workload/mooncake.jsonl', 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .sort((a, b) => a.timestamp - b.timestamp);
    assert.equal(records.length, entries.length);
    for (const r of records) {
      const e = entries[r.id];
      assert.equal(r.scheduledAt, (e.timestamp - entries[0].timestamp) / 2);
      assert.equal(r.requestedInputTokens, e.input_length);
      assert.equal(r.inputTokens, e.input_length, 'the simulator counts exactly what was asked');
      assert.equal(r.requestedOutputTokens, e.output_length);
    }
    const both = await runCli([
      'run',
      '--trace',
      'test/fixtures/workload/mooncake.jsonl',
      '--rate',
      '3',
    ]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--rate cannot be combined with --trace/);
    const badTrace = await runCli(['run', '--trace', 'test/fixtures/workload/mooncake-bad.jsonl']);
    assert.equal(badTrace.code, 2);
    assert.match(
      badTrace.stderr,
      /--trace: .*mooncake-bad\.jsonl: 5 problems:\n\s+line 2: timestamp must be a number/,
    );

    const corpus = await runCli([
      'run',
      '--simulate',
      '--dataset',
      'test/fixtures/workload/corpus.txt',
      '--input-tokens',
      'uniform:20:60',
      '--requests',
      '12',
      '--out',
      join(dir, 'corpus'),
      '--json',
    ]);
    assert.equal(corpus.code, 0, corpus.stderr);
    const summary = JSON.parse(corpus.stdout) as RunSummary;
    assert.equal(summary.tokens.input, summary.tokens.requestedInput);
    const prompts = await runCli([
      'run',
      '--simulate',
      '--dataset',
      'test/fixtures/workload/prompts.jsonl',
      '--requests',
      '6',
      '--out',
      join(dir, 'prompts'),
      '--json',
    ]);
    assert.equal(prompts.code, 0, prompts.stderr);
    const badPrompts = await runCli([
      'run',
      '--dataset',
      'test/fixtures/workload/prompts-bad.jsonl',
    ]);
    assert.equal(badPrompts.code, 2);
    assert.match(badPrompts.stderr, /--dataset: [^\n]*prompts-bad\.jsonl[^\n]*\n?\s*line \d/);
  });
});

describe('prompt overhead (BOS, chat template) measured and corrected', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({
      engine: 'scripted',
      'itl-ms': 1,
      'ttft-base-ms': 1,
      'chat-template-tokens': 7,
    });
  });
  after(() => sim.stop());

  test('a server that adds 7 template tokens reports exactly the requested input length', async () => {
    const out = join(tempDir('ig-plan-'), 'chat');
    const result = await runCli([
      'run',
      '--url',
      sim.url,
      '--endpoint',
      'chat',
      '--tokenizer',
      'server',
      '--input-tokens',
      'uniform:64:128',
      '--output-tokens',
      '8',
      '--requests',
      '20',
      '--concurrency',
      '4',
      '--no-server-metrics',
      '--out',
      out,
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /adds 7 tokens to every chat prompt/);
    const summary = JSON.parse(result.stdout) as RunSummary;
    assert.equal(summary.tokens.input, summary.tokens.requestedInput, 'no drift');
    assert.ok(!summary.warnings.some((w) => w.code === 'input_drift'));
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.workload.promptOverheadTokens, 7);
    assert.equal(manifest.workload.tokenizerExact, true);
  });

  test('completions carry no template: nothing is taken off', async () => {
    const out = join(tempDir('ig-plan-'), 'completions');
    const result = await runCli([
      'run',
      '--url',
      sim.url,
      '--endpoint',
      'completions',
      '--tokenizer',
      'server',
      '--requests',
      '8',
      '--input-tokens',
      '100',
      '--output-tokens',
      '4',
      '--no-server-metrics',
      '--out',
      out,
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const summary = JSON.parse(result.stdout) as RunSummary;
    assert.equal(summary.tokens.input, 800);
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.workload.promptOverheadTokens, 0);
  });
});
