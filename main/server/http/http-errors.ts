/**
 * The one place where failures become HTTP answers: every error leaves the server as
 * `{"error": {message, type, param, code}}` with the status the API contract gives its code.
 */
import type { ErrorRequestHandler, RequestHandler, Response } from 'express'
import { AudioTooLongError } from '../../../media/audio/mono-16k-collector.ts'
import { UnsupportedAudioError } from '../../../media/audio/unsupported-audio-error.ts'
import { CatalogWriteError } from '../../../models/catalog/catalog-writer.ts'
import { DownloadError, type DownloadErrorCode } from '../../../models/downloads/download-error.ts'
import { isModelError, type ModelErrorCode } from '../../../engines/errors.ts'
import { InvalidImageError } from '../../../media/images/invalid-image-error.ts'
import { RemoteModelError } from '../../../engines/remote/remote-error.ts'
import { markCut } from './response-outcome.ts'
import { ApiError, invalidRequest, modelNotFound, type ErrorType } from '../services/api-error.ts'

const RETRY_AFTER_SECONDS = '2'

const statusByModelCode: Record<ModelErrorCode, { status: number; type: ErrorType }> = {
  model_not_found: { status: 404, type: 'invalid_request_error' },
  model_unavailable: { status: 404, type: 'invalid_request_error' },
  model_not_compatible: { status: 400, type: 'invalid_request_error' },
  context_length_exceeded: { status: 400, type: 'invalid_request_error' },
  invalid_image: { status: 400, type: 'invalid_request_error' },
  too_many_images: { status: 400, type: 'invalid_request_error' },
  unsupported_audio_format: { status: 400, type: 'invalid_request_error' },
  invalid_language: { status: 400, type: 'invalid_request_error' },
  invalid_value: { status: 400, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'request_timeout' },
  // Nobody reads this answer (the client has gone); 499 keeps it apart in the request log.
  cancelled: { status: 499, type: 'invalid_request_error' },
  overloaded: { status: 503, type: 'server_error' },
  insufficient_memory: { status: 503, type: 'server_error' },
  engine_crashed: { status: 500, type: 'server_error' },
  engine_load_failed: { status: 500, type: 'server_error' },
  // Until `npm run build:engines` has run: no retry helps, so no Retry-After either.
  engine_not_built: { status: 503, type: 'server_error' },
  internal_error: { status: 500, type: 'server_error' },
  remote_unavailable: { status: 502, type: 'server_error' },
}

/** Anything thrown anywhere, as the ApiError the client will see. */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e
  if (e instanceof RemoteModelError) {
    const headers: Record<string, string> = e.status === 503 || e.status === 429 ? { 'Retry-After': RETRY_AFTER_SECONDS } : {}
    return new ApiError(e.status, e.status >= 500 ? 'server_error' : 'invalid_request_error', e.clientCode, e.message, e.param, headers)
  }
  if (isModelError(e)) {
    const { status, type } = statusByModelCode[e.code]
    const headers: Record<string, string> = status === 503 && e.code !== 'engine_not_built' ? { 'Retry-After': RETRY_AFTER_SECONDS } : {}
    return new ApiError(status, type, e.code, e.message, e.param, headers)
  }
  if (e instanceof DownloadError) return downloadError(e)
  if (e instanceof CatalogWriteError) return new ApiError(500, 'server_error', 'catalog_invalid', e.message)
  if (e instanceof InvalidImageError) return invalidRequest(e.message, e.param, 'invalid_image')
  if (e instanceof UnsupportedAudioError) {
    return invalidRequest(`Unsupported or invalid audio file: ${UNSUPPORTED_AUDIO[e.reason]}. Send ${AUDIO_FORMATS}.`, 'file', 'unsupported_audio_format')
  }
  if (e instanceof AudioTooLongError) {
    const limit = `at most ${formatMinutes(e.maxSeconds)} (the max_audio_minutes setting)`
    return invalidRequest(`The audio is longer than this server takes: ${limit}. Split the recording and send the parts.`, 'file', 'audio_too_long')
  }
  const bodyParser = bodyParserError(e)
  if (bodyParser) return bodyParser
  // A write the disk had no room for (a key, a setting, models.json): every writer leaves the old file whole.
  if ((e as NodeJS.ErrnoException | undefined)?.code === 'ENOSPC') {
    const message = "The server's disk is full, so this change could not be saved; nothing of it was kept. Free space on that disk and try again."
    return new ApiError(507, 'server_error', 'insufficient_storage', message, null, { 'x-should-retry': 'false' })
  }
  return new ApiError(500, 'server_error', 'internal_error', 'The server had an error while processing your request')
}

