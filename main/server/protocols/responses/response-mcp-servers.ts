/**
 * The servers a Responses request's `mcp` tools name, checked against the user's MCP settings and
 * connected (each lists its tools, starting if it must), before the first byte of the answer: a
 * refusal is a plain HTTP error naming the tool (`tools[1].server_url`), and no server starts
 * while any tool of the request is refused.
 */
import type { Request, Response } from 'express'
import { ApiError, invalidRequest } from '../../services/api-error.ts'
import type { McpHub } from '../../services/mcp/mcp-hub.ts'
import { serverDisabled } from '../../services/mcp/mcp-errors.ts'
import { requireMcpPermission } from '../../services/mcp/mcp-permission.ts'
import type { Notices } from '../../services/pipeline/request-notices.ts'
import { isAllowed, type ListedMcpTool, type McpServerTools, type McpToolRequest } from './response-mcp-tools.ts'
import type { McpApprovalRequestItem } from './responses-request.ts'

/** An approved call from the input, with the server and tool that will run it. */
export interface ApprovedCall {
  call: McpApprovalRequestItem
  server: McpServerTools
  tool: ListedMcpTool
}

export async function connectMcpServers(
  requests: readonly McpToolRequest[],
  hub: McpHub | undefined,
  who: { req: Request; res: Response },
  notices: Notices,
  signal: AbortSignal,
): Promise<McpServerTools[]> {
  if (requests.length === 0) return []
  requireMcpPermission(who.req, who.res, 'use')
  for (const request of requests) checkConfigured(request, hub)
  const servers: McpServerTools[] = []
  for (const request of requests) {
    let listed
    try {
      listed = await hub!.tools(request.serverLabel, signal)
    } catch (e) {
      throw e instanceof ApiError ? new ApiError(e.status, e.type, e.code, e.message, `tools[${request.index}].server_label`, e.headers) : e
    }
    const tools = listed.map((t) => ({ name: t.name, ...(t.description ? { description: t.description } : {}), inputSchema: t.inputSchema, ...(t.readOnly !== undefined ? { readOnly: t.readOnly } : {}) }))
    if (Array.isArray(request.allowedTools)) {
      const missing = request.allowedTools.filter((name) => !tools.some((t) => t.name === name))
      if (missing.length) notices.add(`tools[${request.index}].allowed_tools names ${missing.map((n) => `'${n}'`).join(', ')}, which the MCP server '${request.serverLabel}' does not have`)
    }
    servers.push({ request, tools: tools.filter((t) => isAllowed(request, t)) })
  }
  return servers
}

/** The server is in the user's settings, turned on, and reached where the user said. */
function checkConfigured(request: McpToolRequest, hub: McpHub | undefined): void {
  const at = `tools[${request.index}]`
  const config = hub?.configured(request.serverLabel)
  if (!config) {
    const names = hub?.names() ?? []
    const known = names.length ? `; the configured ones are ${names.map((n) => `'${n}'`).join(', ')}` : '; none is configured'
    throw invalidRequest(
      `No MCP server named '${request.serverLabel}' is configured${known}. Add it on the Tools page (or in mcp.json) and name it in 'server_label'`,
      `${at}.server_label`,
      'mcp_server_not_found',
    )
  }
  if (!config.enabled) throw serverDisabled(request.serverLabel, `${at}.server_label`)
  if (request.serverUrl === undefined) return
  if (config.transport === 'stdio') {
    throw invalidRequest(`The MCP server '${request.serverLabel}' is a program on this computer, not a URL; leave 'server_url' out`, `${at}.server_url`)
  }
  if (!sameUrl(request.serverUrl, config.url)) {
    throw invalidRequest(
      `'server_url' must be the URL configured for the MCP server '${request.serverLabel}', or left out: a request cannot make Hearth reach a URL the user did not configure`,
      `${at}.server_url`,
    )
  }
}

function sameUrl(a: string, b: string | undefined): boolean {
  if (b === undefined) return false
  try {
    return new URL(a).href === new URL(b).href
  } catch {
    return false
  }
}

/**
 * The calls the input approves, each matched to a server of this request that still offers the
 * tool; an approval for a server or tool the request does not offer is a 400 naming it.
 */
export function approvedCallsOn(approved: ReadonlyArray<{ call: McpApprovalRequestItem; at: number }>, servers: readonly McpServerTools[]): ApprovedCall[] {
  return approved.map(({ call, at }) => {
    const param = `input[${at}].approval_request_id`
    const server = servers.find((s) => s.request.serverLabel === call.server_label)
    if (!server) throw invalidRequest(`The approved call is to the MCP server '${call.server_label}', which is not among this request's 'mcp' tools; send that tool again`, param)
    const tool = server.tools.find((t) => t.name === call.name)
    if (!tool) throw invalidRequest(`The approved call is to '${call.name}', which this request's 'mcp' tool for '${call.server_label}' does not allow`, param)
    return { call, server, tool }
  })
}
