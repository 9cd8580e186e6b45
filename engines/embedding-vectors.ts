/** Embedding vectors as OpenAI-style servers send them, made into Hearth's: unit length, cut to size. */

/** `encoding_format: "base64"`: little-endian float32s. */
export function decodeBase64Floats(base64: string): Float32Array {
  const bytes = Buffer.from(base64, 'base64')
  const copy = new Uint8Array(bytes) // aligned for the float view
  return new Float32Array(copy.buffer, 0, copy.byteLength / 4)
}

/** Writes the first `dimensions` values of `vector`, scaled to unit length, at `offset`. */
export function normaliseInto(out: Float32Array, offset: number, vector: Float32Array, dimensions: number): void {
  let sum = 0
  for (let d = 0; d < dimensions; d++) sum += vector[d]! * vector[d]!
  const scale = sum > 0 ? 1 / Math.sqrt(sum) : 0
  for (let d = 0; d < dimensions; d++) out[offset + d] = vector[d]! * scale
}
