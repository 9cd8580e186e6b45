/**
 * Ollama's API (`/api/chat`, `/api/generate`, `/api/embed`, `/api/tags`, `/api/show`, `/api/ps`,
 * `/api/pull`, …) on Hearth's models, scheduler, engines and prompt cache: the same path to the
 * engine as `/v1`, in Ollama's shapes, its NDJSON streams and its errors. Mounted under `/api` on
 * Hearth's port (a key needed, like every route) and on the Ollama port (`--ollama-port`, loopback
 * only, where a program may come without a key: see docs/security.md).
 */
import { randomBytes } from 'node:crypto'
import { link, mkdir, rm } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { Router, type RequestHandler, type Response } from 'express'
import { z } from 'zod'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatResult, CompleteResult } from '../../../../engines/engine-jobs.ts'
import { importModel } from '../../../../models/downloads/model-import.ts'
import { removeModel } from '../../../../models/downloads/model-removal.ts'
import { addCatalogEntry } from '../../../../models/catalog/catalog-writer.ts'
import { recordUsage } from '../../services/keys/key-quotas.ts'
import { conversationKey } from '../../services/pipeline/conversation-key.ts'
import { Notices, sendNotices } from '../../services/pipeline/request-notices.ts'
import { requestLifetime } from '../../services/pipeline/request-lifetime.ts'
import type { ServerContext } from '../../server-context.ts'
import { OllamaBlobs } from './ollama-blobs.ts'
import { modelNotFoundError, OllamaError } from './ollama-errors.ts'
import { keepAliveMs } from './ollama-keep-alive.ts'
import { listedModel, modelThinks, runningModel, showModel, OLLAMA_API_VERSION } from './ollama-models.ts'
import { ollamaName, requireOllamaModel } from './ollama-names.ts'
import { pullRequestFor } from './ollama-pull.ts'
import { ollamaChatSchema, ollamaGenerateSchema, parseOllamaBody, planOllamaChat, planOllamaEmbed, planOllamaGenerate, type OllamaPlan } from './ollama-request.ts'
import { NdjsonStream } from '../../http/ndjson-stream.ts'
import { embeddingsOf, ollamaAnswer, ollamaLoadAnswer, OllamaStreamWriter, type OllamaAnswerIdentity, type OllamaTiming } from './ollama-response.ts'

/** The paths of Ollama's API under `/api`, for the error shape and the Ollama port. */
export const OLLAMA_API_PATHS = ['/version', '/tags', '/show', '/ps', '/chat', '/generate', '/embed', '/embeddings', '/pull', '/push', '/delete', '/copy', '/create', '/blobs/:digest']

/**
 * `auth` checks the key (or lets a keyless program in, on the Ollama port); `body` reads JSON
 * whatever its content type says, as Ollama does.
 */
