/**
 * /api: getting models. Pull from Hugging Face, a URL or by Ollama name from a registry (a
 * background download with progress as JSON and SSE), import a local file, add a model on another
 * machine, remove a model, and the recommended first-run list.
 */
import { relative } from 'node:path'
import { Router } from 'express'
import { z } from 'zod'
import { addCatalogEntry } from '../../../../models/catalog/catalog-writer.ts'
import { remoteTargetSchema } from '../../../../models/catalog/remote-target.ts'
import { recommendedModels } from '../../../../models/catalog/recommended-models.ts'
import { isFinalState, type DownloadSnapshot } from '../../../../models/downloads/managed-download.ts'
import { DownloadManager } from '../../../../models/downloads/download-manager.ts'
import { importModel } from '../../../../models/downloads/model-import.ts'
import { removeModel } from '../../../../models/downloads/model-removal.ts'
import { ApiError, invalidRequest } from '../../services/api-error.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'
import type { ServerContext } from '../../server-context.ts'
import { SseStream } from '../../http/sse.ts'
import type { DownloadObject, RecommendedEntry } from '../../wire-types.ts'
import { managedModel } from './management-route.ts'

const pullSchema = z.object({
  source: z.string(),
  mmproj: z.string().optional(),
  id: z.string().optional(),
  insecure: z.boolean().optional(),
})

const importSchema = z.object({
  path: z.string(),
  mode: z.enum(['copy', 'link']).default('copy'),
  id: z.string().optional(),
  mmproj: z.string().optional(),
})

/** A model on another machine, as the Models page adds it: one server, its key by variable name. */
const remoteSchema = z.strictObject({
  id: z.string().trim().min(1).max(256),
  base_url: remoteTargetSchema.shape.base_url,
  model: remoteTargetSchema.shape.model,
  api_key_env: remoteTargetSchema.shape.api_key_env,
})

/** How long POST /models/pull waits for the sizes (HEAD) so that a 404 or a full disk is a 400. */
const PREPARE_WAIT_MS = 15_000
const SSE_PING_MS = 15_000
/** Failures found before any byte is fetched: the request was wrong, not the transfer. */
const REFUSED_BEFORE_START = new Set(['invalid_value', 'source_unavailable', 'insufficient_storage'])

