/**
 * A loaded chat or embedding model served by its own llama-server process. Hearth's jobs are
 * translated into llama-server requests field by field (never a client's body passed through), and
 * its answers back into Hearth's results and errors:
 * - chat streams from llama-server even when the client does not, so the prompt's token count
 *   (the first progress event, before any work) is checked against the context with our numbers,
 *   and a cancelled request closes the connection, which cancels the work upstream;
 * - sampling is stated in full (min_p 0 and the like), so llama-server's own defaults never change
 *   what the contract promises.
 */
import { EngineDiedError, ModelError } from '../errors.ts'
import type { RunOptions } from '../engine.ts'
import { ServerEngine } from '../server-engine.ts'
import type {
  ChatJob,
  ChatResult,
  CompleteJob,
  CompleteResult,
  RerankJob,
  RerankResult,
  TokenLogprob,
  EmbedJob,
  EmbedResult,
  EngineJob,
  CountJob,
  CountResult,
  EngineLoadSpec,
  EngineModelInfo,
  EngineResult,
} from '../engine-jobs.ts'
import { programPath, type LlamaBuild } from '../builder/llama-build.ts'
import { EngineServerProcess } from '../engine-server-process.ts'
import type { IncomingMessage } from 'node:http'
import { ProgressBatch } from '../upstream-stream/progress-batch.ts'
import {
  chatRequestBody,
  completionRequestBody,
  keepsSystemMessagesInPlace,
  MID_SYSTEM_PROBE,
  refuseToolsWithoutTemplate,
  templateTraits,
  type ChatTemplateTraits,
  type TemplateCaps,
} from '../chat-request-body.ts'
import { ChatStreamReader, type UpstreamChunk } from '../upstream-stream/chat-stream-reader.ts'
import { readEventBatches } from '../upstream-stream/event-stream.ts'
import { decodeBase64Floats, normaliseInto } from '../embedding-vectors.ts'
import { schemaProblemOf } from './schema-problem.ts'
import { readUpstreamError } from './upstream-errors.ts'
import { hugePagesEnvironment, llamaServerArgs } from './llama-server-args.ts'
import { knowsPacedDrafts } from './speculation-args.ts'
import { SlotParking } from './slot-parking.ts'
import { WrittenChatBody } from './written-chat-body.ts'

export interface LlamaServerEngineOptions {
  loadTimeoutMs?: number
  forwardLog?: boolean
  /** Where chat models' slot caches are kept between loads (in the data folder); none keeps them in memory only. */
  slotCacheDir?: string
  /** More llama-server options (cpu-faults.ts: without the kernels that crashed on this CPU). */
  extraArgs?: readonly string[]
  /** More environment for llama-server (a pooled model's lenders and their keys). */
  env?: Record<string, string>
  /** Each line llama-server writes to stderr (a pooled model watches for a lender lost). */
  onLogLine?: (line: string) => void
}

/** Inputs per llama-server embedding request: about a tenth of a second of work for short texts on one core. */
const EMBEDDING_PART_SIZE = 256

/** What the model reports of itself once loaded (`GET /v1/models` → `meta`). */
interface ModelMeta {
  vocabularySize: number
  embeddingLength: number
}

export class LlamaServerEngine extends ServerEngine {
  /** The context each request really gets: the catalog's, or less where llama-server gives less. */
  private readonly contextLength: number
  private finishedJobs = 0

  private constructor(
    server: EngineServerProcess,
    private readonly spec: EngineLoadSpec,
    info: EngineModelInfo,
    private readonly meta: ModelMeta,
    private readonly template: ChatTemplateTraits,
    private readonly slots: SlotParking | undefined,
  ) {
    super(server, info)
    this.contextLength = info.contextLength ?? spec.contextLength
  }

