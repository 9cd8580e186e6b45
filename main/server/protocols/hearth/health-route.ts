/**
 * GET /health: no key needed; says the server is up, which models are loaded, and whether requests
 * need a key (so a page can ask for one before its first request instead of after a 401).
 */
import { Router } from 'express'
import type { ServerContext } from '../../server-context.ts'
import type { HealthBody } from '../../wire-types.ts'

export function healthRoute(ctx: ServerContext): Router {
  const router = Router()
  router.get('/health', (_req, res) => {
    res.json({ status: 'ok', loaded_models: ctx.scheduler.loadedModelIds(), auth_required: ctx.keys !== undefined } satisfies HealthBody)
  })
  return router
}
