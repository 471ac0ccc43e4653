/**
 * Issue 56's calibration from outside, with the cache it tripped on: three closed-loop loads of
 * fixed lengths measured in real time against ONE simulator with hidden constants and the same
 * `--prompt-salt`, so the later runs repeat the earlier runs' prompts and hit its prefix cache
 * (it reports the share on /metrics only). The replay starts those hits cached, so the fit finds
 * the compute share and predicts a load measured on a fresh server.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseRunPlan } from '../../src/plan/runPlan.js';
import { calibrate } from '../../src/session/calibrate.js';
import { benchmark } from '../../src/session/run.js';
import { tempDir } from '../helpers/cli.js';
import { startSim } from '../helpers/sim.js';

const HIDDEN = {
  model: 'llama-3-8b',
  gpu: 'l40s',
  mbu: 0.55,
  mfu: 0.4,
  'step-overhead-ms': 4,
  'per-seq-overhead-us': 40,
  'frontend-latency-ms': 6,
};

describe('calibrate from runs that hit one server’s prefix cache', () => {
  test('the fit finds the hidden compute share and predicts a held-out load on a fresh server', async () => {
    const root = tempDir('ig-calibrate-cache-http-');
    const run = async (url: string, concurrency: number, requests: number) => {
      const out = join(root, `c${concurrency}`);
      await benchmark(
        parseRunPlan({
          url,
          concurrency,
          requests,
          inputTokens: '1024',
          outputTokens: '16',
          ignoreEos: true,
          promptSalt: 7,
          out,
        }),
        {},
      );
      return out;
    };
    const sim = await startSim(HIDDEN);
    let runs: string[];
    try {
      runs = [await run(sim.url, 1, 8), await run(sim.url, 4, 16), await run(sim.url, 16, 48)];
    } finally {
      await sim.stop();
    }
    const hit = (dir: string) =>
      JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8')).serverMetrics?.prefixCache
        ?.hitRate as number;
    // The later runs repeated the first ones' prompts: a third to a half of their prompt tokens.
    assert.ok(hit(runs[1]) > 0.3 && hit(runs[2]) > 0.2, `${hit(runs[1])}, ${hit(runs[2])}`);

    const fresh = await startSim(HIDDEN);
    let held: string;
    try {
      held = await run(fresh.url, 8, 24);
    } finally {
      await fresh.stop();
    }
    // Three fixed-length loads pin the shares; the overheads stay at the engine's defaults.
    const options = { flags: { model: 'llama-3-8b', gpu: 'l40s' }, fit: 'mbu,mfu' };
    const fitted = await calibrate(runs, options);
    const mfu = fitted.file.fitted.mfu;
    assert.ok(
      mfu && Math.abs(mfu.value - HIDDEN.mfu) <= 2 * mfu.stdErr,
      `mfu ${mfu?.value} +- ${mfu?.stdErr} (hidden ${HIDDEN.mfu})`,
    );
    const codes = (fitted.file.warnings ?? []).map((w) => w.code);
    assert.ok(!codes.includes('calibration_unmodelled_cache_hits'), codes.join(', '));
    // The held-out load, predicted from the three (leave-one-out of a fit on all four).
    const all = await calibrate([...runs, held], options);
    const error = all.file.points.at(-1)?.leaveOneOut?.error;
    assert.ok(error, 'a prediction of the held-out load');
    assert.ok(Math.abs(error.ttftMs) < 0.25, `TTFT ${error.ttftMs}`);
    assert.ok(Math.abs(error.tpotMs) < 0.1, `TPOT ${error.tpotMs}`);
    assert.ok(Math.abs(error.outputTokPerS) < 0.1, `throughput ${error.outputTokPerS}`);
  });
});
