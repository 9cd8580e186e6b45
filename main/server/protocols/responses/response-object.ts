/**
 * OpenAI's Response object and its stream events, built from Hearth's chat results and progress.
 * Pure: no HTTP here. Streamed output items open in the order they come (reasoning, a message, each
 * function call, the MCP items of the server-side tool loop), and each closes before the next opens.
 */
import { randomBytes } from 'node:crypto'
import type { ChatResult, JobProgress, TokenLogprob } from '../../../../engines/engine-jobs.ts'
import { citationsIn, type FileCitation } from '../../services/documents/document-citations.ts'
import type { DocumentSource } from '../../services/documents/document-inputs.ts'
import type { ReasoningSeal } from '../../services/reasoning-seal.ts'
import type { McpCallItem } from '../../wire-types.ts'
import { customInput, type CustomCallOutput, type FunctionCallOutput, type ResponseTools } from './response-tools.ts'
import type { McpServerTools } from '../../services/mcp/mcp-tools.ts'
import type { ResponsesRequest } from './responses-request.ts'

const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`

export interface ResponseIdentity {
  id: string
  createdAt: number
  model: string
}

/** How the answer's items are written, beyond the result itself. */
export interface ResponseShape {
  tools: ResponseTools
  seal: ReasoningSeal
  /** `include: ["reasoning.encrypted_content"]`: reasoning items carry their thinking sealed. */
  encryptedReasoning: boolean
  /** The documents' numbered texts the model was given: its `[n]` become file citations. */
  sources?: readonly DocumentSource[]
}

type OutputText = { type: 'output_text'; text: string; annotations: FileCitation[]; logprobs: TokenLogprob[] }

type ReasoningItem = {
  type: 'reasoning'
  id: string
  summary: []
  content: Array<{ type: 'reasoning_text'; text: string }>
  encrypted_content?: string
}

export type OutputItem =
  | ReasoningItem
  | {
      type: 'message'
      id: string
      status: 'completed' | 'in_progress'
      role: 'assistant'
      content: OutputText[]
    }
  | FunctionCallOutput
  | CustomCallOutput
  | McpListToolsOutput
  | McpApprovalRequestOutput
  | McpCallOutput
  | FileSearchCallOutput

/**
 * The documents' texts the model was given (whole, or retrieved for `queries`), as OpenAI's file
 * search reports what it found; sent where the request includes `file_search_call.results`.
 */
export interface FileSearchCallOutput {
  type: 'file_search_call'
  id: string
  status: 'completed'
  queries: string[]
  results: Array<{ file_id: string; filename: string; text: string; score: number | null; attributes: { citation: number } }>
}

export function fileSearchCallItem(sources: readonly DocumentSource[], query: string | undefined): FileSearchCallOutput {
  return {
    type: 'file_search_call',
    id: newId('fs'),
    status: 'completed',
    queries: query === undefined ? [] : [query],
    results: sources.map((s) => ({ file_id: s.fileId, filename: s.filename, text: s.text, score: s.score ?? null, attributes: { citation: s.citation } })),
  }
}

export interface McpListToolsOutput {
  type: 'mcp_list_tools'
  id: string
  server_label: string
  tools: Array<{ name: string; description: string | null; input_schema: Record<string, unknown>; annotations: { read_only: boolean } | null }>
}

export interface McpApprovalRequestOutput {
  type: 'mcp_approval_request'
  id: string
  server_label: string
  name: string
  arguments: string
}

export type McpCallOutput = McpCallItem

export function mcpListToolsItem(server: McpServerTools): McpListToolsOutput {
  return {
    type: 'mcp_list_tools',
    id: newId('mcpl'),
    server_label: server.request.serverLabel,
    tools: server.tools.map((t) => ({
      name: t.name,
      description: t.description ?? null,
      input_schema: t.inputSchema,
      annotations: t.readOnly === undefined ? null : { read_only: t.readOnly },
    })),
  }
}

export function mcpApprovalRequestItem(serverLabel: string, name: string, args: string): McpApprovalRequestOutput {
  return { type: 'mcp_approval_request', id: newId('mcpr'), server_label: serverLabel, name, arguments: args }
}

/** A call about to run (`in_progress`); the loop fills in its output or error. */
export function mcpCallItem(serverLabel: string, name: string, args: string, approvalRequestId: string | null = null): McpCallOutput {
  return {
    type: 'mcp_call',
    id: newId('mcp'),
    server_label: serverLabel,
    name,
    arguments: args,
    output: null,
    error: null,
    approval_request_id: approvalRequestId,
    status: 'in_progress',
  }
}

function reasoningItem(text: string, shape: ResponseShape): ReasoningItem {
  return {
    type: 'reasoning',
    id: newId('rs'),
    summary: [],
    content: [{ type: 'reasoning_text', text }],
    ...(shape.encryptedReasoning ? { encrypted_content: shape.seal.seal(text) } : {}),
  }
}

export function outputItemsOf(result: ChatResult, shape: ResponseShape): OutputItem[] {
  const items: OutputItem[] = []
  if (result.reasoning) items.push(reasoningItem(result.reasoning, shape))
  if (result.text || result.toolCalls.length === 0) {
    items.push({
      type: 'message',
      id: newId('msg'),
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: result.text, annotations: citationsIn(result.text, shape.sources), logprobs: result.logprobs ?? [] }],
    })
  }
  // MCP calls become their items when the loop runs them or asks for approval (mcp-tool-loop.ts).
  for (const call of result.toolCalls) {
    if (!shape.tools.mcpTarget(call.function.name)) items.push(shape.tools.outputItem(call, newId(shape.tools.isCustom(call.function.name) ? 'ctc' : 'fc')))
  }
  return items
}

function usageOf(result: ChatResult) {
  return {
    input_tokens: result.promptTokens,
    input_tokens_details: { cached_tokens: result.cachedTokens ?? 0 },
    output_tokens: result.completionTokens,
    output_tokens_details: { reasoning_tokens: result.reasoningTokens },
    total_tokens: result.promptTokens + result.completionTokens,
  }
}

/** Why a response stopped short: the model's token limit, or the calls a response may run. */
export type IncompleteReason = 'max_output_tokens' | 'max_tool_calls'

export interface ResponseOutcome {
  /** The model's last turn, with the tokens of all its turns added up. */
  result: ChatResult
  output: OutputItem[]
  stoppedAt?: IncompleteReason
}

/** The Response: `status` says whether it is done, and `output` holds what the model made. */
export function responseObject(who: ResponseIdentity, request: ResponsesRequest, outcome: ResponseOutcome | undefined) {
  const incomplete = outcome?.stoppedAt ?? (outcome?.result.finishReason === 'length' ? 'max_output_tokens' : undefined)
  const textFormat = request.text?.format ?? { type: 'text' }
  return {
    id: who.id,
    object: 'response' as const,
    created_at: who.createdAt,
    status: outcome ? (incomplete ? 'incomplete' : 'completed') : 'in_progress',
    error: null,
    incomplete_details: incomplete ? { reason: incomplete } : null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    max_tool_calls: request.max_tool_calls ?? null,
    model: who.model,
    output: outcome?.output ?? [],
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: request.reasoning?.effort ?? null, summary: null },
    store: request.store ?? true,
    temperature: request.temperature ?? 0,
    text: { format: textFormat },
    tool_choice: request.tool_choice ?? 'auto',
    tools: request.tools ?? [],
    top_p: request.top_p ?? 0.9,
    truncation: request.truncation ?? 'disabled',
    usage: outcome ? usageOf(outcome.result) : null,
    user: request.user ?? null,
    metadata: request.metadata ?? {},
  }
}

type StreamEvent = { type: string; [key: string]: unknown }

/** Items that are whole when made. */
export type WholeItem = McpListToolsOutput | McpApprovalRequestOutput | McpCallOutput | FileSearchCallOutput

/** Hearth's progress as Responses stream events, numbered in order. */
export class ResponseStreamWriter {
  private sequence = 0
  private items: OutputItem[] = []
  private open: OutputItem | undefined
  private openToolIndex = -1
  /** A custom tool's call streams as function arguments; its `input` is read from them at the end. */
  private customArguments = ''
  /** This turn's calls to MCP tools (by index): they stream once they run or wait for approval. */
  private readonly mcpCalls = new Set<number>()
  /** Whether the model's current turn has written an item. */
  private wroteThisTurn = false

  constructor(
    private readonly who: ResponseIdentity,
    private readonly request: ResponsesRequest,
    private readonly shape: ResponseShape,
  ) {}

  start(): StreamEvent[] {
    const response = responseObject(this.who, this.request, undefined)
    return [this.event({ type: 'response.created', response }), this.event({ type: 'response.in_progress', response })]
  }

  progress(p: JobProgress): StreamEvent[] {
    switch (p.type) {
      case 'reasoning': {
        const events = this.openItem('reasoning')
        const item = this.open as ReasoningItem
        item.content[0]!.text += p.text
        events.push(this.event({ type: 'response.reasoning_text.delta', item_id: item.id, output_index: this.index, content_index: 0, delta: p.text }))
        return events
      }
      case 'text': {
        const events = this.openItem('message')
        const item = this.open as Extract<OutputItem, { type: 'message' }>
        item.content[0]!.text += p.text
        if (p.logprobs) item.content[0]!.logprobs.push(...p.logprobs)
        events.push(
          this.event({
            type: 'response.output_text.delta',
            item_id: item.id,
            output_index: this.index,
            content_index: 0,
            delta: p.text,
            logprobs: p.logprobs ?? [],
          }),
        )
        return events
      }
      case 'tool_call': {
        if (p.name !== undefined && this.shape.tools.mcpTarget(p.name)) this.mcpCalls.add(p.index)
        if (this.mcpCalls.has(p.index)) return []
        this.wroteThisTurn = true
        const events: StreamEvent[] = []
        const isCall = this.open?.type === 'function_call' || this.open?.type === 'custom_tool_call'
        if (!isCall || this.openToolIndex !== p.index) {
          events.push(...this.closeOpen())
          const name = p.name ?? ''
          const id = newId(this.shape.tools.isCustom(name) ? 'ctc' : 'fc')
          const item = this.shape.tools.outputItem({ id: p.id ?? '', type: 'function', function: { name, arguments: '' } }, id, 'in_progress')
          this.open = item
          this.openToolIndex = p.index
          this.customArguments = ''
          this.items.push(item)
          events.push(this.event({ type: 'response.output_item.added', output_index: this.index, item: { ...item } }))
        }
        const item = this.open as FunctionCallOutput | CustomCallOutput
        if (p.arguments && item.type === 'custom_tool_call') this.customArguments += p.arguments
        else if (p.arguments && item.type === 'function_call') {
          item.arguments += p.arguments
          events.push(this.event({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index: this.index, delta: p.arguments }))
        }
        return events
      }
      default:
        return []
    }
  }

  /** The model's turn is over (its MCP calls run next): closes what is open. */
  endTurn(): StreamEvent[] {
    this.mcpCalls.clear()
    this.wroteThisTurn = false
    return this.closeOpen()
  }

  /** An item that is whole when it comes: a tool list, an approval request, the documents read. */
  whole(item: WholeItem): StreamEvent[] {
    const events = this.added(item)
    const at = { item_id: item.id, output_index: this.index }
    if (item.type === 'mcp_list_tools') {
      events.push(this.event({ type: 'response.mcp_list_tools.in_progress', ...at }), this.event({ type: 'response.mcp_list_tools.completed', ...at }))
    }
    if (item.type === 'file_search_call') {
      for (const step of ['in_progress', 'searching', 'completed']) events.push(this.event({ type: `response.file_search_call.${step}`, ...at }))
    }
    events.push(this.event({ type: 'response.output_item.done', output_index: this.index, item: structuredClone(item) }))
    return events
  }

  /** An MCP call about to run: its item and arguments (whole: they were complete before it could run). */
  callStarted(item: McpCallOutput): StreamEvent[] {
    const events = this.added(item)
    const at = { item_id: item.id, output_index: this.index }
    events.push(this.event({ type: 'response.mcp_call.in_progress', ...at }))
    events.push(this.event({ type: 'response.mcp_call_arguments.delta', ...at, delta: item.arguments }))
    events.push(this.event({ type: 'response.mcp_call_arguments.done', ...at, arguments: item.arguments }))
    return events
  }

  /** The call has run (or failed): its outcome, and the item closed. */
  callEnded(item: McpCallOutput): StreamEvent[] {
    const at = { item_id: item.id, output_index: this.index }
    return [
      this.event({ type: item.status === 'completed' ? 'response.mcp_call.completed' : 'response.mcp_call.failed', ...at }),
      this.event({ type: 'response.output_item.done', output_index: this.index, item: structuredClone(item) }),
    ]
  }

  /** Closes what is open and sends the finished Response; the items are the ones the client saw. */
  finish(result: ChatResult, stoppedAt?: IncompleteReason): { events: StreamEvent[]; output: OutputItem[] } {
    const wrote = this.wroteThisTurn
    const events = this.endTurn()
    // An answer with nothing in it is still one (empty) message, as the non-streamed Response has.
    if (!wrote && (result.toolCalls.length === 0 || this.items.length === 0)) {
      events.push(...this.openItem('message'), ...this.closeOpen())
    }
    const response = responseObject(this.who, this.request, { result, output: this.items, stoppedAt })
    events.push(this.event({ type: response.status === 'completed' ? 'response.completed' : 'response.incomplete', response }))
    return { events, output: this.items }
  }

  private added(item: OutputItem): StreamEvent[] {
    const events = this.closeOpen()
    this.items.push(item)
    events.push(this.event({ type: 'response.output_item.added', output_index: this.index, item: structuredClone(item) }))
    return events
  }

  /** The items so far, as the client saw them. */
  get output(): OutputItem[] {
    return this.items
  }

  private get index(): number {
    return this.items.length - 1
  }

  private openItem(kind: 'reasoning' | 'message'): StreamEvent[] {
    this.wroteThisTurn = true
    if (this.open?.type === kind) return []
    const events = this.closeOpen()
    const item: OutputItem =
      kind === 'reasoning'
        ? { type: 'reasoning', id: newId('rs'), summary: [], content: [{ type: 'reasoning_text', text: '' }] }
        : { type: 'message', id: newId('msg'), status: 'in_progress', role: 'assistant', content: [] }
    this.open = item
    this.items.push(item)
    events.push(this.event({ type: 'response.output_item.added', output_index: this.index, item: structuredClone(item) }))
    if (item.type === 'message') {
      const part: OutputText = { type: 'output_text', text: '', annotations: [], logprobs: [] }
      item.content.push(part)
      events.push(this.event({ type: 'response.content_part.added', item_id: item.id, output_index: this.index, content_index: 0, part: { ...part } }))
    }
    return events
  }

  private closeOpen(): StreamEvent[] {
    const item = this.open
    if (!item) return []
    this.open = undefined
    const events: StreamEvent[] = []
    const at = { item_id: item.id, output_index: this.index }
    switch (item.type) {
      case 'message': {
        item.status = 'completed'
        const part = item.content[0]!
        part.annotations = citationsIn(part.text, this.shape.sources)
        part.annotations.forEach((annotation, n) =>
          events.push(this.event({ type: 'response.output_text.annotation.added', ...at, content_index: 0, annotation_index: n, annotation })),
        )
        events.push(this.event({ type: 'response.output_text.done', ...at, content_index: 0, text: part.text, logprobs: part.logprobs }))
        events.push(this.event({ type: 'response.content_part.done', ...at, content_index: 0, part: { ...part } }))
        break
      }
      case 'reasoning': {
        const text = item.content[0]!.text
        if (this.shape.encryptedReasoning) item.encrypted_content = this.shape.seal.seal(text)
        events.push(this.event({ type: 'response.reasoning_text.done', ...at, content_index: 0, text }))
        break
      }
      case 'custom_tool_call':
        item.status = 'completed'
        item.input = customInput(this.customArguments)
        events.push(this.event({ type: 'response.custom_tool_call_input.delta', ...at, delta: item.input }))
        events.push(this.event({ type: 'response.custom_tool_call_input.done', ...at, input: item.input }))
        break
      case 'function_call':
        item.status = 'completed'
        events.push(this.event({ type: 'response.function_call_arguments.done', ...at, name: item.name, arguments: item.arguments }))
        break
      default:
        break // MCP items are closed where they are made
    }
    events.push(this.event({ type: 'response.output_item.done', output_index: this.index, item: structuredClone(item) }))
    return events
  }

  private event(e: StreamEvent): StreamEvent {
    return { ...e, sequence_number: this.sequence++ }
  }
}
