/** POST /v1/chat/completions: validate → plan → run on the model's engine → answer or stream. */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import { chatChunk, chatCompletion, deltaOf, timingsOf, usageChunk, type CompletionIdentity } from '../openai/chat-response.ts'
import { parseChatRequest, planChat, prepareChatImage } from '../openai/chat-request.ts'
import { recordUsage } from '../key-quotas.ts'
import { requireModel } from '../model-lookup.ts'
import { requestLifetime } from '../request-lifetime.ts'
import { SseStream } from '../sse.ts'
import { requireJsonBody } from '../json-body.ts'
import type { ServerContext } from '../server-context.ts'

export function chatRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/chat/completions', requireJsonBody, async (req, res) => {
    const request = parseChatRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const plan = planChat(request, model)
    await prepareChatImage(plan, model)
    res.locals.model = model.id
    const who: CompletionIdentity = {
      id: `chatcmpl-${randomBytes(12).toString('base64url')}`,
      created: Math.floor(Date.now() / 1000),
      model: model.id,
    }
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      if (!plan.stream) {
        const result = await ctx.scheduler.run(model, plan.job, { signal: lifetime.signal })
        recordUsage(res, result)
        res.json(chatCompletion(who, result))
        return
      }
      const sse = new SseStream(res)
      const openStream = () => {
        if (!sse.started) sse.send(chatChunk(who, { role: 'assistant', content: '' }, null, plan.includeUsage))
      }
      const result = await ctx.scheduler.run(model, plan.job, {
        signal: lifetime.signal,
        onProgress: (p) => {
          const piece = deltaOf(p)
          if (!piece) return
          openStream()
          sse.send(chatChunk(who, piece.delta, null, plan.includeUsage, { logprobs: piece.logprobs }))
        },
      })
      recordUsage(res, result)
      openStream()
      sse.send(chatChunk(who, {}, result.finishReason, plan.includeUsage, { timings: timingsOf(result) }))
      if (plan.includeUsage) sse.send(usageChunk(who, result))
      sse.done()
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })
  return router
}
