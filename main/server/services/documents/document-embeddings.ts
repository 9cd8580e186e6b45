/**
 * A document's chunks and their embeddings under one embedding model: made once, kept beside the
 * document (the store's cache, keyed by the model's file and the chunk size), and shared by
 * requests that need the same ones at the same time. Embedding jobs go through the scheduler like
 * any /v1/embeddings request.
 */
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { EmbedJob } from '../../../../engines/engine-jobs.ts'
import { isModelError } from '../../../../engines/errors.ts'
import type { ModelScheduler } from '../../../../engines/scheduler/model-scheduler.ts'
import { chunkText, type TextChunk } from './document-chunks.ts'
import type { DocumentStore } from './document-store.ts'
import { embeddingPrompts } from './embedding-prompts.ts'

export interface EmbeddedChunks {
  chunks: TextChunk[]
  dimensions: number
  /** One vector per chunk, back to back. */
  vectors: Float32Array
}

interface CachedEmbeddings {
  key: string
  dimensions: number
  /** start, end of each chunk, back to back. */
  bounds: number[]
  /** Little-endian float32 bytes. */
  vectors: string
}

/** Inputs per embedding job: one job is one turn in the model's queue, so others get in between. */
const INPUTS_PER_JOB = 32
/** How many times a text the engine finds too long is halved before giving up on it. */
const MAX_HALVINGS = 6

export class DocumentEmbeddings {
  private readonly inFlight = new Map<string, Promise<EmbeddedChunks>>()

  constructor(
    private readonly store: DocumentStore,
    private readonly scheduler: ModelScheduler,
  ) {}

  /** The document's parts of about `chunkTokens` tokens, embedded by `model`, from the cache when it has them. */
  async forDocument(id: string, text: string, model: ModelRecord, chunkTokens: number, signal: AbortSignal): Promise<EmbeddedChunks> {
    const key = [CACHE_VERSION, model.id, model.path, model.sizeBytes, model.created, chunkTokens].join('|')
    const flightKey = `${id}|${key}`
    const running = this.inFlight.get(flightKey)
    if (running) {
      // Shared with a request whose client may leave: that cancels the work, not this request.
      return running.catch((e: unknown) => {
        if (signal.aborted || !isModelError(e) || e.code !== 'cancelled') throw e
        return this.forDocument(id, text, model, chunkTokens, signal)
      })
    }
    const made = this.readOrMake(id, key, text, model, chunkTokens, signal).finally(() => this.inFlight.delete(flightKey))
    this.inFlight.set(flightKey, made)
    return made
  }

  /** The query's embedding, with the model's query prefix, cut to what the model takes. */
  async forQuery(query: string, model: ModelRecord, signal: AbortSignal): Promise<Float32Array> {
    const [first] = chunkText(query, { maxTokens: inputTokens(model), overlapTokens: 0 })
    const text = query.slice(first?.start ?? 0, first?.end ?? query.length)
    const { vectors } = await this.embed(model, [embeddingPrompts(model).query + text], signal)
    return vectors
  }

  private async readOrMake(id: string, key: string, text: string, model: ModelRecord, chunkTokens: number, signal: AbortSignal): Promise<EmbeddedChunks> {
    const cached = fromCache(await this.store.readCache(id, key), key)
    if (cached) return cached
    const chunks = documentParts(text, chunkTokens)
    const prefix = embeddingPrompts(model).document
    const { vectors, dimensions } = await this.embed(
      model,
      chunks.map((c) => prefix + text.slice(c.start, c.end)),
      signal,
    )
    const made: EmbeddedChunks = { chunks, dimensions, vectors }
    await this.store.writeCache(id, key, toCache(made, key))
    return made
  }

