import { open } from 'node:fs/promises';

/**
 * A GGUF v3 writer: enough of the format for llama.cpp to load a model we generate ourselves
 * (no model can be downloaded where the benchmarks run).
 */

export const GGUF_MAGIC = 'GGUF';
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT_BYTES = 32;

export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;
export type GgufValueType = (typeof GgufValueType)[keyof typeof GgufValueType];

export const GgmlType = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8 } as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

/** Elements per block; quantised rows (ne0) must be a whole number of blocks. */
export const QK_ELEMENTS = 32;
export const Q8_0_BLOCK_BYTES = 2 + QK_ELEMENTS;
export const Q4_0_BLOCK_BYTES = 2 + QK_ELEMENTS / 2;

const TYPE_LAYOUT: Record<GgmlType, { blockElements: number; blockBytes: number; name: string }> = {
  [GgmlType.F32]: { blockElements: 1, blockBytes: 4, name: 'f32' },
  [GgmlType.F16]: { blockElements: 1, blockBytes: 2, name: 'f16' },
  [GgmlType.Q4_0]: { blockElements: QK_ELEMENTS, blockBytes: Q4_0_BLOCK_BYTES, name: 'q4_0' },
  [GgmlType.Q8_0]: { blockElements: QK_ELEMENTS, blockBytes: Q8_0_BLOCK_BYTES, name: 'q8_0' },
};

