/**
 * The Responses API's `mcp` tool as Hearth honours it: the tool names an MCP server the user
 * configured (by `server_label`), never one the request brings. What a request alone decides is
 * checked here (no server is reached): its shape, the fields refused because they would make Hearth
 * reach or authenticate to something the user did not set up, which of the server's tools it
 * allows and which of them need the client's approval before they run.
 */
import { z } from 'zod'
import { invalidRequest, unsupportedParameter } from '../../services/api-error.ts'
import { paramPath } from '../../services/chat/validation.ts'

const toolFilter = z.object({ tool_names: z.array(z.string()).optional(), read_only: z.boolean().optional() })

export const mcpToolSchema = z.looseObject({
  type: z.literal('mcp'),
  server_label: z.string().min(1),
  server_url: z.string().nullish(),
  server_description: z.string().nullish(),
  connector_id: z.string().nullish(),
  tunnel_id: z.string().nullish(),
  authorization: z.string().nullish(),
  headers: z.record(z.string(), z.string()).nullish(),
  allowed_tools: z.union([z.array(z.string()), toolFilter]).nullish(),
  require_approval: z.union([z.enum(['always', 'never']), z.object({ always: toolFilter.optional(), never: toolFilter.optional() })]).nullish(),
})
type McpToolFields = z.infer<typeof mcpToolSchema>
type ToolFilter = z.infer<typeof toolFilter>

/** One `mcp` tool of the request, checked: the server it names and how its tools are offered. */
export interface McpToolRequest {
  /** Where it sits in `tools`, for the errors that name it. */
  index: number
  serverLabel: string
  serverUrl: string | undefined
  description: string | undefined
  allowedTools: string[] | ToolFilter | undefined
  requireApproval: McpToolFields['require_approval']
}

/** An MCP tool as the server lists it, in the shape the Responses items use. */
export interface ListedMcpTool {
  name: string
  description?: string
  inputSchema: Record<string, unknown>
  readOnly?: boolean
}

/** A configured server the request may use, with the tools it offers the model. */
export interface McpServerTools {
  request: McpToolRequest
  /** The tools `allowed_tools` lets through, in the server's order. */
  tools: ListedMcpTool[]
}

/** Fields that would make Hearth reach, or sign in to, something the user did not configure. */
const REFUSED_FIELDS: Record<string, string> = {
  connector_id: "OpenAI's connectors are not available here; configure an MCP server on the Tools page and name it in 'server_label'",
  tunnel_id: "OpenAI's MCP tunnels are not available here; configure an MCP server on the Tools page and name it in 'server_label'",
  authorization: "credentials come from the user's MCP settings (the server's 'headers' or 'env' in mcp.json), not from the request",
  headers: "headers come from the user's MCP settings (the server's 'headers' in mcp.json), not from the request",
}

/** The `mcp` tool at `tools[index]`, checked; a 400 names the field. */
export function parseMcpTool(tool: unknown, index: number): McpToolRequest {
  const parsed = mcpToolSchema.safeParse(tool)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw invalidRequest(`Invalid value for 'tools[${index}].${paramPath(issue.path)}': ${issue.message.replace(/^Invalid input: /, '')}`, `tools[${index}].${paramPath(issue.path)}`)
  }
  const fields = parsed.data
  for (const [field, why] of Object.entries(REFUSED_FIELDS)) {
    const value = fields[field as keyof McpToolFields]
    const given = value != null && !(typeof value === 'object' && Object.keys(value).length === 0)
    if (given) throw unsupportedParameter(`tools[${index}].${field}`, why)
  }
  return {
    index,
    serverLabel: fields.server_label,
    serverUrl: fields.server_url ?? undefined,
    description: fields.server_description ?? undefined,
    allowedTools: fields.allowed_tools ?? undefined,
    requireApproval: fields.require_approval,
  }
}

function matches(filter: ToolFilter | undefined, tool: ListedMcpTool): boolean {
  if (!filter) return false
  if (filter.tool_names && !filter.tool_names.includes(tool.name)) return false
  if (filter.read_only !== undefined && (tool.readOnly === true) !== filter.read_only) return false
  return true
}

/** Whether `allowed_tools` lets the model see this tool (all tools when it is not given). */
export function isAllowed(request: McpToolRequest, tool: ListedMcpTool): boolean {
  const allowed = request.allowedTools
  if (allowed === undefined) return true
  return Array.isArray(allowed) ? allowed.includes(tool.name) : matches(allowed, tool)
}

/** Whether a call must wait for the client's `mcp_approval_response`: always, unless the request says never (OpenAI's default). */
export function needsApproval(request: McpToolRequest, tool: ListedMcpTool): boolean {
  const policy = request.requireApproval
  if (policy == null || policy === 'always') return true
  if (policy === 'never') return false
  if (matches(policy.always, tool)) return true
  return !matches(policy.never, tool)
}
