/**
 * A model served by another machine, behind the same engine interface as a local one, so every
 * route, key, quota, log and metric works unchanged. Each job becomes a plain OpenAI request
 * (Hearth's validated job, never the client's body), sent to the least busy healthy copy; a copy
 * that fails before answering is retried on the next. The client's cancellation and timeout close
 * the remote connection, which stops the work there.
 */
import { openAsBlob } from 'node:fs'
import { ChatStreamReader, type UpstreamChunk } from '../upstream-stream/chat-stream-reader.ts'
import { decodeBase64Floats, normaliseInto } from '../embedding-vectors.ts'
import type { Engine, RunOptions } from '../engine.ts'
import type {
  ChatJob,
  ChatResult,
  CompleteJob,
  CompleteResult,
  EmbedJob,
  EmbedResult,
  EngineJob,
  EngineModelInfo,
  EngineResult,
  RerankJob,
  RerankResult,
  Sampling,
  SpeechJob,
  SpeechResult,
  SpeechSegment,
  TokenLogprob,
} from '../engine-jobs.ts'
import { readEventBatches } from '../upstream-stream/event-stream.ts'
import { openAiMessages } from '../openai-messages.ts'
import { ProgressBatch } from '../upstream-stream/progress-batch.ts'
import { whisperCodeOfName } from '../speech/whisper-languages.ts'
import { candidatesToAsk, refuseToolsWithoutTemplate, templateMessages, toolFields, type ChatTemplateTraits } from '../chat-request-body.ts'
import { ModelError } from '../errors.ts'
import { RemoteModelError, remoteErrorOf } from './remote-error.ts'
import { postRemote, type RemoteAnswer } from './remote-http.ts'
import { replicaKey, type RemotePool } from './remote-pool.ts'
import type { RemoteReplica } from '../../models/catalog/remote-target.ts'

/** Answers that mean "this copy cannot serve now": the next copy is tried. */
const TRY_ANOTHER = new Set([502, 503, 504])
/** How long a remote may hold a response open after its `[DONE]` before its connection is let go. */
const LINGER_AFTER_DONE_MS = 1_000

export class RemoteEngine implements Engine {
  readonly pid = undefined
  readonly info: EngineModelInfo
  private stopped = false

  constructor(
    private readonly modelId: string,
    private readonly replicas: RemoteReplica[],
    private readonly pool: RemotePool,
    vision: boolean,
  ) {
    const where = [...new Set(replicas.map((r) => new URL(r.baseUrl).host))].join(', ')
    this.info = { devices: [`remote: ${where}`], loadMs: 0, vision }
  }

  get alive(): boolean {
    return !this.stopped
  }

  onExit(): void {}

  async memoryBytes(): Promise<number> {
    return 0
  }

  async stop(): Promise<void> {
    this.stopped = true
  }

  run(job: EngineJob, options: RunOptions = {}): Promise<EngineResult> {
    switch (job.type) {
      case 'chat':
        return this.chat(job, options)
      case 'embed':
        return this.embed(job, options)
      case 'rerank':
        return this.rerank(job, options)
      case 'complete':
        return this.complete(job, options)
      case 'speech':
        return this.speech(job, options)
      case 'count':
        // OpenAI's API has no tokenizer to ask: two characters a token overcounts nearly any text.
        return Promise.resolve({ type: 'count', tokens: job.texts.map((t) => Math.ceil(t.length / 2)) })
    }
  }

  private async chat(job: ChatJob, { signal, onProgress }: RunOptions): Promise<ChatResult> {
    // A llama-server says what its template can do, and that is held as for a local model; other
    // servers do not say.
    const template = this.replicas.map((r) => this.pool.modelInfo(r)?.template).find((t) => t !== undefined)
    if (template) refuseToolsWithoutTemplate(job, template, this.modelId)
    const body = (replica: RemoteReplica) => JSON.stringify(chatBody(job, replica.model, this.pool.modelInfo(replica)?.template))
    return this.post('/chat/completions', body, signal, async (res, where) => {
      const progress = onProgress && new ProgressBatch(onProgress)
      const reader = new ChatStreamReader(progress && ((p) => progress.emit(p)), job.topLogprobs)
      await readEvents(res, where, signal, progress, (event) => reader.read(event as UpstreamChunk))
      if (!reader.usage) throw new RemoteModelError(502, 'remote_error', `${where} ended the answer without its usage`)
      const details = reader.usage
      return reader.result(details.completion_tokens_details?.reasoning_tokens ?? 0, details.prompt_tokens_details?.cached_tokens ?? 0)
    })
  }

