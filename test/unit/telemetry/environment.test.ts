/**
 * What telemetry says about the server: GPUs from a DCGM exporter (fixture in dcgm-exporter's
 * own shape) and nvidia-smi's name, the engine by its metric names, info series as build facts,
 * and how later facts merge with what the server answered.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  environmentFromSnapshot,
  mergeEnvironment,
  parseGpuText,
} from '../../../src/telemetry/environment.js';
import { NVIDIA_SMI_INFO, parseNvidiaSmiCsv } from '../../../src/telemetry/gpu.js';
import { snapshotValues, type TelemetrySnapshot } from '../../../src/telemetry/snapshot.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => readFileSync(join(REPO, 'test/fixtures', name), 'utf8');
const snap = (source: TelemetrySnapshot['source'], body: string): TelemetrySnapshot => ({
  at: 0,
  source,
  values: snapshotValues(source, body),
});

describe('GPUs', () => {
  test('a DCGM exporter: the modelName, counted by gpu index', () => {
    const env = environmentFromSnapshot(snap('dcgm', fixture('dcgm-exporter-metrics.txt')));
    assert.deepEqual(env, { gpu: { type: 'NVIDIA H100 80GB HBM3', count: 2, source: 'dcgm' } });
  });

  test('nvidia-smi: the name column (queried last) as an info series per GPU', () => {
    const csv =
      'index, memory.used [MiB], memory.total [MiB], name\n0, 72611 MiB, 81559 MiB, NVIDIA H100 80GB HBM3\n1, 72549 MiB, 81559 MiB, NVIDIA H100 80GB HBM3\n';
    const info = parseNvidiaSmiCsv(csv).filter((s) => s.name === NVIDIA_SMI_INFO);
    assert.deepEqual(
      info.map((s) => s.labels),
      [
        { gpu: '0', name: 'NVIDIA H100 80GB HBM3' },
        { gpu: '1', name: 'NVIDIA H100 80GB HBM3' },
      ],
    );
    assert.deepEqual(environmentFromSnapshot(snap('nvidia-smi', csv)), {
      gpu: { type: 'NVIDIA H100 80GB HBM3', count: 2, source: 'nvidia-smi' },
    });
    // Without the header, in the order queried; a name with a comma stays whole.
    const bare = '0, 1024, 24576, NVIDIA RTX A5000, Laptop\n';
    assert.deepEqual(environmentFromSnapshot(snap('nvidia-smi', bare)).gpu, {
      type: 'NVIDIA RTX A5000, Laptop',
      count: 1,
      source: 'nvidia-smi',
    });
    // The memory-only query of earlier versions names no GPU.
    assert.deepEqual(environmentFromSnapshot(snap('nvidia-smi', '0, 1024, 81559\n')), {});
  });

  test('two kinds of GPU are both named; hostile names are stripped and capped', () => {
    const body = [
      'DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA H100 80GB HBM3"} 1',
      'DCGM_FI_DEV_FB_USED{gpu="1",modelName="NVIDIA A100-SXM4-80GB"} 1',
    ].join('\n');
    assert.deepEqual(environmentFromSnapshot(snap('dcgm', body)).gpu, {
      type: 'NVIDIA H100 80GB HBM3 + NVIDIA A100-SXM4-80GB',
      count: 2,
      source: 'dcgm',
    });
    const hostile = `DCGM_FI_DEV_FB_USED{gpu="0",modelName="H100\\n\\u0007${'x'.repeat(5000)}"} 1`;
    const gpu = environmentFromSnapshot(snap('dcgm', hostile)).gpu;
    assert.ok(gpu && gpu.type.length <= 200 && !/\n/.test(gpu.type), gpu?.type);
    assert.match(gpu.type, /^H100 /);
  });

  test('--server-info gpu= in the forms people write', () => {
    assert.deepEqual(parseGpuText('H100x8'), { type: 'H100', count: 8 });
    assert.deepEqual(parseGpuText('8xH100'), { type: 'H100', count: 8 });
    assert.deepEqual(parseGpuText('A100-80GB * 4'), { type: 'A100-80GB', count: 4 });
    assert.deepEqual(parseGpuText('MI300Xx8'), { type: 'MI300X', count: 8 });
    assert.deepEqual(parseGpuText('rtx4090x2'), { type: 'rtx4090', count: 2 });
    assert.deepEqual(parseGpuText('H200'), { type: 'H200', count: 1 });
    // An x that is part of the name is not a count.
    assert.deepEqual(parseGpuText('RTX4090'), { type: 'RTX4090', count: 1 });
    assert.deepEqual(parseGpuText('gtx980'), { type: 'gtx980', count: 1 });
    assert.deepEqual(parseGpuText('H100x0'), { type: 'H100x0', count: 1 });
    assert.equal(parseGpuText('  '), undefined);
  });
});

describe("the server's own metrics", () => {
  test('the engine by its metric names; vLLM cache_config_info labels as build facts', () => {
    const env = environmentFromSnapshot(snap('prometheus', fixture('vllm-metrics.txt')));
    assert.equal(env.engine, 'vllm');
    const sglang = environmentFromSnapshot(snap('prometheus', fixture('sglang-metrics.txt')));
    assert.equal(sglang.engine, 'sglang');
    const tgi = environmentFromSnapshot(snap('prometheus', fixture('tgi-metrics.txt')));
    assert.equal(tgi.engine, 'tgi');
    const llama = environmentFromSnapshot(snap('prometheus', fixture('llamacpp-metrics.txt')));
    assert.equal(llama.engine, 'llamacpp');
    const info = environmentFromSnapshot(
      snap(
        'prometheus',
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="28391"} 1\n',
      ),
    );
    assert.deepEqual(info, {
      engine: 'vllm',
      buildInfo: {
        block_size: '16',
        cache_dtype: 'auto',
        gpu_memory_utilization: '0.9',
        num_gpu_blocks: '28391',
      },
    });
  });

  test('a *_build_info series, its secret-named labels dropped', () => {
    const env = environmentFromSnapshot(
      snap(
        'prometheus',
        'myserver_build_info{version="1.2.3",revision="abc",api_key="sk-x"} 1\nother_total 3\n',
      ),
    );
    assert.deepEqual(env, { buildInfo: { version: '1.2.3', revision: 'abc' } });
  });

  test('a failed scrape says nothing', () => {
    assert.deepEqual(environmentFromSnapshot({ at: 0, source: 'dcgm', error: 'ECONNREFUSED' }), {});
  });
});

describe('mergeEnvironment', () => {
  test("the server's answer keeps its engine and version; the metrics fill in the rest", () => {
    const merged = mergeEnvironment(
      { engine: 'infergauge-sim', engineVersion: '0.1.0', buildInfo: { a: '1' } },
      { engine: 'vllm', buildInfo: { a: '2', b: '3' } },
    );
    assert.deepEqual(merged, {
      engine: 'infergauge-sim',
      engineVersion: '0.1.0',
      buildInfo: { a: '1', b: '3' },
    });
    assert.deepEqual(mergeEnvironment({}, { engine: 'vllm' }), { engine: 'vllm' });
  });

  test('measured GPUs win over stated ones; DCGM over the server metrics', () => {
    const stated = { type: 'H100', count: 8, source: 'server-info' as const };
    const dcgm = { type: 'NVIDIA H100 80GB HBM3', count: 2, source: 'dcgm' as const };
    const server = { type: 'H100 SXM', count: 1, source: 'server-metrics' as const };
    assert.deepEqual(mergeEnvironment({ gpu: stated }, { gpu: dcgm }).gpu, dcgm);
    assert.deepEqual(mergeEnvironment({ gpu: dcgm }, { gpu: server }).gpu, dcgm);
    assert.deepEqual(mergeEnvironment({ gpu: stated }, { gpu: server }).gpu, server);
  });
});
