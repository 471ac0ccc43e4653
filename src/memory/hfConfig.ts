/**
 * Reads a Hugging Face `config.json` into a ModelSpec (and the weight format its
 * `quantization_config` / `torch_dtype` implies), so `infergauge memory` and the simulated engine
 * work for any checkpoint with the standard transformers field names, not only the presets.
 *
 * Families mapped field by field: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe,
 * deepseek_v2, deepseek_v3, gemma, gemma2, phi3. Other model types are read with the same standard
 * names and a warning. A required field that is missing or invalid is an error naming the field and
 * the file; it is never replaced by a silent default.
 */

import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { EXIT, InfergaugeError } from '../errors.js';
import { parseJsonText } from '../jsonText.js';
import { DTYPE_BYTES, type Dtype, type WeightFormat } from './dtype.js';
import { findModelPreset, MODEL_PRESETS, type ModelSpec, type MoeSpec } from './model.js';
import { readIgnoreList, unquantisedWeights } from './quantIgnore.js';

/** A model read from a Hugging Face config.json, with the weight format its quantization_config / torch_dtype implies when present. */
export interface HfModel {
  spec: ModelSpec;
  weights?: WeightFormat;
  warnings: string[];
}

/** A config that cannot be read into a ModelSpec; the message names the file and the field. */
export class ModelConfigError extends InfergaugeError {
  constructor(
    message: string,
    /** The config file (or the name/path that was looked up). */
    readonly file?: string,
    /** The config.json field at fault, when one is. */
    readonly field?: string,
  ) {
    super(message, 'IG_MODEL_CONFIG', EXIT.invalidOptions);
  }
}

type Json = Record<string, unknown>;

/** Families whose config classes this reader follows field by field. */
const KNOWN_TYPES = new Set([
  'llama',
  'mistral',
  'mixtral',
  'qwen2',
  'qwen2_moe',
  'qwen3',
  'qwen3_moe',
  'deepseek_v2',
  'deepseek_v3',
  'gemma',
  'gemma2',
  'phi3',
]);

/** transformers' `tie_word_embeddings` default per config class (PretrainedConfig's is true). */
const TIED_BY_DEFAULT: Record<string, boolean> = {
  llama: false,
  mistral: false,
  mixtral: false,
  qwen2: false,
  qwen2_moe: false,
  qwen3: false,
  qwen3_moe: false,
  deepseek_v2: false,
  deepseek_v3: false,
  phi3: false,
  gemma: true,
  gemma2: true,
};

/** Families with q/k/v biases that their config does not flag (Qwen2 has no `attention_bias`). */
const IMPLICIT_QKV_BIAS = new Set(['qwen2', 'qwen2_moe']);

/** Families whose `sliding_window` applies to alternate layers only (not representable). */
const ALTERNATING_WINDOW = new Set(['gemma2', 'gemma3', 'gemma3_text', 'cohere2']);

const isObject = (v: unknown): v is Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const present = (v: unknown) => v !== undefined && v !== null;
/**
 * A config value as a message shows it: numbers, switches and short names (`bfloat16`,
 * `gptq`) as they are; anything longer by its kind and size. The file may be any file a path
 * names (a calibration's `--model`), and an error must not print what it holds.
 */
const show = (v: unknown): string => {
  if (v === undefined) return 'nothing';
  if (v === null || typeof v === 'boolean' || typeof v === 'number') return String(v);
  if (typeof v === 'string') {
    return /^[\w.+-]{1,32}$/.test(v) ? JSON.stringify(v) : `a text of ${v.length} characters`;
  }
  return Array.isArray(v) ? `a list of ${v.length}` : 'an object';
};

class Reader {
  readonly warnings: string[] = [];
  constructor(
    readonly cfg: Json,
    readonly file: string,
  ) {}

  fail(field: string, message: string): never {
    throw new ModelConfigError(`${this.file}: ${field} ${message}`, this.file, field);
  }

