/**
 * A small GGUF v3 writer: the engines' self-test models at install, and the tests' tiny random models.
 *
 * Format (little endian), see ggml/docs/gguf.md:
 *   magic "GGUF" | version u32 = 3 | tensor_count u64 | kv_count u64
 *   kv:          key (string) | value type u32 | value
 *   tensor info: name (string) | n_dims u32 | dims u64[n_dims] | ggml type u32 | offset u64
 *   padding to `general.alignment` (default 32), then the tensor data, each tensor
 *   starting at an aligned offset relative to the start of the data section.
 * A string is a u64 byte length followed by UTF-8 bytes (no terminator).
 *
 * Tensor shapes are given in ggml order: shape[0] is the fastest-varying dimension
 * (the row length), as `@huggingface/gguf` and llama.cpp's logs print them. So a
 * PyTorch Linear weight of [out, in] is written here as shape [in, out].
 */
import { closeSync, openSync, writeFileSync, writeSync } from 'node:fs'

export const GGUF_MAGIC = 0x46554747 // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3
export const GGUF_DEFAULT_ALIGNMENT = 32

/** GGUF metadata value types, with the numeric ids used in the file. */
export const GGUF_VALUE_TYPE = {
  uint8: 0,
  int8: 1,
  uint16: 2,
  int16: 3,
  uint32: 4,
  int32: 5,
  float32: 6,
  bool: 7,
  string: 8,
  array: 9,
  uint64: 10,
  int64: 11,
  float64: 12,
} as const

export type GgufNumberType = 'uint8' | 'int8' | 'uint16' | 'int16' | 'uint32' | 'int32' | 'float32' | 'float64'
export type GgufBigIntType = 'uint64' | 'int64'
export type GgufScalarType = GgufNumberType | GgufBigIntType | 'bool' | 'string'

export type GgufScalar =
  | { type: GgufNumberType; value: number }
  | { type: GgufBigIntType; value: bigint | number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }

export type GgufArray =
  | { type: 'array'; itemType: GgufNumberType; value: readonly number[] | ArrayLike<number> }
  | { type: 'array'; itemType: GgufBigIntType; value: readonly (bigint | number)[] }
  | { type: 'array'; itemType: 'bool'; value: readonly boolean[] }
  | { type: 'array'; itemType: 'string'; value: readonly string[] }

export type GgufValue = GgufScalar | GgufArray
export type GgufEntry = { key: string } & GgufValue

/** Helpers that make the value type explicit at the call site: `kv.u32('llama.block_count', 2)`. */
export const kv = {
  u8: (key: string, value: number): GgufEntry => ({ key, type: 'uint8', value }),
  i8: (key: string, value: number): GgufEntry => ({ key, type: 'int8', value }),
  u16: (key: string, value: number): GgufEntry => ({ key, type: 'uint16', value }),
  i16: (key: string, value: number): GgufEntry => ({ key, type: 'int16', value }),
  u32: (key: string, value: number): GgufEntry => ({ key, type: 'uint32', value }),
  i32: (key: string, value: number): GgufEntry => ({ key, type: 'int32', value }),
  u64: (key: string, value: bigint | number): GgufEntry => ({ key, type: 'uint64', value }),
  i64: (key: string, value: bigint | number): GgufEntry => ({ key, type: 'int64', value }),
  f32: (key: string, value: number): GgufEntry => ({ key, type: 'float32', value }),
  f64: (key: string, value: number): GgufEntry => ({ key, type: 'float64', value }),
  bool: (key: string, value: boolean): GgufEntry => ({ key, type: 'bool', value }),
  str: (key: string, value: string): GgufEntry => ({ key, type: 'string', value }),
  strs: (key: string, value: readonly string[]): GgufEntry => ({ key, type: 'array', itemType: 'string', value }),
  bools: (key: string, value: readonly boolean[]): GgufEntry => ({ key, type: 'array', itemType: 'bool', value }),
  nums: (key: string, itemType: GgufNumberType, value: readonly number[] | ArrayLike<number>): GgufEntry => ({
    key,
    type: 'array',
    itemType,
    value,
  }),
  bigs: (key: string, itemType: GgufBigIntType, value: readonly (bigint | number)[]): GgufEntry => ({
    key,
    type: 'array',
    itemType,
    value,
  }),
}

/** ggml tensor types this writer can encode, with their ggml_type ids. */
export const GGML_TYPE = { F32: 0, F16: 1 } as const
export type GgmlTensorType = keyof typeof GGML_TYPE

export interface GgufTensor {
  name: string
  /** ggml order: shape[0] is the row length (fastest-varying). */
  shape: readonly number[]
  type: GgmlTensorType
  /** Values in row-major ggml order; length must equal the product of `shape`. */
  data: Float32Array
}

