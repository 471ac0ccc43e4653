import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parsePrometheusText, seriesKey } from '../../../src/telemetry/prometheus.js';
import {
  slotsSamples,
  snapshotValues,
  type TelemetrySnapshot,
} from '../../../src/telemetry/snapshot.js';
import { summarizeTelemetry } from '../../../src/telemetry/summary.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => readFileSync(join(REPO, 'test/fixtures', name), 'utf8');

describe('Prometheus text', () => {
  test('vLLM: labels, exponents, histogram series, escapes, NaN, timestamps, junk lines', () => {
    const samples = parsePrometheusText(fixture('vllm-metrics.txt'));
    const byKey = new Map(samples.map((s) => [seriesKey(s.name, s.labels), s.value]));
    const model = 'meta-llama/Llama-3.1-8B-Instruct';
    assert.equal(byKey.get(`vllm:num_requests_running{engine="0",model_name="${model}"}`), 12);
    assert.equal(byKey.get(`vllm:prompt_tokens_total{engine="0",model_name="${model}"}`), 122880);
    assert.equal(
      byKey.get(
        `vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="${model}"}`,
      ),
      480,
    );
    assert.equal(
      byKey.get(`vllm:time_to_first_token_seconds_count{engine="0",model_name="${model}"}`),
      480,
    );
    assert.equal(
      byKey.get(`vllm:time_to_first_token_seconds_sum{engine="0",model_name="${model}"}`),
      31.25,
    );
    const odd = samples.find((s) => s.name === 'odd_metric');
    assert.equal(odd?.labels.label, 'with "quotes" and \\ backslash\nnewline');
    assert.ok(Number.isNaN(odd?.value));
    assert.equal(byKey.get('ts_metric'), 42, 'the timestamp is not the value');
    assert.ok(!samples.some((s) => s.name === 'weird_line_without_value'));
  });

  test('llama.cpp: recorded from the real llama-server', () => {
    const samples = parsePrometheusText(fixture('llamacpp-metrics.txt'));
    const names = new Set(samples.map((s) => s.name));
    for (const name of [
      'llamacpp:prompt_tokens_total',
      'llamacpp:tokens_predicted_total',
      'llamacpp:requests_processing',
      'llamacpp:requests_deferred',
      'llamacpp:n_busy_slots_per_decode',
    ]) {
      assert.ok(names.has(name), `${name} missing`);
    }
  });

  test('llama.cpp /slots as gauges', () => {
    const samples = slotsSamples(fixture('llamacpp-slots.json'));
    const get = (name: string) => samples.find((s) => s.name === name)?.value;
    assert.ok((get('llamacpp_slots:total') ?? 0) >= 1);
    assert.equal(typeof get('llamacpp_slots:processing'), 'number');
    assert.throws(() => slotsSamples('{"not": "an array"}'), /JSON array/);
  });
});

describe('telemetry summary', () => {
  test('counters by growth, gauges by range, buckets left out, failures counted', () => {
    const snap = (at: number, running: number, prompt: number): TelemetrySnapshot => ({
      at,
      source: 'prometheus',
      values: snapshotValues(
        'prometheus',
        `vllm:num_requests_running{m="a"} ${running}\nvllm:prompt_tokens_total{m="a"} ${prompt}\nx_bucket{le="1"} 5\n`,
      ),
    });
    const summary = summarizeTelemetry([
      snap(0, 2, 100),
      { at: 500, source: 'prometheus', error: 'HTTP 503' },
      snap(1000, 6, 400),
      snap(2000, 4, 1100),
    ]);
    assert.equal(summary.scrapes, 4);
    assert.equal(summary.failedScrapes, 1);
    assert.equal(summary.firstError, 'HTTP 503');
    assert.equal(summary.windowS, 2);
    assert.deepEqual(summary.counters['vllm:prompt_tokens_total{m="a"}'], {
      delta: 1000,
      perS: 500,
    });
    assert.deepEqual(summary.gauges['vllm:num_requests_running{m="a"}'], {
      min: 2,
      mean: 4,
      max: 6,
      last: 4,
    });
    assert.ok(!Object.keys(summary.gauges).some((k) => k.startsWith('x_bucket')));
  });
});
