/**
 * Ollama's inference routes (`/api/chat`, `/api/generate`, `/api/embed`, `/api/embeddings`): each
 * body parsed in Ollama's terms into an engine job, then the same answer pipeline as `/v1` (the
 * deadline, cancel, usage, quotas and notices), answered in Ollama's JSON or NDJSON lines.
 */
import { Router, type RequestHandler, type Response } from 'express'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatJob, CompleteJob, CompleteResult, ChatResult } from '../../../../engines/engine-jobs.ts'
import { ndjsonEvents } from '../../http/ndjson-stream.ts'
import { streamOf, type AnswerShape } from '../../services/pipeline/answer-pipeline.ts'
import { conversationKey } from '../../services/pipeline/conversation-key.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'
import type { ServerContext } from '../../server-context.ts'
import { OllamaError } from './ollama-errors.ts'
import { keepAliveMs } from './ollama-keep-alive.ts'
import { modelThinks } from './ollama-models.ts'
import { requireOllamaModel } from './ollama-names.ts'
import {
  ollamaChatSchema,
  ollamaEmbedSchema,
  ollamaGenerateSchema,
  parseOllamaBody,
  planOllamaChat,
  planOllamaEmbed,
  planOllamaGenerate,
  type OllamaPlan,
} from './ollama-request.ts'
import { embeddingsOf, ollamaAnswer, ollamaLoadAnswer, OllamaStreamWriter, type OllamaAnswerIdentity, type OllamaTiming } from './ollama-response.ts'

/** `json`: the key check (keyless on the Ollama port) and a JSON body whatever its content type says. */
export function ollamaInferenceRoute(ctx: ServerContext, json: RequestHandler[]): Router {
  const router = Router()

  router.post('/chat', ...json, async (req, res) => {
    const notices = new Notices()
    const request = parseOllamaBody('chat', ollamaChatSchema, req.body, notices)
    const model = await requireOllamaModel(ctx.folder, request.model)
    const who: OllamaAnswerIdentity = { model: request.model, api: 'chat', showThinking: request.think !== false }
    if (!request.messages?.length) return loadOrUnload(res, model, who, keepAliveMs(request.keep_alive) ?? ctx.settings.ollamaKeepAliveMs)
    await refuseThinkingWithout(model, request.model, request.think)
    const plan = await planOllamaChat(request, model, notices, conversationKey(req, {}))
    await answer(res, model, plan, who, notices)
  })

  router.post('/generate', ...json, async (req, res) => {
    const notices = new Notices()
    const request = parseOllamaBody('generate', ollamaGenerateSchema, req.body, notices)
    const model = await requireOllamaModel(ctx.folder, request.model)
    const who: OllamaAnswerIdentity = { model: request.model, api: 'generate', showThinking: request.think !== false }
    if (!request.prompt && !request.suffix && !request.images?.length)
      return loadOrUnload(res, model, who, keepAliveMs(request.keep_alive) ?? ctx.settings.ollamaKeepAliveMs)
    await refuseThinkingWithout(model, request.model, request.think)
    const plan = await planOllamaGenerate(request, model, notices)
    await answer(res, model, plan, who, notices)
  })

  for (const legacy of [false, true]) {
    router.post(legacy ? '/embeddings' : '/embed', ...json, async (req, res) => {
      const notices = new Notices()
      // The older route sends one `prompt` where the newer sends `input`.
      const body = parseOllamaBody('embed', ollamaEmbedSchema, legacy ? asEmbedBody(req.body) : req.body, notices)
      const model = await requireOllamaModel(ctx.folder, body.model)
      // The older route answers an empty prompt with an empty embedding, as Ollama does.
      if (legacy && (body.input === undefined || body.input === '')) return void res.json({ embedding: [] })
      const plan = planOllamaEmbed(body, model, notices)
      const startedAt = performance.now()
      const shape = legacy
        ? { whole: (result: Parameters<typeof embeddingsOf>[0]) => ({ embedding: embeddingsOf(result)[0] ?? [] }) }
        : {
            whole: (result: Parameters<typeof embeddingsOf>[0]) => ({
              model: body.model,
              embeddings: embeddingsOf(result),
              total_duration: Math.round((performance.now() - startedAt) * 1e6),
              load_duration: 0,
              prompt_eval_count: result.promptTokens,
            }),
          }
      await ctx.pipeline.within(res, (signal) =>
        ctx.pipeline.answer(res, model, plan.job, shape, signal, { notices, keepAliveMs: plan.keepAliveMs ?? ctx.settings.ollamaKeepAliveMs }),
      )
    })
  }

  /** Thinking asked of a model that cannot think is refused, as Ollama does. */
  async function refuseThinkingWithout(model: ModelRecord, name: string, think: boolean | string | null | undefined): Promise<void> {
    if (think !== true && typeof think !== 'string') return
    if (!modelThinks(model)) throw new OllamaError(400, `"${name}" does not support thinking`)
  }

  /** A request without messages or prompt loads the model, or with `keep_alive: 0` unloads it. */
  async function loadOrUnload(res: Response, model: ModelRecord, who: OllamaAnswerIdentity, keepAlive: number | undefined): Promise<void> {
    res.locals.model = model.id
    if (keepAlive === 0) {
      await ctx.scheduler.unload(model.id)
      res.json(ollamaLoadAnswer(who, 'unload'))
      return
    }
    if (!model.capabilities.includes('chat')) throw new OllamaError(400, `"${who.model}" does not support ${who.api}`)
    await ctx.scheduler.load(model, undefined, { keepAliveMs: keepAlive })
    res.json(ollamaLoadAnswer(who, 'load'))
  }

  /** A chat or generate answer, whole or as lines; the load's time is told when this request made it. */
  async function answer(res: Response, model: ModelRecord, plan: OllamaPlan, who: OllamaAnswerIdentity, notices: Notices): Promise<void> {
    const timing: OllamaTiming = { startedAt: performance.now(), loadMs: 0 }
    const wasLoaded = ctx.scheduler.engineOf(model.id) !== undefined
    const timed =
      <T>(write: (result: ChatResult | CompleteResult) => T) =>
      (result: ChatResult | CompleteResult) => {
        if (!wasLoaded) timing.loadMs = ctx.scheduler.engineOf(model.id)?.info.loadMs ?? 0
        return write(result)
      }
    const writer = new OllamaStreamWriter(who, timing)
    const shape: AnswerShape<ChatResult | CompleteResult> = plan.stream
      ? streamOf(() => ndjsonEvents(res), { progress: (p) => writer.progress(p), finish: timed((result) => writer.finish(result)) })
      : { whole: timed((result) => ollamaAnswer(who, result, timing)) }
    const job: ChatJob | CompleteJob = plan.job
    const keepAliveMs = plan.keepAliveMs ?? ctx.settings.ollamaKeepAliveMs
    await ctx.pipeline.within(res, (signal) => ctx.pipeline.answer(res, model, job, shape, signal, { notices, keepAliveMs }))
  }

  return router
}

function asEmbedBody(body: unknown): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body
  const { prompt, ...rest } = body as Record<string, unknown>
  return { ...rest, input: prompt }
}
