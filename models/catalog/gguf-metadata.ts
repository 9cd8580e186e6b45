/**
 * A GGUF file's metadata (its key/value header), read straight from the file. Arrays are skipped
 * and reported by their length only: a real vocabulary is 150,000 token strings and as many
 * merges, which a general parser turns into JavaScript strings at ~1 s per model, while skipping
 * them takes milliseconds. Layout (little endian): magic, version u32, tensor count u64, kv count
 * u64, then each kv as key string, value type u32, value. A string is a u64 length and its bytes.
 * The tensor infos follow the metadata (name, n_dims u32, dims u64 each, type u32, offset u64):
 * a few hundred bytes per tensor, so summing them costs one or two more reads of the window.
 */
import { createHash, type Hash } from 'node:crypto'
import { open, type FileHandle } from 'node:fs/promises'

/** A metadata value: numbers, strings and booleans as they are; an array as its length. */
export type GgufMetadataValue = number | bigint | string | boolean | { arrayLength: number }

const TYPE = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const
const FIXED_SIZE: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 }

/** More than any real model has: a corrupt count fails fast instead of reading the whole disk. */
const MAX_KV_COUNT = 100_000
const MAX_TENSOR_COUNT = 1_000_000
/** GGML_MAX_DIMS */
const MAX_TENSOR_DIMS = 4
const MAX_STRING_BYTES = 64 * 1024 * 1024
const WINDOW_BYTES = 1024 * 1024

export class GgufFormatError extends Error {
  override name = 'GgufFormatError'
}

/** What the tensor infos say, summed: enough to count parameters and spot tensors of other parts. */
export interface GgufTensorSummary {
  count: number
  /** Every tensor's element count added up: the parameter count llama.cpp and Ollama report. */
  elements: number
  /** Tensors by the first part of their name (`blk`, `token_embd`, `v` for a vision tower, `mm`, …). */
  byPrefix: Record<string, number>
}

export async function readGgufMetadata(path: string): Promise<Record<string, GgufMetadataValue>> {
  return (await readGguf(path, false)).metadata
}

/**
 * The metadata and the tensor infos, summed. Tensor infos that cannot be read leave `tensors`
 * undefined: the metadata is still what it is, and loading such a file fails in the engine as before.
 */
export async function readGgufHeader(
  path: string,
  watchTokens: readonly string[] = [],
): Promise<{
  metadata: Record<string, GgufMetadataValue>
  tensors: GgufTensorSummary | undefined
  tokensFound: Set<string>
  vocabularyHash: string | undefined
}> {
  return readGguf(path, true, watchTokens)
}

/** `watchTokens`: tokens to look for in the vocabulary as it is skipped (`tokensFound` says which it has). */
async function readGguf(
  path: string,
  withTensors: boolean,
  watchTokens: readonly string[] = [],
): Promise<{
  metadata: Record<string, GgufMetadataValue>
  tensors: GgufTensorSummary | undefined
  tokensFound: Set<string>
  vocabularyHash: string | undefined
}> {
  const handle = await open(path, 'r')
  try {
    const file = new FileCursor(handle)
    if ((await file.u32()) !== 0x46554747) throw new GgufFormatError('not a GGUF file')
    const version = await file.u32()
    if (version < 2 || version > 3) throw new GgufFormatError(`GGUF version ${version} is not supported`)
    const tensorCount = await file.u64()
    const kvCount = await file.u64()
    if (kvCount > MAX_KV_COUNT) throw new GgufFormatError(`the header claims ${kvCount} metadata entries`)
    const metadata: Record<string, GgufMetadataValue> = {}
    const tokensFound = new Set<string>()
    // The vocabulary's tokens hashed as they are skipped (a draft model must share them): a few ms.
    const tokensHash = createHash('sha256')
    let hashedTokens = false
    for (let i = 0; i < kvCount; i++) {
      const key = await file.string()
      const isTokens = key === 'tokenizer.ggml.tokens'
      const watch = isTokens ? { tokens: new Set(watchTokens), found: tokensFound, hash: tokensHash } : undefined
      metadata[key] = await readValue(file, await file.u32(), watch)
      hashedTokens ||= isTokens
    }
    const tensors = withTensors ? await readTensorInfos(file, tensorCount).catch(() => undefined) : undefined
    return { metadata, tensors, tokensFound, vocabularyHash: hashedTokens ? vocabularyHash(tokensHash, metadata) : undefined }
  } finally {
    await handle.close()
  }
}

async function readTensorInfos(file: FileCursor, count: number): Promise<GgufTensorSummary> {
  if (count > MAX_TENSOR_COUNT) throw new GgufFormatError(`the header claims ${count} tensors`)
  // No prototype: names come from the file.
  const summary: GgufTensorSummary = { count, elements: 0, byPrefix: Object.create(null) as Record<string, number> }
  for (let i = 0; i < count; i++) {
    const name = await file.string()
    const dims = await file.u32()
    if (dims > MAX_TENSOR_DIMS) throw new GgufFormatError(`tensor ${name} has ${dims} dimensions`)
    let elements = 1
    for (let d = 0; d < dims; d++) elements *= await file.u64()
    await file.u32() // ggml type
    await file.u64() // offset into the data
    summary.elements += elements
    const prefix = name.split('.', 1)[0]!
    summary.byPrefix[prefix] = (summary.byPrefix[prefix] ?? 0) + 1
  }
  return summary
}

interface TokenWatch {
  tokens: ReadonlySet<string>
  found: Set<string>
  /** Takes every token's bytes (with its length), in order. */
  hash?: Hash
}