  /** The first of `names` present (not null) in the config, with its value. */
  pick(names: readonly string[]): { name: string; value: unknown } | undefined {
    for (const name of names) if (present(this.cfg[name])) return { name, value: this.cfg[name] };
    return undefined;
  }

  /** A required positive integer under one of `names` (the first is the canonical one). */
  int(names: readonly string[]): number {
    const hit = this.pick(names);
    const label = names.length > 1 ? `${names[0]} (or ${names.slice(1).join(', ')})` : names[0];
    if (!hit) this.fail(label, 'is missing: it is required, found nothing');
    return this.checkInt(hit.name, hit.value);
  }

  /** An optional positive integer: undefined when absent or null. */
  optInt(name: string): number | undefined {
    const v = this.cfg[name];
    return present(v) ? this.checkInt(name, v) : undefined;
  }

  /** An optional integer >= 0: undefined when absent or null. */
  optCount(name: string): number | undefined {
    const v = this.cfg[name];
    if (!present(v)) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
      this.fail(name, `must be an integer >= 0, found ${show(v)}`);
    }
    return v;
  }

  checkInt(name: string, v: unknown): number {
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
      this.fail(name, `must be a positive integer, found ${show(v)}`);
    }
    return v;
  }

  optBool(name: string): boolean | undefined {
    const v = this.cfg[name];
    if (!present(v)) return undefined;
    if (typeof v !== 'boolean') this.fail(name, `must be true or false, found ${show(v)}`);
    return v;
  }
}

/** Name shown for a config read from `id`: `_name_or_path`, else the checkpoint directory. */
function specName(top: Json, id: string): string {
  const named = top._name_or_path;
  if (typeof named === 'string' && named.trim() !== '') return named.trim();
  const lower = id.toLowerCase();
  // A Hugging Face checkpoint directory is named after the model: <dir>/config.json.
  if (basename(lower) === 'config.json') {
    const dir = basename(dirname(id));
    if (dir && dir !== '.' && dir !== '..') return dir;
  } else if (lower.endsWith('.json')) {
    return basename(id).slice(0, -'.json'.length);
  } else if (id) {
    const dir = basename(id);
    if (dir && dir !== '.' && dir !== '..') return dir;
  }
  return id;
}

