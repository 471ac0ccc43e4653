import assert from 'node:assert/strict';
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { type RunSummary, summarize } from '../../src/metrics/summary.js';
import { renderTerminalSummary } from '../../src/report/terminal.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { commonFields, seriesLabels } from '../../src/telemetry/common.js';
import { findOnPath, MIB, parseNvidiaSmiCsv } from '../../src/telemetry/gpu.js';
import { parseProcStatus, readProcStatus } from '../../src/telemetry/process.js';
import { parsePrometheusText, seriesKey } from '../../src/telemetry/prometheus.js';
import { probeMetrics, startScraper } from '../../src/telemetry/scraper.js';
import { snapshotValues, type TelemetrySnapshot } from '../../src/telemetry/snapshot.js';
import { type ServerMetricsSummary, summarizeTelemetry } from '../../src/telemetry/summary.js';
import { REPO } from '../../tools/repo.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { runAgainst } from '../helpers/run.js';
import { startSim } from '../helpers/sim.js';

const FIXTURES = pathToFileURL(join(REPO, 'test/fixtures/'));
const fixture = (name: string) => readFileSync(new URL(name, FIXTURES), 'utf8');
const prom = (text: string) => snapshotValues('prometheus', text);
const linux = process.platform === 'linux';

/** Prometheus fixtures and what each says in common words, exactly. */
const COMMON: Record<string, ReturnType<typeof commonFields>> = {
  'vllm-metrics.txt': {
    kvCacheUsage: 0.4375,
    running: 12,
    waiting: 3,
    promptTokens: 122880,
    generationTokens: 65536,
  },
  'sglang-metrics.txt': {
    kvCacheUsage: 0.82,
    running: 52,
    waiting: 9,
    preemptions: 7,
    promptTokens: 1843000,
    generationTokens: 912384,
  },
  'tgi-metrics.txt': { running: 32, waiting: 14, promptTokens: 604160, generationTokens: 302080 },
  'triton-trtllm-metrics.txt': {
    kvCacheUsage: 0.9375,
    running: 48,
    waiting: 6,
    gpuMemoryUsedBytes: (72611 + 72549) * MIB,
    gpuMemoryTotalBytes: 2 * 81559 * MIB,
  },
  'trtllm-serve-metrics.txt': {
    kvCacheUsage: 0.71,
    running: 24,
    waiting: 3,
    promptTokens: 491520,
    generationTokens: 245760,
  },
  'llamacpp-metrics.txt': { running: 1, waiting: 0, promptTokens: 10, generationTokens: 48 },
  'llamacpp-metrics-kv.txt': {
    kvCacheUsage: 0.6875,
    running: 4,
    waiting: 2,
    promptTokens: 8192,
    generationTokens: 4096,
  },
  'dcgm-exporter-metrics.txt': {
    gpuMemoryUsedBytes: (72611 + 72549) * MIB,
    gpuMemoryTotalBytes: 2 * (72611 + 8355 + 593) * MIB,
  },
};

