/**
 * Reads a `multipart/form-data` audio upload as it streams in (busboy): the text fields, and the
 * `file` part kept in memory chunk by chunk under a byte limit. An upload over the limit is refused
 * with 413 as soon as it passes it (or at once, when Content-Length already says so); the rest of
 * the body is read and dropped, so an oversized upload never sits in memory.
 */
import type { Request, Response } from 'express'
import busboy from 'busboy'
import { ApiError, invalidRequest } from '../services/api-error.ts'

export interface UploadedFile {
  bytes: Buffer
  /** As the client named it; never used to guess the format. */
  filename: string | undefined
}

export interface MultipartUpload {
  fields: Record<string, string>
  /** Fields sent as lists (`include[]=a`, `include[]=b`), by name without the brackets. */
  lists: Record<string, string[]>
  /** The first file part named `file`; undefined when there was none. */
  file: UploadedFile | undefined
}

/** Room for the text fields beside the file when Content-Length is judged before reading. */
const FIELDS_ALLOWANCE_BYTES = 1024 * 1024
const MAX_FIELD_BYTES = 64 * 1024
const MAX_FIELDS = 64
const MAX_PARTS = 128
/** How much of a refused upload is still read (and dropped) so the client gets to read the refusal. */
const MAX_DISCARD_BYTES = 128 * 1024 * 1024

export function fileTooLarge(maxFileBytes: number): ApiError {
  const mb = Math.round((maxFileBytes / (1024 * 1024)) * 10) / 10
  return new ApiError(413, 'invalid_request_error', 'file_too_large', `The audio file is larger than the limit of ${mb} MB`, 'file')
}

export function readAudioUpload(req: Request, res: Response, maxFileBytes: number): Promise<MultipartUpload> {
  if (!req.is('multipart/form-data')) {
    throw invalidRequest(
      `This endpoint takes a multipart/form-data body with the audio in a 'file' part (got ${req.headers['content-type'] ? `'${req.headers['content-type']}'` : 'no content type'})`,
      null,
      'invalid_content_type',
    )
  }
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > maxFileBytes + FIELDS_ALLOWANCE_BYTES) {
    discardRest(req, res)
    throw fileTooLarge(maxFileBytes)
  }

  let parser: busboy.Busboy
  try {
    parser = busboy({
      headers: req.headers,
      defParamCharset: 'utf8',
      limits: { fieldSize: MAX_FIELD_BYTES, fields: MAX_FIELDS, parts: MAX_PARTS },
    })
  } catch (e) {
    throw invalidRequest(`The multipart body cannot be read: ${(e as Error).message}`, null, 'invalid_multipart')
  }

  return new Promise<MultipartUpload>((resolve, reject) => {
    const fields: Record<string, string> = {}
    const lists: Record<string, string[]> = {}
    let file: UploadedFile | undefined
    let finished = false
    const fail = (error: ApiError) => {
      if (finished) return
      finished = true
      req.unpipe(parser)
      parser.removeAllListeners()
      parser.on('error', () => undefined)
      discardRest(req, res)
      reject(error)
    }

    parser.on('file', (name, stream, info) => {
      // A form cut off inside this part fails the stream too; the parser's 'error' reports it, and
      // an 'error' nobody listens to would take the whole server down.
      stream.on('error', () => undefined)
      if (name !== 'file' || file) {
        stream.resume() // other file parts are not ours to keep
        return
      }
      const chunks: Buffer[] = []
      let size = 0
      const received: UploadedFile = { bytes: Buffer.alloc(0), filename: info.filename }
      file = received
      stream.on('data', (chunk: Buffer) => {
        if (finished) return
        size += chunk.length
        if (size > maxFileBytes) {
          chunks.length = 0
          fail(fileTooLarge(maxFileBytes))
          return
        }
        chunks.push(chunk)
      })
      stream.on('end', () => {
        if (!finished) received.bytes = Buffer.concat(chunks, size)
      })
    })
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) {
        fail(invalidRequest(`The value of '${name}' is longer than ${MAX_FIELD_BYTES} bytes`, name))
        return
      }
      if (name === 'file') {
        fail(invalidRequest("'file' must be a file upload (a part with a filename), not a text field", 'file'))
        return
      }
      if (name.endsWith('[]')) (lists[name.slice(0, -2)] ??= []).push(value)
      else fields[name] = value
    })
    parser.on('partsLimit', () => fail(invalidRequest(`The form has more than ${MAX_PARTS} parts`, null)))
    parser.on('fieldsLimit', () => fail(invalidRequest(`The form has more than ${MAX_FIELDS} fields`, null)))
    parser.on('error', (e: Error) => fail(invalidRequest(`The multipart body cannot be read: ${e.message}`, null, 'invalid_multipart')))
    parser.on('close', () => {
      if (finished) return
      finished = true
      resolve({ fields, lists, file })
    })
    const aborted = () => fail(new ApiError(400, 'invalid_request_error', 'request_aborted', 'The client closed the connection during the upload'))
    req.on('aborted', aborted)
    req.on('error', aborted)
    req.pipe(parser)
  })
}

/**
 * The answer goes out at once; what the client still sends is read and dropped, never kept, so a
 * client that writes its whole body before it reads (most do) gets to read the 413 instead of a
 * broken pipe. Past MAX_DISCARD_BYTES the connection is cut instead.
 */
function discardRest(req: Request, res: Response): void {
  req.on('error', () => undefined) // the client may give up half way; nothing is waiting for the rest
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > MAX_DISCARD_BYTES) {
    res.setHeader('Connection', 'close')
  } else {
    let dropped = 0
    req.on('data', (chunk: Buffer) => {
      dropped += chunk.length
      if (dropped > MAX_DISCARD_BYTES) req.socket.destroy()
    })
  }
  req.resume()
}
