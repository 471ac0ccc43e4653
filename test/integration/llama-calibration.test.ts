import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CalibrationRefused } from '../../src/sim/calibrate.js';
import type { CalibrationFile, PointMetrics } from '../../src/sim/calibrationFile.js';
import { ensureLlamaServer } from '../../tools/llama/build.js';
import {
  calibrateLlama,
  type EngineWatch,
  engineFlags,
  FIT_LOADS,
  HELD_OUT_LOADS,
  MAX_WAIT_SHARE,
  type MeasuredCpu,
  measureLoad,
  measureSteps,
  type Prediction,
  predictFromCalibration,
  STEP_SIZES,
  serverOptions,
  taken,
  writeCpuSpec,
  writeLlamaModelConfig,
} from '../../tools/llama/calibration.js';
import { type RunningLlamaServer, startLlamaServer } from '../../tools/llama/server.js';
import { runAlone } from '../helpers/alone.js';
import { tempDir } from '../helpers/cli.js';
import {
  describePriority,
  ENGINE_NICE,
  raiseClientPriority,
  testLlamaModel,
} from '../helpers/llama.js';

/**
 * Issue 30's proof against a real engine: llama.cpp's llama-server (the tests' 125M-parameter
 * q8_0 model, one compute thread, four slots sharing a 4096-cell KV buffer) is measured with
 * infergauge's library at three loads (decode at concurrency 1 and 4, a 384-token prefill probe)
 * and a step probe (one prompt at a time, 1 to 511 tokens, with llama-server's own prompt times),
 * each into a results directory; `calibrate --steps` fits the llamacpp personality, on this
 * machine's CPU described as a device (tools/llama/cpu-spec.ts: /proc/cpuinfo and a memcpy
 * measurement), to them; calibration.json then predicts two loads it never saw, each replayed
 * with its own requests: concurrency 2, and a 768-token prompt (two ubatches, twice the probe).
 *
 * A neighbour on the CPU: llama-server's one compute thread at nice 0 beside CPU-bound jobs gets
 * 30-70 % of a core, at times that differ between the measurements the fit uses and the loads it
 * predicts, so the fit and the held-out loads time different engines. The server and this
 * file's client therefore run at ENGINE_NICE (where permitted; the output says if not), and each
 * measurement reads the engine's compute thread's and the client's main thread's scheduler
 * accounts (/proc schedstat: time ready to run but waiting for a CPU); one during which either
 * waited more than MAX_WAIT_SHARE of it is set aside and measured again
 * (tools/llama/calibration.ts), so the fit is made from the engine's pace.
 *
 * TOLERANCES, stated before any run, for a 2-core machine that may be running a CPU-bound job
 * beside this one (what waiting MAX_WAIT_SHARE allows, 18 %, and the memory bandwidth and caches
 * a neighbour shares, which no priority gives back):
 * - each held-out load: TPOT and output throughput within 35 %, median TTFT within 40 %;
 * - leave-one-out over the fit's three loads, a check against gross failure only: median |error|
 *   within 50 % (with three loads each left-out one is predicted from the two that pin other
 *   parameters: 30 % on TPOT has been seen on a quiet machine).
 * When a held-out load misses, the whole round (server, measurements, fit) is done again, once:
 * a model that is wrong misses both times, a disturbance does not last. The figures on a quiet
 * machine, over repeated rounds, and against the issue's targets (leave-one-out median <= 10 %
 * TPOT and throughput, <= 20 % TTFT) are bench/llama-calibration.ts's;
 * docs/llamacpp-personality.md records them.
 */
const TOLERANCE: PointMetrics = { ttftMs: 0.4, tpotMs: 0.35, outputTokPerS: 0.35 };
const LOO_TOLERANCE = 0.5;
const ROUNDS = 2;

// A real engine's pace on a 2-core machine is the machine's: run after the other files.
await runAlone(import.meta.url);

