/**
 * The window's page comes from the app's own files through `app://hearth/`, not `file://`: a
 * standard, secure origin of its own that the permission, IPC and CORS checks can name, and that
 * can only ever read files inside renderer/dist.
 */
import { readFile } from 'node:fs/promises'
import { extname, join, normalize, sep } from 'node:path'
import { pageCsp } from '../server/http/page-csp.ts'

export const APP_SCHEME = 'app'
export const APP_ORIGIN = 'app://hearth'
export const APP_START_URL = `${APP_ORIGIN}/index.html`

/** Registered before the app is ready (Electron's rule for privileged schemes). */
export const APP_SCHEME_PRIVILEGES = {
  scheme: APP_SCHEME,
  privileges: { standard: true, secure: true, supportFetchAPI: true, stream: true },
} as const

/**
 * The page's CSP in the app: the web UI's, plus requests to the embedded server on this computer,
 * which is another origin than app://hearth (its port may change when it restarts, hence the port
 * wildcard).
 */
export const APP_CSP = pageCsp(['http://127.0.0.1:*'])

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
}

/** `app://hearth/assets/x.js` → the file under root, or undefined for anything outside it. */
export function resolveAppPath(root: string, url: string): string | undefined {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return undefined
  }
  if (`${parsed.protocol}//${parsed.host}` !== APP_ORIGIN) return undefined
  let path: string
  try {
    path = decodeURIComponent(parsed.pathname)
  } catch {
    return undefined
  }
  if (path.includes('\0')) return undefined
  const relative = path === '/' ? 'index.html' : path.replace(/^\/+/, '')
  const file = normalize(join(root, relative))
  return file.startsWith(root.endsWith(sep) ? root : root + sep) ? file : undefined
}

/** The handler given to `protocol.handle('app', …)`. */
export function appProtocolHandler(root: string): (request: Request) => Promise<Response> {
  return async (request) => {
    const file = resolveAppPath(root, request.url)
    if (!file || request.method !== 'GET') return new Response('Not found', { status: 404 })
    let body: Buffer
    try {
      body = await readFile(file)
    } catch {
      return new Response('Not found', { status: 404 })
    }
    const type = TYPES[extname(file)] ?? 'application/octet-stream'
    const headers: Record<string, string> = { 'Content-Type': type, 'X-Content-Type-Options': 'nosniff' }
    if (type.startsWith('text/html')) headers['Content-Security-Policy'] = APP_CSP
    return new Response(new Uint8Array(body), { status: 200, headers })
  }
}
