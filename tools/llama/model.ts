import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createRng, type Rng } from '../../src/rng.js';
import { WORDS } from '../../src/workload/synthetic.js';
import { REPO } from '../repo.js';
import { cacheDir } from './build.js';
import {
  f32ToF16,
  GgmlType,
  GgufMetadata,
  type GgufTensor,
  ggmlRowBytes,
  ggmlTensorBytes,
  Q4_0_BLOCK_BYTES,
  Q8_0_BLOCK_BYTES,
  QK_ELEMENTS,
  writeGguf,
} from './gguf.js';

/**
 * A `llama`-architecture GGUF model with seeded random weights, for running llama.cpp's
 * llama-server where no real model can be downloaded. The output is noise, but the compute per
 * token is that of a real model of the same shape, and the vocabulary tokenises the synthetic
 * workload's prompts to exactly one token per word.
 */

/** The words synthetic prompts are made of: each becomes one token in this vocabulary. */
export const WORKLOAD_WORDS: readonly string[] = WORDS;

/** SentencePiece's word-boundary marker, which llama.cpp substitutes for every space. */
export const SPM_SPACE = '\u2581';

/** llama_token_type values as stored in tokenizer.ggml.token_type. */
export const TokenType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

export const UNK_ID = 0;
export const BOS_ID = 1;
export const EOS_ID = 2;
export const FIRST_BYTE_TOKEN_ID = 3;

export interface Vocabulary {
  tokens: string[];
  scores: Float32Array;
  types: Int32Array;
}

/**
 * An SPM ("llama") vocabulary that needs no merges table: llama.cpp's SPM tokenizer merges
 * adjacent symbols whenever the pair is itself a token, so with every left-anchored prefix of
 * `▁word` in the vocabulary (and no other multi-character token) the only merges available walk a
 * word left to right into its single token. Anything else falls back to characters or bytes.
 */
export function buildVocabulary(words: readonly string[] = WORKLOAD_WORDS): Vocabulary {
  const tokens: string[] = ['<unk>', '<s>', '</s>'];
  const types: number[] = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL];
  const scores: number[] = [0, 0, 0];
  // llama.cpp looks byte fallbacks up by this exact spelling (upper-case hex) and throws if
  // one is missing.
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TokenType.BYTE);
    scores.push(0);
  }
  const seen = new Set(tokens);
  const addNormal = (piece: string) => {
    if (seen.has(piece)) return;
    seen.add(piece);
    tokens.push(piece);
    types.push(TokenType.NORMAL);
    // Longer pieces win; with prefix-only tokens the order only matters between words, where it
    // cannot change the result.
    scores.push([...piece].length);
  };
  addNormal(SPM_SPACE);
  // The space itself is left out: llama.cpp rewrites every space to ▁ before tokenising, so a
  // ' ' token could never be produced from text.
  for (let c = 0x21; c <= 0x7e; c++) addNormal(String.fromCharCode(c));
  for (const word of words) {
    for (let end = 1; end <= word.length; end++) addNormal(SPM_SPACE + word.slice(0, end));
  }
  return { tokens, scores: Float32Array.from(scores), types: Int32Array.from(types) };
}

export interface LlamaHparams {
  contextLength: number;
  embeddingLength: number;
  blockCount: number;
  feedForwardLength: number;
  headCount: number;
  headCountKv: number;
}

export type WeightType = 'f32' | 'f16' | 'q8_0' | 'q4_0';
export type LlamaPreset = 'tiny' | '125m';

export const LLAMA_PRESETS: Record<LlamaPreset, { hparams: LlamaHparams; type: WeightType }> = {
  // About 0.55M parameters: loads in milliseconds, for tests of the plumbing.
  tiny: {
    hparams: {
      contextLength: 4096,
      embeddingLength: 128,
      blockCount: 2,
      feedForwardLength: 384,
      headCount: 4,
      headCountKv: 2,
    },
    type: 'f32',
  },
  // About 126M parameters (GPT-2 small / SmolLM-135M class): per-token compute of a real small
  // model, with grouped-query attention like current Llamas.
  '125m': {
    hparams: {
      contextLength: 4096,
      embeddingLength: 768,
      blockCount: 12,
      feedForwardLength: 3840,
      headCount: 12,
      headCountKv: 4,
    },
    type: 'q8_0',
  },
};

