/**
 * POST /v1/responses, GET and DELETE /v1/responses/{id}: OpenAI's Responses API on the same models,
 * scheduler and checks as chat completions; `mcp` tools run here, on servers the user configured
 * (responses/mcp-tool-loop.ts). Responses are stored unless `store: false`, for
 * `previous_response_id` and for reading back, each visible only to the key that made it.
 */
import { randomBytes } from 'node:crypto'
import { Router, type Response } from 'express'
import { requestOwner } from '../../services/keys/request-key.ts'
import { conversationKey } from '../../services/pipeline/conversation-key.ts'
import { ApiError, invalidRequest } from '../../services/api-error.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { planChat } from '../../services/chat/chat-request.ts'
import { listPage } from '../../http/list-page.ts'
import { Notices, sendNotices } from '../../services/pipeline/request-notices.ts'
import { collectingSink, listedBefore, ResponseConversation, responseLoopSink, streamingSink, type ItemSink } from './response-tool-loop.ts'
import { McpToolLoop } from '../../services/pipeline/mcp-tool-loop.ts'
import { approvedCallsOn } from './response-mcp-servers.ts'
import { connectMcpServers } from '../../services/mcp/mcp-tools.ts'
import {
  fileSearchCallItem,
  mcpListToolsItem,
  responseObject,
  ResponseStreamWriter,
  type WholeItem,
  type OutputItem,
  type ResponseIdentity,
  type ResponseShape,
} from './response-object.ts'
import {
  approvedCalls,
  includesEncryptedReasoning,
  includesFileResults,
  inputItemsOf,
  parseResponsesRequest,
  toChatRequest,
  type InputItem,
} from './responses-request.ts'
import type { ServerContext } from '../../server-context.ts'
import { SseStream } from '../../http/sse.ts'

export function responsesRoute(ctx: ServerContext): Router {
  const router = Router()
  const store = ctx.responses
  const seal = ctx.seal
  const ownerOf = (res: Response) => requestOwner(res, ctx.keys !== undefined)

  router.post('/responses', requireJsonBody, async (req, res) => {
    const notices = new Notices()
    const request = parseResponsesRequest(req.body, notices)
    const owner = ownerOf(res)
    const earlier = request.previous_response_id ? await store.load(request.previous_response_id, owner) : undefined
    if (request.previous_response_id && !earlier) {
      throw invalidRequest(`Previous response with id '${request.previous_response_id}' not found`, 'previous_response_id', 'previous_response_not_found')
    }
    const earlierItems = earlier?.items ?? []
    // Checked whole before any MCP server is reached; with MCP servers the loop converts once more, with their tools, and appends each round.
    const { chat, tools, params } = toChatRequest(request, earlierItems, seal, notices)
    const model = await requireModel(ctx.folder, chat.model)
    const key = conversationKey(req, request)
    const approvals = approvedCalls(request, earlierItems)
    await ctx.pipeline.within(
      res,
      async (signal) => {
        const documents = await ctx.pipeline.readDocuments(res, model, chat, { notices, owner, signal })
        const images = new Map<string, Buffer>()
        const servers = await connectMcpServers(tools.mcpRequests, ctx.mcp, { req, res }, notices, signal)
        // With MCP servers the loop plans the first turn itself, once their tools are known.
        const firstPlan = servers.length === 0 ? await planChat(documents.apply(chat), model, key, images) : undefined
        const approved = approvedCallsOn(approvals, servers)
        sendNotices(res, notices)
        const shape: ResponseShape = { tools, seal, encryptedReasoning: includesEncryptedReasoning(request), sources: documents.sources }
        const who: ResponseIdentity = { id: `resp_${randomBytes(12).toString('hex')}`, createdAt: Math.floor(Date.now() / 1000), model: model.id }
        const items: WholeItem[] = includesFileResults(request) && documents.sources.length ? [fileSearchCallItem(documents.sources, documents.query)] : []
        for (const server of servers) if (!listedBefore(request, earlierItems, server.request.serverLabel)) items.push(mcpListToolsItem(server))
        const loop = new McpToolLoop({
          pipeline: ctx.pipeline,
          mcp: ctx.mcp,
          res,
          model,
          signal,
          target: (name) => shape.tools.mcpTarget(name),
          approved: approved.map(({ call, server, tool }) => ({ server, tool, arguments: call.arguments, approvalRequestId: call.id })),
          maxToolCalls: request.max_tool_calls ?? undefined,
          // max_output_tokens bounds the whole response, as OpenAI's does: each turn gets what is left.
          maxOutputTokens: request.max_output_tokens ?? undefined,
        })
        const converse = (sink: ItemSink) => {
          for (const item of items) sink.whole(item)
          const conversation = new ResponseConversation({
            request,
            earlier: earlierItems,
            shape,
            model,
            conversationKey: key,
            firstPlan,
            documents,
            images,
            servers,
            produced: () => sink.items(),
          })
          return loop.run(responseLoopSink(sink), conversation).then((outcome) => ({ ...outcome, output: sink.items() }))
        }
        const keep = async (output: OutputItem[], response: Record<string, unknown>) => {
          if (request.store === false) return
          const fileIds = documents.fileIds.slice(fileParts(earlierItems))
          const input = [
            ...earlierItems,
            ...inputItemsOf(request)
              .map(withoutImages)
              .map((item) => withFileIds(item, fileIds))
              .map(withId),
          ]
          await store.save(who.id, { owner, items: [...input, ...(output as InputItem[])], inputCount: input.length, response })
        }
        if (request.stream !== true) {
          const outcome = await converse(collectingSink(shape))
          const response = responseObject(who, request, outcome)
          await keep(outcome.output, response)
          res.json(response)
          return
        }
        const sse = new SseStream(res)
        const writer = new ResponseStreamWriter(who, request, shape)
        // response.created leaves with the loop's first event (the engine took the prompt, or an MCP
        // server was reached): a request the engine refuses before that (tools on a template without
        // tool calling) is then a plain 400, as on the chat route, not a stream cut after a 200.
        let opening: Array<{ type: string }> | undefined = writer.start()
        const send = (events: Array<{ type: string }>) => {
          opening?.forEach((e) => sse.send(e, e.type))
          opening = undefined
          events.forEach((e) => sse.send(e, e.type))
        }
        const outcome = await converse(streamingSink(writer, send))
        const { events, output } = writer.finish(outcome.result, outcome.stoppedAt)
        await keep(output, (events.at(-1) as unknown as { response: Record<string, unknown> }).response)
        send(events)
        sse.end()
      },
      (e) => params.renamed(e),
    )
  })

  router.get('/responses/:id', async (req, res) => {
    const stored = await store.load(req.params.id, ownerOf(res))
    if (!stored) throw notFound(req.params.id)
    res.json(stored.response)
  })

  // The conversation that led to a stored response (earlier turns included), newest first unless asked.
  router.get('/responses/:id/input_items', async (req, res) => {
    const stored = await store.load(req.params.id, ownerOf(res))
    if (!stored) throw notFound(req.params.id)
    res.json(
      listPage(
        stored.items.slice(0, stored.inputCount ?? stored.items.length),
        req.query,
        { noun: 'input item', anId: 'an item id', defaultLimit: 20, maxLimit: 100 },
        (item) => item,
      ),
    )
  })

  router.delete('/responses/:id', async (req, res) => {
    if (!(await store.delete(req.params.id, ownerOf(res)))) throw notFound(req.params.id)
    res.json({ id: req.params.id, object: 'response', deleted: true })
  })

  return router
}

