/**
 * `infergauge size` against the simulator it searches with: a deployment that cannot start is
 * ruled out, each chosen deployment is the fewest replicas that hold the SLOs (one fewer does
 * not where that loads each replica past the search's resolution, checked by a virtual run of
 * its own), costs follow the price table, the Pareto front is
 * the undominated set, and worker threads give the same answer as one thread.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { evaluateThresholds, parseThresholds } from '../../../src/analysis/thresholds.js';
import { SummaryBuilder } from '../../../src/metrics/summary.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import {
  type SizeOptions,
  type SizeResult,
  size,
  sizeInParallel,
} from '../../../src/session/size.js';
import { prepareSize } from '../../../src/session/sizeOptions.js';
import { EngineCluster } from '../../../src/sim/cluster.js';
import { resolveEngine } from '../../../src/sim/options.js';
import { simulateRun } from '../../../src/sim/virtual.js';
import { sampleLength, streamSeed } from '../../../src/workload/distributions.js';

const SLO = 'ttft.p99<300,itl.p99<40';
const options: SizeOptions = {
  model: 'llama-3-8b',
  traffic: { mode: 'rate', rate: 12 },
  scenario: {
    name: 'test',
    input: { kind: 'uniform', min: 128, max: 512 },
    output: { kind: 'uniform', min: 32, max: 96 },
  },
  slo: SLO,
  space: {
    gpus: [{ gpu: 'l4' }, { gpu: 'l40s' }],
    tps: [1, 2],
    dtypes: [undefined],
    kvCacheDtypes: [undefined],
    maxNumSeqs: [undefined],
    personalities: ['vllm-v1'],
  },
  prices: { l40s: 1.0 },
  engine: { maxModelLen: 2048 },
  requests: 120,
};

/** One replica of a deployment at `rate`: whether it meets the SLO, as size's trials judge it. */
function holds(gpu: string, tp: number, rate: number): boolean {
  const r = resolveEngine({ model: 'llama-3-8b', gpu, tp, maxModelLen: 2048 });
  assert.deepEqual(r.problems, []);
  const load = { mode: 'open' as const, rate, arrival: 'poisson' as const };
  const builder = new SummaryBuilder({ load });
  const seed = 42;
  simulateRun({
    engine: new EngineCluster(r.engine as NonNullable<typeof r.engine>),
    load,
    requests: 120,
    warmupRequests: 12,
    seed,
    endpoint: 'completions',
    nextRequest: (id) => {
      const input = sampleLength(options.scenario.input, streamSeed(seed, 'input'), id);
      return {
        prompt: '',
        promptWords: input,
        requestedInputTokens: input,
        requestedOutputTokens: sampleLength(
          options.scenario.output,
          streamSeed(seed, 'output'),
          id,
        ),
      };
    },
    onRecord: (rec) => builder.add(rec),
  });
  const summary = builder.build();
  return evaluateThresholds(summary, parseThresholds([SLO])).ok && summary.requests.failed === 0;
}

