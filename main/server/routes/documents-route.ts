/**
 * /api/documents: documents attached to a chat. Uploaded once (multipart, `file`), read to text
 * and kept under the data folder; `POST /api/documents/context` then says what of them goes into
 * the user's message for a chat model: all of it, or the parts retrieved for the question.
 * There is no listing: a document's random id is what lets a client read it, so a key made for
 * one program does not see what the chat was given.
 */
import { basename, join } from 'node:path'
import { Router, type Request, type Response } from 'express'
import { z } from 'zod'
import { readAudioUpload } from '../audio-upload.ts'
import { documentContext } from '../documents/document-context.ts'
import { DocumentEmbeddings } from '../documents/document-embeddings.ts'
import { documentNotFound, documentTooLarge, MAX_DOCUMENT_BYTES } from '../documents/document-errors.ts'
import { extractDocument } from '../documents/document-extract.ts'
import { DocumentStore, type StoredDocument } from '../documents/document-store.ts'
import { ApiError, invalidRequest } from '../http-errors.ts'
import { requireJsonBody } from '../json-body.ts'
import { parseOrThrow } from '../openai/validation.ts'
import { requestLifetime } from '../request-lifetime.ts'
import type { ServerContext } from '../server-context.ts'
import type { DocumentObject } from '../wire-types.ts'

const MAX_DOCUMENTS_PER_CONTEXT = 100
const MAX_QUERY_CHARACTERS = 100_000

const contextSchema = z.object({
  model: z.string().min(1),
  documents: z.array(z.string()).min(1).max(MAX_DOCUMENTS_PER_CONTEXT),
  query: z.string().max(MAX_QUERY_CHARACTERS),
  messages_tokens: z.int().min(0).max(100_000_000).nullish(),
  embedding_model: z.string().min(1).nullish(),
})

interface Documents {
  store: DocumentStore
  embeddings: DocumentEmbeddings
}

export function documentsRoute(ctx: ServerContext): Router {
  const router = Router()
  // Opened on first use: a server that is never sent a document never makes the folder.
  let opening: Promise<Documents> | undefined
  const documents = (): Promise<Documents> => {
    opening ??= DocumentStore.open(join(ctx.settings.dataDir, 'documents')).then(
      (store) => ({ store, embeddings: new DocumentEmbeddings(store, ctx.scheduler) }),
      (e: unknown) => {
        opening = undefined
        throw e
      },
    )
    return opening
  }

  router.post('/documents', async (req, res) => {
    const { bytes, filename } = await readDocumentUpload(req, res)
    const name = documentName(filename)
    const extracted = await extractDocument(bytes, name)
    const { store } = await documents()
    const stored = await store.add({ name, format: extracted.format, bytes: bytes.length, characters: extracted.text.length, ...(extracted.pages === undefined ? {} : { pages: extracted.pages }) }, extracted.text)
    ctx.log(`document ${stored.id} (${stored.format}, ${stored.characters} characters) was added`)
    res.status(201).json(documentObject(stored))
  })

  router.post('/documents/context', requireJsonBody, async (req, res) => {
    const body = parseOrThrow(contextSchema, req.body)
    res.locals.model = body.model
    const { store, embeddings } = await documents()
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      const request = { model: body.model, documents: body.documents, query: body.query, messagesTokens: body.messages_tokens ?? 0, embeddingModel: body.embedding_model ?? undefined }
      res.json(await documentContext(request, { folder: ctx.folder, store, embeddings, signal: lifetime.signal }))
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })

  router.get('/documents/:id', async (req, res) => {
    res.json(documentObject(requireDocument((await documents()).store, req.params.id)))
  })

  router.get('/documents/:id/text', async (req, res) => {
    const { store } = await documents()
    requireDocument(store, req.params.id)
    const text = await store.text(req.params.id)
    if (text === undefined) throw documentNotFound(req.params.id, 'id')
    res.type('text/plain; charset=utf-8').send(text)
  })

  router.delete('/documents/:id', async (req, res) => {
    const { store } = await documents()
    if (!(await store.remove(req.params.id))) throw documentNotFound(req.params.id, 'id')
    res.json({ id: req.params.id, deleted: true })
  })

  return router
}

/** The upload's `file` part, read under the document size limit (the audio upload's reader, with our words). */
async function readDocumentUpload(req: Request, res: Response): Promise<{ bytes: Buffer; filename: string | undefined }> {
  if (!req.is('multipart/form-data')) {
    throw invalidRequest(
      `Send the document as multipart/form-data with the file in a 'file' part (got ${req.headers['content-type'] ? `'${req.headers['content-type']}'` : 'no content type'})`,
      null,
      'invalid_content_type',
    )
  }
  try {
    const upload = await readAudioUpload(req, res, MAX_DOCUMENT_BYTES)
    if (!upload.file) throw invalidRequest("Missing required parameter: 'file'", 'file', 'missing_required_parameter')
    return { bytes: upload.file.bytes, filename: upload.file.filename }
  } catch (e) {
    if (e instanceof ApiError && e.code === 'file_too_large') throw documentTooLarge()
    throw e
  }
}

/** The name as the client gave it, without folders or control characters, never empty. */
function documentName(filename: string | undefined): string {
  const name = basename((filename ?? '').replace(/\\/g, '/'))
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .trim()
    .slice(0, 255)
  return name || 'document'
}

function requireDocument(store: DocumentStore, id: string): StoredDocument {
  const stored = store.get(id)
  if (!stored) throw documentNotFound(id, 'id')
  return stored
}

function documentObject(d: StoredDocument): DocumentObject {
  return {
    id: d.id,
    name: d.name,
    format: d.format,
    bytes: d.bytes,
    characters: d.characters,
    ...(d.pages === undefined ? {} : { pages: d.pages }),
    created_at: Math.floor(d.createdMs / 1000),
  }
}
