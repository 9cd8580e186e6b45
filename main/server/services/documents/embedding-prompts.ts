/**
 * Some embedding models were trained with a prefix that says whether a text is a question or a
 * passage to search, and rank worse without it (Nomic's model card: "search_query: " and
 * "search_document: "). Recognised by the model's id or file name; other models get the text bare.
 */
import { basename } from 'node:path'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'

export interface EmbeddingPrompts {
  query: string
  document: string
}

const BARE: EmbeddingPrompts = { query: '', document: '' }
const SEARCH_INSTRUCTION = 'Represent this sentence for searching relevant passages: '

const FAMILIES: Array<[RegExp, EmbeddingPrompts]> = [
  [/nomic-embed/i, { query: 'search_query: ', document: 'search_document: ' }],
  [/(^|[^a-z])e5[-_.]/i, { query: 'query: ', document: 'passage: ' }],
  // BGE English v1.5, mxbai-embed-large and Arctic Embed: an instruction on the query only.
  [/bge-[a-z]+-en-v1\.5|mxbai-embed-large|snowflake-arctic-embed/i, { query: SEARCH_INSTRUCTION, document: '' }],
]

export function embeddingPrompts(model: ModelRecord): EmbeddingPrompts {
  return FAMILIES.find(([pattern]) => pattern.test(namesOf(model)))?.[1] ?? BARE
}

/**
 * The longest input, in the model's tokens, each family was trained on (its model card), where
 * that is less than the context its file allows: all-MiniLM-L6-v2 takes 512 word pieces but was
 * trained on 128 (and is documented to 256); past that its vector stands for less of the text.
 */
const TRAINED_INPUT_TOKENS: Array<[RegExp, number]> = [
  [/minilm|mpnet|multi-qa|paraphrase/i, 256],
  [/nomic-embed/i, 2048],
]

export function trainedInputTokens(model: ModelRecord): number {
  const trained = TRAINED_INPUT_TOKENS.find(([pattern]) => pattern.test(namesOf(model)))?.[1]
  return Math.min(model.contextLength, trained ?? model.contextLength)
}

const namesOf = (model: ModelRecord) => `${model.id} ${basename(model.path)}`
