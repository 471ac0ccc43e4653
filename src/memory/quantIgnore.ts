/**
 * A quantised checkpoint's modules that stay unquantised: `quantization_config`'s ignore list
 * resolved against the model's linear layers, by the rule the serving engine applies to it.
 * Meta's Llama-3.1-405B-Instruct-FP8 (fbgemm_fp8) keeps every attention projection and the
 * first and last layers' MLPs in bf16: read as all-fp8 its weights come out 16 % light and the
 * KV pool beside them far too large.
 *
 * The key names and match rules are vLLM's (vllm-project/vllm):
 * - fp8 (`Fp8Config`): `ignored_layers`, else `modules_to_not_convert`; exact names
 *   (layers/quantization/fp8.py @ 1436674b, `is_layer_skipped` in utils/quant_utils.py @ 01693a61).
 * - fbgemm_fp8: `modules_to_not_convert`, exact names (fbgemm_fp8.py @ 5deacad0).
 * - compressed-tensors: `ignore`, exact names or `re:` patterns matched from the start of the name
 *   (`re.match`; compressed_tensors/utils.py @ aff237f9, `_is_equal_or_regex_match`).
 * - modelopt: `exclude_modules` (hf_quant_config.json's `quantization`) or `ignore` (config.json);
 *   exact, substring, or fnmatch wildcard (modelopt.py @ c9a59901, `is_layer_excluded`).
 * - awq, awq_marlin: `modules_to_not_convert`, substring of the name (awq.py @ 92d756e9,
 *   `is_layer_skipped_awq`).
 * - bitsandbytes: `llm_int8_skip_modules`, a dot-separated component or a leading path of the
 *   name (bitsandbytes.py @ 5a6541db, `is_layer_skipped_bnb`).
 * - gptq, gptq_marlin: `dynamic` entries `-:REGEX` skip the modules they match (`re.match`;
 *   utils/gptq_utils.py, `get_dynamic_override`).
 *
 * Routed experts are one fused module per layer in vLLM (`FusedMoE`, prefix `…experts`), so a
 * layer's experts are kept or quantised together, as the engine decides for that prefix
 * (`is_layer_skipped`'s experts clause: an ignore entry naming experts that contains it).
 * MoE routers are not in the list: the engines build them unquantised (vLLM's MoE blocks create
 * `gate` with `quant_config=None`, models/mixtral.py), which `weightBytes` counts for any
 * quantised format.
 */

import type { Dtype, UnquantisedWeights } from './dtype.js';
import type { ModelSpec } from './model.js';

/** How an engine matches one module name against the ignore list. */
export type IgnoreRule =
  | 'exact'
  | 'regex'
  | 'wildcard'
  | 'substring'
  | 'component'
  | 'gptq-dynamic';

