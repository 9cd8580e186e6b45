/**
 * The MCP servers a request names, as every protocol that can name one does (the Responses API's
 * `mcp` tools, Anthropic's `mcp_servers`): always a server the user configured, by its name, never
 * one the request brings. Which of its tools the model sees, which wait for the client's approval,
 * and the servers connected (each lists its tools, starting if it must) before the first byte of
 * the answer: a refusal is a plain HTTP error naming the request's own field, and no server starts
 * while any of the request's servers is refused.
 */
import type { Request, Response } from 'express'
import { ApiError, invalidRequest } from '../api-error.ts'
import type { Notices } from '../pipeline/request-notices.ts'
import type { McpHub } from './mcp-hub.ts'
import { serverDisabled } from './mcp-errors.ts'
import { requireMcpPermission } from './mcp-permission.ts'

export interface ToolFilter {
  tool_names?: string[] | undefined
  read_only?: boolean | undefined
}

/** Which calls wait for the client's approval: all, none, or those a filter picks. */
export type ApprovalPolicy = 'always' | 'never' | { always?: ToolFilter | undefined; never?: ToolFilter | undefined } | null | undefined

/** One MCP server a request names, checked: which server, and how its tools are offered. */
export interface McpToolRequest {
  /** Where the request names it, for the errors that point there: `tools[1]`, `mcp_servers[0]`. */
  at: string
  /** The request's own names for the server's name and URL: `server_label` and `server_url` (Responses), `name` and `url` (Anthropic). */
  fields: { label: string; url: string; allowedTools: string }
  serverLabel: string
  serverUrl: string | undefined
  description: string | undefined
  allowedTools: string[] | ToolFilter | undefined
  requireApproval: ApprovalPolicy
}

/** An MCP tool as the server lists it. */
export interface ListedMcpTool {
  name: string
  description?: string
  inputSchema: Record<string, unknown>
  readOnly?: boolean
}

/** A configured server the request may use, with the tools it offers the model. */
export interface McpServerTools {
  request: McpToolRequest
  /** The tools the request allows, in the server's order. */
  tools: ListedMcpTool[]
}

function matches(filter: ToolFilter | undefined, tool: ListedMcpTool): boolean {
  if (!filter) return false
  if (filter.tool_names && !filter.tool_names.includes(tool.name)) return false
  if (filter.read_only !== undefined && (tool.readOnly === true) !== filter.read_only) return false
  return true
}

/** Whether the request lets the model see this tool (all tools when it names none). */
export function isAllowed(request: McpToolRequest, tool: ListedMcpTool): boolean {
  const allowed = request.allowedTools
  if (allowed === undefined) return true
  return Array.isArray(allowed) ? allowed.includes(tool.name) : matches(allowed, tool)
}

/** Whether a call must wait for the client's approval: always, unless the request says never (OpenAI's default). */
export function needsApproval(request: McpToolRequest, tool: ListedMcpTool): boolean {
  const policy = request.requireApproval
  if (policy == null || policy === 'always') return true
  if (policy === 'never') return false
  if (matches(policy.always, tool)) return true
  return !matches(policy.never, tool)
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
      throw e instanceof ApiError ? new ApiError(e.status, e.type, e.code, e.message, `${request.at}.${request.fields.label}`, e.headers) : e
    }
    const tools = listed.map((t) => ({
      name: t.name,
      ...(t.description ? { description: t.description } : {}),
      inputSchema: t.inputSchema,
      ...(t.readOnly !== undefined ? { readOnly: t.readOnly } : {}),
    }))
    if (Array.isArray(request.allowedTools)) {
      const missing = request.allowedTools.filter((name) => !tools.some((t) => t.name === name))
      if (missing.length)
        notices.add(
          `${request.at}.${request.fields.allowedTools} names ${missing.map((n) => `'${n}'`).join(', ')}, which the MCP server '${request.serverLabel}' does not have`,
        )
    }
    servers.push({ request, tools: tools.filter((t) => isAllowed(request, t)) })
  }
  return servers
}

/** The server is in the user's settings, turned on, and reached where the user said. */
function checkConfigured(request: McpToolRequest, hub: McpHub | undefined): void {
  const { at, fields } = request
  const config = hub?.configured(request.serverLabel)
  if (!config) {
    const names = hub?.names() ?? []
    const known = names.length ? `; the configured ones are ${names.map((n) => `'${n}'`).join(', ')}` : '; none is configured'
    throw invalidRequest(
      `No MCP server named '${request.serverLabel}' is configured${known}. Add it on the Tools page (or in mcp.json) and name it in '${fields.label}'`,
      `${at}.${fields.label}`,
      'mcp_server_not_found',
    )
  }
  if (!config.enabled) throw serverDisabled(request.serverLabel, `${at}.${fields.label}`)
  if (request.serverUrl === undefined) return
  if (config.transport === 'stdio') {
    throw invalidRequest(`The MCP server '${request.serverLabel}' is a program on this computer, not a URL; leave '${fields.url}' out`, `${at}.${fields.url}`)
  }
  if (!sameUrl(request.serverUrl, config.url)) {
    throw invalidRequest(
      `'${fields.url}' must be the URL configured for the MCP server '${request.serverLabel}', or left out: a request cannot make Hearth reach a URL the user did not configure`,
      `${at}.${fields.url}`,
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

/** A chat function the model is offered for an MCP tool. */
export interface McpFunction {
  type: 'function'
  function: { name: string; description?: string; parameters: Record<string, unknown> }
}

/**
 * The servers' tools as the chat functions the model sees: each under its own name, and where two
 * share one (or a client's function has it), as `label__tool`; the model's calls named back to the
 * server and tool that run them.
 */
export class McpFunctions {
  readonly functions: McpFunction[] = []
  private readonly byName = new Map<string, { server: McpServerTools; tool: ListedMcpTool }>()
  private readonly names = new Map<string, string>()

  /** `taken`: the names the client's own functions have. */
  constructor(servers: readonly McpServerTools[], taken: Iterable<string> = []) {
    const uses = new Map<string, number>()
    for (const name of taken) uses.set(name, 1)
    for (const server of servers) for (const tool of server.tools) uses.set(asFunctionName(tool.name), (uses.get(asFunctionName(tool.name)) ?? 0) + 1)
    for (const server of servers) {
      for (const tool of server.tools) {
        const own = asFunctionName(tool.name)
        const name = (uses.get(own) ?? 0) > 1 ? asFunctionName(`${server.request.serverLabel}__${tool.name}`) : own
        this.byName.set(name, { server, tool })
        this.names.set(`${server.request.serverLabel}\0${tool.name}`, name)
        const about = [tool.description, server.request.description && `(${server.request.serverLabel}: ${server.request.description})`]
          .filter((d): d is string => !!d)
          .join('\n\n')
        this.functions.push({ type: 'function', function: { name, ...(about ? { description: about } : {}), parameters: tool.inputSchema } })
      }
    }
  }

  /** The server and tool a name the model calls stands for; undefined for the client's own functions. */
  target(name: string): { server: McpServerTools; tool: ListedMcpTool } | undefined {
    return this.byName.get(name)
  }

  /** The name the model knows a server's tool by (also for calls in earlier turns, whose server may be gone). */
  nameOf(serverLabel: string, tool: string): string {
    return this.names.get(`${serverLabel}\0${tool}`) ?? asFunctionName(tool)
  }
}

/** An MCP tool's name as a chat function's (MCP allows dots and longer names; chat templates may not). */
function asFunctionName(name: string): string {
  return name.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64) || 'tool'
}
