/**
 * One running MCP server: the SDK's client over stdio (a child process, its stderr kept in the
 * server's LineRing) or Streamable HTTP. Opening it does the MCP handshake and lists its tools;
 * when it goes away by itself (exit, lost connection) `onLost` says so, once.
 */
import type { Readable } from 'node:stream'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js'
import type { LineRing } from './line-ring.ts'
import type { McpServerConfig } from './mcp-config.ts'

/** A tool as the server lists it, in Hearth's terms. */
export interface McpToolDefinition {
  name: string
  title?: string
  description?: string
  inputSchema: Record<string, unknown>
  readOnly?: boolean
}

/**
 * The handshake and tool list may take longer than a tool call is allowed (`npx -y` fetching a
 * package the first time), so they get at least this long.
 */
export const MIN_START_SECONDS = 60

/** Pages of tools/list read at most: a server that keeps handing out cursors is not followed forever. */
const MAX_TOOL_PAGES = 20

export class McpConnection {
  private closing = false

  private constructor(
    private readonly client: Client,
    readonly tools: McpToolDefinition[],
    readonly pid: number | undefined,
  ) {}

  /** Starts (or reaches) the server, does the handshake within the server's timeout and lists its tools. */
  static async open(config: McpServerConfig, log: LineRing, onLost: (why: string) => void): Promise<McpConnection> {
    const timeout = startSeconds(config) * 1000
    const transport = transportFor(config, log)
    const client = new Client({ name: 'hearth', version: '1.0.0' })
    let connection: McpConnection | undefined
    let lost = false
    client.onerror = (e) => {
      // Over HTTP the connection's errors are all there is to show in the log tail.
      if (config.transport === 'http') log.push(`error: ${describeError(e)}`)
    }
    client.onclose = () => {
      if (lost || connection?.closing) return
      lost = true
      onLost(config.transport === 'stdio' ? 'the server process exited' : 'the connection to the server closed')
    }
    try {
      await client.connect(transport, { timeout })
      const tools = await listAllTools(client, timeout)
      connection = new McpConnection(client, tools, transport instanceof StdioClientTransport ? (transport.pid ?? undefined) : undefined)
      return connection
    } catch (e) {
      lost = true
      await client.close().catch(() => undefined)
      throw e
    }
  }

  async call(tool: string, args: Record<string, unknown>, options: { signal?: AbortSignal; timeoutMs: number }): Promise<CallToolResult> {
    const result = await this.client.callTool({ name: tool, arguments: args }, undefined, {
      signal: options.signal,
      timeout: options.timeoutMs,
      maxTotalTimeout: options.timeoutMs,
    })
    // Servers of protocol 2024-10-07 answer `toolResult`; Hearth shows that as text.
    if (!Array.isArray(result.content) && 'toolResult' in result) {
      return { content: [{ type: 'text', text: JSON.stringify(result.toolResult) }], isError: false }
    }
    return result as CallToolResult
  }

  /** Ends the session (and the child process: SIGTERM, then SIGKILL if it lingers). */
  async close(): Promise<void> {
    if (this.closing) return
    this.closing = true
    await this.client.close().catch(() => undefined)
  }
}

export function startSeconds(config: McpServerConfig): number {
  return Math.max(config.timeoutSeconds, MIN_START_SECONDS)
}

function transportFor(config: McpServerConfig, log: LineRing): Transport {
  if (config.transport === 'http') {
    return new StreamableHTTPClientTransport(new URL(config.url!), { requestInit: { headers: config.headers } })
  }
  // The SDK passes on only a safe part of Hearth's environment (PATH, HOME…), plus the entry's env.
  const transport = new StdioClientTransport({ command: config.command!, args: config.args, env: config.env, cwd: config.cwd, stderr: 'pipe' })
  // With stderr 'pipe' the SDK hands out a PassThrough at once, before the process starts.
  const stderr = transport.stderr as Readable | null
  stderr?.setEncoding('utf8')
  stderr?.on('data', (chunk: string) => log.write(chunk))
  return transport
}

async function listAllTools(client: Client, timeout: number): Promise<McpToolDefinition[]> {
  if (!client.getServerCapabilities()?.tools) return []
  const tools: McpToolDefinition[] = []
  let cursor: string | undefined
  for (let page = 0; page < MAX_TOOL_PAGES; page++) {
    const answer = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout })
    tools.push(...answer.tools.map(toDefinition))
    cursor = answer.nextCursor
    if (cursor === undefined) break
  }
  return tools
}

function toDefinition(tool: Tool): McpToolDefinition {
  return {
    name: tool.name,
    ...((tool.title ?? tool.annotations?.title) ? { title: tool.title ?? tool.annotations?.title } : {}),
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    inputSchema: tool.inputSchema as Record<string, unknown>,
    ...(tool.annotations?.readOnlyHint !== undefined ? { readOnly: tool.annotations.readOnlyHint } : {}),
  }
}

/** An error in a sentence, with the cause fetch hides behind "fetch failed". */
export function describeError(e: unknown): string {
  if (!(e instanceof Error)) return String(e)
  const cause = (e as Error & { cause?: unknown }).cause
  const code = (cause as { code?: string } | undefined)?.code ?? (e as NodeJS.ErrnoException).code
  const detail =
    cause instanceof Error && cause.message && !e.message.includes(cause.message)
      ? ` (${cause.message})`
      : code && !e.message.includes(code)
        ? ` (${code})`
        : ''
  return `${e.message}${detail}`
}
