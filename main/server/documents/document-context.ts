/**
 * What of the attached documents goes into the user's message: all of them, when they fit about
 * half of what the chat model's context has left; otherwise the chunks most like the question,
 * found with an embedding model from the folder, as many as fit that half.
 */
import type { ModelFolder } from '../../../models/catalog/model-folder.ts'
import type { ModelRecord } from '../../../models/catalog/model-record.ts'
import { recommendedModels } from '../../../models/catalog/recommended-models.ts'
import { ApiError, invalidRequest, modelNotCompatible } from '../http-errors.ts'
import { requireModel } from '../model-lookup.ts'
import type { DocumentContext, DocumentPart } from '../wire-types.ts'
import { estimateTokens } from './document-chunks.ts'
import { inputTokens, type DocumentEmbeddings } from './document-embeddings.ts'
import { documentNotFound, noEmbeddingModel } from './document-errors.ts'
import { PART_OVERHEAD_TOKENS, selectParts, type Candidate } from './document-retrieval.ts'
import type { DocumentStore } from './document-store.ts'

export interface ContextRequest {
  model: string
  documents: string[]
  query: string
  messagesTokens: number
  /** An embedding model the client picked; otherwise the first of the folder's, recommended ones first. */
  embeddingModel: string | undefined
}

export interface ContextDeps {
  folder: ModelFolder
  store: DocumentStore
  embeddings: DocumentEmbeddings
  signal: AbortSignal
}

/** Below this many tokens for the documents there is no room to quote anything worth citing. */
const MIN_BUDGET_TOKENS = 64
/**
 * Chunk sizes tried, largest first: the largest the embedding model takes whole and of which at
 * least three fit the budget. Few sizes, so a growing conversation seldom changes the step (a new
 * step embeds the document again).
 */
const CHUNK_SIZES = [800, 400, 200, 100]
/** As fresh as the folder's own request path wants its listing. */
const LISTING_MAX_AGE_MS = 1000

export async function documentContext(request: ContextRequest, deps: ContextDeps): Promise<DocumentContext> {
  const chat = await requireModel(deps.folder, request.model)
  if (!chat.capabilities.includes('chat')) throw modelNotCompatible(chat.id, 'chat, so it cannot be given documents')
  const documents: Array<{ id: string; name: string; text: string }> = []
  for (const [i, id] of request.documents.entries()) {
    const stored = deps.store.get(id)
    const text = stored && (await deps.store.text(id))
    if (!stored || text === undefined) throw documentNotFound(id, `documents[${i}]`)
    if (!documents.some((d) => d.id === id)) documents.push({ id, name: stored.name, text })
  }
  const budget = Math.floor((chat.contextLength - request.messagesTokens) / 2)
  if (budget < MIN_BUDGET_TOKENS) {
    throw invalidRequest(
      `'messages_tokens' is ${request.messagesTokens}, which leaves no room for documents in the model's context of ${chat.contextLength} tokens`,
      'messages_tokens',
      'context_length_exceeded',
    )
  }

  const whole = documents.reduce((sum, d) => sum + estimateTokens(d.text) + PART_OVERHEAD_TOKENS, 0)
  if (whole <= budget) {
    const parts: DocumentPart[] = documents.map((d, i) => ({ citation: i + 1, document: d.id, name: d.name, text: d.text, start: 0, end: d.text.length }))
    return { mode: 'whole', embedding_model: null, parts }
  }

  const embedder = await pickEmbeddingModel(deps.folder, request.embeddingModel)
  const chunkTokens = CHUNK_SIZES.find((size) => size <= inputTokens(embedder) && size * 3 <= budget) ?? CHUNK_SIZES.at(-1)!
  const candidates: Candidate[] = []
  for (const d of documents) {
    const { chunks, dimensions, vectors } = await deps.embeddings.forDocument(d.id, d.text, embedder, chunkTokens, deps.signal)
    chunks.forEach((c, i) => {
      candidates.push({ document: d.id, name: d.name, start: c.start, end: c.end, text: d.text.slice(c.start, c.end), vector: vectors.subarray(i * dimensions, (i + 1) * dimensions) })
    })
  }
  const query = request.query.trim() === '' ? undefined : await deps.embeddings.forQuery(request.query, embedder, deps.signal)
  return { mode: 'retrieved', embedding_model: embedder.id, parts: selectParts(candidates, query, budget) }
}

async function pickEmbeddingModel(folder: ModelFolder, wanted: string | undefined): Promise<ModelRecord> {
  if (wanted !== undefined) {
    const model = await requireModel(folder, wanted).catch((e: unknown) => {
      throw e instanceof ApiError ? new ApiError(e.status, e.type, e.code, e.message, 'embedding_model') : e
    })
    if (!model.capabilities.includes('embeddings')) throw invalidRequest(`The model '${wanted}' is not an embedding model`, 'embedding_model', 'model_not_compatible')
    return model
  }
  const { models } = await folder.cachedScan(LISTING_MAX_AGE_MS)
  const embedders = models.filter((m) => m.capabilities.includes('embeddings'))
  if (embedders.length === 0) throw noEmbeddingModel()
  const recommended = recommendedModels().map((m) => m.id)
  const rank = (m: ModelRecord) => (recommended.includes(m.id) ? recommended.indexOf(m.id) : recommended.length)
  return embedders.sort((a, b) => rank(a) - rank(b) || a.id.localeCompare(b.id))[0]!
}
