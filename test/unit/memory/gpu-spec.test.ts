/**
 * `--gpu-spec FILE` (src/memory/gpuSpec.ts): a YAML or JSON description of a GPU becomes a
 * GpuSpec in base units; every mistake names the field and what it accepts; the spec drives the
 * simulator through the engine flags and the CLI.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { gpuSpecFromValue, loadGpuSpec } from '../../../src/memory/gpuSpec.js';
import { resolveEngineConfig } from '../../../src/sim/engineModel.js';
import { engineFromFlags } from '../../../src/sim/options.js';
import { runCli, tempDir } from '../../helpers/cli.js';

const dir = tempDir('ig-gpu-spec-');
const write = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const YAML_SPEC = `# RTX 6000 Ada, from its datasheet
name: RTX 6000 Ada
family: ada
memoryGiB: 47.99
bandwidthTBps: 0.96
peakTflops:
  bf16: 364.2
  fp8: 728.5
interconnect:
  kind: pcie
  busGBps: 20
  latencyUs: 1
  peerAccess: true
`;

const VALID = {
  name: 'Custom 64',
  memoryGB: 64,
  bandwidthTBps: 2.5,
  peakTflops: { bf16: 500, int8: 1000 },
  interconnect: { kind: 'nvlink', name: 'NVLink X', busGBps: 300, latencyUs: 0.5 },
};

/** The message loadGpuSpec/gpuSpecFromValue throws. */
function problem(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    return (err as Error).message;
  }
  assert.fail('expected an error');
}