  static async start(spec: EngineLoadSpec, build: LlamaBuild, options: LlamaServerEngineOptions = {}): Promise<LlamaServerEngine> {
    const started = performance.now()
    const devices = devicesOf(build, spec)
    const onCpu = devices.every((d) => d === 'CPU')
    const server = await EngineServerProcess.start({
      program: programPath(build.dir, 'llama-server'),
      args: [
        ...llamaServerArgs(spec, {
          slotCacheDir: options.slotCacheDir,
          verbose: options.forwardLog,
          cpuOnly: onCpu,
          pacedDrafts: spec.speculative && knowsPacedDrafts(programPath(build.dir, 'llama-server')),
        }),
        ...(options.extraArgs ?? []),
      ],
      env: { ...hugePagesEnvironment(), ...options.env },
      onLogLine: options.onLogLine,
      apiKeyVariable: 'LLAMA_API_KEY',
      modelId: spec.modelId,
      loadTimeoutMs: options.loadTimeoutMs ?? 120_000,
      forwardLog: options.forwardLog ?? false,
    })
    try {
      const models = (await (await server.request('/v1/models')).json()) as { data?: Array<{ meta?: Record<string, number> }> }
      const meta = models.data?.[0]?.meta ?? {}
      const props = (await (await server.request('/props')).json()) as {
        modalities?: { vision?: boolean }
        chat_template?: string
        chat_template_caps?: TemplateCaps
        default_generation_settings?: { n_ctx?: number }
      }
      const slotContext = props.default_generation_settings?.n_ctx
      const info: EngineModelInfo = {
        devices,
        loadMs: Math.round(performance.now() - started),
        vision: props.modalities?.vision === true,
        engine: {
          name: 'llama-server',
          commit: build.commit,
          cpuFeatures: build.cpuFeatures,
          gpu: build.gpu,
        },
        ...(typeof slotContext === 'number' && slotContext > 0 && slotContext < spec.contextLength ? { contextLength: slotContext } : {}),
      }
      const chat = spec.kind === 'chat'
      const slots = SlotParking.forModel(server, spec, { slotCacheDir: options.slotCacheDir, onCpu })
      if (slots?.keepsSlotsOnDisk) {
        const restoring = performance.now()
        await slots.restoreSaved()
        info.restoreMs = Math.round(performance.now() - restoring)
      }
      const inPlace = chat ? keepsSystemMessagesInPlace(await templatePrompt(server, MID_SYSTEM_PROBE)) : true
      const traits = templateTraits(props.chat_template, props.chat_template_caps, inPlace)
      if (chat) info.callsTools = traits.hasTools
      return new LlamaServerEngine(server, spec, info, { vocabularySize: Number(meta.n_vocab ?? 0), embeddingLength: Number(meta.n_embd ?? 0) }, traits, slots)
    } catch (e) {
      await server.stop()
      throw e
    }
  }

  /** Saves the conversations' caches (chat models), then ends the process. */
  override async stop(): Promise<void> {
    if (this.alive) await this.slots?.saveAll()
    await this.server.stop()
  }

  async run(job: EngineJob, options: RunOptions = {}): Promise<EngineResult> {
    try {
      const result = await this.dispatch(job, options)
      this.finishedJobs++
      return result
    } catch (e) {
      // A death on the first batch ever is the build's or the CPU's, not this request's (cpu-faults.ts).
      if (e instanceof EngineDiedError && this.finishedJobs === 0) throw new EngineDiedError(e.code as 'engine_crashed', e.message, e.signal, true)
      throw e
    }
  }

  private dispatch(job: EngineJob, options: RunOptions): Promise<EngineResult> {
    if (job.type === 'chat' && this.spec.kind === 'chat') return this.chat(job, options)
    if (job.type === 'complete' && this.spec.kind === 'chat') return this.complete(job, options)
    if (job.type === 'embed' && this.spec.kind === 'embedding') return this.embed(job, options)
    if (job.type === 'rerank' && this.spec.kind === 'rerank') return this.rerank(job, options)
    if (job.type === 'count') return this.count(job)
    return Promise.reject(new ModelError('model_not_compatible', `this model cannot run '${job.type}' jobs`))
  }

