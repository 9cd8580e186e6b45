/**
 * One Responses answer, turn by turn: the model answers; calls to MCP tools that need no approval
 * run here (each an `mcp_call` item) and the model goes on with their results; a call that needs
 * approval (an `mcp_approval_request`) or a call to the client's own functions ends the answer.
 * Approvals sent in the input run first. Without `mcp` tools this is the one turn it always was.
 */
import type { Response } from 'express'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatResult, JobProgress, ToolCall } from '../../../../engines/engine-jobs.ts'
import type { DocumentInputs } from '../../services/documents/document-inputs.ts'
import { planChat, type ChatPlan, type ChatRequest } from '../../services/chat/chat-request.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'
import type { ServerContext } from '../../server-context.ts'
import {
  mcpApprovalRequestItem,
  mcpCallItem,
  mcpListToolsItem,
  outputItemsOf,
  type FileSearchCallOutput,
  type IncompleteReason,
  type McpApprovalRequestOutput,
  type McpCallOutput,
  type McpListToolsOutput,
  type OutputItem,
  type ResponseOutcome,
  type ResponseShape,
  type ResponseStreamWriter,
  type WholeItem,
} from './response-object.ts'
import { needsApproval, type ListedMcpTool, type McpServerTools } from './response-mcp-tools.ts'
import type { ApprovedCall } from './response-mcp-servers.ts'
import { continuedChat, inputItemsOf, toChatRequest, type ConvertedResponse, type InputItem, type ResponsesRequest } from './responses-request.ts'

/** Tool rounds (model -> tools -> model) one answer may take; a request's `max_tool_calls` counts calls instead. */
export const MAX_TOOL_ROUNDS = 8

/** Where the items go: collected for one JSON answer, or streamed as they come. */
export interface ItemSink {
  onProgress?: (p: JobProgress) => void
  /** The model's turn is over; `last` when no MCP item follows it. */
  turnEnded(result: ChatResult, last: boolean): void
  /** An item that is whole when made (the documents read, a tool list, an approval request, a call not run). */
  whole(item: WholeItem): void
  callStarted(item: McpCallOutput): void
  callEnded(item: McpCallOutput): void
  items(): OutputItem[]
}

/** The items of a JSON (not streamed) answer. */
export function collectingSink(shape: ResponseShape): ItemSink {
  const items: OutputItem[] = []
  return {
    turnEnded: (result) => void items.push(...outputItemsOf(result, shape)),
    whole: (item) => void items.push(item),
    callStarted: (item) => void items.push(item),
    callEnded: () => {},
    items: () => items,
  }
}

/** The items of a streamed answer, sent as events as they come. */
export function streamingSink(writer: ResponseStreamWriter, send: (events: Array<{ type: string }>) => void): ItemSink {
  return {
    onProgress: (p) => send(writer.progress(p)),
    turnEnded: (_result, last) => {
      if (!last) send(writer.endTurn())
    },
    whole: (item) => send(writer.whole(item)),
    callStarted: (item) => send(writer.callStarted(item)),
    callEnded: (item) => send(writer.callEnded(item)),
    items: () => writer.output,
  }
}

export interface ToolLoopOptions {
  ctx: ServerContext
  res: Response
  request: ResponsesRequest
  earlier: readonly InputItem[]
  shape: ResponseShape
  model: ModelRecord
  conversationKey: string | undefined
  /** The first turn's plan, made while checking the request; undefined where MCP servers' tools join it (the loop plans it). */
  firstPlan: ChatPlan | undefined
  /** The documents read for the first turn, given the same way every turn. */
  documents: DocumentInputs
  /** The conversation's picture, normalised once for all its turns (planChat's cache). */
  images: Map<string, Buffer>
  /** What was read, shown before the answer (`include: ["file_search_call.results"]`). */
  documentsItem: FileSearchCallOutput | undefined
  servers: readonly McpServerTools[]
  approved: readonly ApprovedCall[]
  signal: AbortSignal
}