function readMoe(r: Reader, modelType: string, layers: number): MoeSpec | undefined {
  const c = r.cfg;
  let moe: MoeSpec | undefined;
  if (present(c.n_routed_experts)) {
    // DeepSeek V2/V3 (and Kimi K2): routed + shared experts, the first k layers dense.
    const experts = r.int(['n_routed_experts']);
    const topK = r.int(['num_experts_per_tok']);
    const expertFfnSize = r.int(['moe_intermediate_size']);
    let sharedExperts = r.optCount('n_shared_experts');
    if (sharedExperts === undefined) {
      sharedExperts = 0;
      r.warnings.push('n_shared_experts is absent: no shared experts counted');
    }
    let denseLayers = r.optCount('first_k_dense_replace') ?? 0;
    const freq = r.optInt('moe_layer_freq') ?? 1;
    if (freq > 1) {
      let moeLayers = 0;
      for (let i = denseLayers; i < layers; i++) if (i % freq === 0) moeLayers++;
      r.warnings.push(
        `moe_layer_freq ${freq}: ${moeLayers} of ${layers} layers are MoE; counted as ` +
          `${layers - moeLayers} dense layers (the count is exact, their positions are not modelled)`,
      );
      denseLayers = layers - moeLayers;
    }
    moe = { experts, topK, expertFfnSize, sharedExperts, denseLayers };
  } else if (present(c.num_local_experts)) {
    // Mixtral: every layer is MoE, each expert the size of the dense MLP.
    const experts = r.int(['num_local_experts']);
    const topK = r.int(['num_experts_per_tok']);
    const expertFfnSize = r.int(['intermediate_size']);
    moe = { experts, topK, expertFfnSize, sharedExperts: 0, denseLayers: 0 };
  } else if (present(c.num_experts) && present(c.moe_intermediate_size)) {
    // Qwen2-MoE / Qwen3-MoE.
    const experts = r.int(['num_experts']);
    const topK = r.int(['num_experts_per_tok']);
    const expertFfnSize = r.int(['moe_intermediate_size']);
    let sharedExperts = 0;
    const sharedSize = r.optCount('shared_expert_intermediate_size') ?? 0;
    if (sharedSize > 0) {
      sharedExperts = Math.max(1, Math.round(sharedSize / expertFfnSize));
      const exact = sharedExperts * expertFfnSize === sharedSize;
      r.warnings.push(
        `shared expert of intermediate size ${sharedSize} counted as ${sharedExperts} expert(s) of ` +
          `${expertFfnSize}${exact ? '' : ' (approximate)'}; its sigmoid gate (hidden_size per layer) is not counted`,
      );
    }
    const step = r.optInt('decoder_sparse_step') ?? 1;
    const mlpOnly = c.mlp_only_layers;
    if (present(mlpOnly) && !Array.isArray(mlpOnly)) {
      r.fail('mlp_only_layers', `must be a list of layer indices, found ${show(mlpOnly)}`);
    }
    const denseSet = new Set(Array.isArray(mlpOnly) ? mlpOnly : []);
    let moeLayers = 0;
    for (let i = 0; i < layers; i++) if (!denseSet.has(i) && (i + 1) % step === 0) moeLayers++;
    const denseLayers = layers - moeLayers;
    if (denseLayers > 0) {
      r.warnings.push(
        `${denseLayers} of ${layers} layers use the dense MLP (mlp_only_layers / decoder_sparse_step); ` +
          'the count is exact, their positions are not modelled',
      );
    }
    moe = { experts, topK, expertFfnSize, sharedExperts, denseLayers };
  } else if (present(c.num_experts) || present(c.num_experts_per_tok)) {
    r.warnings.push(
      `model_type ${modelType} looks like a mixture of experts but its expert fields are not ones ` +
        'this reader maps; read as a dense model',
    );
  }
  if (moe && moe.topK > moe.experts) {
    r.fail(
      'num_experts_per_tok',
      `(${moe.topK}) must not exceed the number of experts (${moe.experts})`,
    );
  }
  return moe;
}

function readSlidingWindow(r: Reader, modelType: string, layers: number, maxContext: number) {
  const c = r.cfg;
  const window = c.sliding_window;
  if (typeof window !== 'number') return undefined;
  if (c.use_sliding_window === false) return undefined; // Qwen2 carries a window it does not use.
  const w = r.checkInt('sliding_window', window);
  if (w >= maxContext) return undefined;
  if (ALTERNATING_WINDOW.has(modelType)) {
    r.warnings.push(
      `sliding_window ${w} applies to alternate layers only in ${modelType}; not modelled ` +
        '(the KV cache is sized as if every layer attended to the full context)',
    );
    return undefined;
  }
  const types = c.layer_types;
  if (Array.isArray(types) && types.length > 0) {
    const sliding = types.filter((t) => t === 'sliding_attention').length;
    if (sliding === 0) return undefined;
    if (sliding < types.length) {
      r.warnings.push(
        `sliding_window ${w} applies to ${sliding} of ${types.length} layers (layer_types); not ` +
          'modelled (the KV cache is sized as if every layer attended to the full context)',
      );
      return undefined;
    }
    return w;
  }
  if (c.use_sliding_window === true && typeof c.max_window_layers === 'number') {
    // Qwen2: layers from max_window_layers on use the window.
    const from = c.max_window_layers;
    if (from >= layers) return undefined;
    if (from > 0) {
      r.warnings.push(
        `sliding_window ${w} applies to layers ${from}..${layers - 1} only (max_window_layers); ` +
          'not modelled (the KV cache is sized as if every layer attended to the full context)',
      );
      return undefined;
    }
  }
  return w;
}

