/** OpenAI's embeddings response, built from an engine result. Pure functions, no HTTP. */
import { endianness } from 'node:os'
import type { EmbedResult } from '../../../../engines/engine-jobs.ts'
import type { EncodingFormat } from './embeddings-request.ts'

export interface EmbeddingObject {
  object: 'embedding'
  index: number
  /** Floats, or with `encoding_format: "base64"` their little-endian float32 bytes in base64. */
  embedding: number[] | string
}

export interface EmbeddingsResponse {
  object: 'list'
  data: EmbeddingObject[]
  model: string
  usage: { prompt_tokens: number; total_tokens: number }
}

export function embeddingsResponse(model: string, result: EmbedResult, format: EncodingFormat): EmbeddingsResponse {
  const { vectors, dimensions } = result
  const count = dimensions === 0 ? 0 : vectors.length / dimensions
  const data: EmbeddingObject[] = []
  for (let i = 0; i < count; i++) {
    const vector = vectors.subarray(i * dimensions, (i + 1) * dimensions)
    data.push({ object: 'embedding', index: i, embedding: format === 'base64' ? base64Float32(vector) : Array.from(vector) })
  }
  return {
    object: 'list',
    data,
    model,
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  }
}

const littleEndian = endianness() === 'LE'

/** The vector's float32 bytes, little-endian whatever the machine, in base64. */
export function base64Float32(vector: Float32Array): string {
  if (littleEndian) return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64')
  const bytes = Buffer.alloc(vector.byteLength)
  vector.forEach((v, i) => bytes.writeFloatLE(v, i * 4))
  return bytes.toString('base64')
}
