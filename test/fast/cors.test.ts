/**
 * CORS: no cross-origin access by default; origins from the settings (exact or with `*`) get
 * answers they can read and correct preflights; other origins get no CORS headers, a 403 on their
 * preflights and on writes that skip the preflight.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { originMatcher } from '../../main/server/http/cors.ts'
import { resolveSettings } from '../../main/server/settings.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'

let server: InProcessServer
let plain: InProcessServer

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-cors-'))
  server = await startInProcessServer({
    modelsDir,
    env: { HEARTH_CORS_ORIGINS: 'chrome-extension://*, http://localhost:*, https://app.example.com' },
  })
  plain = await startInProcessServer({ modelsDir })
})

afterAll(async () => {
  await Promise.all([server?.stop(), plain?.stop()])
})

function preflight(target: InProcessServer, origin: string, method = 'POST', headers = 'authorization, content-type, x-stainless-os') {
  return fetch(`${target.url}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  })
}

describe('allowed origins', () => {
  it('answers preflights for listed origins and patterns, echoing the origin and the asked headers', async () => {
    for (const origin of ['chrome-extension://abcdefghijklmnop', 'http://localhost:3000', 'https://app.example.com', 'HTTP://LOCALHOST:5173']) {
      const res = await preflight(server, origin)
      expect(res.status, origin).toBe(204)
      expect(res.headers.get('access-control-allow-origin')).toBe(origin)
      expect(res.headers.get('access-control-allow-methods')).toContain('POST')
      expect(res.headers.get('access-control-allow-headers')).toContain('x-stainless-os')
      expect(res.headers.get('access-control-allow-headers')).toContain('authorization')
      expect(res.headers.get('vary')).toContain('Origin')
    }
  })

  it('lets an allowed page read answers and the headers it needs', async () => {
    const res = await fetch(`${server.url}/v1/models`, { headers: { origin: 'chrome-extension://abc', authorization: `Bearer ${server.apiKey}` } })
    expect(res.status).toBe(200)
    expect(res.headers.get('access-control-allow-origin')).toBe('chrome-extension://abc')
    expect(res.headers.get('access-control-expose-headers')).toContain('x-request-id')
    // A 401 is readable too, so the page can tell the user the key is wrong.
    const unauthorised = await fetch(`${server.url}/v1/models`, { headers: { origin: 'chrome-extension://abc' } })
    expect(unauthorised.status).toBe(401)
    expect(unauthorised.headers.get('access-control-allow-origin')).toBe('chrome-extension://abc')
  })
})

describe('other origins', () => {
  it('refuses their preflights with 403 and the error body, and no CORS headers', async () => {
    for (const origin of [
      'https://evil.example',
      'http://localhost.evil.example:3000',
      'http://localhost:80@evil.example',
      'https://app.example.com.evil.example',
      'null',
    ]) {
      const res = await preflight(server, origin)
      expect(res.status, origin).toBe(403)
      expect(res.headers.get('access-control-allow-origin')).toBeNull()
      expect(await res.json()).toEqual({
        error: { message: expect.stringContaining('not allowed'), type: 'invalid_request_error', param: null, code: 'forbidden_origin' },
      })
    }
  })

  it('serves their reads without CORS headers (the browser hides the answer) and refuses their writes', async () => {
    const read = await fetch(`${server.url}/health`, { headers: { origin: 'https://evil.example' } })
    expect(read.status).toBe(200)
    expect(read.headers.get('access-control-allow-origin')).toBeNull()
    // A "simple" request a page may send without a preflight.
    const write = await fetch(`${server.url}/api/models/x/load`, { method: 'POST', headers: { origin: 'https://evil.example', 'content-type': 'text/plain' } })
    expect(write.status).toBe(403)
    expect((await write.json()).error.code).toBe('forbidden_origin')
  })

  it('has no cross-origin access at all by default, but pages of the server itself work', async () => {
    const res = await preflight(plain, 'chrome-extension://abc')
    expect(res.status).toBe(403)
    expect(res.headers.get('access-control-allow-origin')).toBeNull()
    const own = await fetch(`${plain.url}/api/keys`, {
      method: 'POST',
      headers: { origin: plain.url, authorization: `Bearer ${plain.apiKey}` },
    })
    expect(own.status).toBe(201)
  })
})

describe('origin patterns', () => {
  it('match whole origins, with * standing for one run without / : @ ? #', () => {
    const allowed = originMatcher(['chrome-extension://*', 'http://localhost:*', 'https://*.example.com', 'moz-extension://1234'])
    for (const o of ['chrome-extension://abc', 'http://localhost:1', 'https://a.example.com', 'https://a.b.example.com', 'moz-extension://1234']) {
      expect(allowed(o), o).toBe(true)
    }
    for (const o of [
      'chrome-extension://',
      'http://localhost',
      'http://localhost:1/x',
      'http://localhost:1@evil',
      'https://example.com',
      'https://evil.com/.example.com',
      'moz-extension://12345',
      'https://evil.com#.example.com',
    ]) {
      expect(allowed(o), o).toBe(false)
    }
    expect(originMatcher(['*'])('https://anything.example')).toBe(true)
    expect(originMatcher([])('http://localhost:1')).toBe(false)
  })

  it('come from the settings file or HEARTH_CORS_ORIGINS', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-cors-settings-'))
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ cors_origins: ['chrome-extension://*'], metrics_public: true }))
    const fromFile = resolveSettings(['--data-dir', dataDir], {}, 2).settings
    expect(fromFile.corsOrigins).toEqual(['chrome-extension://*'])
    expect(fromFile.metricsPublic).toBe(true)
    const fromEnv = resolveSettings(['--data-dir', dataDir], { HEARTH_CORS_ORIGINS: 'http://localhost:*, ' }, 2).settings
    expect(fromEnv.corsOrigins).toEqual(['http://localhost:*'])
    expect(resolveSettings(['--data-dir', mkdtempSync(join(tmpdir(), 'hearth-cors-none-'))], {}, 2).settings.corsOrigins).toEqual([])
  })
})
