/** GET /health: no key needed; says the server is up and which models are loaded. */
import { Router } from 'express'
import type { ServerContext } from '../server-context.ts'

export function healthRoute(ctx: ServerContext): Router {
  const router = Router()
  router.get('/health', (_req, res) => {
    res.json({ status: 'ok', loaded_models: ctx.scheduler.loadedModelIds() })
  })
  return router
}