export interface GgufFile {
  metadata: readonly GgufEntry[]
  tensors: readonly GgufTensor[]
  /** Data alignment; if not 32 it is also written as `general.alignment` (uint32). */
  alignment?: number
}

/** Growable little-endian byte buffer. */
export class ByteWriter {
  private buf = Buffer.alloc(1 << 16)
  length = 0

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return
    let size = this.buf.length * 2
    while (size < this.length + n) size *= 2
    const next = Buffer.alloc(size)
    this.buf.copy(next, 0, 0, this.length)
    this.buf = next
  }

  u8(v: number): void {
    this.reserve(1)
    this.buf.writeUInt8(v, this.length)
    this.length += 1
  }
  i8(v: number): void {
    this.reserve(1)
    this.buf.writeInt8(v, this.length)
    this.length += 1
  }
  u16(v: number): void {
    this.reserve(2)
    this.buf.writeUInt16LE(v, this.length)
    this.length += 2
  }
  i16(v: number): void {
    this.reserve(2)
    this.buf.writeInt16LE(v, this.length)
    this.length += 2
  }
  u32(v: number): void {
    this.reserve(4)
    this.buf.writeUInt32LE(v, this.length)
    this.length += 4
  }
  i32(v: number): void {
    this.reserve(4)
    this.buf.writeInt32LE(v, this.length)
    this.length += 4
  }
  u64(v: bigint | number): void {
    this.reserve(8)
    this.buf.writeBigUInt64LE(BigInt(v), this.length)
    this.length += 8
  }
  i64(v: bigint | number): void {
    this.reserve(8)
    this.buf.writeBigInt64LE(BigInt(v), this.length)
    this.length += 8
  }
  f32(v: number): void {
    this.reserve(4)
    this.buf.writeFloatLE(v, this.length)
    this.length += 4
  }
  f64(v: number): void {
    this.reserve(8)
    this.buf.writeDoubleLE(v, this.length)
    this.length += 8
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length)
    this.buf.set(b, this.length)
    this.length += b.length
  }

  /** Zero bytes up to the next multiple of `alignment`. */
  pad(alignment: number): void {
    const rem = this.length % alignment
    if (rem !== 0) this.bytes(new Uint8Array(alignment - rem))
  }

  result(): Buffer {
    return this.buf.subarray(0, this.length)
  }
}

function writeString(w: ByteWriter, s: string): void {
  const bytes = Buffer.from(s, 'utf8')
  w.u64(bytes.length)
  w.bytes(bytes)
}

function writeScalar(w: ByteWriter, type: GgufScalarType, v: number | bigint | boolean | string): void {
  switch (type) {
    case 'uint8':
      return w.u8(v as number)
    case 'int8':
      return w.i8(v as number)
    case 'uint16':
      return w.u16(v as number)
    case 'int16':
      return w.i16(v as number)
    case 'uint32':
      return w.u32(v as number)
    case 'int32':
      return w.i32(v as number)
    case 'float32':
      return w.f32(v as number)
    case 'float64':
      return w.f64(v as number)
    case 'uint64':
      return w.u64(v as bigint | number)
    case 'int64':
      return w.i64(v as bigint | number)
    case 'bool':
      return w.u8(v ? 1 : 0)
    case 'string':
      return writeString(w, v as string)
  }
}

function writeEntry(w: ByteWriter, e: GgufEntry): void {
  writeString(w, e.key)
  w.u32(GGUF_VALUE_TYPE[e.type])
  if (e.type === 'array') {
    w.u32(GGUF_VALUE_TYPE[e.itemType])
    const items = e.value as ArrayLike<number | bigint | boolean | string>
    w.u64(items.length)
    for (let i = 0; i < items.length; i++) writeScalar(w, e.itemType, items[i]!)
  } else {
    writeScalar(w, e.type, e.value)
  }
}

/** IEEE 754 binary16 bits for a float32 value (round to nearest even). */
const scratchF32 = new Float32Array(1)
const scratchU32 = new Uint32Array(scratchF32.buffer)

export function float32ToFloat16Bits(value: number): number {
  scratchF32[0] = value
  const x = scratchU32[0]!
  const sign = (x >>> 16) & 0x8000
  const exp = (x >>> 23) & 0xff
  let mant = x & 0x7fffff
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0) // Inf / NaN
  const e = exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00 // overflow -> Inf
  if (e <= 0) {
    if (e < -10) return sign // underflow -> signed zero
    mant |= 0x800000 // subnormal: restore the implicit bit
    const shift = 14 - e
    let half = mant >>> shift
    const rem = mant & ((1 << shift) - 1)
    const halfway = 1 << (shift - 1)
    if (rem > halfway || (rem === halfway && half & 1)) half++
    return sign | half
  }
  let half = (e << 10) | (mant >>> 13)
  const rem = mant & 0x1fff
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++ // may carry into the exponent; that is correct
  return sign | half
}

