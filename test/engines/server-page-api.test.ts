/**
 * What the Server page reads from the real server: its address, the live request log (JSON and
 * SSE), key regeneration; plus the web UI served at `/` and the desktop app's CORS rule.
 */
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import express from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ensureUiBuilt } from '../../main/cli/build-ui.ts'
import { allowOrigins } from '../../main/server/http/cors.ts'
import { readSseJson } from '../../renderer/src/lib/services/sse.ts'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

let server: TestServer
let dataDir: string
let key: string

beforeAll(async () => {
  ensureUiBuilt()
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-serverpage-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 256 })
  dataDir = mkdtempSync(join(tmpdir(), 'hearth-serverpage-data-'))
  server = await startTestServer({ modelsDir, dataDir, noKeyFlag: true })
  key = readFileSync(join(dataDir, 'api-key'), 'utf8').trim()
  server.apiKey = key
})

afterAll(async () => {
  await server?.stop()
})

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${key}`, ...headers } })

describe('GET /api/server', () => {
  it('says where the server listens, that it is local only, and where the key is', async () => {
    const res = await get('/api/server')
    expect(res.status).toBe(200)
    const port = Number(new URL(server.url).port)
    expect(await res.json()).toEqual({
      address: `http://127.0.0.1:${port}`,
      host: '127.0.0.1',
      port,
      lan: false,
      lan_addresses: [],
      auth: true,
      key_file: join(dataDir, 'api-key'),
      ollama_url: null,
      ollama_note: null,
      lending: null,
    })
  })

  it('needs the key like every /api route', async () => {
    expect((await fetch(`${server.url}/api/server`)).status).toBe(401)
    expect((await fetch(`${server.url}/api/requests`)).status).toBe(401)
  })
})

describe('the request log', () => {
  it('records API requests with method, path, model, status and duration, and not the UI or itself', async () => {
    await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })
    await postJson(server, '/v1/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'hi' }] })
    await fetch(`${server.url}/`, { headers: { accept: 'text/html' } })
    await get('/api/requests')
    const { requests } = (await (await get('/api/requests')).json()) as { requests: any[] }
    const chats = requests.filter((r) => r.path === '/v1/chat/completions')
    expect(chats).toHaveLength(2)
    expect(chats[0]).toMatchObject({ method: 'POST', model: 'tiny', status: 200, code: null })
    expect(chats[0].duration_ms).toBeGreaterThanOrEqual(0)
    expect(Number.isNaN(Date.parse(chats[0].time))).toBe(false)
    expect(chats[1]).toMatchObject({ status: 404, code: 'model_not_found' })
    expect(requests.some((r) => r.path === '/' || r.path.startsWith('/api/requests'))).toBe(false)
  })

  it('streams the backlog, then each request as it ends', async () => {
    const controller = new AbortController()
    const res = await get('/api/requests/events')
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const events = readSseJson<any>(res.body!, controller.signal)
    const backlog: any[] = []
    // The backlog holds the two chats of the test before.
    while (backlog.filter((r) => r.path === '/v1/chat/completions').length < 2) backlog.push((await events.next()).value)
    await get('/v1/models')
    let next = (await events.next()).value
    while (next.path !== '/v1/models') next = (await events.next()).value
    expect(next).toMatchObject({ method: 'GET', path: '/v1/models', status: 200 })
    controller.abort()
    await events.return(undefined)
  })

  it('logs a client that left mid-answer as 499', async () => {
    const controller = new AbortController()
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'a long story' }], stream: true }),
      signal: controller.signal,
    })
    const reader = res.body!.getReader()
    await reader.read()
    controller.abort()
    await expect.poll(async () => ((await (await get('/api/requests')).json()) as { requests: any[] }).requests.at(-1)?.status, { timeout: 10_000 }).toBe(499)
  })
})