describe('server metrics in common words (recorded-style fixtures)', () => {
  for (const [name, expected] of Object.entries(COMMON)) {
    test(`${name}: ${Object.keys(expected).join(', ')}`, () => {
      assert.deepEqual(commonFields(prom(fixture(name))), expected);
    });
  }

  test('every written fixture says where its names come from, and its histograms add up', () => {
    const written = readdirSync(FIXTURES).filter(
      (f) => /-metrics(-kv)?\.txt$/.test(f) && f !== 'vllm-metrics.txt',
    );
    assert.ok(written.length >= 6, written.join());
    for (const name of [...written, 'vllm-metrics.txt']) {
      const text = fixture(name);
      if (name !== 'vllm-metrics.txt' && name !== 'llamacpp-metrics.txt') {
        assert.match(text.split('\n')[0], /^# .*from /, `${name} names its source`);
      }
      const samples = parsePrometheusText(text);
      assert.ok(samples.length >= 10, name);
      // Each histogram: buckets rise with le and end at +Inf = _count.
      const buckets = new Map<string, { le: number; value: number }[]>();
      for (const s of samples) {
        if (!s.name.endsWith('_bucket')) continue;
        const { le, ...rest } = s.labels;
        const key = seriesKey(s.name.slice(0, -'_bucket'.length), rest);
        const list = buckets.get(key) ?? [];
        list.push({ le: le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le), value: s.value });
        buckets.set(key, list);
      }
      for (const [key, list] of buckets) {
        const sorted = [...list].sort((a, b) => a.le - b.le);
        for (let i = 1; i < sorted.length; i++) {
          assert.ok(sorted[i].value >= sorted[i - 1].value, `${name} ${key} buckets fall`);
        }
        const inf = sorted[sorted.length - 1];
        assert.equal(inf.le, Number.POSITIVE_INFINITY, `${name} ${key} has a +Inf bucket`);
        const brace = key.indexOf('{');
        const count = samples.find(
          (s) =>
            seriesKey(s.name, s.labels) ===
            (brace < 0 ? `${key}_count` : `${key.slice(0, brace)}_count${key.slice(brace)}`),
        );
        assert.equal(count?.value, inf.value, `${name} ${key}: +Inf bucket = _count`);
      }
    }
  });

  test('vLLM: the deprecated gpu_cache_usage_perc; several engines summed, KV by the fullest', () => {
    assert.deepEqual(commonFields(prom('vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n')), {
      kvCacheUsage: 0.5,
    });
    const two = prom(
      [
        'vllm:num_requests_running{engine="0",model_name="m"} 7',
        'vllm:num_requests_running{engine="1",model_name="m"} 9',
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75',
        'vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.1',
        'vllm:num_preemptions_total{engine="0",model_name="m"} 2',
        'vllm:num_preemptions_total{engine="1",model_name="m"} 3',
      ].join('\n'),
    );
    assert.deepEqual(commonFields(two), { kvCacheUsage: 0.75, running: 16, preemptions: 5 });
  });

  test('SGLang before the token_usage gauge and the retraction counter', () => {
    const older = prom(
      [
        'sglang:num_used_tokens{model_name="m"} 1000',
        'sglang:max_total_num_tokens{model_name="m"} 4000',
        'sglang:num_retractions_sum{model_name="m"} 3.0',
        'sglang:num_retractions_count{model_name="m"} 90.0',
      ].join('\n'),
    );
    assert.deepEqual(commonFields(older), { kvCacheUsage: 0.25, preemptions: 3 });
  });

  test('Triton: used / max when there is no fraction, the fullest of two models', () => {
    const block = (model: string, type: string, value: number) =>
      `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="${type}",model="${model}",version="1"} ${value}`;
    const values = prom(
      [
        block('a', 'used', 100),
        block('a', 'max', 400),
        block('b', 'used', 300),
        block('b', 'max', 400),
        block('b', 'tokens_per', 64),
      ].join('\n'),
    );
    assert.deepEqual(commonFields(values), { kvCacheUsage: 0.75 });
  });

  test('DCGM without the reserved field: total is used + free', () => {
    const values = prom(
      'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x"} 1000\nDCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-x"} 500\n',
    );
    assert.deepEqual(commonFields(values), {
      gpuMemoryUsedBytes: 1000 * MIB,
      gpuMemoryTotalBytes: 1500 * MIB,
    });
  });

  test('NaN and infinite values are no reading', () => {
    const values = prom('vllm:num_requests_running 4\nvllm:kv_cache_usage_perc NaN\n');
    assert.deepEqual(commonFields(values), { running: 4 });
  });

  test('labels back from a series key, escapes included', () => {
    const labels = { a: 'x,y}', b: 'say "hi"\\\n' };
    assert.deepEqual(seriesLabels(seriesKey('m', labels)), labels);
    assert.deepEqual(seriesLabels('plain'), {});
  });
});

