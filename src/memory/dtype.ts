/** Number formats for weights, the KV cache and activations. */
export const DTYPES = ['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4'] as const;
export type Dtype = (typeof DTYPES)[number];

/** Bytes per element (int4 packs two per byte, before any group scales). */
export const DTYPE_BYTES: Record<Dtype, number> = {
  fp32: 4,
  bf16: 2,
  fp16: 2,
  fp8: 1,
  int8: 1,
  int4: 0.5,
};

/**
 * How the weights are stored. Quantised checkpoints (fp8, int8, int4 AWQ/GPTQ) keep the
 * embedding, lm_head and norms in 16 bit, as the published checkpoints do.
 */
export interface WeightFormat {
  dtype: Dtype;
  /** int4 group size: each group of this many weights carries an fp16 scale and a 4-bit zero. */
  groupSize?: number;
  /** Linear layers the checkpoint keeps unquantised (its quantization_config's ignore list). */
  unquantised?: UnquantisedWeights;
}

/** The weights a quantised checkpoint keeps unquantised, at `dtype` (its config's torch_dtype). */
export interface UnquantisedWeights {
  dtype: Dtype;
  /** Parameters of kept linear layers outside the routed experts (attention, dense MLPs, shared experts). */
  denseParams: number;
  /** Parameters of kept routed experts (whole layers' experts). */
  expertParams: number;
  /** Linear modules kept (a layer's routed experts count as one). */
  modules: number;
}

export const DEFAULT_INT4_GROUP_SIZE = 128;

/**
 * Bytes per quantised linear-layer weight. int4 at group size g: 4 + (16 + 4)/g bits (an fp16
 * scale and a packed 4-bit zero point per group, vLLM's GPTQ/AWQ tensor shapes): 4.156 bits at
 * g=128. fp8/int8 scales are per tensor or channel and negligible.
 */
export function weightBytesPerParam(format: WeightFormat): number {
  if (format.dtype !== 'int4') return DTYPE_BYTES[format.dtype];
  const g = format.groupSize ?? DEFAULT_INT4_GROUP_SIZE;
  return (4 + 20 / g) / 8;
}

/** Parses "bf16", "fp8", "int4", "int4-g64", "awq", "gptq-g32" into a weight format. */
export function parseWeightFormat(text: string): WeightFormat | undefined {
  const t = text.toLowerCase().trim();
  const alias: Record<string, Dtype> = { float16: 'fp16', bfloat16: 'bf16', float32: 'fp32' };
  if (Object.hasOwn(alias, t)) return { dtype: alias[t] };
  if ((DTYPES as readonly string[]).includes(t)) {
    return t === 'int4'
      ? { dtype: 'int4', groupSize: DEFAULT_INT4_GROUP_SIZE }
      : { dtype: t as Dtype };
  }
  const quant = /^(int4|awq|gptq)(?:-g(\d+))?$/.exec(t);
  if (!quant) return undefined;
  const groupSize = quant[2] ? Number(quant[2]) : DEFAULT_INT4_GROUP_SIZE;
  return groupSize > 0 ? { dtype: 'int4', groupSize } : undefined;
}

export function formatWeightFormat(format: WeightFormat): string {
  return format.dtype === 'int4'
    ? `int4-g${format.groupSize ?? DEFAULT_INT4_GROUP_SIZE}`
    : format.dtype;
}

/** KV cache formats engines offer: 16-bit or 8-bit (fp8/int8). */
export const KV_DTYPES = ['bf16', 'fp16', 'fp8', 'int8', 'fp32'] as const;
export type KvDtype = (typeof KV_DTYPES)[number];
