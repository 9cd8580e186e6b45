/**
 * What a model will cost in memory before it is loaded, and whether it fits beside the others.
 * Estimates follow llama.cpp's own allocations: the weights (the file, mapped), an f16 KV cache for
 * the whole context, the projector, and compute buffers for one batch of logits and activations.
 */
import type { ModelRecord } from '../../models/catalog/model-record.ts'
import { ModelError } from '../errors.ts'

export interface MemoryEstimate {
  weights: number
  kvCache: number
  projector: number
  compute: number
  total: number
}

const MiB = 1024 * 1024
const F16_BYTES = 2
const F32_BYTES = 4
/** llama.cpp's default micro-batch: the compute buffer holds this many rows of activations and logits. */
const UBATCH = 512
/** Runtime, graph and allocator overhead that does not scale with the model. */
const FIXED_OVERHEAD = 48 * MiB

/** `slots`: parallel sequences, each with the model's whole context in the KV cache. */
export function estimateModelMemory(model: ModelRecord, slots = 1): MemoryEstimate {
  const weights = model.sizeBytes
  const projector = Math.round(model.projectorSizeBytes * 1.25)
  let kvCache = 0
  let compute = FIXED_OVERHEAD
  const shape = model.shape
  if (shape && model.kind === 'chat') {
    const kvWidth = (shape.embeddingLength / shape.headCount) * shape.headCountKv
    kvCache = 2 * shape.layers * model.contextLength * slots * kvWidth * F16_BYTES
    compute += UBATCH * (shape.vocabularySize + 4 * shape.embeddingLength) * F32_BYTES
  } else if (shape) {
    // Encoders keep no cache between calls; their buffers scale with one batch of the context.
    compute += Math.min(model.contextLength, UBATCH) * 8 * shape.embeddingLength * F32_BYTES
  } else if (model.kind === 'speech') {
    // whisper.cpp: encoder and decoder buffers are about half the weights again for small models.
    compute += Math.round(weights * 0.5)
  }
  return { weights, kvCache, projector, compute, total: weights + kvCache + projector + compute }
}

export interface LoadedFootprint {
  id: string
  bytes: number
  /** Only idle models can be evicted to make room. */
  idle: boolean
  lastUsed: number
}

/**
 * Which loaded models to unload so `needed` bytes fit under the budget: idle ones, least recently
 * used first. Throws `insufficient_memory` with the numbers when even that is not enough.
 */
export function planEvictions(modelId: string, needed: number, budget: number, loaded: LoadedFootprint[]): string[] {
  let used = loaded.reduce((sum, m) => sum + m.bytes, 0)
  if (needed + used <= budget) return []
  const evict: string[] = []
  for (const m of [...loaded].filter((l) => l.idle).sort((a, b) => a.lastUsed - b.lastUsed)) {
    evict.push(m.id)
    used -= m.bytes
    if (needed + used <= budget) return evict
  }
  const busy = loaded.filter((l) => !l.idle)
  throw new ModelError(
    'insufficient_memory',
    `Model '${modelId}' needs about ${mib(needed)} MiB but only ${mib(Math.max(0, budget - used))} MiB of the ` +
      `${mib(budget)} MiB memory budget is free` +
      (busy.length ? ` while ${busy.map((b) => `'${b.id}' (${mib(b.bytes)} MiB)`).join(', ')} ${busy.length === 1 ? 'is' : 'are'} busy` : '') +
      '. Unload a model, raise --memory-budget, or use a smaller model.',
  )
}

function mib(bytes: number): number {
  return Math.round(bytes / MiB)
}

/** llama-server's own default for its RAM prompt cache, and the least worth having. */
const MAX_PROMPT_CACHE = 8192 * MiB
const MIN_PROMPT_CACHE = 256 * MiB

/**
 * The RAM a chat model's prompt cache may fill (prompts pushed out of their slots, kept to be read
 * back instead of computed again): a quarter of the budget still free once the model is loaded,
 * between 256 MiB and llama-server's own default of 8 GiB. The rest stays free for other models.
 */
export function promptCacheBytes(freeAfterLoad: number): number {
  return Math.min(MAX_PROMPT_CACHE, Math.max(MIN_PROMPT_CACHE, Math.floor(freeAfterLoad / 4)))
}