export class McpToolLoop {
  /** "label/tool" for every call run, for the request log. */
  private readonly runs: string[] = []
  private rounds = 0
  /** This answer's conversation, once a turn needed more than the route's first plan; and how many of its items it holds. */
  private conversation: ConvertedResponse | undefined
  private added = 0

  constructor(private readonly o: ToolLoopOptions) {}

  async run(sink: ItemSink): Promise<ResponseOutcome> {
    const { request, servers } = this.o
    if (this.o.documentsItem) sink.whole(this.o.documentsItem)
    for (const server of servers) if (!this.listedBefore(server.request.serverLabel)) sink.whole(mcpListToolsItem(server))
    if (this.o.approved.length) {
      for (const { call, server, tool } of this.o.approved) await this.runCall(sink, server, tool, call.arguments, call.id)
      this.rounds++
    }
    const limit = request.max_tool_calls ?? undefined
    // max_output_tokens bounds the whole response, as OpenAI's does: each turn gets what is left.
    const budget = request.max_output_tokens ?? undefined
    let total: ChatResult | undefined
    for (let turn = 0; ; turn++) {
      const plan = turn === 0 && this.o.firstPlan ? this.o.firstPlan : await this.plan(sink.items())
      if (budget !== undefined && total) plan.job.maxTokens = Math.min(plan.job.maxTokens ?? Infinity, budget - total.completionTokens)
      const result = await this.o.ctx.pipeline.run(this.o.res, this.o.model, plan.job, this.o.signal, sink.onProgress ? { onProgress: sink.onProgress } : {})
      total = added(total, result)
      const tools = this.o.shape.tools
      // A turn cut at its token limit keeps the calls it finished writing (a cut one is noise).
      const cut = result.finishReason === 'length'
      const mcpCalls = result.toolCalls.filter((c) => tools.mcpTarget(c.function.name) && (!cut || typeof argumentsObject(c.function.arguments) !== 'string'))
      sink.turnEnded(result, mcpCalls.length === 0)
      if (mcpCalls.length === 0) return { result: total, output: sink.items() }

      let stoppedAt: IncompleteReason | undefined
      let waits = result.toolCalls.length > mcpCalls.length // the client's own functions
      let ran = false
      for (const call of mcpCalls) {
        const { server, tool } = tools.mcpTarget(call.function.name)!
        const label = server.request.serverLabel
        if (needsApproval(server.request, tool)) {
          sink.whole(mcpApprovalRequestItem(label, tool.name, call.function.arguments))
          waits = true
        } else if (limit === undefined ? this.rounds >= MAX_TOOL_ROUNDS : this.runs.length >= limit) {
          sink.whole(this.notRun(label, tool.name, call, limit))
          stoppedAt = 'max_tool_calls'
        } else {
          await this.runCall(sink, server, tool, call.function.arguments, null)
          ran = true
        }
      }
      if (ran) this.rounds++
      // The model has no tokens left to read the results: they are the client's to see.
      if (cut && !waits) stoppedAt ??= 'max_output_tokens'
      if (!waits && !stoppedAt && budget !== undefined && total.completionTokens >= budget) stoppedAt = 'max_output_tokens'
      if (waits || stoppedAt) return { result: total, output: sink.items(), ...(stoppedAt ? { stoppedAt } : {}) }
    }
  }

