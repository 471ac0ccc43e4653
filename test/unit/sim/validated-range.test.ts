import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { engineOptions, loadPoints } from '../../../bench/simValidation.js';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec, paramCounts } from '../../../src/memory/model.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { runPlan } from '../../../src/session/run.js';
import type { EngineModelOptions } from '../../../src/sim/engineModel.js';
import { resolveEngine } from '../../../src/sim/options.js';
import { PERSONALITY_IDS, parseEngineVersion } from '../../../src/sim/personality.js';
import {
  OUTSIDE_VALIDATION_CODE,
  outsideValidation,
  VALIDATED_RANGES,
} from '../../../src/sim/validatedRange.js';
import { REPO } from '../../../tools/repo.js';

const SETS = ['points.json', 'points-round2.json'].map((f) =>
  join(REPO, 'test/fixtures/sim-validation', f),
);

/** Every point of the validation sets the simulator compares (not skipped), with its engine. */
const compared = SETS.flatMap((path) =>
  loadPoints(path).flatMap((p) => {
    const o = engineOptions(p);
    return typeof o === 'string' ? [] : [{ point: p, engine: o }];
  }),
);

const preset = <T>(v: T | undefined, what: string): T => {
  assert.ok(v, what);
  return v;
};
const h100 = preset(findGpuPreset('h100'), 'h100');
const llama8b = preset(findModelPreset('llama-3.1-8b'), 'llama-3.1-8b');

describe('each personality declares what its validation sets hold', () => {
  for (const id of PERSONALITY_IDS.filter((p) => p !== 'llamacpp')) {
    test(`${id}: GPU families, GPUs, model sizes and releases are the compared points'`, () => {
      const mine = compared.filter((c) => (c.engine.personality ?? 'vllm-v1') === id);
      const range = VALIDATED_RANGES[id];
      const families = new Set(mine.map((c) => c.engine.gpu.family));
      assert.deepEqual([...families].sort(), [...range.families].sort());
      assert.deepEqual(
        [...new Set(mine.map((c) => c.engine.gpu.id))].sort(),
        [...range.gpus].sort(),
      );
      assert.equal(
        mine.some((c) => c.engine.model.moe !== undefined),
        range.moe,
      );
      if (mine.length === 0) {
        assert.equal(range.paramsB, undefined);
        return;
      }
      const sizes = mine.map((c) => paramCounts(c.engine.model).total / 1e9);
      const [lo, hi] = preset(range.paramsB, 'paramsB');
      // Rounded to a tenth, outward.
      assert.ok(lo <= Math.min(...sizes) && Math.min(...sizes) - lo < 0.1, `${id} smallest`);
      assert.ok(hi >= Math.max(...sizes) && hi - Math.max(...sizes) < 0.1, `${id} largest`);
      // Per GPU family, the span of the releases its points name (where the personality takes
      // one): vLLM on ROCm is not vLLM on CUDA.
      const spans: Record<string, string[]> = {};
      for (const c of mine) {
        const v = c.engine.engineVersion && parseEngineVersion(c.engine.engineVersion);
        const family = c.engine.gpu.family;
        if (!v || !family) continue;
        spans[family] = [...(spans[family] ?? []), v.join('.')];
      }
      const order = (a: string, b: string) =>
        a.split('.').reduce((d, x, i) => d || Number(x) - Number(b.split('.')[i]), 0);
      const derived = Object.fromEntries(
        Object.entries(spans).map(([family, versions]) => {
          versions.sort(order);
          return [family, [versions[0], versions.at(-1)]];
        }),
      );
      const declared = Object.fromEntries(
        Object.entries(range.releaseSpans ?? {}).map(([family, span]) => [
          family,
          span.map((v) => parseEngineVersion(v)?.join('.')),
        ]),
      );
      assert.deepEqual(declared, derived);
      assert.equal(
        range.releaseSpans !== undefined,
        id === 'vllm-v1' || id === 'vllm-v0' || id === 'sglang',
      );
    });
  }
});

