/** POST /v1/chat/completions: validate → read its documents → plan → run on the model's engine → answer or stream. */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import { chatCompletion, ChatStreamWriter, type ChatChunk, type CompletionIdentity } from './chat-response.ts'
import { planChat } from '../../services/chat/chat-request.ts'
import { parseChatRequest } from './chat-completions-request.ts'
import { recordUsage } from '../../services/keys/key-quotas.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { requestLifetime } from '../../services/pipeline/request-lifetime.ts'
import { SseStream } from '../../http/sse.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { conversationKey } from '../../services/pipeline/conversation-key.ts'
import { Notices, sendNotices } from '../../services/pipeline/request-notices.ts'
import type { ServerContext } from '../../server-context.ts'
import { requestOwner } from '../../services/keys/request-key.ts'
import { DocumentInputs } from '../../services/documents/document-inputs.ts'
import type { DocumentLibrary } from '../../services/documents/document-library.ts'

export function chatRoute(ctx: ServerContext, library: DocumentLibrary): Router {
  const router = Router()
  router.post('/chat/completions', requireJsonBody, async (req, res) => {
    const notices = new Notices()
    const request = parseChatRequest(req.body, notices)
    const model = await requireModel(ctx.folder, request.model)
    res.locals.model = model.id
    const who: CompletionIdentity = {
      id: `chatcmpl-${randomBytes(12).toString('base64url')}`,
      created: Math.floor(Date.now() / 1000),
      model: model.id,
    }
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      const documents = await DocumentInputs.read(request, model, { library, folder: ctx.folder, scheduler: ctx.scheduler, retrieval: ctx.settings.retrieval, notices, owner: requestOwner(res, ctx.keys !== undefined), signal: lifetime.signal })
      const plan = await planChat(documents.apply(request), model, conversationKey(req, request))
      sendNotices(res, notices)
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
