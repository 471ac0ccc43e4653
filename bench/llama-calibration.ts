/**
 * Issue 30's proof against a real engine, with the figures: llama-server (the tests' generated
 * 125M q8_0 model, one compute thread, 4 slots, n_ctx 4096) measured at the fit loads and the
 * held-out ones (tools/llama/calibration.ts), calibrated with the llamacpp personality on this
 * machine's CPU description, over `--rounds` rounds, each with a fresh server and fresh prompts.
 * Prints each round's fit, its leave-one-out and held-out errors, and their medians over all
 * rounds against the issue's targets (leave-one-out median <= 10 % TPOT and throughput, <= 20 %
 * TTFT). `--steps` instead measures the step function the personality's two measured constants
 * come from (prompt-processing time by prompt length, decode time by context).
 *
 * `--refit --keep DIR` fits and predicts the rounds a `--keep DIR` run left, measuring nothing:
 * a change to the model compared on the same measurements.
 *
 *   node --import tsx bench/llama-calibration.ts [--rounds 3] [--steps] [--keep DIR [--refit]]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadGpuSpec } from '../src/memory/gpuSpec.js';
import type { RequestRecord } from '../src/record.js';
import { readRecords } from '../src/results/jsonl.js';
import { resultPath } from '../src/results/layout.js';
import type { PointMetrics } from '../src/sim/calibrationFile.js';
import { StepCostModel } from '../src/sim/roofline.js';
import { ensureLlamaServer } from '../tools/llama/build.js';
import {
  calibrateLlama,
  FIT_LOADS,
  HELD_OUT_LOADS,
  type LlamaLoad,
  measureLoad,
  measureSteps,
  predictFromCalibration,
  STEP_SIZES,
  serverOptions,
  writeCpuSpec,
  writeLlamaModelConfig,
} from '../tools/llama/calibration.js';
import { CONTENT_ONLY_CHAT_TEMPLATE, cachedLlamaModel } from '../tools/llama/model.js';
import { startLlamaServer } from '../tools/llama/server.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    steps: { type: 'boolean', default: false },
    keep: { type: 'string' },
    refit: { type: 'boolean', default: false },
  },
});

/** Beyond the test's held-out loads: three slots, and more clients than slots (queueing). */
const EXTRA_HELD_OUT: readonly LlamaLoad[] = [
  { name: 'decode-c3', concurrency: 3, requests: 6, warmup: 0, inputTokens: 16, outputTokens: 48 },
  { name: 'decode-c6', concurrency: 6, requests: 12, warmup: 0, inputTokens: 16, outputTokens: 48 },
];