  private async complete(job: CompleteJob, { signal, onProgress }: RunOptions): Promise<CompleteResult> {
    return this.post(
      '/completions',
      (replica) => JSON.stringify(completionBody(job, replica.model)),
      signal,
      async (res, where) => {
        let text = ''
        let finishReason: CompleteResult['finishReason'] = 'stop'
        let usage: { prompt_tokens: number; completion_tokens: number } | undefined
        const logprobs: TokenLogprob[] | undefined = job.logprobs === undefined ? undefined : []
        const progress = onProgress && new ProgressBatch(onProgress)
        await readEvents(res, where, signal, progress, (raw) => {
          const event = raw as CompletionChunk
          const choice = event.choices?.[0]
          const entries = logprobs && choice?.logprobs ? completionLogprobs(choice.logprobs, job.logprobs!) : undefined
          if (entries) logprobs!.push(...entries)
          if (choice?.text) {
            text += choice.text
            progress?.emit(entries?.length ? { type: 'text', text: choice.text, logprobs: entries } : { type: 'text', text: choice.text })
          }
          if (choice?.finish_reason) finishReason = choice.finish_reason === 'length' ? 'length' : 'stop'
          if (event.usage) usage = event.usage
        })
        return { type: 'complete', text, finishReason, promptTokens: usage?.prompt_tokens ?? 0, completionTokens: usage?.completion_tokens ?? 0, logprobs }
      },
    )
  }

  private async embed(job: EmbedJob, { signal }: RunOptions): Promise<EmbedResult> {
    if (job.inputs.length === 0) return { type: 'embed', vectors: new Float32Array(0), dimensions: job.dimensions ?? 0, promptTokens: 0 }
    const body = ({ model }: RemoteReplica) => JSON.stringify({ model, input: job.inputs, encoding_format: 'base64' })
    return this.post('/embeddings', body, signal, async (res, where) => {
      const answer = await res.json<{ data?: Array<{ index: number; embedding: string | number[] }>; usage?: { prompt_tokens?: number } }>()
      const data = answer.data ?? []
      const first = data[0]
      if (data.length !== job.inputs.length || !first)
        throw new RemoteModelError(502, 'remote_error', `${where} answered ${data.length} embeddings for ${job.inputs.length} inputs`)
      const native = vectorOf(first.embedding).length
      const dimensions = job.dimensions ?? native
      if (dimensions > native) {
        throw new ModelError('invalid_value', `'dimensions' is too large: ${dimensions}. This model's embeddings have ${native} dimensions`, 'dimensions')
      }
      const vectors = new Float32Array(job.inputs.length * dimensions)
      for (const item of data) normaliseInto(vectors, item.index * dimensions, vectorOf(item.embedding), dimensions)
      return { type: 'embed', vectors, dimensions, promptTokens: answer.usage?.prompt_tokens ?? 0 }
    })
  }

  private async rerank(job: RerankJob, { signal }: RunOptions): Promise<RerankResult> {
    const body = ({ model }: RemoteReplica) => JSON.stringify({ model, query: job.query, documents: job.documents, top_n: job.documents.length })
    return this.post('/rerank', body, signal, async (res, where) => {
      const answer = await res.json<{
        results?: Array<{ index: number; relevance_score: number }>
        usage?: { prompt_tokens?: number; total_tokens?: number }
      }>()
      const scores = new Array<number>(job.documents.length).fill(Number.NaN)
      for (const r of answer.results ?? []) scores[r.index] = r.relevance_score
      if (scores.some((s) => Number.isNaN(s))) throw new RemoteModelError(502, 'remote_error', `${where} did not score every document`)
      return { type: 'rerank', scores, promptTokens: answer.usage?.prompt_tokens ?? answer.usage?.total_tokens ?? 0 }
    })
  }

