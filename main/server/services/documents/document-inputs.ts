/**
 * A chat's documents: the file parts of its user messages (a `/v1/files` id, or the file itself as
 * base64) read into text the model cites as [1], [2]… Documents that fit half of what the context
 * has left go whole, each where it was attached. Otherwise the chunks most like the newest question
 * (found with an embedding model of the folder) go with that question, best first, and earlier
 * messages only name their files: each question gets the parts that bear on it, and what came
 * before stays the same text, so the engine's prompt cache keeps it. Budgets are counted in the
 * chat model's own tokens (its engine's tokenizer), so a prompt never passes the context because
 * of an estimate.
 */
import type { ModelFolder } from '../../../../models/catalog/model-folder.ts'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import { recommendedModels } from '../../../../models/catalog/recommended-models.ts'
import type { ModelScheduler } from '../../../../engines/scheduler/model-scheduler.ts'
import { ApiError, invalidRequest } from '../api-error.ts'
import type { Notices } from '../pipeline/request-notices.ts'
import type { ChatRequest } from '../chat/chat-request.ts'
import { documentParts, inputTokens } from './document-embeddings.ts'
import { fileNotFound, noEmbeddingModel } from './document-errors.ts'
import { fileName, type DocumentLibrary } from './document-library.ts'
import { rankCandidates, selectParts, type Candidate, type DocumentPart, type Ranking, type RetrievalMethod } from './document-retrieval.ts'
import { trainedInputTokens } from './embedding-prompts.ts'

/** One numbered text the model was given: a whole document, or a retrieved part of one. */
export interface DocumentSource {
  citation: number
  fileId: string
  filename: string
  text: string
  /** Character offsets of `text` in the document's text. */
  start: number
  end: number
  /** Retrieved parts: cosine similarity to the question. */
  score?: number
}

export interface DocumentDeps {
  library: DocumentLibrary
  folder: ModelFolder
  scheduler: ModelScheduler
  /** Whose files the request may name (auth.ts `requestOwner`). */
  owner: string
  /** How parts are found (settings.ts `retrieval`). */
  retrieval: RetrievalMethod
  /** Where the request is told what it did not get (parts found by words alone, for want of an embedding model). */
  notices: Notices
  signal: AbortSignal
}

interface FileRef {
  messageIndex: number
  /** The field a 400 names: `messages[1].content[0].file`. */
  param: string
  file: { file_id?: string | undefined; file_data?: string | undefined; filename?: string | undefined }
  /** The message's last file part, with the person's words after it. */
  beforeQuestion: boolean
}

interface ReadDocument {
  id: string
  name: string
  text: string
  /** In the chat model's tokens. */
  tokens: number
}

/** Below this many tokens for the documents there is no room to quote anything worth citing. */
const MIN_BUDGET_TOKENS = 64
/** What a template adds around each message (role markers, separators), counted generously. */
const TEMPLATE_TOKENS_PER_MESSAGE = 8
/**
 * Retrieval's part sizes in estimated tokens, largest first (see partTokens). Measured on the
 * corpus of `npm run bench -- --only retrieval` with MiniLM, fused ranking: the fact among the
 * given parts for 64 of 64 questions with parts of 40, 60 or 80 tokens, 62 with 120, 59 with 200
 * (the size before); 80 gives the model the most around each fact. Few steps, so a growing
 * conversation seldom changes the size (a new size embeds the document again).
 */
const PART_SIZES = [80, 40]
/** How many of the best parts a reranker, where the folder has one, orders again. */
const RERANK_CANDIDATES = 24
/** As fresh as the folder's own request path wants its listing. */
const LISTING_MAX_AGE_MS = 1000
const LEAD = 'Use these excerpts from the attached documents. Cite them as [1], [2]…'
/** After the documents, what the person wrote: small models answer it rather than go on listing. */
const QUESTION = 'Question:'

export class DocumentInputs {
  static readonly none = new DocumentInputs([], [], [], undefined, undefined)

