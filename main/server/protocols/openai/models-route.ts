/** GET /v1/models and /v1/models/{id}. Listing reads the folder; it never loads a model. */
import { Router } from 'express'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { modelObject } from './model-object.ts'
import type { ServerContext } from '../../server-context.ts'

export function modelsRoute(ctx: ServerContext): Router {
  const router = Router()
  router.get('/models', async (_req, res) => {
    const { models } = await ctx.folder.scan()
    const loaded = new Set(ctx.scheduler.loadedModelIds())
    res.json({ object: 'list', data: models.map((m) => modelObject(m, loaded.has(m.id), ctx.remotes)) })
  })
  // Ids may hold '/' and ':' (org/name:q4_k_m), so the id is the whole rest of the path.
  router.get('/models/*id', async (req, res) => {
    const id = (req.params as { id: string[] }).id.join('/')
    const model = await requireModel(ctx.folder, id)
    res.json(modelObject(model, ctx.scheduler.loadedModelIds().includes(model.id), ctx.remotes))
  })
  return router
}