  /** The decoded audio goes as a float WAV read from the scratch file as it is sent, never whole in memory. */
  private async speech(job: SpeechJob, { signal, onProgress }: RunOptions): Promise<SpeechResult> {
    if (job.logprobs)
      throw new ModelError('model_not_compatible', `model "${this.modelId}" is remote, and its server does not report token probabilities`, 'include')
    const samples = await openAsBlob(job.audioPath)
    const durationSeconds = samples.size / 4 / 16_000
    const audio = new Blob([new Uint8Array(floatWavHeader(samples.size)), samples], { type: 'audio/wav' })
    const form = ({ model }: RemoteReplica) => {
      const body = new FormData()
      body.append('model', model)
      body.append('file', audio, 'audio.wav')
      body.append('response_format', 'verbose_json')
      body.append('timestamp_granularities[]', 'segment')
      if (job.detailed) body.append('timestamp_granularities[]', 'word')
      if (job.language) body.append('language', job.language)
      if (job.prompt) body.append('prompt', job.prompt)
      if (job.temperature !== undefined) body.append('temperature', String(job.temperature))
      if (job.vad)
        body.append(
          'chunking_strategy',
          JSON.stringify({
            type: 'server_vad',
            threshold: job.vad.threshold,
            silence_duration_ms: job.vad.minSilenceMs,
            prefix_padding_ms: job.vad.speechPadMs,
          }),
        )
      return body
    }
    const path = job.task === 'transcribe' ? '/audio/transcriptions' : '/audio/translations'
    const started = performance.now()
    return this.post(path, form, signal, async (res) => {
      const answer = await res.json<RemoteVerbose>()
      const segments = speechSegments(answer, job.detailed)
      for (const segment of segments) onProgress?.({ type: 'segment', segment })
      return {
        type: 'speech',
        segments,
        language: whisperCodeOfName(answer.language) ?? 'en',
        durationSeconds: answer.duration ?? durationSeconds,
        processMs: performance.now() - started,
      }
    })
  }

  /**
   * Sends a request to a copy of the model and reads its answer with `read`. Copies that cannot
   * be reached, or answer 502/503/504, are counted as failures and the next copy is tried; an
   * answer once begun is never sent again elsewhere.
   */
  private async post<T>(
    path: string,
    body: (replica: RemoteReplica) => string | FormData,
    signal: AbortSignal | undefined,
    read: (res: RemoteAnswer, where: string) => Promise<T>,
  ): Promise<T> {
    const tried = new Set<string>()
    const problems: string[] = []
    for (;;) {
      const replica = this.pool.pick(this.replicas, tried)
      if (!replica) {
        const untried = this.replicas.filter((r) => !tried.has(replicaKey(r))).map((r) => this.pool.problem(r))
        const why = [...problems, ...untried].filter(Boolean).join('; ') || 'no copy is reachable'
        throw new RemoteModelError(503, 'remote_unavailable', `The model '${this.modelId}' runs on another machine, and no copy of it can serve now: ${why}`)
      }
      tried.add(replicaKey(replica))
      const where = replica.baseUrl
      const end = this.pool.begin(replica)
      try {
        const headers: Record<string, string> = replica.apiKey ? { authorization: `Bearer ${replica.apiKey}` } : {}
        let res: RemoteAnswer
        try {
          res = await postRemote(`${replica.baseUrl}${path}`, headers, body(replica), signal)
        } catch (e) {
          if (signal?.aborted) throw cancelled()
          this.pool.failed(replica)
          problems.push(`${where} could not be reached (${causeOf(e)})`)
          continue
        }
        if (TRY_ANOTHER.has(res.status)) {
          this.pool.failed(replica)
          problems.push(`${where} answered ${res.status}`)
          res.discard()
          continue
        }
        if (res.status < 200 || res.status >= 300) throw remoteErrorOf(res.status, await res.text(), where, replica.apiKeyEnv)
        this.pool.succeeded(replica)
        try {
          return await read(res, where)
        } catch (e) {
          if (signal?.aborted) throw cancelled()
          if (e instanceof ModelError) throw e
          throw new RemoteModelError(502, 'remote_error', `${where} stopped answering part way (${causeOf(e)})`)
        }
      } finally {
        end()
      }
    }
  }
}