/** The tokens' hash with what else decides how a text becomes tokens and where a turn ends. */
function vocabularyHash(tokens: Hash, metadata: Record<string, GgufMetadataValue>): string {
  const facts = ['tokenizer.ggml.model', 'tokenizer.ggml.pre', 'tokenizer.ggml.bos_token_id', 'tokenizer.ggml.eos_token_id', 'tokenizer.ggml.add_bos_token']
  for (const key of facts) tokens.update(`\n${key}=${String(metadata[key] ?? '')}`)
  return tokens.digest('hex').slice(0, 32)
}

async function readValue(file: FileCursor, type: number, watch?: TokenWatch): Promise<GgufMetadataValue> {
  switch (type) {
    case TYPE.string:
      return file.string()
    case TYPE.array: {
      const itemType = await file.u32()
      const length = await file.u64()
      if (itemType === TYPE.string) {
        await file.skipStrings(length, watch)
      } else if (itemType === TYPE.array) {
        for (let i = 0; i < length; i++) await readValue(file, TYPE.array)
      } else {
        const size = FIXED_SIZE[itemType]
        if (size === undefined) throw new GgufFormatError(`unknown array item type ${itemType}`)
        await file.skip(size * length)
      }
      return { arrayLength: length }
    }
    default:
      return file.scalar(type)
  }
}

/** Reads a file front to back through a window, so small reads cost no system call each. */
class FileCursor {
  private window = Buffer.alloc(0)
  private windowStart = 0
  private position = 0

  constructor(private readonly handle: FileHandle) {}

  async u32(): Promise<number> {
    const at = await this.take(4)
    return this.window.readUInt32LE(at)
  }

  /** A u64 as a number (counts and lengths; anything beyond 2^53 is corrupt anyway). */
  async u64(): Promise<number> {
    const at = await this.take(8)
    const value = this.window.readBigUInt64LE(at)
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufFormatError('a length in the header is impossibly large')
    return Number(value)
  }

  async string(): Promise<string> {
    const length = await this.u64()
    if (length > MAX_STRING_BYTES) throw new GgufFormatError(`a ${length}-byte string in the header`)
    const at = await this.take(length)
    return this.window.toString('utf8', at, at + length)
  }

  async scalar(type: number): Promise<number | bigint | boolean> {
    const size = FIXED_SIZE[type]
    if (size === undefined) throw new GgufFormatError(`unknown value type ${type}`)
    const at = await this.take(size)
    const w = this.window
    switch (type) {
      case TYPE.u8:
        return w.readUInt8(at)
      case TYPE.i8:
        return w.readInt8(at)
      case TYPE.u16:
        return w.readUInt16LE(at)
      case TYPE.i16:
        return w.readInt16LE(at)
      case TYPE.u32:
        return w.readUInt32LE(at)
      case TYPE.i32:
        return w.readInt32LE(at)
      case TYPE.f32:
        return w.readFloatLE(at)
      case TYPE.bool:
        return w.readUInt8(at) !== 0
      case TYPE.u64:
        return w.readBigUInt64LE(at)
      case TYPE.i64:
        return w.readBigInt64LE(at)
      default:
        return w.readDoubleLE(at)
    }
  }

  /**
   * Skips `count` strings: synchronously while they are in the window (a vocabulary is 150,000 of
   * them), noting any of `watch.tokens` on the way (only strings of a watched length are decoded).
   */
  async skipStrings(count: number, watch?: TokenWatch): Promise<void> {
    const lengths = new Set([...(watch?.tokens ?? [])].map((t) => Buffer.byteLength(t)))
    const hash = watch?.hash
    for (let left = count; left > 0; left--) {
      const end = this.windowStart + this.window.length
      if (this.position + 8 <= end) {
        const length = Number(this.window.readBigUInt64LE(this.position - this.windowStart))
        if (length > MAX_STRING_BYTES) throw new GgufFormatError(`a ${length}-byte string in the header`)
        if (this.position + 8 + length <= end) {
          const at = this.position - this.windowStart
          if (lengths.has(length)) this.note(at + 8, length, watch!)
          hash?.update(this.window.subarray(at, at + 8 + length))
          this.position += 8 + length
          continue
        }
      }
      const length = await this.u64()
      if (lengths.has(length) || hash) {
        const at = await this.take(length)
        if (lengths.has(length)) this.note(at, length, watch!)
        if (hash) {
          const prefix = Buffer.alloc(8)
          prefix.writeBigUInt64LE(BigInt(length))
          hash.update(prefix).update(this.window.subarray(at, at + length))
        }
      } else await this.skip(length)
    }
  }

  private note(at: number, length: number, watch: TokenWatch): void {
    const text = this.window.toString('utf8', at, at + length)
    if (watch.tokens.has(text)) watch.found.add(text)
  }

  async skip(bytes: number): Promise<void> {
    const inWindow = this.windowStart + this.window.length - this.position
    if (bytes <= inWindow) this.position += bytes
    else {
      this.position += bytes
      this.window = Buffer.alloc(0)
      this.windowStart = this.position
    }
  }

  /** Makes `bytes` bytes at the position readable; returns their offset in the window. */
  private async take(bytes: number): Promise<number> {
    if (this.position + bytes > this.windowStart + this.window.length) {
      const buffer = Buffer.alloc(Math.max(bytes, WINDOW_BYTES))
      const { bytesRead } = await this.handle.read(buffer, 0, buffer.length, this.position)
      if (bytesRead < bytes) throw new GgufFormatError('the header ends early (truncated file)')
      this.window = buffer.subarray(0, bytesRead)
      this.windowStart = this.position
    }
    const at = this.position - this.windowStart
    this.position += bytes
    return at
  }
}
