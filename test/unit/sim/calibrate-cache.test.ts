/**
 * `calibrate` from runs the server's prefix cache served in part: the prompts repeated an
 * earlier run's (the three loads against one server), the server said how many tokens
 * each hit, and the replay must start those blocks cached or it fits a slow engine to fast
 * prompts. The "server" is the simulator with hidden constants, measured in virtual time.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { RequestRecord } from '../../../src/record.js';
import { calibrate } from '../../../src/session/calibrate.js';
import {
  type CalibrationPoint,
  fitCalibration,
  pointFromRecords,
  relativeErrors,
  replayedHitShare,
  replayPoint,
  withHitShare,
} from '../../../src/sim/calibrate.js';
import { checkCalibration } from '../../../src/sim/calibrationWarnings.js';
import { EngineCluster } from '../../../src/sim/cluster.js';
import { simulateRun } from '../../../src/sim/virtual.js';
import { tempDir } from '../../helpers/cli.js';
import { HIDDEN, HOLD_ALL_BUT_MFU, l40sEngine } from '../../helpers/perturbed.js';

const truth = l40sEngine({ ...HIDDEN, enablePrefixCaching: true });
const base = l40sEngine({ enablePrefixCaching: true });
const BLOCK = new EngineCluster(truth).config.blockSize;
/** Shares of each prompt an earlier run sent, by request (mean 0.45). */
const SHARES = [0, 0.5, 0.9, 0.4];

/**
 * A closed-loop run on the hidden engine whose warm-up sends the prompts of "an earlier run"
 * and whose measured requests repeat the first SHARES of them, as a server's records: each
 * measured record carries the cached tokens a server reports (usage's cached_tokens).
 */
function measureCached(
  concurrency: number,
  requests: number,
  input: number,
  output: number,
): { point: CalibrationPoint; records: RequestRecord[]; hitTokens: number; repeated: number } {
  let x = 11 + concurrency * 31 + input;
  const spread = (n: number) => {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    return Math.round(n * (0.8 + (0.4 * x) / 0x7fffffff));
  };
  const lengths = Array.from({ length: requests }, () => [spread(input), spread(output)]);
  const shared = lengths.map(([i], k) => Math.floor((SHARES[k % SHARES.length] * i) / BLOCK));
  const records: RequestRecord[] = [];
  const load = { mode: 'closed' as const, concurrency };
  const engine = new EngineCluster(truth);
  // What the hidden engine served each request from its cache, as a server reports it: the
  // earlier run's blocks may have been evicted by then.
  const seqOf = new Map<number, { prefixHitTokens: number }>();
  const add = engine.add.bind(engine);
  engine.add = (input, listener) => {
    const routed = add(input, listener);
    seqOf.set((listener as unknown as { p: { id: number } }).p.id, routed.seq);
    return routed;
  };
  simulateRun({
    engine,
    load,
    requests,
    warmupRequests: requests,
    seed: 1,
    endpoint: 'completions',
    nextRequest: (id) => {
      const [i, o] = lengths[id % requests];
      return { prompt: '', promptWords: i, requestedInputTokens: i, requestedOutputTokens: o };
    },
    // Warm-up request k's blocks are its own; measured request k repeats its first shared[k].
    prefixKeys: (id, _spec, promptTokens) => {
      const k = id % requests;
      return Array.from({ length: Math.floor(promptTokens / BLOCK) }, (_, b) =>
        id >= requests && b < shared[k] ? (k + 1) * 2 ** 21 + b : (id + 1) * 2 ** 21 + b,
      );
    },
    onRecord: (r) => records.push(r),
  });
  for (const r of records) r.cachedInputTokens = seqOf.get(r.id)?.prefixHitTokens ?? 0;
  const hitTokens = engine.replicas.reduce((n, e) => n + e.counters.prefixHitTokens, 0);
  const repeated = shared.reduce((n, b) => n + b * BLOCK, 0);
  const point = pointFromRecords(`c${concurrency} ${input}/${output}`, load, records);
  return { point, records, hitTokens, repeated };
}

const runs = [
  measureCached(1, 6, 32, 256),
  measureCached(1, 4, 4096, 16),
  measureCached(16, 32, 1024, 192),
  measureCached(64, 64, 2048, 128),
  measureCached(128, 256, 512, 96),
];
const cold = (p: CalibrationPoint): CalibrationPoint => ({
  ...p,
  requests: p.requests.map(({ cachedTokens: _c, ...r }) => r),
});