/**
 * A chat job as a plain OpenAI request. To a llama-server (`template` known), the messages as its
 * template needs them and the tools as it takes them, as for a local model.
 */
export function chatBody(job: ChatJob, model: string, template?: ChatTemplateTraits): Record<string, unknown> {
  const messages = template ? templateMessages(job, template.quirks) : job.messages
  const body: Record<string, unknown> = { model, messages: openAiMessages(messages), ...streamedSampling(job) }
  if (job.maxTokens !== undefined) body.max_tokens = job.maxTokens
  if (job.tools.length > 0) Object.assign(body, template ? toolFields(job) : openAiToolFields(job))
  if (job.jsonSchema) {
    body.response_format =
      Object.keys(job.jsonSchema).length === 0 ? { type: 'json_object' } : { type: 'json_schema', json_schema: { name: 'response', schema: job.jsonSchema } }
  }
  if (job.reasoningEffort) body.reasoning_effort = job.reasoningEffort
  // The remote makes its own "none" of reasoning_effort; a cap the client set goes on as it is.
  if (job.thinkingBudgetTokens !== undefined) body.thinking_budget_tokens = job.thinkingBudgetTokens
  if (job.topLogprobs !== undefined) {
    body.logprobs = true
    body.top_logprobs = candidatesToAsk(job.topLogprobs) // the reader keeps only those asked for
  }
  return body
}

function openAiToolFields(job: ChatJob): Record<string, unknown> {
  return {
    tools: job.tools,
    tool_choice: typeof job.toolChoice === 'object' ? { type: 'function', function: { name: job.toolChoice.function } } : job.toolChoice,
    parallel_tool_calls: job.parallelToolCalls,
  }
}

function completionBody(job: CompleteJob, model: string): Record<string, unknown> {
  return {
    model,
    prompt: job.prompt,
    ...(job.suffix !== undefined ? { suffix: job.suffix } : {}),
    max_tokens: job.maxTokens,
    ...streamedSampling(job),
    ...(job.logprobs !== undefined ? { logprobs: candidatesToAsk(job.logprobs) } : {}),
  }
}

/**
 * Streamed with usage, and the sampling stated in full (the contract's defaults included), so the
 * remote's own defaults never change what the contract promises; the same for chat and completions.
 */
function streamedSampling(job: Sampling): Record<string, unknown> {
  return {
    stream: true,
    stream_options: { include_usage: true },
    temperature: job.temperature,
    top_p: job.topP,
    top_k: job.topK,
    presence_penalty: job.presencePenalty,
    frequency_penalty: job.frequencyPenalty,
    ...(job.stop.length > 0 ? { stop: job.stop } : {}),
    ...(job.seed !== undefined ? { seed: job.seed } : {}),
    ...(job.logitBias ? { logit_bias: job.logitBias } : {}),
  }
}

interface CompletionChunk {
  choices?: Array<{
    text?: string
    finish_reason?: string | null
    logprobs?: CompletionLogprobs | null
  }>
  usage?: { prompt_tokens: number; completion_tokens: number }
}

type Candidate = { token: string; logprob: number; bytes?: number[] }

/** The legacy shape (OpenAI, vLLM, a Hearth: parallel arrays), or llama-server's (chat's entries). */
interface CompletionLogprobs {
  tokens?: string[]
  token_logprobs?: number[]
  top_logprobs?: Array<Record<string, number>> | null
  content?: Array<Candidate & { top_logprobs?: Candidate[] }>
}

/** A completion chunk's logprobs as Hearth's entries, with at most `top` candidates each. */
function completionLogprobs(l: CompletionLogprobs, top: number): TokenLogprob[] {
  const candidate = (c: Candidate) => ({ token: c.token, logprob: c.logprob, bytes: c.bytes ?? [...Buffer.from(c.token)] })
  if (l.content) return l.content.map((e) => ({ ...candidate(e), top_logprobs: (e.top_logprobs ?? []).slice(0, top).map(candidate) }))
  return (l.tokens ?? []).map((token, i) => ({
    ...candidate({ token, logprob: l.token_logprobs?.[i] ?? 0 }),
    top_logprobs: Object.entries(l.top_logprobs?.[i] ?? {})
      .slice(0, top)
      .map(([t, logprob]) => candidate({ token: t, logprob })),
  }))
}

