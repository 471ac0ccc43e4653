/**
 * `infergauge compare` and CI thresholds: bootstrap intervals checked against a naive bootstrap
 * and against known truth, verdicts with their direction, the comparability check, sweeps,
 * the terminal / Markdown / HTML / JSON outputs (escaped), and exit codes. Runs are synthetic
 * records with known distributions, or the simulator in virtual time (in process).
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  blockLength,
  bootstrapRun,
  checkComparable,
  compareMetrics,
  compareSamples,
  compareUnits,
  describeConfiguredLoad,
  type MetricComparison,
  pairUnits,
  type RunSample,
  type RunUnit,
  sampleRecords,
  verdictOf,
} from '../../../src/analysis/compare.js';
import {
  evaluateThresholds,
  evaluateThresholdsOnPoints,
  parseThreshold,
  parseThresholds,
  ThresholdError,
} from '../../../src/analysis/thresholds.js';
import { compareCommand } from '../../../src/cli/compare.js';
import { EXIT } from '../../../src/errors.js';
import type { LoadSpec } from '../../../src/load.js';
import { findGpuPreset } from '../../../src/memory/hardware.js';
import { findModelPreset } from '../../../src/memory/model.js';
import { percentileOfSorted } from '../../../src/metrics/distribution.js';
import { type RunSummary, summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import type { CompareReport } from '../../../src/report/compare.js';
import { createRng, type Rng } from '../../../src/rng.js';
import { EngineModel } from '../../../src/sim/engineModel.js';
import { simulateRun } from '../../../src/sim/virtual.js';
import {
  parseLengthDistribution,
  sampleLength,
  streamSeed,
} from '../../../src/workload/distributions.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';
import { REPO } from '../../../tools/repo.js';
import { tempDir } from '../../helpers/cli.js';

const FIXTURES = join(REPO, 'test/fixtures/compare/');

// ---------------------------------------------------------------------------------------------
// Synthetic runs with known distributions.
// ---------------------------------------------------------------------------------------------

function gaussian(rng: Rng): number {
  return Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
}

interface Synthetic {
  requests?: number;
  concurrency?: number;
  /** Log-normal TTFT: median (ms) and sigma of its log. */
  ttftMedian?: number;
  ttftSigma?: number;
  /** Each request decodes at one ITL level (all its gaps equal): log-normal over requests. */
  itlMedian?: number;
  itlSigma?: number;
  outputTokens?: number;
  /** Tokens per stream event (a server that packs tokens). */
  tokensPerEvent?: number;
  failRate?: number;
  requestedInput?: number;
}

/**
 * A closed loop of `concurrency` slots: each request starts when a slot frees. TTFT and the
 * request's ITL level are drawn independently per request, so the truth is known: the
 * population median TTFT is `ttftMedian`, its p99 ttftMedian * exp(2.3263 sigma), and (equal
 * tokens per request) the per-token ITL median is `itlMedian`.
 */
function syntheticRecords(seed: number, o: Synthetic = {}): RequestRecord[] {
  const rng = createRng(seed);
  const n = o.requests ?? 300;
  const slots = new Array<number>(o.concurrency ?? 2).fill(0);
  const tokens = o.outputTokens ?? 21;
  const perEvent = o.tokensPerEvent ?? 1;
  const records: RequestRecord[] = [];
  for (let id = 0; id < n; id++) {
    const slot = slots.indexOf(Math.min(...slots));
    const sentUs = Math.round(slots[slot] * 1000);
    const ttftUs = Math.max(
      1,
      Math.round((o.ttftMedian ?? 100) * 1000 * Math.exp((o.ttftSigma ?? 0.3) * gaussian(rng))),
    );
    const levelUs = Math.max(
      1,
      Math.round((o.itlMedian ?? 10) * 1000 * Math.exp((o.itlSigma ?? 0.2) * gaussian(rng))),
    );
    const base = {
      id,
      phase: 'measure' as const,
      scheduledAt: sentUs / 1000,
      sentAt: sentUs / 1000,
      requestedInputTokens: o.requestedInput ?? 128,
      requestedOutputTokens: tokens,
    };
    if (rng.next() < (o.failRate ?? 0)) {
      const endUs = sentUs + 5000;
      records.push({
        ...base,
        endAt: endUs / 1000,
        status: 500,
        outputTokens: 0,
        outputTokensSource: 'server',
        events: { dtUs: [], tokens: [], contentChars: [] },
        error: { kind: 'http_5xx', message: 'HTTP 500', status: 500 },
      });
      slots[slot] = endUs / 1000;
      continue;
    }
    const dtUs = [ttftUs];
    const eventTokens = [1];
    for (let left = tokens - 1; left > 0; left -= perEvent) {
      const k = Math.min(perEvent, left);
      dtUs.push(levelUs * k);
      eventTokens.push(k);
    }
    const lastUs = sentUs + dtUs.reduce((a, b) => a + b, 0);
    records.push({
      ...base,
      firstTokenAt: (sentUs + ttftUs) / 1000,
      firstContentAt: (sentUs + ttftUs) / 1000,
      lastTokenAt: lastUs / 1000,
      endAt: lastUs / 1000,
      status: 200,
      outputTokens: tokens,
      outputTokensSource: 'server',
      events: { dtUs, tokens: eventTokens, contentChars: eventTokens.map((k) => 4 * k) },
    });
    slots[slot] = lastUs / 1000;
  }
  return records;
}