/** Input items get ids when stored, as OpenAI's list of them has. */
function withId(item: InputItem): InputItem {
  if (item.id) return item
  const type = 'type' in item && item.type ? item.type : 'message'
  const prefix =
    type === 'function_call' ? 'fc' : type === 'function_call_output' ? 'fco' : type === 'reasoning' ? 'rs' : type === 'mcp_approval_response' ? 'mcpa' : 'msg'
  return { ...(prefix === 'msg' ? { type: 'message' as const } : {}), ...item, id: `${prefix}_${randomBytes(12).toString('hex')}` } as InputItem
}

function notFound(id: string): ApiError {
  return new ApiError(404, 'invalid_request_error', 'response_not_found', `Response with id '${id}' not found`, 'response_id')
}

/**
 * An earlier turn's picture is not sent again (one image per request, as on the chat route): a
 * stored conversation keeps the words and notes where a picture was.
 */
/** How many files the items' messages carry: each is one file part of the chat, in order. */
function fileParts(items: readonly InputItem[]): number {
  let n = 0
  for (const item of items) {
    const message = messageOf(item)
    if (message && typeof message.content !== 'string' && message.role !== 'assistant') n += message.content.filter((p) => p.type === 'input_file').length
  }
  return n
}

type MessageItem = Extract<InputItem, { role: string }>

function messageOf(item: InputItem): MessageItem | undefined {
  return 'type' in item && item.type !== 'message' && item.type !== undefined ? undefined : (item as MessageItem)
}

/** Files sent as data kept as the ids they were stored under (`ids` is consumed, in order). */
function withFileIds(item: InputItem, ids: string[]): InputItem {
  const message = messageOf(item)
  if (!message || typeof message.content === 'string' || message.role === 'assistant') return item
  return {
    ...message,
    content: message.content.map((p) =>
      p.type === 'input_file' ? { type: 'input_file' as const, file_id: ids.shift() ?? p.file_id, ...(p.filename != null ? { filename: p.filename } : {}) } : p,
    ),
  }
}

function withoutImages(item: InputItem): InputItem {
  if ('type' in item && item.type !== 'message' && item.type !== undefined) return item
  const message = item as Extract<InputItem, { role: string }>
  if (typeof message.content === 'string') return item
  return { ...message, content: message.content.map((p) => (p.type === 'input_image' ? { type: 'input_text' as const, text: '(a picture)' } : p)) }
}