  constructor(
    /** What each citation number stands for, in the order given. */
    readonly sources: DocumentSource[],
    /** The text each file part becomes, in the order the parts come; undefined: the part goes. */
    private readonly texts: Array<string | undefined>,
    /** The file each part named or sent, in the same order: a stored conversation keeps ids, not the bytes again. */
    readonly fileIds: string[],
    /** Retrieved parts, which open the newest user message. */
    private readonly excerpts: string | undefined,
    /** What the parts were retrieved for; undefined where the documents went whole. */
    readonly query: string | undefined,
  ) {}

  /** Reads the request's file parts; a request without any needs nothing read. */
  static async read(request: ChatRequest, model: ModelRecord, deps: DocumentDeps): Promise<DocumentInputs> {
    const refs = fileRefs(request)
    if (refs.length === 0) return DocumentInputs.none
    const read: ReadDocument[] = []
    const documentOf: number[] = []
    for (const ref of refs) {
      const document = await readRef(ref, deps)
      let at = read.findIndex((d) => d.id === document.id)
      if (at < 0) at = read.push({ ...document, tokens: 0 }) - 1
      documentOf.push(at)
    }
    const counts = await countTokens(model, [conversationText(request), ...read.map((d) => d.text)], deps)
    read.forEach((d, i) => (d.tokens = counts[i + 1]!))
    const messagesTokens = counts[0]! + TEMPLATE_TOKENS_PER_MESSAGE * request.messages.length
    const budget = Math.floor((model.contextLength - messagesTokens) / 2)
    if (budget < MIN_BUDGET_TOKENS) {
      throw invalidRequest(
        `The conversation takes about ${messagesTokens} of the model's ${model.contextLength} tokens of context, which leaves no room for its documents`,
        refs[0]!.param,
        'context_length_exceeded',
      )
    }
    const whole = read.reduce((sum, d) => sum + d.tokens, 0) + (await countTokens(model, [headings(read.map((d) => d.name))], deps))[0]!
    if (whole <= budget) return wholeDocuments(read, documentOf, refs)
    const question = questionOf(request)
    const parts = await retrievedParts(read, question, budget, model, refs[0]!.param, deps)
    return retrievedDocuments(
      read,
      parts,
      documentOf,
      refs,
      request.messages.findLastIndex((m) => m.role === 'user'),
      question,
    )
  }

  /**
   * The request with each file part replaced by the text read for it: the same every time, since
   * the Responses tool loop converts the conversation again each round.
   */
  apply(request: ChatRequest): ChatRequest {
    if (this.texts.length === 0) return request
    let k = 0
    const newest = request.messages.findLastIndex((m) => m.role === 'user')
    const messages = request.messages.map((m, i) => {
      if (m.role !== 'user') return m
      const parts = typeof m.content === 'string' ? [{ type: 'text' as const, text: m.content }] : m.content
      if (!parts.some((p) => p.type === 'file') && (i !== newest || this.excerpts === undefined)) return m
      const content = parts.flatMap((p) => {
        if (p.type !== 'file') return [p]
        const text = this.texts[k++]
        return text === undefined ? [] : [{ type: 'text' as const, text }]
      })
      if (i === newest && this.excerpts !== undefined) content.unshift({ type: 'text', text: this.excerpts })
      return { ...m, content }
    })
    return { ...request, messages }
  }
}

function fileRefs(request: ChatRequest): FileRef[] {
  const refs: FileRef[] = []
  request.messages.forEach((m, messageIndex) => {
    if (m.content == null || typeof m.content === 'string') return
    m.content.forEach((p, partIndex) => {
      if (p.type !== 'file') return
      const param = `messages[${messageIndex}].content[${partIndex}].file`
      if (m.role !== 'user') throw invalidRequest(`Files are only allowed in messages with role 'user', but this message with role '${m.role}' has one`, param)
      const after = (m.content as Array<{ type: string }>).slice(partIndex + 1)
      refs.push({ messageIndex, param, file: p.file, beforeQuestion: after.some((q) => q.type === 'text') && !after.some((q) => q.type === 'file') })
    })
  })
  return refs
}

