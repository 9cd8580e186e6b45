/**
 * What a request may do with MCP servers. Adding a server means running a program of the
 * requester's choosing on this computer, so the server's own key (and --no-auth) manage servers
 * only from this computer; from elsewhere it takes a key that was granted the permission.
 */
import type { Request, Response } from 'express'
import { isKeyless, requestKey } from '../keys/request-key.ts'
import { ApiError } from '../api-error.ts'
import type { McpPermission } from '../keys/key-store.ts'

export type { McpPermission } from '../keys/key-store.ts'

export function mcpPermission(req: Request, res: Response): McpPermission {
  // Let in without a key (the Ollama port), a request is any program's, and MCP tools run as the person.
  if (isKeyless(res)) return 'none'
  const managed = requestKey(res)?.managed
  if (managed) return managed.mcp
  return isLoopbackAddress(req.socket.remoteAddress) ? 'manage' : 'none'
}

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false
  return address === '::1' || /^127\./.test(address) || /^::ffff:127\./i.test(address)
}

const RANK: Record<McpPermission, number> = { none: 0, use: 1, manage: 2 }

/** Throws the 403 unless the request has at least `needed`. */
export function requireMcpPermission(req: Request, res: Response, needed: 'use' | 'manage'): void {
  const has = mcpPermission(req, res)
  if (RANK[has] >= RANK[needed]) return
  const what = needed === 'use' ? 'start MCP servers and run their tools' : 'add, change or remove MCP servers'
  const grant = isKeyless(res)
    ? `A request without a key of Hearth's (the Ollama port lets those in) runs no MCP tools: send the server's key, or a key granted "${needed}" on the Server page -> API keys`
    : requestKey(res)?.managed
      ? `This key's MCP permission is "${has}"; grant it "${needed}" on the Server page -> API keys (or use the server's own key on this computer)`
      : `The server's own key counts only from this computer; from another computer use a key granted "${needed}" on the Server page -> API keys`
  throw new ApiError(403, 'permission_error', 'mcp_not_allowed', `This request may not ${what}: it needs the MCP permission "${needed}". ${grant}`)
}
