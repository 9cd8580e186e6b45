/**
 * One streamed /v1/responses answer, read into the answer's items (what the next request sends
 * back) and the conversation's turns (what the screen shows): the model's turns (text, thinking,
 * calls), the results of the MCP tools the server ran between them (tool turns), the calls waiting
 * for the person's approval, and the documents' texts it was given (the answer's sources). Text
 * reaches the screen at most every `showEveryMs`: a fast model sends hundreds of deltas a second,
 * and each re-render parses the whole answer again.
 */
import { keptItem, type AnswerItem } from './answer-items.ts'
import type { ChatTurn, Citation, ToolCallView } from './chat-messages.ts'
import type { ResponseEvent, ResponseItem } from '../../../../main/server/wire-types.ts'

export interface StreamHooks {
  newId(): string
  /** The model the answer comes from, for new answer turns. */
  model: string
  /** The MCP call the server is running (undefined when it has finished). */
  onRunning?(callId: string | undefined): void
  showEveryMs?: number
}

export interface StreamOutcome {
  /** Calls the server will run once the person allows them: the answer waits for those answers. */
  approvals: ToolCallView[]
  /** The stream failed (the message is on the turn) or was stopped. */
  ended: boolean
}

/**
 * Reads the events into `items` (each output item once it is done) and `turns`. The answer's first
 * turn is the last of `turns` when it is an empty assistant turn; a model turn after tool results
 * is a new one. Failures end up on the turn (`error`), not thrown; a stop leaves what was said, in
 * the items too (a call cut off while it ran stays `in_progress`, for finishCalls).
 */