  private async chat(job: ChatJob, { onProgress, signal }: RunOptions): Promise<ChatResult> {
    const hasImage = job.messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === 'image'))
    if (hasImage && !this.info.vision) throw new ModelError('model_not_compatible', `model "${this.spec.modelId}" has no vision projector`, 'model')
    refuseToolsWithoutTemplate(job, this.template, this.spec.modelId)
    this.checkLogitBias(job)
    const limit = this.contextLength
    const written = new WrittenChatBody(chatRequestBody(job, this.template.quirks))
    const taken = this.slots?.take(written.promptText, job.conversationKey)
    if (taken) written.body.id_slot = taken.slot
    let served = false
    const upstream = new AbortController()
    const cancel = () => upstream.abort()
    // The tokens one read of the engine's stream carried leave together.
    const progress = onProgress && new ProgressBatch(onProgress)
    const answer = new ChatStreamReader(progress && ((p) => progress.emit(p)), job.topLogprobs)
    let finished = false
    // Settles once llama-server has started the request (its first event), or the request is over.
    let markStarted = () => {}
    const started = new Promise<void>((resolve) => (markStarted = resolve))
    signal?.addEventListener('abort', cancel, { once: true })
    try {
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      if (taken) await this.slots!.ready(taken, started)
      const res = await this.server.streamRequest('/v1/chat/completions', written.json(), upstream.signal)
      if (res.statusCode !== 200) throw chatError(res.statusCode ?? 500, await textOf(res), limit, job)
      let checked = false
      for await (const batch of readEventBatches(res)) {
        markStarted()
        for (const data of batch) {
          // The stream is read to its end, not left at [DONE]: a reader left early is destroyed
          // with an error built for the occasion, a cost each request would pay for nothing.
          if (data === '[DONE]') {
            finished = true
            continue
          }
          const event = JSON.parse(data) as UpstreamChunk
          if (event.error) throw chatError(500, JSON.stringify(event), limit, job)
          if (event.prompt_progress && !checked) {
            checked = true
            checkContext(event.prompt_progress.total, limit)
            progress?.emit({ type: 'prompt', promptTokens: event.prompt_progress.total, cachedTokens: event.prompt_progress.cache ?? 0 })
          }
          answer.read(event)
        }
        progress?.flush()
      }
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      if (!answer.usage) throw await this.server.failureOf(new Error('the engine ended the answer early'))
      progress?.flush()
      served = true
      // The thinking's length in tokens, counted again from its text (llama-server does not report
      // it); a re-tokenised text can come out a token or two longer than it was generated.
      const reasoningTokens = answer.reasoning ? await this.countTokens(answer.reasoning, false) : 0
      const result = answer.result(Math.min(reasoningTokens, answer.usage.completion_tokens), answer.timings?.cache_n ?? 0)
      // Stopped for length short of what the request allowed: the context was full.
      const allowed = job.maxTokens ?? job.maxCompletionTokens
      if (result.finishReason === 'length' && result.completionTokens < allowed) result.contextFull = true
      return result
    } catch (e) {
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      if (e instanceof ModelError) throw e
      throw await this.server.failureOf(e)
    } finally {
      progress?.flush() // nothing generated is left behind a timer
      markStarted()
      signal?.removeEventListener('abort', cancel)
      // A request that ends early (context check, error) stops its work upstream.
      if (!finished) upstream.abort()
      if (taken) this.slots!.release(taken, served)
    }
  }

  /**
   * A raw completion on llama-server's own `/completion` (or `/infill` with a suffix): no chat
   * template, the prompt continued as it is. Streams like chat, with the same context check.
   */
  private async complete(job: CompleteJob, { onProgress, signal }: RunOptions): Promise<CompleteResult> {
    this.checkLogitBias(job)
    this.checkPromptTokens(job)
    const limit = this.contextLength
    const upstream = new AbortController()
    const cancel = () => upstream.abort()
    const progress = onProgress && new ProgressBatch(onProgress)
    let finished = false
    signal?.addEventListener('abort', cancel, { once: true })
    try {
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      const fim = job.suffix !== undefined
      const res = await this.server.streamRequest(fim ? '/infill' : '/completion', JSON.stringify(completionRequestBody(job)), upstream.signal)
      if (res.statusCode !== 200) throw completionError(res.statusCode ?? 500, await textOf(res), limit)
      let text = ''
      let checked = false
      let final: NativeFinal | undefined
      const logprobs: TokenLogprob[] | undefined = job.logprobs === undefined ? undefined : []
      reading: for await (const batch of readEventBatches(res)) {
        for (const data of batch) {
          if (data === '[DONE]') break reading
          const event = JSON.parse(data) as NativeChunk
          if (event.error) throw completionError(500, JSON.stringify(event), limit)
          if (event.prompt_progress && !checked) {
            checked = true
            checkContext(event.prompt_progress.total, limit)
          }
          const pieces = logprobs && event.completion_probabilities ? nativeLogprobs(event.completion_probabilities, job.logprobs!) : undefined
          if (pieces) logprobs!.push(...pieces)
          if (event.content) {
            text += event.content
            progress?.emit({ type: 'text', text: event.content, ...(pieces ? { logprobs: pieces } : {}) })
          }
          if (event.stop) {
            final = event as NativeFinal
            finished = true
            break reading
          }
        }
        progress?.flush()
      }
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      if (!final) throw await this.server.failureOf(new Error('the engine ended the answer early'))
      progress?.flush()
      return {
        type: 'complete',
        text,
        finishReason: final.stop_type === 'limit' ? 'length' : 'stop',
        promptTokens: final.tokens_evaluated ?? 0,
        completionTokens: final.tokens_predicted ?? 0,
        logprobs,
      }
    } catch (e) {
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      if (e instanceof ModelError) throw e
      throw await this.server.failureOf(e)
    } finally {
      progress?.flush()
      signal?.removeEventListener('abort', cancel)
      if (!finished) upstream.abort()
    }
  }

  /** Token ids must be this model's; llama-server would ignore the others without a word. */
  private checkLogitBias(job: ChatJob | CompleteJob): void {
    for (const id of Object.keys(job.logitBias ?? {})) this.checkTokenId(Number(id), 'logit_bias', `logit_bias.${id}`)
  }

  /** A prompt of token ids holds only this model's (llama-server would refuse it without naming one). */
  private checkPromptTokens(job: CompleteJob): void {
    if (typeof job.prompt !== 'string') for (const id of job.prompt) this.checkTokenId(id, 'prompt')
  }

  /** A token id a client sent, in the field named `where`, must be in this model's vocabulary. */
  private checkTokenId(id: number, where: string, param = where): void {
    const vocabulary = this.meta.vocabularySize
    if (id < vocabulary) return
    throw new ModelError(
      'invalid_value',
      `Invalid token id ${id} in '${where}': this model's vocabulary has ${vocabulary} tokens (ids 0 to ${vocabulary - 1})`,
      param,
    )
  }

  private async embed(job: EmbedJob, { signal }: RunOptions): Promise<EmbedResult> {
    const name = (i: number) => (job.single ? 'input' : `input[${i}]`)
    const native = this.meta.embeddingLength
    const dimensions = job.dimensions ?? native
    if (dimensions > native) {
      throw new ModelError('invalid_value', `'dimensions' is too large: ${dimensions}. This model's embeddings have ${native} dimensions`, 'dimensions')
    }
    job.inputs.forEach((input, i) => {
      if (typeof input !== 'string') input.forEach((id, at) => this.checkTokenId(id, `${name(i)}[${at}]`))
    })
    if (job.inputs.length === 0) return { type: 'embed', vectors: new Float32Array(0), dimensions, promptTokens: 0 }
    // Token ids mean the text they spell, wrapped in the model's special tokens like any text
    // ([CLS] … [SEP]); llama-server would embed them bare, so they go as text.
    const texts = await Promise.all(job.inputs.map(async (input) => (typeof input === 'string' ? input : this.detokenize(input))))
    const vectors = new Float32Array(job.inputs.length * dimensions)
    let promptTokens = 0
    // In parts, so a client that goes away stops the work within one part: llama-server itself
    // notices a closed connection only once a second.
    for (let start = 0; start < texts.length; start += EMBEDDING_PART_SIZE) {
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      const part = texts.slice(start, start + EMBEDDING_PART_SIZE)
      const res = await this.server.request('/v1/embeddings', { signal, body: { input: part, encoding_format: 'base64' } })
      const body = await res.text().catch((e: unknown) => {
        throw signal?.aborted ? new ModelError('cancelled', 'the request was cancelled') : e
      })
      if (!res.ok) throw await this.embeddingError(part, body, (i) => name(start + i))
      const answer = JSON.parse(body) as { data: Array<{ index: number; embedding: string | number[] }>; usage: { prompt_tokens: number } }
      for (const item of answer.data) {
        const vector = typeof item.embedding === 'string' ? decodeBase64Floats(item.embedding) : Float32Array.from(item.embedding)
        if (vector.length < dimensions) throw new ModelError('internal_error', `the model returned ${vector.length} values for an embedding of ${dimensions}`)
        normaliseInto(vectors, (start + item.index) * dimensions, vector, dimensions)
      }
      promptTokens += answer.usage.prompt_tokens
    }
    return { type: 'embed', vectors, dimensions, promptTokens }
  }

  private async rerank(job: RerankJob, { signal }: RunOptions): Promise<RerankResult> {
    const res = await this.server.request('/v1/rerank', { signal, body: { query: job.query, documents: job.documents, top_n: job.documents.length } })
    const body = await res.text().catch((e: unknown) => {
      throw signal?.aborted ? new ModelError('cancelled', 'the request was cancelled') : e
    })
    if (!res.ok) throw await this.rerankError(job, body)
    const answer = JSON.parse(body) as { results: Array<{ index: number; relevance_score: number }>; usage?: { prompt_tokens?: number } }
    const scores = new Array<number>(job.documents.length).fill(Number.NaN)
    for (const r of answer.results) scores[r.index] = r.relevance_score
    if (scores.some((s) => Number.isNaN(s))) throw new ModelError('internal_error', 'the engine did not score every document')
    return { type: 'rerank', scores, promptTokens: answer.usage?.prompt_tokens ?? 0 }
  }

  /** A query and document pair that does not fit the context, named; anything else as the engine said it. */
  private async rerankError(job: RerankJob, body: string): Promise<ModelError> {
    const max = this.contextLength
    const query = await this.countTokens(job.query)
    for (const [i, document] of job.documents.entries()) {
      const count = query + (await this.countTokens(document))
      if (count > max) {
        return new ModelError(
          'context_length_exceeded',
          `This model's maximum context length is ${max} tokens, however the query with 'documents[${i}]' has ${count} tokens. Shorten the document or split it.`,
          `documents[${i}]`,
        )
      }
    }
    return new ModelError('internal_error', `the engine refused the rerank request: ${readUpstreamError(500, body).message}`)
  }

  /** Which input llama-server refused, and why, in our words: it says how long, not which one. */
  private async embeddingError(texts: string[], body: string, name: (i: number) => string): Promise<ModelError> {
    const max = this.contextLength
    for (const [i, text] of texts.entries()) {
      const count = await this.countTokens(text)
      if (count > max) {
        return new ModelError(
          'context_length_exceeded',
          `This model's maximum context length is ${max} tokens, however '${name(i)}' has ${count} tokens. Shorten it or split it into several inputs.`,
          name(i),
        )
      }
      if (count === 0) return new ModelError('invalid_value', `'${name(i)}' contains no tokens`, name(i))
    }
    return new ModelError('internal_error', `the engine refused the embedding request: ${readUpstreamError(500, body).message}`)
  }

  /** By the model's own tokenizer, without the special tokens a prompt starts with. */
  private async count(job: CountJob): Promise<CountResult> {
    const tokens: number[] = []
    for (const text of job.texts) tokens.push(text === '' ? 0 : await this.countTokens(text, false))
    return { type: 'count', tokens }
  }

  private async detokenize(tokens: number[]): Promise<string> {
    const res = await this.server.request('/detokenize', { body: { tokens } })
    return ((await res.json()) as { content: string }).content
  }

  private async countTokens(text: string, withSpecial = true): Promise<number> {
    const res = await this.server.request('/tokenize', { body: { content: text, add_special: withSpecial } })
    return ((await res.json()) as { tokens: unknown[] }).tokens.length
  }
}

