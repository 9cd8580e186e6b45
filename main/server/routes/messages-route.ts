/**
 * POST /v1/messages (Anthropic's Messages API) and POST /v1/messages/count_tokens: the same models,
 * scheduler, limits and checks as chat completions, in Anthropic's shapes and errors. The key may
 * come as `x-api-key`; `anthropic-version` and `anthropic-beta` headers are accepted.
 */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import { parseMessagesRequest, toChatRequest } from '../anthropic/messages-request.ts'
import { anthropicMessage, MessageStreamWriter, type MessageIdentity } from '../anthropic/messages-response.ts'
import { recordUsage } from '../keys/key-quotas.ts'
import { requireJsonBody } from '../json-body.ts'
import { requireModel } from '../model-lookup.ts'
import { planChat } from '../openai/chat-request.ts'
import { requestLifetime } from '../request-lifetime.ts'
import type { ServerContext } from '../server-context.ts'
import { SseStream } from '../sse.ts'

export function messagesRoute(ctx: ServerContext): Router {
  const router = Router()

  router.post('/messages', requireJsonBody, async (req, res) => {
    const request = parseMessagesRequest(req.body)
    const chat = toChatRequest(request)
    const model = await requireModel(ctx.folder, chat.model)
    const plan = await planChat(chat, model)
    res.locals.model = model.id
    const who: MessageIdentity = { id: `msg_${randomBytes(12).toString('base64url')}`, model: model.id }
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      if (request.stream !== true) {
        const result = await ctx.scheduler.run(model, plan.job, { signal: lifetime.signal })
        recordUsage(res, result)
        res.json(anthropicMessage(who, result))
        return
      }
      const sse = new SseStream(res)
      const writer = new MessageStreamWriter(who)
      const start = () => {
        if (sse.started) return
        const { event, data } = writer.start()
        sse.send(data, event)
      }
      const result = await ctx.scheduler.run(model, plan.job, {
        signal: lifetime.signal,
        onProgress: (p) => {
          start()
          for (const { event, data } of writer.progress(p)) sse.send(data, event)
        },
      })
      recordUsage(res, result)
      start()
      for (const { event, data } of writer.finish(result)) sse.send(data, event)
      sse.end()
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })

  router.post('/messages/count_tokens', requireJsonBody, async (req, res) => {
    // count_tokens takes the request without max_tokens; the conversion needs one, so it gets one.
    const body = req.body !== null && typeof req.body === 'object' && !Array.isArray(req.body) ? { max_tokens: 1, ...req.body } : req.body
    const request = parseMessagesRequest(body)
    const chat = toChatRequest({ ...request, max_tokens: 1 })
    const model = await requireModel(ctx.folder, chat.model)
    const plan = await planChat(chat, model)
    res.locals.model = model.id
    // The model's own template and tokenizer count the prompt (images included): one token is
    // generated and dropped, and the prompt stays in the engine's cache for the request that follows.
    const job = { ...plan.job, maxTokens: 1, temperature: 0, jsonSchema: undefined, toolChoice: 'auto' as const }
    const result = await ctx.scheduler.run(model, job, {})
    res.json({ input_tokens: result.promptTokens })
  })

  return router
}