const TORCH_DTYPES: Record<string, Dtype> = {
  bfloat16: 'bf16',
  float16: 'fp16',
  half: 'fp16',
  float32: 'fp32',
  float: 'fp32',
};

function int4(groupSize: unknown, r: Reader, method: string, hidden: number): WeightFormat {
  if (typeof groupSize === 'number' && Number.isInteger(groupSize) && groupSize > 0) {
    return { dtype: 'int4', groupSize };
  }
  if (groupSize === -1) {
    r.warnings.push(
      `${method}: per-channel int4 (group_size -1); scale overhead approximated with a group size ` +
        `of hidden_size (${hidden})`,
    );
    return { dtype: 'int4', groupSize: hidden };
  }
  r.fail(
    'quantization_config.group_size',
    `must be a positive integer or -1, found ${show(groupSize)}`,
  );
}

const quantizationConfig = (r: Reader, top: Json): Json | undefined =>
  isObject(top.quantization_config)
    ? top.quantization_config
    : isObject(r.cfg.quantization_config)
      ? r.cfg.quantization_config
      : undefined;

/** The config's 16-bit (or fp32) dtype: what a quantised checkpoint's kept modules are stored in. */
function torchDtype(r: Reader, top: Json): Dtype | undefined {
  const dtype = top.torch_dtype ?? top.dtype ?? r.cfg.torch_dtype ?? r.cfg.dtype;
  if (typeof dtype !== 'string') return undefined;
  const key = dtype.toLowerCase().replace(/^torch\./, '');
  return Object.hasOwn(TORCH_DTYPES, key) ? TORCH_DTYPES[key] : undefined;
}

/**
 * The modules a quantised checkpoint keeps unquantised (quantization_config's ignore list, by
 * the engine's rule: quantIgnore.ts), added to its weight format so the weights, the KV pool
 * beside them and the bytes read per step count them at their own width.
 */
function withIgnoreList(
  r: Reader,
  top: Json,
  spec: ModelSpec,
  modelType: string,
  weights: WeightFormat,
): WeightFormat {
  const q = quantizationConfig(r, top);
  if (!q || DTYPE_BYTES[weights.dtype] >= DTYPE_BYTES.fp16) return weights;
  const method = String(q.quant_method ?? '').toLowerCase();
  const list = readIgnoreList(q, method);
  if (!list) return weights;
  const keptDtype = torchDtype(r, top) ?? 'bf16';
  const { weights: kept, unreadable } = unquantisedWeights(spec, modelType, list, keptDtype);
  for (const e of unreadable) {
    r.warnings.push(
      `${list.key}: the pattern ${show(e)} is not one this reader can match; ignored`,
    );
  }
  if (!kept) return weights;
  const params = kept.denseParams + kept.expertParams;
  r.warnings.push(
    `${list.key} keeps ${kept.modules} linear module(s) (${(params / 1e9).toFixed(2)}B parameters) ` +
      `unquantised: counted in ${keptDtype}`,
  );
  return { ...weights, unquantised: kept };
}