describe('Prometheus text: the cases the issue names', () => {
  test('label values with escaped quotes, backslashes, newlines, commas and braces', () => {
    const [s] = parsePrometheusText(
      'm{path="C:\\\\dir\\\\",msg="a \\"quoted\\" word\\nnext",odd="x,y}z",} 1\n',
    );
    assert.deepEqual(s.labels, {
      path: 'C:\\dir\\',
      msg: 'a "quoted" word\nnext',
      odd: 'x,y}z',
    });
    assert.equal(s.value, 1);
    assert.deepEqual(parsePrometheusText('empty{} 2')[0], { name: 'empty', labels: {}, value: 2 });
  });

  test('NaN, +Inf, -Inf, exponents and timestamps', () => {
    const samples = parsePrometheusText(
      'a NaN\nb +Inf\nc -Inf\nd Inf\ne 1.5e-3\nf -2E+2\ng 7 1712345678901\nh{x="1"} +Inf 17\n',
    );
    const v = Object.fromEntries(samples.map((s) => [s.name, s.value]));
    assert.ok(Number.isNaN(v.a));
    assert.equal(v.b, Number.POSITIVE_INFINITY);
    assert.equal(v.c, Number.NEGATIVE_INFINITY);
    assert.equal(v.d, Number.POSITIVE_INFINITY);
    assert.equal(v.e, 0.0015);
    assert.equal(v.f, -200);
    assert.equal(v.g, 7);
    assert.equal(v.h, Number.POSITIVE_INFINITY);
  });

  test('_total counters by growth; _created timestamps and buckets left out; non-finite skipped', () => {
    const snap = (at: number, total: number, gauge: string): TelemetrySnapshot => ({
      at,
      source: 'prometheus',
      values: prom(
        [
          `trtllm_prompt_tokens_total{model_name="m"} ${total}`,
          'trtllm_prompt_tokens_created{model_name="m"} 1.7620312440137e+09',
          `x_bucket{le="+Inf"} ${total}`,
          `g ${gauge}`,
        ].join('\n'),
      ),
    });
    const summary = summarizeTelemetry([snap(0, 100, '1'), snap(1000, 350, 'NaN')]);
    assert.deepEqual(summary.counters['trtllm_prompt_tokens_total{model_name="m"}'], {
      delta: 250,
      perS: 250,
    });
    assert.deepEqual(Object.keys(summary.gauges), ['g']);
    assert.equal(summary.gauges.g.max, 1);
    assert.equal(summary.memory?.promptTokens, 250);
  });
});

