/**
 * A small MCP server for tests, with tools that succeed, fail, crash and hang on purpose.
 * Runs on stdio by default:        node --import tsx test/support/mcp-test-server.ts
 * or on Streamable HTTP (stateless) node --import tsx test/support/mcp-test-server.ts --http 0
 * which prints one line `listening http://127.0.0.1:PORT/mcp` on stdout.
 * It writes "mcp-test-server ready" to stderr at start, so log tails have a line to show.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { z } from 'zod'

/** What `crash` does: on stdio the process exits; over HTTP the call's connection is cut. */
type Crash = () => void

function buildServer(crash: Crash): McpServer {
  const server = new McpServer({ name: 'mcp-test-server', version: '1.0.0' })
  const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] })
  server.registerTool('add', { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } }, ({ a, b }) => text(String(a + b)))
  server.registerTool('secret_word', { title: 'Secret word', description: 'Tells the secret word.', annotations: { readOnlyHint: true } }, () =>
    text('The secret word is PERSIMMON.'),
  )
  server.registerTool('echo', { description: 'Answers with the text it was given.', inputSchema: { text: z.string() } }, ({ text: value }) => text(value))
  server.registerTool('fail', { description: 'Always fails.' }, () => ({ ...text('the tool failed on purpose'), isError: true }))
  server.registerTool('crash', { description: 'Takes the server down mid-call.' }, () => {
    crash()
    return new Promise<never>(() => {})
  })
  // Says on stderr when the client cancels it, so a test can see the cancellation arrive.
  server.registerTool('hang', { description: 'Never answers.' }, (extra) => {
    extra.signal.addEventListener('abort', () => process.stderr.write('hang was cancelled\n'))
    return new Promise<never>(() => {})
  })
  return server
}

async function serveStdio(): Promise<void> {
  const server = buildServer(() => {
    process.stderr.write('mcp-test-server crashing on purpose\n')
    process.exit(3)
  })
  await server.connect(new StdioServerTransport())
}

/** Stateless Streamable HTTP: a fresh server and transport per request, so `crash` can cut just that request. */
async function serveHttp(port: number): Promise<void> {
  const http = createServer((req, res) => void answer(req, res).catch(() => res.destroy()))
  http.listen(port, '127.0.0.1')
  await new Promise<void>((resolve) => http.once('listening', resolve))
  const { port: bound } = http.address() as AddressInfo
  process.stdout.write(`listening http://127.0.0.1:${bound}/mcp\n`)
}

/** One request: only POST /mcp, each with a server and transport of its own. */
async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.url !== '/mcp') {
    res.writeHead(404).end()
    return
  }
  if (req.method !== 'POST') {
    res.writeHead(405, { Allow: 'POST' }).end()
    return
  }
  const server = buildServer(() => cut(res))
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
  res.on('close', () => {
    void transport.close()
    void server.close()
  })
  await server.connect(transport)
  await transport.handleRequest(req, res)
}

function cut(res: ServerResponse): void {
  process.stderr.write('mcp-test-server cutting the connection on purpose\n')
  res.socket?.destroy()
}

process.stderr.write('mcp-test-server ready\n')
const httpFlag = process.argv.indexOf('--http')
if (httpFlag === -1) await serveStdio()
else await serveHttp(Number(process.argv[httpFlag + 1] ?? 0))
