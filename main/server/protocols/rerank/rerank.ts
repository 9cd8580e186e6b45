/**
 * POST /v1/rerank in the shape Cohere and Jina define and llama.cpp serves: a query, documents, and
 * the documents back ordered by relevance. Request checks and the answer; no HTTP here.
 */
import { z } from 'zod'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { RerankJob, RerankResult } from '../../../../engines/engine-jobs.ts'
import { invalidRequest, modelNotCompatible } from '../../services/api-error.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'

/** Enough for a retrieval step's candidates; more belongs in several requests. */
const MAX_DOCUMENTS = 1000

const document = z.union([z.string(), z.object({ text: z.string() })])

export const rerankRequestSchema = z.object({
  model: z.string().min(1),
  query: z.string().min(1),
  documents: z.array(document).min(1).max(MAX_DOCUMENTS),
  top_n: z.int().min(1).nullish(),
  return_documents: z.boolean().nullish(),
})

export type RerankRequest = z.infer<typeof rerankRequestSchema>

export function parseRerankRequest(body: unknown): RerankRequest {
  const request = parseOrThrow(rerankRequestSchema, body)
  request.documents.forEach((d, i) => {
    const text = typeof d === 'string' ? d : d.text
    if (text.length === 0) throw invalidRequest(`'documents[${i}]' is empty`, `documents[${i}]`)
  })
  return request
}

export function planRerank(request: RerankRequest, model: ModelRecord): RerankJob {
  if (!model.capabilities.includes('rerank'))
    throw modelNotCompatible(model.id, "reranking (it needs a reranker: an encoder with a classification head, listed with the 'rerank' capability)")
  return { type: 'rerank', query: request.query, documents: request.documents.map((d) => (typeof d === 'string' ? d : d.text)) }
}

export function rerankResponse(model: string, request: RerankRequest, job: RerankJob, result: RerankResult) {
  const ranked = result.scores
    .map((relevance_score, index) => ({ index, relevance_score }))
    // Highest first; equal scores keep the documents' order.
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, request.top_n ?? undefined)
  return {
    object: 'list' as const,
    model,
    results: ranked.map((r) => (request.return_documents ? { ...r, document: { text: job.documents[r.index]! } } : r)),
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  }
}
