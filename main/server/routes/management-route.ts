/** /api: the app's own endpoints. For now, the models folder in full, problems included. */
import { Router } from 'express'
import { modelObject } from '../openai/model-object.ts'
import type { ServerContext } from '../server-context.ts'

export function managementRoute(ctx: ServerContext): Router {
  const router = Router()
  router.get('/models', async (_req, res) => {
    const { models, broken, catalogProblem } = await ctx.folder.scan()
    const loaded = new Set(ctx.scheduler.loadedModelIds())
    res.json({
      models_dir: ctx.folder.dir,
      catalog_problem: catalogProblem ?? null,
      models: models.map((m) => ({
        ...modelObject(m, loaded.has(m.id)),
        file: m.path,
        mmproj: m.projectorPath ?? null,
        kind: m.kind,
        architecture: m.architecture ?? null,
        size_bytes: m.sizeBytes,
        devices: ctx.scheduler.engineOf(m.id)?.info.devices ?? [],
      })),
      problems: broken.map((b) => ({ id: b.id, file: b.file, problem: b.problem })),
    })
  })
  return router
}