const WEIGHT_GGML_TYPE: Record<WeightType, GgmlType> = {
  f32: GgmlType.F32,
  f16: GgmlType.F16,
  q8_0: GgmlType.Q8_0,
  q4_0: GgmlType.Q4_0,
};

/** llama_ftype: what general.file_type says the bulk of the weights are. */
const FILE_TYPE: Record<WeightType, number> = { f32: 0, f16: 1, q4_0: 2, q8_0: 7 };

/** Weights are drawn with this standard deviation, as in GPT-2's initialisation. */
const WEIGHT_STD = 0.02;

export interface WriteLlamaModelOptions {
  preset?: LlamaPreset;
  /** Overrides the preset's shape field by field. */
  hparams?: Partial<LlamaHparams>;
  /** Type of the 2-D weights; 1-D norm weights are always f32. Defaults to the preset's. */
  type?: WeightType;
  seed?: number;
  name?: string;
  /**
   * Written as tokenizer.chat_template when given. Without one llama-server falls back to
   * ChatML, whose markers are not tokens here and cost ~54 prompt tokens per chat request;
   * CONTENT_ONLY_CHAT_TEMPLATE makes a one-message chat prompt tokenise like a completion.
   */
  chatTemplate?: string;
}

/** Concatenates message contents: no role markers, so chat prompts cost N + 1 tokens too. */
export const CONTENT_ONLY_CHAT_TEMPLATE =
  '{%- for message in messages -%}{{- message.content -}}{%- endfor -%}';

export interface LlamaModelDescription {
  path: string;
  name: string;
  type: WeightType;
  seed: number;
  hparams: LlamaHparams;
  vocabSize: number;
  parameterCount: number;
  tensorCount: number;
  fileBytes: number;
  writeMs: number;
}

export function resolveHparams(options: WriteLlamaModelOptions): {
  hparams: LlamaHparams;
  type: WeightType;
} {
  const preset = LLAMA_PRESETS[options.preset ?? 'tiny'];
  if (preset === undefined) throw new Error(`unknown preset ${options.preset}`);
  const hparams = { ...preset.hparams, ...options.hparams };
  const type = options.type ?? preset.type;
  const { embeddingLength: nEmbd, headCount, headCountKv, feedForwardLength: nFf } = hparams;
  if (nEmbd % headCount !== 0) {
    throw new Error(`n_embd ${nEmbd} not divisible by n_head ${headCount}`);
  }
  if (headCount % headCountKv !== 0) {
    throw new Error(`n_head ${headCount} not divisible by n_head_kv ${headCountKv}`);
  }
  if (type === 'q8_0' || type === 'q4_0') {
    // Every weight's ne0 is either n_embd or n_ff.
    for (const n of [nEmbd, nFf]) {
      if (n % QK_ELEMENTS !== 0) throw new Error(`${type} needs n_embd and n_ff multiples of 32`);
    }
  }
  return { hparams, type };
}

