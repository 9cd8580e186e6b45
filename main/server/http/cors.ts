/**
 * Cross-origin access: none by default. The desktop app's page (`app://hearth`, which calls the
 * embedded server on 127.0.0.1) and the origins the user lists (`cors_origins` in the settings,
 * HEARTH_CORS_ORIGINS) may read answers and send the Authorization header. A pattern's `*` stands
 * for one run of characters without `/ : @ ? #` (`chrome-extension://*`, `http://localhost:*`,
 * `https://*.example.com`); `*` alone allows every origin.
 *
 * Other origins get no CORS headers; their preflights get 403, and so do their requests that skip
 * the preflight (simple POSTs a page can send anywhere) unless they only read.
 */
import type { RequestHandler } from 'express'
import { ApiError } from '../services/api-error.ts'

export function originMatcher(patterns: readonly string[]): (origin: string) => boolean {
  const escape = (s: string) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')
  const compiled = patterns.map((p) => p.trim().toLowerCase()).filter(Boolean)
  if (compiled.includes('*')) return () => true
  const regexes = compiled.map((p) => new RegExp(`^${p.split('*').map(escape).join('[^/:@?#\\s]+')}$`))
  return (origin) => regexes.some((r) => r.test(origin.toLowerCase()))
}

/** A page on this server itself (the web UI, or the UI's dev server proxying to us). */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (!host) return false
  try {
    return new URL(origin).host === host.toLowerCase()
  } catch {
    return false
  }
}

const READ_ONLY = new Set(['GET', 'HEAD'])

export function allowOrigins(origins: readonly string[]): RequestHandler {
  const allowed = originMatcher(origins)
  return (req, res, next) => {
    const origin = req.headers.origin
    if (!origin || sameOrigin(origin, req.headers.host)) return next()
    if (!allowed(origin)) {
      if (READ_ONLY.has(req.method)) return next()
      throw new ApiError(
        403,
        'invalid_request_error',
        'forbidden_origin',
        `Requests from the origin '${origin.slice(0, 200)}' are not allowed; add it to cors_origins in the settings`,
      )
    }
    res.vary('Origin')
    res.set('Access-Control-Allow-Origin', origin)
    res.set('Access-Control-Expose-Headers', 'x-request-id, retry-after, x-should-retry')
    if (req.method !== 'OPTIONS') return next()
    res.set({
      'Access-Control-Allow-Methods': 'GET, POST, PATCH, DELETE',
      // The official clients add their own headers (x-stainless-*); an allowed page may send any.
      'Access-Control-Allow-Headers': requestedHeaders(req.headers['access-control-request-headers']),
      'Access-Control-Max-Age': '600',
    })
    res.status(204).end()
  }
}

function requestedHeaders(asked: string | undefined): string {
  const names = (asked ?? '').split(',').map((h) => h.trim().toLowerCase())
  const valid = names.filter((h) => /^[a-z0-9!#$%&'*+.^_`|~-]{1,100}$/.test(h)).slice(0, 50)
  return [...new Set(['authorization', 'content-type', ...valid])].join(', ')
}