describe('--gpu-spec files', () => {
  test('a YAML spec becomes the GpuSpec in base units', () => {
    const path = write('rtx6000.yaml', YAML_SPEC);
    const spec = loadGpuSpec(path);
    assert.equal(spec.name, 'RTX 6000 Ada');
    assert.equal(spec.id, path);
    assert.equal(spec.family, 'ada');
    assert.equal(spec.memoryBytes, Math.round(47.99 * 1024 ** 3));
    assert.equal(spec.memoryGB, 52);
    assert.equal(spec.bandwidthBytesPerS, 0.96e12);
    assert.deepEqual(spec.peakFlops, { bf16: 364.2e12, fp8: 728.5e12 });
    assert.deepEqual(spec.interconnect, {
      kind: 'pcie',
      name: 'pcie (20 GB/s bus)',
      busBytesPerS: 20e9,
      latencyS: 1e-6,
      peerAccess: true,
    });
  });

  test('a JSON spec reads the same way; memoryGB is decimal and the family optional', () => {
    const spec = loadGpuSpec(write('custom.json', JSON.stringify({ ...VALID, id: 'c64' })));
    assert.equal(spec.id, 'c64');
    assert.equal(spec.family, undefined);
    assert.equal(spec.memoryBytes, 64e9);
    assert.equal(spec.memoryGB, 64);
    assert.deepEqual(spec.peakFlops, { bf16: 500e12, int8: 1000e12 });
    assert.equal(spec.interconnect.name, 'NVLink X');
    assert.equal(spec.interconnect.busBytesPerS, 300e9);
    assert.equal(spec.interconnect.latencyS, 0.5e-6);
    assert.equal(spec.interconnect.peerAccess, undefined);
  });

  test('each mistake names its field and what it accepts', () => {
    const cases: [string, unknown, RegExp][] = [
      ['a typo', { ...VALID, bandwithTBps: 1 }, /unknown field "bandwithTBps"/],
      [
        'a nested typo',
        { ...VALID, peakTflops: { bf16: 1, fp16: 2 } },
        /unknown field "peakTflops.fp16"/,
      ],
      ['a missing field', { ...VALID, bandwidthTBps: undefined }, /bandwidthTBps: missing/],
      [
        'text for a number',
        { ...VALID, bandwidthTBps: '2 TB/s' },
        /bandwidthTBps: must be a finite number \(peak memory bandwidth in TB\/s/,
      ],
      ['zero', { ...VALID, peakTflops: { bf16: 0 } }, /peakTflops.bf16: must be above 0/],
      [
        'an unknown family',
        { ...VALID, family: 'volta' },
        /family: must be one of ampere, ada, hopper, blackwell, cdna3/,
      ],
      [
        'an unknown link',
        { ...VALID, interconnect: { ...VALID.interconnect, kind: 'infiniband' } },
        /interconnect.kind: must be one of nvlink, pcie, xgmi/,
      ],
      [
        'two memory sizes',
        { ...VALID, memoryGiB: 60 },
        /memoryGB: give the memory as one of memoryGB or memoryGiB/,
      ],
      [
        'no memory size',
        { ...VALID, memoryGB: undefined },
        /memoryGB: give the memory as one of memoryGB or memoryGiB/,
      ],
      ['not a mapping', ['a', 'list'], /\(top level\)/],
      // YAML's .inf and .nan, and figures no device has: named, never run as a GPU.
      [
        'infinite bandwidth',
        { ...VALID, bandwidthTBps: Number.POSITIVE_INFINITY },
        /bandwidthTBps: must be a finite number/,
      ],
      ['NaN memory', { ...VALID, memoryGB: Number.NaN }, /memoryGB: must be a finite number/],
      ['negative peak', { ...VALID, peakTflops: { bf16: -1 } }, /peakTflops.bf16: must be above 0/],
      [
        'a peak off by 1e6',
        { ...VALID, peakTflops: { bf16: 989e6 } },
        /peakTflops.bf16: must be at most/,
      ],
      ['a vanishing memory', { ...VALID, memoryGB: 1e-300 }, /memoryGB: must be at least 0.25/],
      [
        'a ring step of an hour',
        { ...VALID, interconnect: { ...VALID.interconnect, latencyUs: 3.6e9 } },
        /interconnect.latencyUs: must be at most/,
      ],
      [
        'a 1e308 bus',
        { ...VALID, interconnect: { ...VALID.interconnect, busGBps: 1e308 } },
        /interconnect.busGBps: must be at most/,
      ],
    ];
    for (const [what, value, message] of cases) {
      const got = problem(() => gpuSpecFromValue(value, 'spec.yaml'));
      assert.match(got, /^spec\.yaml: /, what);
      assert.match(got, message, `${what}: ${got}`);
    }
  });

  test('a missing file, a folder, a huge file and broken YAML say so', () => {
    assert.match(
      problem(() => loadGpuSpec(join(dir, 'nope.yaml'))),
      /nope\.yaml: no such file/,
    );
    const broken = write('broken.yaml', 'name: [unclosed\nmemoryGB: 1\n');
    assert.match(
      problem(() => loadGpuSpec(broken)),
      /broken\.yaml: not valid YAML or JSON/,
    );
    assert.match(
      problem(() => loadGpuSpec(dir)),
      /: cannot read it \(EISDIR\)/,
    );
    const huge = write('huge.yaml', `name: x\n${'#'.repeat(70_000)}\n`);
    assert.match(
      problem(() => loadGpuSpec(huge)),
      /huge\.yaml: too large for a GPU spec/,
    );
  });

  test('through the engine flags: the spec is the GPU, its family and link included', () => {
    const path = write('flags.yaml', YAML_SPEC);
    const { engine, problems } = engineFromFlags('llama-3-8b', { gpuSpec: path });
    assert.deepEqual(problems, []);
    assert.ok(engine);
    const config = resolveEngineConfig(engine);
    assert.equal(config.gpu.name, 'RTX 6000 Ada');
    assert.equal(config.gpu.interconnect.busBytesPerS, 20e9);
    const both = engineFromFlags('llama-3-8b', { gpuSpec: path, gpu: 'h100' });
    assert.match(both.problems.join('\n'), /--gpu and --gpu-spec both name the GPU; give one/);
    const typo = write('typo.yaml', YAML_SPEC.replace('bandwidthTBps', 'bandwidthTbps'));
    const bad = engineFromFlags('llama-3-8b', { gpuSpec: typo });
    assert.match(
      bad.problems.join('\n'),
      /--gpu-spec: .*typo\.yaml: .*unknown field "bandwidthTbps" \(did you mean "bandwidthTBps"\?\)/,
    );
  });

  test('end to end: run --simulate on a --gpu-spec GPU, and exit 2 on a bad one', async () => {
    const path = write('cli.yaml', YAML_SPEC);
    const out = join(dir, 'run');
    const ok = await runCli([
      'run',
      '--simulate',
      '--model',
      'llama-3-8b',
      '--gpu-spec',
      path,
      '--requests',
      '4',
      '--out',
      out,
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.match(manifest.server.simulator, /on 1x RTX 6000 Ada/);
    const bad = await runCli([
      'run',
      '--simulate',
      '--gpu-spec',
      write('cli-bad.yaml', YAML_SPEC.replace('kind: pcie', 'kind: token-ring')),
      '--requests',
      '1',
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--gpu-spec: .*interconnect\.kind: must be one of nvlink, pcie, xgmi/);
  });
});