describe('GPU memory from nvidia-smi, process memory from /proc', () => {
  const H100 = 81559 * MIB;
  for (const [name, used] of [
    ['nvidia-smi-1gpu.csv', [71234]],
    ['nvidia-smi-1gpu-noheader.csv', [71234]],
    ['nvidia-smi-2gpu.csv', [72611, 72549]],
    ['nvidia-smi-2gpu-noheader.csv', [72611, 72549]],
  ] as const) {
    test(`${name}: per-GPU series, in bytes`, () => {
      const samples = parseNvidiaSmiCsv(fixture(name));
      const expected = used.flatMap((u, gpu) => [
        { name: 'nvidia_smi:memory_used_bytes', labels: { gpu: String(gpu) }, value: u * MIB },
        { name: 'nvidia_smi:memory_total_bytes', labels: { gpu: String(gpu) }, value: H100 },
      ]);
      assert.deepEqual(samples, expected);
      assert.deepEqual(commonFields(snapshotValues('nvidia-smi', fixture(name))), {
        gpuMemoryUsedBytes: used.reduce((a, b) => a + b, 0) * MIB,
        gpuMemoryTotalBytes: used.length * H100,
      });
    });
  }

  test('nvidia-smi: columns by header name, [N/A] left out, nothing readable is an error', () => {
    const reordered = parseNvidiaSmiCsv(
      'memory.total [MiB], index, memory.used [MiB]\n81559 MiB, 3, 1024 MiB\n',
    );
    assert.deepEqual(
      reordered.map((s) => [s.name, s.labels.gpu, s.value]),
      [
        ['nvidia_smi:memory_used_bytes', '3', 1024 * MIB],
        ['nvidia_smi:memory_total_bytes', '3', H100],
      ],
    );
    const unified = 'index, memory.used [MiB], memory.total [MiB]\n0, [N/A], [N/A]\n';
    assert.throws(() => parseNvidiaSmiCsv(unified), /no GPU memory/);
    assert.throws(() => parseNvidiaSmiCsv('NVIDIA-SMI has failed'), /no GPU memory/);
  });

  test('/proc/<pid>/status: VmRSS and VmHWM in bytes', () => {
    assert.deepEqual(parseProcStatus(fixture('proc-status.txt')), [
      { name: 'process:peak_rss_bytes', labels: {}, value: 5128440 * 1024 },
      { name: 'process:rss_bytes', labels: {}, value: 4718592 * 1024 },
    ]);
    assert.deepEqual(commonFields(snapshotValues('process', fixture('proc-status.txt'))), {
      processRssBytes: 4718592 * 1024,
      processPeakRssBytes: 5128440 * 1024,
    });
    assert.throws(() => parseProcStatus('Name:\tkworker/0:1\nState:\tI (idle)\n'), /no VmRSS/);
  });

  test('/proc of this very process', { skip: !linux && 'Linux only' }, async () => {
    const fields = commonFields(snapshotValues('process', await readProcStatus(process.pid)));
    const rss = fields.processRssBytes as number;
    assert.ok(rss > 10 * MIB && rss < 8 * 1024 * MIB, `RSS ${rss}`);
    assert.ok((fields.processPeakRssBytes as number) >= rss);
    await assert.rejects(readProcStatus(2 ** 22 + 12345), /is not running/);
  });

  test('the scraper runs nvidia-smi and reads /proc on the run clock; failures are snapshots', async () => {
    const snapshots: TelemetrySnapshot[] = [];
    const t0 = Date.now();
    const scraper = startScraper({
      sources: [
        {
          kind: 'nvidia-smi',
          command: { file: process.execPath, args: ['-e', 'console.log("0, 2048, 81559")'] },
        },
        {
          kind: 'nvidia-smi',
          command: { file: process.execPath, args: ['-e', 'process.exit(9)'] },
        },
        ...(linux ? [{ kind: 'process' as const, pid: process.pid }] : []),
        { kind: 'process', pid: 1, procRoot: '/nonexistent-proc' },
      ],
      intervalMs: 50,
      nowMs: () => Date.now() - t0,
      onSnapshot: (s) => snapshots.push(s),
    });
    await new Promise((r) => setTimeout(r, 150));
    await scraper.stop();
    const ok = snapshots.filter((s) => s.values);
    const smi = ok.find((s) => s.source === 'nvidia-smi');
    assert.equal(smi?.values?.['nvidia_smi:memory_used_bytes{gpu="0"}'], 2048 * MIB);
    if (linux) assert.ok(ok.some((s) => s.source === 'process'));
    const errors = snapshots.filter((s) => s.error).map((s) => s.error as string);
    assert.ok(
      errors.some((e) => e.includes('Command failed')),
      errors.join('\n'),
    );
    assert.ok(
      errors.some((e) => /process 1 is not running/.test(e)),
      errors.join('\n'),
    );
    assert.ok(snapshots.every((s) => s.at >= 0 && s.at < 10_000));
  });

  test('findOnPath finds executables on PATH only', () => {
    const dir = tempDir('ig-path-');
    const tool = join(dir, 'ig-fake-tool');
    writeFileSync(tool, '#!/bin/sh\n');
    chmodSync(tool, 0o755);
    assert.equal(findOnPath('ig-fake-tool', dir), tool);
    assert.equal(findOnPath('ig-fake-tool', '/nonexistent'), undefined);
  });
});