async function readRef(ref: FileRef, deps: DocumentDeps): Promise<Omit<ReadDocument, 'tokens'>> {
  const { file_id: id, file_data: data } = ref.file
  if (id !== undefined && data !== undefined) throw invalidRequest("Send a file as 'file_id' or as 'file_data', not both", ref.param)
  let stored
  if (id !== undefined) {
    stored = await deps.library.find(id, deps.owner)
    if (!stored) throw fileNotFound(id, `${ref.param}.file_id`)
  } else if (data !== undefined) {
    const { bytes, mediaType } = decodeFileData(data, `${ref.param}.file_data`)
    const name = fileName(ref.file.filename ?? defaultName(mediaType))
    try {
      // Sent again with every turn: a copy the store may drop to make room, read again when it comes back.
      stored = await deps.library.add(bytes, name, deps.owner, 'user_data', { cache: true })
    } catch (e) {
      // The reader names `file` (the upload's field); here the file is this part's data.
      throw e instanceof ApiError && e.param === 'file' ? new ApiError(e.status, e.type, e.code, e.message, `${ref.param}.file_data`) : e
    }
  } else {
    throw invalidRequest(
      "A file part needs 'file_id' (a file uploaded to /v1/files) or 'file_data' (the file, base64)",
      ref.param,
      'missing_required_parameter',
    )
  }
  const text = await (await deps.library.open()).store.text(stored.id)
  if (text === undefined) throw fileNotFound(stored.id, `${ref.param}.file_id`)
  return { id: stored.id, name: stored.name, text }
}

/** `data:<type>;base64,<bytes>` as OpenAI documents it, or bare base64. */
function decodeFileData(data: string, param: string): { bytes: Buffer; mediaType: string | undefined } {
  const url = /^data:([^;,]*)(;[^,]*)?,/.exec(data)
  if (url && !url[2]?.includes('base64')) throw invalidRequest("'file_data' must be base64: data:<media type>;base64,<data>", param)
  const base64 = url ? data.slice(url[0].length) : data
  if (!/^[A-Za-z0-9+/=_-\s]*$/.test(base64)) throw invalidRequest("'file_data' is not base64", param)
  const bytes = Buffer.from(base64, 'base64')
  if (bytes.length === 0) throw invalidRequest("'file_data' is empty", param)
  return { bytes, mediaType: url?.[1] || undefined }
}

/** A name whose extension says the format, for a file sent without one. */
function defaultName(mediaType: string | undefined): string {
  if (mediaType === 'application/pdf') return 'document.pdf'
  if (mediaType?.includes('wordprocessingml')) return 'document.docx'
  if (mediaType === 'text/markdown') return 'document.md'
  return 'document.txt'
}

/** Everything the model reads besides the documents: what their budget is left after. */
function conversationText(request: ChatRequest): string {
  const texts: string[] = []
  for (const m of request.messages) {
    if (typeof m.content === 'string') texts.push(m.content)
    else for (const p of m.content ?? []) if (p.type === 'text') texts.push(p.text)
    if (m.role === 'assistant') for (const c of m.tool_calls ?? []) texts.push(c.function.name, c.function.arguments)
  }
  if (request.tools?.length) texts.push(JSON.stringify(request.tools))
  return texts.join('\n')
}

/** The newest user message's words: what retrieval looks for. */
function questionOf(request: ChatRequest): string {
  const last = request.messages.findLast((m) => m.role === 'user')
  if (!last) return ''
  return typeof last.content === 'string' ? last.content : last.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n')
}

/** Counts in the chat model's tokens, by its engine's tokenizer. */
async function countTokens(model: ModelRecord, texts: string[], deps: DocumentDeps): Promise<number[]> {
  const result = await deps.scheduler.run(model, { type: 'count', texts }, { signal: deps.signal })
  return result.tokens
}

