import express, { type RequestHandler } from 'express'
import { invalidRequest } from './http-errors.ts'

/** Parses JSON bodies (any JSON media type) up to the limit; odd bodies become clear 400/413s. */
export function jsonBodyParser(limitBytes: number): RequestHandler {
  return express.json({ limit: limitBytes, type: ['application/json', 'application/*+json'] })
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