const CLOSED = (concurrency: number): LoadSpec => ({ mode: 'closed', concurrency });

function unit(records: RequestRecord[], over: Partial<RunUnit> = {}): RunUnit {
  return {
    label: 'run',
    scenario: 'chat',
    load: CLOSED(2),
    workload: {},
    sample: sampleRecords(records),
    ...over,
  };
}

const byId = (ms: MetricComparison[], id: string) => {
  const m = ms.find((x) => x.id === id);
  assert.ok(m, `no metric ${id}`);
  return m;
};

// ---------------------------------------------------------------------------------------------
// A naive block bootstrap, for reference: expand, sort, take numpy's percentile.
// ---------------------------------------------------------------------------------------------

function naiveReplicates(
  records: RequestRecord[],
  sample: RunSample,
  q: number,
  values: (r: RequestRecord) => { value: number; weight: number }[],
  resamples: number,
  seed: number,
): Float64Array {
  const concurrency = sample.busyMs / sample.durationMs;
  const b = blockLength(records.length, concurrency);
  const bySend = [...records].sort((x, y) => x.sentAt - y.sentAt || x.id - y.id);
  const blocks: { value: number; weight: number }[][] = [];
  for (let i = 0; i < bySend.length; i += b) {
    blocks.push(bySend.slice(i, i + b).flatMap(values));
  }
  const rng = createRng(seed);
  const out = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    const expanded: number[] = [];
    for (let i = 0; i < blocks.length; i++) {
      for (const { value, weight } of blocks[rng.int(blocks.length)]) {
        for (let k = 0; k < weight; k++) expanded.push(value);
      }
    }
    out[r] = percentileOfSorted(Float64Array.from(expanded).sort(), q);
  }
  return out;
}

function quantiles(x: Float64Array): number[] {
  const s = Float64Array.from(x).sort();
  return [2.5, 50, 97.5].map((q) => percentileOfSorted(s, q));
}