/** A download, an import or a removal that failed: the client's mistakes are 4xx, the rest 500. */
function downloadError(e: DownloadError): ApiError {
  const clientStatus: Partial<Record<DownloadErrorCode, number>> = { invalid_value: 400, insufficient_storage: 400, source_unavailable: 400, not_found: 404 }
  const status = clientStatus[e.code]
  if (e.code === 'not_found') return modelNotFound(e.param ?? '', e.message)
  if (status !== undefined) return new ApiError(status, 'invalid_request_error', e.code, e.message, e.param)
  // The hub or registry could not be reached or broke off: the fault is upstream, not the client's nor Hearth's.
  if (e.code === 'network') return new ApiError(502, 'server_error', e.code, e.message, e.param)
  return new ApiError(500, 'server_error', e.code, e.message, e.param)
}

/** What the client is told, by reason: the decoder's own detail may name server paths (ffmpeg's). */
const UNSUPPORTED_AUDIO: Record<UnsupportedAudioError['reason'], string> = {
  empty: 'the file is empty',
  unrecognized: 'the bytes are not a known audio or video format',
  unsupported_codec: 'the audio inside is in a codec that cannot be decoded',
  no_audio: 'the file has no audio in it',
  truncated: 'the file is truncated',
  corrupt: 'the audio data is corrupt',
}

const AUDIO_FORMATS = 'FLAC, MP3, MP4, MPEG, MPGA, M4A, Ogg, WAV or WebM'

function formatMinutes(seconds: number): string {
  const minutes = Math.round((seconds / 60) * 100) / 100
  return `${minutes} minute${minutes === 1 ? '' : 's'}`
}

/** Errors thrown by express.json(): malformed JSON, a body over the limit, an odd charset. */
function bodyParserError(e: unknown): ApiError | undefined {
  const err = e as { type?: string; status?: number; limit?: number }
  switch (err?.type) {
    case 'entity.parse.failed':
      return invalidRequest('The request body is not valid JSON', null, 'invalid_json')
    case 'entity.too.large':
      return new ApiError(413, 'invalid_request_error', 'body_too_large', `The request body is larger than the limit of ${err.limit} bytes`)
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return invalidRequest('The request body must be UTF-8 encoded JSON', null, 'invalid_json')
    case 'request.aborted':
      return new ApiError(400, 'invalid_request_error', 'request_aborted', 'The client closed the connection before the body arrived')
  }
  if (typeof err?.status === 'number' && err.status >= 400 && err.status < 500) {
    return invalidRequest('The request could not be read', null, 'invalid_request')
  }
  return undefined
}

/** Anthropic's error types, by status (its routes answer in its shape: see useAnthropicErrors). */
const ANTHROPIC_ERROR_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  408: 'timeout_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  503: 'overloaded_error',
}

/** `{"type": "error", "error": {"type", "message"}}`, as Anthropic's API and SDKs have it. */
export function anthropicErrorBody(error: ApiError): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type: ANTHROPIC_ERROR_TYPE[error.status] ?? 'api_error', message: error.message } }
}

/** Marks a request as Anthropic's, so every error it gets (401s included) has Anthropic's shape. */
export const useAnthropicErrors: RequestHandler = (_req, res, next) => {
  res.locals.errorShape = 'anthropic'
  next()
}

export function sendError(res: Response, e: unknown): void {
  const error = toApiError(e)
  res.locals.errorCode = error.code
  const shape = res.locals.errorShape as 'anthropic' | 'ollama' | undefined
  if (res.headersSent) {
    // A stream is under way: the error becomes its last event (Ollama's: its last line), and the request counts as cut.
    if (res.writableEnded) return
    markCut(res, error.status, error.code ?? 'error', error.message)
    if (shape === 'ollama') res.end(`${JSON.stringify({ error: error.message })}\n`)
    else res.end(shape === 'anthropic' ? `event: error\ndata: ${JSON.stringify(anthropicErrorBody(error))}\n\n` : `data: ${JSON.stringify(error.body())}\n\n`)
    return
  }
  const body = shape === 'anthropic' ? anthropicErrorBody(error) : shape === 'ollama' ? { error: error.message } : error.body()
  res.status(error.status).set(error.headers).json(body)
}

export const errorHandler: ErrorRequestHandler = (err, _req, res, _next) => {
  const error = toApiError(err)
  if (error.status >= 500 && error.code === 'internal_error') console.error(err)
  sendError(res, error)
}

export const unknownRoute: RequestHandler = (req, res) => {
  sendError(res, new ApiError(404, 'invalid_request_error', 'unknown_url', `Unknown request URL: ${req.method} ${req.originalUrl.split('?')[0]}`))
}
