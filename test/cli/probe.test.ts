/**
 * `infergauge probe prefill|decode`: the fits on synthetic data, and the probes against the
 * simulator in virtual time, whose prefill rate and decode step cost are known from the engine
 * itself. The tolerance: within 10 %.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  type DecodeMeasurement,
  decodeRows,
  doublingLengths,
  fitDecode,
  fitLinear,
  fitPrefill,
  fitQuadratic,
  type PrefillMeasurement,
  pointRequests,
  prefillRows,
} from '../../src/analysis/probe.js';
import { weightBytes } from '../../src/memory/footprint.js';
import { findGpuPreset, type GpuSpec } from '../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../src/memory/model.js';
import { formatDecodeModel, formatPrefillModel } from '../../src/report/probeText.js';
import { EngineModel, type EngineModelOptions } from '../../src/sim/engineModel.js';
import { runCli, tempDir } from '../helpers/cli.js';

const preset = (id: string): ModelSpec => findModelPreset(id) as ModelSpec;
const gpu = (id: string): GpuSpec => findGpuPreset(id) as GpuSpec;
const relError = (got: number, want: number) => (got - want) / want;
const pct = (e: number) => `${(e * 100).toFixed(2)}%`;
const close = (got: number, want: number, tolerance = 1e-9) =>
  Math.abs(got - want) <= tolerance * Math.max(1, Math.abs(want));

function prefillPoint(inputTokens: number, batch: number, ttftMs: number): PrefillMeasurement {
  return {
    inputTokens,
    batch,
    requests: 5,
    completed: 5,
    failed: 0,
    countedInputTokens: inputTokens,
    meanConcurrency: batch,
    inputTokensPerS: (inputTokens * batch * 1000) / ttftMs,
    ttftMeanMs: ttftMs,
    ttftP50Ms: ttftMs,
    ttftP99Ms: ttftMs,
  };
}

function decodePoint(concurrency: number, tpotMs: number): DecodeMeasurement {
  return {
    concurrency,
    requests: 2 * concurrency,
    completed: 2 * concurrency,
    failed: 0,
    meanConcurrency: concurrency,
    outputTokensMean: 256,
    itlP50Ms: tpotMs,
    itlP99Ms: tpotMs,
    tpotMeanMs: tpotMs,
    tpotP50Ms: tpotMs,
  };
}

describe('probe fits on synthetic data', () => {
  test('linear least squares: exact recovery, and r² of a known scatter', () => {
    const x = [1, 2, 4, 8, 16, 32, 64];
    const exact = fitLinear(
      x,
      x.map((c) => 7.1 + 0.021 * c),
    );
    assert.ok(exact);
    assert.ok(close(exact.intercept, 7.1) && close(exact.slope, 0.021), JSON.stringify(exact));
    assert.ok(close(exact.r2, 1));
    assert.equal(exact.points, 7);
    // slope = Sxy / Sxx = 4 / 5, intercept 2.5 - 0.8 x 2.5, r² = Sxy² / (Sxx Syy) = 16 / 25.
    const scatter = fitLinear([1, 2, 3, 4], [1, 3, 2, 4]);
    assert.ok(scatter);
    assert.ok(close(scatter.slope, 0.8) && close(scatter.intercept, 0.5));
    assert.ok(close(scatter.r2, 0.64));
    assert.equal(fitLinear([1], [2]), undefined);
    assert.equal(fitLinear([3, 3], [1, 2]), undefined);
    assert.throws(() => fitLinear([1, 2], [1]), RangeError);
  });

  test('quadratic least squares recovers a, b, c over token counts to 8k (n² to 6.7e7)', () => {
    const x = doublingLengths(128, 8192);
    const fit = fitQuadratic(
      x,
      x.map((n) => 24.3 + 0.0218 * n + 4.09e-7 * n * n),
    );
    assert.ok(fit);
    assert.ok(close(fit.a, 24.3, 1e-7), `a ${fit.a}`);
    assert.ok(close(fit.b, 0.0218, 1e-7), `b ${fit.b}`);
    assert.ok(close(fit.c, 4.09e-7, 1e-7), `c ${fit.c}`);
    assert.ok(close(fit.r2, 1));
    assert.equal(fitQuadratic([1, 2, 2, 1], [1, 2, 2, 1]), undefined);
  });

  test('prefill model: fixed latency and rate in tok/s from ms, and when the n² term matters', () => {
    const lengths = doublingLengths(128, 8192);
    // TTFT = 31.2 ms + n / 24,300 tok/s, exactly: no quadratic term.
    const linear = lengths.map((n) => prefillPoint(n, 1, 31.2 + (n / 24_300) * 1000));
    const model = fitPrefill([...linear, prefillPoint(1024, 4, 500)]);
    assert.ok(model);
    assert.equal(model.batch, 1, 'fitted on batch 1 only');
    assert.equal(model.points, lengths.length);
    assert.ok(close(model.fixedMs, 31.2, 1e-9), `a ${model.fixedMs}`);
    assert.ok(close(model.tokensPerS, 24_300, 1e-9), `rate ${model.tokensPerS}`);
    assert.ok(close(model.r2, 1));
    assert.deepEqual(model.tokens, { min: 128, max: 8192 });
    assert.ok(model.quadratic);
    assert.equal(model.quadratic.matters, false);
    assert.ok(Math.abs(model.quadratic.shareAtMax) < 1e-6);
    assert.match(
      formatPrefillModel(model)[0],
      /^TTFT ~ 31\.2 ms \+ n \/ 24,300 tok\/s \(r2 1\.0000, batch 1, 128-8,192 tokens\)/,
    );
    // Attention: 4e-7 ms x n² is 26.8 of 210.7 ms (12.7 %) at 8,192 tokens.
    const curved = fitPrefill(lengths.map((n) => prefillPoint(n, 1, 20 + 0.02 * n + 4e-7 * n * n)));
    assert.ok(curved?.quadratic);
    assert.equal(curved.quadratic.matters, true);
    assert.ok(close(curved.quadratic.msPerToken2, 4e-7, 1e-6));
    assert.ok(close(curved.quadratic.msPerToken, 0.02, 1e-6));
    const share = (4e-7 * 8192 ** 2) / (20 + 0.02 * 8192 + 4e-7 * 8192 ** 2);
    assert.ok(close(curved.quadratic.shareAtMax, share, 1e-6));
    assert.ok(curved.r2 < 1 && curved.r2 > 0.99, 'the straight line misses the curve a little');
    assert.match(formatPrefillModel(curved)[1], /quadratic term \(attention\) matters, 12\.7%/);
    // Without batch 1 the smallest batch is fitted, n counting the whole batch.
    const batch4 = fitPrefill(lengths.map((n) => prefillPoint(n, 4, 10 + (4 * n) / 40)));
    assert.ok(batch4);
    assert.equal(batch4.batch, 4);
    assert.ok(close(batch4.tokensPerS, 40_000));
    assert.equal(fitPrefill([prefillPoint(128, 1, 30)]), undefined, 'one length: no fit');
  });

  test('decode model: per-step cost at batch 1 and per-sequence cost in ms', () => {
    const levels = [1, 2, 4, 8, 16, 32, 64];
    const model = fitDecode(levels.map((c) => decodePoint(c, 7.1 + 0.021 * c)));
    assert.ok(model);
    assert.ok(close(model.stepMs, 7.1) && close(model.perSequenceMs, 0.021));
    assert.ok(close(model.r2, 1));
    assert.deepEqual(model.concurrency, { min: 1, max: 64 });
    assert.match(
      formatDecodeModel(model),
      /^TPOT ~ 7\.1 ms \+ 0\.021 ms x concurrency \(r2 1\.0000, concurrency 1-64\)/,
    );
    const failed = { ...decodePoint(128, 99), completed: 0, failed: 256 };
    assert.ok(
      close(fitDecode([...levels.map((c) => decodePoint(c, 7 + c)), failed])?.stepMs ?? 0, 7),
    );
  });

  test('rows: prefill and decode tokens/s, each with its concurrency', () => {
    const [p] = prefillRows([prefillPoint(1024, 4, 100)]);
    assert.ok(close(p.ttftTokensPerS, 40_960));
    assert.ok(close(p.prefillTokensPerS, p.inputTokensPerS));
    const rows = decodeRows([decodePoint(8, 8), { ...decodePoint(1, 5), meanConcurrency: 0.9 }]);
    assert.deepEqual(
      rows.map((r) => r.concurrency),
      [1, 8],
    );
    assert.ok(close(rows[0].perUserTokensPerS, 200) && close(rows[0].systemTokensPerS, 180));
    assert.ok(close(rows[1].perUserTokensPerS, 125) && close(rows[1].systemTokensPerS, 1000));
    assert.deepEqual(doublingLengths(128, 8191), [128, 256, 512, 1024, 2048, 4096, 8191]);
    assert.deepEqual(doublingLengths(128, 1024), [128, 256, 512, 1024]);
    assert.deepEqual(doublingLengths(100, 100), [100]);
    assert.deepEqual(
      [1, 4, 16, 3].map((b) => pointRequests(5, b)),
      [5, 8, 32, 6],
    );
  });
});

/** The engine's own TTFT at batch 1 (ms), with no HTTP front end. */
function engineTtftMs(options: EngineModelOptions, promptTokens: number): number {
  const engine = new EngineModel({ ...options, efficiency: { frontendLatencyS: 0 } });
  let at = 0;
  engine.add({ arrivalNs: 0, promptTokens, maxTokens: 1 }, { onToken: (ns) => (at = ns / 1e6) });
  while (engine.step()) {}
  return at;
}