export async function writeLlamaModel(
  path: string,
  options: WriteLlamaModelOptions = {},
): Promise<LlamaModelDescription> {
  const startedMs = performance.now();
  const { hparams, type } = resolveHparams(options);
  const seed = options.seed ?? 1;
  const name = options.name ?? `infergauge-random-${options.preset ?? 'tiny'}-${type}`;
  const vocab = buildVocabulary();
  const nVocab = vocab.tokens.length;
  const {
    embeddingLength: nEmbd,
    blockCount,
    feedForwardLength: nFf,
    headCount,
    headCountKv,
  } = hparams;
  const headDim = nEmbd / headCount;
  const nEmbdKv = headDim * headCountKv;

  const metadata = new GgufMetadata()
    .string('general.architecture', 'llama')
    .string('general.name', name)
    .uint32('general.file_type', FILE_TYPE[type])
    .uint32('llama.context_length', hparams.contextLength)
    .uint32('llama.embedding_length', nEmbd)
    .uint32('llama.block_count', blockCount)
    .uint32('llama.feed_forward_length', nFf)
    .uint32('llama.attention.head_count', headCount)
    .uint32('llama.attention.head_count_kv', headCountKv)
    .float32('llama.attention.layer_norm_rms_epsilon', 1e-5)
    // The llama graph asserts n_rot == head size.
    .uint32('llama.rope.dimension_count', headDim)
    .float32('llama.rope.freq_base', 10000)
    .uint32('llama.vocab_size', nVocab)
    .string('tokenizer.ggml.model', 'llama')
    .stringArray('tokenizer.ggml.tokens', vocab.tokens)
    .float32Array('tokenizer.ggml.scores', vocab.scores)
    .int32Array('tokenizer.ggml.token_type', vocab.types)
    .uint32('tokenizer.ggml.bos_token_id', BOS_ID)
    .uint32('tokenizer.ggml.eos_token_id', EOS_ID)
    .uint32('tokenizer.ggml.unknown_token_id', UNK_ID)
    .bool('tokenizer.ggml.add_bos_token', true)
    .bool('tokenizer.ggml.add_eos_token', false);
  if (options.chatTemplate !== undefined) {
    metadata.string('tokenizer.chat_template', options.chatTemplate);
  }

  const weightType = WEIGHT_GGML_TYPE[type];
  const tensors: GgufTensor[] = [];
  let parameterCount = 0;
  const add = (
    tensorName: string,
    dims: number[],
    data: GgufTensor['data'],
    ggmlType: GgmlType,
  ) => {
    tensors.push({ name: tensorName, dims, type: ggmlType, data });
    parameterCount += dims.reduce((a, b) => a * b, 1);
  };
  // Each tensor has its own stream, so its contents do not depend on how the others are made.
  const weight = (tensorName: string, dims: number[], zeroRows = 0) => {
    const rngSeed = (seed * 1_000_003 + tensors.length) >>> 0;
    const make = () => {
      const bytes = randomTensor(createRng(rngSeed), weightType, dims);
      bytes.fill(0, 0, zeroRows * ggmlRowBytes(weightType, dims[0]));
      return bytes;
    };
    add(tensorName, dims, make, weightType);
  };
  const ones = (tensorName: string) => add(tensorName, [nEmbd], () => onesF32(nEmbd), GgmlType.F32);

  weight('token_embd.weight', [nEmbd, nVocab]);
  ones('output_norm.weight');
  // All-zero rows give the special and byte tokens a logit of exactly 0 while the other ~400
  // logits are N(0, ~0.5), so greedy decoding in practice never picks them: no EOS (every
  // request runs to its max tokens) and no lone UTF-8 bytes, which llama-server would hold back
  // and merge into a later stream chunk, breaking one chunk per token.
  weight('output.weight', [nEmbd, nVocab], FIRST_BYTE_TOKEN_ID + 256);
  for (let i = 0; i < blockCount; i++) {
    ones(`blk.${i}.attn_norm.weight`);
    weight(`blk.${i}.attn_q.weight`, [nEmbd, nEmbd]);
    weight(`blk.${i}.attn_k.weight`, [nEmbd, nEmbdKv]);
    weight(`blk.${i}.attn_v.weight`, [nEmbd, nEmbdKv]);
    weight(`blk.${i}.attn_output.weight`, [nEmbd, nEmbd]);
    ones(`blk.${i}.ffn_norm.weight`);
    weight(`blk.${i}.ffn_gate.weight`, [nEmbd, nFf]);
    weight(`blk.${i}.ffn_down.weight`, [nFf, nEmbd]);
    weight(`blk.${i}.ffn_up.weight`, [nEmbd, nFf]);
  }

  const layout = await writeGguf(path, metadata, tensors);
  const fileBytes = (await stat(path)).size;
  if (fileBytes !== layout.fileBytes) {
    throw new Error(`${path}: wrote ${fileBytes} bytes, expected ${layout.fileBytes}`);
  }
  return {
    path,
    name,
    type,
    seed,
    hparams,
    vocabSize: nVocab,
    parameterCount,
    tensorCount: tensors.length,
    fileBytes,
    writeMs: performance.now() - startedMs,
  };
}

function onesF32(n: number): Uint8Array {
  const out = new Float32Array(n).fill(1);
  return new Uint8Array(out.buffer);
}

