/**
 * Points a data folder's mcp.json at the test MCP server (test/support/mcp-test-server.ts), and
 * starts that server on Streamable HTTP for tests that need a URL.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'

export const MCP_TEST_SERVER = resolve(import.meta.dirname, 'mcp-test-server.ts')

/** One mcp.json entry. Leave out `command` and `url` for the stdio test server. */
export interface McpTestEntry {
  command?: string
  args?: string[]
  env?: Record<string, string>
  cwd?: string
  url?: string
  headers?: Record<string, string>
  disabled?: boolean
  timeout?: number
  [extra: string]: unknown
}

/** The stdio test server as an mcp.json entry (plus any extra fields). */
export function stdioTestEntry(extra: McpTestEntry = {}): McpTestEntry {
  return { command: process.execPath, args: ['--import', 'tsx', MCP_TEST_SERVER], ...extra }
}

/**
 * Writes `<dataDir>/mcp.json`. Entries without `command` or `url` become the stdio test server;
 * the others are written as given. Returns the file's path.
 */
export function writeMcpConfig(dataDir: string, servers: Record<string, McpTestEntry>): string {
  const mcpServers = Object.fromEntries(
    Object.entries(servers).map(([name, entry]) => [name, entry.command === undefined && entry.url === undefined ? stdioTestEntry(entry) : entry]),
  )
  const file = join(dataDir, 'mcp.json')
  writeFileSync(file, JSON.stringify({ mcpServers }, null, 2) + '\n')
  return file
}

export interface HttpMcpTestServer {
  /** http://127.0.0.1:PORT/mcp */
  url: string
  process: ChildProcess
  stop(): Promise<void>
}

/** Starts the test server on Streamable HTTP (a free port on 127.0.0.1); stop it in afterAll. */
export async function startHttpMcpTestServer(): Promise<HttpMcpTestServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', MCP_TEST_SERVER, '--http', '0'], { stdio: ['ignore', 'pipe', 'pipe'] })
  child.stderr!.resume()
  const url = await new Promise<string>((resolvePromise, reject) => {
    const lines = createInterface({ input: child.stdout! })
    const timer = setTimeout(() => reject(new Error('the HTTP MCP test server did not start within 30 s')), 30_000)
    lines.on('line', (line) => {
      const match = /^listening (http:\/\/\S+)$/.exec(line)
      if (!match) return
      clearTimeout(timer)
      resolvePromise(match[1]!)
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`the HTTP MCP test server exited (${code}) before listening`))
    })
  })
  return {
    url,
    process: child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise<void>((done) => child.once('exit', () => done()))
      child.kill()
      await exited
    },
  }
}