describe('bootstrap (pure)', () => {
  test('resampled percentiles match a naive block bootstrap (per request, and per token with multi-token events)', () => {
    const records = syntheticRecords(11, {
      requests: 160,
      concurrency: 3,
      outputTokens: 13,
      tokensPerEvent: 3,
      itlSigma: 0.4,
    });
    const sample = sampleRecords(records);
    const metrics = compareMetrics().filter((m) =>
      ['ttft.p50', 'ttft.p99', 'itl.p50', 'itl.p99', 'e2e.p50'].includes(m.id),
    );
    const fast = bootstrapRun(sample, 'closed', metrics, { resamples: 3000, seed: 1 }, 'x');
    const perRequest = (key: 'ttft' | 'e2e') => (r: RequestRecord) => [
      {
        value: key === 'ttft' ? (r.firstTokenAt as number) - r.sentAt : r.endAt - r.sentAt,
        weight: 1,
      },
    ];
    const perToken = (r: RequestRecord) => {
      const out: { value: number; weight: number }[] = [];
      let at = 0;
      let previous = -1;
      r.events.dtUs.forEach((dt, i) => {
        at += dt;
        const k = r.events.tokens[i];
        if (previous >= 0) out.push({ value: (at - previous) / 1000 / k, weight: k });
        previous = at;
      });
      return out;
    };
    const cases = [
      ['ttft.p50', 50, perRequest('ttft')],
      ['ttft.p99', 99, perRequest('ttft')],
      ['e2e.p50', 50, perRequest('e2e')],
      ['itl.p50', 50, perToken],
      ['itl.p99', 99, perToken],
    ] as const;
    for (const [id, q, values] of cases) {
      const got = fast.get(id);
      assert.ok(got, id);
      // The point estimate is numpy's percentile of the expanded values, exactly.
      const all = Float64Array.from(
        records.flatMap(values).flatMap(({ value, weight }) => Array(weight).fill(value)),
      ).sort();
      assert.ok(Math.abs(got.value - percentileOfSorted(all, q)) < 1e-9, `${id} point`);
      const naive = naiveReplicates(records, sample, q, values, 3000, 99);
      const [lo, mid, hi] = quantiles(got.replicates);
      const [nlo, nmid, nhi] = quantiles(naive);
      const width = nhi - nlo;
      for (const [a, b, what] of [
        [lo, nlo, '2.5%'],
        [mid, nmid, '50%'],
        [hi, nhi, '97.5%'],
      ] as const) {
        assert.ok(
          Math.abs(a - b) <= 0.12 * width + 1e-9,
          `${id} ${what} of the replicates: ${a} vs naive ${b} (width ${width})`,
        );
      }
    }
  });

  test('intervals contain the true difference in most of 40 seeded experiments', () => {
    // B: TTFT 10 % slower, ITL 5 % slower, over known log-normals.
    const z99 = 2.3263;
    const truth = {
      'ttft.p50': 100 * 0.1,
      'ttft.p99': 100 * Math.exp(0.3 * z99) * 0.1,
      'itl.p50': 10 * 0.05,
    };
    const covered: Record<string, number> = { 'ttft.p50': 0, 'ttft.p99': 0, 'itl.p50': 0 };
    const seeds = 40;
    for (let s = 1; s <= seeds; s++) {
      const a = sampleRecords(syntheticRecords(1000 + 2 * s, { requests: 400 }));
      const b = sampleRecords(
        syntheticRecords(1001 + 2 * s, { requests: 400, ttftMedian: 110, itlMedian: 10.5 }),
      );
      const result = compareSamples(a, b, { resamples: 500, seed: s });
      for (const [id, delta] of Object.entries(truth)) {
        const ci = byId(result, id).ci;
        assert.ok(ci, id);
        if (ci.low <= delta && delta <= ci.high) covered[id]++;
      }
    }
    // Nominal 95 %: at least 34 of 40 (p50) and 32 of 40 (the p99 of 400 requests).
    assert.ok(covered['ttft.p50'] >= 34, `TTFT p50 covered ${covered['ttft.p50']}/40`);
    assert.ok(covered['itl.p50'] >= 34, `ITL p50 covered ${covered['itl.p50']}/40`);
    assert.ok(covered['ttft.p99'] >= 32, `TTFT p99 covered ${covered['ttft.p99']}/40`);
  });

  test('verdicts follow each metric direction: lower latency, higher throughput, fewer failures', () => {
    // Decode dominates E2E (40 gaps): B's faster decode outweighs its slower first token.
    const a = sampleRecords(syntheticRecords(1, { requests: 500, outputTokens: 41 }));
    const b = sampleRecords(
      syntheticRecords(2, {
        requests: 500,
        outputTokens: 41,
        ttftMedian: 130,
        itlMedian: 6,
        failRate: 0.08,
      }),
    );
    const result = compareSamples(a, b);
    const verdicts = Object.fromEntries(result.map((m) => [m.id, m.verdict]));
    assert.deepEqual(verdicts, {
      'ttft.p50': 'worse',
      'ttft.p99': 'worse',
      'tpot.p50': 'better',
      'tpot.p99': 'better',
      'itl.p50': 'better',
      'itl.p99': 'better',
      'e2e.p50': 'better',
      'e2e.p99': 'better',
      'outputSpeed.p50': 'better',
      'outputSpeed.p1': 'better',
      outputThroughput: 'better',
      requestThroughput: 'better',
      failureRate: 'worse',
    });
    const ttft = byId(result, 'ttft.p50');
    assert.ok(ttft.delta !== null && ttft.delta > 0 && ttft.relative !== null);
    assert.ok(ttft.ci && ttft.ci.low > 0 && ttft.ci.relativeLow > 0, 'CI above 0');
    assert.match(ttft.why, /excludes 0/);
    // Point estimates equal the summary's numbers.
    const summary = summarize(syntheticRecords(1, { requests: 500, outputTokens: 41 }), {
      load: CLOSED(2),
    });
    assert.ok(
      Math.abs((byId(result, 'ttft.p99').baseline as number) - summary.latency.ttftMs.p99) < 1e-9,
    );
    assert.ok(
      Math.abs((byId(result, 'itl.p50').baseline as number) - summary.latency.itlMs.p50) < 1e-9,
    );
    assert.ok(
      Math.abs(
        (byId(result, 'outputThroughput').baseline as number) - summary.throughput.outputTokensPerS,
      ) < 1e-6,
    );
    assert.ok(
      Math.abs(
        (byId(result, 'requestThroughput').baseline as number) - summary.throughput.requestsPerS,
      ) < 1e-9,
    );
  });

  test('the same distribution with another seed: no significant change', () => {
    const a = sampleRecords(syntheticRecords(21, { requests: 600 }));
    const b = sampleRecords(syntheticRecords(22, { requests: 600 }));
    const result = compareSamples(a, b);
    for (const m of result.filter((x) => x.id.endsWith('.p50'))) {
      assert.equal(m.verdict, 'no_change', `${m.id}: ${m.why}`);
    }
    assert.ok(result.filter((m) => m.verdict !== 'no_change').length <= 1, 'at most one flag');
    // Deterministic for a seed.
    assert.deepEqual(
      compareSamples(a, b, { seed: 5 }).map((m) => m.ci),
      compareSamples(a, b, { seed: 5 }).map((m) => m.ci),
    );
  });

  test('the verdict rule: CI must exclude 0 and the change must reach the practical threshold', () => {
    const lower = { better: 'lower' as const, practical: { relative: 0.01 } };
    assert.equal(verdictOf(lower, -5, -0.05, { low: -7, high: -3 }, '1 %').verdict, 'better');
    assert.equal(verdictOf(lower, 5, 0.05, { low: 3, high: 7 }, '1 %').verdict, 'worse');
    assert.equal(verdictOf(lower, -5, -0.05, { low: -7, high: 1 }, '1 %').verdict, 'no_change');
    const small = verdictOf(lower, -0.5, -0.005, { low: -0.7, high: -0.3 }, '1 %');
    assert.equal(small.verdict, 'no_change');
    assert.match(small.why, /under 1 %/);
    const higher = { better: 'higher' as const, practical: { relative: 0.01 } };
    assert.equal(verdictOf(higher, 5, 0.05, { low: 3, high: 7 }, '1 %').verdict, 'better');
    const absolute = { better: 'lower' as const, practical: { absolute: 0.001 } };
    assert.equal(
      verdictOf(absolute, 0.02, Infinity, { low: 0.01, high: 0.03 }, '1 %').verdict,
      'worse',
    );
  });

  test('a metric one run lacks is n/a; one-token answers have no TPOT', () => {
    const a = sampleRecords(syntheticRecords(3, { outputTokens: 1 }));
    const b = sampleRecords(syntheticRecords(4, { outputTokens: 1 }));
    const result = compareSamples(a, b, { resamples: 200 });
    assert.equal(byId(result, 'tpot.p50').verdict, 'n/a');
    assert.equal(byId(result, 'itl.p99').verdict, 'n/a');
    assert.notEqual(byId(result, 'ttft.p50').verdict, 'n/a');
  });

  test('blocks: as long as the concurrency, at least the cube root, 20 to 4,096 blocks', () => {
    assert.equal(blockLength(1000, 16), 16);
    assert.equal(blockLength(1000, 1), 10);
    assert.equal(blockLength(100, 16), 5);
    assert.equal(blockLength(1_000_000, 4), 245);
    assert.equal(blockLength(1, 1), 1);
  });
});

