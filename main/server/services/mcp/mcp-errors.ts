/** The answers MCP failures get, as ApiErrors (params as POST /api/mcp/call names them). */
import { ApiError } from '../api-error.ts'

export function serverNotFound(name: string, param = 'server'): ApiError {
  return new ApiError(
    404,
    'invalid_request_error',
    'mcp_server_not_found',
    `No MCP server named '${name}' is configured (add it on the Tools page or in mcp.json)`,
    param,
  )
}

export function toolNotFound(server: string, tool: string, known: string[]): ApiError {
  const list = known.length ? `; it has ${known.map((t) => `'${t}'`).join(', ')}` : '; it has no tools'
  return new ApiError(404, 'invalid_request_error', 'mcp_tool_not_found', `The MCP server '${server}' has no tool '${tool}'${list}`, 'tool')
}

export function serverDisabled(name: string, param = 'server'): ApiError {
  return new ApiError(
    409,
    'invalid_request_error',
    'mcp_server_disabled',
    `The MCP server '${name}' is turned off; turn it on on the Tools page (or remove "disabled" from its entry in mcp.json)`,
    param,
  )
}

export function serverFailed(message: string): ApiError {
  return new ApiError(502, 'server_error', 'mcp_server_failed', message)
}

export function toolTimeout(server: string, tool: string, seconds: number): ApiError {
  return new ApiError(
    504,
    'server_error',
    'mcp_tool_timeout',
    `The tool '${tool}' of MCP server '${server}' did not answer within ${seconds} s (the server's "timeout"), so the call was cancelled`,
  )
}

/** Nobody reads this (the client has gone); 499 keeps it apart in the request log. */
export function callCancelled(): ApiError {
  return new ApiError(499, 'invalid_request_error', 'cancelled', 'the client closed the connection, so the tool call was cancelled')
}

export function configBroken(error: string): ApiError {
  return new ApiError(409, 'invalid_request_error', 'mcp_config_invalid', `The MCP settings file cannot be changed until it is fixed: ${error}`)
}

export function shuttingDown(): ApiError {
  return new ApiError(503, 'server_error', 'server_shutting_down', 'The server is shutting down, so no MCP server is started')
}
