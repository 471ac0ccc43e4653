import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  buildOneTwoFiveBuckets,
  type EngineGaugeState,
  type FinishedRequestTiming,
  type GpuMemoryState,
  SimMetrics,
} from '../../../src/sim/metrics.js';
import {
  type MetricSample,
  parsePrometheusText,
  seriesKey,
} from '../../../src/telemetry/prometheus.js';
import { snapshotValues } from '../../../src/telemetry/snapshot.js';
import { summarizeTelemetry } from '../../../src/telemetry/summary.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => readFileSync(join(REPO, 'test/fixtures', name), 'utf8');

const MODEL = 'sim/Llama-3.1-8B';
const LABELS = { engine: '0', model_name: MODEL };

const STATE: EngineGaugeState = {
  running: 7,
  waiting: 2,
  kvCacheUsage: 0.4375,
  preemptions: 3,
  promptTokens: 12345,
  generationTokens: 678,
  prefixQueryTokens: 9000,
  prefixHitTokens: 4500,
};

const GPUS: GpuMemoryState[] = [
  { gpu: 0, usedMiB: 70000, freeMiB: 11559 },
  { gpu: 1, usedMiB: 69000, freeMiB: 12559 },
];

const metrics = (modelName = MODEL, extra: { maxTokenBucket?: number; gpuName?: string } = {}) =>
  new SimMetrics({
    modelName,
    cacheConfig: {
      block_size: 16,
      cache_dtype: 'auto',
      enable_prefix_caching: true,
      gpu_memory_utilization: 0.9,
      num_gpu_blocks: 27895,
    },
    ...extra,
  });

const finished = (over: Partial<FinishedRequestTiming> = {}): FinishedRequestTiming => ({
  promptTokens: 512,
  generationTokens: 5,
  finishedReason: 'length',
  queueS: 0.25,
  prefillS: 0.5,
  decodeS: 2,
  inferenceS: 2.5,
  e2eS: 2.75,
  ...over,
});

/** `# TYPE` lines, family name to type: the project's parser skips comments. */
function typeLines(text: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m) types.set(m[1], m[2]);
  }
  return types;
}

function helpLines(text: string): Map<string, string> {
  const help = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^# HELP (\S+) (.*)$/.exec(line);
    if (m) help.set(m[1], m[2]);
  }
  return help;
}

/** The family a sample belongs to, given the TYPE lines (histogram suffixes stripped). */
function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return m && types.get(m[1]) === 'histogram' ? m[1] : undefined;
}

const value = (samples: MetricSample[], name: string, labels: Record<string, string>) => {
  const key = seriesKey(name, labels);
  const found = samples.filter((s) => seriesKey(s.name, s.labels) === key);
  assert.equal(found.length, 1, `${key}: ${found.length} samples`);
  return found[0].value;
};

const leNumber = (le: string) => (le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le));

/** Buckets of one histogram, in exposition order, with their `le` strings. */
const buckets = (samples: MetricSample[], family: string) =>
  samples
    .filter((s) => s.name === `${family}_bucket` && s.labels.model_name === MODEL)
    .map((s) => ({ le: s.labels.le, count: s.value }));

