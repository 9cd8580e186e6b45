/**
 * `<dataDir>/mcp.json`, in the shape LM Studio, Claude Desktop and Cursor use
 * (`{"mcpServers": {"name": {command, args, env} | {url, headers}}}`), plus Hearth's `disabled`,
 * `cwd` and `timeout`. The file is the user's: what Hearth does not know (other fields, other
 * programs' settings) is kept as it was when the file is rewritten.
 */
import { mkdir, readFile, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { z } from 'zod'
import { writeFileAtomically } from '../atomic-write.ts'

export const MCP_CONFIG_FILE = 'mcp.json'
export const DEFAULT_TIMEOUT_SECONDS = 60
export const MAX_TIMEOUT_SECONDS = 3600
export const SERVER_NAME = /^[A-Za-z0-9_-]{1,64}$/
export const SERVER_NAME_RULE = '1 to 64 letters, digits, "_" or "-"'

/** One server, as the hub uses it. */
export interface McpServerConfig {
  name: string
  transport: 'stdio' | 'http'
  command?: string
  args: string[]
  env: Record<string, string>
  cwd?: string
  url?: string
  headers: Record<string, string>
  enabled: boolean
  timeoutSeconds: number
}

/** The fields of an entry Hearth reads; an entry may hold others, which are kept. */
export const ENTRY_FIELDS = ['command', 'args', 'env', 'cwd', 'url', 'headers', 'disabled', 'timeout'] as const

const noControl = (s: string) => !/[\0\r\n]/.test(s)
const entrySchema = z.looseObject({
  command: z.string('must be a string').min(1, 'must not be empty').max(4096, 'is too long').optional(),
  args: z
    .array(z.string('must be a list of strings').max(32_768, 'holds an argument that is too long'), 'must be a list of strings')
    .max(1000, 'has too many arguments')
    .optional(),
  env: z
    .record(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'has a variable name that is not letters, digits and "_"'),
      z
        .string('must map names to strings')
        .max(32_768, 'has a value that is too long')
        .refine((s) => !s.includes('\0'), 'has a value with a NUL character'),
      'must be an object of NAME: "value"',
    )
    .optional(),
  cwd: z.string('must be a string').min(1, 'must not be empty').max(4096, 'is too long').optional(),
  url: z.string('must be a string').refine(isHttpUrl, 'must be an http:// or https:// URL').optional(),
  headers: z
    .record(
      z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/, 'has a header name that is not a valid HTTP header name'),
      z.string('must map names to strings').max(16_384, 'has a value that is too long').refine(noControl, 'has a value with a line break'),
      'must be an object of "Name": "value"',
    )
    .optional(),
  disabled: z.boolean('must be true or false').optional(),
  timeout: z
    .number('must be a number of seconds')
    .positive('must be more than 0')
    .max(MAX_TIMEOUT_SECONDS, `must be at most ${MAX_TIMEOUT_SECONDS} seconds`)
    .optional(),
})

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== ''
  } catch {
    return false
  }
}

/** What is wrong with an entry, by field; undefined when it is a server Hearth can run. */
export function entryProblem(entry: unknown): { field: string; message: string } | undefined {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return { field: '', message: 'must be an object with "command" or "url"' }
  const parsed = entrySchema.safeParse(entry)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    const field = issue.path.map(String).join('.')
    const top = String(issue.path[0] ?? '')
    // A bad key of env/headers is reported at the map, not at the key (the key may be a secret's name, but not its value).
    return { field: top === 'env' || top === 'headers' ? top : field, message: issue.message }
  }
  const e = parsed.data
  if (e.command !== undefined && e.url !== undefined)
    return { field: 'url', message: 'cannot be given with "command": a server runs a command (stdio) or is reached at a URL (http), not both' }
  if (e.command === undefined && e.url === undefined)
    return { field: 'command', message: 'is missing: give "command" (a program to run) or "url" (a Streamable HTTP server)' }
  if (e.url !== undefined) {
    for (const field of ['args', 'env', 'cwd'] as const) {
      if (e[field] !== undefined) return { field, message: 'is for servers started with "command", not for a "url"' }
    }
  }
  if (e.command !== undefined && e.headers !== undefined) return { field: 'headers', message: 'is for servers reached at a "url", not for a "command"' }
  return undefined
}

/** A valid entry as the hub uses it (call entryProblem first). */
export function toServerConfig(name: string, entry: Record<string, unknown>): McpServerConfig {
  const e = entrySchema.parse(entry)
  return {
    name,
    transport: e.url !== undefined ? 'http' : 'stdio',
    ...(e.command !== undefined ? { command: e.command } : {}),
    args: e.args ?? [],
    env: e.env ?? {},
    ...(e.cwd !== undefined ? { cwd: e.cwd } : {}),
    ...(e.url !== undefined ? { url: e.url } : {}),
    headers: e.headers ?? {},
    enabled: e.disabled !== true,
    timeoutSeconds: e.timeout ?? DEFAULT_TIMEOUT_SECONDS,
  }
}

/** The file as read: its whole JSON (to write back), the servers in it, or what is wrong with it. */
export interface McpConfigState {
  path: string
  raw: Record<string, unknown>
  servers: Map<string, McpServerConfig>
  error: string | null
  /** Changes when the file does (modified time and size), so edits by hand are picked up. */
  stamp: string
}

export function mcpConfigPath(dataDir: string): string {
  return join(dataDir, MCP_CONFIG_FILE)
}

/** The file's stamp now; '' when there is none. */
export async function configStamp(path: string): Promise<string> {
  try {
    const s = await stat(path)
    return `${s.mtimeMs}:${s.size}`
  } catch {
    return ''
  }
}

/** Reads the file; a missing file is no servers, a broken one no servers and an error naming the field. */
export async function readMcpConfig(path: string): Promise<McpConfigState> {
  const stamp = await configStamp(path)
  const broken = (error: string): McpConfigState => ({ path, raw: {}, servers: new Map(), error, stamp })
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { path, raw: {}, servers: new Map(), error: null, stamp: '' }
    return broken(`${path} cannot be read: ${(e as Error).message}`)
  }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (e) {
    return broken(`${path} is not valid JSON: ${(e as Error).message}`)
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return broken(`${path} must hold a JSON object with "mcpServers"`)
  const root = raw as Record<string, unknown>
  const entries = root.mcpServers ?? {}
  if (entries === null || typeof entries !== 'object' || Array.isArray(entries)) return broken(`${path}: "mcpServers" must be an object of servers by name`)
  const servers = new Map<string, McpServerConfig>()
  for (const [name, entry] of Object.entries(entries as Record<string, unknown>)) {
    if (!SERVER_NAME.test(name)) return broken(`${path}: the server name ${JSON.stringify(name)} must be ${SERVER_NAME_RULE}`)
    const problem = entryProblem(entry)
    if (problem) return broken(`${path}: "mcpServers.${name}${problem.field ? `.${problem.field}` : ''}" ${problem.message}`)
    servers.set(name, toServerConfig(name, entry as Record<string, unknown>))
  }
  return { path, raw: root, servers, error: null, stamp }
}

/**
 * Writes the file whole (to a temporary file renamed over it, so never half a file), readable by
 * its owner only: env and headers hold secrets. Returns the new stamp.
 */
export async function writeMcpConfig(path: string, raw: Record<string, unknown>): Promise<string> {
  await mkdir(dirname(path), { recursive: true })
  await writeFileAtomically(path, `${JSON.stringify(raw, null, 2)}\n`, { mode: 0o600 })
  return configStamp(path)
}