/**
 * Every `data:` event of a streamed answer, parsed; an error event from the remote is thrown as
 * ours. `progress` is flushed after each read, so the tokens one read carried leave together.
 */
async function readEvents(
  res: RemoteAnswer,
  where: string,
  signal: AbortSignal | undefined,
  progress: ProgressBatch | undefined,
  onEvent: (event: unknown) => void,
): Promise<void> {
  const batches = readEventBatches(res.body)
  let whole = false
  try {
    for (let read = await batches.next(); !read.done; read = await batches.next()) {
      for (const data of read.value) {
        if (signal?.aborted) throw cancelled()
        if (data === '[DONE]') {
          whole = true
          readToEnd(batches, res)
          return
        }
        const event = JSON.parse(data) as { error?: { message?: string } }
        if (event.error) throw new RemoteModelError(502, 'remote_error', `${where} failed part way: ${event.error.message ?? JSON.stringify(event.error)}`)
        onEvent(event)
      }
      progress?.flush()
    }
  } finally {
    progress?.flush()
    // An answer left part way closes its connection, which stops the work on the remote.
    if (!whole) await batches.return(undefined)
  }
}

/**
 * The rest of an answer after its `[DONE]` (the response's end, usually in the same read), read in
 * the background so its connection goes back to the pool for the next request; a remote that
 * holds the response open after `[DONE]` loses the connection instead.
 */
function readToEnd(batches: AsyncGenerator<string[]>, res: RemoteAnswer): void {
  const giveUp = setTimeout(() => res.discard(), LINGER_AFTER_DONE_MS).unref()
  void (async () => {
    try {
      while (!(await batches.next()).done);
    } catch {
      // The connection is gone either way.
    } finally {
      clearTimeout(giveUp)
    }
  })()
}

function vectorOf(embedding: string | number[]): Float32Array {
  return typeof embedding === 'string' ? decodeBase64Floats(embedding) : Float32Array.from(embedding)
}

interface RemoteVerbose {
  language?: string
  duration?: number
  segments?: Array<{ start: number; end: number; text: string; tokens?: number[]; temperature?: number; avg_logprob?: number; no_speech_prob?: number }>
  words?: Array<{ word: string; start: number; end: number }>
}

/** verbose_json's segments as Hearth's, with the remote's words as the timed pieces they are made of. */
function speechSegments(answer: RemoteVerbose, detailed: boolean): SpeechSegment[] {
  const words = answer.words ?? []
  return (answer.segments ?? []).map((s) => {
    const segment: SpeechSegment = { startMs: s.start * 1000, endMs: s.end * 1000, text: s.text }
    if (detailed) {
      const inside = words.filter((w) => w.start >= s.start && w.start < s.end)
      segment.detail = {
        tokenIds: s.tokens ?? [],
        tokens: inside.map((w) => ({ text: ` ${w.word}`, probability: 1, startMs: w.start * 1000, endMs: w.end * 1000 })),
        temperature: s.temperature ?? 0,
        avgLogprob: s.avg_logprob ?? 0,
        noSpeechProb: s.no_speech_prob ?? 0,
      }
    }
    return segment
  })
}

/** A WAV header for 16 kHz mono IEEE float samples, `dataBytes` of them. */
function floatWavHeader(dataBytes: number): Buffer {
  const header = Buffer.alloc(44)
  header.write('RIFF', 0)
  header.writeUInt32LE(36 + dataBytes, 4)
  header.write('WAVE', 8)
  header.write('fmt ', 12)
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(3, 20) // IEEE float
  header.writeUInt16LE(1, 22)
  header.writeUInt32LE(16_000, 24)
  header.writeUInt32LE(16_000 * 4, 28)
  header.writeUInt16LE(4, 32)
  header.writeUInt16LE(32, 34)
  header.write('data', 36)
  header.writeUInt32LE(dataBytes, 40)
  return header
}

function cancelled(): ModelError {
  return new ModelError('cancelled', 'the request was cancelled')
}

function causeOf(e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause
  return cause?.code ?? cause?.message ?? (e as Error).message
}
