/**
 * MCP servers as /api/mcp describes them, the "always allow" answers kept in localStorage, and the
 * add-server form's text fields as the API's body.
 */

import type { McpPermissionName, McpServersListing, McpServerView, McpToolView } from '../../../../main/server/wire-types.ts'

export type { McpServerView, McpToolView }
export type McpPermission = McpPermissionName
export type McpServersBody = McpServersListing

/** The person's answer to a tool call waiting for approval. */
export type Approval = 'once' | 'always' | 'deny'

const ALWAYS_KEY = 'hearth.tools.alwaysAllow'

/** The tools the person said to always allow, per server and tool, kept across reloads. */
export class ApprovalMemory {
  constructor(private readonly storage: Storage = localStorage) {}

  private read(): string[] {
    try {
      const value: unknown = JSON.parse(this.storage.getItem(ALWAYS_KEY) ?? '[]')
      return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []
    } catch {
      return []
    }
  }

  allowed(server: string, tool: string): boolean {
    return this.read().includes(`${server}/${tool}`)
  }

  /** The tools of a server that run without asking. */
  toolsOf(server: string): string[] {
    return this.read().flatMap((k) => (k.startsWith(`${server}/`) ? [k.slice(server.length + 1)] : []))
  }

  allow(server: string, tool: string): void {
    const all = new Set(this.read())
    all.add(`${server}/${tool}`)
    this.storage.setItem(ALWAYS_KEY, JSON.stringify([...all]))
  }

  forget(server: string): void {
    this.storage.setItem(ALWAYS_KEY, JSON.stringify(this.read().filter((k) => !k.startsWith(`${server}/`))))
  }
}

/** The add form as typed: args one per line, env `KEY=VALUE` lines, headers `Name: value` lines. */
export interface ServerForm {
  name: string
  transport: 'stdio' | 'http'
  command: string
  args: string
  env: string
  cwd: string
  url: string
  headers: string
  timeout: string
}

export const EMPTY_SERVER_FORM: ServerForm = { name: '', transport: 'stdio', command: '', args: '', env: '', cwd: '', url: '', headers: '', timeout: '' }

const NAME = /^[A-Za-z0-9_-]{1,64}$/

function lines(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
}

/** Lines split at the first `separator` into an object; a line without one is an error. */
function pairs(text: string, separator: string, what: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of lines(text)) {
    const at = line.indexOf(separator)
    if (at <= 0) throw new Error(`${what}: "${line}" is not ${separator === '=' ? 'KEY=VALUE' : 'Name: value'}`)
    out[line.slice(0, at).trim()] = line.slice(at + 1).trim()
  }
  return out
}

/** The POST /api/mcp/servers body, or an Error saying which field is wrong. */
export function serverBody(form: ServerForm): Record<string, unknown> {
  const name = form.name.trim()
  if (!NAME.test(name)) throw new Error('Name: 1 to 64 letters, digits, "-" or "_"')
  const body: Record<string, unknown> = { name }
  if (form.transport === 'stdio') {
    if (!form.command.trim()) throw new Error('Command: the program to start, such as npx or uvx')
    body.command = form.command.trim()
    const args = lines(form.args)
    if (args.length) body.args = args
    const env = pairs(form.env, '=', 'Environment')
    if (Object.keys(env).length) body.env = env
    if (form.cwd.trim()) body.cwd = form.cwd.trim()
  } else {
    const url = form.url.trim()
    if (!/^https?:\/\/\S+$/.test(url)) throw new Error('URL: an http:// or https:// address')
    body.url = url
    const headers = pairs(form.headers, ':', 'Headers')
    if (Object.keys(headers).length) body.headers = headers
  }
  if (form.timeout.trim()) {
    const seconds = Number(form.timeout)
    if (!Number.isFinite(seconds) || seconds <= 0) throw new Error('Timeout: a number of seconds above 0')
    body.timeout = seconds
  }
  return body
}
