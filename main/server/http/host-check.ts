/**
 * DNS rebinding defence: a web page can make its own domain resolve to 127.0.0.1 and then talk to
 * this server as "same origin". Such requests still carry the page's domain in `Host`, so only the
 * names this server really has are let through.
 */
import { networkInterfaces } from 'node:os'
import type { RequestHandler } from 'express'
import { ApiError } from '../services/api-error.ts'

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1']
const ANY_ADDRESS = new Set(['0.0.0.0', '::', ''])

/** The names requests may use: loopback, the bound address, every local address when bound to all, extras. */
export function allowedHostNames(boundHost: string, extra: readonly string[]): Set<string> {
  const names = new Set([...LOOPBACK_NAMES, ...extra.map((h) => h.toLowerCase())])
  if (ANY_ADDRESS.has(boundHost)) {
    for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) names.add(a.address.toLowerCase())
  } else {
    names.add(boundHost.toLowerCase())
  }
  return names
}

/** `Host` without its port; IPv6 literals lose their brackets. */
export function hostNameOf(hostHeader: string): string {
  const host = hostHeader.trim().toLowerCase()
  if (host.startsWith('[')) return host.slice(1, host.indexOf(']') === -1 ? undefined : host.indexOf(']'))
  const colon = host.lastIndexOf(':')
  return colon === -1 ? host : host.slice(0, colon)
}

export function requireKnownHost(allowed: Set<string>): RequestHandler {
  return (req, _res, next) => {
    const header = req.headers.host
    // HTTP/1.0 clients may send no Host; a rebinding browser always sends one.
    if (header !== undefined && !allowed.has(hostNameOf(header))) {
      throw new ApiError(
        403,
        'invalid_request_error',
        'forbidden_host',
        `Requests for host '${hostNameOf(header)}' are not served here; use http://127.0.0.1 or add the name to allowed_hosts in the settings`,
      )
    }
    next()
  }
}
