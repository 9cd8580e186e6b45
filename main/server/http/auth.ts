import type { RequestHandler } from 'express'
import type { ApiKeys } from '../services/keys/api-keys.ts'
import { ApiError } from '../services/api-error.ts'
import { QuotaGate, usageOf } from '../services/keys/key-quotas.ts'
import { markKeyless } from '../services/keys/request-key.ts'

/**
 * Every /v1 and /api request must carry a key the server knows, unless auth was turned off. Keys
 * made under /api/keys also pass their quotas here, and are charged the tokens their request used
 * once it is over. Build it once per app: the requests-per-minute windows live in it.
 */
export function requireApiKey(keys: ApiKeys | undefined, { keyless = false, gate = quotaGate(keys) } = {}): RequestHandler {
  return (req, res, next) => {
    if (!keys) return next()
    // Anthropic's clients send the key as `x-api-key`.
    const xApiKey = req.headers['x-api-key']
    const authorization = req.headers.authorization ?? (typeof xApiKey === 'string' && xApiKey ? `Bearer ${xApiKey}` : undefined)
    const identity = keys.identify(authorization)
    // The Ollama port (loopback only) lets every program in, as Ollama does: one that sends no key,
    // or one set up for Ollama with any key ("ollama", as Ollama's docs write it); a key of
    // Hearth's is that key, quotas included. Let in so, a request is not the server's own key: it
    // sees none of the files and responses kept for keys, and runs no MCP tools.
    if (keyless && !identity) {
      markKeyless(res)
      return next()
    }
    if (!identity) {
      const message = authorization
        ? 'Incorrect API key provided'
        : "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>')"
      throw new ApiError(401, 'invalid_authentication', 'invalid_api_key', message)
    }
    res.locals.apiKey = identity
    const managed = identity.managed
    if (managed && gate) {
      gate.admit(managed)
      res.once('close', () => gate.charge(managed, usageOf(res)))
    }
    next()
  }
}

/** The per-key request windows: one for every port a key may use, so two ports do not double its rate. */
export function quotaGate(keys: ApiKeys | undefined): QuotaGate | undefined {
  return keys?.store ? new QuotaGate(keys.store) : undefined
}
