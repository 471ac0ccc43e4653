/**
 * `size --trace`: the trace is the traffic. Each deployment is the fewest data-parallel replicas
 * that serve the whole replay within the SLOs (one fewer does not, checked by a replay of its
 * own), with the prefix-cache hit rate the simulator measured at that deployment; flags that
 * would set the traffic or the lengths again are refused.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { evaluateThresholds, parseThresholds } from '../../../src/analysis/thresholds.js';
import { SummaryBuilder } from '../../../src/metrics/summary.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import { renderSize, sizeTrafficText } from '../../../src/report/sizeText.js';
import { type SizeOptions, type SizeTraceTraffic, size } from '../../../src/session/size.js';
import { prepareSize } from '../../../src/session/sizeOptions.js';
import { replayTraceVirtual } from '../../../src/session/sizeTrace.js';
import { EngineCluster } from '../../../src/sim/cluster.js';
import { EngineModel } from '../../../src/sim/engineModel.js';
import { resolveEngine } from '../../../src/sim/options.js';
import { traceLoad } from '../../../src/workload/trace.js';
import { chatTrace } from '../../helpers/chatTrace.js';

const FIXTURE = 'test/fixtures/workload/mooncake.jsonl';
const SLO = 'ttft.p99<1500';
const BLOCK = 512;

/** Chats that grow turn by turn at `ratePerS` Poisson arrivals. */
const chatsAt = (n: number, ratePerS: number, seed = 3) =>
  chatTrace(n, {
    seed,
    continueChance: 0.6,
    blockTokens: BLOCK,
    outputTokens: { min: 16, spread: 48 },
    gapMs: (rng) => rng.exponential(1000 / ratePerS),
  });

const entries = chatsAt(240, 12);
const speed = 1;
const options: SizeOptions = {
  model: 'llama-3-8b',
  traffic: {
    mode: 'trace',
    source: 'chat.jsonl',
    speed,
    blockTokens: BLOCK,
    requests: entries.length,
    spanS: entries[entries.length - 1].atMs / 1000,
  },
  trace: entries,
  scenario: {
    name: 'unused',
    input: { kind: 'fixed', value: 1 },
    output: { kind: 'fixed', value: 1 },
  },
  slo: SLO,
  space: {
    gpus: [{ gpu: 'l4' }],
    tps: [1],
    dtypes: [undefined],
    kvCacheDtypes: [undefined],
    maxNumSeqs: [undefined],
    personalities: ['vllm-v1'],
  },
  engine: { maxModelLen: 8192, enablePrefixCaching: true },
};

/** The trace over `dp` replicas of the L4 deployment, judged as size judges it. */
function replay(dp: number): { ok: boolean; hitRate: number | undefined } {
  const r = resolveEngine({
    model: 'llama-3-8b',
    gpu: 'l4',
    tp: 1,
    maxModelLen: 8192,
    enablePrefixCaching: true,
  });
  const engineOptions = r.engine as NonNullable<typeof r.engine>;
  const engine = new EngineCluster(
    Array.from({ length: dp }, () => new EngineModel({ ...engineOptions, dp: 1 })),
  );
  const builder = new SummaryBuilder({ load: traceLoad(entries, { speed }) });
  const run = replayTraceVirtual(engine, {
    entries,
    speed,
    blockTokens: BLOCK,
    onRecord: (rec) => builder.add(rec),
  });
  const summary = builder.build();
  return {
    ok: evaluateThresholds(summary, parseThresholds([SLO])).ok && summary.requests.failed === 0,
    hitRate: run.prefixCacheHitRate,
  };
}

describe('size --trace', () => {
  test('the fewest replicas that serve the whole replay, with the hit rate it ran at', async () => {
    const result = await size({ ...options, traceImpliedHitRate: 0.5 });
    const row = result.deployments[0];
    assert.equal(row.feasible, true, row.reason);
    assert.ok(row.dp > 1, `the trace needs more than one L4 (got ${row.dp})`);
    assert.equal(replay(row.dp).ok, true);
    assert.equal(replay(row.dp - 1).ok, false, 'one replica fewer misses the SLO');
    const hit = replay(row.dp).hitRate;
    assert.ok(hit !== undefined && hit > 0.2, `chats share their history (hit rate ${hit})`);
    assert.equal(row.prefixCacheHitRate, hit);
    assert.equal(result.traceImpliedHitRate, 0.5);
    assert.match(row.binding ?? '', /ttft/);
    // Trials are whole replays: doubling to the first that holds, then bisecting below it.
    assert.ok(result.simulations <= 2 * Math.ceil(Math.log2(row.dp)) + 1);

    const text = renderSize(result, 5, sizeTrafficText(options.traffic));
    assert.match(text, /serve the trace chat\.jsonl \(240 requests over 0\.3 min\)/);
    assert.match(text, /hit rate/);
    assert.match(text, /imply 50\.0% with a cache that never evicts/);
    const html = renderHtmlReport({
      kind: 'size',
      dir: '/tmp/x',
      size: { schemaVersion: 1, traffic: options.traffic, slo: SLO, ...result },
    });
    assert.match(html, /<th[^>]*>hit rate<\/th>/);
    assert.match(html, /<p class="facts">\d+ virtual runs in/);
    assert.ok(html.includes(`${(hit * 100).toFixed(1)}%`));
  });

  test('a trace request over max-model-len rules the deployment out, saying how many', async () => {
    const result = await size({ ...options, engine: { maxModelLen: 2048 } });
    const row = result.deployments[0];
    assert.equal(row.feasible, false);
    assert.match(row.reason ?? '', /^\d+ of 240 trace requests are over max-model-len 2048$/);
  });

  test('a trace without block ids is sized as sharing nothing, and says so', async () => {
    const bare = entries.slice(0, 40).map(({ hashIds: _, ...e }) => e);
    const result = await size({
      ...options,
      trace: bare,
      traffic: { ...(options.traffic as SizeTraceTraffic), requests: bare.length },
    });
    assert.equal(result.deployments[0].prefixCacheHitRate, 0);
    assert.ok(result.warnings.some((w) => /names no prompt blocks .*sharing no prefix/.test(w)));
  });

  test('an SLO that twice the replicas no longer brings closer: ruled out without trying up to --max-dp', async () => {
    const result = await size({ ...options, slo: 'ttft.p99<1' });
    const row = result.deployments[0];
    assert.equal(row.feasible, false);
    const m =
      /^misses the SLO at any number of replicas: (\d+) and (\d+) miss it by about as much/.exec(
        row.reason ?? '',
      );
    assert.ok(m, row.reason);
    assert.equal(Number(m[2]), 2 * Number(m[1]));
    assert.ok(Number(m[2]) < 64 && result.simulations === Math.log2(Number(m[2])) + 1);
  });

  test('an SLO no number of replicas meets: the reason names --max-dp', async () => {
    const result = await size({ ...options, slo: 'ttft.p99<1', maxDp: 2 });
    assert.equal(result.deployments[0].feasible, false);
    assert.match(result.deployments[0].reason ?? '', /even at --max-dp 2 replicas/);
  });
});