const KEYS = ['ttftMs', 'tpotMs', 'outputTokPerS'] as const;
const pct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
const medianAbs = (xs: number[]) => {
  const v = xs.map(Math.abs).sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

const share = (x: number) => `${(x * 100).toFixed(0)} %`;

/** What the engine's CPU was in a round's measurements: the evidence that they timed the engine. */
function describeCpu(log: readonly MeasuredCpu[]): string {
  const kept = log.filter((m) => m.kept);
  const worst = (key: 'engine' | 'client') => Math.max(0, ...kept.map((m) => m[key].waitShare));
  const repeated = [...new Set(log.filter((m) => !m.kept).map((m) => m.name))];
  const contaminated = kept.filter((m) => taken(m) > MAX_WAIT_SHARE).map((m) => m.name);
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1] ?? 0;
  return [
    `engine's compute thread waited for a CPU ${share(median(kept.map((m) => m.engine.waitShare)))} of the time in the median of the ${kept.length} measurements kept, ${share(worst('engine'))} at most (client's main thread ${share(median(kept.map((m) => m.client.waitShare)))}, ${share(worst('client'))})`,
    repeated.length ? `measured again: ${repeated.join(', ')}` : '',
    contaminated.length
      ? `over ${share(MAX_WAIT_SHARE)} in every attempt, the least kept: ${contaminated.join(', ')}`
      : '',
  ]
    .filter(Boolean)
    .join('; ');
}

interface Round {
  file: CalibrationFile;
  predictions: Prediction[];
  looMedian: PointMetrics;
  /** What missed its tolerance, one line each. */
  misses: string[];
  seconds: number;
  /** Every measurement's attempts, with the engine's and the client's CPU. */
  cpu: MeasuredCpu[];
}

