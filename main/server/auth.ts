import type { RequestHandler } from 'express'
import type { ApiKeys } from './api-keys.ts'
import { ApiError } from './http-errors.ts'

/** Every /v1 and /api request must carry a key the server knows, unless auth was turned off. */
export function requireApiKey(keys: ApiKeys | undefined): RequestHandler {
  return (req, _res, next) => {
    if (keys && !keys.accepts(req.headers.authorization)) {
      const message = req.headers.authorization
        ? 'Incorrect API key provided'
        : "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'"
      throw new ApiError(401, 'invalid_authentication', 'invalid_api_key', message)
    }
    next()
  }
}
