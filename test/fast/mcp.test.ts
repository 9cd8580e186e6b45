/**
 * /api/mcp against real MCP servers (test/support/mcp-test-server.ts on stdio and on Streamable
 * HTTP), in-process: settings kept in mcp.json and refused by field, lazy starts, results, failures
 * (a crash, a hang, a client that leaves), permissions per key and per address, and the request log.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Request, Response } from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ManagedKey } from '../../main/server/services/keys/key-store.ts'
import { McpHub } from '../../main/server/services/mcp/mcp-hub.ts'
import { mcpPermission } from '../../main/server/services/mcp/mcp-permission.ts'
import type { McpServersListing, McpServerView } from '../../main/server/wire-types.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'
import { startHttpMcpTestServer, stdioTestEntry, writeMcpConfig, type HttpMcpTestServer } from '../support/mcp-config.ts'
import { cannotRun, itIf } from '../support/skips.ts'

const SECRET_ENV = 'env-secret-value-123'
const SECRET_HEADER = 'Bearer header-secret-456'

let web: HttpMcpTestServer
let server: InProcessServer
let dataDir: string

beforeAll(async () => {
  web = await startHttpMcpTestServer()
  dataDir = mkdtempSync(join(tmpdir(), 'hearth-mcp-'))
  writeMcpConfig(dataDir, {
    local: { env: { TEST_TOKEN: SECRET_ENV }, note: 'kept' },
    quick: { timeout: 1 },
    web: { url: web.url, headers: { Authorization: SECRET_HEADER } },
    off: { disabled: true },
  })
  // A field of another program at the top: kept when Hearth rewrites the file.
  const file = join(dataDir, 'mcp.json')
  writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), otherProgram: { keep: true } }))
  server = await startInProcessServer({ dataDir })
})

afterAll(async () => {
  await server?.stop()
  await web?.stop()
})

async function api(method: string, path: string, body?: unknown, options: { key?: string; signal?: AbortSignal; on?: InProcessServer } = {}) {
  const target = options.on ?? server
  const res = await fetch(`${target.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${options.key ?? target.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: options.signal,
  })
  const text = await res.text()
  return { status: res.status, text, body: JSON.parse(text) }
}

const call = (server: string, tool: string, args?: Record<string, unknown>, options?: Parameters<typeof api>[3]) =>
  api('POST', '/api/mcp/call', { server, tool, ...(args ? { arguments: args } : {}) }, options)

async function view(name: string): Promise<McpServerView> {
  const listing = (await api('GET', '/api/mcp/servers')).body as McpServersListing
  return listing.servers.find((s) => s.name === name)!
}

describe('the settings file', () => {
  it('lists the servers with their state, env and header names but never their values', async () => {
    const res = await api('GET', '/api/mcp/servers')
    expect(res.status).toBe(200)
    const listing = res.body as McpServersListing
    expect(listing).toMatchObject({ permission: 'manage', config_file: join(dataDir, 'mcp.json'), config_error: null })
    const byName = Object.fromEntries(listing.servers.map((s) => [s.name, s]))
    expect(byName.local).toMatchObject({
      transport: 'stdio',
      command: process.execPath,
      env_names: ['TEST_TOKEN'],
      enabled: true,
      state: 'stopped',
      timeout_seconds: 60,
      tools: [],
    })
    expect(byName.web).toMatchObject({ transport: 'http', url: web.url, header_names: ['Authorization'], state: 'stopped' })
    expect(byName.off).toMatchObject({ enabled: false, state: 'off' })
    expect(byName.quick!.timeout_seconds).toBe(1)
    expect(res.text).not.toContain(SECRET_ENV)
    expect(res.text).not.toContain(SECRET_HEADER)
  })

  it('refuses bad servers by field, and adds, changes and removes good ones keeping what it does not know', async () => {
    const bad: Array<[unknown, string, number]> = [
      [{ command: 'x' }, 'name', 400],
      [{ name: 'has space', command: 'x' }, 'name', 400],
      [{ name: 'x'.repeat(65), command: 'x' }, 'name', 400],
      [{ name: 'both', command: 'x', url: 'http://127.0.0.1:1/mcp' }, 'url', 400],
      [{ name: 'neither' }, 'command', 400],
      [{ name: 'ftp', url: 'ftp://example.com/mcp' }, 'url', 400],
      [{ name: 'badenv', command: 'x', env: { 'A-B': '1' } }, 'env', 400],
      [{ name: 'badenv2', command: 'x', env: { A: 1 } }, 'env', 400],
      [{ name: 'badargs', command: 'x', args: 'one two' }, 'args', 400],
      [{ name: 'badheader', url: 'http://127.0.0.1:1/mcp', headers: { X: 'a\r\nInjected: 1' } }, 'headers', 400],
      [{ name: 'argsurl', url: 'http://127.0.0.1:1/mcp', args: ['a'] }, 'args', 400],
      [{ name: 'badtimeout', command: 'x', timeout: 0 }, 'timeout', 400],
      [{ name: 'badtimeout2', command: 'x', timeout: 'soon' }, 'timeout', 400],
      [{ name: 'unknown', command: 'x', colour: 'red' }, 'colour', 400],
      [{ name: 'local', command: 'x' }, 'name', 409],
    ]
    for (const [body, param, status] of bad) {
      const res = await api('POST', '/api/mcp/servers', body)
      expect({ body, status: res.status, param: res.body.error?.param }).toEqual({ body, status, param })
      expect(res.body.error.message).toContain(param)
    }
    expect((await api('POST', '/api/mcp/servers', 'not json')).status).toBe(400)

    const added = await api('POST', '/api/mcp/servers', { name: 'extra', ...stdioTestEntry(), env: { K: 'v' }, timeout: 5 })
    expect(added.status).toBe(201)
    expect(added.body).toMatchObject({ name: 'extra', transport: 'stdio', env_names: ['K'], state: 'stopped', timeout_seconds: 5 })

    expect((await api('PATCH', '/api/mcp/servers/extra', { name: 'renamed' })).body.error.param).toBe('name')
    expect((await api('PATCH', '/api/mcp/servers/extra', { url: 'http://127.0.0.1:1/mcp' })).body.error.param).toBe('url')
    expect((await api('PATCH', '/api/mcp/servers/nope', { disabled: true })).status).toBe(404)
    const off = await api('PATCH', '/api/mcp/servers/extra', { disabled: true })
    expect(off.body).toMatchObject({ enabled: false, state: 'off' })
    const http = await api('PATCH', '/api/mcp/servers/extra', { command: null, args: null, env: null, url: 'http://127.0.0.1:1/mcp', disabled: null })
    expect(http.body).toMatchObject({ transport: 'http', url: 'http://127.0.0.1:1/mcp', enabled: true })

    const file = JSON.parse(readFileSync(join(dataDir, 'mcp.json'), 'utf8'))
    expect(file.otherProgram).toEqual({ keep: true })
    expect(file.mcpServers.local).toMatchObject({ note: 'kept', env: { TEST_TOKEN: SECRET_ENV } })
    expect(file.mcpServers.extra).toEqual({ url: 'http://127.0.0.1:1/mcp', timeout: 5 })

    expect((await api('DELETE', '/api/mcp/servers/extra')).body).toEqual({ name: 'extra', deleted: true })
    expect((await api('DELETE', '/api/mcp/servers/extra')).status).toBe(404)
    expect(await view('extra')).toBeUndefined()
    // Names that are also properties of every object are just names.
    expect((await api('PATCH', '/api/mcp/servers/constructor', { disabled: true })).status).toBe(404)
    expect((await api('DELETE', '/api/mcp/servers/__proto__')).status).toBe(404)
    expect((await api('POST', '/api/mcp/servers', { name: 'constructor', url: 'http://127.0.0.1:1/mcp' })).status).toBe(201)
    expect((await api('DELETE', '/api/mcp/servers/constructor')).status).toBe(200)
  })
})

describe('running tools', () => {
  it('starts a stdio server on demand and lists its tools', async () => {
    const started = await api('POST', '/api/mcp/servers/local/start')
    expect(started.status).toBe(200)
    expect(started.body.state).toBe('ready')
    const tools = started.body.tools as McpServerView['tools']
    expect(tools.map((t) => t.name).sort()).toEqual(['add', 'crash', 'echo', 'fail', 'hang', 'secret_word'])
    expect(tools.find((t) => t.name === 'secret_word')).toMatchObject({ read_only: true, title: 'Secret word' })
    expect(tools.find((t) => t.name === 'add')!.input_schema).toMatchObject({ type: 'object', properties: { a: { type: 'number' } } })
    expect(started.body.log_tail).toContain('mcp-test-server ready')
  })

  it('calls tools over stdio and HTTP, starting the server when needed', async () => {
    for (const name of ['local', 'web']) {
      const res = await call(name, 'add', { a: 2, b: 3 })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ server: name, tool: 'add', text: '5', is_error: false, content: [{ type: 'text', text: '5' }] })
      expect(res.body.duration_ms).toBeGreaterThanOrEqual(0)
      expect((await call(name, 'secret_word')).body.text).toBe('The secret word is PERSIMMON.')
    }
    expect((await view('web')).state).toBe('ready')
  })

  it('hands back a failed tool as an error result', async () => {
    const res = await call('local', 'fail', {})
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ is_error: true, text: 'the tool failed on purpose' })
  })

  it('refuses unknown servers and tools, turned-off servers and bad bodies by name', async () => {
    expect((await call('nope', 'add')).body.error).toMatchObject({ code: 'mcp_server_not_found', param: 'server' })
    expect((await call('local', 'nope')).body.error).toMatchObject({ code: 'mcp_tool_not_found', param: 'tool' })
    const off = await call('off', 'add')
    expect(off.status).toBe(409)
    expect(off.body.error.code).toBe('mcp_server_disabled')
    expect((await api('POST', '/api/mcp/servers/off/start')).status).toBe(409)
    expect((await api('POST', '/api/mcp/call', { server: 'local' })).body.error.param).toBe('tool')
    expect((await api('POST', '/api/mcp/call', { server: 'local', tool: 'add', arguments: [1] })).body.error.param).toBe('arguments')
  })

  it('answers 502 when a stdio server crashes mid-call, and starts it again for the next call', async () => {
    const res = await call('local', 'crash')
    expect(res.status).toBe(502)
    expect(res.body.error.code).toBe('mcp_server_failed')
    expect(res.body.error.message).toContain("stopped during the call to 'crash'")
    expect(res.body.error.message).toContain('crashing on purpose')
    const failed = await view('local')
    expect(failed).toMatchObject({ state: 'failed' })
    expect(failed.error).toContain('exited')
    expect(failed.log_tail.at(-1)).toBe('mcp-test-server crashing on purpose')
    expect((await call('local', 'add', { a: 2, b: 3 })).body.text).toBe('5')
    expect((await view('local')).state).toBe('ready')
  })

  it('answers 502 when an HTTP server cuts the connection mid-call, and reconnects for the next call', async () => {
    const res = await call('web', 'crash')
    expect(res.status).toBe(502)
    expect(res.body.error.code).toBe('mcp_server_failed')
    expect(res.body.error.message).toContain("stopped during the call to 'crash'")
    expect((await view('web')).state).toBe('failed')
    expect((await call('web', 'add', { a: 2, b: 3 })).body.text).toBe('5')
  })

  it("answers 504 after the server's timeout and cancels the call", async () => {
    const started = Date.now()
    const res = await call('quick', 'hang')
    expect(res.status).toBe(504)
    expect(res.body.error.code).toBe('mcp_tool_timeout')
    expect(res.body.error.message).toContain('1 s')
    expect(Date.now() - started).toBeLessThan(10_000)
    await until(async () => (await view('quick')).log_tail.includes('hang was cancelled'))
    expect((await call('quick', 'echo', { text: 'still here' })).body.text).toBe('still here')
  })

  it('cancels the call when the client goes away', async () => {
    const controller = new AbortController()
    const pending = call('local', 'hang', {}, { signal: controller.signal })
    await until(async () => (await view('local')).state === 'ready')
    setTimeout(() => controller.abort(), 500)
    await expect(pending).rejects.toThrow()
    await until(async () => (await view('local')).log_tail.includes('hang was cancelled'))
    await until(
      async () =>
        /POST \/api\/mcp\/call 200 \(client closed\).* tool=local\/hang/.test(server.output()) || /tool=local\/hang code=cancelled/.test(server.output()),
    )
  })

  it('logs the tool a request ran, in the log line and the request history', async () => {
    await call('local', 'echo', { text: 'logged' })
    expect(server.output()).toMatch(/POST \/api\/mcp\/call 200 \d+ms tool=local\/echo id=/)
    const { requests } = (await api('GET', '/api/requests')).body as { requests: Array<{ path: string; tool?: string }> }
    expect(requests.filter((r) => r.path === '/api/mcp/call').map((r) => r.tool)).toContain('local/echo')
  })

  it('stops a server on request and when the Hearth server closes', async () => {
    const stopped = await api('POST', '/api/mcp/servers/local/stop')
    expect(stopped.body).toMatchObject({ state: 'stopped', tools: [] })
    const hub = await McpHub.open(dataDir, () => undefined)
    const tools = await hub.tools('local')
    expect(tools.map((t) => t.name)).toContain('echo')
    await hub.close()
    expect(hub.status('local')!.state).toBe('stopped')
    await expect(hub.call('local', 'add', { a: 1, b: 1 })).rejects.toMatchObject({ status: 503 })
  })
})

describe('permissions', () => {
  async function makeKey(mcp?: string): Promise<string> {
    const res = await api('POST', '/api/keys', { label: `mcp ${mcp}`, ...(mcp ? { mcp } : {}) })
    expect(res.status).toBe(201)
    return res.body.key
  }

  it('keeps a key to its MCP permission: none by default, then use, then manage', async () => {
    const none = await makeKey()
    const use = await makeKey('use')
    const manage = await makeKey('manage')
    const listed = (await api('GET', '/api/keys')).body.keys as Array<{ label: string; mcp: string }>
    expect(listed.map((k) => k.mcp)).toEqual(expect.arrayContaining(['none', 'use', 'manage']))
    expect((await api('POST', '/api/keys', { mcp: 'admin' })).body.error.param).toBe('mcp')

    const seen = await api('GET', '/api/mcp/servers', undefined, { key: none })
    expect(seen.body).toMatchObject({ permission: 'none', servers: [] })
    const refused = await call('local', 'add', { a: 1, b: 2 }, { key: none })
    expect(refused.status).toBe(403)
    expect(refused.body.error).toMatchObject({ type: 'permission_error', code: 'mcp_not_allowed' })
    expect(refused.body.error.message).toContain('"use"')
    expect(refused.body.error.message).toContain('Server page')

    expect((await call('local', 'add', { a: 1, b: 2 }, { key: use })).body.text).toBe('3')
    expect((await api('GET', '/api/mcp/servers', undefined, { key: use })).body.permission).toBe('use')
    const cannotAdd = await api('POST', '/api/mcp/servers', { name: 'byuse', command: 'x' }, { key: use })
    expect(cannotAdd.status).toBe(403)
    expect(cannotAdd.body.error.message).toContain('"manage"')
    expect((await api('PATCH', '/api/mcp/servers/local', { timeout: 30 }, { key: use })).status).toBe(403)
    expect((await api('DELETE', '/api/mcp/servers/local', undefined, { key: use })).status).toBe(403)

    expect((await api('POST', '/api/mcp/servers', { name: 'bymanage', url: 'http://127.0.0.1:1/mcp' }, { key: manage })).status).toBe(201)
    expect((await api('DELETE', '/api/mcp/servers/bymanage', undefined, { key: manage })).status).toBe(200)

    // Granted later, it applies at once.
    const id = listed.find((k) => k.label === 'mcp undefined') as unknown as { id: string }
    expect((await api('PATCH', `/api/keys/${id.id}`, { mcp: 'use' })).body.mcp).toBe('use')
    expect((await call('local', 'add', { a: 1, b: 2 }, { key: none })).status).toBe(200)
  })

  it("counts the server's own key as manage only from loopback; a managed key's permission from anywhere", () => {
    const fake = (remoteAddress: string, managed?: Partial<ManagedKey>) =>
      mcpPermission({ socket: { remoteAddress } } as unknown as Request, { locals: { apiKey: { managed } } } as unknown as Response)
    expect(fake('127.0.0.1')).toBe('manage')
    expect(fake('127.3.2.1')).toBe('manage')
    expect(fake('::1')).toBe('manage')
    expect(fake('::ffff:127.0.0.1')).toBe('manage')
    expect(fake('192.168.1.5')).toBe('none')
    expect(fake('::ffff:192.168.1.5')).toBe('none')
    expect(fake('fe80::1')).toBe('none')
    expect(fake('192.168.1.5', { mcp: 'use' })).toBe('use')
    expect(fake('127.0.0.1', { mcp: 'none' })).toBe('none')
    // --no-auth: no key at all.
    expect(mcpPermission({ socket: { remoteAddress: '10.0.0.2' } } as unknown as Request, { locals: {} } as unknown as Response)).toBe('none')
  })

  const lanAddress = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && !a.internal && a.family === 'IPv4')?.address
  // Only a request from another address shows the key refused, and loopback is all this machine has.
  if (!lanAddress) cannotRun('the MCP LAN-key test: this machine has no IPv4 address but loopback, so no request can come from another address')
  itIf(lanAddress, 'needs an IPv4 address besides loopback, for a request from another address')(
    "refuses the server's own key from another address over the network",
    async () => {
      const lan = await startInProcessServer({ dataDir, args: ['--host', '0.0.0.0'] })
      try {
        const port = new URL(lan.url).port
        const remote = { ...lan, url: `http://${lanAddress}:${port}` }
        const listing = await api('GET', '/api/mcp/servers', undefined, { on: remote })
        expect(listing.body).toMatchObject({ permission: 'none', servers: [] })
        const refused = await api('POST', '/api/mcp/call', { server: 'local', tool: 'add', arguments: { a: 1, b: 1 } }, { on: remote })
        expect(refused.status).toBe(403)
        expect(refused.body.error.message).toContain('only from this computer')
        const local = { ...lan, url: `http://127.0.0.1:${port}` }
        expect((await api('GET', '/api/mcp/servers', undefined, { on: local })).body.permission).toBe('manage')
      } finally {
        await lan.stop()
      }
    },
  )
})

describe('a broken settings file', () => {
  it('says what is wrong, lists no servers, refuses changes, and the server still serves', async () => {
    for (const [content, mentions] of [
      ['{ "mcpServers": ', 'not valid JSON'],
      [JSON.stringify({ mcpServers: { bad: { url: 'ftp://x' } } }), 'mcpServers.bad.url'],
      [JSON.stringify({ mcpServers: { 'bad name': { command: 'x' } } }), 'bad name'],
    ] as const) {
      const brokenDir = mkdtempSync(join(tmpdir(), 'hearth-mcp-broken-'))
      writeFileSync(join(brokenDir, 'mcp.json'), content)
      const broken = await startInProcessServer({ dataDir: brokenDir })
      try {
        const listing = await api('GET', '/api/mcp/servers', undefined, { on: broken })
        expect(listing.status).toBe(200)
        expect(listing.body.servers).toEqual([])
        expect(listing.body.config_error).toContain(join(brokenDir, 'mcp.json'))
        expect(listing.body.config_error).toContain(mentions)
        const add = await api('POST', '/api/mcp/servers', { name: 'x', command: 'x' }, { on: broken })
        expect(add.status).toBe(409)
        expect(add.body.error.code).toBe('mcp_config_invalid')
        expect((await api('GET', '/v1/models', undefined, { on: broken })).status).toBe(200)
        // Fixed by hand: picked up without a restart.
        writeMcpConfig(brokenDir, { fixed: {} })
        expect((await api('GET', '/api/mcp/servers', undefined, { on: broken })).body).toMatchObject({ config_error: null, servers: [{ name: 'fixed' }] })
      } finally {
        await broken.stop()
      }
    }
  })

  it('explains a server that cannot start in its state, not with a 500', async () => {
    const res = await api('POST', '/api/mcp/servers', { name: 'missing', command: 'hearth-no-such-command-xyz' })
    expect(res.status).toBe(201)
    const started = await api('POST', '/api/mcp/servers/missing/start')
    expect(started.status).toBe(200)
    expect(started.body.state).toBe('failed')
    expect(started.body.error).toContain("'hearth-no-such-command-xyz' was not found")
    const called = await call('missing', 'add')
    expect(called.status).toBe(502)
    expect(called.body.error.code).toBe('mcp_server_failed')
    await api('POST', '/api/mcp/servers', { name: 'unreachable', url: 'http://127.0.0.1:9/mcp' })
    const unreachable = await api('POST', '/api/mcp/servers/unreachable/start')
    expect(unreachable.body.state).toBe('failed')
    expect(unreachable.body.error).toContain('could not be reached')
  })
})

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 50))
  }
}