/** The weight format the quantization config or dtype implies, or undefined (with a warning). */
function readWeights(r: Reader, top: Json, hidden: number): WeightFormat | undefined {
  const q = quantizationConfig(r, top);
  if (q) {
    const method = String(q.quant_method ?? '').toLowerCase();
    switch (method) {
      case 'awq':
      case 'gptq':
      case 'awq_marlin':
      case 'gptq_marlin': {
        const bits = q.bits ?? q.w_bit;
        const groupSize = q.group_size ?? q.q_group_size;
        if (bits === 4) return int4(groupSize, r, method, hidden);
        if (bits === 8) return { dtype: 'int8' };
        r.warnings.push(
          `${method} with bits ${show(bits)} is not a weight format this model knows; weights unset`,
        );
        return undefined;
      }
      case 'fp8':
      case 'fbgemm_fp8':
        return { dtype: 'fp8' };
      case 'modelopt': {
        // config.json's form holds quant_algo; hf_quant_config.json's nests it in `quantization`.
        const nested = isObject(q.quantization) ? q.quantization.quant_algo : undefined;
        const algo = String(q.quant_algo ?? nested ?? '').toUpperCase();
        if (algo === 'FP8') return { dtype: 'fp8' };
        r.warnings.push(`modelopt quant_algo ${show(q.quant_algo)} is not modelled; weights unset`);
        return undefined;
      }
      case 'compressed-tensors':
        return compressedTensors(q, r, hidden);
      case 'bitsandbytes': {
        if (q.load_in_8bit === true) return { dtype: 'int8' };
        if (q.load_in_4bit === true) {
          r.warnings.push(
            `bitsandbytes 4-bit (${String(q.bnb_4bit_quant_type ?? 'nf4')}) read as int4 with group ` +
              'size 64 (its block size); the scale layout differs from AWQ/GPTQ',
          );
          return { dtype: 'int4', groupSize: 64 };
        }
        r.warnings.push(
          'bitsandbytes config with neither load_in_8bit nor load_in_4bit; weights unset',
        );
        return undefined;
      }
      default:
        r.warnings.push(
          `quantization_config.quant_method ${show(q.quant_method)} is not one this reader maps; ` +
            'weights unset (pass the format explicitly)',
        );
        return undefined;
    }
  }
  const d = torchDtype(r, top);
  if (d) return { dtype: d };
  const dtype = top.torch_dtype ?? top.dtype ?? r.cfg.torch_dtype ?? r.cfg.dtype;
  if (typeof dtype === 'string') {
    r.warnings.push(`torch_dtype ${show(dtype)} is not one this reader maps; weights unset`);
  }
  return undefined;
}

function compressedTensors(q: Json, r: Reader, hidden: number): WeightFormat | undefined {
  const groups = isObject(q.config_groups) ? Object.values(q.config_groups) : [];
  const weights = groups.map((g) => (isObject(g) && isObject(g.weights) ? g.weights : undefined));
  const first = weights.find((w) => w !== undefined);
  if (!first) {
    r.warnings.push('compressed-tensors config without config_groups weights; weights unset');
    return undefined;
  }
  const same = weights.every(
    (w) =>
      w?.num_bits === first.num_bits &&
      w?.type === first.type &&
      w?.group_size === first.group_size,
  );
  if (!same) r.warnings.push('compressed-tensors config groups differ; the first group is used');
  const bits = first.num_bits;
  const type = String(first.type ?? 'int');
  if (bits === 8) return { dtype: type === 'float' ? 'fp8' : 'int8' };
  if (bits === 4 && type === 'int') {
    const g = first.group_size;
    if (present(g)) return int4(g, r, 'compressed-tensors', hidden);
    r.warnings.push(
      `compressed-tensors int4 with strategy ${show(first.strategy)} and no group_size; ` +
        `scale overhead approximated with a group size of hidden_size (${hidden})`,
    );
    return { dtype: 'int4', groupSize: hidden };
  }
  r.warnings.push(
    `compressed-tensors ${show(bits)}-bit ${type} weights are not a format this model knows; weights unset`,
  );
  return undefined;
}

