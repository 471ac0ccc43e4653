/**
 * Measured step times (`calibrate --steps`): the cost model takes a step probe's prompt times
 * where they reach and the roofline beyond; calibrate reads them from a probe's results (the
 * prompt time the server reported, one request at a time) and, with them, predicts an engine
 * whose small-batch cost no roofline follows. The "server" is the simulator with a hidden step
 * table, so the truth is exact.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { paramCounts } from '../../../src/memory/model.js';
import type { RequestRecord } from '../../../src/record.js';
import { calibrate } from '../../../src/session/calibrate.js';
import {
  type CalibrationPoint,
  CalibrationRefused,
  relativeErrors,
  replayPoint,
  replayRecords,
} from '../../../src/sim/calibrate.js';
import { resolveEngineConfig } from '../../../src/sim/engineModel.js';
import { resolveEngine } from '../../../src/sim/options.js';
import { type MeasuredSteps, StepCostModel } from '../../../src/sim/roofline.js';
import { tempDir } from '../../helpers/cli.js';
import { l40sEngine, measurePerturbed } from '../../helpers/perturbed.js';

/**
 * A step cost no roofline follows (llama.cpp's CPU GEMMs: a cheap one-row kernel, then a jump
 * and tiles by four: docs/llamacpp-personality.md), in seconds, for Llama-3-8B on an L40S.
 */
const TABLE: MeasuredSteps = {
  tokens: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048],
  seconds: [21, 38, 41, 47, 52, 58, 66, 80, 104, 160, 300, 590].map((ms) => ms / 1e3),
};
const HIDDEN = { perSeqOverheadUs: 400, frontendLatencyMs: 9 };
const truth = { ...l40sEngine(HIDDEN), measuredSteps: TABLE };

/** A run directory as `infergauge run` leaves it: its records, and its load in manifest.json. */
function writeRun(dir: string, records: RequestRecord[], concurrency: number): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'records.jsonl'), records.map((r) => JSON.stringify(r)).join('\n'));
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify({ plan: { load: { mode: 'closed', concurrency } } }),
  );
  return dir;
}

/** A point's run as records (its replay on the truth is the run itself). */
const recordsOf = (point: CalibrationPoint): RequestRecord[] => replayRecords(truth, point);

/** The step probe's records: each prompt length alone, with the prompt time the server reports. */
function probeRecords(tokens: number, requests: number, timed = true): RequestRecord[] {
  const ms = (TABLE.seconds[TABLE.tokens.indexOf(tokens)] ?? Number.NaN) * 1e3;
  return Array.from({ length: requests }, (_, i) => {
    const sent = i * 1000;
    return {
      id: i,
      phase: 'measure',
      scheduledAt: sent,
      sentAt: sent,
      firstTokenAt: sent + 9 + ms,
      lastTokenAt: sent + 9 + ms,
      endAt: sent + 10 + ms,
      outputTokens: 1,
      outputTokensSource: 'server',
      requestedInputTokens: tokens,
      requestedOutputTokens: 1,
      // One event, the one token: a record the readers take (they skip one without events).
      events: { dtUs: [9 + ms], tokens: [1], contentChars: [1] },
      ...(timed ? { serverTiming: { prefillMs: ms, prefillTokens: tokens } } : {}),
    } as RequestRecord;
  });
}