const pct = (e: number) => `${e >= 0 ? '+' : ''}${(e * 100).toFixed(1)}%`;
const medianAbs = (xs: number[]) => {
  const v = xs
    .filter(Number.isFinite)
    .map(Math.abs)
    .sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
const row = (m: PointMetrics) =>
  `TTFT ${m.ttftMs.toFixed(1)} ms, TPOT ${m.tpotMs.toFixed(2)} ms, ${m.outputTokPerS.toFixed(1)} tok/s`;
const errs = (e: PointMetrics) =>
  `TTFT ${pct(e.ttftMs)}, TPOT ${pct(e.tpotMs)}, throughput ${pct(e.outputTokPerS)}`;

const model = await cachedLlamaModel({
  preset: '125m',
  seed: 1,
  chatTemplate: CONTENT_ONLY_CHAT_TEMPLATE,
});
const binary = await ensureLlamaServer();
const root = values.keep ?? mkdtempSync(join(tmpdir(), 'ig-llama-calibration-'));
mkdirSync(root, { recursive: true });
// A refit keeps the CPU description the measurements were fitted with (bandwidth is measured).
const configPath = values.refit
  ? join(root, 'config.json')
  : writeLlamaModelConfig(join(root, 'config.json'));
const cpuPath = values.refit ? join(root, 'cpu.yaml') : await writeCpuSpec(join(root, 'cpu.yaml'));
console.log(`CPU description (${cpuPath}): ${JSON.stringify(loadGpuSpec(cpuPath))}`);

try {
  if (values.steps) await steps();
  else await rounds(Number(values.rounds));
} finally {
  if (!values.keep) rmSync(root, { recursive: true, force: true });
}

async function rounds(n: number) {
  const inFit: PointMetrics[] = [];
  const loo: PointMetrics[] = [];
  const held: PointMetrics[] = [];
  const extra: PointMetrics[] = [];
  const fits: string[] = [];
  // Prediction intervals checked: measured figures inside the 90 % intervals, of those given.
  const coverage = { looInside: 0, looFigures: 0, heldInside: 0, heldFigures: 0 };
  for (let round = 0; round < n; round++) {
    const dir = join(root, `round-${round}`);
    const started = performance.now();
    const stepsDir = join(dir, 'steps');
    const fitDirs = FIT_LOADS.map((l) => join(dir, l.name));
    const heldDirs = [...HELD_OUT_LOADS, ...EXTRA_HELD_OUT].map((l) => join(dir, l.name));
    if (!values.refit) {
      mkdirSync(dir, { recursive: true });
      const server = await startLlamaServer(serverOptions(binary, model));
      let seed = 10_000 * (round + 1);
      try {
        await measureSteps(server.url, dir, seed);
        seed += STEP_SIZES.length;
        for (const l of [...FIT_LOADS, ...HELD_OUT_LOADS, ...EXTRA_HELD_OUT]) {
          await measureLoad(server.url, l, dir, seed++);
        }
      } finally {
        await server.stop();
      }
    }
    const measuredS = (performance.now() - started) / 1000;
    const result = await calibrateLlama(fitDirs, configPath, cpuPath, stepsDir);
    const calibration = join(dir, 'calibration.json');
    writeFileSync(calibration, JSON.stringify(result.file));
    console.log(
      `\nround ${round + 1}: measured in ${measuredS.toFixed(1)} s, calibrated in ${result.wallS.toFixed(1)} s`,
    );
    const fitted = Object.entries(result.file.fitted)
      .map(([k, v]) => `${k} ${v?.value.toFixed(3)} (+-${v?.stdErr.toFixed(3)})`)
      .join(', ');
    fits.push(fitted);
    console.log(
      `  fitted: ${fitted}; held: ${JSON.stringify(result.file.held)}${result.warnings.length ? `\n  ${result.warnings.join('\n  ')}` : ''}`,
    );
    console.log(
      `  measured steps: ${result.file.steps?.points.map((p) => `${p.tokens}: ${p.ms.toFixed(1)}`).join(', ')} ms`,
    );
    for (const p of result.file.points) {
      const name = p.label.split('/').pop();
      console.log(`  fit ${name}: measured ${row(p.measured)}`);
      console.log(`    in the fit: ${errs(p.error)}`);
      inFit.push(p.error);
      if (p.leaveOneOut) {
        loo.push(p.leaveOneOut.error);
        const heldKeys = p.leaveOneOut.heldKeys.length
          ? ` (held ${p.leaveOneOut.heldKeys.join(', ')})`
          : '';
        console.log(`    left out:   ${errs(p.leaveOneOut.error)}${heldKeys}`);
      }
    }
    if (result.file.leaveOneOutCoverage) {
      coverage.looInside += result.file.leaveOneOutCoverage.inside;
      coverage.looFigures += result.file.leaveOneOutCoverage.figures;
    }
    for (const [i, l] of [...HELD_OUT_LOADS, ...EXTRA_HELD_OUT].entries()) {
      const p = await predictFromCalibration(calibration, heldDirs[i], l);
      (i < HELD_OUT_LOADS.length ? held : extra).push(p.error);
      console.log(`  held out ${l.name}: measured ${row(p.measured)}`);
      console.log(`    predicted ${row(p.predicted)}: ${errs(p.error)}`);
      const ranges = (['ttftMs', 'tpotMs', 'outputTokPerS'] as const).flatMap((k) => {
        const range = p.interval[k];
        if (!range || !Number.isFinite(p.measured[k])) return [];
        const inside = p.measured[k] >= range.low && p.measured[k] <= range.high;
        coverage.heldFigures++;
        if (inside) coverage.heldInside++;
        return [
          `${k} ${range.low.toPrecision(3)}-${range.high.toPrecision(3)}${inside ? '' : ' (outside)'}`,
        ];
      });
      if (ranges.length > 0) console.log(`    90 % intervals: ${ranges.join(', ')}`);
    }
  }
  const median = (list: PointMetrics[], k: keyof PointMetrics) =>
    pct(medianAbs(list.map((e) => e[k])));
  const medians = (list: PointMetrics[]) =>
    `TTFT ${median(list, 'ttftMs')}, TPOT ${median(list, 'tpotMs')}, throughput ${median(list, 'outputTokPerS')}`;
  console.log(`\nover ${n} round(s):`);
  console.log(`  in the fit median |error|: ${medians(inFit)}`);
  console.log(
    `  leave-one-out median |error|: TTFT ${median(loo, 'ttftMs')} (target 20 %), TPOT ${median(loo, 'tpotMs')} (10 %), throughput ${median(loo, 'outputTokPerS')} (10 %)`,
  );
  console.log(
    `  held-out (${HELD_OUT_LOADS.map((l) => l.name).join(', ')}) median |error|: TTFT ${median(held, 'ttftMs')}, TPOT ${median(held, 'tpotMs')}, throughput ${median(held, 'outputTokPerS')}`,
  );
  console.log(
    `  ${EXTRA_HELD_OUT.map((l) => l.name).join(', ')} median |error|: ${medians(extra)}`,
  );
  const share = (inside: number, of: number) =>
    of > 0 ? `${inside} of ${of} (${((100 * inside) / of).toFixed(0)} %)` : 'none';
  console.log(
    `  90 % prediction intervals covering the measured figure: left out ${share(coverage.looInside, coverage.looFigures)}, held out ${share(coverage.heldInside, coverage.heldFigures)} (target 80-100 %)`,
  );
  console.log(
    `  held-out worst |error|: ${(['ttftMs', 'tpotMs', 'outputTokPerS'] as const).map((k) => `${k} ${pct(Math.max(...held.map((e) => Math.abs(e[k]))))}`).join(', ')}`,
  );
}

/**
 * The step function: server prompt time for one prompt of T tokens (one slot, each its own
 * prompt so none is cached), and decode time per token at contexts of 16 to 900 tokens. A line
 * t = a + b T through T >= 2 gives the ramp h = a / b; the decode slope over context gives the
 * attention's share of the 16-bit peak at one token, as the roofline reads it.
 */
async function steps() {
  const server = await startLlamaServer(serverOptions(binary, model));
  const dir = join(root, 'steps');
  let seed = 90_000;
  const serverTimes = async (load: LlamaLoad) => {
    const d = await measureLoad(server.url, load, dir, seed++);
    const records: RequestRecord[] = [];
    for await (const r of readRecords(resultPath(d, 'records'))) records.push(r);
    return records.filter((r) => r.phase === 'measure' && !r.error);
  };
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  try {
    await serverTimes({
      name: 'warm',
      concurrency: 1,
      requests: 2,
      warmup: 0,
      inputTokens: 64,
      outputTokens: 8,
    });
    const prefill: [number, number][] = [];
    for (const t of [2, 4, 8, 16, 32, 64, 128, 256, 511]) {
      const rs = await serverTimes({
        name: `prefill-${t}`,
        concurrency: 1,
        requests: 5,
        warmup: 0,
        // llama.cpp keeps BOS from the slot's last prompt: it processes the words alone.
        inputTokens: t,
        outputTokens: 2,
      });
      const ms = median(rs.map((r) => r.serverTiming?.prefillMs ?? Number.NaN));
      const tokens = median(rs.map((r) => r.serverTiming?.prefillTokens ?? Number.NaN));
      prefill.push([tokens, ms]);
      console.log(`prompt ${tokens} tokens: ${ms.toFixed(2)} ms`);
    }
    const decode: [number, number][] = [];
    for (const context of [16, 256, 512, 900]) {
      const rs = await serverTimes({
        name: `decode-${context}`,
        concurrency: 1,
        requests: 3,
        warmup: 0,
        inputTokens: context,
        outputTokens: 32,
      });
      const ms = median(
        rs.map((r) => (r.serverTiming?.decodeMs ?? 0) / ((r.serverTiming?.decodeTokens ?? 2) - 1)),
      );
      decode.push([context + 16, ms]);
      console.log(`decode at context ~${context + 16}: ${ms.toFixed(2)} ms per token`);
    }
    const line = (points: [number, number][]) => {
      const n = points.length;
      const mx = points.reduce((s, p) => s + p[0], 0) / n;
      const my = points.reduce((s, p) => s + p[1], 0) / n;
      const b =
        points.reduce((s, p) => s + (p[0] - mx) * (p[1] - my), 0) /
        points.reduce((s, p) => s + (p[0] - mx) ** 2, 0);
      return { a: my - b * mx, b };
    };
    // The GEMM line from 2 to 256 tokens (512 adds attention's quadratic part).
    const g = line(prefill.filter(([t]) => t >= 2 && t <= 256));
    console.log(
      `prompt processing: t = ${g.a.toFixed(1)} ms + ${g.b.toFixed(3)} ms x T (T >= 2): ramp h = a / b = ${(g.a / g.b).toFixed(1)} tokens`,
    );
    const d = line(decode);
    const gpu = loadGpuSpec(cpuPath);
    const { resolveModel } = await import('../src/memory/hfConfig.js');
    const spec = resolveModel(configPath).spec;
    const attnFlopsPerPair = 4 * spec.layers * spec.queryHeads * spec.headDim;
    const h = g.a / g.b;
    const share = (attnFlopsPerPair * (1 + h)) / (gpu.peakFlops.bf16 * (d.b / 1e3));
    console.log(
      `decode: ${d.a.toFixed(2)} ms + ${(d.b * 1e3).toFixed(2)} us per context token: attention at ${((attnFlopsPerPair / (d.b / 1e3)) * 1e-9).toFixed(2)} GFLOP/s, a 16-bit share (mfuMax16) of ${share.toFixed(3)} with the ramp`,
    );
    // What the roofline's attention term then gives for the prompts (for the record).
    const cost = new StepCostModel({
      model: spec,
      gpu,
      weights: { dtype: 'int8' },
      kvDtype: 'fp16',
      tp: 1,
      efficiency: {
        mbu: 0.6,
        mfuMax16: share,
        mfuMax8: 0.15,
        mfuHalfTokens: h,
        stepOverheadS: 0,
        perSeqOverheadS: 0,
        frontendLatencyS: 0,
        engineHopS: 0,
        entryPointHopS: 0,
        tokenizeSPerPromptToken: 0,
        frontendChatCpuS: 0,
        scheduleOverheadS: 0,
        samplerBytesPerLogit: 0,
      },
      singleRowGemv: true,
    });
    for (const [t, ms] of prefill.filter(([t]) => t >= 128)) {
      const excess = ms - (g.a + g.b * t);
      const modelled =
        cost.stepTime({
          tokens: t,
          sampledRows: 1,
          sequences: 1,
          attentionPairs: (t * t) / 2,
          kvTokensTouched: t,
        }).attentionS * 1e3;
      console.log(
        `  prompt ${t}: ${excess.toFixed(1)} ms above the line; the attention term gives ${modelled.toFixed(1)} ms`,
      );
    }
  } finally {
    await server.stop();
  }
}