describe('calibrating the llamacpp personality against llama-server (real engine, CPU)', {
  timeout: 20 * 60_000,
}, () => {
  const dir = tempDir('ig-llama-calibration-');
  let binary: string;
  let modelPath: string;
  let configPath: string;
  let cpuPath: string;
  let server: RunningLlamaServer | undefined;
  let priority = '';
  const rounds: Round[] = [];

  async function round(n: number): Promise<Round> {
    const started = performance.now();
    const roundDir = join(dir, `round-${n}`);
    server = await startLlamaServer({ ...serverOptions(binary, modelPath), nice: ENGINE_NICE });
    priority = describePriority(server.priority);
    const watch: EngineWatch = { cpu: server.cpu, log: [] };
    let seed = 1000 * (n + 1);
    const fitDirs: string[] = [];
    const heldDirs: string[] = [];
    let stepsDir: string;
    try {
      stepsDir = await measureSteps(server.url, roundDir, seed, watch);
      seed += STEP_SIZES.length;
      for (const load of FIT_LOADS)
        fitDirs.push(await measureLoad(server.url, load, roundDir, seed++, watch));
      for (const load of HELD_OUT_LOADS) {
        heldDirs.push(await measureLoad(server.url, load, roundDir, seed++, watch));
      }
    } finally {
      await server.stop();
      server = undefined;
    }
    const { file } = await calibrateLlama(fitDirs, configPath, cpuPath, stepsDir);
    const calibration = join(roundDir, 'calibration.json');
    writeFileSync(calibration, JSON.stringify(file));
    const predictions: Prediction[] = [];
    for (const [i, load] of HELD_OUT_LOADS.entries()) {
      predictions.push(await predictFromCalibration(calibration, heldDirs[i], load));
    }
    const loo = file.points.map((p) => p.leaveOneOut?.error as PointMetrics);
    const looMedian = Object.fromEntries(
      KEYS.map((k) => [k, medianAbs(loo.map((e) => e[k]))]),
    ) as unknown as PointMetrics;
    const misses: string[] = [];
    for (const p of predictions) {
      for (const k of KEYS) {
        if (!(Math.abs(p.error[k]) <= TOLERANCE[k])) {
          misses.push(
            `${p.name} ${k}: predicted ${p.predicted[k].toFixed(2)}, measured ${p.measured[k].toFixed(2)} (${pct(p.error[k])}, tolerance ${TOLERANCE[k] * 100} %)`,
          );
        }
      }
    }
    return {
      file,
      predictions,
      looMedian,
      misses,
      seconds: (performance.now() - started) / 1000,
      cpu: watch.log,
    };
  }

  let client: ReturnType<typeof raiseClientPriority> | undefined;
  before(async () => {
    client = raiseClientPriority();
    [binary, modelPath] = await Promise.all([ensureLlamaServer(), testLlamaModel()]);
    configPath = writeLlamaModelConfig(join(dir, 'config.json'));
    cpuPath = await writeCpuSpec(join(dir, 'cpu.yaml'));
    for (let n = 0; n < ROUNDS; n++) {
      const r = await round(n);
      rounds.push(r);
      if (r.misses.length === 0) break;
    }
  });
  after(async () => {
    await server?.stop();
    client?.restore();
  });

  test('calibrate takes the step probe and its front end, fits the per-sequence cost; each fit load, left out, is predicted from the others', (t) => {
    const last = rounds[rounds.length - 1];
    const fitted = last.file.fitted;
    t.diagnostic(`${priority}; ${client?.line}`);
    for (const r of rounds) {
      t.diagnostic(
        `round of ${r.seconds.toFixed(1)} s: ${describeCpu(r.cpu)}; per-seq ${r.file.fitted.perSeqOverheadUs ? `${r.file.fitted.perSeqOverheadUs.value.toFixed(0)} us fitted` : `${r.file.held.perSeqOverheadUs} us held`}, front end ${r.file.steps?.frontendMs?.toFixed(1)} ms measured; leave-one-out median TTFT ${pct(r.looMedian.ttftMs)}, TPOT ${pct(r.looMedian.tpotMs)}, throughput ${pct(r.looMedian.outputTokPerS)}; ${r.misses.length ? `missed: ${r.misses.join('; ')}` : 'all within tolerance'}`,
      );
    }
    assert.equal(last.file.engine.personality, 'llamacpp');
    assert.ok(last.file.engine.args.includes('--kv-unified'));
    // One time per prompt length processed (a BOS llama.cpp may process too makes some n + 1).
    const steps = last.file.steps?.points ?? [];
    assert.ok(steps.length >= STEP_SIZES.length, JSON.stringify(steps));
    assert.equal(steps[0].tokens, 1);
    assert.ok(steps[steps.length - 1].tokens >= 511);
    // A two-token prompt leaves the one-row GEMV for tinyBLAS: it costs about twice one, where
    // one more row on the same kernel would cost a few percent more. 1.5x tells the switch
    // apart on a jittery VM (1.95x was read once beside the suite; 2x and above alone).
    const at = (n: number) => steps.find((p) => p.tokens === n)?.ms as number;
    assert.ok(at(2) > 1.5 * at(1), `1: ${at(1)} ms, 2: ${at(2)} ms`);
    // The front end is measured by the probe (TTFT less the server's prompt time) and held; the
    // per-sequence cost is fitted, or, where decode at four slots reads within noise of the
    // probe's four-token step, refused by calibrate and held at the personality's.
    const frontend = last.file.steps?.frontendMs as number;
    assert.ok(frontend > 0 && frontend < 50, `front end ${frontend} ms`);
    assert.equal(last.file.held.frontendLatencyMs, frontend);
    const perSeq = fitted.perSeqOverheadUs?.value ?? last.file.held.perSeqOverheadUs;
    assert.ok(perSeq !== undefined && perSeq >= 0 && perSeq < 5000, `per-seq ${perSeq} us`);
    assert.equal(last.file.points.length, FIT_LOADS.length);
    assert.ok(last.file.points.every((p) => p.leaveOneOut !== undefined));
    for (const k of KEYS) {
      assert.ok(
        last.looMedian[k] <= LOO_TOLERANCE,
        `leave-one-out median ${k} ${pct(last.looMedian[k])} beyond ${LOO_TOLERANCE * 100} %`,
      );
    }
  });

  test('calibration.json predicts concurrency 2 and a 768-token prompt it never saw', (t) => {
    const last = rounds[rounds.length - 1];
    for (const p of last.predictions) {
      t.diagnostic(
        `${p.name}: measured TTFT ${p.measured.ttftMs.toFixed(1)} ms, TPOT ${p.measured.tpotMs.toFixed(2)} ms, ${p.measured.outputTokPerS.toFixed(1)} tok/s; predicted ${pct(p.error.ttftMs)}, ${pct(p.error.tpotMs)}, ${pct(p.error.outputTokPerS)}`,
      );
      for (const k of KEYS) {
        assert.ok(
          Math.abs(p.error[k]) <= TOLERANCE[k],
          `${p.name} ${k} missed in every round: ${rounds.map((r) => `${r.misses.join('; ')} (${describeCpu(r.cpu)})`).join(' | ')}`,
        );
      }
    }
  });

  test('from one load level alone, calibrate refuses the per-step and per-sequence costs, naming the runs to add', async () => {
    const round = join(dir, `round-${rounds.length - 1}`);
    const oneLevel = ['decode-c1', 'prefill'].map((name) => join(round, name));
    const { calibrate } = await import('../../src/session/calibrate.js');
    await assert.rejects(
      calibrate(oneLevel, { flags: engineFlags(configPath, cpuPath) }),
      (err: unknown) =>
        err instanceof CalibrationRefused &&
        /one load level only \(c1\): --step-overhead-ms and --per-seq-overhead-us need decode points at two or more loads/.test(
          err.message,
        ),
    );
  });
});
