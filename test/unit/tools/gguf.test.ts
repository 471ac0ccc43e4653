import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createRng } from '../../../src/rng.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';
import {
  alignUp,
  dequantizeQ4_0,
  dequantizeQ8_0,
  encodeF32,
  f16ToF32,
  f32ToF16,
  GgmlType,
  GgufMetadata,
  GgufValueType,
  ggmlTensorBytes,
  Q4_0_BLOCK_BYTES,
  Q8_0_BLOCK_BYTES,
  quantizeQ4_0,
  quantizeQ8_0,
  writeGguf,
} from '../../../tools/llama/gguf.js';
import {
  BOS_ID,
  buildVocabulary,
  CONTENT_ONLY_CHAT_TEMPLATE,
  EOS_ID,
  LLAMA_PRESETS,
  SPM_SPACE,
  TokenType,
  UNK_ID,
  type Vocabulary,
  writeLlamaModel,
} from '../../../tools/llama/model.js';

const dir = mkdtempSync(join(tmpdir(), 'infergauge-gguf-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// ---------------------------------------------------------------------------------------------
// A minimal GGUF reader, independent of the writer's code paths.

interface ParsedTensor {
  name: string;
  dims: number[];
  type: number;
  offsetBytes: number;
}

interface ParsedGguf {
  version: number;
  kvs: Map<string, { type: number; arrayType?: number; value: unknown }>;
  tensors: ParsedTensor[];
  /** Where the header (KVs and tensor infos) ends, before padding. */
  headerEndBytes: number;
}

function parseGgufHeader(buf: Buffer): ParsedGguf {
  let at = 0;
  const u32 = () => {
    const v = buf.readUInt32LE(at);
    at += 4;
    return v;
  };
  const u64 = () => {
    const v = buf.readBigUInt64LE(at);
    at += 8;
    return Number(v);
  };
  const str = () => {
    const n = u64();
    const s = buf.toString('utf8', at, at + n);
    at += n;
    return s;
  };
  const scalar = (type: number): unknown => {
    switch (type) {
      case GgufValueType.UINT8:
        return buf.readUInt8(at++);
      case GgufValueType.INT8:
        return buf.readInt8(at++);
      case GgufValueType.UINT32:
        return u32();
      case GgufValueType.INT32: {
        const v = buf.readInt32LE(at);
        at += 4;
        return v;
      }
      case GgufValueType.FLOAT32: {
        const v = buf.readFloatLE(at);
        at += 4;
        return v;
      }
      case GgufValueType.BOOL: {
        const v = buf.readUInt8(at++);
        assert.ok(v === 0 || v === 1, 'bool is 0 or 1');
        return v === 1;
      }
      case GgufValueType.STRING:
        return str();
      case GgufValueType.UINT64: {
        const v = buf.readBigUInt64LE(at);
        at += 8;
        return v;
      }
      default:
        throw new Error(`reader does not handle type ${type}`);
    }
  };

  assert.equal(buf.toString('latin1', 0, 4), 'GGUF');
  at = 4;
  const version = u32();
  const tensorCount = u64();
  const kvCount = u64();
  const kvs: ParsedGguf['kvs'] = new Map();
  for (let i = 0; i < kvCount; i++) {
    const key = str();
    const type = u32();
    assert.ok(!kvs.has(key), `duplicate key ${key}`);
    if (type === GgufValueType.ARRAY) {
      const arrayType = u32();
      const n = u64();
      const value: unknown[] = [];
      for (let j = 0; j < n; j++) value.push(scalar(arrayType));
      kvs.set(key, { type, arrayType, value });
    } else {
      kvs.set(key, { type, value: scalar(type) });
    }
  }
  const tensors: ParsedTensor[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = str();
    const nDims = u32();
    const dims: number[] = [];
    for (let j = 0; j < nDims; j++) dims.push(u64());
    const type = u32();
    const offsetBytes = u64();
    tensors.push({ name, dims, type, offsetBytes });
  }
  return { version, kvs, tensors, headerEndBytes: at };
}

/**
 * The checks gguf_init_from_file makes on layout: data section at the aligned end of the
 * header, tensors contiguous in info order each padded to the alignment, file exactly that long.
 */
function checkLayout(parsed: ParsedGguf, fileBytes: number) {
  assert.equal(parsed.version, 3);
  const alignment = parsed.kvs.get('general.alignment');
  assert.deepEqual(alignment, { type: GgufValueType.UINT32, value: 32 });
  const dataOffsetBytes = alignUp(parsed.headerEndBytes, 32);
  let expectedOffset = 0;
  for (const t of parsed.tensors) {
    assert.equal(t.offsetBytes % 32, 0, `${t.name} offset aligned`);
    assert.equal(t.offsetBytes, expectedOffset, `${t.name} offset contiguous`);
    expectedOffset += alignUp(ggmlTensorBytes(t.type as GgmlType, t.dims), 32);
  }
  assert.equal(fileBytes, dataOffsetBytes + expectedOffset, 'file size = data offset + data');
  return dataOffsetBytes;
}

async function readHead(path: string, bytes: number): Promise<Buffer> {
  const file = await open(path, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    const { bytesRead } = await file.read(buf, 0, bytes, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
}

// ---------------------------------------------------------------------------------------------
// llama.cpp's SPM tokenizer (llm_tokenizer_spm_session), reduced to its merge rule: repeatedly
// merge the adjacent pair whose concatenation is a token with the highest score (leftmost on
// ties); symbols that are not tokens fall back to byte tokens.

function spmTokenize(text: string, vocab: Vocabulary, ids: Map<string, number>): number[] {
  const escaped = ` ${text}`.replaceAll(' ', SPM_SPACE);
  const symbols = [...escaped];
  for (;;) {
    let best = -1;
    let bestScore = Number.NEGATIVE_INFINITY;
    for (let i = 0; i + 1 < symbols.length; i++) {
      const id = ids.get(symbols[i] + symbols[i + 1]);
      if (id !== undefined && vocab.scores[id] > bestScore) {
        best = i;
        bestScore = vocab.scores[id];
      }
    }
    if (best < 0) break;
    symbols.splice(best, 2, symbols[best] + symbols[best + 1]);
  }
  const out = [BOS_ID];
  for (const s of symbols) {
    const id = ids.get(s);
    if (id !== undefined) {
      out.push(id);
      continue;
    }
    for (const byte of Buffer.from(s, 'utf8')) out.push(ids.get(byteToken(byte)) as number);
  }
  return out;
}

function byteToken(byte: number): string {
  return `<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`;
}

// ---------------------------------------------------------------------------------------------

describe('f16 conversion', () => {
  test('every finite half round-trips exactly', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const exponent = (bits >>> 10) & 0x1f;
      if (exponent === 0x1f && (bits & 0x3ff) !== 0) continue;
      assert.equal(f32ToF16(f16ToF32(bits)), bits, `0x${bits.toString(16)}`);
    }
  });

  test('subnormals', () => {
    assert.equal(f32ToF16(2 ** -24), 0x0001);
    assert.equal(f32ToF16(-(2 ** -24)), 0x8001);
    assert.equal(f32ToF16(2 ** -14 - 2 ** -24), 0x03ff, 'largest subnormal');
    assert.equal(f32ToF16(2 ** -25), 0x0000, 'half a unit ties to even (zero)');
    assert.equal(f32ToF16(3 * 2 ** -25), 0x0002, '1.5 units ties to even (2)');
    assert.equal(f32ToF16(1.25 * 2 ** -24), 0x0001);
    assert.equal(f32ToF16(1.75 * 2 ** -24), 0x0002);
    assert.equal(f32ToF16(2 ** -26), 0x0000, 'below half a unit');
    assert.equal(f32ToF16(-(2 ** -26)), 0x8000, 'keeps the sign of zero');
    assert.equal(f32ToF16(2 ** -14 - 2 ** -26), 0x0400, 'rounds up into the smallest normal');
    assert.equal(f16ToF32(0x0001), 2 ** -24);
    assert.equal(f16ToF32(0x03ff), 2 ** -14 - 2 ** -24);
  });

  test('rounding to nearest even', () => {
    assert.equal(f32ToF16(1 + 2 ** -11), 0x3c00, 'tie to even (down)');
    assert.equal(f32ToF16(1 + 3 * 2 ** -11), 0x3c02, 'tie to even (up)');
    assert.equal(f32ToF16(1 + 2 ** -11 + 2 ** -20), 0x3c01, 'above the tie');
    assert.equal(f32ToF16(0.1), 0x2e66);
    assert.equal(f32ToF16(-2), 0xc000);
    assert.equal(f32ToF16(2047 + 0.5), 0x67ff + 1, 'carry into the exponent');
  });

  test('overflow, infinities and NaN', () => {
    assert.equal(f32ToF16(65504), 0x7bff);
    assert.equal(f32ToF16(65519), 0x7bff, 'below the midpoint stays finite');
    assert.equal(f32ToF16(65520), 0x7c00, 'the midpoint ties to even, which is infinity');
    assert.equal(f32ToF16(1e6), 0x7c00);
    assert.equal(f32ToF16(-1e6), 0xfc00);
    assert.equal(f32ToF16(Number.POSITIVE_INFINITY), 0x7c00);
    assert.equal(f32ToF16(Number.NEGATIVE_INFINITY), 0xfc00);
    const nan = f32ToF16(Number.NaN);
    assert.equal(nan & 0x7c00, 0x7c00);
    assert.notEqual(nan & 0x3ff, 0);
    assert.ok(Number.isNaN(f16ToF32(nan)));
    assert.equal(f32ToF16(0), 0);
    assert.equal(f32ToF16(-0), 0x8000);
  });
});

describe('quantisers', () => {
  const random = (n: number, seed: number, scale: number) => {
    const rng = createRng(seed);
    return Float32Array.from({ length: n }, () => (rng.next() * 2 - 1) * scale);
  };

  test('q8_0 layout: f16 d then 32 int8', () => {
    const values = Float32Array.from({ length: 32 }, (_, j) => (j === 0 ? -127 : j - 16));
    const bytes = quantizeQ8_0(values);
    assert.equal(bytes.length, Q8_0_BLOCK_BYTES);
    assert.equal(bytes[0] | (bytes[1] << 8), f32ToF16(1), 'd = 127 / 127');
    const quants = new Int8Array(bytes.buffer, 2, 32);
    assert.deepEqual([...quants], [...values]);
  });

  test('q8_0 round trip within d/2', () => {
    for (const scale of [1e-3, 0.02, 1, 300]) {
      const values = random(32 * 64, 7, scale);
      const bytes = quantizeQ8_0(values);
      const back = dequantizeQ8_0(bytes);
      for (let i = 0; i < values.length; i++) {
        const block = Math.floor(i / 32) * Q8_0_BLOCK_BYTES;
        const d = f16ToF32(bytes[block] | (bytes[block + 1] << 8));
        assert.ok(
          Math.abs(back[i] - values[i]) <= (d / 2) * (1 + 1e-6),
          `${values[i]} -> ${back[i]}`,
        );
      }
    }
    assert.deepEqual(
      [...dequantizeQ8_0(quantizeQ8_0(new Float32Array(32)))],
      new Array(32).fill(0),
    );
  });

  test('q4_0 layout: element j in the low nibble of byte j, j + 16 in the high nibble', () => {
    const q = Array.from({ length: 32 }, (_, j) => (j === 0 ? 0 : (j * 5) % 16));
    // q = 0 is the block's extreme (-8 * 0.5 = -4), so d = -4 / -8 = 0.5 exactly.
    const values = q.map((v) => (v - 8) * 0.5);
    const bytes = quantizeQ4_0(values);
    assert.equal(bytes.length, Q4_0_BLOCK_BYTES);
    assert.equal(bytes[0] | (bytes[1] << 8), f32ToF16(0.5));
    for (let j = 0; j < 16; j++) assert.equal(bytes[2 + j], q[j] | (q[j + 16] << 4), `byte ${j}`);
    assert.deepEqual([...dequantizeQ4_0(bytes)], values);
  });

  test('q4_0 round trip within d/2 (within d where ggml clamps q = 16 to 15)', () => {
    for (const scale of [1e-3, 0.02, 1, 300]) {
      const values = random(32 * 64, 11, scale);
      // One block holding both signs of the extreme, so the clamp is exercised.
      values[0] = scale;
      values[1] = -scale;
      const bytes = quantizeQ4_0(values);
      const back = dequantizeQ4_0(bytes);
      let clamped = 0;
      for (let i = 0; i < values.length; i++) {
        const block = Math.floor(i / 32) * Q4_0_BLOCK_BYTES;
        const d = Math.abs(f16ToF32(bytes[block] | (bytes[block + 1] << 8)));
        const error = Math.abs(back[i] - values[i]);
        if (error <= (d / 2) * (1 + 1e-6)) continue;
        clamped++;
        assert.ok(error <= d * (1 + 1e-6), `${values[i]} -> ${back[i]} (d ${d})`);
        assert.ok(Math.abs(values[i]) > 7.5 * d * (1 - 1e-6), 'only values past 7.5 d clamp');
      }
      assert.ok(clamped >= 1, 'the both-signs block clamps');
    }
  });

  test('rows must be whole blocks', () => {
    assert.throws(() => quantizeQ8_0(new Float32Array(48)), /multiple of 32/);
    assert.throws(() => ggmlTensorBytes(GgmlType.Q4_0, [48, 2]), /multiple of 32/);
    assert.equal(ggmlTensorBytes(GgmlType.Q4_0, [64, 3]), 2 * 3 * Q4_0_BLOCK_BYTES);
    assert.equal(ggmlTensorBytes(GgmlType.F16, [5, 3]), 30);
  });
});

describe('GGUF writer', () => {
  test('every value type and odd-sized tensors read back', async () => {
    const path = join(dir, 'kinds.gguf');
    const metadata = new GgufMetadata()
      .uint32('a.u32', 4_000_000_000)
      .int32('a.i32', -5)
      .float32('a.f32', 0.5)
      .bool('a.bool', true)
      .string('a.str', 'héllo ▁')
      .uint64('a.u64', 2n ** 40n)
      .stringArray('a.strs', ['x', '', '▁y'])
      .float32Array('a.f32s', [1.5, -2])
      .int32Array('a.i32s', [1, -1, 6]);
    const f32 = encodeF32([1, 2, 3]);
    const q8 = quantizeQ8_0(Float32Array.from({ length: 64 }, (_, i) => i / 64));
    const layout = await writeGguf(path, metadata, [
      { name: 'odd', dims: [3], type: GgmlType.F32, data: f32 },
      { name: 'q', dims: [32, 2], type: GgmlType.Q8_0, data: () => q8 },
    ]);
    const buf = readFileSync(path);
    const parsed = parseGgufHeader(buf);
    const dataOffset = checkLayout(parsed, buf.length);
    assert.equal(dataOffset, layout.dataOffsetBytes);
    assert.equal(buf.length, layout.fileBytes);
    assert.deepEqual(
      [...parsed.kvs].map(([key, kv]) => [key, kv.type, kv.arrayType, kv.value]),
      [
        ['general.alignment', GgufValueType.UINT32, undefined, 32],
        ['a.u32', GgufValueType.UINT32, undefined, 4_000_000_000],
        ['a.i32', GgufValueType.INT32, undefined, -5],
        ['a.f32', GgufValueType.FLOAT32, undefined, 0.5],
        ['a.bool', GgufValueType.BOOL, undefined, true],
        ['a.str', GgufValueType.STRING, undefined, 'héllo ▁'],
        ['a.u64', GgufValueType.UINT64, undefined, 2n ** 40n],
        ['a.strs', GgufValueType.ARRAY, GgufValueType.STRING, ['x', '', '▁y']],
        ['a.f32s', GgufValueType.ARRAY, GgufValueType.FLOAT32, [1.5, -2]],
        ['a.i32s', GgufValueType.ARRAY, GgufValueType.INT32, [1, -1, 6]],
      ],
    );
    assert.deepEqual(parsed.tensors, [
      { name: 'odd', dims: [3], type: GgmlType.F32, offsetBytes: 0 },
      { name: 'q', dims: [32, 2], type: GgmlType.Q8_0, offsetBytes: 32 },
    ]);
    assert.deepEqual(buf.subarray(dataOffset, dataOffset + 12), Buffer.from(f32));
    assert.deepEqual(
      buf.subarray(dataOffset + 12, dataOffset + 32),
      Buffer.alloc(20),
      'zero padding',
    );
    assert.deepEqual(buf.subarray(dataOffset + 32, dataOffset + 32 + q8.length), Buffer.from(q8));
  });

  test('rejects what llama.cpp would reject', async () => {
    const path = join(dir, 'bad.gguf');
    assert.throws(() => new GgufMetadata().uint32('k', 1).string('k', 'x'), /duplicate/);
    assert.throws(() => new GgufMetadata().uint32('k', -1), /uint32/);
    await assert.rejects(
      writeGguf(path, new GgufMetadata(), [
        { name: 't', dims: [4], type: GgmlType.F32, data: new Uint8Array(12) },
      ]),
      /12 bytes given/,
    );
    await assert.rejects(
      writeGguf(path, new GgufMetadata(), [
        { name: 't', dims: [1], type: GgmlType.F32, data: new Uint8Array(4) },
        { name: 't', dims: [1], type: GgmlType.F32, data: new Uint8Array(4) },
      ]),
      /duplicate tensor/,
    );
    await assert.rejects(
      writeGguf(path, new GgufMetadata().uint32('general.alignment', 64), []),
      /alignment/,
    );
  });
});

describe('random llama model', () => {
  const vocab = buildVocabulary();
  const ids = new Map(vocab.tokens.map((t, i) => [t, i]));

  test('vocabulary: unique tokens, specials, bytes', () => {
    // A duplicate token string aborts llama.cpp's vocabulary load.
    assert.equal(ids.size, vocab.tokens.length);
    assert.equal(vocab.tokens[UNK_ID], '<unk>');
    assert.equal(vocab.tokens[BOS_ID], '<s>');
    assert.equal(vocab.tokens[EOS_ID], '</s>');
    assert.equal(vocab.types[UNK_ID], TokenType.UNKNOWN);
    assert.equal(vocab.types[BOS_ID], TokenType.CONTROL);
    for (let b = 0; b < 256; b++) {
      const id = ids.get(byteToken(b));
      assert.ok(id !== undefined, byteToken(b));
      assert.equal(vocab.types[id], TokenType.BYTE);
    }
    assert.equal(vocab.scores.length, vocab.tokens.length);
    assert.equal(vocab.types.length, vocab.tokens.length);
  });

  test('synthetic prompts tokenise to one token per word plus BOS', () => {
    const workload = createSyntheticWorkload({ inputTokens: 200, outputTokens: 1, seed: 5 });
    for (let id = 0; id < 20; id++) {
      const { prompt } = workload(id);
      const tokens = spmTokenize(prompt, vocab, ids);
      assert.equal(tokens.length, 201, prompt);
      const words = prompt.split(' ');
      for (let i = 0; i < words.length; i++) {
        assert.equal(vocab.tokens[tokens[i + 1]], SPM_SPACE + words[i]);
      }
    }
    // Text outside the word list still tokenises (characters, then bytes).
    assert.deepEqual(
      spmTokenize('thé', vocab, ids).map((t) => vocab.tokens[t]),
      ['<s>', '▁th', '<0xC3>', '<0xA9>'],
    );
  });

  test('tiny preset: llama tensors, metadata types and layout', async () => {
    const path = join(dir, 'tiny.gguf');
    const description = await writeLlamaModel(path, { preset: 'tiny', seed: 3 });
    const buf = readFileSync(path);
    assert.equal(description.fileBytes, buf.length);
    const parsed = parseGgufHeader(buf);
    const dataOffset = checkLayout(parsed, buf.length);
    const { embeddingLength: nEmbd, feedForwardLength: nFf } = LLAMA_PRESETS.tiny.hparams;
    const nVocab = vocab.tokens.length;
    const nEmbdKv = (nEmbd / 4) * 2;
    assert.equal(description.vocabSize, nVocab);

    // Types llama.cpp's loader insists on (it rejects e.g. an INT32 where it reads a u32).
    const types: Record<string, number> = {
      'general.architecture': GgufValueType.STRING,
      'general.file_type': GgufValueType.UINT32,
      'llama.context_length': GgufValueType.UINT32,
      'llama.embedding_length': GgufValueType.UINT32,
      'llama.block_count': GgufValueType.UINT32,
      'llama.feed_forward_length': GgufValueType.UINT32,
      'llama.attention.head_count': GgufValueType.UINT32,
      'llama.attention.head_count_kv': GgufValueType.UINT32,
      'llama.attention.layer_norm_rms_epsilon': GgufValueType.FLOAT32,
      'llama.rope.dimension_count': GgufValueType.UINT32,
      'llama.rope.freq_base': GgufValueType.FLOAT32,
      'llama.vocab_size': GgufValueType.UINT32,
      'tokenizer.ggml.model': GgufValueType.STRING,
      'tokenizer.ggml.tokens': GgufValueType.ARRAY,
      'tokenizer.ggml.scores': GgufValueType.ARRAY,
      'tokenizer.ggml.token_type': GgufValueType.ARRAY,
      'tokenizer.ggml.bos_token_id': GgufValueType.UINT32,
      'tokenizer.ggml.eos_token_id': GgufValueType.UINT32,
      'tokenizer.ggml.unknown_token_id': GgufValueType.UINT32,
      'tokenizer.ggml.add_bos_token': GgufValueType.BOOL,
      'tokenizer.ggml.add_eos_token': GgufValueType.BOOL,
    };
    for (const [key, type] of Object.entries(types)) {
      assert.equal(parsed.kvs.get(key)?.type, type, key);
    }
    const value = (key: string) => parsed.kvs.get(key)?.value;
    assert.equal(value('general.architecture'), 'llama');
    assert.equal(value('tokenizer.ggml.model'), 'llama');
    assert.equal(value('llama.rope.dimension_count'), nEmbd / 4);
    assert.equal(value('llama.vocab_size'), nVocab);
    assert.deepEqual(value('tokenizer.ggml.tokens'), vocab.tokens);
    assert.equal(parsed.kvs.get('tokenizer.ggml.scores')?.arrayType, GgufValueType.FLOAT32);
    assert.equal(parsed.kvs.get('tokenizer.ggml.token_type')?.arrayType, GgufValueType.INT32);
    assert.deepEqual(value('tokenizer.ggml.token_type'), [...vocab.types]);

    const expected: [string, number[]][] = [
      ['token_embd.weight', [nEmbd, nVocab]],
      ['output_norm.weight', [nEmbd]],
      ['output.weight', [nEmbd, nVocab]],
    ];
    for (let i = 0; i < 2; i++) {
      expected.push(
        [`blk.${i}.attn_norm.weight`, [nEmbd]],
        [`blk.${i}.attn_q.weight`, [nEmbd, nEmbd]],
        [`blk.${i}.attn_k.weight`, [nEmbd, nEmbdKv]],
        [`blk.${i}.attn_v.weight`, [nEmbd, nEmbdKv]],
        [`blk.${i}.attn_output.weight`, [nEmbd, nEmbd]],
        [`blk.${i}.ffn_norm.weight`, [nEmbd]],
        [`blk.${i}.ffn_gate.weight`, [nEmbd, nFf]],
        [`blk.${i}.ffn_down.weight`, [nFf, nEmbd]],
        [`blk.${i}.ffn_up.weight`, [nEmbd, nFf]],
      );
    }
    assert.deepEqual(
      parsed.tensors.map((t) => [t.name, t.dims]),
      expected,
    );
    assert.equal(
      description.parameterCount,
      expected.reduce((sum, [, dims]) => sum + dims.reduce((a, b) => a * b, 1), 0),
    );

    const tensorData = (name: string) => {
      const t = parsed.tensors.find((x) => x.name === name) as ParsedTensor;
      const start = dataOffset + t.offsetBytes;
      const bytes = buf.subarray(start, start + ggmlTensorBytes(t.type as GgmlType, t.dims));
      return new Float32Array(
        bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length),
      );
    };
    assert.ok(tensorData('blk.0.ffn_norm.weight').every((x) => x === 1));
    const output = tensorData('output.weight');
    assert.ok(
      output.subarray(0, 259 * nEmbd).every((x) => x === 0),
      'special and byte rows zero',
    );
    const rest = output.subarray(259 * nEmbd);
    const std = Math.sqrt(rest.reduce((s, x) => s + x * x, 0) / rest.length);
    assert.ok(std > 0.018 && std < 0.022, `weight std ${std}`);

    // Same seed, same bytes; another seed, other bytes.
    const again = join(dir, 'tiny-again.gguf');
    await writeLlamaModel(again, { preset: 'tiny', seed: 3 });
    assert.ok(readFileSync(again).equals(buf));
    await writeLlamaModel(again, { preset: 'tiny', seed: 4 });
    assert.ok(!readFileSync(again).equals(buf));
  });

  for (const type of ['f16', 'q8_0', 'q4_0'] as const) {
    test(`tiny preset in ${type}: 2-D weights typed, norms f32`, async () => {
      const path = join(dir, `tiny-${type}.gguf`);
      await writeLlamaModel(path, { preset: 'tiny', type });
      const buf = readFileSync(path);
      const parsed = parseGgufHeader(buf);
      checkLayout(parsed, buf.length);
      const ggml = { f16: GgmlType.F16, q8_0: GgmlType.Q8_0, q4_0: GgmlType.Q4_0 }[type];
      for (const t of parsed.tensors) {
        assert.equal(t.type, t.dims.length === 1 ? GgmlType.F32 : ggml, t.name);
      }
      assert.equal(parsed.kvs.get('general.file_type')?.value, { f16: 1, q8_0: 7, q4_0: 2 }[type]);
    });
  }

  test('chat template only when asked for', async () => {
    const path = join(dir, 'tiny-chat.gguf');
    await writeLlamaModel(path, { preset: 'tiny', chatTemplate: CONTENT_ONLY_CHAT_TEMPLATE });
    const parsed = parseGgufHeader(readFileSync(path));
    assert.deepEqual(parsed.kvs.get('tokenizer.chat_template'), {
      type: GgufValueType.STRING,
      value: CONTENT_ONLY_CHAT_TEMPLATE,
    });
    await writeLlamaModel(path, { preset: 'tiny' });
    assert.equal(parseGgufHeader(readFileSync(path)).kvs.has('tokenizer.chat_template'), false);
  });

  test('125m preset in q8_0: about 125M parameters, layout valid', async () => {
    const path = join(dir, '125m.gguf');
    const description = await writeLlamaModel(path, { preset: '125m' });
    const fileBytes = statSync(path).size;
    assert.equal(description.fileBytes, fileBytes);
    assert.ok(
      description.parameterCount > 120e6 && description.parameterCount < 130e6,
      `${description.parameterCount} parameters`,
    );
    const parsed = parseGgufHeader(await readHead(path, 1 << 20));
    checkLayout(parsed, fileBytes);
    assert.equal(parsed.tensors.length, 3 + 12 * 9);
    assert.equal(parsed.kvs.get('llama.attention.head_count_kv')?.value, 4);
    rmSync(path);
  });
});
