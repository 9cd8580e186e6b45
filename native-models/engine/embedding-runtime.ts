/**
 * Runs inside an engine process: one embedding model (an encoder such as BERT) through
 * @fugood/llama.node, in embedding mode with the model's own pooling.
 *
 * What the binding offers for embeddings, measured on 1.7.15:
 * - `embedding(text)` keeps the previous call's tokens and decodes only what follows the prefix the
 *   two texts share, so every text after the first is pooled over part of its tokens (the same text
 *   twice gives two different vectors). Unusable.
 * - the slot queue (`parallel.enable` + `parallel.embedding`) starts every sequence at position 0 and
 *   works through its queue on its own native thread, with no round trip to JavaScript in between.
 *   With several slots it packs sequences into one decode; on the CPU build we ship that gained
 *   at most ~20 % (4 slots, tiny models), lost with 16 (attention spans the whole batch), gained
 *   nothing on a 22M-parameter model, and made a vector depend on its neighbours by up to 2e-5.
 *   With one slot a text gives the same bits alone or inside any batch. So: one slot, and a
 *   request's inputs all queued at once, so the native thread runs them back to back.
 * - a sequence longer than the context aborts the whole process (a GGML_ASSERT), and one longer than
 *   the batch would be split and pooled in parts, so lengths are checked before anything is queued.
 * - the binding's normalisation is skipped: vectors are truncated (`dimensions`) and L2-normalised
 *   here, in one place.
 */
import { ModelError } from '../errors.ts'
import { readModelFileHeader } from '../catalog/model-file-header.ts'
import { llamaNode, type LlamaContext } from './llama-binding.ts'
import type { EmbedInput, EmbedJob, EmbedResult, EngineLoadSpec, EngineModelInfo } from './engine-protocol.ts'
import { specialTokensAdded } from './special-tokens.ts'

/** `embd_normalize` value that makes the binding return the pooled vector as it is. */
const RAW = -1

export class EmbeddingRuntime {
  private constructor(
    private readonly context: LlamaContext,
    readonly info: EngineModelInfo,
    /** Longest input, in tokens, special tokens included. */
    private readonly maxTokens: number,
    private readonly vocabularySize: number | undefined,
    private readonly specialTokens: number,
    private readonly nativeDimensions: number,
  ) {}

  static async load(spec: EngineLoadSpec): Promise<EmbeddingRuntime> {
    const started = performance.now()
    const header = await readModelFileHeader(spec.path).catch(() => undefined)
    const trained = header?.format === 'gguf' ? header.trainedContext : undefined
    const vocabularySize = header?.format === 'gguf' ? header.vocabularySize : undefined
    // Positions past the trained context do not exist in an encoder's position table.
    const maxTokens = Math.min(spec.contextLength, trained ?? spec.contextLength)
    const context = await llamaNode.loadModel({
      model: spec.path,
      n_ctx: maxTokens,
      // One input must fit one batch: an encoder sees a sequence whole or not at all.
      n_batch: maxTokens,
      n_ubatch: maxTokens,
      n_parallel: 1,
      n_threads: spec.threads,
      n_gpu_layers: spec.gpuLayers,
      embedding: true,
      use_mmap: true,
    })
    try {
      if (!(await context.parallel.enable({ n_parallel: 1, n_batch: maxTokens }))) {
        throw new ModelError('engine_load_failed', 'the binding refused to start its embedding queue')
      }
    } catch (e) {
      await context.release().catch(() => undefined)
      throw e
    }
    const modelInfo = context.getModelInfo()
    const used = context.getUsedDevices()
    const info: EngineModelInfo = {
      devices: used.length > 0 ? used : ['CPU'],
      loadMs: Math.round(performance.now() - started),
      vision: false,
    }
    return new EmbeddingRuntime(context, info, maxTokens, vocabularySize, specialTokensAdded(modelInfo.metadata), modelInfo.nEmbd)
  }