export type GgufValue =
  | { type: 'uint32'; value: number }
  | { type: 'int32'; value: number }
  | { type: 'float32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'uint64'; value: bigint }
  | { type: 'string[]'; value: readonly string[] }
  | { type: 'float32[]'; value: ArrayLike<number> }
  | { type: 'int32[]'; value: ArrayLike<number> };

export interface GgufKv {
  key: string;
  value: GgufValue;
}

/**
 * Typed metadata in insertion order. llama.cpp rejects a key whose stored type differs from the
 * one it reads (a context length written as INT32 is an error), so every setter names its type.
 */
export class GgufMetadata {
  readonly #entries = new Map<string, GgufValue>();

  uint32(key: string, value: number): this {
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
      throw new RangeError(`${key}: ${value} is not a uint32`);
    }
    return this.#set(key, { type: 'uint32', value });
  }

  int32(key: string, value: number): this {
    if (!Number.isInteger(value) || value < -0x80000000 || value > 0x7fffffff) {
      throw new RangeError(`${key}: ${value} is not an int32`);
    }
    return this.#set(key, { type: 'int32', value });
  }

  float32(key: string, value: number): this {
    return this.#set(key, { type: 'float32', value });
  }

  bool(key: string, value: boolean): this {
    return this.#set(key, { type: 'bool', value });
  }

  string(key: string, value: string): this {
    return this.#set(key, { type: 'string', value });
  }

  uint64(key: string, value: bigint | number): this {
    const big = BigInt(value);
    if (big < 0n || big > 0xffffffffffffffffn)
      throw new RangeError(`${key}: ${value} is not a uint64`);
    return this.#set(key, { type: 'uint64', value: big });
  }

  stringArray(key: string, value: readonly string[]): this {
    return this.#set(key, { type: 'string[]', value });
  }

  float32Array(key: string, value: ArrayLike<number>): this {
    return this.#set(key, { type: 'float32[]', value });
  }

  int32Array(key: string, value: ArrayLike<number>): this {
    return this.#set(key, { type: 'int32[]', value });
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  entries(): GgufKv[] {
    return [...this.#entries].map(([key, value]) => ({ key, value }));
  }

  #set(key: string, value: GgufValue): this {
    // Two copies of a key make gguf_init_from_file fail, so catch it here with the key's name.
    if (this.#entries.has(key)) throw new Error(`duplicate GGUF key ${key}`);
    this.#entries.set(key, value);
    return this;
  }
}

export interface GgufTensor {
  name: string;
  /** GGML order: ne0, the contiguous row length, first. */
  dims: readonly number[];
  type: GgmlType;
  /**
   * The tensor's bytes, or a function the writer calls when it reaches the tensor, so that a large
   * model is generated one tensor at a time rather than held in memory whole.
   */
  data: Uint8Array | (() => Uint8Array);
}

export function ggmlTypeName(type: GgmlType): string {
  return TYPE_LAYOUT[type].name;
}

/** Bytes of one row of `rowElements` elements (the unit llama.cpp addresses rows in). */
export function ggmlRowBytes(type: GgmlType, rowElements: number): number {
  const layout = TYPE_LAYOUT[type];
  if (layout === undefined) throw new Error(`unsupported ggml type ${type}`);
  if (rowElements % layout.blockElements !== 0) {
    throw new Error(
      `${layout.name} rows must be a multiple of ${layout.blockElements} elements, got ${rowElements}`,
    );
  }
  return (rowElements / layout.blockElements) * layout.blockBytes;
}

export function ggmlTensorBytes(type: GgmlType, dims: readonly number[]): number {
  if (dims.length === 0 || dims.length > 4) throw new Error(`ggml tensors have 1 to 4 dims`);
  for (const d of dims) {
    if (!Number.isSafeInteger(d) || d <= 0) throw new Error(`bad dimension ${d}`);
  }
  const rows = dims.slice(1).reduce((a, b) => a * b, 1);
  return ggmlRowBytes(type, dims[0]) * rows;
}

export function alignUp(offsetBytes: number, alignmentBytes: number): number {
  return Math.ceil(offsetBytes / alignmentBytes) * alignmentBytes;
}

export interface GgufLayout {
  /** File offset of the data section (the end of the header, padded). */
  dataOffsetBytes: number;
  /** Offset of each tensor within the data section, in the order given. */
  tensorOffsetsBytes: number[];
  tensorBytes: number[];
  fileBytes: number;
}

export interface WriteGgufOptions {
  alignmentBytes?: number;
}

/**
 * Writes a GGUF v3 file. `general.alignment` is added by the writer (UINT32) since the padding it
 * produces has to agree with it. Tensor data is written in the order given, each tensor padded to
 * the alignment, which is exactly the layout gguf_init_from_file checks offsets against.
 */
export async function writeGguf(
  path: string,
  metadata: GgufMetadata,
  tensors: readonly GgufTensor[],
  options: WriteGgufOptions = {},
): Promise<GgufLayout> {
  const alignmentBytes = options.alignmentBytes ?? GGUF_DEFAULT_ALIGNMENT_BYTES;
  if (
    !Number.isInteger(alignmentBytes) ||
    alignmentBytes <= 0 ||
    (alignmentBytes & (alignmentBytes - 1)) !== 0
  ) {
    throw new Error(`alignment must be a power of two, got ${alignmentBytes}`);
  }
  if (metadata.has('general.alignment')) {
    throw new Error('general.alignment is written by writeGguf; pass options.alignmentBytes');
  }
  const names = new Set<string>();
  for (const t of tensors) {
    // GGML_MAX_NAME is 64 including the terminating NUL.
    if (Buffer.byteLength(t.name) >= 64) throw new Error(`tensor name too long: ${t.name}`);
    if (names.has(t.name)) throw new Error(`duplicate tensor name ${t.name}`);
    names.add(t.name);
  }

  const header = new ByteSink();
  header.bytes(Buffer.from(GGUF_MAGIC, 'latin1'));
  header.u32(GGUF_VERSION);
  header.u64(tensors.length);
  const kvs = metadata.entries();
  header.u64(kvs.length + 1);
  writeKv(header, 'general.alignment', { type: 'uint32', value: alignmentBytes });
  for (const { key, value } of kvs) writeKv(header, key, value);

  const tensorBytes = tensors.map((t) => ggmlTensorBytes(t.type, t.dims));
  const tensorOffsetsBytes: number[] = [];
  let dataBytes = 0;
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i];
    header.string(t.name);
    header.u32(t.dims.length);
    for (const d of t.dims) header.u64(d);
    header.u32(t.type);
    header.u64(dataBytes);
    tensorOffsetsBytes.push(dataBytes);
    dataBytes += alignUp(tensorBytes[i], alignmentBytes);
  }
  const dataOffsetBytes = alignUp(header.length, alignmentBytes);
  header.bytes(new Uint8Array(dataOffsetBytes - header.length));

  const file = await open(path, 'w');
  try {
    let position = 0;
    const write = async (bytes: Uint8Array) => {
      let done = 0;
      while (done < bytes.length) {
        const { bytesWritten } = await file.write(bytes, done, bytes.length - done, position);
        done += bytesWritten;
        position += bytesWritten;
      }
    };
    await write(header.concat());
    const padding = new Uint8Array(alignmentBytes);
    for (let i = 0; i < tensors.length; i++) {
      const t = tensors[i];
      const data = typeof t.data === 'function' ? t.data() : t.data;
      if (data.length !== tensorBytes[i]) {
        throw new Error(
          `tensor ${t.name}: ${data.length} bytes given, ${ggmlTypeName(t.type)} [${t.dims.join(', ')}] needs ${tensorBytes[i]}`,
        );
      }
      await write(data);
      const pad = alignUp(tensorBytes[i], alignmentBytes) - tensorBytes[i];
      if (pad > 0) await write(padding.subarray(0, pad));
    }
    return {
      dataOffsetBytes,
      tensorOffsetsBytes,
      tensorBytes,
      fileBytes: dataOffsetBytes + dataBytes,
    };
  } finally {
    await file.close();
  }
}

