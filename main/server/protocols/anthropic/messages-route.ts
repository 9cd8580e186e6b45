/**
 * POST /v1/messages (Anthropic's Messages API) and POST /v1/messages/count_tokens: the same models,
 * scheduler, limits and checks as chat completions, in Anthropic's shapes and errors. The key may
 * come as `x-api-key`; `anthropic-version` and `anthropic-beta` headers are accepted (the betas
 * Claude Code lists are the fields this route takes).
 */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import { toChatRequest } from './messages-conversion.ts'
import { parseMessagesRequest } from './messages-request.ts'
import { anthropicMessage, MessageStreamWriter, type MessageIdentity, type MessageShape } from './messages-response.ts'
import { conversationKey } from '../../services/pipeline/conversation-key.ts'
import { recordUsage } from '../../services/keys/key-quotas.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { planChat } from '../../services/chat/chat-request.ts'
import { Notices, sendNotices } from '../../services/pipeline/request-notices.ts'
import { requestLifetime } from '../../services/pipeline/request-lifetime.ts'
import type { ServerContext } from '../../server-context.ts'
import { SseStream } from '../../http/sse.ts'
import { ModelError } from '../../../../engines/errors.ts'

export function messagesRoute(ctx: ServerContext): Router {
  const router = Router()
  const seal = ctx.seal

  router.post('/messages', requireJsonBody, async (req, res) => {
    const request = parseMessagesRequest(req.body)
    const notices = new Notices()
    const { chat, appliedEdits } = toChatRequest(request, seal, notices)
    const model = await requireModel(ctx.folder, chat.model)
    const plan = await planChat(chat, model, conversationKey(req, { user_id: request.metadata?.user_id }))
    res.locals.model = model.id
    sendNotices(res, notices)
    const who: MessageIdentity = { id: `msg_${randomBytes(12).toString('base64url')}`, model: model.id }
    const thinking = request.thinking
    const shape: MessageShape = {
      seal,
      omitThinking: thinking !== undefined && 'display' in thinking && thinking.display === 'omitted',
      appliedEdits: request.context_management?.edits?.length ? appliedEdits : undefined,
    }
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      if (request.stream !== true) {
        const result = await ctx.scheduler.run(model, plan.job, { signal: lifetime.signal })
        recordUsage(res, result)
        res.json(anthropicMessage(who, result, shape))
        return
      }
      const sse = new SseStream(res)
      const writer = new MessageStreamWriter(who, shape)
      const send = (events: Array<{ event: string; data: Record<string, unknown> }>) => events.forEach(({ event, data }) => sse.send(data, event))
      const result = await ctx.scheduler.run(model, plan.job, { signal: lifetime.signal, onProgress: (p) => send(writer.progress(p)) })
      recordUsage(res, result)
      send(writer.finish(result))
      sse.end()
    } catch (e) {
      throw inAnthropicWords(lifetime.explain(e))
    } finally {
      lifetime.dispose()
    }
  })

  router.post('/messages/count_tokens', requireJsonBody, async (req, res) => {
    // count_tokens takes the request without max_tokens; the conversion needs one, so it gets one.
    const body = req.body !== null && typeof req.body === 'object' && !Array.isArray(req.body) ? { max_tokens: 1, ...req.body } : req.body
    const request = parseMessagesRequest(body)
    const { chat } = toChatRequest({ ...request, max_tokens: 1 }, seal, new Notices())
    const model = await requireModel(ctx.folder, chat.model)
    const plan = await planChat(chat, model, conversationKey(req, { user_id: request.metadata?.user_id }))
    res.locals.model = model.id
    // The model's own template and tokenizer count the prompt (images included): one token is
    // generated and dropped, and the prompt stays in the engine's cache for the request that follows.
    const job = { ...plan.job, maxTokens: 1, temperature: 0, jsonSchema: undefined, toolChoice: 'auto' as const }
    const result = await ctx.scheduler.run(model, job, {})
    res.json({ input_tokens: result.promptTokens })
  })

  return router
}

/** A prompt over the context, as Anthropic words it: Claude Code compacts the conversation on reading it. */
function inAnthropicWords(e: unknown): unknown {
  if (!(e instanceof ModelError) || e.code !== 'context_length_exceeded' || !e.context) return e
  const { promptTokens, contextLength } = e.context
  return new ModelError(e.code, `prompt is too long: ${promptTokens} tokens > ${contextLength - 1} maximum`, e.param, e.context)
}
