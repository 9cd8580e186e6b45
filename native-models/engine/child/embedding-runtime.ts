/**
 * Runs inside an engine process: one embedding model (an encoder such as BERT) through
 * @fugood/llama.node, in embedding mode with the model's own pooling.
 *
 * What the binding offers for embeddings, measured on 1.7.15:
 * - `embedding(text)` keeps the previous call's tokens and decodes only what follows the prefix the
 *   two texts share, so every text after the first is pooled over part of its tokens (the same text
 *   twice gives two different vectors). Unusable.
 * - the slot queue (`parallel.enable` + `parallel.embedding`) starts every sequence at position 0 and
 *   works through its queue on its own native thread. With several slots it packs sequences into one
 *   decode; on the CPU build we ship, 4 slots ran the tiny test models 1–2× as fast (a noisy shared
 *   machine), 16 slots slower (attention spans the whole batch), a 22M-parameter model no faster;
 *   and a vector then depends on its neighbours, by up to 1.7e-5 on our generated BERT (1e-4 with
 *   flash attention), past the 1e-5 we promise. With one slot a text gives the same bits alone or
 *   inside any batch. So: one slot, kept fed ahead of its results, so the native thread runs a
 *   request's inputs back to back.
 * - a sequence longer than the context aborts the whole process (a GGML_ASSERT), and one longer than
 *   the batch would be split and pooled in parts, so lengths are checked before anything is queued.
 * - the binding's normalisation is skipped: vectors are truncated (`dimensions`) and L2-normalised
 *   here, in one place.
 */
import { ModelError } from '../../errors.ts'
import { readModelFileHeader } from '../../catalog/model-file-header.ts'
import { llamaNode, type LlamaContext } from './llama-binding.ts'
import type { EmbedInput, EmbedJob, EmbedResult, EngineLoadSpec, EngineModelInfo } from '../engine-protocol.ts'
import { specialTokensAdded } from './special-tokens.ts'

/** `embd_normalize` value that makes the binding return the pooled vector as it is. */
const RAW = -1
/** Most texts waiting in the binding's queue at once (also bounded by one context's worth of tokens). */
const MAX_QUEUED = 64

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

    const raw = await this.runQueued(texts, counts, signal)
    const vectors = new Float32Array(texts.length * dimensions)
    raw.forEach((vector, i) => {
      if (vector.length < dimensions) {
        throw new ModelError('internal_error', `the model returned ${vector.length} values for an embedding of ${dimensions}`)
      }
      normaliseInto(vectors, i * dimensions, vector, dimensions)
    })
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

  /**
   * Feeds the texts to the binding's queue and collects the raw pooled vectors in input order. Up to
   * one context's worth of tokens waits in the queue ahead of the results, so its native thread
   * never idles waiting for JavaScript. Not everything at once: the binding's cancelRequest races
   * its own thread and can crash the process, so a cancelled job just stops feeding, and what it
   * leaves behind is bounded by that one context's worth.
   */
  private runQueued(texts: string[], counts: number[], signal: AbortSignal): Promise<Float32Array[]> {
    const vectors: Float32Array[] = new Array(texts.length)
    return new Promise((resolve, reject) => {
      let next = 0
      let finished = 0
      let queuedTokens = 0
      let queued = 0
      let settled = false
      const settle = (outcome: () => void) => {
        if (settled) return
        settled = true
        signal.removeEventListener('abort', onAbort)
        outcome()
      }
      const fail = (e: unknown) => settle(() => reject(e))
      const onAbort = () => fail(new ModelError('cancelled', 'the request was cancelled'))
      const feed = () => {
        while (!settled && next < texts.length && (queued === 0 || (queued < MAX_QUEUED && queuedTokens + counts[next]! <= this.maxTokens))) {
          const i = next++
          queued++
          queuedTokens += counts[i]!
          this.context.parallel
            .embedding(texts[i]!, { embd_normalize: RAW })
            .then(({ promise }) => promise)
            .then(({ embedding }) => {
              vectors[i] = embedding instanceof Float32Array ? embedding : Float32Array.from(embedding)
              queued--
              queuedTokens -= counts[i]!
              if (++finished === texts.length) settle(() => resolve(vectors))
              else feed()
            }, fail)
        }
      }
      if (signal.aborted) return onAbort()
      if (texts.length === 0) return resolve(vectors)
      signal.addEventListener('abort', onAbort, { once: true })
      feed()
    })
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