describe('comparability (pure)', () => {
  const records = syntheticRecords(5);
  test('different loads are refused with the reason; --force compares and keeps it', () => {
    const a = unit(records, { load: CLOSED(16) });
    const b = unit(records, { load: CLOSED(32) });
    assert.deepEqual(checkComparable(a, b).differences, [
      'different load: A at 16 concurrent requests, B at 32',
    ]);
    const refused = compareUnits(a, b);
    assert.equal(refused.refused, true);
    assert.equal(refused.metrics.length, 0);
    const forced = compareUnits(a, b, { force: true, resamples: 200 });
    assert.equal(forced.refused, false);
    assert.equal(forced.forced, true);
    assert.equal(forced.metrics.length, compareMetrics().length);
    const open: LoadSpec = { mode: 'open', rate: 4, arrival: 'poisson' };
    assert.match(
      checkComparable(a, unit(records, { load: open })).differences[0],
      /closed loop \(16 concurrent requests\), B a open loop \(4 requests\/s poisson arrivals\)/,
    );
    assert.match(
      checkComparable(
        unit(records, { load: open }),
        unit(records, { load: { ...open, arrival: 'constant' } }),
      ).differences.join(),
      /different arrivals: A poisson, B constant/,
    );
  });

  test('different workloads are refused: requested lengths, endpoint, scenario lengths', () => {
    const a = unit(records);
    const longer = unit(syntheticRecords(6, { outputTokens: 41 }));
    assert.match(
      checkComparable(a, longer).differences.join(),
      /requested output tokens per request A 21, B 41/,
    );
    const prompts = unit(syntheticRecords(6, { requestedInput: 512 }));
    assert.match(checkComparable(a, prompts).differences.join(), /requested input tokens/);
    const chat = unit(records, {
      workload: { endpoint: 'chat', lengths: '128 in / 21 out tokens' },
    });
    const completions = unit(records, {
      workload: { endpoint: 'completions', lengths: '128 in / 21 out tokens' },
    });
    assert.deepEqual(checkComparable(chat, completions).differences, [
      'different endpoint: A chat, B completions',
    ]);
    // Model and server differences are what a comparison is for: notes, not refusals.
    const other = checkComparable(
      unit(records, { workload: { model: 'm1', server: 'H100' } }),
      unit(syntheticRecords(7), { workload: { model: 'm2', server: 'H200' } }),
    );
    assert.deepEqual(other.differences, []);
    assert.ok(other.notes.includes('model: A m1, B m2'));
  });

  test('pairing: single runs together, sweep levels by scenario and level, the rest listed', () => {
    const u = (scenario: string, c: number) => unit(records, { scenario, load: CLOSED(c) });
    const single = pairUnits([u('chat', 4)], [u('default', 8)]);
    assert.equal(single.pairs.length, 1);
    const sweep = pairUnits(
      [u('chat', 1), u('chat', 4), u('rag', 4)],
      [u('chat', 4), u('chat', 16)],
    );
    assert.deepEqual(
      sweep.pairs.map(([a, b]) => [a.scenario, a.load, b.load]),
      [['chat', CLOSED(4), CLOSED(4)]],
    );
    assert.deepEqual(sweep.onlyBaseline, ['chat c1', 'rag c4']);
    assert.deepEqual(sweep.onlyCandidate, ['chat c16']);
    // Scenario folders at different loads are paired, so the refusal can say why.
    const scenarios = pairUnits([u('chat', 4), u('rag', 4)], [u('chat', 8), u('rag', 4)]);
    assert.equal(scenarios.pairs.length, 2);
  });
});

// ---------------------------------------------------------------------------------------------
// Run directories: the simulator in virtual time, written as `infergauge run` writes them.
// ---------------------------------------------------------------------------------------------

