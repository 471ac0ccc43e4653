/**
 * Transformer model specs shared by the memory model (`infergauge memory`) and the simulated
 * serving engine (`sim/`). Shapes follow the Hugging Face `config.json` fields of each family.
 */

export interface MoeSpec {
  /** Routed experts per MoE layer. */
  experts: number;
  /** Routed experts each token uses. */
  topK: number;
  /** Intermediate size of one expert. */
  expertFfnSize: number;
  /** Always-on shared experts (DeepSeek); 0 for Mixtral. */
  sharedExperts: number;
  /** The first this-many layers are dense (DeepSeek `first_k_dense_replace`); 0 for Mixtral. */
  denseLayers: number;
}

/** Multi-head latent attention (DeepSeek-V2/V3): the KV cache holds one latent per token. */
export interface MlaSpec {
  kvLoraRank: number;
  /** Query low-rank projection; undefined projects queries directly from the hidden state. */
  qLoraRank?: number;
  ropeHeadDim: number;
  nopeHeadDim: number;
  vHeadDim: number;
}

export interface ModelSpec {
  /** Preset id, or the config path it was read from. */
  id: string;
  /** Human name, e.g. "Llama-3-8B". */
  name: string;
  layers: number;
  hiddenSize: number;
  queryHeads: number;
  /** KV heads: equal to queryHeads for MHA, fewer for GQA, 1 for MQA. */
  kvHeads: number;
  headDim: number;
  /** Dense MLP intermediate size (gated: three matrices of hidden x ffn). */
  ffnSize: number;
  vocabSize: number;
  /** lm_head shares the embedding matrix. */
  tiedEmbeddings: boolean;
  /** q/k/v projections carry a bias (Qwen2). */
  qkvBias: boolean;
  /** Longest context the model was trained for (`max_position_embeddings`). */
  maxContext: number;
  moe?: MoeSpec;
  mla?: MlaSpec;
  /** Sliding-window attention span in tokens, applied to every layer. */
  slidingWindow?: number;
}

/** Parameter counts, split the way memory and timing need them. */
export interface ParamCounts {
  total: number;
  /** Embedding matrix plus an untied lm_head (kept in 16 bit by AWQ/GPTQ checkpoints). */
  embedding: number;
  /** lm_head alone (it runs only for the rows that are sampled). */
  lmHead: number;
  /** Parameters of the linear layers and norms, without embedding and lm_head. */
  body: number;
  /** Body parameters one token touches (MoE: shared plus top-k experts, not all of them). */
  activeBody: number;
  /** Routed-expert parameters of one expert in one layer (0 for dense models). */
  perExpert: number;
  /** MoE layers (0 for dense models). */
  moeLayers: number;
  /** MoE routers' parameters, all layers (0 for dense models); engines keep them unquantised. */
  router: number;
}

export function paramCounts(m: ModelSpec): ParamCounts {
  const d = m.hiddenSize;
  const embedding = m.vocabSize * d;
  const lmHead = m.vocabSize * d;
  let attention: number;
  if (m.mla) {
    const a = m.mla;
    const qHead = a.nopeHeadDim + a.ropeHeadDim;
    const q =
      a.qLoraRank !== undefined
        ? d * a.qLoraRank + a.qLoraRank + a.qLoraRank * m.queryHeads * qHead
        : d * m.queryHeads * qHead;
    const kv =
      d * (a.kvLoraRank + a.ropeHeadDim) +
      a.kvLoraRank +
      a.kvLoraRank * m.queryHeads * (a.nopeHeadDim + a.vHeadDim);
    attention = q + kv + m.queryHeads * a.vHeadDim * d;
  } else {
    const qkv = d * (m.queryHeads + 2 * m.kvHeads) * m.headDim;
    const bias = m.qkvBias ? (m.queryHeads + 2 * m.kvHeads) * m.headDim : 0;
    attention = qkv + bias + m.queryHeads * m.headDim * d;
  }
  const norms = 2 * d;
  const denseMlp = 3 * d * m.ffnSize;
  let body = d; // final norm
  let activeBody = d;
  let perExpert = 0;
  let moeLayers = 0;
  let router = 0;
  if (m.moe) {
    const e = m.moe;
    perExpert = 3 * d * e.expertFfnSize;
    moeLayers = m.layers - e.denseLayers;
    const layerRouter = d * e.experts;
    router = moeLayers * layerRouter;
    const moeLayer = attention + norms + layerRouter + (e.experts + e.sharedExperts) * perExpert;
    const moeActive = attention + norms + layerRouter + (e.topK + e.sharedExperts) * perExpert;
    const denseLayer = attention + norms + denseMlp;
    body += e.denseLayers * denseLayer + moeLayers * moeLayer;
    activeBody += e.denseLayers * denseLayer + moeLayers * moeActive;
  } else {
    body += m.layers * (attention + norms + denseMlp);
    activeBody = body;
  }
  const embeddingTotal = m.tiedEmbeddings ? embedding : embedding + lmHead;
  return {
    total: body + embeddingTotal,
    embedding: embeddingTotal,
    lmHead,
    body,
    activeBody,
    perExpert,
    moeLayers,
    router,
  };
}

