import express, { type RequestHandler } from 'express'
import { invalidRequest } from './http-errors.ts'

/** Parses JSON bodies (any JSON media type) up to the limit; odd bodies become clear 400/413s. */
export function jsonBodyParser(limitBytes: number): RequestHandler {
  return express.json({ limit: limitBytes, type: ['application/json', 'application/*+json'], reviver: wellFormedStrings })
}

/**
 * `"\ud800"` is valid JSON but no valid text: a lone UTF-16 surrogate. Native code that reads the
 * string as JSON or UTF-8 may reject it (llama.cpp's chat templating aborted the engine process
 * on one), so every such code unit becomes U+FFFD, as a UTF-8 decoder would make it.
 */
function wellFormedStrings(_key: string, value: unknown): unknown {
  if (typeof value !== 'string') return value
  const s = value as string & { isWellFormed(): boolean; toWellFormed(): string }
  return s.isWellFormed() ? value : s.toWellFormed()
}

/** For routes that only take JSON: anything else is refused before it is looked at. */
export const requireJsonBody: RequestHandler = (req, _res, next) => {
  if (!req.is(['application/json', 'application/*+json'])) {
    throw invalidRequest(
      `This endpoint takes a JSON body: send 'Content-Type: application/json' (got ${req.headers['content-type'] ? `'${req.headers['content-type']}'` : 'no content type'})`,
      null,
      'invalid_content_type',
    )
  }
  next()
}
