/**
 * An answer as the Responses items it is made of: each request's output items as the server sent
 * them, and the person's approval responses. The page sends them back as they are, so what the
 * model read of an earlier turn is the same in every later request (and the engine's prompt cache
 * keeps it); the server alone words what a denied call tells the model.
 */
import type { McpCallItem, ResponseItem } from '../../../../main/server/wire-types.ts'

export type AnswerItem = ResponseItem | McpApprovalResponse

export interface McpApprovalResponse {
  type: 'mcp_approval_response'
  approval_request_id: string
  approve: boolean
}

/** What the model is told of a call the person stopped before it finished (and what the person sees). */
export const STOPPED_TEXT = 'The person stopped the chat before this tool call finished.'
/** The same, when the answer broke off (the connection, the server) rather than being stopped. */
export const BROKEN_OFF_TEXT = 'The answer broke off before this tool call finished.'

/** The item as kept: the documents' texts stay with the answer's sources, not twice in storage (the model reads neither back). */
export function keptItem(item: ResponseItem): AnswerItem {
  return item.type === 'file_search_call' ? { ...item, results: null } : item
}

/**
 * Gives each call of the answer that never finished an outcome, saying `why`: a call cut off while
 * it ran, an approved one that never started, one still waiting for the person. Without it the
 * next request would leave the model's call unanswered, or run an approved call again. Returns the
 * calls it finished (they belong on the screen too).
 */
export function finishCalls(items: AnswerItem[], why: string): McpCallItem[] {
  const settled = new Set<string>()
  for (const item of items) {
    if (item.type === 'mcp_approval_response' && !item.approve) settled.add(item.approval_request_id)
    if (item.type === 'mcp_call' && item.approval_request_id) settled.add(item.approval_request_id)
  }
  const finished: McpCallItem[] = []
  for (const item of items) {
    if (item.type === 'mcp_call' && (item.status === 'in_progress' || item.status === 'calling')) {
      Object.assign(item, { status: 'incomplete', error: why })
      finished.push(item)
    }
  }
  for (const item of [...items]) {
    if (item.type !== 'mcp_approval_request' || settled.has(item.id)) continue
    const call: McpCallItem = {
      type: 'mcp_call',
      id: `mcp_${item.id}`,
      server_label: item.server_label,
      name: item.name,
      arguments: item.arguments,
      output: null,
      error: why,
      approval_request_id: item.id,
      status: 'incomplete',
    }
    items.push(call)
    finished.push(items.at(-1) as McpCallItem)
  }
  return finished
}
