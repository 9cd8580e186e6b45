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
import type { McpToolRequest } from '../../services/mcp/mcp-tools.ts'

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
    throw invalidRequest(
      `Invalid value for 'tools[${index}].${paramPath(issue.path)}': ${issue.message.replace(/^Invalid input: /, '')}`,
      `tools[${index}].${paramPath(issue.path)}`,
    )
  }
  const fields = parsed.data
  for (const [field, why] of Object.entries(REFUSED_FIELDS)) {
    const value = fields[field as keyof McpToolFields]
    const given = value != null && !(typeof value === 'object' && Object.keys(value).length === 0)
    if (given) throw unsupportedParameter(`tools[${index}].${field}`, why)
  }
  return {
    at: `tools[${index}]`,
    fields: { label: 'server_label', url: 'server_url', allowedTools: 'allowed_tools' },
    serverLabel: fields.server_label,
    serverUrl: fields.server_url ?? undefined,
    description: fields.server_description ?? undefined,
    allowedTools: fields.allowed_tools ?? undefined,
    requireApproval: fields.require_approval,
  }
}