describe('POST /api/keys/regenerate', () => {
  it('replaces the generated key in the file and in memory at once', async () => {
    const old = key
    const res = await fetch(`${server.url}/api/keys/regenerate`, { method: 'POST', headers: { authorization: `Bearer ${old}` } })
    expect(res.status).toBe(200)
    expect(res.headers.get('cache-control')).toBe('no-store')
    const { key: fresh } = (await res.json()) as { key: string }
    expect(fresh).toMatch(/^hearth-/)
    expect(fresh).not.toBe(old)
    const file = join(dataDir, 'api-key')
    expect(readFileSync(file, 'utf8').trim()).toBe(fresh)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect((await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${old}` } })).status).toBe(401)
    expect((await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${fresh}` } })).status).toBe(200)
    key = fresh
    server.apiKey = fresh
  })

  it('refuses when the keys were given on the command line', async () => {
    const other = await startTestServer({ modelsDir: mkdtempSync(join(tmpdir(), 'hearth-serverpage-')) })
    try {
      const res = await postJson(other, '/api/keys/regenerate', {})
      expect(res.status).toBe(409)
      expect(res.json.error).toMatchObject({ code: 'keys_not_generated', type: 'invalid_request_error' })
      const info = await (await fetch(`${other.url}/api/server`, { headers: { authorization: `Bearer ${other.apiKey}` } })).json()
      expect(info.key_file).toBeNull()
    } finally {
      await other.stop()
    }
  })
})

describe('the web UI at /', () => {
  it('serves the page with a strict CSP, and the page again for any other navigation', async () => {
    for (const path of ['/', '/chat', '/some/deep/link']) {
      const res = await fetch(`${server.url}${path}`, { headers: { accept: 'text/html,application/xhtml+xml' } })
      expect(res.status, path).toBe(200)
      expect(res.headers.get('content-type')).toMatch(/^text\/html/)
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'")
      expect(res.headers.get('cache-control')).toBe('no-cache')
      expect(await res.text()).toContain('<div id="app"></div>')
    }
  })

  it('serves hashed assets for good, without a key', async () => {
    const html = await (await fetch(`${server.url}/`, { headers: { accept: 'text/html' } })).text()
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!
    const res = await fetch(`${server.url}${script}`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/javascript/)
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
  })

  it('never answers API paths or scripts with the page', async () => {
    const api = await fetch(`${server.url}/v1/nothing-here`, { headers: { accept: 'text/html', authorization: `Bearer ${key}` } })
    expect(api.status).toBe(404)
    expect(((await api.json()) as any).error.code).toBe('unknown_url')
    const health = await fetch(`${server.url}/health/x`, { headers: { accept: 'text/html' } })
    expect(health.status).toBe(404)
    const json = await fetch(`${server.url}/not-a-page`, { headers: { accept: 'application/json' } })
    expect(json.status).toBe(404)
    expect(((await json.json()) as any).error.code).toBe('unknown_url')
    const post = await fetch(`${server.url}/chat`, { method: 'POST', headers: { accept: 'text/html' } })
    expect(post.status).toBe(404)
  })
})

describe('CORS for the desktop app', () => {
  it('lets only the named origin read answers and send the Authorization header', async () => {
    const app = express()
    app.use(allowOrigins(['app://hearth']))
    app.get('/v1/models', (_req, res) => res.json({ ok: true }))
    const http = app.listen(0, '127.0.0.1')
    await new Promise((r) => http.once('listening', r))
    const base = `http://127.0.0.1:${(http.address() as { port: number }).port}`
    try {
      const preflight = await fetch(`${base}/v1/models`, {
        method: 'OPTIONS',
        headers: { origin: 'app://hearth', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
      })
      expect(preflight.status).toBe(204)
      expect(preflight.headers.get('access-control-allow-origin')).toBe('app://hearth')
      expect(preflight.headers.get('access-control-allow-headers')).toContain('authorization')
      const allowed = await fetch(`${base}/v1/models`, { headers: { origin: 'app://hearth' } })
      expect(allowed.headers.get('access-control-allow-origin')).toBe('app://hearth')
      expect(allowed.headers.get('vary')).toContain('Origin')
      const foreign = await fetch(`${base}/v1/models`, { headers: { origin: 'https://evil.example' } })
      expect(foreign.headers.get('access-control-allow-origin')).toBeNull()
      const foreignPreflight = await fetch(`${base}/v1/models`, { method: 'OPTIONS', headers: { origin: 'https://evil.example' } })
      expect(foreignPreflight.headers.get('access-control-allow-origin')).toBeNull()
    } finally {
      await new Promise((r) => http.close(r))
    }
  })

  it('is off on the headless server', async () => {
    const res = await fetch(`${server.url}/v1/models`, { headers: { origin: 'app://hearth', authorization: `Bearer ${key}` } })
    expect(res.headers.get('access-control-allow-origin')).toBeNull()
  })
})