/** Reads a parsed config.json; `file` names it in errors, `id` becomes the spec id. */
function fromConfig(config: unknown, id: string, file: string): HfModel {
  if (!isObject(config)) {
    throw new ModelConfigError(
      `${file}: expected a JSON object (a Hugging Face config.json), found ${Array.isArray(config) ? 'an array' : show(config)}`,
      file,
    );
  }
  const top = config;
  // Multimodal checkpoints (Llava, Mistral3, Gemma3, Qwen-VL) keep the language model in text_config.
  const nested =
    !present(top.num_hidden_layers) && !present(top.n_layer) && isObject(top.text_config);
  const r = new Reader(nested ? (top.text_config as Json) : top, file);
  if (nested)
    r.warnings.push('read the language model from text_config; the vision tower is not counted');

  const typeValue = r.cfg.model_type ?? top.model_type;
  const modelType = typeof typeValue === 'string' ? typeValue : '';
  if (!KNOWN_TYPES.has(modelType)) {
    r.warnings.push(
      `model_type ${show(typeValue)} is not a family this reader maps field by field; read with the ` +
        'standard names (gated MLP, RMSNorm), so the parameter count may be approximate',
    );
  }

  const layers = r.int(['num_hidden_layers', 'n_layer']);
  const hiddenSize = r.int(['hidden_size', 'n_embd']);
  const queryHeads = r.int(['num_attention_heads', 'n_head']);
  const ffnSize = r.int(['intermediate_size']);
  const vocabSize = r.int(['vocab_size']);
  const maxContext = r.int(['max_position_embeddings', 'n_positions']);

  let kvHeads = r.optInt('num_key_value_heads') ?? queryHeads;
  let headDim: number;
  const explicitHeadDim = r.optInt('head_dim');

  let mla: ModelSpec['mla'];
  if (present(r.cfg.kv_lora_rank)) {
    const qLoraRank = r.optInt('q_lora_rank');
    mla = {
      kvLoraRank: r.int(['kv_lora_rank']),
      ...(qLoraRank !== undefined ? { qLoraRank } : {}),
      ropeHeadDim: r.int(['qk_rope_head_dim']),
      nopeHeadDim: r.int(['qk_nope_head_dim']),
      vHeadDim: r.int(['v_head_dim']),
    };
    // MLA: every query head has its own K/V (decompressed from one latent); headDim is not used
    // by MLA arithmetic and is set to the value head size.
    kvHeads = queryHeads;
    headDim = mla.vHeadDim;
  } else {
    if (explicitHeadDim !== undefined) {
      headDim = explicitHeadDim;
    } else {
      if (hiddenSize % queryHeads !== 0) {
        r.fail(
          'head_dim',
          `is missing and hidden_size ${hiddenSize} is not divisible by num_attention_heads ` +
            `${queryHeads}, so it cannot be derived`,
        );
      }
      headDim = hiddenSize / queryHeads;
    }
    if (kvHeads > queryHeads) {
      r.fail(
        'num_key_value_heads',
        `(${kvHeads}) must not exceed num_attention_heads (${queryHeads})`,
      );
    }
    if (queryHeads % kvHeads !== 0) {
      r.fail(
        'num_key_value_heads',
        `(${kvHeads}) must divide num_attention_heads (${queryHeads}) for grouped-query attention`,
      );
    }
  }

  let tiedEmbeddings = r.optBool('tie_word_embeddings');
  if (tiedEmbeddings === undefined && nested) {
    const t = top.tie_word_embeddings;
    if (typeof t === 'boolean') tiedEmbeddings = t;
  }
  if (tiedEmbeddings === undefined) {
    const byFamily = Object.hasOwn(TIED_BY_DEFAULT, modelType)
      ? TIED_BY_DEFAULT[modelType]
      : undefined;
    if (byFamily !== undefined) {
      tiedEmbeddings = byFamily;
    } else {
      tiedEmbeddings = false;
      r.warnings.push(
        `tie_word_embeddings is absent and model_type ${show(typeValue)} has no known default; ` +
          'assumed false (an untied lm_head)',
      );
    }
  }

  const attentionBias = r.optBool('attention_bias');
  const qkvBias =
    attentionBias === true || r.optBool('qkv_bias') === true || IMPLICIT_QKV_BIAS.has(modelType);
  if (attentionBias === true && !mla) {
    r.warnings.push('attention_bias: the o_proj bias (hidden_size per layer) is not counted');
  }

  const ropeScaling = r.cfg.rope_scaling;
  if (isObject(ropeScaling)) {
    const type = String(ropeScaling.rope_type ?? ropeScaling.type ?? '');
    const factor = ropeScaling.factor;
    const original = ropeScaling.original_max_position_embeddings;
    if (
      ['yarn', 'linear', 'dynamic'].includes(type) &&
      typeof factor === 'number' &&
      typeof original === 'number' &&
      factor * original > maxContext
    ) {
      r.warnings.push(
        `rope_scaling ${type} x${factor} over ${original} tokens reaches ${factor * original}; ` +
          `maxContext kept at max_position_embeddings (${maxContext}), engines may allow more`,
      );
    }
  }

  const moe = readMoe(r, modelType, layers);
  const slidingWindow = readSlidingWindow(r, modelType, layers, maxContext);
  const format = readWeights(r, top, hiddenSize);

  const spec: ModelSpec = {
    id,
    name: specName(top, id),
    layers,
    hiddenSize,
    queryHeads,
    kvHeads,
    headDim,
    ffnSize,
    vocabSize,
    tiedEmbeddings,
    qkvBias,
    maxContext,
    ...(moe ? { moe } : {}),
    ...(mla ? { mla } : {}),
    ...(slidingWindow !== undefined ? { slidingWindow } : {}),
  };
  const weights = format && withIgnoreList(r, top, spec, modelType, format);
  return { spec, ...(weights ? { weights } : {}), warnings: r.warnings };
}