/** The prompt a conversation becomes under the model's template, or undefined where the template refuses it. */
async function templatePrompt(server: EngineServerProcess, messages: unknown[]): Promise<string | undefined> {
  try {
    const res = await server.request('/apply-template', { body: { messages } })
    if (!res.ok) {
      await res.body?.cancel()
      return undefined
    }
    return ((await res.json()) as { prompt?: string }).prompt
  } catch {
    return undefined
  }
}

async function textOf(res: IncomingMessage): Promise<string> {
  let text = ''
  for await (const chunk of res) text += chunk
  return text
}

interface NativeChunk {
  content?: string
  stop?: boolean
  completion_probabilities?: Array<{
    token: string
    logprob: number
    bytes?: number[]
    top_logprobs?: Array<{ token: string; logprob: number; bytes?: number[] }>
  }>
  prompt_progress?: { total: number }
  error?: { message?: string; type?: string }
}

interface NativeFinal extends NativeChunk {
  stop_type?: 'eos' | 'limit' | 'word' | 'none'
  tokens_predicted?: number
  tokens_evaluated?: number
}

function nativeLogprobs(entries: NonNullable<NativeChunk['completion_probabilities']>, top: number): TokenLogprob[] {
  return entries.map((e) => ({
    token: e.token,
    logprob: e.logprob,
    bytes: e.bytes ?? [...Buffer.from(e.token)],
    top_logprobs: (e.top_logprobs ?? []).slice(0, top).map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes ?? [...Buffer.from(t.token)] })),
  }))
}