  /**
   * The next turn's job: the conversation with the items this answer has made so far. It is
   * converted once, with the MCP servers' tools; each later turn appends the items made since, so
   * an earlier turn's messages are never written again, and read as a later request's would.
   */
  private async plan(produced: OutputItem[]): Promise<ChatPlan> {
    const { earlier, shape, servers } = this.o
    // Once tools have answered, a choice that forces a call would force one every turn until the limit.
    const request = this.rounds > 0 ? withFreeChoice(this.o.request) : this.o.request
    // Notices were told with the route's conversion; these would repeat them.
    let chat: ChatRequest
    if (!this.conversation) {
      this.conversation = toChatRequest(request, earlier, shape.seal, new Notices(), { mcp: servers, produced: produced as InputItem[] })
      // The same tools as before, now with the MCP servers' (what the writer and the items read).
      shape.tools = this.conversation.tools
      chat = this.conversation.chat
    } else {
      const { conversation } = this.conversation
      const inputCount = inputItemsOf(request).length
      for (let n = this.added; n < produced.length; n++) conversation.add(produced[n] as InputItem, `input[${inputCount + n}]`)
      conversation.flush()
      chat = continuedChat(this.conversation, request, new Notices())
    }
    this.added = produced.length
    return planChat(this.o.documents.apply(chat), this.o.model, this.o.conversationKey, this.o.images)
  }

  private async runCall(sink: ItemSink, server: McpServerTools, tool: ListedMcpTool, args: string, approvalRequestId: string | null): Promise<void> {
    const label = server.request.serverLabel
    const item = mcpCallItem(label, tool.name, args, approvalRequestId)
    sink.callStarted(item)
    const parsed = argumentsObject(args)
    if (typeof parsed === 'string') {
      Object.assign(item, { status: 'failed', error: parsed })
      sink.callEnded(item)
      return
    }
    this.runs.push(`${label}/${tool.name}`)
    this.o.res.locals.tool = this.runs.join(',')
    try {
      const result = await this.o.ctx.mcp!.call(label, tool.name, parsed, this.o.signal)
      if (result.isError) Object.assign(item, { status: 'failed', error: result.text || 'the tool reported an error without saying what' })
      else Object.assign(item, { status: 'completed', output: result.text })
    } catch (e) {
      if (this.o.signal.aborted) throw e
      // A tool that fails, hangs past its timeout or takes its server down is the model's to hear about, not the end of the answer.
      Object.assign(item, { status: 'failed', error: e instanceof Error ? e.message : String(e) })
    }
    sink.callEnded(item)
  }

  private notRun(label: string, name: string, call: ToolCall, limit: number | undefined): McpCallOutput {
    const why = limit !== undefined ? `its 'max_tool_calls' (${limit})` : `${MAX_TOOL_ROUNDS} rounds of tool calls`
    return { ...mcpCallItem(label, name, call.function.arguments), status: 'incomplete', error: `Not run: this response reached ${why}` }
  }

  /** Whether the conversation already has this server's tool list (OpenAI lists a server's tools once). */
  private listedBefore(label: string): boolean {
    const input = typeof this.o.request.input === 'string' ? [] : this.o.request.input
    return [...this.o.earlier, ...input].some((item) => 'type' in item && item.type === 'mcp_list_tools' && (item as { server_label: string }).server_label === label)
  }
}

/** The request with `tool_choice` letting the model answer without a call (an allowed-tools list still applies). */
function withFreeChoice(request: ResponsesRequest): ResponsesRequest {
  const choice = request.tool_choice
  if (choice == null || choice === 'none' || choice === 'auto') return request
  if (typeof choice === 'object' && choice.type === 'allowed_tools') return { ...request, tool_choice: { ...choice, mode: 'auto' } }
  return { ...request, tool_choice: 'auto' }
}

/** The arguments the model wrote, as the object a tool takes; a string says why they are not one. */
function argumentsObject(args: string): Record<string, unknown> | string {
  try {
    const value: unknown = JSON.parse(args || '{}')
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {
    // falls through
  }
  return `Not run: the arguments are not a JSON object: ${args.slice(0, 200)}`
}

/** The last turn's result with every turn's tokens added up. */
function added(total: ChatResult | undefined, result: ChatResult): ChatResult {
  if (!total) return result
  return {
    ...result,
    promptTokens: total.promptTokens + result.promptTokens,
    completionTokens: total.completionTokens + result.completionTokens,
    reasoningTokens: total.reasoningTokens + result.reasoningTokens,
    cachedTokens: (total.cachedTokens ?? 0) + (result.cachedTokens ?? 0),
  }
}