describe('summary: peaks, means, growth and warnings', () => {
  const at = (ms: number, values: string, source: TelemetrySnapshot['source'] = 'prometheus') => ({
    at: ms,
    source,
    values: snapshotValues(source, values),
  });
  const vllm = (running: number, kv: number, preempted: number, gen: number) =>
    [
      `vllm:num_requests_running{engine="0",model_name="m"} ${running}`,
      `vllm:num_requests_waiting{engine="0",model_name="m"} ${Math.max(0, running - 8)}`,
      `vllm:kv_cache_usage_perc{engine="0",model_name="m"} ${kv}`,
      `vllm:num_preemptions_total{engine="0",model_name="m"} ${preempted}`,
      `vllm:generation_tokens_total{engine="0",model_name="m"} ${gen}`,
      `DCGM_FI_DEV_FB_USED{gpu="0"} ${70000 + running}`,
      'DCGM_FI_DEV_FB_FREE{gpu="0"} 11000',
    ].join('\n');
  const snapshots: TelemetrySnapshot[] = [
    at(0, vllm(4, 0.25, 10, 1000)),
    at(500, '', 'prometheus'),
    { at: 700, source: 'prometheus', error: 'HTTP 503' },
    at(1000, vllm(12, 0.995, 12, 3000)),
    at(1000, fixture('proc-status.txt'), 'process'),
    at(2000, vllm(8, 0.5, 13, 4000)),
    at(2000, 'VmHWM:\t 5242880 kB\nVmRSS:\t 5000000 kB\n', 'process'),
  ];

  test('the memory block', () => {
    const m = summarizeTelemetry(snapshots).memory;
    assert.deepEqual(m, {
      scrapes: 5,
      kvCacheUsage: { mean: (0.25 + 0.995 + 0.5) / 3, max: 0.995 },
      running: { mean: 8, max: 12 },
      waiting: { mean: 4 / 3, max: 4 },
      preemptions: 3,
      generationTokens: 3000,
      gpuMemoryUsedBytes: { mean: 70008 * MIB, max: 70012 * MIB, total: 81012 * MIB },
      processRssBytes: {
        mean: ((4718592 + 5000000) / 2) * 1024,
        max: 5000000 * 1024,
        peak: 5242880 * 1024,
      },
    });
  });

  test('warnings: kv_cache_full at 99 %, preemptions when the counter grew', () => {
    const summary = summarizeTelemetry(snapshots);
    assert.deepEqual(
      summary.warnings.map((w) => w.code),
      ['kv_cache_full', 'preemptions'],
    );
    assert.match(summary.warnings[0].message, /KV cache was full \(peak 100%, mean 58%\)/);
    assert.match(summary.warnings[1].message, /preempted 3 requests/);
    const calm = summarizeTelemetry([at(0, vllm(4, 0.2, 10, 0)), at(900, vllm(6, 0.98, 10, 5))]);
    assert.deepEqual(calm.warnings, []);
    assert.equal(calm.memory?.preemptions, 0);
    assert.equal(summarizeTelemetry([at(0, 'other_metric 1')]).memory, undefined);
  });

  test('a counter that drops (server restart) counts again from zero', () => {
    const m = summarizeTelemetry([
      at(0, vllm(1, 0.1, 40, 5000)),
      at(1000, vllm(1, 0.1, 42, 5100)),
      at(2000, vllm(1, 0.1, 1, 50)),
      at(3000, vllm(1, 0.1, 2, 80)),
    ]).memory;
    assert.equal(m?.preemptions, 2 + 1 + 1);
    assert.equal(m?.generationTokens, 100 + 50 + 30);
  });

  test('the terminal: one memory line, the server warnings with the others', () => {
    const run = summarize([], { load: { mode: 'closed', concurrency: 4 } });
    const serverMetrics = summarizeTelemetry(snapshots);
    const text = renderTerminalSummary(run, { color: false, serverMetrics });
    assert.match(text, /Server metrics \(7 scrapes, 1 failed \(HTTP 503\)\): running max 12,/);
    assert.match(
      text,
      /Server memory: KV cache peak 100% \(mean 58%\), preemptions 3, GPU memory peak 68\.4 GiB of 79\.1, server RSS max 4\.8 GiB \(high-water 5\.0\)/,
    );
    const warnings = text.slice(text.indexOf('Warnings:'));
    assert.match(warnings, /- no request was counted/);
    assert.match(warnings, /- the server's KV cache was full/);
    assert.match(warnings, /- the server preempted 3 requests/);
    // Merged by the caller already: printed once.
    run.warnings.push(...serverMetrics.warnings);
    const once = renderTerminalSummary(run, { color: false, serverMetrics });
    assert.equal(once.split("the server's KV cache was full").length, 2);
    const small = summarizeTelemetry([at(0, 'VmRSS:\t 4096 kB\nVmHWM:\t 8192 kB\n', 'process')]);
    assert.match(
      renderTerminalSummary(run, { color: false, serverMetrics: small }),
      /Server memory: server RSS max 4 MiB \(high-water 8\)/,
    );
    // Servers whose queue has no highlight of its own: running and waiting on the memory line.
    const triton = summarizeTelemetry([at(0, fixture('triton-trtllm-metrics.txt'))]);
    assert.match(
      renderTerminalSummary(run, { color: false, serverMetrics: triton }),
      /Server memory: KV cache peak 94% \(mean 94%\), running max 48, waiting max 6, GPU memory peak 141\.8 GiB of 159\.3/,
    );
  });
});

describe('telemetry against the simulator process', { timeout: 180_000 }, () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ 'time-scale': 0.2 });
  });
  after(async () => {
    await sim?.stop();
  });

  interface Truth {
    tp: number;
    memory: { numGpuBlocks: number; deviceUsedBytes: number; totalBytes: number };
    counters: { peakUsedBlocks: number };
  }
  const truth = async () =>
    ((await (await fetch(`${sim.url}/debug/truth`)).json()) as { engine: Truth }).engine;

  /** A closed loop at `concurrency` with the simulator's /metrics scraped every 50 ms. */
  async function scrapedRun(concurrency: number): Promise<ServerMetricsSummary> {
    const snapshots: TelemetrySnapshot[] = [];
    const t0 = performance.now();
    const scraper = startScraper({
      sources: [{ kind: 'prometheus', url: `${sim.url}/metrics` }],
      intervalMs: 50,
      nowMs: () => performance.now() - t0,
      onSnapshot: (s) => snapshots.push(s),
    });
    // The counters' starting point comes before the first request.
    while (snapshots.length === 0) await new Promise((r) => setTimeout(r, 5));
    const { summary } = await runAgainst(sim.url, {
      target: { ignoreEos: true },
      load: { mode: 'closed', concurrency },
      requests: concurrency * 2,
      inputTokens: 1024,
      outputTokens: 256,
    });
    await scraper.stop();
    assert.equal(summary.requests.failed, 0);
    return summarizeTelemetry(snapshots);
  }

  test('KV usage rises with concurrency and agrees with the simulator; GPU memory is its plan', async () => {
    const low = await scrapedRun(4);
    const afterLow = await truth();
    const high = await scrapedRun(32);
    const afterHigh = await truth();
    const lowKv = low.memory?.kvCacheUsage?.max as number;
    const highKv = high.memory?.kvCacheUsage?.max as number;
    assert.ok(highKv > 4 * lowKv, `KV peak ${lowKv} at 4, ${highKv} at 32`);
    // The simulator's own peak (used blocks / all blocks); scrapes every 50 ms sample it.
    for (const [scraped, t] of [
      [lowKv, afterLow],
      [highKv, afterHigh],
    ] as const) {
      const peak = t.counters.peakUsedBlocks / t.memory.numGpuBlocks;
      assert.ok(scraped <= peak + 1e-9, `scraped ${scraped} above the true peak ${peak}`);
      assert.ok(scraped >= 0.75 * peak, `scraped ${scraped} far below the true peak ${peak}`);
    }
    for (const [m, concurrency] of [
      [low, 4],
      [high, 32],
    ] as const) {
      const running = m.memory?.running?.max as number;
      assert.ok(running <= concurrency && running >= 0.75 * concurrency, `running ${running}`);
    }
    assert.equal(high.memory?.generationTokens, 64 * 256);
    assert.equal(high.memory?.promptTokens, 64 * 1024);
    assert.equal(high.memory?.preemptions, 0);
    // dcgm-exporter's framebuffer gauges: the memory plan, in whole MiB, on every GPU.
    const m = afterHigh.memory;
    const gpu = high.memory?.gpuMemoryUsedBytes;
    assert.equal(gpu?.max, Math.round(m.deviceUsedBytes / MIB) * MIB * afterHigh.tp);
    assert.equal(gpu?.mean, gpu?.max, 'the plan does not move');
    assert.equal(gpu?.total, Math.round(m.totalBytes / MIB) * MIB * afterHigh.tp);
    assert.deepEqual(high.warnings, []);
  });

  test('probing /metrics: Prometheus text yes; JSON, 404 and a closed port no', async () => {
    const yes = await probeMetrics(`${sim.url}/metrics`);
    assert.ok(yes.ok && yes.series > 50, JSON.stringify(yes));
    assert.deepEqual(await probeMetrics(`${sim.url}/v1/models`), {
      ok: false,
      reason: 'not Prometheus text',
    });
    assert.deepEqual(await probeMetrics(`${sim.url}/no-such-path`), {
      ok: false,
      reason: 'HTTP 404',
    });
    assert.deepEqual(await probeMetrics('http://127.0.0.1:9/metrics', {}, 1000), {
      ok: false,
      reason: 'ECONNREFUSED',
    });
  });

  test('CLI with --url: /metrics probed and scraped by default; --no-server-metrics skips it', async () => {
    const dir = tempDir('ig-tm-');
    const args = [
      'run',
      '--url',
      sim.url,
      '--requests',
      '6',
      '--concurrency',
      '3',
      '--tokenizer',
      'server',
    ];
    const on = await runCli([...args, '--out', join(dir, 'on'), '--scrape-interval', '0.2']);
    assert.equal(on.code, 0, on.stderr);
    assert.match(on.stderr, new RegExp(`scraping ${sim.url}/metrics during the run`));
    const summary = JSON.parse(readFileSync(join(dir, 'on', 'summary.json'), 'utf8')) as {
      serverMetrics: ServerMetricsSummary;
    };
    assert.ok(summary.serverMetrics.memory?.kvCacheUsage);
    const manifest = JSON.parse(readFileSync(join(dir, 'on', 'manifest.json'), 'utf8'));
    assert.equal(manifest.plan.telemetry.metrics, 'default');
    const off = await runCli([...args, '--out', join(dir, 'off'), '--no-server-metrics']);
    assert.equal(off.code, 0, off.stderr);
    assert.equal(off.stderr, '');
    assert.ok(!existsSync(join(dir, 'off', 'telemetry.jsonl')));
    assert.ok(!/Server metrics/.test(off.stdout));
  });
});

