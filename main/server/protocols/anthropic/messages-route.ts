/**
 * POST /v1/messages (Anthropic's Messages API) and POST /v1/messages/count_tokens: the same models,
 * scheduler, limits and checks as chat completions, in Anthropic's shapes and errors. The key may
 * come as `x-api-key`; `anthropic-version` and `anthropic-beta` headers are accepted (the betas
 * Claude Code lists are the fields this route takes).
 */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import type { ChatResult } from '../../../../engines/engine-jobs.ts'
import { ModelError } from '../../../../engines/errors.ts'
import { toChatRequest } from './messages-conversion.ts'
import { parseMessagesRequest } from './messages-request.ts'
import { anthropicMessage, MessageStreamWriter, type MessageIdentity, type MessageShape } from './messages-response.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { sseEvents } from '../../http/sse.ts'
import { requestOwner } from '../../services/keys/request-key.ts'
import { streamOf, type AnswerShape } from '../../services/pipeline/answer-pipeline.ts'
import { conversationKey } from '../../services/pipeline/conversation-key.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { Notices, sendNotices } from '../../services/pipeline/request-notices.ts'
import { connectMcpServers, McpFunctions } from '../../services/mcp/mcp-tools.ts'
import { McpToolLoop } from '../../services/pipeline/mcp-tool-loop.ts'
import { MessagesConversation, MessagesLoopSink, mcpServerRequests } from './messages-mcp.ts'
import type { ServerContext } from '../../server-context.ts'

export function messagesRoute(ctx: ServerContext): Router {
  const router = Router()
  const seal = ctx.seal

  router.post('/messages', requireJsonBody, async (req, res) => {
    const request = parseMessagesRequest(req.body)
    const notices = new Notices()
    // Checked whole before any MCP server is reached; with MCP servers it is converted again, with their tools.
    const first = toChatRequest(request, seal, notices)
    const model = await requireModel(ctx.folder, first.chat.model)
    const who: MessageIdentity = { id: `msg_${randomBytes(12).toString('base64url')}`, model: model.id }
    const thinking = request.thinking
    const owner = requestOwner(res, ctx.keys !== undefined)
    const key = conversationKey(req, { user_id: request.metadata?.user_id })
    await ctx.pipeline.within(
      res,
      async (signal) => {
        const servers = await connectMcpServers(mcpServerRequests(request, ctx.mcp, notices), ctx.mcp, { req, res }, notices, signal)
        const mcp = new McpFunctions(
          servers,
          (request.tools ?? []).map((t) => t.name),
        )
        const { chat, appliedEdits, documents: blocks } = servers.length ? toChatRequest(request, seal, new Notices(), { mcp }) : first
        const { plan, documents } = await ctx.pipeline.planChat(res, model, chat, { notices, owner, conversationKey: key, signal })
        const shape: MessageShape = {
          seal,
          omitThinking: thinking !== undefined && 'display' in thinking && thinking.display === 'omitted',
          appliedEdits: request.context_management?.edits?.length ? appliedEdits : undefined,
          documents: blocks.citations ? { sources: documents.sources, fileIds: documents.fileIds, blocks } : undefined,
          isMcp: (name) => mcp.target(name) !== undefined,
        }
        if (servers.length === 0) {
          const answer: AnswerShape<ChatResult> =
            request.stream === true
              ? streamOf(
                  () => sseEvents(res, 'last-event'),
                  new MessageStreamWriter(who, shape),
                  ({ event, data }) => ({ name: event, data }),
                )
              : { whole: (result) => anthropicMessage(who, result, shape) }
          await ctx.pipeline.answer(res, model, plan.job, answer, signal, { notices })
          return
        }
        // The MCP connector: Hearth runs the servers' tools between the model's turns.
        sendNotices(res, notices)
        const writer = request.stream === true ? new MessageStreamWriter(who, shape) : undefined
        const events = writer && sseEvents(res, 'last-event')
        const send = (list: Array<{ event: string; data: Record<string, unknown> }>) => list.forEach(({ event, data }) => events!.send({ name: event, data }))
        const sink = new MessagesLoopSink(shape, writer && { writer, send })
        const conversation = new MessagesConversation({
          request,
          seal,
          mcp,
          model,
          conversationKey: key,
          firstPlan: plan,
          documents,
          produced: () => sink.blocks(),
        })
        const loop = new McpToolLoop({
          pipeline: ctx.pipeline,
          mcp: ctx.mcp,
          res,
          model,
          signal,
          target: (name) => mcp.target(name),
          approved: [],
          maxOutputTokens: request.max_tokens,
        })
        const outcome = await loop.run(sink, conversation)
        if (!writer) return void res.json(anthropicMessage(who, outcome.result, shape, { content: sink.content, stoppedAt: outcome.stoppedAt }))
        send(writer.finish(outcome.result, outcome.stoppedAt))
        events!.end()
      },
      (e) => first.documents.params.renamed(inAnthropicWords(e)),
    )
  })

  router.post('/messages/count_tokens', requireJsonBody, async (req, res) => {
    // count_tokens takes the request without max_tokens; the conversion needs one, so it gets one.
    const body = req.body !== null && typeof req.body === 'object' && !Array.isArray(req.body) ? { max_tokens: 1, ...req.body } : req.body
    const request = parseMessagesRequest(body)
    const notices = new Notices()
    const counted = { ...request, max_tokens: 1 }
    const { chat: checked, documents: blocks } = toChatRequest(counted, seal, notices)
    const model = await requireModel(ctx.folder, checked.model)
    const owner = requestOwner(res, ctx.keys !== undefined)
    // The model's own template and tokenizer count the prompt (documents, images and the MCP servers'
    // tools included): one token is generated and dropped, and the prompt stays in the engine's cache
    // for the request that follows.
    await ctx.pipeline.within(
      res,
      async (signal) => {
        const servers = await connectMcpServers(mcpServerRequests(request, ctx.mcp, notices), ctx.mcp, { req, res }, notices, signal)
        const chat = servers.length
          ? toChatRequest(counted, seal, new Notices(), {
              mcp: new McpFunctions(
                servers,
                (request.tools ?? []).map((t) => t.name),
              ),
            }).chat
          : checked
        const { plan } = await ctx.pipeline.planChat(res, model, chat, {
          notices,
          owner,
          conversationKey: conversationKey(req, { user_id: request.metadata?.user_id }),
          signal,
        })
        const job = { ...plan.job, maxTokens: 1, temperature: 0, jsonSchema: undefined, toolChoice: 'auto' as const }
        await ctx.pipeline.answer(res, model, job, { whole: (result) => ({ input_tokens: result.promptTokens }) }, signal, { notices })
      },
      (e) => blocks.params.renamed(e),
    )
  })

  return router
}

/** A prompt over the context, as Anthropic words it: Claude Code compacts the conversation on reading it. */
function inAnthropicWords(e: unknown): unknown {
  if (!(e instanceof ModelError) || e.code !== 'context_length_exceeded' || !e.context) return e
  const { promptTokens, contextLength } = e.context
  return new ModelError(e.code, `prompt is too long: ${promptTokens} tokens > ${contextLength - 1} maximum`, e.param, e.context)
}
