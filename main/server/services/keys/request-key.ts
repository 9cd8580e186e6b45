/** Who a request is: the key it came with (auth puts it on the response), and whose stored things it may see. */
import type { Response } from 'express'
import type { KeyIdentity } from './api-keys.ts'

/** The key a request came with (set by requireApiKey); undefined when auth is off. */
export function requestKey(res: Response): KeyIdentity | undefined {
  return res.locals.apiKey as KeyIdentity | undefined
}

/**
 * A request let in without a key of Hearth's (the Ollama port lets programs in as Ollama does):
 * it is nobody's, not the server's own key, whatever computer it came from.
 */
export function markKeyless(res: Response): void {
  res.locals.keyless = true
}

export function isKeyless(res: Response): boolean {
  return res.locals.keyless === true
}

/**
 * Whose stored things (responses, files) a request may see: a key made under /api/keys sees its
 * own; the server's key, or everyone where auth is off, sees what was made without one; a request
 * let in without a key sees only what such requests made.
 */
export function requestOwner(res: Response, authOn: boolean): string {
  if (isKeyless(res)) return 'keyless'
  return requestKey(res)?.managed?.id ?? (authOn ? 'server-key' : 'no-auth')
}
