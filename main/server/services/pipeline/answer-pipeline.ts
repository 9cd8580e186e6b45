/**
 * One answer's life, whatever protocol asked for it: the deadline and the client's cancel, the
 * documents a conversation names, the engine run (streamed or whole), the tokens charged to the
 * key, the notices told before the first byte, and every failure explained. Each protocol is a
 * codec in front of it: its body converted into a chat request or an engine job, the result into
 * its own JSON or its own events, written by the transport it chose (SSE or NDJSON).
 */
import type { Response } from 'express'
import type { ModelFolder } from '../../../../models/catalog/model-folder.ts'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { EngineJob, JobProgress, ResultOf } from '../../../../engines/engine-jobs.ts'
import type { ModelScheduler } from '../../../../engines/scheduler/model-scheduler.ts'
import { planChat, type ChatPlan, type ChatRequest } from '../chat/chat-request.ts'
import { DocumentInputs } from '../documents/document-inputs.ts'
import type { DocumentLibrary } from '../documents/document-library.ts'
import type { RetrievalMethod } from '../documents/document-retrieval.ts'
import { recordUsage, type RequestUsage } from '../keys/key-quotas.ts'
import { requestLifetime } from './request-lifetime.ts'
import { sendNotices, type Notices } from './request-notices.ts'

/** One event of a streamed answer: its data, and its name where the protocol names events. */
export interface StreamEvent {
  data: unknown
  name?: string
}

/** Where a streamed answer's events go: an SSE or NDJSON body the protocol opened. */
export interface EventSink {
  send(event: StreamEvent): void
  end(): void
}

/** A protocol's streamed answer: the events before the first token, for each piece, and at the end. */
export interface AnswerStream<R> {
  open(): EventSink
  start?(): StreamEvent[]
  progress(p: JobProgress): StreamEvent[]
  finish(result: R): StreamEvent[]
}

/** A whole answer in another format than JSON (a transcript as text, SRT or WebVTT). */
export interface FormattedAnswer {
  contentType: string
  body: string
}

/** What a protocol makes of a result: one JSON body, one body of another format, or a stream. */
export type AnswerShape<R> = { whole(result: R): unknown } | { formatted(result: R): FormattedAnswer } | { stream: AnswerStream<R> }

/** A protocol's stream writer: the data of the events before the first token, for each piece, at the end. */
export interface StreamWriter<R, T> {
  start?(): T[]
  progress(p: JobProgress): T[]
  finish(result: R): T[]
}

/**
 * A protocol's writer as the pipeline's stream: each item it makes is one event (`toEvent` names
 * it, where the protocol names its events).
 */
export function streamOf<R, T>(open: () => EventSink, writer: StreamWriter<R, T>, toEvent: (item: T) => StreamEvent = (data) => ({ data })): AnswerShape<R> {
  return {
    stream: {
      open,
      ...(writer.start ? { start: () => writer.start!().map(toEvent) } : {}),
      progress: (p) => writer.progress(p).map(toEvent),
      finish: (result) => writer.finish(result).map(toEvent),
    },
  }
}

export interface RunOptions {
  /** How long the model stays loaded after this request (Ollama's `keep_alive`). */
  keepAliveMs?: number | undefined
  onProgress?: (p: JobProgress) => void
  /** Usage the result does not carry, charged with it (seconds of audio). */
  usage?: Partial<RequestUsage>
}

/** A conversation ready to run: its plan, and the documents read into it (for citations). */
export interface PlannedChat {
  plan: ChatPlan
  documents: DocumentInputs
}

/** Who asks and where to tell what was set aside, for reading a conversation's documents. */
export interface DocumentRequest {
  notices: Notices
  /** Whose files the conversation may name (`requestOwner`). */
  owner: string
  signal: AbortSignal
}

export interface PipelineDeps {
  scheduler: ModelScheduler
  folder: ModelFolder
  /** The documents `/v1/files` keeps, which conversations name. */
  library: DocumentLibrary
  requestTimeoutMs: number
  retrieval: RetrievalMethod
}

