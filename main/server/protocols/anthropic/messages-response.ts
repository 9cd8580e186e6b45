/**
 * Anthropic's Message and its stream events, built from Hearth's chat results and progress. Pure:
 * no HTTP here. The stream follows Anthropic's order: message_start, then per content block
 * content_block_start, its deltas and content_block_stop, then message_delta and message_stop.
 * Thinking blocks carry a signature that holds their text, sealed, so a client that sends them
 * back (with the text omitted, or not) gives the model its own thinking again.
 */
import type { ChatResult, JobProgress } from '../../../../engines/engine-jobs.ts'
import type { ReasoningSeal } from '../../services/reasoning-seal.ts'
import type { AppliedEdit } from './context-edits.ts'
import { citationsOf, citedTextBlocks, type CitableDocuments } from './messages-citations.ts'
import type { IncompleteReason, McpCall } from '../../services/pipeline/mcp-tool-loop.ts'

export interface MessageIdentity {
  id: string
  model: string
}

/** How the answer is written, beyond the result itself. */
export interface MessageShape {
  seal: ReasoningSeal
  /** `thinking.display: "omitted"`: thinking blocks come without their text (the signature keeps it). */
  omitThinking: boolean
  /** Present when the request asked for context editing: what was applied. */
  appliedEdits: AppliedEdit[] | undefined
  /** The documents the answer read, where it may cite them. */
  documents?: CitableDocuments | undefined
  /** Whether a function the model calls is a tool of the request's MCP servers (Hearth runs those). */
  isMcp?: (name: string) => boolean
}

type StopReason = 'end_turn' | 'max_tokens' | 'tool_use' | 'model_context_window_exceeded' | 'pause_turn'

/** `stoppedAt`: where Hearth's MCP tool loop stopped the answer (its rounds, or the token budget). */
function stopReasonOf(result: ChatResult, shape: MessageShape, stoppedAt?: IncompleteReason): StopReason {
  if (stoppedAt === 'max_tool_calls') return 'pause_turn'
  if (stoppedAt === 'max_output_tokens') return 'max_tokens'
  if (result.finishReason === 'length') return result.contextFull ? 'model_context_window_exceeded' : 'max_tokens'
  if (clientCalls(result, shape).length > 0) return 'tool_use'
  return 'end_turn'
}

/** The calls the client runs: all but those of the request's MCP servers. */
function clientCalls(result: ChatResult, shape: MessageShape) {
  return result.toolCalls.filter((call) => !shape.isMcp?.(call.function.name))
}

/** One turn of the model as content blocks: its thinking, its text (cited), the client's tool uses. */
export function turnBlocks(result: ChatResult, shape: MessageShape): Array<Record<string, unknown>> {
  const content: Array<Record<string, unknown>> = []
  if (result.reasoning) content.push({ type: 'thinking', thinking: shape.omitThinking ? '' : result.reasoning, signature: shape.seal.seal(result.reasoning) })
  if (result.text) content.push(...citedTextBlocks(result.text, shape.documents))
  for (const call of clientCalls(result, shape))
    content.push({ type: 'tool_use', id: toolUseId(call.id), name: call.function.name, input: parsedInput(call.function.arguments) })
  return content
}

/** A call Hearth ran on an MCP server, as Anthropic's MCP connector writes it: its use, and once done its result. */
export function mcpUseBlock(call: McpCall, id: string) {
  return { type: 'mcp_tool_use' as const, id, name: call.name, server_name: call.serverLabel, input: parsedInput(call.arguments) }
}

export function mcpResultBlock(call: McpCall, id: string) {
  const text = call.status === 'completed' ? (call.output ?? '') : (call.error ?? '')
  return { type: 'mcp_tool_result' as const, tool_use_id: id, is_error: call.status !== 'completed', content: [{ type: 'text' as const, text }] }
}

/** Tool use ids as Anthropic writes them; the same call keeps the same id across a stream. */
export function toolUseId(callId: string): string {
  return callId.startsWith('call_') ? `toolu_${callId.slice(5)}` : callId
}

function parsedInput(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text)
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
  } catch {
    return {} // cut off by max_tokens: the stop reason says so
  }
}

/** Anthropic counts cache reads apart from the rest of the input. */
function inputUsage(promptTokens: number, cachedTokens: number) {
  return { input_tokens: promptTokens - cachedTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: cachedTokens }
}

function usageOf(result: ChatResult) {
  return { ...inputUsage(result.promptTokens, result.cachedTokens ?? 0), output_tokens: result.completionTokens }
}

function contextManagement(shape: MessageShape) {
  return shape.appliedEdits ? { context_management: { applied_edits: shape.appliedEdits } } : {}
}

/**
 * The Message: one turn's blocks, or (`answer`) every block an answer made over the MCP tool
 * loop's turns, and where the loop stopped it.
 */
export function anthropicMessage(
  who: MessageIdentity,
  result: ChatResult,
  shape: MessageShape,
  answer?: { content: Array<Record<string, unknown>>; stoppedAt?: IncompleteReason | undefined },
) {
  const content = answer?.content ?? turnBlocks(result, shape)
  return {
    id: who.id,
    type: 'message' as const,
    role: 'assistant' as const,
    model: who.model,
    content,
    stop_reason: stopReasonOf(result, shape, answer?.stoppedAt),
    stop_sequence: null,
    usage: usageOf(result),
    ...contextManagement(shape),
  }
}

