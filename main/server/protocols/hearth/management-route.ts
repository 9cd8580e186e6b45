/** /api: the app's own endpoints: the models folder in full (problems included), load, unload, system. */
import { Router } from 'express'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { modelObject } from '../openai/model-object.ts'
import type { ServerContext } from '../../server-context.ts'
import { systemInfo } from './system-info.ts'
import type { ManagedModel, ModelFolderListing } from '../../wire-types.ts'

export function managementRoute(ctx: ServerContext): Router {
  const router = Router()
  router.get('/models', async (_req, res) => {
    const { models, broken, catalogProblem } = await ctx.folder.scan()
    const loaded = new Set(ctx.scheduler.loadedModelIds())
    res.json({
      models_dir: ctx.folder.dir,
      catalog_problem: catalogProblem ?? null,
      models: models.map((m) => managedModel(ctx, m, loaded.has(m.id))),
      problems: broken.map((b) => ({ id: b.id, file: b.file, problem: b.problem, ...(b.source ? { source: b.source.kind } : {}) })),
    } satisfies ModelFolderListing)
  })
  router.post('/models/*id/load', async (req, res) => {
    const model = await requireModel(ctx.folder, (req.params as { id: string[] }).id.join('/'))
    res.locals.model = model.id
    const engine = await ctx.scheduler.load(model)
    res.json({
      ...modelObject(model, true),
      devices: engine.info.devices,
      load_ms: engine.info.loadMs,
      ...(engine.info.restoreMs === undefined ? {} : { restore_ms: engine.info.restoreMs }),
    })
  })
  router.post('/models/*id/unload', async (req, res) => {
    const model = await requireModel(ctx.folder, (req.params as { id: string[] }).id.join('/'))
    res.locals.model = model.id
    const wasLoaded = await ctx.scheduler.unload(model.id)
    res.json({ ...modelObject(model, false), was_loaded: wasLoaded })
  })
  router.get('/system', async (_req, res) => {
    res.json(await systemInfo(ctx))
  })
  return router
}

/** A model as GET /api/models lists it (also what an import answers with): the /v1 object and more. */
export function managedModel(ctx: ServerContext, m: ModelRecord, loaded: boolean): ManagedModel {
  return {
    ...modelObject(m, loaded, ctx.remotes),
    file: m.remote ? null : m.path,
    ...(m.source ? { source_dir: m.source.dir } : {}),
    ...(m.templateGuessed ? { template_guessed: m.templateGuessed } : {}),
    ...(m.remote && ctx.remotes
      ? {
          replicas: m.remote.replicas.map((r) => ({
            base_url: r.baseUrl,
            model: r.model,
            health: ctx.remotes!.health(r),
            problem: ctx.remotes!.problem(r) ?? null,
            busy: ctx.remotes!.busy(r),
          })),
        }
      : {}),
    ...(m.catalogEntry?.pool ? { pool: m.catalogEntry.pool.map((l) => new URL(l.url).host), pool_problem: ctx.pools?.problem(m.id) ?? null } : {}),
    mmproj: m.projectorPath ?? null,
    kind: m.kind,
    architecture: m.architecture ?? null,
    size_bytes: m.sizeBytes,
    devices: ctx.scheduler.engineOf(m.id)?.info.devices ?? [],
  }
}