describe('calibrate from runs the prefix cache served in part', () => {
  test("the replay starts each request's reported hit cached: the run's own TTFT, where cold it reads slow", () => {
    for (const { point, records, hitTokens, repeated } of runs) {
      const said = records.reduce((n, r) => n + (r.cachedInputTokens ?? 0), 0);
      // The hidden engine still held what each request repeated, and the records say so.
      assert.equal(said, repeated, point.label);
      assert.equal(hitTokens, said, point.label);
    }
    const { point } = runs[4];
    const warm = relativeErrors(replayPoint(truth, point), point.measured);
    const coldly = relativeErrors(replayPoint(truth, cold(point)), point.measured);
    assert.ok(Math.abs(warm.ttftMs) < 0.02, `replayed with its hits: TTFT ${warm.ttftMs}`);
    assert.ok(coldly.ttftMs > 0.15, `replayed cold: TTFT ${coldly.ttftMs}`);
  });

  test('the fit recovers the hidden constants within their intervals; replayed cold it does not', () => {
    const points = runs.map((r) => r.point);
    const fit = fitCalibration(base, points);
    for (const [key, hidden] of Object.entries(HIDDEN)) {
      const got = fit.fitted[key as keyof typeof HIDDEN];
      assert.ok(got, key);
      assert.ok(
        Math.abs(got.value / hidden - 1) < 0.03 &&
          hidden >= got.value - 2 * got.stdErr &&
          hidden <= got.value + 2 * got.stdErr,
        `${key}: fitted ${got.value} +- ${got.stdErr}, hidden ${hidden}`,
      );
    }
    let coldMfu: { value: number; stdErr: number } | undefined;
    try {
      coldMfu = fitCalibration(base, points.map(cold)).fitted.mfu;
    } catch {
      // Refused as unidentifiable: no constant either.
    }
    assert.ok(
      !coldMfu ||
        HIDDEN.mfu < coldMfu.value - 2 * coldMfu.stdErr ||
        HIDDEN.mfu > coldMfu.value + 2 * coldMfu.stdErr,
      `cold: mfu ${coldMfu?.value} +- ${coldMfu?.stdErr} (hidden ${HIDDEN.mfu})`,
    );
  });

  test('a share reported for the run only is given as whole prompts, first sent first; the warning goes with what the replay had', () => {
    const { point } = runs[2];
    const bare = cold(point);
    const prompt = bare.requests.filter((r) => !r.warmup).reduce((n, r) => n + r.inputTokens, 0);
    const cached = point.requests.reduce((n, r) => n + (r.cachedTokens ?? 0), 0);
    const hitRate = cached / prompt;
    withHitShare(bare, hitRate);
    // Whole prompts, in the order sent, the last in part: repeated prompts hit whole.
    const given = bare.requests.filter((r) => r.cachedTokens !== undefined);
    assert.ok(given.every((r) => !r.warmup));
    assert.equal(
      given.reduce((n, r) => n + (r.cachedTokens ?? 0), 0),
      Math.round(hitRate * prompt),
    );
    assert.deepEqual(
      given.slice(0, -1).map((r) => r.cachedTokens),
      given.slice(0, -1).map((r) => r.inputTokens),
    );
    assert.deepEqual(
      given,
      bare.requests.filter((r) => !r.warmup).slice(0, given.length),
      'the first ones sent',
    );
    const replayed = replayedHitShare(bare, BLOCK);
    // Whole blocks of each request's share: at most a block a request below the rate.
    assert.ok(replayed <= hitRate && replayed > hitRate - (BLOCK * 32) / prompt, `${replayed}`);
    const warned = (replayedHitRate?: number) =>
      checkCalibration({
        fitted: {},
        bounds: () => ({ min: 0, max: 1, floor: 0 }),
        points: [
          {
            label: point.label,
            error: { ttftMs: 0, tpotMs: 0, outputTokPerS: 0 },
            cache: {
              replayShares: false,
              hitRate,
              from: "the server's /metrics",
              ...(replayedHitRate !== undefined ? { replayedHitRate } : {}),
            },
          },
        ],
      }).map((w) => w.code);
    assert.deepEqual(warned(replayed), []);
    assert.deepEqual(warned(undefined), ['calibration_unmodelled_cache_hits']);
  });

  test("calibrate reads each record's cached tokens and no longer warns of hits it replayed", async () => {
    const dir = tempDir('ig-calibrate-cache-');
    const summary = JSON.parse(readFileSync('test/fixtures/report/run/summary.json', 'utf8'));
    const dirs = runs.map(({ point, records }, i) => {
      const run = join(dir, `run${i}`);
      mkdirSync(run);
      writeFileSync(join(run, 'records.jsonl'), records.map((r) => JSON.stringify(r)).join('\n'));
      const measured = point.requests.filter((r) => !r.warmup);
      writeFileSync(
        join(run, 'manifest.json'),
        JSON.stringify({
          plan: { load: point.load },
          windows: { warmupRequests: measured.length },
        }),
      );
      // A run's summary with the figure calibrate reads: usage's cached tokens over the run.
      writeFileSync(
        join(run, 'summary.json'),
        JSON.stringify({
          ...summary,
          load: { ...point.load, meanConcurrency: 1 },
          tokens: {
            ...summary.tokens,
            cachedInput: {
              cached: measured.reduce((n, r) => n + (r.cachedTokens ?? 0), 0),
              ofInput: measured.reduce((n, r) => n + r.inputTokens, 0),
              requests: measured.length,
              source: 'usage',
            },
          },
        }),
      );
      return run;
    });
    // Hits the warning would name were they not replayed (over 5 % of each run's prompts).
    for (const i of [1, 2, 3]) {
      const m = runs[i].point.requests.filter((r) => !r.warmup);
      const rate =
        m.reduce((n, r) => n + (r.cachedTokens ?? 0), 0) / m.reduce((n, r) => n + r.inputTokens, 0);
      assert.ok(rate > 0.3, `${runs[i].point.label}: ${rate}`);
    }
    const result = await calibrate([dirs[1], dirs[2], dirs[3]], {
      flags: HOLD_ALL_BUT_MFU,
      fit: 'mfu',
    });
    const codes = (result.file.warnings ?? []).map((w) => w.code);
    assert.ok(!codes.includes('calibration_unmodelled_cache_hits'), codes.join(', '));
    const mfu = result.file.fitted.mfu?.value;
    assert.ok(
      mfu !== undefined && Math.abs(mfu - HIDDEN.mfu) < 0.02,
      `fitted mfu ${mfu} (hidden ${HIDDEN.mfu}); warnings: ${result.warnings.join('; ')}`,
    );
  });
});