/** Maps a parsed Hugging Face config.json to a ModelSpec; `id` is the file it came from. Pure. */
export function modelSpecFromHfConfig(config: unknown, id: string): HfModel {
  return fromConfig(config, id, id);
}

/** The largest config.json read. */
const HF_CONFIG_MAX_BYTES = 4 * 1024 * 1024;

/** Reads `path`: a config.json file, or a checkpoint directory containing one. The spec id is `path`. */
export function readHfConfig(path: string): HfModel {
  let file = path;
  try {
    if (statSync(path).isDirectory()) {
      file = join(path, 'config.json');
      if (!existsSync(file)) {
        throw new ModelConfigError(`${path}: no config.json in this directory`, file);
      }
    }
  } catch (err) {
    if (err instanceof ModelConfigError) throw err;
    throw new ModelConfigError(`${path}: ${(err as Error).message}`, path);
  }
  let text: string;
  try {
    // A config.json is a few KiB; a path to anything else (a disk image, /dev/zero) must not
    // be read whole.
    const info = statSync(file);
    if (!info.isFile() || info.size > HF_CONFIG_MAX_BYTES) {
      throw new ModelConfigError(
        `${file}: ${info.isFile() ? `larger than any config.json (at most ${HF_CONFIG_MAX_BYTES / 1024 / 1024} MiB)` : 'not a regular file'}; is it the right path?`,
        file,
      );
    }
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ModelConfigError) throw err;
    throw new ModelConfigError(`${file}: cannot read it (${(err as Error).message})`, file);
  }
  const parsed = parseJsonText(text);
  if ('problem' in parsed) {
    throw new ModelConfigError(
      `${file}: ${parsed.problem}, so not a Hugging Face config.json`,
      file,
    );
  }
  return fromConfig(parsed.value, path, file);
}

const looksLikePath = (s: string) =>
  /[\\/]/.test(s) || s.toLowerCase().endsWith('.json') || s.startsWith('.');

/** A preset id/name, or a path to a config.json (file or directory). Throws ModelConfigError listing the preset ids when neither. */
export function resolveModel(nameOrPath: string): HfModel {
  const preferPath = looksLikePath(nameOrPath);
  if (preferPath && existsSync(nameOrPath)) return readHfConfig(nameOrPath);
  const preset = findModelPreset(nameOrPath);
  if (preset) return { spec: structuredClone(preset), warnings: [] };
  if (!preferPath && nameOrPath !== '' && existsSync(nameOrPath)) return readHfConfig(nameOrPath);
  const ids = MODEL_PRESETS.map((m) => m.id).join(', ');
  throw new ModelConfigError(
    `unknown model ${JSON.stringify(nameOrPath)}: not a preset (${ids}) and no such config.json ` +
      "file or checkpoint directory (download the model repository's config.json and pass its path)",
    nameOrPath,
  );
}