/** An error llama-server answered to a completion, as the contract names it. */
function completionError(status: number, body: string, limit: number): ModelError {
  const error = readUpstreamError(status, body)
  if (error.kind === 'infill_unsupported') {
    return new ModelError('model_not_compatible', "This model has no fill-in-the-middle tokens, so it cannot complete with a 'suffix'", 'suffix')
  }
  if (error.kind === 'context_exceeded') return contextExceeded(limit, limit)
  return new ModelError('internal_error', `the engine failed the request: ${error.message}`)
}

/**
 * Our context rule: the prompt must leave room for at least one token. A `max_tokens` past the
 * room left is not refused: the answer stops where the context is full (finish reason `length`).
 */
function checkContext(promptTokens: number, limit: number): void {
  if (promptTokens >= limit) throw contextExceeded(promptTokens, limit)
}

function contextExceeded(promptTokens: number, limit: number): ModelError {
  return new ModelError(
    'context_length_exceeded',
    `This model's maximum context length is ${limit} tokens, and your messages take ${promptTokens} tokens, ` +
      'which leaves no room for an answer. Shorten the messages, or give the model a longer context.',
    'messages',
    { promptTokens, contextLength: limit },
  )
}

/** An error llama-server answered to a chat request, as the contract names it. */
function chatError(status: number, body: string, limit: number, job: ChatJob): ModelError {
  const error = readUpstreamError(status, body)
  const schema = schemaProblemOf(job, error)
  if (schema) return new ModelError('invalid_value', schema.message, schema.param)
  switch (error.kind) {
    case 'schema_at':
    case 'schema_ref':
    case 'schema_pattern':
    case 'schema':
      return new ModelError(
        'invalid_value',
        `The schema cannot be turned into a grammar: ${error.message.replace(/^JSON schema conversion failed:\s*/, '')}`,
        job.jsonSchema ? 'response_format' : 'tools',
      )
    case 'context_exceeded':
      return contextExceeded(error.promptTokens ?? limit, limit)
    case 'image':
      return new ModelError('invalid_image', `the engine could not read the image: ${error.message}`, 'messages')
    case 'template':
      return new ModelError('invalid_value', `the model's chat template rejected the messages: ${error.message}`, 'messages')
    default:
      return new ModelError('internal_error', `the engine failed the request: ${error.message}`)
  }
}

/** Where the model's layers go: the build's GPU when layers are offloaded to one, else the CPU. */
function devicesOf(build: LlamaBuild, spec: EngineLoadSpec): string[] {
  const local = build.gpu === 'none' || spec.gpuLayers === 0 ? ['CPU'] : [build.gpu.toUpperCase(), 'CPU']
  return [...local, ...(spec.rpc?.endpoints.map((e) => `RPC ${e.name}`) ?? [])]
}