async function retrievedParts(
  read: ReadDocument[],
  question: string,
  budget: number,
  model: ModelRecord,
  param: string,
  deps: DocumentDeps,
): Promise<DocumentPart[]> {
  const embedder = await embeddingModelFor(deps, param)
  const { embeddings } = await deps.library.open()
  const tokens = partTokens(embedder, budget)
  const candidates: Candidate[] = []
  // Parts are sized by estimate; each document's own count says how many of the model's tokens its characters take.
  const perCharacter = new Map<string, number>()
  for (const d of read) {
    perCharacter.set(d.id, d.tokens / Math.max(1, d.text.length))
    if (!embedder) {
      for (const c of documentParts(d.text, tokens))
        candidates.push({ document: d.id, name: d.name, start: c.start, end: c.end, text: d.text.slice(c.start, c.end), vector: undefined })
      continue
    }
    const { chunks, dimensions, vectors } = await embeddings.forDocument(d.id, d.text, embedder, tokens, deps.signal)
    chunks.forEach((c, i) => {
      candidates.push({
        document: d.id,
        name: d.name,
        start: c.start,
        end: c.end,
        text: d.text.slice(c.start, c.end),
        vector: vectors.subarray(i * dimensions, (i + 1) * dimensions),
      })
    })
  }
  let ranking: Ranking | undefined
  if (question.trim() !== '') {
    const query = embedder ? await embeddings.forQuery(question, embedder, deps.signal) : undefined
    ranking = rankCandidates(candidates, question, query, deps.retrieval)
    ranking = await reranked(ranking, candidates, question, deps)
  }
  const estimate = (part: { document: string; text: string }) => Math.ceil(part.text.length * perCharacter.get(part.document)! * 1.05) + 16
  const parts = selectParts(candidates, ranking, budget, new Map(read.map((d) => [d.id, d.text])), estimate)
  // Then counted: the least alike go until what the model reads fits.
  for (;;) {
    const counts = await countTokens(model, [headings(parts.map((p) => p.name)), ...parts.map((p) => p.text)], deps)
    const total = counts.reduce((a, b) => a + b, 0)
    if (total <= budget) return parts
    if (parts.length > 1) parts.pop()
    else {
      const only = parts[0]!
      const keep = Math.floor(only.text.length * (budget / total) * 0.9)
      if (keep < 1) return []
      parts[0] = { ...only, text: only.text.slice(0, keep), end: only.start + keep }
    }
  }
}

/**
 * The embedding model retrieval ranks parts with: none by keywords alone. Without one in the folder,
 * the fused ranking goes on by words alone and says so; ranking by meaning alone cannot.
 */
async function embeddingModelFor(deps: DocumentDeps, param: string): Promise<ModelRecord | undefined> {
  if (deps.retrieval === 'keywords') return undefined
  const embedder = await pickModel(deps.folder, 'embeddings')
  if (embedder) return embedder
  if (deps.retrieval === 'embeddings') throw noEmbeddingModel(param)
  const pick = recommendedModels().find((m) => m.kind === 'embedding')
  deps.notices.add(
    `No embedding model in the models folder: the documents' parts were found by their words alone${pick ? ` (with ${pick.id} they are found by meaning too)` : ''}`,
  )
  return undefined
}

/**
 * The size of the parts retrieval ranks: small, so that the sentence holding a fact is much of its
 * part (by meaning and by words alike), within what the embedding model was trained on, and at most
 * a quarter of the budget so several parts fit. Neighbouring parts given together are joined.
 */
function partTokens(embedder: ModelRecord | undefined, budget: number): number {
  const limits = [Math.floor(budget / 4)]
  if (embedder) limits.push(trainedInputTokens(embedder), inputTokens(embedder))
  const most = Math.min(...limits)
  return PART_SIZES.find((size) => size <= most) ?? PART_SIZES.at(-1)!
}

/**
 * The ranking with its first parts ordered again by a reranker (a cross-encoder reads the question
 * and each part together), where the folder has one; their scores become its, as probabilities.
 */
