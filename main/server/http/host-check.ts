/**
 * DNS rebinding defence: a web page can make its own domain resolve to 127.0.0.1 and then talk to
 * this server as "same origin". Such requests still carry the page's domain in `Host`, so only the
 * names this server really has are let through.
 *
 * Except on the lend routes: a borrowing Hearth names its lender as the person knows it (`desk`,
 * `desk.local`, a name only the router knows), and those routes are no use to a page. They take a
 * bearer key that may lend, never a cookie; a page rebound to this machine does not have that key
 * (if it had, it would not need to rebind), and the tunnel itself (`/api/lend/connect`) is an HTTP
 * upgrade to `hearth-rpc`, which no browser can ask for. docs/security.md#lending-memory.
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

/** The routes any `Host` reaches (the tunnel's upgrade never comes through Express at all). */
const ANY_HOST_PATHS = new Set(['/api/lend'])

/** Whether a request's path is one of the lend routes, as Express's router would match it (any case, a trailing slash). */
export function isLendPath(path: string): boolean {
  return ANY_HOST_PATHS.has(path.toLowerCase().replace(/\/+$/, ''))
}

export function requireKnownHost(allowed: Set<string>): RequestHandler {
  return (req, _res, next) => {
    const header = req.headers.host
    // HTTP/1.0 clients may send no Host; a rebinding browser always sends one.
    if (header !== undefined && !allowed.has(hostNameOf(header)) && !isLendPath(req.path)) {
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