export async function readResponse(
  turns: ChatTurn[],
  items: AnswerItem[],
  events: AsyncIterable<ResponseEvent>,
  signal: AbortSignal,
  hooks: StreamHooks,
): Promise<StreamOutcome> {
  const approvals: ToolCallView[] = []
  /** The item being streamed (the server closes each before it opens the next), as said so far. */
  let open: ResponseItem | undefined
  const calls = new Map<string, ToolCallView>()
  const started = new Map<string, number>()
  let sources: Citation[] = []
  let unshown = ''
  let timer: ReturnType<typeof setTimeout> | undefined
  let firstDeltaMs: number | undefined
  let rounds = 0

  /** The model's turn being written: the last turn, unless a tool's result came after it. */
  const answer = (): ChatTurn => {
    const last = turns.at(-1)
    if (last?.role === 'assistant') return last
    turns.push({ id: hooks.newId(), role: 'assistant', text: '', model: hooks.model })
    return turns.at(-1)!
  }
  const show = () => {
    timer = undefined
    if (unshown) answer().text += unshown
    unshown = ''
  }
  /** Adds the call to the turn, and gives it back as the turn keeps it (the page's state wraps what it is given). */
  const addCall = (turn: ChatTurn, call: ToolCallView): ToolCallView => {
    turn.toolCalls ??= []
    turn.toolCalls.push(call)
    return turn.toolCalls.at(-1)!
  }
  const calledBy = (call: ToolCallView): ToolCallView => {
    // The call belongs to the last model turn (the results of earlier calls of the same turn may follow it).
    const turn = turns.findLast((t) => t.role === 'assistant') ?? answer()
    if (!turn.toolCalls?.some((c) => c.server)) rounds++
    return addCall(turn, call)
  }

  const added = (item: ResponseItem) => {
    open = structuredClone(item)
    switch (item.type) {
      case 'message':
      case 'reasoning':
        show()
        answer()
        return
      case 'function_call': {
        show()
        calls.set(item.id, addCall(answer(), { id: item.call_id, name: item.name, arguments: item.arguments }))
        return
      }
      case 'mcp_call': {
        show()
        const id = item.approval_request_id ?? item.id
        // An approved call is already on the answer that asked for it.
        if (!item.approval_request_id) calledBy({ id, name: item.name, arguments: item.arguments, server: item.server_label })
        started.set(id, performance.now())
        hooks.onRunning?.(id)
        return
      }
    }
  }

  const done = (item: ResponseItem) => {
    open = undefined
    items.push(keptItem(item))
    switch (item.type) {
      case 'mcp_call': {
        const id = item.approval_request_id ?? item.id
        const begun = started.get(id)
        const failed = item.status !== 'completed'
        turns.push({
          id: hooks.newId(),
          role: 'tool',
          toolCallId: id,
          name: item.name,
          server: item.server_label,
          text: (failed ? item.error : item.output) ?? '',
          isError: failed,
          ...(begun === undefined ? {} : { durationMs: Math.round(performance.now() - begun) }),
        })
        hooks.onRunning?.(undefined)
        return
      }
      case 'mcp_approval_request': {
        show()
        approvals.push(calledBy({ id: item.id, name: item.name, arguments: item.arguments, server: item.server_label }))
        return
      }
      case 'file_search_call':
        sources = (item.results ?? []).map((r) => ({ n: r.attributes.citation, name: r.filename, text: r.text }))
        return
    }
  }

  try {
    for await (const event of events) {
      switch (event.type) {
        case 'response.output_item.added':
          if (event.item) added(event.item)
          break
        case 'response.output_item.done':
          if (event.item) done(event.item)
          break
        case 'response.output_text.annotation.added': {
          // Its index is in the text so far: what is still waiting to be shown comes first.
          show()
          const { annotation } = event
          const source = sources.find((s) => s.text === annotation?.quote)
          if (annotation?.type === 'file_citation' && source) {
            const turn = answer()
            turn.citationMarks = [...(turn.citationMarks ?? []), { at: annotation.index, n: source.n }]
          }
          break
        }
        case 'response.output_text.delta':
          if (open?.type === 'message') open.content = [{ type: 'output_text', text: (open.content[0]?.text ?? '') + (event.delta ?? '') }]
          firstDeltaMs ??= performance.now()
          unshown += event.delta ?? ''
          timer ??= setTimeout(show, hooks.showEveryMs ?? 50)
          break
        case 'response.reasoning_text.delta': {
          firstDeltaMs ??= performance.now()
          if (open?.type === 'reasoning') open.content = [{ type: 'reasoning_text', text: (open.content?.[0]?.text ?? '') + (event.delta ?? '') }]
          const turn = answer()
          turn.reasoning = (turn.reasoning ?? '') + (event.delta ?? '')
          break
        }
        case 'response.function_call_arguments.delta': {
          const call = calls.get(event.item_id ?? '')
          if (call) call.arguments += event.delta ?? ''
          if (open?.type === 'function_call') open.arguments += event.delta ?? ''
          break
        }
        case 'response.completed':
        case 'response.incomplete': {
          show()
          const turn = turns.findLast((t) => t.role === 'assistant') ?? answer()
          const { usage, incomplete_details: incomplete } = event.response!
          if (usage) {
            turn.usage = { promptTokens: usage.input_tokens, completionTokens: usage.output_tokens }
            if (firstDeltaMs !== undefined) {
              const seconds = (performance.now() - firstDeltaMs) / 1000
              if (seconds > 0 && usage.output_tokens > 1) turn.tokensPerSecond = usage.output_tokens / seconds
            }
          }
          if (incomplete?.reason === 'max_output_tokens') turn.finishReason = 'length'
          else if (incomplete?.reason === 'max_tool_calls') turn.toolRoundLimit = rounds
          else turn.finishReason = approvals.length || turn.toolCalls?.some((c) => !c.server) ? 'tool_calls' : 'stop'
          if (sources.length) turn.citations = sources
          break
        }
      }
    }
    return { approvals, ended: false }
  } catch (e) {
    if (!signal.aborted) answer().error = (e as Error).message
    return { approvals: [], ended: true }
  } finally {
    clearTimeout(timer)
    show()
    if (open && said(open)) items.push(keptItem(open.type === 'message' ? { ...open, status: 'incomplete' } : open))
  }
}

/** Whether an item cut off mid-stream has anything in it for the model to read again. */
function said(item: ResponseItem): boolean {
  if (item.type === 'message') return Boolean(item.content[0]?.text)
  if (item.type === 'reasoning') return Boolean(item.content?.[0]?.text)
  return true
}