function writeKv(sink: ByteSink, key: string, value: GgufValue): void {
  sink.string(key);
  switch (value.type) {
    case 'uint32':
      sink.u32(GgufValueType.UINT32);
      sink.u32(value.value);
      break;
    case 'int32':
      sink.u32(GgufValueType.INT32);
      sink.i32(value.value);
      break;
    case 'float32':
      sink.u32(GgufValueType.FLOAT32);
      sink.f32(value.value);
      break;
    case 'bool':
      sink.u32(GgufValueType.BOOL);
      sink.u8(value.value ? 1 : 0);
      break;
    case 'string':
      sink.u32(GgufValueType.STRING);
      sink.string(value.value);
      break;
    case 'uint64':
      sink.u32(GgufValueType.UINT64);
      sink.u64(value.value);
      break;
    case 'string[]':
      sink.u32(GgufValueType.ARRAY);
      sink.u32(GgufValueType.STRING);
      sink.u64(value.value.length);
      for (const s of value.value) sink.string(s);
      break;
    case 'float32[]':
      sink.u32(GgufValueType.ARRAY);
      sink.u32(GgufValueType.FLOAT32);
      sink.u64(value.value.length);
      for (let i = 0; i < value.value.length; i++) sink.f32(value.value[i]);
      break;
    case 'int32[]':
      sink.u32(GgufValueType.ARRAY);
      sink.u32(GgufValueType.INT32);
      sink.u64(value.value.length);
      for (let i = 0; i < value.value.length; i++) sink.i32(value.value[i]);
      break;
  }
}

/** Little-endian append-only buffer for the header (kilobytes, so chunking is not worth it). */
class ByteSink {
  #buf = new Uint8Array(4096);
  #view = new DataView(this.#buf.buffer);
  length = 0;

  u8(v: number): void {
    this.#reserve(1).setUint8(this.length, v);
    this.length += 1;
  }

  u32(v: number): void {
    this.#reserve(4).setUint32(this.length, v, true);
    this.length += 4;
  }

  i32(v: number): void {
    this.#reserve(4).setInt32(this.length, v, true);
    this.length += 4;
  }

  f32(v: number): void {
    this.#reserve(4).setFloat32(this.length, v, true);
    this.length += 4;
  }

  u64(v: number | bigint): void {
    this.#reserve(8).setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
  }

  string(s: string): void {
    const utf8 = Buffer.from(s, 'utf8');
    this.u64(utf8.length);
    this.bytes(utf8);
  }

  bytes(b: Uint8Array): void {
    this.#reserve(b.length);
    this.#buf.set(b, this.length);
    this.length += b.length;
  }

  concat(): Uint8Array {
    return this.#buf.subarray(0, this.length);
  }

