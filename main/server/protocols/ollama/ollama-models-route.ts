/**
 * Ollama's model routes: `/api/version`, `/api/tags`, `/api/show`, `/api/ps`, and managing models
 * (`/api/pull`, `/api/push`, `/api/delete`, `/api/copy`, `/api/blobs/:digest`, `/api/create`), and the
 * ollama.com account routes (`/api/me`, `/api/signout`, `/api/status`: no account, no cloud). Any
 * key may manage models, as on Hearth's own `/api/models` routes (and any program on the Ollama
 * port, as with Ollama); other programs' stores stay read-only.
 */
import { randomBytes } from 'node:crypto'
import { join, relative } from 'node:path'
import { Router, type RequestHandler, type Response } from 'express'
import { z } from 'zod'
import { addCatalogEntry } from '../../../../models/catalog/catalog-writer.ts'
import { removeModel } from '../../../../models/downloads/model-removal.ts'
import { ndjsonEvents } from '../../http/ndjson-stream.ts'
import { Notices, sendNotices } from '../../services/pipeline/request-notices.ts'
import type { ServerContext } from '../../server-context.ts'
import { createOllamaModel, ollamaCreateSchema } from './ollama-create.ts'
import { OllamaError } from './ollama-errors.ts'
import { listedModel, modelThinks, runningModel, showModel, OLLAMA_API_VERSION } from './ollama-models.ts'
import { modelNamed, requireOllamaModel } from './ollama-names.ts'
import { pullRequestFor } from './ollama-pull.ts'
import { ollamaProgressLine, pullOllamaModel } from '../../../../models/downloads/ollama-pull.ts'
import { parsePullName, type PullName } from '../../../../models/downloads/ollama-pull-name.ts'
import { parseOllamaBody } from './ollama-request.ts'

/** `model`, or the older `name`: the command line sends both, one of them empty. */
const named = z.looseObject({ model: z.string().nullish(), name: z.string().nullish() })
const showSchema = named.extend({ verbose: z.boolean().nullish() })
const pullSchema = named.extend({ stream: z.boolean().nullish(), insecure: z.boolean().nullish() })
const copySchema = z.looseObject({ source: z.string().min(1), destination: z.string().min(1) })

/** The name a body gives, or Ollama's 400. */
function nameIn(body: z.infer<typeof named>): string {
  const name = (body.model || body.name || '').trim()
  if (!name) throw new OllamaError(400, 'model is required')
  return name
}