  /** Vectors for all texts, in jobs of INPUTS_PER_JOB. */
  private async embed(model: ModelRecord, texts: string[], signal: AbortSignal): Promise<{ vectors: Float32Array; dimensions: number }> {
    const parts: Float32Array[] = []
    let dimensions = 0
    for (let start = 0; start < texts.length; start += INPUTS_PER_JOB) {
      const batch = texts.slice(start, start + INPUTS_PER_JOB)
      const result = await this.embedBatch(model, batch, signal)
      dimensions = result.dimensions
      parts.push(result.vectors)
    }
    const vectors = new Float32Array(parts.reduce((n, p) => n + p.length, 0))
    let offset = 0
    for (const p of parts) {
      vectors.set(p, offset)
      offset += p.length
    }
    return { vectors, dimensions }
  }

  /**
   * One job; when the engine finds a text longer than the model takes (the token estimate was
   * short: code, numbers, an unusual script), each text goes alone and the too-long ones are
   * halved until they fit. A chunk's vector then stands for its first part.
   */
  private async embedBatch(model: ModelRecord, texts: string[], signal: AbortSignal): Promise<{ vectors: Float32Array; dimensions: number }> {
    try {
      return await this.run(model, texts, signal)
    } catch (e) {
      if (!isModelError(e) || e.code !== 'context_length_exceeded') throw e
    }
    const vectors: Float32Array[] = []
    let dimensions = 0
    for (const text of texts) {
      let input = text
      for (let halvings = 0; ; halvings++) {
        try {
          const result = await this.run(model, [input], signal)
          dimensions = result.dimensions
          vectors.push(result.vectors)
          break
        } catch (e) {
          if (!isModelError(e) || e.code !== 'context_length_exceeded' || halvings === MAX_HALVINGS) throw e
          input = input.slice(0, Math.ceil(input.length / 2))
        }
      }
    }
    const joined = new Float32Array(vectors.length * dimensions)
    vectors.forEach((v, i) => joined.set(v, i * dimensions))
    return { vectors: joined, dimensions }
  }

  private async run(model: ModelRecord, inputs: string[], signal: AbortSignal): Promise<{ vectors: Float32Array; dimensions: number }> {
    const job: EmbedJob = { type: 'embed', inputs, single: false, dimensions: undefined }
    const { vectors, dimensions } = await this.scheduler.run(model, job, { signal })
    return { vectors, dimensions }
  }
}

/** Bump when chunking changes, so older caches are made again. */
const CACHE_VERSION = 'v2'
/** Share of a part repeated at the start of the next one, so a fact cut in two is whole in one of them. */
const OVERLAP = 0.15

/** A document cut into the parts retrieval ranks (and, by meaning, embeds). */
export function documentParts(text: string, tokens: number): TextChunk[] {
  return chunkText(text, { maxTokens: tokens, overlapTokens: Math.round(tokens * OVERLAP) })
}

/** Tokens an input to this model may have, by our estimate: half its context, as the estimate can run short. */
export function inputTokens(model: ModelRecord): number {
  return Math.max(32, Math.floor(model.contextLength / 2))
}

function toCache(made: EmbeddedChunks, key: string): CachedEmbeddings {
  const bytes = Buffer.from(made.vectors.buffer, made.vectors.byteOffset, made.vectors.byteLength)
  return { key, dimensions: made.dimensions, bounds: made.chunks.flatMap((c) => [c.start, c.end]), vectors: bytes.toString('base64') }
}

function fromCache(value: unknown, key: string): EmbeddedChunks | undefined {
  const cached = value as Partial<CachedEmbeddings> | undefined
  if (!cached || cached.key !== key || typeof cached.vectors !== 'string' || !Array.isArray(cached.bounds) || typeof cached.dimensions !== 'number')
    return undefined
  const bytes = Buffer.from(cached.vectors, 'base64')
  const count = cached.bounds.length / 2
  if (bytes.length !== count * cached.dimensions * 4) return undefined
  const vectors = new Float32Array(count * cached.dimensions)
  for (let i = 0; i < vectors.length; i++) vectors[i] = bytes.readFloatLE(i * 4)
  const chunks = Array.from({ length: count }, (_, i) => ({ start: cached.bounds![2 * i]!, end: cached.bounds![2 * i + 1]! }))
  return { chunks, dimensions: cached.dimensions, vectors }
}