export function ollamaRoute(ctx: ServerContext, auth: RequestHandler, body: RequestHandler): Router {
  const router = Router()
  const json = [auth, body]
  const blobs = new OllamaBlobs(join(ctx.settings.dataDir, 'ollama-blobs'))

  const version = (_req: unknown, res: Response) => void res.json({ version: OLLAMA_API_VERSION })
  router.get('/version', auth, version)
  router.head('/version', auth, version)

  const tags: RequestHandler = async (_req, res) => {
    const { models } = await ctx.folder.cachedScan(0)
    res.json({ models: models.filter((m) => m.kind === 'chat' || m.kind === 'embedding').map(listedModel) })
  }
  router.get('/tags', auth, tags)
  router.head('/tags', auth, tags)

  router.post('/show', ...json, async (req, res) => {
    const fields = req.body as { model?: unknown; name?: unknown; verbose?: unknown }
    // The command line sends `model` and `name`, one of them empty.
    const model = await requireOllamaModel(ctx.folder, fields.model || fields.name)
    res.json(await showModel(model, fields.verbose === true))
  })

  router.get('/ps', auth, async (_req, res) => {
    const { models } = await ctx.folder.cachedScan(0)
    const running = ctx.scheduler.loaded().flatMap((loaded) => {
      const model = models.find((m) => m.id === loaded.id)
      return model ? [runningModel(model, loaded)] : []
    })
    res.json({ models: running })
  })

  router.post('/chat', ...json, async (req, res) => {
    const notices = new Notices()
    const request = parseOllamaBody('chat', ollamaChatSchema, req.body, notices)
    const model = await requireOllamaModel(ctx.folder, request.model)
    res.locals.model = model.id
    const who: OllamaAnswerIdentity = { model: request.model, api: 'chat', showThinking: request.think !== false }
    if (!request.messages?.length) return loadOrUnload(res, model, who, keepAliveMs(request.keep_alive))
    await refuseThinkingWithout(model, request.model, request.think)
    const plan = await planOllamaChat(request, model, notices, conversationKey(req, {}))
    await answer(res, model, plan, who, notices)
  })

  router.post('/generate', ...json, async (req, res) => {
    const notices = new Notices()
    const request = parseOllamaBody('generate', ollamaGenerateSchema, req.body, notices)
    const model = await requireOllamaModel(ctx.folder, request.model)
    res.locals.model = model.id
    const who: OllamaAnswerIdentity = { model: request.model, api: 'generate', showThinking: request.think !== false }
    if (!request.prompt && !request.suffix && !request.images?.length) return loadOrUnload(res, model, who, keepAliveMs(request.keep_alive))
    await refuseThinkingWithout(model, request.model, request.think)
    const plan = await planOllamaGenerate(request, model, notices)
    await answer(res, model, plan, who, notices)
  })

  /** Thinking asked of a model that cannot think is refused, as Ollama does. */
  async function refuseThinkingWithout(model: ModelRecord, name: string, think: boolean | string | null | undefined): Promise<void> {
    if (think !== true && typeof think !== 'string') return
    if (!(await modelThinks(model))) throw new OllamaError(400, `"${name}" does not support thinking`)
  }

  /** A request without messages or prompt loads the model, or with `keep_alive: 0` unloads it. */
  async function loadOrUnload(res: Response, model: ModelRecord, who: OllamaAnswerIdentity, keepAlive: number | undefined): Promise<void> {
    if (keepAlive === 0) {
      await ctx.scheduler.unload(model.id)
      res.json(ollamaLoadAnswer(who, 'unload'))
      return
    }
    if (!model.capabilities.includes('chat')) throw new OllamaError(400, `"${who.model}" does not support ${who.api}`)
    await ctx.scheduler.load(model, undefined, { keepAliveMs: keepAlive })
    res.json(ollamaLoadAnswer(who, 'load'))
  }

  async function answer(res: Response, model: ModelRecord, plan: OllamaPlan, who: OllamaAnswerIdentity, notices: Notices): Promise<void> {
    sendNotices(res, notices)
    const timing: OllamaTiming = { startedAt: performance.now(), loadMs: 0 }
    const wasLoaded = ctx.scheduler.engineOf(model.id) !== undefined
    const tookLoad = () => {
      if (!wasLoaded) timing.loadMs = ctx.scheduler.engineOf(model.id)?.info.loadMs ?? 0
    }
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    const run = { signal: lifetime.signal, keepAliveMs: plan.keepAliveMs }
    try {
      if (!plan.stream) {
        const result: ChatResult | CompleteResult = await ctx.scheduler.run(model, plan.job, run)
        tookLoad()
        recordUsage(res, result)
        res.json(ollamaAnswer(who, result, timing))
        return
      }
      const stream = new NdjsonStream(res)
      const writer = new OllamaStreamWriter(who, timing)
      const result: ChatResult | CompleteResult = await ctx.scheduler.run(model, plan.job, { ...run, onProgress: (p) => writer.progress(p).forEach((line) => stream.send(line)) })
      tookLoad()
      recordUsage(res, result)
      writer.finish(result).forEach((line) => stream.send(line))
      stream.end()
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  }

  for (const legacy of [false, true]) {
    router.post(legacy ? '/embeddings' : '/embed', ...json, async (req, res) => {
      const notices = new Notices()
      const fields = req.body as Record<string, unknown>
      const model = await requireOllamaModel(ctx.folder, fields?.model)
      res.locals.model = model.id
      // The older route answers an empty prompt with an empty embedding, as Ollama does.
      if (legacy && (fields.prompt === undefined || fields.prompt === '')) return void res.json({ embedding: [] })
      const plan = planOllamaEmbed(fields, model, notices, legacy)
      sendNotices(res, notices)
      const startedAt = performance.now()
      const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
      try {
        const result = await ctx.scheduler.run(model, plan.job, { signal: lifetime.signal, keepAliveMs: plan.keepAliveMs })
        recordUsage(res, { promptTokens: result.promptTokens })
        const vectors = embeddingsOf(result)
        if (legacy) return void res.json({ embedding: vectors[0] ?? [] })
        res.json({ model: fields.model, embeddings: vectors, total_duration: Math.round((performance.now() - startedAt) * 1e6), load_duration: 0, prompt_eval_count: result.promptTokens })
      } catch (e) {
        throw lifetime.explain(e)
      } finally {
        lifetime.dispose()
      }
    })
  }

  // Managing models: any key may, as on Hearth's own /api/models routes (and any program on the Ollama port, as with Ollama).
  const manage = json

  router.post('/pull', ...manage, async (req, res) => {
    const fields = req.body as { model?: unknown; name?: unknown; stream?: unknown }
    const name = fields.model || fields.name
    if (typeof name !== 'string' || name.trim() === '') throw new OllamaError(400, 'model is required')
    const existing = await requireOllamaModel(ctx.folder, name).catch(() => undefined)
    // A name Hearth cannot fetch is a 400 before the stream begins, not an error line after it.
    const job = existing ? undefined : await ctx.downloads.pull(await pullRequestFor(name.trim(), ctx.downloads.hubEndpoint))
    const stream = fields.stream !== false ? new NdjsonStream(res) : undefined
    stream?.send({ status: 'pulling manifest' })
    if (job) {
      const digest = `sha256:${randomBytes(32).toString('hex')}`
      const unsubscribe = job.subscribe((s) => stream?.send({ status: `pulling ${s.file}`, digest, total: s.total ?? 0, completed: s.bytes }))
      res.once('close', unsubscribe)
      const final = await job.finished
      unsubscribe()
      if (final.state !== 'done') throw new OllamaError(final.errorCode === 'not_found' ? 404 : 500, `pull model manifest: ${final.error ?? final.state}`)
      stream?.send({ status: 'verifying sha256 digest' })
      stream?.send({ status: 'writing manifest' })
    }
    if (stream) {
      stream.send({ status: 'success' })
      stream.end()
    } else res.json({ status: 'success' })
  })

  router.post('/push', ...manage, (_req, _res) => {
    throw new OllamaError(400, 'Hearth does not push models to a registry: it serves the files on this computer')
  })

  router.delete('/delete', ...manage, async (req, res) => {
    const fields = req.body as { model?: unknown; name?: unknown }
    const model = await requireOllamaModel(ctx.folder, fields.model || fields.name)
    await removeModel(ctx.folder, model.id, { beforeDelete: async (id) => void (await ctx.scheduler.unload(id)) })
    res.status(200).end()
  })

  router.post('/copy', ...manage, async (req, res) => {
    const fields = z.object({ source: z.string().min(1), destination: z.string().min(1) }).safeParse(req.body)
    if (!fields.success) throw new OllamaError(400, 'source and destination are required')
    const source = await requireOllamaModel(ctx.folder, fields.data.source)
    if (source.source) throw new OllamaError(400, `'${fields.data.source}' is in ${source.source.kind}'s folder, which Hearth only reads; copy it into Hearth's models folder first`)
    if (source.remote) throw new OllamaError(400, `'${fields.data.source}' runs on another machine: add it again under the new name`)
    const taken = await requireOllamaModel(ctx.folder, fields.data.destination).catch(() => undefined)
    if (taken) throw new OllamaError(400, `a model named '${fields.data.destination}' already exists`)
    // A second name for the same file: a catalog entry, no copy of the weights. A file found in the
    // folder (no entry of its own) gets one first: an entry claims its file, which would hide the old name.
    const files = { file: relative(ctx.folder.dir, source.path), ...(source.projectorPath ? { mmproj: relative(ctx.folder.dir, source.projectorPath) } : {}) }
    if (!source.catalogEntry) await addCatalogEntry(ctx.folder.dir, { id: source.id, ...files })
    await addCatalogEntry(ctx.folder.dir, { id: fields.data.destination, ...files })
    res.status(200).end()
  })

  router.head('/blobs/:digest', auth, async (req, res) => {
    res.status((await blobs.has(req.params.digest as string)) ? 200 : 404).end()
  })

  // The body is the file itself, not JSON: no body parser on this route.
  router.post('/blobs/:digest', auth, async (req, res) => {
    const digest = req.params.digest as string
    if (!(await blobs.has(digest))) await blobs.put(digest, req)
    res.status(201).end()
  })

  router.post('/create', ...manage, async (req, res) => {
    const fields = z
      .looseObject({
        model: z.string().nullish(),
        name: z.string().nullish(),
        files: z.record(z.string(), z.string()).nullish(),
        from: z.string().nullish(),
        stream: z.boolean().nullish(),
      })
      .safeParse(req.body)
    if (!fields.success) throw new OllamaError(400, `invalid request: ${fields.error.issues[0]!.message}`)
    const { from, stream } = fields.data
    const files = fields.data.files ?? {}
    // The command line sends `model` and `name`, one of them empty.
    const name = fields.data.model || fields.data.name
    if (!name) throw new OllamaError(400, 'model is required')
    for (const field of ['template', 'system', 'parameters', 'adapters', 'quantize', 'messages', 'license']) {
      const value = (req.body as Record<string, unknown>)[field]
      if (value != null && value !== '' && !(typeof value === 'object' && Object.keys(value).length === 0)) {
        throw new OllamaError(400, `'${field}' is not supported: Hearth creates a model from a GGUF file as it is (its own template and parameters)`)
      }
    }
    const ggufs = Object.entries(files).filter(([file]) => /\.gguf$/i.test(file))
    if (ggufs.length === 0) {
      throw new OllamaError(400, from ? `Hearth creates models from GGUF files: 'from' another model is not supported; use /api/copy for a second name` : 'no GGUF file given: send its digest in files')
    }
    const [projectorFile] = ggufs.filter(([file]) => /mmproj/i.test(file))
    const [modelFile] = ggufs.filter(([file]) => !/mmproj/i.test(file))
    if (!modelFile) throw new OllamaError(400, 'no model GGUF among files (only a projector)')
    const out = stream !== false ? new NdjsonStream(res) : undefined
    out?.send({ status: 'parsing GGUF' })
    const staging = join(ctx.settings.dataDir, 'ollama-blobs', `create-${process.pid}-${Date.now()}`)
    await mkdir(staging, { recursive: true })
    try {
      const placed = async ([file, digest]: [string, string]) => {
        if (!(await blobs.has(digest))) throw new OllamaError(400, `blob ${digest} was not uploaded (POST /api/blobs/${digest} first)`)
        const path = join(staging, file.split('/').pop()!.replace(/[^\w.-]/g, '-'))
        await link(blobs.pathOf(digest), path)
        return path
      }
      const path = await placed(modelFile)
      const mmproj = projectorFile ? await placed(projectorFile) : undefined
      await importModel(ctx.folder, { path, mode: 'link', id: name.includes(':') ? name : `${name}:latest`, ...(mmproj ? { mmproj } : {}) })
      await rm(blobs.pathOf(modelFile[1]), { force: true })
      if (projectorFile) await rm(blobs.pathOf(projectorFile[1]), { force: true })
    } finally {
      await rm(staging, { recursive: true, force: true })
    }
    if (out) {
      out.send({ status: 'writing manifest' })
      out.send({ status: 'success' })
      out.end()
    } else res.json({ status: 'success' })
  })

  return router
}
