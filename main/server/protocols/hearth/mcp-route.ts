/**
 * /api/mcp: the MCP servers of mcp.json (list, add, change, remove, start, stop) and their tools'
 * calls, for the Tools page and the chat. Env and header values are written, never shown again.
 */
import { Router, type Request, type Response } from 'express'
import { z } from 'zod'
import { ApiError, invalidRequest } from '../../services/api-error.ts'
import { ENTRY_FIELDS } from '../../services/mcp/mcp-config.ts'
import type { McpEntryChanges, McpHub, McpServerStatus } from '../../services/mcp/mcp-hub.ts'
import { mcpPermission, requireMcpPermission } from '../../services/mcp/mcp-permission.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'
import type { ServerContext } from '../../server-context.ts'
import type { McpCallResponse, McpServersListing, McpServerView } from '../../wire-types.ts'

const callSchema = z.object({
  server: z.string().min(1),
  tool: z.string().min(1),
  arguments: z.record(z.string(), z.unknown()).optional(),
})

export function mcpRoute(ctx: ServerContext): Router {
  const router = Router()

  router.get('/mcp/servers', async (req, res) => {
    const hub = requireHub(ctx)
    const permission = mcpPermission(req, res)
    const servers = permission === 'none' ? [] : (await hub.statuses()).map(serverView)
    res.json({ servers, permission, config_file: hub.configFile, config_error: hub.configError() } satisfies McpServersListing)
  })

  router.post('/mcp/servers', async (req, res) => {
    const hub = requireHub(ctx)
    requireMcpPermission(req, res, 'manage')
    const body = entryBody(req.body, ['name'])
    if (typeof body.name !== 'string')
      throw invalidRequest(
        body.name === undefined ? "Missing required parameter: 'name'" : "Invalid value for 'name': it must be a string",
        'name',
        body.name === undefined ? 'missing_required_parameter' : 'invalid_value',
      )
    const { name, ...entry } = body
    res.status(201).json(serverView(await hub.add(name, entry as McpEntryChanges)))
  })

  router.patch('/mcp/servers/:name', async (req, res) => {
    const hub = requireHub(ctx)
    requireMcpPermission(req, res, 'manage')
    const body = entryBody(req.body, [])
    res.json(serverView(await hub.update(req.params.name, body as McpEntryChanges)))
  })

  router.delete('/mcp/servers/:name', async (req, res) => {
    const hub = requireHub(ctx)
    requireMcpPermission(req, res, 'manage')
    await hub.remove(req.params.name)
    res.json({ name: req.params.name, deleted: true })
  })

  router.post('/mcp/servers/:name/start', async (req, res) => {
    const hub = requireHub(ctx)
    requireMcpPermission(req, res, 'use')
    res.json(serverView(await hub.start(req.params.name, clientGone(res))))
  })

  router.post('/mcp/servers/:name/stop', async (req, res) => {
    const hub = requireHub(ctx)
    requireMcpPermission(req, res, 'use')
    res.json(serverView(await hub.stop(req.params.name)))
  })

  router.post('/mcp/call', async (req, res) => {
    const hub = requireHub(ctx)
    requireMcpPermission(req, res, 'use')
    const body = parseOrThrow(callSchema, req.body)
    res.locals.tool = `${body.server}/${body.tool}`
    const result = await hub.call(body.server, body.tool, body.arguments ?? {}, clientGone(res))
    res.json({
      server: body.server,
      tool: body.tool,
      content: result.content,
      text: result.text,
      is_error: result.isError,
      duration_ms: result.durationMs,
    } satisfies McpCallResponse)
  })

  return router
}

function requireHub(ctx: ServerContext): McpHub {
  if (!ctx.mcp) throw new ApiError(503, 'server_error', 'mcp_unavailable', 'MCP servers are not available in this server')
  return ctx.mcp
}

/** Fires when the client goes away before the answer is sent (the chat's Stop), cancelling the work. */
function clientGone(res: Response): AbortSignal {
  const controller = new AbortController()
  res.once('close', () => {
    if (!res.writableFinished) controller.abort()
  })
  return controller.signal
}

/** The body of POST/PATCH: only the fields an entry has (and `extra`); each value is checked by the hub. */
function entryBody(body: Request['body'], extra: string[]): Record<string, unknown> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object', null, 'invalid_json')
  }
  const allowed = new Set<string>([...ENTRY_FIELDS, ...extra])
  for (const field of Object.keys(body)) {
    if (field === 'name' && !allowed.has(field))
      throw invalidRequest("Invalid value for 'name': a server cannot be renamed; remove it and add it again", 'name')
    if (!allowed.has(field)) throw invalidRequest(`Unknown parameter: '${field}'. An MCP server has ${[...allowed].join(', ')}`, field, 'unknown_parameter')
  }
  return body as Record<string, unknown>
}

function serverView(status: McpServerStatus): McpServerView {
  const { config } = status
  return {
    name: config.name,
    transport: config.transport,
    ...(config.transport === 'stdio'
      ? { command: config.command!, args: config.args, env_names: Object.keys(config.env), ...(config.cwd !== undefined ? { cwd: config.cwd } : {}) }
      : { url: config.url!, header_names: Object.keys(config.headers) }),
    enabled: config.enabled,
    timeout_seconds: config.timeoutSeconds,
    state: status.state,
    error: status.error,
    tools: status.tools.map((tool) => ({
      name: tool.name,
      ...(tool.title !== undefined ? { title: tool.title } : {}),
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      input_schema: tool.inputSchema,
      ...(tool.readOnly !== undefined ? { read_only: tool.readOnly } : {}),
    })),
    log_tail: status.logTail,
  }
}
