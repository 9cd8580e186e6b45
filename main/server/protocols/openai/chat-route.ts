/** POST /v1/chat/completions: the body checked, then the answer pipeline; answered whole or as chunks. */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import type { ChatResult } from '../../../../engines/engine-jobs.ts'
import { chatCompletion, ChatStreamWriter, type CompletionIdentity } from './chat-response.ts'
import { parseChatRequest } from './chat-completions-request.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { sseEvents } from '../../http/sse.ts'
import { requestOwner } from '../../services/keys/request-key.ts'
import { streamOf, type AnswerShape } from '../../services/pipeline/answer-pipeline.ts'
import { conversationKey } from '../../services/pipeline/conversation-key.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'
import type { ServerContext } from '../../server-context.ts'

export function chatRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/chat/completions', requireJsonBody, async (req, res) => {
    const notices = new Notices()
    const request = parseChatRequest(req.body, notices)
    const model = await requireModel(ctx.folder, request.model)
    const who: CompletionIdentity = { id: `chatcmpl-${randomBytes(12).toString('base64url')}`, created: Math.floor(Date.now() / 1000), model: model.id }
    const owner = requestOwner(res, ctx.keys !== undefined)
    await ctx.pipeline.within(res, async (signal) => {
      const { plan } = await ctx.pipeline.planChat(res, model, request, { notices, owner, conversationKey: conversationKey(req, request), signal })
      const shape: AnswerShape<ChatResult> = plan.stream
        ? streamOf(() => sseEvents(res, 'done'), new ChatStreamWriter(who, plan.includeUsage))
        : { whole: (result) => chatCompletion(who, result) }
      await ctx.pipeline.answer(res, model, plan.job, shape, signal, { notices })
    })
  })
  return router
}