  async embed(job: EmbedJob, signal: AbortSignal): Promise<EmbedResult> {
    const name = (i: number) => (job.single ? 'input' : `input[${i}]`)
    const dimensions = job.dimensions ?? this.nativeDimensions
    if (dimensions > this.nativeDimensions) {
      throw new ModelError(
        'invalid_value',
        `'dimensions' is too large: ${dimensions}. This model's embeddings have ${this.nativeDimensions} dimensions`,
        'dimensions',
      )
    }
    const texts = await Promise.all(job.inputs.map((input, i) => this.textOf(input, name(i))))
    const counts = await Promise.all(texts.map(async (text) => (await this.context.tokenize(text)).tokens.length + this.specialTokens))
    counts.forEach((count, i) => this.checkLength(count, name(i)))
    cancelledIf(signal)

    const raw = await this.runQueued(texts, signal)
    const vectors = new Float32Array(texts.length * dimensions)
    raw.forEach((vector, i) => normaliseInto(vectors, i * dimensions, vector, dimensions))
    return { type: 'embed', vectors, dimensions, promptTokens: counts.reduce((a, b) => a + b, 0) }
  }

  async release(): Promise<void> {
    this.context.parallel.disable()
    await this.context.release()
  }

  /**
   * Token ids become text through the model's own detokenizer, because the binding embeds text
   * only; the text is tokenized again like any other, and that count is what usage reports.
   */
  private async textOf(input: EmbedInput, param: string): Promise<string> {
    if (typeof input === 'string') return input
    if (this.vocabularySize !== undefined) {
      const bad = input.findIndex((id) => id >= this.vocabularySize!)
      if (bad >= 0) {
        throw new ModelError(
          'invalid_value',
          `Invalid token id ${input[bad]} in '${param}[${bad}]': this model's vocabulary has ${this.vocabularySize} tokens (ids 0 to ${this.vocabularySize - 1})`,
          `${param}[${bad}]`,
        )
      }
    }
    return this.context.detokenize(input)
  }

  private checkLength(count: number, param: string): void {
    if (count > this.maxTokens) {
      throw new ModelError(
        'context_length_exceeded',
        `This model's maximum context length is ${this.maxTokens} tokens, however '${param}' has ${count} tokens. Shorten it or split it into several inputs.`,
        param,
      )
    }
    if (count === 0) throw new ModelError('invalid_value', `'${param}' contains no tokens`, param)
  }

  /** Queues every text at once and collects the raw pooled vectors in input order. */
  private async runQueued(texts: string[], signal: AbortSignal): Promise<Float32Array[]> {
    const parallel = this.context.parallel
    const queued: Array<{ requestId: number; promise: Promise<{ embedding: number[] | Float32Array }> }> = []
    for (const text of texts) queued.push(await parallel.embedding(text, { embd_normalize: RAW }))
    const outstanding = new Set(queued.map((q) => q.requestId))
    let onAbort: () => void = () => undefined
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(new ModelError('cancelled', 'the request was cancelled'))
      if (signal.aborted) onAbort()
      else signal.addEventListener('abort', onAbort, { once: true })
    })
    const all = Promise.all(
      queued.map(async ({ requestId, promise }) => {
        const { embedding } = await promise
        outstanding.delete(requestId)
        return embedding instanceof Float32Array ? embedding : Float32Array.from(embedding)
      }),
    )
    // Whichever loses the race must not surface later as an unhandled rejection.
    aborted.catch(() => undefined)
    all.catch(() => undefined)
    try {
      return await Promise.race([all, aborted])
    } finally {
      signal.removeEventListener('abort', onAbort)
      // Cancelled or failed half way: what is still queued would only hold up the next job.
      for (const id of outstanding) this.context.ctx.cancelRequest(id)
    }
  }
}

function cancelledIf(signal: AbortSignal): void {
  if (signal.aborted) throw new ModelError('cancelled', 'the request was cancelled')
}

/** Writes the first `dimensions` values of `vector`, scaled to unit length, at `offset`. */
function normaliseInto(out: Float32Array, offset: number, vector: Float32Array, dimensions: number): void {
  let sum = 0
  for (let d = 0; d < dimensions; d++) sum += vector[d]! * vector[d]!
  const scale = sum > 0 ? 1 / Math.sqrt(sum) : 0
  for (let d = 0; d < dimensions; d++) out[offset + d] = vector[d]! * scale
}
