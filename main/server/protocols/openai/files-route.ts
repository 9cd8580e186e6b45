/**
 * /v1/files, as OpenAI's: upload (multipart `file` and `purpose`), list, get, content, delete.
 * Hearth keeps files to be read in chats (`input_file` in Responses, `file` parts in chat
 * completions): PDF, Word, text and Markdown, read to text when they arrive. Each key sees the
 * files it uploaded, as with stored responses.
 */
import { Router, type Request, type Response } from 'express'
import { readAudioUpload } from '../../http/audio-upload.ts'
import { requestOwner } from '../../services/keys/request-key.ts'
import { fileName, type DocumentLibrary } from '../../services/documents/document-library.ts'
import { documentTooLarge, fileNotFound, MAX_DOCUMENT_BYTES } from '../../services/documents/document-errors.ts'
import type { StoredDocument } from '../../services/documents/document-store.ts'
import { ApiError, invalidRequest } from '../../services/api-error.ts'
import { listPage } from '../../http/list-page.ts'
import type { ServerContext } from '../../server-context.ts'
import type { DocumentFormat, FileList, FileObject } from '../../wire-types.ts'

/** The purposes of files a chat reads; OpenAI's others (batch, fine-tune, evals) have no use here. */
export const FILE_PURPOSES = ['user_data', 'assistants'] as const

const MEDIA_TYPES: Record<DocumentFormat, string> = {
  text: 'text/plain; charset=utf-8',
  markdown: 'text/markdown; charset=utf-8',
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
}

export function filesRoute(ctx: ServerContext): Router {
  const library = ctx.library
  const router = Router()
  const ownerOf = (res: Response) => requestOwner(res, ctx.keys !== undefined)

  router.post('/files', async (req, res) => {
    const { bytes, filename, purpose } = await readFileUpload(req, res)
    const stored = await library.add(bytes, fileName(filename), ownerOf(res), purpose)
    ctx.log(`file ${stored.id} (${stored.format}, ${stored.characters} characters) was added`)
    res.json(fileObject(stored))
  })

  router.get('/files', async (req, res) => {
    const purpose = req.query.purpose
    if (purpose !== undefined && typeof purpose !== 'string') throw invalidRequest("'purpose' must be a string", 'purpose')
    const files = (await library.list(ownerOf(res))).filter((d) => purpose === undefined || (d.purpose ?? 'user_data') === purpose)
    const list: FileList = listPage(files, req.query, { noun: 'file', anId: 'a file id', defaultLimit: 10_000, maxLimit: 10_000 }, fileObject)
    res.json(list)
  })

  router.get('/files/:id', async (req, res) => {
    res.json(fileObject(await requireFile(library, req.params.id, ownerOf(res))))
  })

  router.get('/files/:id/content', async (req, res) => {
    const file = await requireFile(library, req.params.id, ownerOf(res))
    const { store } = await library.open()
    const original = await store.original(file.id)
    if (original) {
      res.type(MEDIA_TYPES[file.format]).send(original)
      return
    }
    // Kept before originals were: its text is what there is.
    const text = await store.text(file.id)
    if (text === undefined) throw fileNotFound(file.id, 'id')
    res.type('text/plain; charset=utf-8').send(text)
  })

  router.delete('/files/:id', async (req, res) => {
    const file = await requireFile(library, req.params.id, ownerOf(res))
    await (await library.open()).store.remove(file.id)
    res.json({ id: file.id, object: 'file', deleted: true })
  })

  return router
}

/** The upload's `file` and `purpose`, read under the document size limit. */
async function readFileUpload(req: Request, res: Response): Promise<{ bytes: Buffer; filename: string | undefined; purpose: string }> {
  if (!req.is('multipart/form-data')) {
    throw invalidRequest(
      `Send the file as multipart/form-data with the file in a 'file' part and a 'purpose' field (got ${req.headers['content-type'] ? `'${req.headers['content-type']}'` : 'no content type'})`,
      null,
      'invalid_content_type',
    )
  }
  let upload
  try {
    upload = await readAudioUpload(req, res, MAX_DOCUMENT_BYTES)
  } catch (e) {
    if (e instanceof ApiError && e.code === 'file_too_large') throw documentTooLarge()
    throw e
  }
  if (!upload.file) throw invalidRequest("Missing required parameter: 'file'", 'file', 'missing_required_parameter')
  const purpose = upload.fields.purpose
  if (purpose === undefined) throw invalidRequest("Missing required parameter: 'purpose'", 'purpose', 'missing_required_parameter')
  if (!(FILE_PURPOSES as readonly string[]).includes(purpose)) {
    throw invalidRequest(
      `Hearth keeps files to be read in chats: 'purpose' must be ${FILE_PURPOSES.map((p) => `'${p}'`).join(' or ')} (got '${purpose}')`,
      'purpose',
      'invalid_value',
    )
  }
  return { bytes: upload.file.bytes, filename: upload.file.filename, purpose }
}

async function requireFile(library: DocumentLibrary, id: string, owner: string): Promise<StoredDocument> {
  const found = await library.find(id, owner)
  if (!found) throw fileNotFound(id, 'id')
  return found
}

function fileObject(d: StoredDocument): FileObject {
  return {
    id: d.id,
    object: 'file',
    bytes: d.bytes,
    created_at: Math.floor(d.createdMs / 1000),
    expires_at: null,
    filename: d.name,
    purpose: d.purpose ?? 'user_data',
    status: 'processed',
    status_details: null,
  }
}
