/**
 * Cross-origin access for the desktop app's own page only. The window loads the UI from
 * `app://hearth` and calls the embedded server on 127.0.0.1, so that one origin (and nothing a web
 * page could claim) may read answers and send the Authorization header.
 */
import type { RequestHandler } from 'express'

export function allowOrigins(origins: readonly string[]): RequestHandler {
  const allowed = new Set(origins)
  return (req, res, next) => {
    const origin = req.headers.origin
    if (!origin || !allowed.has(origin)) return next()
    res.vary('Origin')
    res.set('Access-Control-Allow-Origin', origin)
    res.set('Access-Control-Expose-Headers', 'x-request-id, retry-after')
    if (req.method !== 'OPTIONS') return next()
    res.set({
      'Access-Control-Allow-Methods': 'GET, POST, DELETE',
      'Access-Control-Allow-Headers': 'authorization, content-type',
      'Access-Control-Max-Age': '600',
    })
    res.status(204).end()
  }
}
