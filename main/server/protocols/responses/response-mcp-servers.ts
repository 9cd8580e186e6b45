/**
 * The calls a Responses request approves (`mcp_approval_response` items), each matched to a server
 * of this request that still offers the tool.
 */ import { invalidRequest } from '../../services/api-error.ts'
import type { ListedMcpTool, McpServerTools } from '../../services/mcp/mcp-tools.ts'
import type { McpApprovalRequestItem } from './responses-request.ts'

/** An approved call from the input, with the server and tool that will run it. */
export interface ApprovedCall {
  call: McpApprovalRequestItem
  server: McpServerTools
  tool: ListedMcpTool
}

/**
 * The calls the input approves, each matched to a server of this request that still offers the
 * tool; an approval for a server or tool the request does not offer is a 400 naming it.
 */
export function approvedCallsOn(approved: ReadonlyArray<{ call: McpApprovalRequestItem; at: number }>, servers: readonly McpServerTools[]): ApprovedCall[] {
  return approved.map(({ call, at }) => {
    const param = `input[${at}].approval_request_id`
    const server = servers.find((s) => s.request.serverLabel === call.server_label)
    if (!server)
      throw invalidRequest(
        `The approved call is to the MCP server '${call.server_label}', which is not among this request's 'mcp' tools; send that tool again`,
        param,
      )
    const tool = server.tools.find((t) => t.name === call.name)
    if (!tool) throw invalidRequest(`The approved call is to '${call.name}', which this request's 'mcp' tool for '${call.server_label}' does not allow`, param)
    return { call, server, tool }
  })
}