describe('outside the validated range: one notice, naming what is outside and what was validated', () => {
  test('no false alarm on any compared point of the validation sets', () => {
    assert.ok(compared.length > 100);
    for (const { point, engine } of compared) {
      assert.equal(outsideValidation(engine), undefined, point.id);
    }
  });

  test('llamacpp on a GPU preset (issue 57): the GPU is named, and its CPU validation', () => {
    const n = outsideValidation({ personality: 'llamacpp', gpu: h100, model: llama8b });
    assert.ok(n);
    assert.equal(n.code, OUTSIDE_VALIDATION_CODE);
    assert.equal(n.severity, 'info');
    assert.match(n.message, /llamacpp with GPU h100 \(hopper\)/);
    assert.match(n.message, /validated on cpu; llama\.cpp 80fb11a/);
    assert.ok(n.message.length <= 200, n.message);
  });

  test('llamacpp on a CPU with a small model: inside', () => {
    const cpu: GpuSpec = { ...h100, id: 'epyc', name: 'EPYC', family: 'cpu' };
    const tiny: ModelSpec = {
      ...llama8b,
      id: 'tiny',
      name: 'tiny',
      layers: 12,
      hiddenSize: 768,
      queryHeads: 12,
      kvHeads: 12,
      headDim: 64,
      ffnSize: 2048,
      vocabSize: 32000,
    };
    assert.ok(paramCounts(tiny).total > 0.1e9 && paramCounts(tiny).total < 0.2e9);
    assert.equal(outsideValidation({ personality: 'llamacpp', gpu: cpu, model: tiny }), undefined);
  });

  test('a vLLM V1 release before the validated ones, an MoE model, a GPU with no family', () => {
    const old = outsideValidation({ gpu: h100, model: llama8b, engineVersion: '0.7.3' });
    assert.match(
      old?.message ?? '',
      /vllm-v1 with release 0\.7\.3 on hopper \(validated there: 0\.8\.5 to 0\.19\.1\); validated on .*vLLM 0\.8\.5 to 0\.19\.1/,
    );
    assert.equal(
      outsideValidation({ gpu: h100, model: llama8b, engineVersion: '0.19.1' }),
      undefined,
    );
    // Per GPU family: 0.8.5 was compared on an H100, not on ROCm (only 0.9.1 there).
    const mi300x = preset(findGpuPreset('mi300x'), 'mi300x');
    assert.match(
      outsideValidation({ gpu: mi300x, model: llama8b, engineVersion: '0.8.5' })?.message ?? '',
      /vllm-v1 with release 0\.8\.5 on cdna3 \(validated there: 0\.9\.1\)/,
    );
    assert.equal(
      outsideValidation({ gpu: mi300x, model: llama8b, engineVersion: '0.9.1' }),
      undefined,
    );
    // vLLM V0 on ROCm: 0.4.3 and 0.6.2 were compared (and read TTFT -59 %); a later 0.6 is not.
    const v0 = (engineVersion: string) =>
      outsideValidation({ personality: 'vllm-v0', gpu: mi300x, model: llama8b, engineVersion });
    assert.match(
      v0('0.6.4')?.message ?? '',
      /vllm-v0 with release 0\.6\.4 on cdna3 \(validated there: 0\.4\.3 to 0\.6\.2\)/,
    );
    assert.equal(v0('0.6.2'), undefined);
    assert.equal(
      outsideValidation({
        personality: 'vllm-v0',
        gpu: h100,
        model: llama8b,
        engineVersion: '0.6.4',
      }),
      undefined,
    );
    const mixtral = preset(findModelPreset('mixtral-8x7b'), 'mixtral');
    assert.match(
      outsideValidation({ gpu: h100, model: mixtral })?.message ?? '',
      /with a mixture-of-experts model/,
    );
    const { family: _family, ...custom } = h100;
    assert.match(
      outsideValidation({ gpu: { ...custom, id: 'mine' }, model: llama8b })?.message ?? '',
      /GPU mine \(no family stated\)/,
    );
    assert.match(
      outsideValidation({ personality: 'vllm-v0.5', gpu: h100, model: llama8b })?.message ?? '',
      /vllm-v0\.5 with no published point; validated on nothing/,
    );
  });

  test('resolveEngine says it once in its warnings; the default setup says nothing', () => {
    const outside = resolveEngine({ enginePersonality: 'llamacpp', gpu: 'h100' });
    assert.deepEqual(outside.problems, []);
    assert.equal(outside.outsideValidation?.code, OUTSIDE_VALIDATION_CODE);
    assert.equal(
      outside.warnings.filter((w) => w === outside.outsideValidation?.message).length,
      1,
    );
    const inside = resolveEngine({});
    assert.equal(inside.outsideValidation, undefined);
    assert.deepEqual(
      inside.warnings.filter((w) => w.includes('validation')),
      [],
    );
  });
});

describe('the run records it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'infergauge-validated-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('run --simulate with llamacpp on an H100: manifest.server.simulatorWarnings holds the notice', async () => {
    const out = join(dir, 'run');
    const prepared = prepareRun({
      simulate: true,
      enginePersonality: 'llamacpp',
      gpu: 'h100',
      requests: '2',
      inputTokens: '16',
      outputTokens: '4',
      out,
    } as never);
    assert.deepEqual(prepared.problems, []);
    await runPlan(prepared as never, { html: false });
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    const notices = manifest.server.simulatorWarnings as { code: string; message: string }[];
    assert.deepEqual(
      notices.map((w) => w.code),
      [OUTSIDE_VALIDATION_CODE],
    );
    assert.match(notices[0].message, /GPU h100/);
  });

  test('a run inside the range records none', async () => {
    const out = join(dir, 'inside');
    const prepared = prepareRun({ simulate: true, requests: '2', outputTokens: '4', out } as never);
    await runPlan(prepared as never, { html: false });
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.server.simulatorWarnings, undefined);
  });
});

// The engine options the sets' points resolve to carry the fields the check reads.
const _typed: Pick<EngineModelOptions, 'gpu' | 'model' | 'personality' | 'engineVersion'> =
  compared[0].engine;
