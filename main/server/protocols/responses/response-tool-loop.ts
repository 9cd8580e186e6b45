/**
 * The Responses API's side of the MCP tool loop (services/pipeline/mcp-tool-loop.ts): its items as
 * the loop's steps (`mcp_call`, `mcp_approval_request`), collected for one JSON answer or streamed
 * as events, and its conversation as it goes on, turn by turn.
 */
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatResult, JobProgress } from '../../../../engines/engine-jobs.ts'
import type { DocumentInputs } from '../../services/documents/document-inputs.ts'
import { planChat, type ChatPlan, type ChatRequest } from '../../services/chat/chat-request.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'
import type { McpServerTools } from '../../services/mcp/mcp-tools.ts'
import type { ToolLoopConversation, ToolLoopSink } from '../../services/pipeline/mcp-tool-loop.ts'
import {
  mcpApprovalRequestItem,
  mcpCallItem,
  outputItemsOf,
  type McpCallOutput,
  type OutputItem,
  type ResponseShape,
  type ResponseStreamWriter,
  type WholeItem,
} from './response-object.ts'
import { continuedChat, inputItemsOf, toChatRequest, type ConvertedResponse, type InputItem, type ResponsesRequest } from './responses-request.ts'

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

/**
 * The Responses codec's side of the loop: its items as the loop's steps, and its conversation,
 * converted once with the MCP servers' tools and then added to, item by item.
 */
export function responseLoopSink(items: ItemSink): ToolLoopSink {
  let running: McpCallOutput | undefined
  return {
    ...(items.onProgress ? { onProgress: items.onProgress } : {}),
    turnEnded: (result, last) => items.turnEnded(result, last),
    approvalRequested: (label, name, args) => items.whole(mcpApprovalRequestItem(label, name, args)),
    callStarted: (call) => {
      running = mcpCallItem(call.serverLabel, call.name, call.arguments, call.approvalRequestId)
      items.callStarted(running)
    },
    callEnded: (call) => {
      Object.assign(running!, {
        status: call.status,
        ...(call.output !== undefined ? { output: call.output } : {}),
        ...(call.error !== undefined ? { error: call.error } : {}),
      })
      items.callEnded(running!)
    },
    notRun: (call) => items.whole({ ...mcpCallItem(call.serverLabel, call.name, call.arguments), status: 'incomplete', error: call.error ?? null }),
  }
}

export interface ResponseConversationOptions {
  request: ResponsesRequest
  earlier: readonly InputItem[]
  shape: ResponseShape
  model: ModelRecord
  conversationKey: string | undefined
  /** The first turn's plan, made while checking the request; undefined where MCP servers' tools join it (planned here). */
  firstPlan: ChatPlan | undefined
  /** The documents read for the first turn, given the same way every turn. */
  documents: DocumentInputs
  /** The conversation's picture, normalised once for all its turns (planChat's cache). */
  images: Map<string, Buffer>
  servers: readonly McpServerTools[]
  /** The output items so far (the sink's). */
  produced: () => OutputItem[]
}

/**
 * The next turn's job: the conversation with the items this answer has made so far. It is
 * converted once, with the MCP servers' tools; each later turn appends the items made since, so
 * an earlier turn's messages are never written again, and read as a later request's would.
 */
export class ResponseConversation implements ToolLoopConversation {
  /** This answer's conversation, once a turn needed more than the route's first plan; and how many of its items it holds. */
  private conversation: ConvertedResponse | undefined
  private added = 0
  private planned = false

  constructor(private readonly o: ResponseConversationOptions) {}

  async plan(rounds: number): Promise<ChatPlan> {
    if (!this.planned && this.o.firstPlan) {
      this.planned = true
      return this.o.firstPlan
    }
    this.planned = true
    const { earlier, shape, servers } = this.o
    const produced = this.o.produced()
    // Once tools have answered, a choice that forces a call would force one every turn until the limit.
    const request = rounds > 0 ? withFreeChoice(this.o.request) : this.o.request
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
}

/** Whether the conversation already has this server's tool list (OpenAI lists a server's tools once). */
export function listedBefore(request: ResponsesRequest, earlier: readonly InputItem[], label: string): boolean {
  const input = typeof request.input === 'string' ? [] : request.input
  return [...earlier, ...input].some((item) => 'type' in item && item.type === 'mcp_list_tools' && (item as { server_label: string }).server_label === label)
}

/** The request with `tool_choice` letting the model answer without a call (an allowed-tools list still applies). */
function withFreeChoice(request: ResponsesRequest): ResponsesRequest {
  const choice = request.tool_choice
  if (choice == null || choice === 'none' || choice === 'auto') return request
  if (typeof choice === 'object' && choice.type === 'allowed_tools') return { ...request, tool_choice: { ...choice, mode: 'auto' } }
  return { ...request, tool_choice: 'auto' }
}
