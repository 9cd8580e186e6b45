/**
 * Anthropic's Message and its stream events, built from Hearth's chat results and progress. Pure:
 * no HTTP here. The stream follows Anthropic's order: message_start, then per content block
 * content_block_start, its deltas and content_block_stop, then message_delta and message_stop.
 */
import type { ChatResult, JobProgress } from '../../../native-models/engine/engine-protocol.ts'

export interface MessageIdentity {
  id: string
  model: string
}

type StopReason = 'end_turn' | 'max_tokens' | 'tool_use'

function stopReasonOf(result: ChatResult): StopReason {
  if (result.finishReason === 'length') return 'max_tokens'
  if (result.toolCalls.length > 0) return 'tool_use'
  return 'end_turn'
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

function usageOf(result: ChatResult) {
  return {
    input_tokens: result.promptTokens - (result.cachedTokens ?? 0),
    output_tokens: result.completionTokens,
    cache_read_input_tokens: result.cachedTokens ?? 0,
    cache_creation_input_tokens: 0,
  }
}

export function anthropicMessage(who: MessageIdentity, result: ChatResult) {
  const content: Array<Record<string, unknown>> = []
  if (result.reasoning) content.push({ type: 'thinking', thinking: result.reasoning, signature: '' })
  if (result.text) content.push({ type: 'text', text: result.text })
  for (const call of result.toolCalls) content.push({ type: 'tool_use', id: toolUseId(call.id), name: call.function.name, input: parsedInput(call.function.arguments) })
  return {
    id: who.id,
    type: 'message' as const,
    role: 'assistant' as const,
    model: who.model,
    content,
    stop_reason: stopReasonOf(result),
    stop_sequence: null,
    usage: usageOf(result),
  }
}

type StreamEvent = { event: string; data: Record<string, unknown> }

/**
 * Turns Hearth's progress into Anthropic's events: a new block starts whenever the kind of output
 * changes (thinking, text, a tool call), and the open block stops first.
 */
export class MessageStreamWriter {
  private index = -1
  private open: { kind: 'thinking' | 'text' | 'tool'; toolIndex?: number } | undefined

  constructor(private readonly who: MessageIdentity) {}

  start(): StreamEvent {
    return {
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
          usage: { input_tokens: 0, output_tokens: 0 },
        },
      },
    }
  }

  progress(p: JobProgress): StreamEvent[] {
    switch (p.type) {
      case 'reasoning':
        return [...this.switchTo('thinking', { type: 'thinking', thinking: '', signature: '' }), this.delta({ type: 'thinking_delta', thinking: p.text })]
      case 'text':
        return [...this.switchTo('text', { type: 'text', text: '' }), this.delta({ type: 'text_delta', text: p.text })]
      case 'tool_call': {
        const events: StreamEvent[] = []
        if (p.id !== undefined || this.open?.kind !== 'tool' || this.open.toolIndex !== p.index) {
          events.push(...this.stopOpen())
          this.index++
          this.open = { kind: 'tool', toolIndex: p.index }
          events.push({
            event: 'content_block_start',
            data: { type: 'content_block_start', index: this.index, content_block: { type: 'tool_use', id: toolUseId(p.id ?? ''), name: p.name ?? '', input: {} } },
          })
        }
        if (p.arguments) events.push(this.delta({ type: 'input_json_delta', partial_json: p.arguments }))
        return events
      }
      default:
        return []
    }
  }

  finish(result: ChatResult): StreamEvent[] {
    return [
      ...this.stopOpen(),
      {
        event: 'message_delta',
        data: { type: 'message_delta', delta: { stop_reason: stopReasonOf(result), stop_sequence: null }, usage: usageOf(result) },
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
    this.open = undefined
    return [{ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.index } }]
  }

  private delta(delta: Record<string, unknown>): StreamEvent {
    return { event: 'content_block_delta', data: { type: 'content_block_delta', index: this.index, delta } }
  }
}