describe('size --trace flags', () => {
  const base = { model: 'llama-3-8b', slo: SLO, gpu: 'h100' };

  test('the trace is read into the traffic: its requests, span, speed and block size', () => {
    const p = prepareSize({ ...base, trace: FIXTURE, traceSpeed: '2' });
    assert.deepEqual(p.problems, []);
    assert.deepEqual(p.options?.traffic, {
      mode: 'trace',
      source: FIXTURE,
      speed: 2,
      blockTokens: 512,
      requests: 4,
      spanS: (30535 - 27482) / 1000 / 2,
    });
    assert.equal(p.options?.trace?.length, 4);
    assert.ok(p.options?.traceImpliedHitRate !== undefined);
    // Its entries came out of order: the reader says it sorted them.
    assert.ok(p.notes?.some((n) => /sorted by time/.test(n)));
    // The ids are counted in blocks of --trace-block-tokens: 256 does not fit this trace.
    const wrong = prepareSize({ ...base, trace: FIXTURE, traceBlockTokens: '256' });
    assert.ok(
      wrong.problems.some((m) => /needs 28 of 256 tokens/.test(m)),
      wrong.problems.join(),
    );
  });

  test('--trace-window and --trace-max-gap-s cut the trace as run does', () => {
    const p = prepareSize({ ...base, trace: FIXTURE, traceWindow: '0:2', traceMaxGapS: '0.1' });
    assert.deepEqual(p.problems, []);
    const trace = p.options?.trace ?? [];
    assert.ok(trace.length > 0 && trace.length < 4, `${trace.length}`);
    for (let i = 1; i < trace.length; i++) assert.ok(trace[i].atMs - trace[i - 1].atMs <= 100);
    assert.match(
      prepareSize({ ...base, traceWindow: '0:2' }).problems.join(),
      /--trace-window applies only with --trace/,
    );
    assert.match(
      prepareSize({ ...base, trace: FIXTURE, traceWindow: '2:1' }).problems.join(),
      /--trace-window END must come after START/,
    );
  });

  test('an agentic trace is refused, naming what replays it (not a parse error of each line)', () => {
    const p = prepareSize({ ...base, trace: 'test/fixtures/workload/agent-trace.jsonl' });
    assert.equal(p.options, undefined);
    assert.deepEqual(p.problems, [
      '--trace: test/fixtures/workload/agent-trace.jsonl is an agentic trace (calls that wait for other calls): size replays single requests; run it on a deployment with `run --simulate --trace test/fixtures/workload/agent-trace.jsonl` instead',
    ]);
  });

  test('what would set the traffic, the requests or the lengths again is refused', () => {
    for (const [flag, value, words] of [
      ['rate', '2', /--rate cannot be combined with --trace: the trace sets the traffic/],
      ['users', '2', /--users cannot be combined with --trace/],
      ['requests', '100', /--requests cannot be combined with --trace: .*all of them/],
      ['scenario', 'chat', /--scenario cannot be combined with --trace/],
      ['inputTokens', '100', /--input-tokens cannot be combined with --trace/],
    ] as const) {
      const p = prepareSize({ ...base, trace: FIXTURE, [flag]: value });
      assert.equal(p.options, undefined);
      assert.ok(
        p.problems.some((m) => words.test(m)),
        p.problems.join('\n'),
      );
    }
    assert.match(
      prepareSize({ ...base, rate: '2', traceSpeed: '2' }).problems.join('\n'),
      /--trace-speed applies only with --trace/,
    );
    assert.match(
      prepareSize({ ...base, trace: 'no/such/trace.jsonl' }).problems.join('\n'),
      /^--trace: /,
    );
  });

  test('a library caller: a trace needs its entries, and requests do not apply', async () => {
    await assert.rejects(
      size({ ...options, trace: undefined }),
      /traffic \{ mode: 'trace' \} needs the trace's entries/,
    );
    await assert.rejects(size({ ...options, requests: 100 }), /requests does not apply to a trace/);
  });
});