const llama = (
  over: Partial<ModelSpec> & Pick<ModelSpec, 'id' | 'name' | 'layers' | 'hiddenSize'>,
): ModelSpec => ({
  queryHeads: over.hiddenSize / 128,
  kvHeads: 8,
  headDim: 128,
  ffnSize: 14336,
  vocabSize: 128256,
  tiedEmbeddings: false,
  qkvBias: false,
  maxContext: 8192,
  ...over,
});

/** Qwen3 dense and MoE: head_dim 128, 8 KV heads, no qkv bias, untied, 40960 positions. */
const qwen3 = (
  over: Partial<ModelSpec> &
    Pick<ModelSpec, 'id' | 'name' | 'layers' | 'hiddenSize' | 'queryHeads' | 'ffnSize'>,
): ModelSpec => ({
  kvHeads: 8,
  headDim: 128,
  vocabSize: 151936,
  tiedEmbeddings: false,
  qkvBias: false,
  maxContext: 40960,
  ...over,
});

/**
 * Presets from the models' published `config.json` files (the same shapes as
 * ai-dynamo/aiconfigurator and cli99/llm-analysis model configs).
 */
export const MODEL_PRESETS: readonly ModelSpec[] = [
  llama({
    id: 'llama-2-7b',
    name: 'Llama-2-7B',
    layers: 32,
    hiddenSize: 4096,
    kvHeads: 32,
    ffnSize: 11008,
    vocabSize: 32000,
    maxContext: 4096,
  }),
  llama({
    id: 'llama-2-13b',
    name: 'Llama-2-13B',
    layers: 40,
    hiddenSize: 5120,
    kvHeads: 40,
    ffnSize: 13824,
    vocabSize: 32000,
    maxContext: 4096,
  }),
  // meta-llama/Llama-2-70b-hf config.json: GQA with 8 KV heads, unlike the 7B and 13B.
  llama({
    id: 'llama-2-70b',
    name: 'Llama-2-70B',
    layers: 80,
    hiddenSize: 8192,
    ffnSize: 28672,
    vocabSize: 32000,
    maxContext: 4096,
  }),
  llama({ id: 'llama-3-8b', name: 'Llama-3-8B', layers: 32, hiddenSize: 4096 }),
  llama({
    id: 'llama-3.1-8b',
    name: 'Llama-3.1-8B',
    layers: 32,
    hiddenSize: 4096,
    maxContext: 131072,
  }),
  llama({ id: 'llama-3-70b', name: 'Llama-3-70B', layers: 80, hiddenSize: 8192, ffnSize: 28672 }),
  llama({
    id: 'llama-3.1-70b',
    name: 'Llama-3.1-70B',
    layers: 80,
    hiddenSize: 8192,
    ffnSize: 28672,
    maxContext: 131072,
  }),
  // meta-llama/Llama-3.3-70B-Instruct config.json: the 3.1 70B's shape (only the weights moved).
  llama({
    id: 'llama-3.3-70b',
    name: 'Llama-3.3-70B',
    layers: 80,
    hiddenSize: 8192,
    ffnSize: 28672,
    maxContext: 131072,
  }),
  // meta-llama/Llama-3.1-405B config.json.
  llama({
    id: 'llama-3.1-405b',
    name: 'Llama-3.1-405B',
    layers: 126,
    hiddenSize: 16384,
    ffnSize: 53248,
    maxContext: 131072,
  }),
  llama({
    id: 'mistral-7b',
    name: 'Mistral-7B-v0.1',
    layers: 32,
    hiddenSize: 4096,
    vocabSize: 32000,
    maxContext: 32768,
    slidingWindow: 4096,
  }),
  {
    id: 'qwen2.5-7b',
    name: 'Qwen2.5-7B',
    layers: 28,
    hiddenSize: 3584,
    queryHeads: 28,
    kvHeads: 4,
    headDim: 128,
    ffnSize: 18944,
    vocabSize: 152064,
    tiedEmbeddings: false,
    qkvBias: true,
    maxContext: 32768,
  },
  // Qwen/Qwen3-8B and Qwen/Qwen3-32B config.json (head_dim 128 is set apart from hidden_size /
  // heads; the per-head q/k RMSNorm weights, 2 x 128 per layer, are left out).
  qwen3({
    id: 'qwen3-8b',
    name: 'Qwen3-8B',
    layers: 36,
    hiddenSize: 4096,
    queryHeads: 32,
    ffnSize: 12288,
  }),
  // Qwen/Qwen3-14B config.json: 40 layers, 40 query / 8 KV heads of 128, FFN 17408.
  qwen3({
    id: 'qwen3-14b',
    name: 'Qwen3-14B',
    layers: 40,
    hiddenSize: 5120,
    queryHeads: 40,
    ffnSize: 17408,
  }),
  qwen3({
    id: 'qwen3-32b',
    name: 'Qwen3-32B',
    layers: 64,
    hiddenSize: 5120,
    queryHeads: 64,
    ffnSize: 25600,
  }),
  // Qwen/Qwen3-30B-A3B config.json: every layer MoE (decoder_sparse_step 1, mlp_only_layers []),
  // 128 experts of moe_intermediate_size 768, top 8, no shared expert.
  qwen3({
    id: 'qwen3-30b-a3b',
    name: 'Qwen3-30B-A3B',
    layers: 48,
    hiddenSize: 2048,
    queryHeads: 32,
    kvHeads: 4,
    ffnSize: 6144,
    moe: { experts: 128, topK: 8, expertFfnSize: 768, sharedExperts: 0, denseLayers: 0 },
  }),
  llama({
    id: 'mixtral-8x7b',
    name: 'Mixtral-8x7B',
    layers: 32,
    hiddenSize: 4096,
    vocabSize: 32000,
    maxContext: 32768,
    moe: { experts: 8, topK: 2, expertFfnSize: 14336, sharedExperts: 0, denseLayers: 0 },
  }),
  {
    id: 'deepseek-v3',
    name: 'DeepSeek-V3',
    layers: 61,
    hiddenSize: 7168,
    queryHeads: 128,
    kvHeads: 128,
    headDim: 128,
    ffnSize: 18432,
    vocabSize: 129280,
    tiedEmbeddings: false,
    qkvBias: false,
    maxContext: 163840,
    moe: { experts: 256, topK: 8, expertFfnSize: 2048, sharedExperts: 1, denseLayers: 3 },
    mla: { kvLoraRank: 512, qLoraRank: 1536, ropeHeadDim: 64, nopeHeadDim: 128, vHeadDim: 128 },
  },
];

export function findModelPreset(id: string): ModelSpec | undefined {
  const key = id.toLowerCase();
  return MODEL_PRESETS.find((m) => m.id === key || m.name.toLowerCase() === key);
}