  #reserve(n: number): DataView {
    if (this.length + n > this.#buf.length) {
      const grown = new Uint8Array(Math.max(this.#buf.length * 2, this.length + n));
      grown.set(this.#buf.subarray(0, this.length));
      this.#buf = grown;
      this.#view = new DataView(grown.buffer);
    }
    return this.#view;
  }
}

// ---------------------------------------------------------------------------------------------
// Half precision and quantisation (Node 20 has no Float16Array).

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE 754 binary16 bits of `value`, rounded to nearest even (as the CPU's F16C does). */
export function f32ToF16(value: number): number {
  f32Scratch[0] = value;
  const x = u32Scratch[0];
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  const mantissa = x & 0x7fffff;
  if (exponent === 0xff) {
    // Keep NaNs NaN: a payload living only in the low 13 bits would otherwise read back as inf.
    return mantissa === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mantissa >>> 13);
  }
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    // Subnormal half: count units of 2^-24. Below half of the smallest one it rounds to zero.
    if (halfExponent < -10) return sign;
    const full = mantissa | 0x800000;
    const shift = 14 - halfExponent;
    let q = full >>> shift;
    const rest = full & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rest > half || (rest === half && (q & 1) === 1)) q++;
    // A carry out of the subnormal range lands on the smallest normal, which is correct.
    return sign | q;
  }
  let bits = (halfExponent << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  // A carry into the exponent is still right, up to and including overflow to infinity.
  if (rest > 0x1000 || (rest === 0x1000 && (bits & 1) === 1)) bits++;
  return sign | bits;
}

export function f16ToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

export function encodeF32(values: ArrayLike<number>): Uint8Array {
  const out = Float32Array.from(values);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

export function encodeF16(values: ArrayLike<number>): Uint8Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = f32ToF16(values[i]);
  // Uint16Array is host-endian; every platform llama.cpp runs on here is little-endian.
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

function checkBlocks(count: number): number {
  if (count % QK_ELEMENTS !== 0) {
    throw new Error(`quantised data must be a multiple of ${QK_ELEMENTS} values, got ${count}`);
  }
  return count / QK_ELEMENTS;
}

/**
 * The f16 bits of a block scale, one step larger in magnitude where rounding made it so small
 * that `amax` would land beyond the last quant level (`levels` steps of d): f16 subnormals,
 * which small blocks' scales are, keep only a few significant bits.
 */
function scaleF16(scale: number, amax: number, levels: number): number {
  const bits = f32ToF16(scale);
  return amax > levels * Math.abs(f16ToF32(bits)) ? bits + 1 : bits;
}

/**
 * Q8_0: per block of 32, d = max|x| / 127 stored as f16, q = round(x / d). Unlike ggml's reference
 * quantiser the quants are computed against the f16-rounded d, so |q*d - x| <= d/2 holds for the
 * d actually stored.
 */
export function quantizeQ8_0(values: ArrayLike<number>): Uint8Array {
  const blocks = checkBlocks(values.length);
  const out = new Uint8Array(blocks * Q8_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const base = b * QK_ELEMENTS;
    let amax = 0;
    for (let j = 0; j < QK_ELEMENTS; j++) amax = Math.max(amax, Math.abs(values[base + j]));
    const dBits = scaleF16(amax / 127, amax, 127.5);
    const d = f16ToF32(dBits);
    const id = d === 0 ? 0 : 1 / d;
    const at = b * Q8_0_BLOCK_BYTES;
    view.setUint16(at, dBits, true);
    for (let j = 0; j < QK_ELEMENTS; j++) {
      const q = Math.max(-127, Math.min(127, Math.round(values[base + j] * id)));
      out[at + 2 + j] = q & 0xff;
    }
  }
  return out;
}

export function dequantizeQ8_0(bytes: Uint8Array): Float32Array {
  const blocks = bytes.length / Q8_0_BLOCK_BYTES;
  const out = new Float32Array(blocks * QK_ELEMENTS);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < blocks; b++) {
    const at = b * Q8_0_BLOCK_BYTES;
    const d = f16ToF32(view.getUint16(at, true));
    for (let j = 0; j < QK_ELEMENTS; j++) out[b * QK_ELEMENTS + j] = view.getInt8(at + 2 + j) * d;
  }
  return out;
}

/**
 * Q4_0 as ggml lays it out: per block of 32, f16 d then 16 bytes, element j (< 16) in the low
 * nibble of byte j and element j + 16 in the high nibble; value = (q - 8) * d. As in ggml, d is
 * the signed extreme divided by -8, so that extreme maps to q = 0 exactly and the 16 levels are
 * all used; a value of the opposite sign near the extreme's magnitude needs q = 16 and is clamped
 * to 15, the one case where the error exceeds d/2 (it stays within d).
 */
export function quantizeQ4_0(values: ArrayLike<number>): Uint8Array {
  const blocks = checkBlocks(values.length);
  const out = new Uint8Array(blocks * Q4_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  const half = QK_ELEMENTS / 2;
  for (let b = 0; b < blocks; b++) {
    const base = b * QK_ELEMENTS;
    let amax = 0;
    let extreme = 0;
    for (let j = 0; j < QK_ELEMENTS; j++) {
      const v = values[base + j];
      if (Math.abs(v) > amax) {
        amax = Math.abs(v);
        extreme = v;
      }
    }
    const dBits = scaleF16(extreme / -8, amax, 8.5);
    const d = f16ToF32(dBits);
    const id = d === 0 ? 0 : 1 / d;
    const at = b * Q4_0_BLOCK_BYTES;
    view.setUint16(at, dBits, true);
    for (let j = 0; j < half; j++) {
      const lo = Math.max(0, Math.min(15, Math.round(values[base + j] * id) + 8));
      const hi = Math.max(0, Math.min(15, Math.round(values[base + j + half] * id) + 8));
      out[at + 2 + j] = lo | (hi << 4);
    }
  }
  return out;
}

export function dequantizeQ4_0(bytes: Uint8Array): Float32Array {
  const blocks = bytes.length / Q4_0_BLOCK_BYTES;
  const out = new Float32Array(blocks * QK_ELEMENTS);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const half = QK_ELEMENTS / 2;
  for (let b = 0; b < blocks; b++) {
    const at = b * Q4_0_BLOCK_BYTES;
    const d = f16ToF32(view.getUint16(at, true));
    for (let j = 0; j < half; j++) {
      const byte = bytes[at + 2 + j];
      out[b * QK_ELEMENTS + j] = ((byte & 0x0f) - 8) * d;
      out[b * QK_ELEMENTS + j + half] = ((byte >>> 4) - 8) * d;
    }
  }
  return out;
}