export class AnswerPipeline {
  constructor(private readonly deps: PipelineDeps) {}

  /**
   * Runs `work` within the request's lifetime: one signal fires when the client goes or the
   * deadline passes, and an error then says which (`explain` words it as the protocol does).
   */
  async within<T>(res: Response, work: (signal: AbortSignal) => Promise<T>, explain: (e: unknown) => unknown = (e) => e): Promise<T> {
    const lifetime = requestLifetime(res, this.deps.requestTimeoutMs)
    try {
      return await work(lifetime.signal)
    } catch (e) {
      throw explain(lifetime.explain(e))
    } finally {
      lifetime.dispose()
    }
  }

  /** One job on the model's engine, its usage charged to the request's key. */
  async run<J extends EngineJob>(res: Response, model: ModelRecord, job: J, signal: AbortSignal, options: RunOptions = {}): Promise<ResultOf<J>> {
    res.locals.model = model.id
    const { usage, ...run } = options
    const result = await this.deps.scheduler.run(model, job, { signal, ...run })
    recordUsage(res, { ...usageIn(result), ...usage })
    return result
  }

  /** One job answered as the protocol shapes it: the notices first, then its JSON or its stream. */
  async answer<J extends EngineJob>(
    res: Response,
    model: ModelRecord,
    job: J,
    shape: AnswerShape<ResultOf<J>>,
    signal: AbortSignal,
    options: RunOptions & { notices?: Notices } = {},
  ): Promise<ResultOf<J>> {
    const { notices, ...run } = options
    if (notices) sendNotices(res, notices)
    if ('whole' in shape) {
      const result = await this.run(res, model, job, signal, run)
      res.json(shape.whole(result))
      return result
    }
    if ('formatted' in shape) {
      const result = await this.run(res, model, job, signal, run)
      const { contentType, body } = shape.formatted(result)
      res.status(200).type(contentType).send(body)
      return result
    }
    const { stream } = shape
    const sink = stream.open()
    const send = (events: StreamEvent[]) => events.forEach((e) => sink.send(e))
    if (stream.start) send(stream.start())
    const result = await this.run(res, model, job, signal, { ...run, onProgress: (p) => send(stream.progress(p)) })
    send(stream.finish(result))
    sink.end()
    return result
  }

  /** The documents a conversation names, read (whole, or the parts that answer its question) for the model. */
  async readDocuments(res: Response, model: ModelRecord, chat: ChatRequest, o: DocumentRequest): Promise<DocumentInputs> {
    res.locals.model = model.id
    const { scheduler, folder, library, retrieval } = this.deps
    return DocumentInputs.read(chat, model, { library, folder, scheduler, retrieval, notices: o.notices, owner: o.owner, signal: o.signal })
  }

  /** A conversation made ready for the model: its documents read into it, then planned into the engine's job. */
  async planChat(res: Response, model: ModelRecord, chat: ChatRequest, o: DocumentRequest & { conversationKey: string | undefined }): Promise<PlannedChat> {
    const documents = await this.readDocuments(res, model, chat, o)
    const plan = await planChat(documents.apply(chat), model, o.conversationKey)
    return { plan, documents }
  }
}

/** The tokens a result counts against the key's quotas (speech is charged by the second, by its route). */
function usageIn(result: object): Partial<RequestUsage> {
  const { promptTokens, completionTokens, cachedTokens } = result as Partial<RequestUsage>
  // A chat answer's speculative decoding, where the engine drafted (its timings say so).
  const timings = (result as { timings?: { draftTokens?: number; draftAccepted?: number } }).timings
  const drafts = timings?.draftTokens !== undefined ? { draftTokens: timings.draftTokens, draftAccepted: timings.draftAccepted ?? 0 } : {}
  return { promptTokens: promptTokens ?? 0, completionTokens: completionTokens ?? 0, cachedTokens: cachedTokens ?? 0, ...drafts }
}