describe('simulated vLLM /metrics', () => {
  test('family names, TYPE lines and label names match the recorded vLLM fixture', () => {
    const text = metrics().render(STATE, GPUS);
    const ours = parsePrometheusText(text);
    const ourTypes = typeLines(text);
    const real = fixture('vllm-metrics.txt');
    const realTypes = typeLines(real);
    for (const [family, type] of realTypes) {
      if (!family.startsWith('vllm:')) continue;
      assert.equal(ourTypes.get(family), type, `# TYPE ${family}`);
    }
    for (const s of parsePrometheusText(real)) {
      if (!s.name.startsWith('vllm:')) continue;
      const mine = ours.filter((o) => o.name === s.name);
      assert.ok(mine.length > 0, `${s.name} missing`);
      // cache_config_info gained an `engine` label after the fixture was recorded.
      const expected = Object.keys(s.labels)
        .concat(s.name === 'vllm:cache_config_info' ? ['engine'] : [])
        .sort();
      assert.ok(
        mine.some((o) => Object.keys(o.labels).sort().join() === expected.join()),
        `${s.name}: label names ${expected.join()}`,
      );
    }
  });

  test('every sample has one HELP and one TYPE line, counters named with _total', () => {
    const text = metrics().render(STATE, GPUS);
    assert.ok(text.endsWith('\n'));
    const types = typeLines(text);
    const help = helpLines(text);
    const typeCount = text.split('\n').filter((l) => l.startsWith('# TYPE ')).length;
    assert.equal(typeCount, types.size, 'a family is declared twice');
    for (const family of types.keys()) assert.ok(help.has(family), `# HELP ${family}`);
    for (const s of parsePrometheusText(text)) {
      assert.ok(familyOf(s.name, types), `${s.name} has no # TYPE`);
    }
    // prometheus_client's 0.0.4 output names a counter family with its _total suffix.
    for (const c of [
      'vllm:num_preemptions_total',
      'vllm:prompt_tokens_total',
      'vllm:generation_tokens_total',
      'vllm:prefix_cache_queries_total',
      'vllm:prefix_cache_hits_total',
      'vllm:request_success_total',
    ]) {
      assert.equal(types.get(c), 'counter', c);
    }
    assert.equal(types.get('vllm:iteration_tokens_total'), 'histogram');
    assert.ok(!types.has('vllm:num_preemptions'));
    for (const g of [
      'vllm:num_requests_running',
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
      'vllm:gpu_cache_usage_perc',
      'vllm:cache_config_info',
      'DCGM_FI_DEV_FB_USED',
      'DCGM_FI_DEV_FB_FREE',
    ]) {
      assert.equal(types.get(g), 'gauge', g);
    }
  });

  test('gauges and counters carry the state passed to render', () => {
    const m = metrics();
    const first = parsePrometheusText(m.render(STATE, GPUS));
    assert.equal(value(first, 'vllm:num_requests_running', LABELS), 7);
    assert.equal(value(first, 'vllm:num_requests_waiting', LABELS), 2);
    assert.equal(value(first, 'vllm:kv_cache_usage_perc', LABELS), 0.4375);
    assert.equal(value(first, 'vllm:gpu_cache_usage_perc', LABELS), 0.4375);
    assert.equal(value(first, 'vllm:num_preemptions_total', LABELS), 3);
    assert.equal(value(first, 'vllm:prompt_tokens_total', LABELS), 12345);
    assert.equal(value(first, 'vllm:generation_tokens_total', LABELS), 678);
    assert.equal(value(first, 'vllm:prefix_cache_queries_total', LABELS), 9000);
    assert.equal(value(first, 'vllm:prefix_cache_hits_total', LABELS), 4500);
    // render keeps no copy of the state: the next render shows the next state.
    const next = parsePrometheusText(
      m.render({ ...STATE, running: 0, kvCacheUsage: 0.015625, preemptions: 4 }, GPUS),
    );
    assert.equal(value(next, 'vllm:num_requests_running', LABELS), 0);
    assert.equal(value(next, 'vllm:kv_cache_usage_perc', LABELS), 0.015625);
    assert.equal(value(next, 'vllm:num_preemptions_total', LABELS), 4);
    const text = m.render(STATE, GPUS);
    assert.match(text, /^vllm:num_requests_running\{engine="0",model_name="[^"]+"\} 7$/m);
    assert.match(text, /^vllm:kv_cache_usage_perc\{[^}]+\} 0\.4375$/m);
  });

  test('histograms: cumulative, +Inf equals _count, _sum equals what was observed', () => {
    const m = metrics();
    const ttfts = [0.0005, 0.003, 0.1, 0.1, 0.2, 1.0, 3, 3000];
    const itls: number[] = [];
    for (let i = 0; i < 1000; i++) itls.push(((i * 7919) % 1000) / 5000);
    const iterations = [1, 7, 8, 9, 300, 20000];
    for (const t of ttfts) m.observeTtft(t);
    for (const t of itls) m.observeItl(t);
    for (const n of iterations) m.observeIteration(n);
    m.observeFinished(finished());
    m.observeFinished(finished({ finishedReason: 'stop', e2eS: 9000, queueS: 0 }));
    const text = m.render(STATE, GPUS);
    const samples = parsePrometheusText(text);
    const types = typeLines(text);
    const expectedSums: Record<string, number> = {
      'vllm:time_to_first_token_seconds': ttfts.reduce((a, b) => a + b, 0),
      'vllm:inter_token_latency_seconds': itls.reduce((a, b) => a + b, 0),
      'vllm:iteration_tokens_total': iterations.reduce((a, b) => a + b, 0),
      'vllm:e2e_request_latency_seconds': 2.75 + 9000,
      'vllm:request_queue_time_seconds': 0.25,
      'vllm:request_prompt_tokens': 1024,
    };
    let histograms = 0;
    for (const [family, type] of types) {
      if (type !== 'histogram') continue;
      histograms++;
      const b = buckets(samples, family);
      assert.ok(b.length > 1, `${family} has buckets`);
      for (let i = 1; i < b.length; i++) {
        assert.ok(b[i].count >= b[i - 1].count, `${family} le=${b[i].le} decreases`);
        assert.ok(leNumber(b[i].le) > leNumber(b[i - 1].le), `${family} le out of order`);
      }
      assert.equal(b[b.length - 1].le, '+Inf', `${family} ends with +Inf`);
      const count = value(samples, `${family}_count`, LABELS);
      assert.equal(b[b.length - 1].count, count, `${family}: +Inf bucket vs _count`);
      if (family in expectedSums) {
        assert.equal(value(samples, `${family}_sum`, LABELS), expectedSums[family], family);
      }
    }
    assert.equal(histograms, 11);
    assert.equal(value(samples, 'vllm:time_to_first_token_seconds_count', LABELS), ttfts.length);
    assert.equal(value(samples, 'vllm:inter_token_latency_seconds_count', LABELS), 1000);
    // 3000 s is past TTFT's last bound (2560): only in +Inf.
    const ttft = buckets(samples, 'vllm:time_to_first_token_seconds');
    assert.equal(ttft.find((x) => x.le === '2560.0')?.count, ttfts.length - 1);
  });

  test('a value exactly on a bound counts in that bucket (le is inclusive)', () => {
    const m = metrics();
    m.observeTtft(0.1);
    m.observeTtft(1.0);
    m.observeItl(0.025);
    m.observeIteration(8);
    m.observeIteration(16384);
    m.observeFinished(finished({ e2eS: 0.3, promptTokens: 100, generationTokens: 1 }));
    const samples = parsePrometheusText(m.render(STATE, []));
    const at = (family: string, le: string) => {
      const found = buckets(samples, family).find((x) => x.le === le);
      assert.ok(found, `${family} le=${le}`);
      return found.count;
    };
    assert.equal(at('vllm:time_to_first_token_seconds', '0.08'), 0);
    assert.equal(at('vllm:time_to_first_token_seconds', '0.1'), 1);
    assert.equal(at('vllm:time_to_first_token_seconds', '0.75'), 1);
    assert.equal(at('vllm:time_to_first_token_seconds', '1.0'), 2);
    assert.equal(at('vllm:inter_token_latency_seconds', '0.01'), 0);
    assert.equal(at('vllm:inter_token_latency_seconds', '0.025'), 1);
    assert.equal(at('vllm:iteration_tokens_total', '1.0'), 0);
    assert.equal(at('vllm:iteration_tokens_total', '8.0'), 1);
    assert.equal(at('vllm:iteration_tokens_total', '8192.0'), 1);
    assert.equal(at('vllm:iteration_tokens_total', '16384.0'), 2);
    assert.equal(at('vllm:e2e_request_latency_seconds', '0.3'), 1);
    assert.equal(at('vllm:request_prompt_tokens', '50.0'), 0);
    assert.equal(at('vllm:request_prompt_tokens', '100.0'), 1);
    assert.equal(at('vllm:request_generation_tokens', '1.0'), 1);
  });

  test('bucket bounds are vLLM V1s, with le written like prometheus_client', () => {
    const samples = parsePrometheusText(metrics().render(STATE, []));
    const les = (family: string) => buckets(samples, family).map((x) => x.le);
    assert.deepEqual(les('vllm:time_to_first_token_seconds'), [
      ...'0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1.0 2.5 5.0 7.5 10.0'.split(' '),
      ...'20.0 40.0 80.0 160.0 640.0 2560.0 +Inf'.split(' '),
    ]);
    const tokenLatency = [
      ...'0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1.0 2.5 5.0 7.5 10.0'.split(' '),
      ...'20.0 40.0 80.0 +Inf'.split(' '),
    ];
    assert.deepEqual(les('vllm:inter_token_latency_seconds'), tokenLatency);
    assert.deepEqual(les('vllm:request_time_per_output_token_seconds'), tokenLatency);
    const requestLatency = [
      ...'0.3 0.5 0.8 1.0 1.5 2.0 2.5 5.0 10.0 15.0 20.0 30.0 40.0 50.0 60.0 120.0'.split(' '),
      ...'240.0 480.0 960.0 1920.0 7680.0 +Inf'.split(' '),
    ];
    for (const f of ['e2e_request_latency', 'request_queue_time', 'request_inference_time']) {
      assert.deepEqual(les(`vllm:${f}_seconds`), requestLatency, f);
    }
    for (const f of ['request_prefill_time', 'request_decode_time']) {
      assert.deepEqual(les(`vllm:${f}_seconds`), requestLatency, f);
    }
    assert.deepEqual(
      les('vllm:iteration_tokens_total'),
      '1 8 16 32 64 128 256 512 1024 2048 4096 8192 16384'
        .split(' ')
        .map((n) => `${n}.0`)
        .concat('+Inf'),
    );
    const tokens = les('vllm:request_prompt_tokens');
    assert.deepEqual(tokens.slice(0, 4), ['1.0', '2.0', '5.0', '10.0']);
    assert.deepEqual(tokens.slice(-2), ['100000.0', '+Inf'], 'default cap 131072');
    assert.deepEqual(les('vllm:request_generation_tokens'), tokens);

    // Past six integer digits prometheus_client switches to Go's exponent form.
    const big = parsePrometheusText(
      metrics(MODEL, { maxTokenBucket: 2_000_000 }).render(STATE, []),
    );
    assert.deepEqual(
      buckets(big, 'vllm:request_prompt_tokens')
        .map((x) => x.le)
        .slice(-5),
      ['200000.0', '500000.0', '1e+06', '2e+06', '+Inf'],
    );
    assert.deepEqual(buildOneTwoFiveBuckets(100), [1, 2, 5, 10, 20, 50, 100]);
    assert.deepEqual(buildOneTwoFiveBuckets(4096).slice(-3), [500, 1000, 2000]);
    assert.throws(() => buildOneTwoFiveBuckets(Number.POSITIVE_INFINITY), RangeError);
  });

  test('finished requests: request histograms, TPOT per request, all three finished_reason counters', () => {
    const m = metrics();
    let samples = parsePrometheusText(m.render(STATE, []));
    for (const reason of ['stop', 'length', 'abort']) {
      assert.equal(
        value(samples, 'vllm:request_success_total', { ...LABELS, finished_reason: reason }),
        0,
        `${reason} at zero before any request`,
      );
    }
    m.observeFinished(finished()); // 5 tokens, 2 s of decode: 0.5 s per token after the first
    m.observeFinished(finished({ finishedReason: 'stop', generationTokens: 1, decodeS: 0 }));
    m.observeFinished(finished({ finishedReason: 'stop', tpotS: 0.02 }));
    samples = parsePrometheusText(m.render(STATE, []));
    const success = (reason: string) =>
      value(samples, 'vllm:request_success_total', { ...LABELS, finished_reason: reason });
    assert.equal(success('length'), 1);
    assert.equal(success('stop'), 2);
    assert.equal(success('abort'), 0);
    // vLLM observes 0 for a request with a single token; a given tpotS wins over the quotient.
    assert.equal(value(samples, 'vllm:request_time_per_output_token_seconds_sum', LABELS), 0.52);
    assert.equal(value(samples, 'vllm:request_time_per_output_token_seconds_count', LABELS), 3);
    const tpot = buckets(samples, 'vllm:request_time_per_output_token_seconds');
    assert.equal(tpot.find((x) => x.le === '0.01')?.count, 1);
    assert.equal(tpot.find((x) => x.le === '0.025')?.count, 2);
    assert.equal(tpot.find((x) => x.le === '0.5')?.count, 3);
    assert.equal(value(samples, 'vllm:request_generation_tokens_sum', LABELS), 11);
    assert.equal(value(samples, 'vllm:request_prompt_tokens_count', LABELS), 3);
    assert.equal(value(samples, 'vllm:request_prefill_time_seconds_sum', LABELS), 1.5);
    assert.equal(value(samples, 'vllm:request_inference_time_seconds_sum', LABELS), 7.5);
    assert.equal(value(samples, 'vllm:request_decode_time_seconds_sum', LABELS), 4);
    assert.equal(value(samples, 'vllm:request_queue_time_seconds_count', LABELS), 3);
  });

  test('a NaN observation is dropped rather than poisoning _sum', () => {
    const m = metrics();
    m.observeItl(Number.NaN);
    m.observeItl(0.05);
    const samples = parsePrometheusText(m.render(STATE, []));
    assert.equal(value(samples, 'vllm:inter_token_latency_seconds_sum', LABELS), 0.05);
    assert.equal(value(samples, 'vllm:inter_token_latency_seconds_count', LABELS), 1);
  });

  test('label values are escaped: quotes, backslashes and newlines round-trip', () => {
    const name = 'we"ird\\model\nv2';
    const text = metrics(name).render(STATE, []);
    assert.ok(
      text.includes('vllm:num_requests_running{engine="0",model_name="we\\"ird\\\\model\\nv2"} 7'),
    );
    const samples = parsePrometheusText(text);
    assert.equal(value(samples, 'vllm:num_requests_running', { engine: '0', model_name: name }), 7);
    const ttftInf = samples.find(
      (s) => s.name === 'vllm:time_to_first_token_seconds_bucket' && s.labels.le === '+Inf',
    );
    assert.equal(ttftInf?.labels.model_name, name);
    // Nothing else leaked onto its own line: every non-comment line still parses.
    const lines = text.split('\n').filter((l) => l.length > 0 && !l.startsWith('#'));
    assert.equal(samples.length, lines.length);
  });

  test('cache_config_info carries the cache config as labels, at 1', () => {
    const samples = parsePrometheusText(metrics().render(STATE, []));
    const info = samples.filter((s) => s.name === 'vllm:cache_config_info');
    assert.equal(info.length, 1);
    assert.equal(info[0].value, 1);
    assert.deepEqual(info[0].labels, {
      block_size: '16',
      cache_dtype: 'auto',
      enable_prefix_caching: 'True', // Python's str(True), as in the recorded fixture
      engine: '0',
      gpu_memory_utilization: '0.9',
      num_gpu_blocks: '27895',
    });
    assert.throws(
      () => new SimMetrics({ modelName: MODEL, cacheConfig: { 'block-size': 16 } }),
      /not a Prometheus label name/,
    );
  });

  test('DCGM framebuffer gauges, one series per GPU', () => {
    const text = metrics(MODEL, { gpuName: 'NVIDIA H200' }).render(STATE, GPUS);
    assert.ok(text.includes('# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n'));
    assert.ok(text.includes('# TYPE DCGM_FI_DEV_FB_USED gauge\n'));
    assert.ok(text.includes('# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n'));
    assert.ok(text.includes('# TYPE DCGM_FI_DEV_FB_FREE gauge\n'));
    const samples = parsePrometheusText(text);
    for (const g of GPUS) {
      const labels = {
        gpu: String(g.gpu),
        UUID: `GPU-sim-${g.gpu}`,
        device: `nvidia${g.gpu}`,
        modelName: 'NVIDIA H200',
      };
      assert.equal(value(samples, 'DCGM_FI_DEV_FB_USED', labels), g.usedMiB);
      assert.equal(value(samples, 'DCGM_FI_DEV_FB_FREE', labels), g.freeMiB);
    }
    const defaultName = parsePrometheusText(metrics().render(STATE, [GPUS[0]]));
    const used = defaultName.filter((s) => s.name === 'DCGM_FI_DEV_FB_USED');
    assert.equal(used.length, 1);
    assert.equal(used[0].labels.modelName, 'infergauge simulated GPU');
    assert.ok(!metrics().render(STATE, []).includes('DCGM_'), 'no GPUs, no DCGM families');
  });

  test('summarizeTelemetry reads KV usage, running, waiting and token rates from two scrapes', () => {
    const m = metrics();
    const scrape = (at: number, state: EngineGaugeState) => ({
      at,
      source: 'prometheus' as const,
      values: snapshotValues('prometheus', m.render(state, GPUS)),
    });
    const first = scrape(0, STATE);
    m.observeTtft(0.2);
    m.observeTtft(0.4);
    const second = scrape(2000, {
      ...STATE,
      running: 11,
      waiting: 0,
      kvCacheUsage: 0.8125,
      promptTokens: STATE.promptTokens + 4000,
    });
    const summary = summarizeTelemetry([first, second]);
    const key = (name: string) => seriesKey(name, LABELS);
    assert.equal(summary.windowS, 2);
    assert.deepEqual(summary.gauges[key('vllm:kv_cache_usage_perc')], {
      min: 0.4375,
      mean: 0.625,
      max: 0.8125,
      last: 0.8125,
    });
    assert.deepEqual(summary.gauges[key('vllm:num_requests_running')], {
      min: 7,
      mean: 9,
      max: 11,
      last: 11,
    });
    assert.deepEqual(summary.gauges[key('vllm:num_requests_waiting')], {
      min: 0,
      mean: 1,
      max: 2,
      last: 0,
    });
    assert.deepEqual(summary.counters[key('vllm:prompt_tokens_total')], {
      delta: 4000,
      perS: 2000,
    });
    assert.deepEqual(summary.counters[key('vllm:time_to_first_token_seconds_count')], {
      delta: 2,
      perS: 1,
    });
    // Histogram-shaped families are counters or left out, never gauges.
    assert.ok(!Object.keys(summary.gauges).some((k) => k.includes('_bucket')));
    assert.ok(!Object.keys(summary.gauges).some((k) => k.includes('iteration_tokens_total')));
    assert.equal(
      summary.gauges[
        seriesKey('DCGM_FI_DEV_FB_USED', {
          gpu: '0',
          UUID: 'GPU-sim-0',
          device: 'nvidia0',
          modelName: 'infergauge simulated GPU',
        })
      ]?.max,
      70000,
    );
  });
});