interface SimOptions {
  gpu?: string;
  concurrency?: number;
  rate?: number;
  requests?: number;
  seed?: number;
  input?: string;
  output?: string;
  scenario?: string;
  endpoint?: 'chat' | 'completions';
  manifest?: boolean;
}

function simulate(dir: string, o: SimOptions = {}): void {
  const gpu = o.gpu ?? 'h100';
  const engine = new EngineModel({
    model: findModelPreset('llama-3-8b') as NonNullable<ReturnType<typeof findModelPreset>>,
    gpu: findGpuPreset(gpu) as NonNullable<ReturnType<typeof findGpuPreset>>,
  });
  const load: LoadSpec =
    o.rate !== undefined
      ? { mode: 'open', rate: o.rate, arrival: 'poisson' }
      : CLOSED(o.concurrency ?? 16);
  const seed = o.seed ?? 42;
  const input = parseLengthDistribution(o.input ?? '256');
  const output = parseLengthDistribution(o.output ?? '128');
  const records: RequestRecord[] = [];
  simulateRun({
    engine,
    load,
    requests: o.requests ?? 300,
    warmupRequests: 0,
    seed,
    endpoint: o.endpoint ?? 'chat',
    nextRequest: (id) =>
      createSyntheticWorkload({
        inputTokens: sampleLength(input, streamSeed(seed, 'input'), id),
        outputTokens: sampleLength(output, streamSeed(seed, 'output'), id),
        seed,
      })(id),
    onRecord: (r) => records.push(r),
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'records.jsonl'), records.map((r) => `${JSON.stringify(r)}\n`).join(''));
  writeFileSync(join(dir, 'summary.json'), JSON.stringify(summarize(records, { load }), null, 2));
  if (o.manifest === false) return;
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify({
      schemaVersion: 1,
      model: 'sim-llama-3-8b',
      server: { virtualTime: true, simulator: `Llama-3-8B bf16 on 1x ${gpu}; virtual time` },
      workload: {
        scenario: `${o.scenario ?? 'default'}: ${o.input ?? '256'} in / ${o.output ?? '128'} out tokens`,
        tokenizer: 'words',
      },
      plan: {
        backend: 'openai',
        endpoint: o.endpoint ?? 'chat',
        load,
        tokenizer: 'words',
        temperature: 0,
        ignoreEos: false,
        seed,
      },
    }),
  );
}

/** A sweep directory as `infergauge sweep` writes it: sweep.json and <scenario>/c<level>/. */
function simulateSweep(dir: string, levels: number[], o: SimOptions = {}): void {
  const scenario = o.scenario ?? 'chat';
  for (const level of levels) {
    simulate(join(dir, scenario, `c${level}`), {
      ...o,
      concurrency: level,
      requests: Math.max(100, 4 * level),
      manifest: false,
    });
  }
  writeFileSync(
    join(dir, 'sweep.json'),
    JSON.stringify({
      schemaVersion: 1,
      target: `sim-llama-3-8b on ${o.gpu ?? 'h100'}; virtual time`,
      mode: 'concurrency',
      scenarios: [{ scenario, points: [], recommendations: [], warnings: [] }],
    }),
  );
}

interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

async function compare(...args: string[]): Promise<Captured> {
  const c = { code: -1, stdout: '', stderr: '' };
  await compareCommand({
    out: (t) => {
      c.stdout += t;
    },
    err: (t) => {
      c.stderr += t;
    },
    color: false,
    exit: (code) => {
      c.code = code;
    },
  }).parseAsync(args, { from: 'user' });
  return c;
}

async function compareJson(...args: string[]): Promise<{ code: number; report: CompareReport }> {
  const r = await compare(...args, '--json');
  return { code: r.code, report: JSON.parse(r.stdout) as CompareReport };
}