/** Uniform on [-a, a] has standard deviation a / sqrt(3). */
const UNIFORM_HALF_WIDTH = WEIGHT_STD * Math.sqrt(3);
/** Standard deviation of an int8 drawn uniformly from [-128, 127]. */
const INT8_UNIFORM_STD = Math.sqrt((256 * 256 - 1) / 12);
/** Standard deviation of a nibble drawn uniformly from [0, 15], minus 8. */
const NIBBLE_UNIFORM_STD = Math.sqrt((16 * 16 - 1) / 12);

/**
 * Quantised weights are drawn as uniform random quants under one scale rather than quantised
 * from floats: the statistics are the same and it is several times faster (the 125m model's
 * 126M weights take well under a second).
 */
function randomTensor(rng: Rng, type: GgmlType, dims: number[]): Uint8Array {
  const bytes = new Uint8Array(ggmlTensorBytes(type, dims));
  // next() is a 32-bit draw divided by 2^32, so this recovers the draw exactly.
  const uint32 = () => rng.next() * 4294967296;
  switch (type) {
    case GgmlType.F32: {
      const values = new Float32Array(bytes.buffer);
      for (let i = 0; i < values.length; i++) {
        values[i] = (rng.next() * 2 - 1) * UNIFORM_HALF_WIDTH;
      }
      return bytes;
    }
    case GgmlType.F16: {
      const values = new Uint16Array(bytes.buffer);
      for (let i = 0; i < values.length; i++) {
        values[i] = f32ToF16((rng.next() * 2 - 1) * UNIFORM_HALF_WIDTH);
      }
      return bytes;
    }
    case GgmlType.Q8_0:
      fillBlocks(bytes, Q8_0_BLOCK_BYTES, f32ToF16(WEIGHT_STD / INT8_UNIFORM_STD), uint32);
      return bytes;
    case GgmlType.Q4_0:
      fillBlocks(bytes, Q4_0_BLOCK_BYTES, f32ToF16(WEIGHT_STD / NIBBLE_UNIFORM_STD), uint32);
      return bytes;
  }
}

/** Blocks of a 2-byte f16 scale followed by random quant bytes (both Q8_0 and Q4_0). */
function fillBlocks(bytes: Uint8Array, blockBytes: number, scaleF16: number, uint32: () => number) {
  const quantBytes = blockBytes - 2;
  for (let at = 0; at < bytes.length; at += blockBytes) {
    bytes[at] = scaleF16 & 0xff;
    bytes[at + 1] = scaleF16 >>> 8;
    for (let j = 0; j < quantBytes; j += 4) {
      const r = uint32();
      bytes[at + 2 + j] = r & 0xff;
      bytes[at + 3 + j] = (r >>> 8) & 0xff;
      bytes[at + 4 + j] = (r >>> 16) & 0xff;
      bytes[at + 5 + j] = r >>> 24;
    }
  }
}

/**
 * The path of a model written once into the cache (`$INFERGAUGE_CACHE/models`) and shared by
 * every process that asks for the same one: the llama-server tests, the suite's early start
 * (tools/test/prepare.ts) and `npm run engine:llama`. Its name holds a hash of what decides its bytes (the options, the
 * vocabulary, and this writer's own source), so a cached model is never stale.
 */
export async function cachedLlamaModel(options: WriteLlamaModelOptions = {}): Promise<string> {
  const writer = await Promise.all(
    ['model.ts', 'gguf.ts'].map((f) => readFile(join(REPO, 'tools', 'llama', f), 'utf8')),
  );
  const key = createHash('sha256')
    .update(JSON.stringify({ options, ...resolveHparams(options) }))
    .update(JSON.stringify(buildVocabulary().tokens))
    .update(writer.join('\0'))
    .digest('hex')
    .slice(0, 12);
  const dir = join(cacheDir(), 'models');
  const path = join(dir, `infergauge-${options.preset ?? 'tiny'}-${key}.gguf`);
  if (existsSync(path)) return path;
  await mkdir(dir, { recursive: true });
  // Written aside, then renamed: a reader never sees half a model, and two writers at once
  // (test files side by side) both end with the same whole file.
  const partial = `${path}.partial-${process.pid}`;
  await writeLlamaModel(partial, options);
  await rename(partial, path);
  return path;
}
