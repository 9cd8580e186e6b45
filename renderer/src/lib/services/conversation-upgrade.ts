/**
 * Conversations kept before the page kept each answer's Responses items (answer-items.ts): their
 * answers get items once, on load, made from the turns as the page used to send them (the same
 * bytes, so even the engine's cached prompt of such a conversation still fits).
 */
import { STOPPED_TEXT, type AnswerItem } from './answer-items.ts'
import type { ChatTurn } from './chat-messages.ts'

/** Gives every answer kept without items its items; answers that have them are left as they are. */
export function withAnswerItems(turns: ChatTurn[]): ChatTurn[] {
  const results = new Map(turns.filter((t) => t.role === 'tool').map((t) => [t.toolCallId ?? '', t]))
  /** The items of the answer being read, when it was kept without them. */
  let upgrading: AnswerItem[] | undefined
  let opened = false
  for (const turn of turns) {
    if (turn.role === 'user') {
      upgrading = undefined
      opened = false
    }
    if (turn.role !== 'assistant') continue
    if (!opened) {
      opened = true
      if (!turn.items) upgrading = turn.items = []
    }
    upgrading?.push(...itemsOf(turn, results))
  }
  return turns
}

/** An old answer turn as the page sent it: its text, then its calls with their results. */
function itemsOf(turn: ChatTurn, results: ReadonlyMap<string, ChatTurn>): AnswerItem[] {
  const items: AnswerItem[] = []
  // Failed answers had nothing to say; a stopped one said what it said.
  if (turn.text) items.push({ type: 'message', id: `msg_${turn.id}`, role: 'assistant', content: [{ type: 'output_text', text: turn.text }] })
  for (const call of turn.toolCalls ?? []) {
    // Conversations kept before the server ran the tools name the server on the result only.
    const server = call.server ?? results.get(call.id)?.server
    if (!server) {
      items.push({ type: 'function_call', id: `fc_${call.id}`, call_id: call.id, name: call.name, arguments: call.arguments })
      continue
    }
    const result = results.get(call.id)
    const failed = !result || result.isError === true
    const text = result?.text ?? STOPPED_TEXT
    items.push({
      type: 'mcp_call',
      id: call.id,
      server_label: server,
      name: call.name,
      arguments: call.arguments,
      output: failed ? null : text,
      error: failed ? text : null,
      approval_request_id: null,
      status: failed ? 'failed' : 'completed',
    })
  }
  return items
}
