/** POST /v1/chat/completions: validate → plan → run on the model's engine → answer or stream. */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import { chatCompletion, ChatStreamWriter, type ChatChunk, type CompletionIdentity } from '../openai/chat-response.ts'
import { parseChatRequest, planChat } from '../openai/chat-request.ts'
import { recordUsage } from '../keys/key-quotas.ts'
import { requireModel } from '../model-lookup.ts'
import { requestLifetime } from '../request-lifetime.ts'
import { SseStream } from '../sse.ts'
import { requireJsonBody } from '../json-body.ts'
import { conversationKey } from '../conversation-key.ts'
import { Notices, sendNotices } from '../request-notices.ts'
import type { ServerContext } from '../server-context.ts'

export function chatRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/chat/completions', requireJsonBody, async (req, res) => {
    const notices = new Notices()
    const request = parseChatRequest(req.body, notices)
    const model = await requireModel(ctx.folder, request.model)
    const plan = await planChat(request, model, conversationKey(req, request))
    res.locals.model = model.id
    sendNotices(res, notices)
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
      const writer = new ChatStreamWriter(who, plan.includeUsage)
      const send = (chunks: ChatChunk[]) => chunks.forEach((c) => sse.send(c))
      const result = await ctx.scheduler.run(model, plan.job, { signal: lifetime.signal, onProgress: (p) => send(writer.progress(p)) })
      recordUsage(res, result)
      send(writer.finish(result))
      sse.done()
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })
  return router
}
