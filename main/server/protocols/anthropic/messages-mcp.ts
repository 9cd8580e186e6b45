/**
 * Anthropic's MCP connector (`mcp_servers`) on Hearth: the servers named must be ones the user
 * configured, and Hearth runs their tools between the model's turns through the answer pipeline's
 * MCP tool loop, as Anthropic runs them: no approval step, each call an `mcp_tool_use` block and its
 * answer an `mcp_tool_result` block, in the answer whole or streamed.
 */
import { randomBytes } from 'node:crypto'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatResult } from '../../../../engines/engine-jobs.ts'
import { unsupportedParameter } from '../../services/api-error.ts'
import { planChat, type ChatPlan } from '../../services/chat/chat-request.ts'
import type { DocumentInputs } from '../../services/documents/document-inputs.ts'
import type { McpHub } from '../../services/mcp/mcp-hub.ts'
import type { McpFunctions, McpToolRequest } from '../../services/mcp/mcp-tools.ts'
import type { McpCall, ToolLoopConversation, ToolLoopSink } from '../../services/pipeline/mcp-tool-loop.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'
import type { ReasoningSeal } from '../../services/reasoning-seal.ts'
import { toChatRequest } from './messages-conversion.ts'
import type { ContentBlock, MessagesRequest } from './messages-request.ts'
import { mcpResultBlock, mcpUseBlock, turnBlocks, type MessageShape, type MessageStreamWriter } from './messages-response.ts'

type StreamEvent = ReturnType<MessageStreamWriter['finish']>[number]

/** The servers `mcp_servers` names, as the MCP service checks and connects them; a server turned off (`enabled: false`) is left out. */
export function mcpServerRequests(request: MessagesRequest, hub: McpHub | undefined, notices: Notices): McpToolRequest[] {
  return (request.mcp_servers ?? []).flatMap((server, i): McpToolRequest[] => {
    const at = `mcp_servers[${i}]`
    if (server.authorization_token)
      throw unsupportedParameter(
        `${at}.authorization_token`,
        "credentials come from the user's MCP settings (the server's 'headers' or 'env' in mcp.json), not from the request",
      )
    if (server.tool_configuration?.enabled === false) return []
    // Anthropic's servers are all URLs; a server the user runs as a program here has none to check it against.
    const program = hub?.configured(server.name)?.transport === 'stdio'
    if (program) notices.add(`${at}.url was set aside: the MCP server '${server.name}' is a program on this computer, run as the user configured it`)
    const allowed = server.tool_configuration?.allowed_tools
    return [
      {
        at,
        fields: { label: 'name', url: 'url', allowedTools: 'tool_configuration.allowed_tools' },
        serverLabel: server.name,
        serverUrl: program ? undefined : server.url,
        description: undefined,
        allowedTools: allowed ?? undefined,
        // Anthropic runs its connector's tools without asking: the request named the server.
        requireApproval: 'never',
      },
    ]
  })
}

export interface MessagesConversationOptions {
  request: MessagesRequest
  seal: ReasoningSeal
  mcp: McpFunctions
  model: ModelRecord
  conversationKey: string | undefined
  /** The first turn's plan, made with the documents read. */
  firstPlan: ChatPlan
  documents: DocumentInputs
  /** The blocks this answer has made so far (the sink's). */
  produced: () => ContentBlock[]
}

/** The next turn: the request's conversation with this answer's blocks so far as the assistant's turn, converted as a later request's would be. */
export class MessagesConversation implements ToolLoopConversation {
  private first = true

  constructor(private readonly o: MessagesConversationOptions) {}

  async plan(): Promise<ChatPlan> {
    if (this.first) {
      this.first = false
      return this.o.firstPlan
    }
    // Notices were told with the route's conversion; these would repeat them.
    const { chat } = toChatRequest(this.o.request, this.o.seal, new Notices(), { mcp: this.o.mcp, produced: this.o.produced() })
    return planChat(this.o.documents.apply(chat), this.o.model, this.o.conversationKey)
  }
}

/** Where the loop's steps go: Anthropic's content blocks, kept for the whole answer and the next turn, and sent as events where the answer streams. */
export class MessagesLoopSink implements ToolLoopSink {
  readonly content: Array<Record<string, unknown>> = []
  private runningId = ''

  constructor(
    private readonly shape: MessageShape,
    private readonly stream?: { writer: MessageStreamWriter; send: (events: StreamEvent[]) => void },
  ) {}

  get onProgress() {
    const stream = this.stream
    return stream ? (p: Parameters<MessageStreamWriter['progress']>[0]) => stream.send(stream.writer.progress(p)) : undefined
  }

  turnEnded(result: ChatResult, last: boolean): void {
    this.content.push(...turnBlocks(result, this.shape))
    if (!last && this.stream) this.stream.send(this.stream.writer.endTurn())
  }

  approvalRequested(): void {
    // Every server here runs without approval (mcpServerRequests).
  }

  callStarted(call: McpCall): void {
    this.runningId = `mcptoolu_${randomBytes(12).toString('base64url')}`
    this.add(mcpUseBlock(call, this.runningId))
  }

  callEnded(call: McpCall): void {
    this.add(mcpResultBlock(call, this.runningId))
  }

  notRun(call: McpCall): void {
    this.callStarted(call)
    this.callEnded(call)
  }

  /** The blocks so far, as the request's blocks the conversation goes on from. */
  blocks(): ContentBlock[] {
    return this.content as ContentBlock[]
  }

  private add(block: ReturnType<typeof mcpUseBlock> | ReturnType<typeof mcpResultBlock>): void {
    this.content.push(block)
    this.stream?.send(this.stream.writer.mcpCall(block))
  }
}