async function reranked(ranking: Ranking, candidates: Candidate[], question: string, deps: DocumentDeps): Promise<Ranking> {
  const reranker = await pickModel(deps.folder, 'rerank')
  if (!reranker) return ranking
  const top = ranking.order.slice(0, RERANK_CANDIDATES)
  const { scores } = await deps.scheduler.run(
    reranker,
    { type: 'rerank', query: question, documents: top.map((i) => candidates[i]!.text) },
    { signal: deps.signal },
  )
  const newScores = [...ranking.scores]
  top.forEach((i, k) => (newScores[i] = Math.round(10000 / (1 + Math.exp(-scores[k]!))) / 10000))
  const reordered = top
    .map((i, k) => ({ i, s: scores[k]! }))
    .sort((a, b) => b.s - a.s)
    .map((x) => x.i)
  return { order: [...reordered, ...ranking.order.slice(RERANK_CANDIDATES)], scores: newScores }
}

/** The model of the folder for a job: the recommended one first, else the first by id. */
async function pickModel(folder: ModelFolder, capability: 'embeddings' | 'rerank'): Promise<ModelRecord | undefined> {
  const { models } = await folder.cachedScan(LISTING_MAX_AGE_MS)
  const fitting = models.filter((m) => m.capabilities.includes(capability))
  if (fitting.length === 0) return undefined
  const recommended = recommendedModels().map((m) => m.id)
  const rank = (m: ModelRecord) => (recommended.includes(m.id) ? recommended.indexOf(m.id) : recommended.length)
  return fitting.sort((a, b) => rank(a) - rank(b) || a.id.localeCompare(b.id))[0]!
}

/** The lines around the parts (the lead, each part's `[n] name` and blank lines), to count them. */
function headings(names: string[]): string {
  return [LEAD, ...names.map((n, i) => `[${i + 1}] ${n} (part ${i + 1})\n\n`)].join('\n')
}

/** Each document whole where it was attached, numbered in that order; one attached twice is quoted once. */
function wholeDocuments(read: ReadDocument[], documentOf: number[], refs: FileRef[]): DocumentInputs {
  const sources: DocumentSource[] = []
  const texts = documentOf.map((at, k) => {
    const d = read[at]!
    const end = refs[k]!.beforeQuestion ? `\n\n${QUESTION}` : ''
    const earlier = sources.find((s) => s.fileId === d.id)
    if (earlier) return `(${d.name} again: see [${earlier.citation}])${end}`
    sources.push({ citation: sources.length + 1, fileId: d.id, filename: d.name, text: d.text, start: 0, end: d.text.length })
    return `${k === 0 ? `${LEAD}\n\n` : ''}[${sources.length}] ${d.name}\n${d.text}${end}`
  })
  return new DocumentInputs(
    sources,
    texts,
    documentOf.map((at) => read[at]!.id),
    undefined,
    undefined,
  )
}

/**
 * The retrieved parts, best first, open the newest user message; its own file parts go, and those
 * of earlier messages leave only the file's name.
 */
function retrievedDocuments(
  read: ReadDocument[],
  parts: DocumentPart[],
  documentOf: number[],
  refs: FileRef[],
  newest: number,
  question: string,
): DocumentInputs {
  const sources = parts.map((p, i) => ({
    citation: i + 1,
    fileId: p.document,
    filename: p.name,
    text: p.text,
    start: p.start,
    end: p.end,
    ...(p.score === undefined ? {} : { score: p.score }),
  }))
  // A part's place in its document, for its heading.
  const order = new Map<DocumentPart, number>()
  for (const d of read) {
    const own = parts.filter((p) => p.document === d.id).sort((a, b) => a.start - b.start)
    own.forEach((p, i) => order.set(p, own.length > 1 || p.start > 0 || p.end < d.text.length ? i + 1 : 0))
  }
  const blocks = parts.map((p, i) => `[${i + 1}] ${p.name}${order.get(p) ? ` (part ${order.get(p)})` : ''}\n${p.text}`)
  const texts = refs.map((ref, k) => (ref.messageIndex === newest ? undefined : `(attached: ${read[documentOf[k]!]!.name})`))
  const excerpts = `${LEAD}\n\n${blocks.length ? blocks.join('\n\n') : '(nothing of them fits the context)'}\n\n${QUESTION}`
  return new DocumentInputs(
    sources,
    texts,
    documentOf.map((at) => read[at]!.id),
    excerpts,
    question,
  )
}