describe('size', () => {
  let result: SizeResult;
  before(async () => {
    result = await size(options);
  });

  test('tries every candidate and rules out the one that cannot start, saying why', async () => {
    assert.equal(result.candidates, 4);
    assert.equal(result.deployments.length, 4);
    // 140 GB of bf16 weights fit neither one 24 GB L4 nor two (TP2): out before any simulation.
    const big = await size({
      ...options,
      model: 'llama-3-70b',
      space: { ...options.space, gpus: [{ gpu: 'l4' }] },
    });
    assert.equal(big.simulations, 0);
    for (const d of big.deployments) {
      assert.equal(d.feasible, false);
      assert.match(d.reason ?? '', /^does not start: /);
    }
    // A vLLM release given to the search reaches its vllm-v1 candidates only.
    const versioned = await size({
      ...options,
      model: 'llama-3-70b',
      space: { ...options.space, gpus: [{ gpu: 'l4' }], personalities: ['vllm-v1', 'sglang'] },
      engine: { ...options.engine, engineVersion: '0.14.0' },
    });
    assert.equal(versioned.deployments.length, 4);
    for (const d of versioned.deployments) assert.match(d.reason ?? '', /^does not start: /);
  });

  test('each chosen deployment holds the SLO with its replicas, and not with one fewer', () => {
    const feasible = result.deployments.filter((d) => d.feasible);
    assert.ok(feasible.length >= 2, JSON.stringify(result.deployments.map((d) => d.reason)));
    for (const d of feasible) {
      assert.ok(d.at && d.at.ttftP99Ms !== null && d.at.ttftP99Ms < 300, `${d.gpu} TP${d.tp}`);
      assert.ok(holds(d.gpu, d.tp, options.traffic.mode === 'rate' ? 12 / d.dp : 0));
      // The fewest replicas to the search's resolution (7 % of one replica's load): one fewer
      // must fail where it loads each replica past that.
      const fewer = d.dp > 1 ? 12 / (d.dp - 1) : undefined;
      if (fewer !== undefined && fewer > (d.capacityPerReplica as number) * 1.08) {
        assert.equal(holds(d.gpu, d.tp, fewer), false, `${d.gpu} TP${d.tp} DP${d.dp}`);
      }
      assert.equal(d.gpus, d.dp * d.tp);
    }
  });

  test('costs from the price table; ranked cheapest first; unpriced GPUs said and ranked after', () => {
    const l40s = result.deployments.filter((d) => d.feasible && d.gpu === 'l40s');
    for (const d of l40s) {
      assert.equal(d.costPerHour, d.gpus * 1.0);
      // 12 req/s of 32-96 output tokens (mean 64), as offered.
      const tokensPerHour = 12 * 64 * 3600;
      assert.ok(
        Math.abs(
          (d.costPerMillionOutputTokens ?? 0) - ((d.costPerHour as number) / tokensPerHour) * 1e6,
        ) < 1e-9,
      );
    }
    const feasible = result.deployments.filter((d) => d.feasible);
    const costs = feasible.map((d) => d.costPerHour ?? Number.POSITIVE_INFINITY);
    assert.deepEqual(
      costs,
      [...costs].sort((a, b) => a - b),
    );
    if (feasible.some((d) => d.gpu === 'l4'))
      assert.match(result.warnings.join('\n'), /no price for l4/);
  });

  test('the Pareto front is exactly the priced deployments no other is both cheaper and faster than', () => {
    const f = result.deployments.filter((d) => d.feasible);
    const priced = f.filter((d) => d.costPerHour !== undefined);
    assert.ok(priced.length > 0, 'the price table prices some deployment');
    for (const d of f) {
      if (d.costPerHour === undefined) {
        assert.equal(
          d.pareto,
          false,
          `${d.gpu} TP${d.tp} has no price, so no place on a $/h front`,
        );
        continue;
      }
      const cost = d.costPerHour;
      const dominated = priced.some(
        (o) =>
          o !== d &&
          (o.costPerHour as number) <= cost &&
          (o.at?.ttftP99Ms ?? 0) <= (d.at?.ttftP99Ms ?? 0) &&
          ((o.costPerHour as number) < cost || (o.at?.ttftP99Ms ?? 0) < (d.at?.ttftP99Ms ?? 0)),
      );
      assert.equal(d.pareto, !dominated);
    }
    const cheapest = priced.reduce((a, b) =>
      (a.costPerHour as number) <= (b.costPerHour as number) ? a : b,
    );
    assert.ok(
      priced.some((d) => d.pareto && d.costPerHour === cheapest.costPerHour),
      'the cheapest deployment is on the front',
    );
  });

  test('an SLO no deployment can meet rules every one out, at light load', async () => {
    const none = await size({
      ...options,
      slo: 'ttft.p99<1',
      space: { ...options.space, gpus: [{ gpu: 'l40s' }], tps: [1] },
    });
    assert.equal(none.deployments.filter((d) => d.feasible).length, 0);
    assert.match(none.deployments[0].reason ?? '', /misses the SLO even at light load: ttft\.p99/);
  });

  test('worker threads find the same deployments as one thread', async () => {
    const parallel = await sizeInParallel(
      { ...options, space: { ...options.space, tps: [1, 2, 4] } },
      2,
    );
    const single = await size({ ...options, space: { ...options.space, tps: [1, 2, 4] } });
    const key = (r: typeof single) =>
      r.deployments.map((d) => [d.gpu, d.tp, d.dp, d.feasible, d.at?.ttftP99Ms]);
    assert.deepEqual(key(parallel), key(single));
    assert.equal(parallel.simulations, single.simulations);
  });

  test('sizes sessions in concurrent sessions; the prefix cache, which keeps their history, cuts the replicas', async () => {
    // Turn k re-sends the system prompt and every earlier turn (up to 1,600 tokens); without
    // the cache each turn prefills all of it, with it only the new message.
    const sessions: SizeOptions = {
      ...options,
      traffic: { mode: 'users', users: 32, sessions: true },
      scenario: {
        name: 'multi-turn',
        input: { kind: 'fixed', value: 128 },
        output: { kind: 'fixed', value: 128 },
        session: {
          turns: { kind: 'fixed', value: 4 },
          thinkTimeMs: { kind: 'fixed', value: 500 },
          history: 'actual',
          systemPromptTokens: 1024,
        },
      },
      slo: 'ttft.p99<250',
      space: { ...options.space, gpus: [{ gpu: 'l40s' }], tps: [1] },
      engine: { maxModelLen: 4096, enablePrefixCaching: false },
    };
    const cold = (await size(sessions)).deployments[0];
    const warm = (
      await size({ ...sessions, engine: { maxModelLen: 4096, enablePrefixCaching: true } })
    ).deployments[0];
    assert.ok(cold.feasible && warm.feasible, `${cold.reason} / ${warm.reason}`);
    assert.ok(
      (warm.capacityPerReplica as number) >= 2 * (cold.capacityPerReplica as number),
      `${warm.capacityPerReplica} vs ${cold.capacityPerReplica} sessions per replica`,
    );
    assert.ok(warm.dp < cold.dp);
    assert.ok(cold.at && cold.at.ttftP99Ms !== null && cold.at.ttftP99Ms < 250);
  });

  test('report.html: the ranked table, the cost/latency chart, the ruled out; names escaped', () => {
    const rows = result.deployments.map((d, i) => (i === 0 ? { ...d, gpu: '<b>x</b>' } : d));
    const html = renderHtmlReport({
      kind: 'size',
      dir: '/tmp/sizing',
      size: { schemaVersion: 1, ...result, deployments: rows, traffic: options.traffic, slo: SLO },
    });
    const feasible = result.deployments.filter((d) => d.feasible).length;
    assert.match(html, new RegExp(`${feasible} of 4 deployments serve 12.00 req/s`));
    assert.match(html, /data-section="size"[\s\S]*<svg/);
    assert.match(html, /data-section="ruled-out"/);
    assert.ok(!html.includes('<b>x</b>') && html.includes('&lt;b&gt;x&lt;/b&gt;'));
  });

  test('flags: every bad one named with its fix; good ones read into options', () => {
    const bad = prepareSize({
      model: 'llama-3-8b',
      rate: 'x',
      users: undefined,
      tp: '1,a',
      slo: undefined,
    });
    assert.equal(bad.options, undefined);
    assert.deepEqual(
      bad.problems.map((p) => p.split(' ')[0]),
      ['--rate', '--slo', '--gpu', '--tp'],
    );
    const both = prepareSize({ model: 'm', rate: '1', users: '2', slo: 'ttft.p99<1', gpu: 'h100' });
    assert.match(both.problems.join('\n'), /--rate .*, --users .* or --trace .*one of them/);
    const good = prepareSize({
      model: 'llama-3-8b',
      users: '32',
      slo: 'ttft.p99<500',
      gpu: 'h100,l40s',
      maxNumSeqs: 'default,128',
      dtype: 'auto',
      top: '3',
    });
    assert.deepEqual(good.problems, []);
    assert.deepEqual(good.options?.traffic, { mode: 'users', users: 32 });
    assert.deepEqual(good.options?.space.maxNumSeqs, [undefined, 128]);
    assert.deepEqual(good.options?.space.tps, [1, 2, 4, 8]);
    assert.deepEqual(good.options?.space.dtypes, [undefined]);
    assert.equal(good.top, 3);
    const release = (engineVersion: string) =>
      prepareSize({ model: 'm', users: '1', slo: 'ttft.p99<1', gpu: 'h100', engineVersion });
    assert.equal(release('0.14.1').options?.engine?.engineVersion, '0.14.1');
    assert.match(release('new').problems.join('\n'), /--engine-version new is not a release/);
  });

  test('refuses goodput SLOs without the per-request SLO they count with', async () => {
    await assert.rejects(() => size({ ...options, slo: 'sloAttainment>=0.9' }), /--request-slo/);
  });
});
