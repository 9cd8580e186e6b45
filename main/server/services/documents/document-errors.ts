/** The refusals of documents (/v1/files, file parts), each with its status, code and the field at fault. */
import { recommendedModels } from '../../../../models/catalog/recommended-models.ts'
import { ApiError, invalidRequest } from '../api-error.ts'

export const MAX_DOCUMENT_BYTES = 20 * 1024 * 1024
export const MAX_DOCUMENT_CHARACTERS = 1_000_000

export const ACCEPTED_TYPES = '.txt, .md or .markdown (plain text), .pdf (with a text layer) or .docx (Word)'

export function documentTooLarge(): ApiError {
  return new ApiError(
    413,
    'invalid_request_error',
    'document_too_large',
    `The document is larger than the limit of ${MAX_DOCUMENT_BYTES / (1024 * 1024)} MB`,
    'file',
  )
}

/** `characters` undefined: reading stopped once past the limit. */
export function tooMuchText(characters: number | undefined): ApiError {
  const limit = MAX_DOCUMENT_CHARACTERS.toLocaleString('en-US')
  const has = characters === undefined ? `more than ${limit}` : characters.toLocaleString('en-US')
  return new ApiError(
    413,
    'invalid_request_error',
    'document_too_large',
    `The document has ${has} characters of text; at most ${limit} are taken. Split it into smaller documents.`,
    'file',
  )
}

export function documentUnreadable(why: string): ApiError {
  return invalidRequest(why, 'file', 'document_unreadable')
}

export function unsupportedDocumentType(what: string): ApiError {
  return invalidRequest(`Unsupported document type: ${what}. Send ${ACCEPTED_TYPES}.`, 'file', 'unsupported_document_type')
}

export function fileNotFound(id: string, param: string | null): ApiError {
  return new ApiError(
    404,
    'invalid_request_error',
    'file_not_found',
    `No file with id '${id}' (it was deleted, or never uploaded to this server with this key)`,
    param,
  )
}

/**
 * The disk cannot take the document and keep its reserve free. 507 Insufficient Storage: the
 * request is fine and the server cannot store it now (413 would tell the client to send less, when
 * no file would fit); `x-should-retry: false`, since OpenAI's clients retry a 5xx and a retry
 * within seconds cannot succeed. Deleting files, or freeing the disk, makes room.
 */
export function storageFull(why: string): ApiError {
  return new ApiError(
    507,
    'server_error',
    'insufficient_storage',
    `The server cannot keep this file: ${why}. Delete files you no longer need (DELETE /v1/files/{id}) or free space on that disk; files are never removed to make room.`,
    null,
    { 'x-should-retry': 'false' },
  )
}

/** A document kept on the disk that cannot be read now (its folder's permissions, too many open files): not gone, so not 404. */
export function fileUnavailable(id: string, why: string): ApiError {
  return new ApiError(503, 'server_error', 'file_unavailable', `The file '${id}' is kept but cannot be read now (${why}); the server's log says more`, null)
}

/** Retrieval needs an embedding model: the message names the one to get and both ways to get it. */
export function noEmbeddingModel(param: string): ApiError {
  const pick = recommendedModels().find((m) => m.kind === 'embedding')
  const how = pick
    ? `Download ${pick.id} (${Math.round(pick.size_bytes / 1e6)} MB): on the Models page under Recommended, or with \`npm run models -- pull ${pick.source} --id ${pick.id}\``
    : 'Add an embedding model (a GGUF file of a BERT-style encoder) to the models folder'
  return new ApiError(
    409,
    'invalid_request_error',
    'no_embedding_model',
    `The documents are too long to send whole, and finding the parts that answer the question needs an embedding model; the models folder has none. ${how}.`,
    param,
  )
}