/** `auth`: the key check; `json`: it and a JSON body, whatever its content type says. */
export function ollamaModelsRoute(ctx: ServerContext, auth: RequestHandler, json: RequestHandler[]): Router {
  const router = Router()
  const blobs = ctx.ollamaBlobs

  const version = (_req: unknown, res: Response) => void res.json({ version: OLLAMA_API_VERSION })
  router.get('/version', auth, version)
  router.head('/version', auth, version)

  const tags: RequestHandler = async (_req, res) => {
    const { models } = await ctx.folder.cachedScan(0)
    const served = models.filter((m) => m.kind === 'chat' || m.kind === 'embedding')
    res.json({ models: served.map((m) => listedModel(m, modelThinks(m))) })
  }
  router.get('/tags', auth, tags)
  router.head('/tags', auth, tags)

  router.post('/show', ...json, async (req, res) => {
    const body = parseOllamaBody('show', showSchema, req.body, new Notices())
    const model = await requireOllamaModel(ctx.folder, nameIn(body))
    res.json(await showModel(model, body.verbose === true))
  })

  router.get('/ps', auth, async (_req, res) => {
    const { models } = await ctx.folder.cachedScan(0)
    const running = ctx.scheduler.loaded().flatMap((loaded) => {
      const model = models.find((m) => m.id === loaded.id)
      return model ? [runningModel(model, loaded)] : []
    })
    res.json({ models: running })
  })

  router.post('/pull', ...json, async (req, res) => {
    const body = parseOllamaBody('pull', pullSchema, req.body, new Notices())
    const name = parsePullName(nameIn(body))
    if (name.kind === 'registry') return pullByName(res, name, body)
    const existing = await modelNamed(ctx.folder, nameIn(body))
    // A name Hearth cannot fetch is a 400 before the stream begins, not an error line after it.
    const job = existing ? undefined : await ctx.downloads.pull(await pullRequestFor(nameIn(body), ctx.downloads.hubEndpoint))
    const stream = body.stream !== false ? ndjsonEvents(res) : undefined
    stream?.send({ data: { status: 'pulling manifest' } })
    if (job) {
      const digest = `sha256:${randomBytes(32).toString('hex')}`
      const unsubscribe = job.subscribe((s) => stream?.send({ data: { status: `pulling ${s.file}`, digest, total: s.total ?? 0, completed: s.bytes } }))
      res.once('close', unsubscribe)
      const final = await job.finished
      unsubscribe()
      if (final.state !== 'done') throw new OllamaError(final.errorCode === 'not_found' ? 404 : 500, `pull model manifest: ${final.error ?? final.state}`)
      stream?.send({ data: { status: 'verifying sha256 digest' } })
      stream?.send({ data: { status: 'writing manifest' } })
    }
    if (!stream) return void res.json({ status: 'success' })
    stream.send({ data: { status: 'success' } })
    stream.end()
  })

  /**
   * A model of a registry, by Ollama's name (`qwen3:0.6b`, `host:port/namespace/model:tag`), as
   * Ollama pulls it: its lines as they come (the stream opens with the first, so a name refused
   * before anything comes is a plain 4xx); a client that goes stops the pull, and the next pull of
   * the name goes on from what came.
   */
  async function pullByName(res: Response, name: Extract<PullName, { kind: 'registry' }>, body: z.infer<typeof pullSchema>): Promise<void> {
    const stop = new AbortController()
    res.once('close', () => {
      if (!res.writableFinished) stop.abort()
    })
    const events = pullOllamaModel(name, { modelsDir: ctx.folder.dir, insecure: body.insecure === true, signal: stop.signal })
    const stream = body.stream !== false ? ndjsonEvents(res) : undefined
    for await (const event of events) stream?.send({ data: ollamaProgressLine(event) })
    // The model is served at once, under its name.
    await ctx.folder.cachedScan(0)
    if (stream) stream.end()
    else res.json({ status: 'success' })
  }

  router.post('/push', ...json, () => {
    throw new OllamaError(400, 'Hearth does not push models to a registry: it serves the files on this computer')
  })

  // `ollama signin`, `signout` and `push` ask who is signed in to ollama.com; Hearth has no account
  // there and runs no cloud models, which `/api/status` says as Ollama says it (`OLLAMA_NO_CLOUD`).
  const noAccount = () => {
    throw new OllamaError(
      400,
      'Hearth signs in to no ollama.com account: it runs the models on this computer, with no cloud models and no pushing to a registry',
    )
  }
  router.post('/me', auth, noAccount)
  router.post('/signout', auth, noAccount)
  router.get('/status', auth, (_req, res) => void res.json({ cloud: { disabled: true, source: 'config' } }))

  router.delete('/delete', ...json, async (req, res) => {
    const body = parseOllamaBody('delete', named, req.body, new Notices())
    const model = await requireOllamaModel(ctx.folder, nameIn(body))
    await removeModel(ctx.folder, model.id, { beforeDelete: async (id) => void (await ctx.scheduler.unload(id)) })
    await ctx.folder.cachedScan(0)
    res.status(200).end()
  })

  router.post('/copy', ...json, async (req, res) => {
    const { source: from, destination } = parseOllamaBody('copy', copySchema, req.body, new Notices())
    const source = await requireOllamaModel(ctx.folder, from)
    if (source.remote) throw new OllamaError(400, `'${from}' runs on another machine: add it again under the new name`)
    // A model of the same name (one that cannot be served included) is never covered over.
    if (await modelNamed(ctx.folder, destination)) throw new OllamaError(400, `a model named '${destination}' already exists`)
    const entry = source.catalogEntry
    if (source.source && !source.source.pulled) {
      throw new OllamaError(400, `'${from}' is in ${source.source.kind}'s folder, which Hearth only reads; copy it into Hearth's models folder first`)
    }
    // A second name for the same weights: a catalog entry, never a copy of the file. A file found in
    // the folder (no entry of its own) gets one first: an entry claims its file, which would hide the old name.
    const weights =
      entry?.from !== undefined || source.source
        ? { from: entry?.from ?? source.id }
        : { file: relative(ctx.folder.dir, source.path), ...(source.projectorPath ? { mmproj: relative(ctx.folder.dir, source.projectorPath) } : {}) }
    if (!entry && !source.source) await addCatalogEntry(ctx.folder.dir, { id: source.id, ...weights })
    const { id: _id, file: _file, mmproj: _mmproj, from: _from, ...settings } = (entry ?? {}) as Record<string, unknown>
    await addCatalogEntry(ctx.folder.dir, { id: destination, ...weights, ...settings })
    await ctx.folder.cachedScan(0)
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

  router.post('/create', ...json, async (req, res) => {
    const notices = new Notices()
    const body = parseOllamaBody('create', ollamaCreateSchema, req.body, notices)
    const lines: string[] = []
    const deps = { folder: ctx.folder, blobs, stagingDir: join(ctx.settings.dataDir, 'ollama-blobs'), notices }
    // Every check comes before the first line, so a refusal is a plain 400 in Ollama's shape.
    await createOllamaModel(body, deps, (status) => lines.push(status))
    sendNotices(res, notices)
    if (body.stream === false) return void res.json({ status: 'success' })
    const stream = ndjsonEvents(res)
    for (const status of [...lines, 'success']) stream.send({ data: { status } })
    stream.end()
  })

  return router
}