export function downloadsRoute(ctx: ServerContext): Router {
  const downloads = ctx.downloads
  const router = Router()

  router.post('/models/pull', requireJsonBody, async (req, res) => {
    const body = parseOrThrow(pullSchema, req.body)
    const job = await downloads.pull(body)
    let timer: NodeJS.Timeout | undefined
    await Promise.race([job.prepared, new Promise((r) => (timer = setTimeout(r, PREPARE_WAIT_MS)))])
    clearTimeout(timer)
    const failure = job.failure
    if (job.currentState === 'failed' && failure && REFUSED_BEFORE_START.has(failure.code)) {
      downloads.forget(job.id)
      throw failure
    }
    res.status(202).json({ download: downloadObject(job.snapshot()) })
  })

  router.post('/models/import', requireJsonBody, async (req, res) => {
    const body = parseOrThrow(importSchema, req.body)
    const imported = await importModel(ctx.folder, body)
    const { models, broken } = await ctx.folder.scan()
    const model = models.find((m) => m.id === imported.id)
    if (model) {
      res.status(201).json(managedModel(ctx, model, false))
      return
    }
    const problem = broken.find((b) => b.id === imported.id)
    res.status(201).json({ id: imported.id, file: imported.file, problem: problem?.problem ?? null })
  })

  router.post('/models/remote', requireJsonBody, async (req, res) => {
    const body = parseOrThrow(remoteSchema, req.body)
    const { models, broken } = await ctx.folder.scan()
    if (models.some((m) => m.id === body.id) || broken.some((b) => b.id === body.id)) {
      throw invalidRequest(`A model named '${body.id}' already exists`, 'id')
    }
    // The key stays in the server's environment; the catalog only names the variable.
    if (body.api_key_env && !process.env[body.api_key_env]) {
      throw invalidRequest(
        `The environment variable ${body.api_key_env} is not set for the server: set it to the key for ${body.base_url}, then restart the server`,
        'api_key_env',
      )
    }
    const remote = { base_url: body.base_url, ...(body.model ? { model: body.model } : {}), ...(body.api_key_env ? { api_key_env: body.api_key_env } : {}) }
    await addCatalogEntry(ctx.folder.dir, { id: body.id, remote })
    await ctx.folder.scan() // the pool starts watching the new server
    await ctx.remotes?.checkAll()
    const model = (await ctx.folder.scan()).models.find((m) => m.id === body.id)
    if (!model) throw invalidRequest(`The model '${body.id}' could not be added`, null)
    res.status(201).json(managedModel(ctx, model, false))
  })

  // Ids may hold '/' and ':' (org/name:q4_k_m), so the id is the whole rest of the path.
  router.delete('/models/*id', async (req, res) => {
    const id = (req.params as { id: string[] }).id.join('/')
    const removed = await removeModel(ctx.folder, id, {
      beforeDelete: async (modelId) => {
        await ctx.scheduler.unload(modelId)
      },
    })
    res.json({ deleted: removed.id, files: removed.files })
  })

  router.get('/downloads', (_req, res) => {
    res.json({ downloads: downloads.list().map(downloadObject) })
  })

  router.get('/downloads/:id', (req, res) => {
    res.json(downloadObject(requireDownload(downloads, req.params.id).snapshot()))
  })

  router.get('/downloads/:id/events', (req, res) => {
    const job = requireDownload(downloads, req.params.id)
    const events = new SseStream(res)
    events.openNow(SSE_PING_MS)
    const send = (snapshot: DownloadSnapshot) => {
      events.send(downloadObject(snapshot))
      if (isFinalState(snapshot.state)) end()
    }
    const unsubscribe = job.subscribe(send)
    const end = () => {
      unsubscribe()
      events.end()
    }
    res.on('close', end)
    send(job.snapshot())
  })

  router.delete('/downloads/:id', async (req, res) => {
    requireDownload(downloads, req.params.id)
    const snapshot = await downloads.cancel(req.params.id)
    res.json(downloadObject(snapshot!))
  })

  router.get('/recommended', async (_req, res) => {
    const { models, vadModels } = await ctx.folder.scan()
    const installedIds = new Set(models.map((m) => m.id))
    // Files in the folder, by their place in it (another program's store has none there).
    const inFolder = [...models.filter((m) => !m.source).map((m) => m.path), ...vadModels]
    const installedFiles = new Set(inFolder.map((path) => relative(ctx.folder.dir, path)))
    res.json({
      models: recommendedModels().map((m): RecommendedEntry => ({ ...m, installed: installedIds.has(m.id) || installedFiles.has(m.file) })),
    })
  })

  return router
}

/** A download on the wire (snake_case). `bytes` and `total` cover the model and its projector (a pull by name: every blob). */
export function downloadObject(s: DownloadSnapshot): DownloadObject {
  return {
    id: s.id,
    kind: s.kind,
    registry: s.registry,
    source: s.source,
    file: s.file,
    state: s.state,
    bytes: s.bytes,
    total: s.total,
    rate_bps: s.rateBps,
    eta_seconds: s.etaSeconds,
    error: s.error,
    error_code: s.errorCode,
    model_id: s.modelId,
    mmproj: s.mmproj,
    mmproj_source: s.mmprojSource,
    files: s.files.map((f) => ({ role: f.role, source: f.source, file: f.file, bytes: f.bytes, total: f.total, sha256: f.sha256, reused: f.reused })),
    created: Math.floor(s.createdAt / 1000),
    finished: s.finishedAt === null ? null : Math.floor(s.finishedAt / 1000),
  }
}

function requireDownload(downloads: DownloadManager, id: string) {
  const job = downloads.get(id)
  if (!job) throw new ApiError(404, 'invalid_request_error', 'download_not_found', `No download with the id '${id}'`, null)
  return job
}
