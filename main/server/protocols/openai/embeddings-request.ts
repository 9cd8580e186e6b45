/**
 * The embeddings request as the contract defines it: schema, checks against the model, and the
 * conversion into an engine job. No HTTP and no engine here.
 */
import { z } from 'zod'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { EmbedInput, EmbedJob } from '../../../../engines/engine-jobs.ts'
import { invalidRequest, modelNotCompatible } from '../../services/api-error.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'

export const MAX_EMBEDDING_INPUTS = 2048

export const embeddingsRequestSchema = z.object({
  model: z.string().min(1),
  // Checked by hand below: a zod union of four array shapes names the wrong field when it fails.
  input: z.unknown(),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  dimensions: z.int().min(1).nullish(),
  user: z.string().nullish(),
})

export type EncodingFormat = 'float' | 'base64'

export interface EmbeddingsRequest {
  model: string
  inputs: EmbedInput[]
  /** The client sent one input, not an array of them. */
  single: boolean
  encodingFormat: EncodingFormat
  dimensions: number | undefined
}

export interface EmbeddingsPlan {
  encodingFormat: EncodingFormat
  job: EmbedJob
}

export function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest {
  const request = parseOrThrow(embeddingsRequestSchema, body)
  const { inputs, single } = parseInput(request.input)
  return {
    model: request.model,
    inputs,
    single,
    encodingFormat: request.encoding_format ?? 'float',
    dimensions: request.dimensions ?? undefined,
  }
}

/** Checks the request against what the model can do and builds the engine job. */
export function planEmbeddings(request: EmbeddingsRequest, model: ModelRecord): EmbeddingsPlan {
  if (!model.capabilities.includes('embeddings')) throw modelNotCompatible(model.id, 'embeddings')
  const native = model.embeddingLength
  if (request.dimensions !== undefined && native !== undefined && request.dimensions > native) {
    throw invalidRequest(`'dimensions' is too large: ${request.dimensions}. This model's embeddings have ${native} dimensions`, 'dimensions')
  }
  return {
    encodingFormat: request.encodingFormat,
    job: { type: 'embed', inputs: request.inputs, single: request.single, dimensions: request.dimensions },
  }
}

const SHAPES = 'a non-empty string, an array of non-empty strings, an array of token ids, or an array of token id arrays'

/** `input` in any of its four shapes, as a list of inputs; anything else is a 400 naming the element at fault. */
function parseInput(input: unknown): { inputs: EmbedInput[]; single: boolean } {
  if (input === undefined) throw invalidRequest("Missing required parameter: 'input'", 'input', 'missing_required_parameter')
  if (typeof input === 'string') {
    if (input.length === 0) throw invalidRequest("'input' must not be an empty string", 'input')
    return { inputs: [input], single: true }
  }
  if (!Array.isArray(input)) throw invalidRequest(`Invalid type for 'input': expected ${SHAPES}`, 'input')
  if (input.length === 0) throw invalidRequest("'input' must not be an empty array", 'input')
  if (input.length > MAX_EMBEDDING_INPUTS) {
    throw invalidRequest(`'input' has ${input.length} items; at most ${MAX_EMBEDDING_INPUTS} are allowed`, 'input')
  }
  const first = input[0]
  if (typeof first === 'number') return { inputs: [tokenIds(input, 'input')], single: true }
  if (Array.isArray(first)) return { inputs: input.map((item, i) => tokenIds(item, `input[${i}]`)), single: false }
  return {
    inputs: input.map((item, i) => {
      if (typeof item !== 'string') throw invalidRequest(`Invalid type for 'input[${i}]': expected a string`, `input[${i}]`)
      if (item.length === 0) throw invalidRequest(`'input[${i}]' must not be an empty string`, `input[${i}]`)
      return item
    }),
    single: false,
  }
}

function tokenIds(value: unknown, param: string): number[] {
  if (!Array.isArray(value)) throw invalidRequest(`Invalid type for '${param}': expected an array of token ids`, param)
  if (value.length === 0) throw invalidRequest(`'${param}' must not be an empty array`, param)
  if (value.length > MAX_EMBEDDING_INPUTS) {
    throw invalidRequest(`'${param}' has ${value.length} token ids; at most ${MAX_EMBEDDING_INPUTS} are allowed`, param)
  }
  value.forEach((id, j) => {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 0x7fffffff) {
      throw invalidRequest(`Invalid value for '${param}[${j}]': a token id is an integer of 0 or more`, `${param}[${j}]`)
    }
  })
  return value as number[]
}
