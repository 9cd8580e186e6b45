/**
 * The built web UI (renderer/dist) at `/`: hashed assets cached for good, index.html never, and
 * index.html for any other page a browser navigates to, so reloads and bookmarks land in the app.
 * API paths never fall through to the page: a wrong /v1 URL stays a JSON 404.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import express, { Router, type Response } from 'express'
import { pageCsp } from './page-csp.ts'

/** Served from the server itself, the page talks only to it. */
export const WEB_UI_CSP = pageCsp()

const API_PREFIXES = ['/v1', '/api', '/health']

/** renderer/dist beside the sources, or beside the bundled app (dist-electron/../renderer/dist). */
export function defaultWebUiDir(): string | undefined {
  const candidates = ['../../../renderer/dist', '../renderer/dist'].map((p) => fileURLToPath(new URL(p, import.meta.url)))
  return candidates.find((dir) => existsSync(join(dir, 'index.html')))
}

export function webUi(dir: string | undefined = defaultWebUiDir()): Router {
  const router = Router()
  const isApi = (path: string) => API_PREFIXES.some((p) => path === p || path.startsWith(`${p}/`))
  const pageHeaders = (res: Response) =>
    res.set({
      'Content-Security-Policy': WEB_UI_CSP,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      'Cache-Control': 'no-cache',
    })

  if (!dir) {
    router.get('/', (_req, res) => {
      pageHeaders(res).type('text/plain').send('Hearth is running, but its web UI is not built. Run `npm run build:ui` (npm run serve does it when needed).\n')
    })
    return router
  }

  router.use(
    express.static(dir, {
      index: false,
      fallthrough: true,
      setHeaders: (res, path) => {
        res.setHeader('X-Content-Type-Options', 'nosniff')
        if (path.endsWith('.html')) res.setHeader('Content-Security-Policy', WEB_UI_CSP)
        // Vite puts a content hash in every asset's name, so a name never changes meaning.
        res.setHeader('Cache-Control', path.startsWith(join(dir, 'assets')) ? 'public, max-age=31536000, immutable' : 'no-cache')
      },
    }),
  )
  router.get('/{*page}', (req, res, next) => {
    // Only a browser navigating (it asks for HTML); scripts asking for JSON get the JSON 404.
    if (isApi(req.path) || !(req.headers.accept ?? '').includes('text/html')) return next()
    pageHeaders(res).sendFile(join(dir, 'index.html'))
  })
  return router
}
