/**
 * `size --verify`: the loop closed on a server. The HTTP simulator with hidden constants is the
 * user's server; a calibration is fitted on two real-time runs of it, once with its front end
 * held right and once held far wrong. size's recommendation (or the best row that is the
 * server) is measured there, compared with the calibrated prediction, and recorded in
 * calibration.json: a contradicting check refits it, or, with no refit, leaves a warning that
 * every command using the file repeats.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseRunPlan } from '../../src/plan/runPlan.js';
import { calibrate } from '../../src/session/calibrate.js';
import { benchmark } from '../../src/session/run.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { type SizeOptions, size } from '../../src/session/size.js';
import { verifySize } from '../../src/session/sizeVerify.js';
import type { CalibrationFile } from '../../src/sim/calibrationFile.js';
import { resolveEngine } from '../../src/sim/options.js';
import { parseScenarioList, withLengths } from '../../src/workload/scenarios.js';
import { tempDir } from '../helpers/cli.js';
import { startSim } from '../helpers/sim.js';

const HIDDEN = {
  model: 'llama-3-8b',
  gpu: 'h100',
  mbu: 0.55,
  mfu: 0.4,
  'step-overhead-ms': 4,
  'per-seq-overhead-us': 40,
  'frontend-latency-ms': 6,
};
/** calibrate's flags: every constant held at its truth but the compute share. */
const HELD = {
  model: 'llama-3-8b',
  gpu: 'h100',
  mbu: 0.55,
  stepOverheadMs: 4,
  perSeqOverheadUs: 40,
  frontendLatencyMs: 6,
};

describe('size --verify on the HTTP simulator', () => {
  const root = tempDir('ig-size-verify-');
  let sim: SimulatorProcess;
  let runs: string[];

  before(async () => {
    sim = await startSim(HIDDEN);
    const run = async (concurrency: number, requests: number) => {
      const out = join(root, `c${concurrency}`);
      await benchmark(
        parseRunPlan({
          url: sim.url,
          concurrency,
          requests,
          inputTokens: '1024',
          outputTokens: '16',
          ignoreEos: true,
          endpoint: 'completions',
          out,
        }),
      );
      return out;
    };
    runs = [await run(1, 8), await run(4, 16)];
  });
  after(() => sim.stop());

  /**
   * The calibration fitted on the runs; `frontendLatencyMs` then written over the held front end
   * (a value measured wrong elsewhere), so that its predictions are that much off.
   */
  let fitted: CalibrationFile | undefined;
  const calibrationFile = async (name: string, frontendLatencyMs?: number) => {
    fitted ??= (await calibrate(runs, { flags: HELD, fit: 'mfu' })).file;
    const file = structuredClone(fitted);
    if (frontendLatencyMs !== undefined) file.held.frontendLatencyMs = frontendLatencyMs;
    const path = join(root, name);
    writeFileSync(path, JSON.stringify(file));
    return path;
  };
  const sizeOptions = (calibration: string): SizeOptions => {
    const [chat] = parseScenarioList('chat');
    return {
      model: 'llama-3-8b',
      traffic: { mode: 'users', users: 4 },
      scenario: withLengths(chat, '1024', '16'),
      slo: 'ttft.p99<5000',
      space: {
        gpus: [{ gpu: 'l40s' }, { gpu: 'h100' }],
        tps: [1],
        dtypes: [undefined],
        kvCacheDtypes: [undefined],
        maxNumSeqs: [undefined],
        personalities: ['vllm-v1'],
      },
      // The L40S is cheaper: the recommendation is not the server's H100.
      prices: { l40s: 1, h100: 4 },
      calibration,
      requests: 40,
    };
  };
  const read = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as CalibrationFile;

  test('measures the best row that is the server, and records the check in the calibration', async () => {
    const path = await calibrationFile('right.json');
    const o = sizeOptions(path);
    const result = await size(o);
    assert.equal(result.deployments[0].gpu, 'l40s', 'the cheaper GPU is recommended');
    const v = await verifySize(o, result, { url: sim.url, requests: 20, out: join(root, 'right') });
    assert.equal(v.error, undefined);
    assert.equal(v.how, 'calibrated-row');
    assert.match(v.deployment, /H100 .*TP1/);
    assert.deepEqual(v.load, { mode: 'users', users: 4 });
    const ttft = v.figures.find((f) => f.metric === 'ttft.p50');
    assert.ok(ttft?.predicted && ttft.measured, JSON.stringify(ttft));
    // The right calibration predicts its own server's median TTFT closely.
    assert.ok(Math.abs(ttft.measured / ttft.predicted - 1) < 0.5, JSON.stringify(ttft));
    const file = read(path);
    assert.equal(file.verifications?.length, 1);
    const entry = file.verifications?.[0];
    assert.equal(entry?.dir, v.dir);
    assert.equal(entry?.server, new URL(sim.url).origin + new URL(sim.url).pathname);
    assert.equal(entry?.figures.length, v.figures.length);
  });

  test('a calibration with its front end held wrong is contradicted and refitted with the run', async () => {
    const path = await calibrationFile('wrong.json', 100);
    const o = sizeOptions(path);
    const v = await verifySize(o, await size(o), {
      url: sim.url,
      requests: 20,
      out: join(root, 'wrong'),
    });
    const ttft = v.figures.find((f) => f.metric === 'ttft.p50');
    assert.equal(ttft?.inside, false, JSON.stringify(ttft));
    assert.equal(v.inside, false);
    assert.equal(v.refitted, true, v.refitProblem);
    const file = read(path);
    assert.equal(file.points.length, 3, 'the verification run is a point of the refit');
    assert.equal(file.points.at(-1)?.source, v.dir);
    assert.equal(file.held.frontendLatencyMs, 100, 'the same values held');
    assert.deepEqual(Object.keys(file.fitted), ['mfu'], 'the same keys fitted');
    assert.equal(file.verifications?.[0].refitted, true);
    assert.ok(!(file.warnings ?? []).some((w) => w.code === 'calibration_verify_contradicted'));
  });

  test('not refitted, the contradiction is a warning every command using the file repeats', async () => {
    const path = await calibrationFile('kept.json', 100);
    const o = sizeOptions(path);
    const v = await verifySize(o, await size(o), {
      url: sim.url,
      requests: 20,
      out: join(root, 'kept'),
      noRefit: true,
    });
    assert.equal(v.refitted, false);
    const file = read(path);
    assert.equal(file.points.length, 2, 'not refitted');
    const warning = file.warnings?.find((w) => w.code === 'calibration_verify_contradicted');
    assert.ok(warning, JSON.stringify(file.warnings));
    assert.match(warning.message, /ttft\.p50/);
    // Another command (here sim's engine resolution, which every command shares) says it once.
    const resolved = resolveEngine({ calibration: path });
    const said = resolved.warnings.filter((w) => w.includes('calibration_verify_contradicted'));
    assert.equal(said.length, 1, resolved.warnings.join('\n'));
    // And a later size records it in size.json.
    const again = await size(o);
    assert.ok(again.calibrationWarnings?.some((w) => w.code === 'calibration_verify_contradicted'));
  });
});