describe('measured steps', () => {
  test('the cost model: a probe-like step is the table, a decode adds its context and sequences, a longer one the roofline', () => {
    const config = resolveEngineConfig({ ...l40sEngine({}), measuredSteps: TABLE });
    const measured = new StepCostModel({ ...config, measuredSteps: TABLE });
    const roofline = new StepCostModel(config);
    const prompt = (t: number) => ({
      tokens: t,
      sampledRows: 1,
      sequences: 1,
      attentionPairs: (t * t) / 2,
      kvTokensTouched: t,
    });
    assert.equal(measured.stepTime(prompt(64)).totalS, 0.066);
    // Between sizes, linear: 48 tokens halfway from 32 to 64.
    assert.ok(Math.abs(measured.stepTime(prompt(48)).totalS - 0.062) < 1e-12);
    // Eight decodes at 2,000 tokens of context: the table's 8, plus the modelled attention over
    // that context less the probe's own, plus seven more sequences.
    const decode = {
      tokens: 8,
      sampledRows: 8,
      sequences: 8,
      attentionPairs: 8 * 2000,
      kvTokensTouched: 8 * 2000,
    };
    const got = measured.stepTime(decode);
    const attention = roofline.stepTime(decode).attentionS;
    const probeAttention = roofline.stepTime(prompt(8)).attentionS;
    const perSeq = config.efficiency.perSeqOverheadS;
    // Seven more rows through lm_head: its share of a token's linear work, at the table's cost
    // of 8 tokens over 1.
    const p = paramCounts(config.model);
    const rows = (p.lmHead / (p.activeBody + p.lmHead)) * (0.047 - 0.021);
    // And their logits through the sampler (one TP rank: no gather), at the memory bandwidth.
    const e = config.efficiency;
    const logits =
      (7 * config.model.vocabSize * e.samplerBytesPerLogit) /
      (config.gpu.bandwidthBytesPerS * e.mbu);
    assert.equal(config.tp, 1);
    assert.ok(attention > 10 * probeAttention);
    assert.ok(
      Math.abs(got.totalS - (0.047 + attention - probeAttention + rows + logits + 7 * perSeq)) <
        1e-9,
      `${got.totalS}`,
    );
    assert.ok(Math.abs(got.logitsS - logits) < 1e-15);
    // Beyond the table: the roofline's.
    assert.equal(measured.stepTime(prompt(4096)).totalS, roofline.stepTime(prompt(4096)).totalS);
  });

  test('llama.cpp: a probe prompt longer than a ubatch was two forwards, and is not taken as one step', () => {
    const r = resolveEngine({
      model: 'llama-3-8b',
      gpu: 'l40s',
      enginePersonality: 'llamacpp',
      ubatchSize: 300,
      ctxSize: 4096,
    });
    const engine = r.engine as NonNullable<typeof r.engine>;
    const ttft = (input: number, steps?: MeasuredSteps) =>
      measurePerturbed(1, 1, input, 2, { ...engine, ...(steps ? { measuredSteps: steps } : {}) })
        .measured.ttftMs;
    // 200 tokens: one forward, between the 128- and 256-token steps.
    assert.notEqual(ttft(200, TABLE), ttft(200));
    // 290: the table's next size, 512, ran as 300 + 212 here: the roofline's step, not a line to it.
    assert.equal(ttft(290, TABLE), ttft(290));
  });

  test('calibrate --steps reads the probe, fits what the table leaves, and predicts a held-out load the roofline misses', async (t) => {
    const dir = tempDir('ig-calibrate-steps-');
    const fitPoints = [
      measurePerturbed(1, 6, 32, 128, truth),
      measurePerturbed(4, 12, 64, 96, truth),
      measurePerturbed(1, 3, 1500, 16, truth),
    ];
    const fitDirs = fitPoints.map((p, i) =>
      writeRun(
        join(dir, `fit-${i}`),
        recordsOf(p),
        (p.load as { concurrency: number }).concurrency,
      ),
    );
    const steps = join(dir, 'probe');
    for (const t of TABLE.tokens) writeRun(join(steps, `n${t}-b1`), probeRecords(t, 3), 1);
    // A probe's larger batch: passed over with a warning.
    writeRun(join(steps, 'n64-b4'), probeRecords(64, 4), 4);
    const flags = { model: 'llama-3-8b', gpu: 'l40s' };

    // Attention on an L40S decodes at the KV's bandwidth: its share of the peak stays held.
    const result = await calibrate(fitDirs, {
      flags,
      steps: [steps],
      fit: 'per-seq-overhead-us',
    });
    assert.deepEqual(
      result.file.steps?.points.map((p) => [p.tokens, p.ms]),
      TABLE.tokens.map((t, i) => [t, TABLE.seconds[i] * 1e3]),
    );
    assert.ok(result.file.steps?.points.every((p) => p.requests === 3));
    assert.ok(result.warnings.some((w) => /n64-b4 ran more than one request at a time/.test(w)));
    assert.deepEqual(Object.keys(result.file.fitted), ['perSeqOverheadUs']);
    // The front end the probe measured (TTFT less the reported prompt time) is held.
    assert.equal(result.file.steps?.frontendMs, HIDDEN.frontendLatencyMs);
    assert.equal(result.file.held.frontendLatencyMs, HIDDEN.frontendLatencyMs);
    const perSeq = result.file.fitted.perSeqOverheadUs?.value ?? 0;
    assert.ok(Math.abs(perSeq / HIDDEN.perSeqOverheadUs - 1) < 0.1, `per-seq ${perSeq} us`);

    // Held out: concurrency 8; the calibration applies its table through --calibration.
    const path = join(dir, 'calibration.json');
    writeFileSync(path, JSON.stringify(result.file));
    const applied = resolveEngine({ calibration: path });
    assert.deepEqual(applied.engine?.measuredSteps, TABLE);
    const held = measurePerturbed(8, 24, 128, 96, truth);
    const errors = relativeErrors(replayPoint(applied.engine as never, held), held.measured);
    for (const [k, e] of Object.entries(errors)) assert.ok(Math.abs(e) < 0.03, `${k} ${e}`);
    // Without the probe, the roofline's shares cannot follow this engine.
    const without = await calibrate(fitDirs, {
      flags,
      fit: 'mbu,per-seq-overhead-us,frontend-latency-ms',
    });
    writeFileSync(path, JSON.stringify(without.file));
    const roofline = resolveEngine({ calibration: path }).engine;
    const worse = relativeErrors(replayPoint(roofline as never, held), held.measured);
    t.diagnostic(
      `held out c8: with the steps ${JSON.stringify(errors)}; roofline ${JSON.stringify(worse)}`,
    );
    assert.ok(
      Math.max(...Object.values(worse).map(Math.abs)) > 0.2,
      'the roofline fits this engine',
    );

    // The steps are the served engine's: another GPU takes the roofline again, and says so.
    writeFileSync(path, JSON.stringify(result.file));
    const elsewhere = resolveEngine({ calibration: path, gpu: 'h100' });
    assert.equal(elsewhere.engine?.measuredSteps, undefined);
    assert.ok(
      elsewhere.warnings.some((w) =>
        /step times were measured on .*L40S.* not used with another device/.test(w),
      ),
    );
  });

  test("--hold-unidentified: what the runs cannot tell is held at the engine's value and said, and the steps predict alone", async () => {
    const dir = tempDir('ig-calibrate-steps-');
    // Two runs at concurrency 1: nothing tells the cost of a further sequence.
    const runs = [measurePerturbed(1, 4, 32, 64, truth), measurePerturbed(1, 3, 900, 16, truth)];
    const fitDirs = runs.map((p, i) => writeRun(join(dir, `c1-${i}`), recordsOf(p), 1));
    const steps = join(dir, 'probe');
    for (const t of TABLE.tokens) writeRun(join(steps, `n${t}-b1`), probeRecords(t, 3), 1);
    const o = {
      flags: { model: 'llama-3-8b', gpu: 'l40s' },
      steps: [steps],
      fit: 'per-seq-overhead-us',
    };
    await assert.rejects(calibrate(fitDirs, o), /one load level only \(c1\)/);
    const result = await calibrate(fitDirs, { ...o, holdUnidentified: true });
    assert.deepEqual(result.file.fitted, {});
    assert.equal(result.file.held.perSeqOverheadUs, 13);
    // Said in the file, by its code, so that every command using it repeats it.
    const held = result.file.warnings?.find((w) => w.code === 'calibration_held_unidentified');
    assert.equal(held?.parameter, '--per-seq-overhead-us');
    assert.equal(held?.value, 13);
    assert.match(
      held?.message ?? '',
      /^held --per-seq-overhead-us at the engine's 13: one load level only/,
    );
    // At one sequence the steps and the measured front end are the whole cost: exact.
    for (const p of result.file.points) {
      for (const e of Object.values(p.error))
        assert.ok(Math.abs(e) < 1e-3, JSON.stringify(p.error));
    }
  });

  test('a probe without server-reported prompt times is refused, saying which servers report them', async () => {
    const dir = tempDir('ig-calibrate-steps-');
    const fit = writeRun(join(dir, 'fit'), recordsOf(measurePerturbed(1, 4, 32, 64, truth)), 1);
    const steps = join(dir, 'probe');
    for (const t of [1, 2, 4]) writeRun(join(steps, `n${t}-b1`), probeRecords(t, 2, false), 1);
    await assert.rejects(
      calibrate([fit], { flags: { model: 'llama-3-8b', gpu: 'l40s' }, steps: [steps] }),
      (err: unknown) =>
        err instanceof CalibrationRefused &&
        /--steps .*probe: no request there has a prompt time reported by the server \(llama.cpp's llama-server and Ollama report one/.test(
          err.message,
        ),
    );
  });
});