describe('infergauge compare (simulator in virtual time)', () => {
  const root = tempDir('ig-compare-');
  const h100 = join(root, 'h100');
  const h200 = join(root, 'h200');
  simulate(h100, { output: 'poisson:128', seed: 1 });
  simulate(h200, { output: 'poisson:128', seed: 1, gpu: 'h200' });

  test('H200 against H100: decode faster, throughput higher; the table says so', async () => {
    const r = await compare(h100, h200, '--resamples', '500');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /A \(baseline\): .*h100 +B: .*h200/);
    assert.match(r.stdout, /Load: both at 16 concurrent requests \(measured \d+\.\d \/ \d+\.\d\)/);
    assert.match(r.stdout, /TPOT p50 \(ms\).*\u2212.*better/);
    assert.match(r.stdout, /output throughput \(tok\/s\).*\+.*better/);
    assert.match(r.stdout, /note: server: A .*h100.*, B .*h200/);
    const { report } = await compareJson(h100, h200, '--resamples', '500');
    const metrics = report.candidates[0].pairs[0].metrics;
    for (const id of ['tpot.p50', 'itl.p50', 'e2e.p50', 'outputSpeed.p50', 'outputThroughput']) {
      assert.equal(byId(metrics, id).verdict, 'better', id);
    }
    assert.equal(byId(metrics, 'failureRate').verdict, 'no_change');
    assert.ok((byId(metrics, 'tpot.p50').delta as number) < 0);
    assert.ok((byId(metrics, 'outputThroughput').delta as number) > 0);
    // The baseline's numbers are its summary's.
    const summary = JSON.parse(readFileSync(join(h100, 'summary.json'), 'utf8')) as RunSummary;
    assert.ok(
      Math.abs((byId(metrics, 'ttft.p99').baseline as number) - summary.latency.ttftMs.p99) < 1e-9,
    );
  });

  test('the same deployment with another seed: no significant change in the medians', async () => {
    const again = join(root, 'h100-seed2');
    simulate(again, { output: 'poisson:128', seed: 2 });
    const { code, report } = await compareJson(h100, again);
    assert.equal(code, 0);
    const pair = report.candidates[0].pairs[0];
    assert.equal(pair.refused, false, pair.differences.join());
    for (const m of pair.metrics.filter((x) => x.id.endsWith('.p50'))) {
      assert.equal(m.verdict, 'no_change', `${m.id}: ${m.why}`);
    }
  });

  test('different loads: refused with the reason (exit 2) unless --force', async () => {
    const c32 = join(root, 'c32');
    simulate(c32, { output: 'poisson:128', seed: 1, concurrency: 32 });
    const refused = await compare(h100, c32);
    assert.equal(refused.code, 2);
    assert.match(
      refused.stdout,
      /not comparable: different load: A at 16 concurrent requests, B at 32/,
    );
    assert.match(refused.stderr, /--force/);
    const forced = await compare(h100, c32, '--force', '--resamples', '200');
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout, /warning: different load: A at 16 concurrent requests, B at 32/);
    assert.match(forced.stdout, /A at 16 concurrent requests \(measured concurrency .*\), B at 32/);
    const longer = join(root, 'out256');
    simulate(longer, { output: '256', seed: 1 });
    const workload = await compare(h100, longer);
    assert.equal(workload.code, 2);
    assert.match(
      workload.stdout,
      /different workload: A asks 256 in \/ poisson:128 out tokens, B 256 in \/ 256 out tokens/,
    );
  });

  test('Markdown and HTML reports are written, with every string from a run escaped', async () => {
    const evil = join(root, '<img src=x onerror=alert(1)>|`x`');
    simulate(evil, {
      output: 'poisson:128',
      seed: 1,
      gpu: 'h200',
      scenario: '<script>alert("s")</script>',
    });
    const md = join(root, 'out', 'compare.md');
    const html = join(root, 'out', 'compare.html');
    const r = await compare(h100, evil, '--md', md, '--html', html, '--resamples', '200');
    assert.equal(r.code, 0, r.stderr);
    const page = readFileSync(html, 'utf8');
    assert.match(page, /^<!doctype html>/);
    assert.match(page, /<table>/);
    assert.ok(!page.includes('<img src=x'), 'no raw <img> in the HTML');
    assert.ok(!page.includes('<script>'), 'no raw <script> in the HTML');
    assert.ok(page.includes('&lt;img src=x onerror=alert(1)&gt;|`x`'));
    assert.ok(page.includes('&lt;script&gt;alert(&quot;s&quot;)&lt;/script&gt;'));
    assert.match(page, /class="better"/);
    const text = readFileSync(md, 'utf8');
    assert.match(text, /\| metric \| A \| B \| delta \| 95 % CI \| verdict \|/);
    assert.match(text, /\| TPOT p50 \(ms\) \|.*\u2705 better \|/);
    assert.ok(!text.includes('<img') && !text.includes('<script'), 'no raw HTML in the Markdown');
    assert.ok(text.includes('&lt;img src=x onerror=alert(1)&gt;\\|\\`x\\`'));
    // Every table row has the header's six cells: the label's pipe did not break a table.
    for (const line of text.split('\n').filter((l) => l.startsWith('|'))) {
      assert.equal(line.split(/(?<!\\)\|/).length - 2, 6, line);
    }
  });

  test('thresholds on the candidate: exit 3 with the miss, 0 when met', async () => {
    const failed = await compare(
      h100,
      h200,
      '--threshold',
      'ttft.p50<1',
      '--threshold',
      'outputThroughput>1',
      '--resamples',
      '200',
    );
    assert.equal(failed.code, EXIT.thresholdFailed);
    assert.equal(failed.code, 3);
    assert.match(
      failed.stderr,
      /threshold failed \(.*h200\): ttft\.p50 = [\d.]+ ms, over 1 by [\d.]+ ms \([\d,]+ %\)/,
    );
    assert.match(
      failed.stdout,
      /Thresholds on B \(ttft\.p50<1, outputThroughput>1\): 1 of 2 failed/,
    );
    const met = await compare(
      h100,
      h200,
      '--threshold',
      'ttft.p99<100000,failureRate<1%',
      '--resamples',
      '200',
    );
    assert.equal(met.code, 0, met.stderr);
    assert.match(met.stdout, /all 2 met/);
  });

  test('sweeps: compared level by level; levels only one side has are listed', async () => {
    const a = join(root, 'sweep-a');
    const b = join(root, 'sweep-b');
    simulateSweep(a, [1, 4, 16]);
    simulateSweep(b, [4, 16, 32], { gpu: 'h200' });
    const { code, report } = await compareJson(
      a,
      b,
      '--resamples',
      '200',
      '--threshold',
      'ttft.p99<30',
    );
    assert.equal(code, 3);
    const c = report.candidates[0];
    assert.deepEqual(
      c.pairs.map((p) => [p.scenario, p.level]),
      [
        ['chat', 'c4'],
        ['chat', 'c16'],
      ],
    );
    assert.deepEqual(c.onlyBaseline, ['chat c1']);
    assert.deepEqual(c.onlyCandidate, ['chat c32']);
    assert.equal(byId(c.pairs[1].metrics, 'tpot.p50').verdict, 'better');
    // Every point of the candidate is checked, and the failing ones are named.
    assert.equal(c.thresholds?.points.length, 3);
    assert.ok(c.thresholds?.failures.every((f) => /sweep-b\/chat\/c\d+: ttft\.p99 = /.test(f)));
    const text = await compare(a, b, '--resamples', '200');
    assert.match(text.stdout, /chat at c4\n/);
    assert.match(text.stdout, /Only in A \(not compared\): chat c1/);
  });

  test('invalid input exits 2 naming what is missing; an unreadable directory exits 1', async () => {
    const one = await compare(h100);
    assert.equal(one.code, 2);
    assert.match(one.stderr, /at least one directory to compare/);
    const missing = await compare(h100, join(root, 'nope'));
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /cannot read .*nope: no such directory/);
    const notRun = await compare(h100, join(FIXTURES, 'not-a-run'));
    assert.equal(notRun.code, 2);
    assert.match(
      notRun.stderr,
      /not-a-run: not a run or sweep directory: it has no records\.jsonl, scenarios\.json or sweep\.json/,
    );
    const noLoad = await compare(h100, join(FIXTURES, 'records-only'));
    assert.equal(noLoad.code, 2);
    assert.match(
      noLoad.stderr,
      /records-only\/records\.jsonl is there, but no summary\.json or manifest\.json says what load/,
    );
    const corrupt = join(root, 'corrupt');
    simulate(corrupt, { requests: 20 });
    writeFileSync(join(corrupt, 'summary.json'), '{not json');
    const bad = await compare(h100, corrupt);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /cannot read .*summary\.json/);
    rmSync(corrupt, { recursive: true });
    const options = await compare(
      h100,
      h200,
      '--confidence',
      '2',
      '--resamples',
      '5',
      '--threshold',
      'speed>>3',
    );
    assert.equal(options.code, 2);
    assert.match(options.stderr, /--confidence must be between 0\.5 and 1/);
    assert.match(options.stderr, /--resamples must be a whole number from 100/);
    assert.match(options.stderr, /--threshold cannot read "speed>>3"/);
  });

  test('a multi-scenario run is compared scenario by scenario', async () => {
    const mk = (dir: string, gpu: string) => {
      for (const s of ['chat', 'rag']) {
        simulate(join(dir, s), {
          scenario: s,
          gpu,
          requests: 120,
          input: s === 'rag' ? '2048' : '256',
        });
      }
      writeFileSync(
        join(dir, 'scenarios.json'),
        JSON.stringify({ scenarios: [{ scenario: 'chat' }, { scenario: 'rag' }] }),
      );
    };
    mk(join(root, 'multi-a'), 'h100');
    mk(join(root, 'multi-b'), 'h200');
    const { code, report } = await compareJson(
      join(root, 'multi-a'),
      join(root, 'multi-b'),
      '--resamples',
      '200',
    );
    assert.equal(code, 0);
    assert.deepEqual(
      report.candidates[0].pairs.map((p) => [p.scenario, p.workload]),
      [
        ['chat', '256 in / 128 out tokens'],
        ['rag', '2048 in / 128 out tokens'],
      ],
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Thresholds.
// ---------------------------------------------------------------------------------------------

function summaryWith(over: {
  ttftP99?: number;
  outputTokensPerS?: number;
  failed?: number;
  goodput?: boolean;
}): RunSummary {
  const s = summarize(syntheticRecords(8, { requests: 100 }), { load: CLOSED(2) });
  if (over.ttftP99 !== undefined) s.latency.ttftMs.p99 = over.ttftP99;
  if (over.outputTokensPerS !== undefined) s.throughput.outputTokensPerS = over.outputTokensPerS;
  if (over.failed !== undefined) {
    s.requests.failed = over.failed;
    s.requests.completed = 100 - over.failed;
  }
  if (over.goodput) {
    s.goodput = { slo: 'ttft<500', goodRequests: 90, requestsPerS: 9, sloAttainment: 0.9 };
  }
  return s;
}

describe('thresholds', () => {
  test('parse: metrics, statistics, units, aliases', () => {
    assert.deepEqual(parseThreshold('ttft.p99<500'), {
      text: 'ttft.p99<500',
      metric: 'ttft',
      stat: 'p99',
      op: '<',
      limit: 500,
      unit: 'ms',
    });
    assert.equal(parseThreshold('e2e.p95 <= 2s').limit, 2000);
    assert.equal(parseThreshold('itl.p99.9<80ms').stat, 'p99_9');
    assert.equal(parseThreshold('TPOT.mean<50').metric, 'tpot');
    assert.deepEqual(
      { ...parseThreshold('outputThroughput>1000') },
      {
        text: 'outputThroughput>1000',
        metric: 'outputThroughput',
        op: '>',
        limit: 1000,
        unit: 'tok/s',
      },
    );
    assert.equal(parseThreshold('error_rate<1%').metric, 'failureRate');
    assert.equal(parseThreshold('errorRate<1%').limit, 0.01);
    assert.equal(parseThreshold('failureRate<0.02').limit, 0.02);
    assert.equal(parseThreshold('request-throughput>=5 req/s').metric, 'requestThroughput');
    assert.equal(parseThreshold('sloAttainment>=95%').limit, 0.95);
    assert.equal(parseThreshold('outputSpeed.p50>20').unit, 'tok/s');
    assert.equal(parseThresholds(['ttft.p99<500,itl.p99<50', 'goodput>2']).length, 3);
  });

  test('parse errors say what is wrong and how to write it', () => {
    const problem = (text: string) => {
      try {
        parseThreshold(text);
      } catch (err) {
        assert.ok(err instanceof ThresholdError);
        return err.message;
      }
      assert.fail(`${text} parsed`);
    };
    assert.match(problem('speed>>3'), /cannot read "speed>>3": write METRIC\[\.STAT\] OP LIMIT/);
    assert.match(problem('ttf.p99<500'), /unknown metric "ttf" \(did you mean ttft\?\)/);
    assert.match(problem('ttft<500'), /name a statistic, e\.g\. ttft\.p99<500/);
    assert.match(problem('ttft.p42<500'), /unknown statistic "p42"/);
    assert.match(problem('failureRate<5'), /write 5% or 0\.05/);
    assert.match(problem('outputThroughput.p99>5'), /single number per run/);
    assert.match(problem('ttft.p99<5 tok/s'), /in ms/);
    assert.throws(
      () => parseThresholds(['ttft.p99<500', 'nope<1', 'ttft<1']),
      (err: Error) => err instanceof ThresholdError && err.problems.length === 2,
    );
  });

  test('evaluate: the value, whether it holds, the margin, and a message with the miss', () => {
    const summary = summaryWith({ ttftP99: 612.3, outputTokensPerS: 850.2, failed: 3 });
    const result = evaluateThresholds(
      summary,
      parseThresholds([
        'ttft.p99<500',
        'outputThroughput>1000',
        'failureRate<1%',
        'ttft.p99<700',
        'goodput>1',
      ]),
    );
    assert.equal(result.ok, false);
    const [ttft, throughput, failures, met, goodput] = result.results;
    assert.equal(ttft.message, 'ttft.p99 = 612.3 ms, over 500 by 112.3 ms (22 %)');
    assert.equal(ttft.ok, false);
    assert.ok(Math.abs((ttft.margin as number) + 112.3) < 1e-9);
    assert.equal(ttft.value, 612.3);
    assert.equal(
      throughput.message,
      'outputThroughput = 850.2 tok/s, under 1,000 by 149.8 tok/s (15 %)',
    );
    assert.equal(
      failures.message,
      'failureRate = 3.00 %, over 1 % by 2.00 percentage points (200 %)',
    );
    assert.equal(met.ok, true);
    assert.equal(met.message, 'ttft.p99 = 612.3 ms, under 700 (87.7 ms to spare)');
    assert.equal(goodput.ok, false);
    assert.equal(goodput.value, null);
    assert.equal(goodput.message, 'goodput: not measured: the run had no --slo');
    const withSlo = evaluateThresholds(
      summaryWith({ goodput: true }),
      parseThresholds(['goodput>1', 'sloAttainment>=90%']),
    );
    assert.equal(withSlo.ok, true);
  });

  test('on every point of a sweep: ok only when all pass, failures named by point', () => {
    const points = [
      { name: 'chat c1', summary: summaryWith({ ttftP99: 120 }) },
      { name: 'chat c16', summary: summaryWith({ ttftP99: 480 }) },
      { name: 'chat c64', summary: summaryWith({ ttftP99: 612.3 }) },
    ];
    const result = evaluateThresholdsOnPoints(points, parseThresholds(['ttft.p99<500']));
    assert.equal(result.ok, false);
    assert.deepEqual(result.failures, [
      'chat c64: ttft.p99 = 612.3 ms, over 500 by 112.3 ms (22 %)',
    ]);
    assert.deepEqual(
      result.points.map((p) => p.ok),
      [true, true, false],
    );
  });
});

test("a session run's load is told in sessions", () => {
  assert.equal(
    describeConfiguredLoad({ mode: 'closed', concurrency: 4 }, true),
    '4 concurrent sessions',
  );
  assert.equal(
    describeConfiguredLoad({ mode: 'open', rate: 2, arrival: 'poisson' }, true),
    '2 sessions/s poisson arrivals',
  );
  assert.equal(describeConfiguredLoad({ mode: 'closed', concurrency: 1 }), '1 concurrent request');
});