/** The parts of probe.json the tests read. */
interface ProbeJson {
  settings: { inputTokens: number[] };
  points: {
    dir: string;
    failed: number;
    inputTokens: number;
    countedInputTokens: number;
    batch: number;
    concurrency: number;
    outputTokensMean: number;
    meanConcurrency: number;
    perUserTokensPerS: number;
    tpotMeanMs: number;
  }[];
  fit: { tokensPerS: number; fixedMs: number; stepMs: number; perSequenceMs: number; r2: number };
}

async function probeCli(args: string[]): Promise<{ json: ProbeJson; stdout: string; out: string }> {
  const out = join(tempDir('infergauge-probe-'), 'out');
  const result = await runCli(['probe', ...args, '--simulate', '--out', out]);
  assert.equal(result.code, 0, result.stderr);
  return {
    json: JSON.parse(readFileSync(join(out, 'probe.json'), 'utf8')),
    stdout: result.stdout,
    out,
  };
}

describe('infergauge probe against the simulator (virtual time)', () => {
  test('prefill: the fitted rate is the engine prefill rate over the same lengths, within 10 %', async () => {
    for (const [modelId, gpuId, maxModelLen, batches] of [
      // One step per prompt (budget 8,192), then batches of 4 and 16 beside it.
      ['llama-3-8b', 'h100', 8192, '1,4,16'],
      // A100: budget 2,048, so prompts over 2k are prefilled in chunks over several steps.
      ['llama-2-7b', 'a100-80', 4096, '1'],
    ] as const) {
      const { json, stdout, out } = await probeCli([
        'prefill',
        '--model',
        modelId,
        '--gpu',
        gpuId,
        '--max-model-len',
        String(maxModelLen),
        '--batches',
        batches,
      ]);
      const lengths = doublingLengths(128, maxModelLen - 1);
      assert.deepEqual(json.settings.inputTokens, lengths, 'doubling to max_model_len - 1');
      assert.equal(json.points.length, lengths.length * batches.split(',').length);
      for (const p of json.points) {
        assert.equal(p.failed, 0);
        assert.equal(p.countedInputTokens, p.inputTokens, 'exact input lengths');
        assert.ok(existsSync(join(out, p.dir, 'summary.json')), p.dir);
        assert.equal(p.dir, join('prefill', `n${p.inputTokens}-b${p.batch}`));
      }
      // Ground truth from the engine itself, like with like: its TTFT over the probed lengths.
      const options = { model: preset(modelId), gpu: gpu(gpuId), maxModelLen };
      const truth = lengths.map((n) => engineTtftMs(options, n));
      const line = fitLinear(lengths, truth);
      assert.ok(line);
      const trueRate = 1000 / line.slope;
      // And without any fit: the secant from the shortest to the longest input.
      const secantRate =
        ((lengths[lengths.length - 1] - lengths[0]) * 1000) / (truth[truth.length - 1] - truth[0]);
      const fit = json.fit;
      const error = relError(fit.tokensPerS, trueRate);
      const secantError = relError(fit.tokensPerS, secantRate);
      console.log(
        `prefill ${modelId} on ${gpuId}: fitted ${fit.tokensPerS.toFixed(0)} tok/s (a ${fit.fixedMs.toFixed(2)} ms), engine ${trueRate.toFixed(0)} tok/s over the same lengths (${pct(error)}), secant ${secantRate.toFixed(0)} tok/s (${pct(secantError)})`,
      );
      assert.ok(Math.abs(error) <= 0.1, `prefill rate off by ${pct(error)}`);
      assert.ok(Math.abs(secantError) <= 0.1, `prefill rate off the secant by ${pct(secantError)}`);
      // The fixed latency is the 20 ms front end plus the engine line's own intercept.
      assert.ok(
        Math.abs(fit.fixedMs - (20 + line.intercept)) < 0.5,
        `fixed latency ${fit.fixedMs} ms, expected ${20 + line.intercept}`,
      );
      assert.match(stdout, /input\s+│\s+batch\s+│\s+measured\s+│\s+TTFT p50\s+│\s+TTFT p99/);
      assert.match(stdout, /prefill tok\/s/);
      assert.match(stdout, /TTFT ~ \d+\.\d ms \+ n \/ [\d,]+ tok\/s \(r2 0\.9\d{3}, batch 1/);
      assert.match(stdout, /TTFT ~ .* n² x /);
    }
  });

  test('decode: the fitted per-step cost at batch 1 is the engine batch-1 decode step, within 10 %', async () => {
    const { json, stdout, out } = await probeCli(['decode']);
    const levels = [1, 2, 4, 8, 16, 32, 64];
    assert.deepEqual(
      json.points.map((p) => p.concurrency),
      levels,
    );
    for (const p of json.points) {
      assert.equal(p.failed, 0);
      assert.equal(p.outputTokensMean, 256);
      assert.ok(Math.abs(p.meanConcurrency - p.concurrency) < 0.01 * p.concurrency);
      assert.ok(existsSync(join(out, 'decode', `c${p.concurrency}`, 'records.jsonl')));
    }
    // The closed form of test/unit/sim/simulator-validation.test.ts: (weights + KV read) / (bandwidth x
    // MBU) + overheads; a decode reads the KV of input + i tokens, input + output / 2 on average.
    const model = preset('llama-3-8b');
    const g = gpu('h100');
    const engine = new EngineModel({ model, gpu: g });
    const e = engine.config.efficiency;
    const w = weightBytes(model, { dtype: 'bf16' });
    const bandwidth = g.bandwidthBytesPerS * e.mbu;
    const context = 64 + 256 / 2;
    const stepMs =
      ((w.total - w.embedding / 2 + engine.memory.kvBytesPerToken * context) / bandwidth +
        e.stepOverheadS +
        e.perSeqOverheadS) *
      1e3;
    // Each further sequence: its own KV read and per-sequence overhead.
    const perSequenceMs =
      ((engine.memory.kvBytesPerToken * context) / bandwidth + e.perSeqOverheadS) * 1e3;
    const fit = json.fit;
    const error = relError(fit.stepMs, stepMs);
    const perSequenceError = relError(fit.perSequenceMs, perSequenceMs);
    console.log(
      `decode llama-3-8b on h100: fitted ${fit.stepMs.toFixed(3)} ms + ${fit.perSequenceMs.toFixed(4)} ms x c, engine ${stepMs.toFixed(3)} ms (${pct(error)}) + ${perSequenceMs.toFixed(4)} ms (${pct(perSequenceError)})`,
    );
    assert.ok(Math.abs(error) <= 0.1, `per-step cost off by ${pct(error)}`);
    assert.ok(
      Math.abs(perSequenceError) <= 0.1,
      `per-sequence cost off by ${pct(perSequenceError)}`,
    );
    assert.ok(fit.r2 > 0.99);
    const one = json.points[0];
    assert.ok(close(one.perUserTokensPerS, 1000 / one.tpotMeanMs));
    assert.match(
      stdout,
      /concurrency\s+│\s+measured\s+│\s+ITL p50\s+│\s+ITL p99\s+│\s+TPOT mean\s+│\s+per-user tok\/s\s+│\s+system tok\/s/,
    );
    assert.match(stdout, /TPOT ~ 7\.\d ms \+ 0\.0\d+ ms x concurrency \(r2 /);
  });

  test('decode: --input-tokens/--output-tokens are the lengths, --input/--output their old names', async () => {
    const common = await probeCli([
      'decode',
      '--input-tokens',
      '32',
      '--output-tokens',
      '48',
      '--levels',
      '1,2',
    ]);
    const old = await probeCli([
      'decode',
      '--input',
      '32',
      '--output-tokens',
      '48',
      '--levels',
      '1,2',
    ]);
    const { startedAt: _a, ...commonJson } = common.json as unknown as Record<string, unknown>;
    const { startedAt: _b, ...oldJson } = old.json as unknown as Record<string, unknown>;
    assert.deepEqual(commonJson, oldJson);
    assert.equal(common.json.points[0].outputTokensMean, 48);
    assert.match(common.stdout, /TPOT ~/);
    const help = await runCli(['probe', 'decode', '--help']);
    assert.match(help.stdout, /--input-tokens <n>\s+input tokens per request \(default: 64\)/);
    assert.doesNotMatch(help.stdout, /--input <n>/);
  });

  test('--threshold gates the probe (exit 3), --no-html leaves report.html out, --out holds a manifest', async () => {
    const dir = tempDir('infergauge-probe-gate-');
    const args = ['probe', 'decode', '--simulate', '--levels', '1', '--requests-per-point', '4'];
    const failed = await runCli([
      ...args,
      '--threshold',
      'ttft.p99<0.001',
      '--no-html',
      '--out',
      join(dir, 'a'),
    ]);
    assert.equal(failed.code, 3, failed.stderr);
    assert.match(failed.stderr, /threshold failed: ttft\.p99 = /);
    assert.equal(existsSync(join(dir, 'a', 'report.html')), false);
    const manifest = JSON.parse(readFileSync(join(dir, 'a', 'manifest.json'), 'utf8'));
    assert.deepEqual([manifest.kind, manifest.command], ['probe', 'probe decode']);
    const passed = await runCli([
      ...args,
      '--threshold',
      'failureRate<0.01',
      '--out',
      join(dir, 'b'),
    ]);
    assert.equal(passed.code, 0, passed.stderr);
    assert.equal(existsSync(join(dir, 'b', 'report.html')), true);
  });

  test('invalid options name the flag; run options the probe sets itself are refused', async () => {
    const prefill = await runCli([
      'probe',
      'prefill',
      '--simulate',
      '--batches',
      '0,4',
      '--max-input',
      '9000',
      '--concurrency',
      '8',
    ]);
    assert.equal(prefill.code, 2);
    assert.match(prefill.stderr, /infergauge probe prefill: invalid options/);
    assert.match(prefill.stderr, /--batches must be whole numbers >= 1/);
    assert.match(prefill.stderr, /--max-input 9000 .* max_model_len \(8192\): at most 8191/);
    assert.match(prefill.stderr, /--concurrency does not apply to probe prefill/);
    const decode = await runCli([
      'probe',
      'decode',
      '--simulate',
      '--levels',
      '1,x',
      '--output-tokens',
      '1',
      '--url',
      'http://127.0.0.1:9',
    ]);
    assert.equal(decode.code, 2);
    assert.match(decode.stderr, /--levels must be whole numbers/);
    assert.match(decode.stderr, /--output-tokens must be a whole number >= 2/);
    assert.match(decode.stderr, /--simulate runs without a server: drop --url/);
  });
});
