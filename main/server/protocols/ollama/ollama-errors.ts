/**
 * Ollama's errors: `{"error": "…"}` with its status codes, for every answer on its routes (a
 * missing key and a bad body too), and as the last line of a stream that had begun.
 */
import type { RequestHandler } from 'express'
import { ApiError } from '../../services/api-error.ts'

/** An error as Ollama words it; its message is the whole body's `error`. */
export class OllamaError extends ApiError {
  override name = 'OllamaError'
  constructor(status: number, message: string) {
    super(status, status >= 500 ? 'server_error' : 'invalid_request_error', null, message)
  }
}

/** Ollama's own wording, which its command line matches to offer a pull. */
export function modelNotFoundError(name: string): OllamaError {
  return new OllamaError(404, `model '${name}' not found`)
}

/** Marks a request as Ollama's, so every error it gets has Ollama's shape. */
export const useOllamaErrors: RequestHandler = (_req, res, next) => {
  res.locals.errorShape = 'ollama'
  next()
}