/** An ignore list read from a quantization_config, with the rule that applies it. */
export interface IgnoreList {
  /** The config key it was read from (`quantization_config.ignore`), for messages. */
  key: string;
  entries: string[];
  rule: IgnoreRule;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const strings = (v: unknown): string[] | undefined =>
  Array.isArray(v) && v.length > 0 && v.every((s) => typeof s === 'string') ? v : undefined;

/** The ignore list of a quantization_config under `method` (lower-case quant_method), if any. */
export function readIgnoreList(q: Json, method: string): IgnoreList | undefined {
  const from = (key: string, rule: IgnoreRule): IgnoreList | undefined => {
    const entries = strings(q[key]);
    return entries ? { key: `quantization_config.${key}`, entries, rule } : undefined;
  };
  switch (method) {
    case 'fp8':
      return from('ignored_layers', 'exact') ?? from('modules_to_not_convert', 'exact');
    case 'fbgemm_fp8':
      return from('modules_to_not_convert', 'exact');
    case 'compressed-tensors':
      return from('ignore', 'regex');
    case 'modelopt': {
      const legacy = isObject(q.quantization) ? strings(q.quantization.exclude_modules) : undefined;
      if (legacy) {
        return {
          key: 'quantization_config.quantization.exclude_modules',
          entries: legacy,
          rule: 'wildcard',
        };
      }
      return from('exclude_modules', 'wildcard') ?? from('ignore', 'wildcard');
    }
    case 'awq':
    case 'awq_marlin':
      return from('modules_to_not_convert', 'substring');
    case 'bitsandbytes':
      return from('llm_int8_skip_modules', 'component');
    case 'gptq':
    case 'gptq_marlin': {
      if (!isObject(q.dynamic)) return undefined;
      // All of them, in order: the first pattern that matches decides (a `+:` one keeps it quantised).
      const entries = Object.keys(q.dynamic);
      return entries.some((k) => k.startsWith('-:'))
        ? { key: 'quantization_config.dynamic', entries, rule: 'gptq-dynamic' }
        : undefined;
    }
    default:
      return undefined;
  }
}

/** Python's `re.match`: anchored at the start only. Undefined for a pattern JS cannot read. */
function startPattern(pattern: string): RegExp | undefined {
  try {
    return new RegExp(`^(?:${pattern})`);
  } catch {
    return undefined;
  }
}

/** fnmatch's `*` and `?` over the whole name. */
function wildcardPattern(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

/** A predicate on module names for `list`, and the entries it could not read. */
export function ignoreMatcher(list: IgnoreList): {
  matches: (name: string) => boolean;
  unreadable: string[];
} {
  const unreadable: string[] = [];
  const exact = new Set(list.entries);
  switch (list.rule) {
    case 'exact': {
      const expertEntries = list.entries.filter((e) => e.includes('experts'));
      return {
        matches: (name) =>
          exact.has(name) ||
          (name.endsWith('.experts') && expertEntries.some((e) => e.includes(name))),
        unreadable,
      };
    }
    case 'regex': {
      const patterns: RegExp[] = [];
      for (const e of list.entries) {
        if (!e.startsWith('re:')) continue;
        const re = startPattern(e.slice(3));
        if (re) patterns.push(re);
        else unreadable.push(e);
      }
      return {
        matches: (name) => exact.has(name) || patterns.some((p) => p.test(name)),
        unreadable,
      };
    }
    case 'gptq-dynamic': {
      const patterns: { skip: boolean; re: RegExp }[] = [];
      for (const e of list.entries) {
        const skip = e.startsWith('-:');
        const re = startPattern(skip || e.startsWith('+:') ? e.slice(2) : e);
        if (re) patterns.push({ skip, re });
        else unreadable.push(e);
      }
      return {
        matches: (name) => patterns.find((p) => p.re.test(name))?.skip === true,
        unreadable,
      };
    }
    case 'wildcard': {
      const patterns = list.entries.map(wildcardPattern);
      return {
        matches: (name) =>
          exact.has(name) ||
          list.entries.some((e) => name.includes(e)) ||
          patterns.some((p) => p.test(name)),
        unreadable,
      };
    }
    case 'substring':
      return { matches: (name) => list.entries.some((e) => name.includes(e)), unreadable };
    case 'component':
      return {
        matches: (name) => {
          const parts = name.split('.');
          if (list.entries.some((e) => parts.includes(e))) return true;
          for (let i = 1; i <= parts.length; i++) {
            if (exact.has(parts.slice(0, i).join('.'))) return true;
          }
          return false;
        },
        unreadable,
      };
  }
}

/** One linear module of the checkpoint (its Hugging Face name) and its parameter count. */
export interface LinearModule {
  name: string;
  params: number;
  /** A layer's routed experts, all of them (one module in the engine). */
  experts?: boolean;
}

/** Where a family keeps its MoE block: Mixtral's `block_sparse_moe` (experts w1/w2/w3), else `mlp`. */
function moeNames(modelType: string): { block: string; proj: [string, string, string] } {
  return modelType === 'mixtral'
    ? { block: 'block_sparse_moe', proj: ['w1', 'w3', 'w2'] }
    : { block: 'mlp', proj: ['gate_proj', 'up_proj', 'down_proj'] };
}

/**
 * The model's linear modules under their checkpoint names (`model.layers.N.self_attn.q_proj`),
 * with parameter counts that add up to `paramCounts`' linear weights (norms, biases, routers and
 * the embedding excepted). MoE models' dense layers are taken to be the first ones (DeepSeek's
 * `first_k_dense_replace`; Qwen's `mlp_only_layers` positions are not kept by the spec).
 */
export function linearModules(model: ModelSpec, modelType: string): LinearModule[] {
  const d = model.hiddenSize;
  const out: LinearModule[] = [];
  const attention: [string, number][] = [];
  if (model.mla) {
    const a = model.mla;
    const qHead = a.nopeHeadDim + a.ropeHeadDim;
    if (a.qLoraRank !== undefined) {
      attention.push(['q_a_proj', d * a.qLoraRank]);
      attention.push(['q_b_proj', a.qLoraRank * model.queryHeads * qHead]);
    } else {
      attention.push(['q_proj', d * model.queryHeads * qHead]);
    }
    attention.push(['kv_a_proj_with_mqa', d * (a.kvLoraRank + a.ropeHeadDim)]);
    attention.push(['kv_b_proj', a.kvLoraRank * model.queryHeads * (a.nopeHeadDim + a.vHeadDim)]);
    attention.push(['o_proj', model.queryHeads * a.vHeadDim * d]);
  } else {
    attention.push(['q_proj', d * model.queryHeads * model.headDim]);
    attention.push(['k_proj', d * model.kvHeads * model.headDim]);
    attention.push(['v_proj', d * model.kvHeads * model.headDim]);
    attention.push(['o_proj', model.queryHeads * model.headDim * d]);
  }
  const moe = model.moe;
  const names = moeNames(modelType);
  const sharedBlock = modelType === 'qwen2_moe' ? 'shared_expert' : 'shared_experts';
  for (let i = 0; i < model.layers; i++) {
    const layer = `model.layers.${i}`;
    for (const [n, params] of attention) out.push({ name: `${layer}.self_attn.${n}`, params });
    if (!moe || i < moe.denseLayers) {
      for (const n of ['gate_proj', 'up_proj', 'down_proj']) {
        out.push({ name: `${layer}.mlp.${n}`, params: d * model.ffnSize });
      }
      continue;
    }
    out.push({
      name: `${layer}.${names.block}.experts`,
      params: moe.experts * 3 * d * moe.expertFfnSize,
      experts: true,
    });
    if (moe.sharedExperts > 0) {
      for (const n of ['gate_proj', 'up_proj', 'down_proj']) {
        out.push({
          name: `${layer}.${names.block}.${sharedBlock}.${n}`,
          params: moe.sharedExperts * d * moe.expertFfnSize,
        });
      }
    }
  }
  return out;
}

/**
 * The weights `list` keeps unquantised in `model`, at `dtype`; undefined when it keeps none of
 * its linear layers (`lm_head` alone: the embedding and lm_head are counted in 16 bit anyway).
 */
export function unquantisedWeights(
  model: ModelSpec,
  modelType: string,
  list: IgnoreList,
  dtype: Dtype,
): { weights?: UnquantisedWeights; unreadable: string[] } {
  const { matches, unreadable } = ignoreMatcher(list);
  let denseParams = 0;
  let expertParams = 0;
  let modules = 0;
  for (const m of linearModules(model, modelType)) {
    if (!matches(m.name)) continue;
    modules++;
    if (m.experts) expertParams += m.params;
    else denseParams += m.params;
  }
  return {
    ...(modules > 0 ? { weights: { dtype, denseParams, expertParams, modules } } : {}),
    unreadable,
  };
}