/** The raw little-endian bytes of `data` encoded as a ggml F32 or F16 tensor. */
export function tensorBytes(type: GgmlTensorType, data: Float32Array): Uint8Array {
  if (type === 'F32') return new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
  const out = new Uint16Array(data.length)
  for (let i = 0; i < data.length; i++) out[i] = float32ToFloat16Bits(data[i]!)
  return new Uint8Array(out.buffer)
}

/** Serialize a GGUF v3 file to bytes. */
export function encodeGguf(file: GgufFile): Buffer {
  const blobs = file.tensors.map((t) => {
    const n = t.shape.reduce((a, b) => a * b, 1)
    if (t.shape.length < 1 || t.shape.length > 4) throw new Error(`${t.name}: ggml tensors have 1..4 dims`)
    if (n !== t.data.length) throw new Error(`${t.name}: shape ${t.shape.join('x')} needs ${n} values, got ${t.data.length}`)
    return tensorBytes(t.type, t.data)
  })
  const { header, alignment } = encodeHeader(
    file,
    blobs.map((b) => b.length),
  )
  const w = new ByteWriter()
  w.bytes(header)
  for (const b of blobs) {
    w.bytes(b)
    w.pad(alignment)
  }
  return w.result()
}

/** A tensor whose values are made only when it is written (real-size models do not fit in one buffer). */
export interface LazyGgufTensor {
  name: string
  shape: readonly number[]
  type: GgmlTensorType
  data: () => Float32Array
}

/** Writes a GGUF tensor by tensor, holding one tensor's data at a time. */
export function writeGgufLazily(path: string, file: { metadata: readonly GgufEntry[]; tensors: readonly LazyGgufTensor[] }): void {
  const bytesPer = { F32: 4, F16: 2 } as const
  const sizes = file.tensors.map((t) => t.shape.reduce((a, b) => a * b, 1) * bytesPer[t.type])
  const { header, alignment } = encodeHeader(file, sizes)
  const fd = openSync(path, 'w')
  try {
    writeSync(fd, header)
    for (const t of file.tensors) {
      const bytes = tensorBytes(t.type, t.data())
      writeSync(fd, bytes)
      const pad = (alignment - (bytes.length % alignment)) % alignment
      if (pad) writeSync(fd, new Uint8Array(pad))
    }
  } finally {
    closeSync(fd)
  }
}

/** Everything before the tensor data: header, metadata, tensor infos (offsets from `byteLengths`), padding. */
function encodeHeader(
  file: { metadata: readonly GgufEntry[]; tensors: readonly { name: string; shape: readonly number[]; type: GgmlTensorType }[]; alignment?: number },
  byteLengths: number[],
): { header: Buffer; alignment: number } {
  const metadata = [...file.metadata]
  const declaredAlignment = metadata.find((e) => e.key === 'general.alignment')
  const declared = declaredAlignment?.type === 'uint32' ? declaredAlignment.value : undefined
  if (declaredAlignment && declared === undefined) throw new Error('general.alignment must be a uint32')
  const alignment = file.alignment ?? declared ?? GGUF_DEFAULT_ALIGNMENT
  if (alignment <= 0 || (alignment & (alignment - 1)) !== 0) throw new Error(`alignment ${alignment} is not a power of two`)
  if (declared !== undefined && declared !== alignment) {
    throw new Error(`general.alignment entry (${declared}) differs from alignment option (${alignment})`)
  }
  if (!declaredAlignment && alignment !== GGUF_DEFAULT_ALIGNMENT) metadata.push(kv.u32('general.alignment', alignment))

  const seenKeys = new Set<string>()
  for (const e of metadata) {
    if (seenKeys.has(e.key)) throw new Error(`duplicate metadata key ${e.key}`)
    seenKeys.add(e.key)
  }

  const w = new ByteWriter()
  w.u32(GGUF_MAGIC)
  w.u32(GGUF_VERSION)
  w.u64(file.tensors.length)
  w.u64(metadata.length)
  for (const e of metadata) writeEntry(w, e)

  let offset = 0
  const seenNames = new Set<string>()
  file.tensors.forEach((t, i) => {
    if (seenNames.has(t.name)) throw new Error(`duplicate tensor ${t.name}`)
    seenNames.add(t.name)
    writeString(w, t.name)
    w.u32(t.shape.length)
    for (const d of t.shape) w.u64(d)
    w.u32(GGML_TYPE[t.type])
    w.u64(offset)
    offset += byteLengths[i]!
    offset += (alignment - (offset % alignment)) % alignment
  })
  w.pad(alignment)
  return { header: w.result(), alignment }
}

/** Write a GGUF v3 file. */
export function writeGguf(path: string, file: GgufFile): void {
  writeFileSync(path, encodeGguf(file))
}