describe('infergauge run carries the memory story', { timeout: 180_000 }, () => {
  test('the built-in simulator by default: telemetry.jsonl, the memory block, one line', async () => {
    const out = join(tempDir('ig-tm-'), 'run');
    const result = await runCli(['run', '--requests', '20', '--concurrency', '8', '--out', out]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, '');
    const lines = readFileSync(join(out, 'telemetry.jsonl'), 'utf8').trim().split('\n');
    assert.ok(lines.length >= 2);
    const snapshots = lines.map((l) => JSON.parse(l) as TelemetrySnapshot);
    assert.ok(snapshots.every((s) => s.source === 'prometheus' && s.values && s.at >= 0));
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary & {
      serverMetrics: ServerMetricsSummary;
    };
    const memory = summary.serverMetrics.memory;
    // Scrapes every second can land between two waves of this closed loop, when nothing runs:
    // the KV figures are there, whatever they caught.
    assert.ok(memory?.kvCacheUsage && memory.running && memory.waiting, JSON.stringify(memory));
    assert.equal(memory?.generationTokens, 20 * 128);
    assert.ok((memory?.gpuMemoryUsedBytes?.max ?? 0) > 20 * 1024 * MIB);
    assert.match(result.stdout, /Server memory: KV cache peak \d+% \(mean \d+%\), preemptions 0/);
  });

  test('--gpu-memory polls nvidia-smi (a stand-in on PATH here)', { skip: !linux }, async () => {
    const dir = tempDir('ig-smi-');
    const smi = join(dir, 'nvidia-smi');
    const csv = new URL('nvidia-smi-2gpu-noheader.csv', FIXTURES).pathname;
    writeFileSync(smi, `#!/bin/sh\ncat '${csv}'\n`);
    chmodSync(smi, 0o755);
    const out = join(dir, 'run');
    const result = await runCli(
      ['run', '--requests', '4', '--no-server-metrics', '--gpu-memory', '--out', out],
      { PATH: `${dir}:${process.env.PATH}` },
    );
    assert.equal(result.code, 0, result.stderr);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as {
      serverMetrics: ServerMetricsSummary;
    };
    assert.deepEqual(summary.serverMetrics.memory?.gpuMemoryUsedBytes, {
      mean: (72611 + 72549) * MIB,
      max: (72611 + 72549) * MIB,
      total: 2 * 81559 * MIB,
    });
    assert.equal(summary.serverMetrics.memory?.kvCacheUsage, undefined);
    const sources = new Set(
      readFileSync(join(out, 'telemetry.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as TelemetrySnapshot).source),
    );
    assert.deepEqual([...sources], ['nvidia-smi']);
  });

  test('bad telemetry options name the flag and an example, exit 2', async () => {
    const bad = await runCli([
      'run',
      '--metrics-url',
      'not-a-url',
      '--dcgm-url',
      'ftp://gpu-host/metrics',
      '--server-pid',
      'abc',
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--metrics-url must be an http:\/\/ or https:\/\/ URL \(for example/);
    assert.match(bad.stderr, /--dcgm-url must be an http:\/\/ or https:\/\/ URL \(for example/);
    assert.match(bad.stderr, /--server-pid must be a number \(for example --server-pid/);
    const clash = await runCli([
      'run',
      '--no-server-metrics',
      '--metrics-url',
      'http://127.0.0.1:8000/metrics',
    ]);
    assert.equal(clash.code, 2);
    assert.match(clash.stderr, /--no-server-metrics and --metrics-url contradict/);
    const local = await runCli(['run', '--gpu-memory', '--server-pid', String(2 ** 22 + 12345)], {
      PATH: '/nonexistent',
    });
    assert.equal(local.code, 2);
    assert.match(local.stderr, /--gpu-memory polls nvidia-smi, which is not on PATH/);
    assert.match(local.stderr, /for example --dcgm-url http:\/\/gpu-host:9400\/metrics/);
    if (linux) assert.match(local.stderr, /--server-pid \d+: no such process/);
    const virtual = await runCli(['run', '--simulate', '--dcgm-url', 'http://h:9400/metrics']);
    assert.equal(virtual.code, 2);
    assert.match(virtual.stderr, /need a running server; --simulate has none/);
  });
});