type StreamEvent = { event: string; data: Record<string, unknown> }

/**
 * Turns Hearth's progress into Anthropic's events: a new block starts whenever the kind of output
 * changes (thinking, text, a tool call), and the open block stops first. The message starts with
 * the prompt's usage when the engine reports it before the first token.
 */
export class MessageStreamWriter {
  private index = -1
  private open: { kind: 'thinking' | 'text' | 'tool'; toolIndex?: number } | undefined
  private thinking = ''
  /** The open text block's text, for its citations when it closes. */
  private text = ''
  /** The calls of this turn to MCP servers' tools, by their index in the turn. */
  private readonly mcpCalls = new Set<number>()
  private started = false

  constructor(
    private readonly who: MessageIdentity,
    private readonly shape: MessageShape,
  ) {}

  /** message_start, once: with the prompt's usage when known. */
  private messageStart(prompt?: { promptTokens: number; cachedTokens: number }): StreamEvent[] {
    if (this.started) return []
    this.started = true
    const usage = prompt ? inputUsage(prompt.promptTokens, prompt.cachedTokens) : inputUsage(0, 0)
    return [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {
            id: this.who.id,
            type: 'message',
            role: 'assistant',
            model: this.who.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { ...usage, output_tokens: 0 },
          },
        },
      },
    ]
  }

  progress(p: JobProgress): StreamEvent[] {
    if (p.type === 'prompt') return this.messageStart(p)
    const events = this.messageStart()
    switch (p.type) {
      case 'reasoning':
        events.push(...this.switchTo('thinking', { type: 'thinking', thinking: '', signature: '' }))
        this.thinking += p.text
        if (!this.shape.omitThinking) events.push(this.delta({ type: 'thinking_delta', thinking: p.text }))
        return events
      case 'text':
        events.push(...this.switchTo('text', { type: 'text', text: '' }))
        this.text += p.text
        return [...events, this.delta({ type: 'text_delta', text: p.text })]
      case 'tool_call': {
        // A call to an MCP server's tool is run here: it comes as an mcp_tool_use block once it runs.
        if (p.name !== undefined && this.shape.isMcp?.(p.name)) this.mcpCalls.add(p.index)
        if (this.mcpCalls.has(p.index)) return events
        if (p.id !== undefined || this.open?.kind !== 'tool' || this.open.toolIndex !== p.index) {
          events.push(...this.stopOpen())
          this.index++
          this.open = { kind: 'tool', toolIndex: p.index }
          events.push({
            event: 'content_block_start',
            data: {
              type: 'content_block_start',
              index: this.index,
              content_block: { type: 'tool_use', id: toolUseId(p.id ?? ''), name: p.name ?? '', input: {} },
            },
          })
        }
        if (p.arguments) events.push(this.delta({ type: 'input_json_delta', partial_json: p.arguments }))
        return events
      }
      default:
        return events
    }
  }

  /** A turn of the MCP tool loop is over: the next one's calls count from 0 again. */
  endTurn(): StreamEvent[] {
    this.mcpCalls.clear()
    return this.stopOpen()
  }

  /** An MCP call as it starts (`mcp_tool_use`, whole), and its result once it ends (`mcp_tool_result`). */
  mcpCall(block: ReturnType<typeof mcpUseBlock> | ReturnType<typeof mcpResultBlock>): StreamEvent[] {
    const events = [...this.messageStart(), ...this.stopOpen()]
    this.index++
    events.push({ event: 'content_block_start', data: { type: 'content_block_start', index: this.index, content_block: block } })
    events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.index } })
    return events
  }

  finish(result: ChatResult, stoppedAt?: IncompleteReason): StreamEvent[] {
    return [
      ...this.messageStart(),
      ...this.stopOpen(),
      {
        event: 'message_delta',
        data: {
          type: 'message_delta',
          delta: { stop_reason: stopReasonOf(result, this.shape, stoppedAt), stop_sequence: null },
          usage: usageOf(result),
          ...contextManagement(this.shape),
        },
      },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ]
  }

  private switchTo(kind: 'thinking' | 'text', block: Record<string, unknown>): StreamEvent[] {
    if (this.open?.kind === kind) return []
    const events = this.stopOpen()
    this.index++
    this.open = { kind }
    events.push({ event: 'content_block_start', data: { type: 'content_block_start', index: this.index, content_block: block } })
    return events
  }

  private stopOpen(): StreamEvent[] {
    if (!this.open) return []
    const events: StreamEvent[] = []
    if (this.open.kind === 'thinking') {
      // The signature closes a thinking block, as Anthropic sends it.
      events.push(this.delta({ type: 'signature_delta', signature: this.shape.seal.seal(this.thinking) }))
      this.thinking = ''
    }
    if (this.open.kind === 'text') {
      // A stream cannot cut its text at each cited sentence: the block's citations close it.
      if (this.shape.documents)
        for (const { citation } of citationsOf(this.text, this.shape.documents)) events.push(this.delta({ type: 'citations_delta', citation }))
      this.text = ''
    }
    this.open = undefined
    events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.index } })
    return events
  }

  private delta(delta: Record<string, unknown>): StreamEvent {
    return { event: 'content_block_delta', data: { type: 'content_block_delta', index: this.index, delta } }
  }
}
